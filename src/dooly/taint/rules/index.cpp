// Indexing and slicing. A slice's length is stop - start in labels (negative bounds count from the dim,
// a missing stop is the dim itself); a stop labelled with an engine limit turns the length into the
// quantity the limit bounds (MAX_NUM_TOKS -> NUM_TOKS). Integer indices drop the dim, None inserts 1,
// tensor indices put the index's dims in place of the indexed dim (advanced indexing), boolean masks are
// data-dependent (UNKNOWN, noted).
#include <deque>

#include <fmt/format.h>

#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

ExprPtr slice_length(RuleContext& c, const ExprPtr& dim, const Value& sl) {
  const int64_t n = dim->value();
  auto part = [&](size_t i) -> const Value* {
    const Value& v = sl.items.at(i);
    if (v.is_none()) return nullptr;
    if (!v.is_int()) mismatch("slice bounds must be integers");
    return &v;
  };
  const Value *start = part(0), *stop = part(1), *step = part(2);
  const int64_t k = step ? step->int_value() : 1;
  if (k <= 0) mismatch("slice step must be positive");
  // Python's slice.indices, on values, to know which symbolic form applies.
  auto clamp_bound = [&](const Value* b, int64_t def) -> std::pair<int64_t, ExprPtr> {
    if (!b) return {def, def == 0 ? constant(0) : dim};
    int64_t v = b->int_value();
    ExprPtr e = b->label;
    if (v < 0) {
      v += n;
      e = add(dim, e);
    }
    if (v < 0) return {0, constant(0)};
    if (v >= n) return {n, dim};
    return {v, e};
  };
  auto [s0, es] = clamp_bound(start, 0);
  auto [s1, ee] = clamp_bound(stop, n);
  if (stop && ee != dim && (stop->label->kind() == Kind::max_num_toks || stop->label->kind() == Kind::max_num_reqs))
    ee = func("bound", {ee}, ee->value(), bound_by(stop->label->kind()));
  if (s1 <= s0) return constant(0);
  ExprPtr len = sub(ee, es);
  if (k != 1) len = ceildiv(len, step->label);
  (void)c;
  return len;
}

// x[a, b] indexes dim by dim; a plain list is one advanced index, not a tuple of indices.
std::vector<const Value*> index_items(const Value& index) {
  std::vector<const Value*> items;
  if (index.is_list() && index.text == "tuple") {
    items.reserve(index.items.size());
    for (const auto& i : index.items) items.push_back(&i);
  } else {
    items.push_back(&index);
  }
  return items;
}

// None and Ellipsis consume no dim of the indexed tensor; Ellipsis expands to whatever the others leave.
size_t consumed_dims(const std::vector<const Value*>& items) {
  size_t consumed = 0;
  for (const auto* i : items)
    if (!i->is_none() && i->type != Value::Type::ellipsis) ++consumed;
  return consumed;
}

bool is_bool_mask(const Value& i) { return i.text == "bool" || i.text == "torch.bool"; }

// Walks the index items over the tensor's dims. Advanced (tensor or list) indices are collected and their
// broadcast dims inserted at the end: in place when they are adjacent, at the front when they are split
// by other items (NumPy's rule).
class IndexWalk {
 public:
  IndexWalk(RuleContext& c, const Value& t, size_t consumed) : c_(c), t_(t), consumed_(consumed) {}

  void step(size_t idx, const Value& i) {
    switch (i.type) {
      case Value::Type::none:
        out_.push_back(constant(1));
        break;
      case Value::Type::ellipsis:
        ellipsis();
        break;
      case Value::Type::integer:
        ++d_;
        break;
      case Value::Type::boolean:
        mismatch("boolean scalar index");
      case Value::Type::slice:
        out_.push_back(slice_length(c_, t_.dims.at(d_++), i));
        break;
      case Value::Type::tensor:
        if (is_bool_mask(i)) {
          bool_mask(i);
          break;
        }
        advanced(idx, i);
        break;
      case Value::Type::list:
        advanced(idx, i);
        break;
      default:
        mismatch("unsupported index type");
    }
  }

