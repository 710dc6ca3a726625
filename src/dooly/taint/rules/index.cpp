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
    if (v < 0) { v += n; e = add(dim, e); }
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

// Applies a Python index (int, slice, None, Ellipsis, tensor, list, tuple of those) to a tensor's dims.
std::vector<ExprPtr> apply_index(RuleContext& c, const Value& t, const Value& index) {
  std::vector<const Value*> items;
  if (index.is_list() && index.text == "tuple") {  // x[a, b]; a plain list is one advanced index
    for (const auto& i : index.items) items.push_back(&i);
  } else {
    items.push_back(&index);
  }
  size_t consumed = 0;
  for (auto* i : items)
    if (!i->is_none() && i->type != Value::Type::ellipsis) ++consumed;
  if (consumed > t.rank()) mismatch("too many indices");
  std::vector<ExprPtr> out;
  std::vector<ExprPtr> advanced;  // broadcast dims of the tensor indices
  std::vector<const Value*> adv_tensors;
  std::deque<Value> list_indices;  // stable addresses for list indices seen as 1-D tensors
  int adv_pos = -1;
  bool adv_split = false;
  int last_adv_item = -2;
  size_t d = 0;
  for (size_t idx = 0; idx < items.size(); ++idx) {
    const Value& i = *items[idx];
    switch (i.type) {
      case Value::Type::none: out.push_back(constant(1)); break;
      case Value::Type::ellipsis: {
        const size_t skip = t.rank() - consumed;
        for (size_t k = 0; k < skip; ++k) out.push_back(t.dims[d++]);
        break;
      }
      case Value::Type::integer:
      case Value::Type::boolean:
        if (i.type == Value::Type::boolean) mismatch("boolean scalar index");
        ++d;
        break;
      case Value::Type::slice: out.push_back(slice_length(c, t.dims.at(d++), i)); break;
      case Value::Type::tensor:
        if (i.text == "bool" || i.text == "torch.bool") {
          c.notes.push_back(fmt::format("{}: boolean mask index is data-dependent -> UNKNOWN", c.call.op));
          int64_t size = 0;
          for (const auto& o : c.call.outputs) if (o.is_tensor() && o.rank() > out.size()) size = o.dims[out.size()]->value();
          d += std::max<size_t>(1, i.rank());
          out.push_back(unknown(size, "DATA"));
          break;
        }
        [[fallthrough]];
      case Value::Type::list: {
        if (adv_pos < 0) adv_pos = static_cast<int>(out.size());
        else if (last_adv_item != static_cast<int>(idx) - 1) adv_split = true;
        last_adv_item = static_cast<int>(idx);
        if (i.is_tensor()) adv_tensors.push_back(&i);
        else {
          list_indices.push_back(Value::make_tensor({constant(static_cast<int64_t>(i.items.size()))}));
          adv_tensors.push_back(&list_indices.back());
        }
        ++d;
        break;
      }
      default: mismatch("unsupported index type");
    }
  }
  while (d < t.rank()) out.push_back(t.dims[d++]);
  if (!adv_tensors.empty()) {
    advanced = broadcast(c, adv_tensors);
    const size_t at = adv_split ? 0 : static_cast<size_t>(adv_pos);
    out.insert(out.begin() + at, advanced.begin(), advanced.end());
  }
  return out;
}

std::vector<Value> getitem(RuleContext& c) {
  const Value* self = c.call.arg(0, "self");
  const Value* index = c.call.arg(1, "index");
  if (!self || !index) mismatch("getitem needs self and index");
  if (self->is_tensor()) return {tensor(apply_index(c, *self, *index))};
  mismatch("getitem on a non-tensor");
}

std::vector<Value> setitem(RuleContext& c) { (void)tensor_at(c, 0, "self"); return {}; }

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