  std::vector<ExprPtr> finish() {
    while (d_ < t_.rank()) out_.push_back(t_.dims[d_++]);
    if (!adv_tensors_.empty()) {
      const std::vector<ExprPtr> adv = broadcast(c_, adv_tensors_);
      const size_t at = adv_split_ ? 0 : static_cast<size_t>(adv_pos_);
      out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(at), adv.begin(), adv.end());
    }
    return std::move(out_);
  }

 private:
  void ellipsis() {
    const size_t skip = t_.rank() - consumed_;
    for (size_t k = 0; k < skip; ++k) out_.push_back(t_.dims[d_++]);
  }

  // The mask's true count is only known from the observed output, so take the size from there.
  void bool_mask(const Value& i) {
    c_.notes.push_back(fmt::format("{}: boolean mask index is data-dependent -> UNKNOWN", c_.call.op));
    int64_t size = 0;
    for (const auto& o : c_.call.outputs)
      if (o.is_tensor() && o.rank() > out_.size()) size = o.dims[out_.size()]->value();
    d_ += std::max<size_t>(1, i.rank());
    out_.push_back(unknown(size, "DATA"));
  }

  void advanced(size_t idx, const Value& i) {
    if (adv_pos_ < 0)
      adv_pos_ = static_cast<int>(out_.size());
    else if (last_adv_item_ != static_cast<int>(idx) - 1)
      adv_split_ = true;
    last_adv_item_ = static_cast<int>(idx);
    if (i.is_tensor()) {
      adv_tensors_.push_back(&i);
    } else {
      list_indices_.push_back(Value::make_tensor({constant(static_cast<int64_t>(i.items.size()))}));
      adv_tensors_.push_back(&list_indices_.back());
    }
    ++d_;
  }

  RuleContext& c_;
  const Value& t_;
  size_t consumed_;
  std::vector<ExprPtr> out_;
  std::vector<const Value*> adv_tensors_;
  std::deque<Value> list_indices_;  // stable addresses for list indices seen as 1-D tensors
  int adv_pos_ = -1;
  bool adv_split_ = false;
  int last_adv_item_ = -2;
  size_t d_ = 0;
};

// Applies a Python index (int, slice, None, Ellipsis, tensor, list, tuple of those) to a tensor's dims.
std::vector<ExprPtr> apply_index(RuleContext& c, const Value& t, const Value& index) {
  const std::vector<const Value*> items = index_items(index);
  const size_t consumed = consumed_dims(items);
  if (consumed > t.rank()) mismatch("too many indices");
  IndexWalk walk(c, t, consumed);
  for (size_t idx = 0; idx < items.size(); ++idx) walk.step(idx, *items[idx]);
  return walk.finish();
}

std::vector<Value> getitem(RuleContext& c) {
  const Value* self = c.call.arg(0, "self");
  const Value* index = c.call.arg(1, "index");
  if (!self || !index) mismatch("getitem needs self and index");
  if (self->is_tensor()) return {tensor(apply_index(c, *self, *index))};
  mismatch("getitem on a non-tensor");
}

std::vector<Value> setitem(RuleContext& c) {
  (void)tensor_at(c, 0, "self");
  return {};
}

std::vector<Value> index_select(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const size_t d = norm_dim(int_at(c, 1, "dim")->value(), t.rank());
  const Value& i = tensor_at(c, 2, "index");
  std::vector<ExprPtr> out = t.dims;
  out[d] = i.rank() ? i.dims[0] : constant(1);
  return {tensor(out)};
}

std::vector<Value> gather(RuleContext& c) { return {tensor(tensor_at(c, 2, "index").dims)}; }

std::vector<Value> narrow(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const size_t d = norm_dim(int_at(c, 1, "dim")->value(), t.rank());
  std::vector<ExprPtr> out = t.dims;
  out[d] = int_at(c, 3, "length");
  return {tensor(out)};
}

std::vector<Value> select(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const size_t d = norm_dim(int_at(c, 1, "dim")->value(), t.rank());
  std::vector<ExprPtr> out = t.dims;
  out.erase(out.begin() + d);
  return {tensor(out)};
}

std::vector<Value> same_as_self(RuleContext& c) { return {tensor(tensor_at(c, 0, "input").dims)}; }

std::vector<Value> data_dependent(RuleContext& c) { return from_tensor_data(c, "output size depends on tensor data"); }

}  // namespace

void register_index(RuleRegistry& r) {
  r.add("getitem", "index", getitem);
  r.add("setitem", "index", setitem);
  r.add("index_select", "index", index_select);
  r.add("gather", "index", gather);
  r.add("take_along_dim", "index", gather);
  r.add("narrow", "index", narrow);
  r.add("select", "index", select);
  for (const char* op : {"index_put", "index_copy", "index_fill", "index_add", "scatter", "scatter_add",
                         "scatter_reduce", "masked_scatter", "index_reduce"})
    r.add(op, "index", same_as_self);
  for (const char* op : {"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "bincount"})
    r.add(op, "index", data_dependent);
}

}  // namespace dooly::taint::rules
