// Joining and splitting: cat adds the labels along the dim, stack inserts the count, split/chunk give
// each piece its size (the last piece of an uneven split is dim - size*(n-1)), unbind drops the dim.
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<const Value*> tensor_list(const RuleContext& c) {
  const Value* l = c.call.arg(0, "tensors");
  if (!l || !l->is_list()) mismatch("expected a list of tensors");
  std::vector<const Value*> ts;
  for (const auto& item : l->items) {
    if (!item.is_tensor()) mismatch("expected a list of tensors");
    ts.push_back(&item);
  }
  if (ts.empty()) mismatch("empty tensor list");
  return ts;
}

std::vector<Value> cat(RuleContext& c) {
  std::vector<const Value*> all = tensor_list(c), ts;
  for (auto* t : all)  // legacy: 1-D empty tensors are skipped by cat
    if (!(t->rank() == 1 && t->dims[0]->value() == 0)) ts.push_back(t);
  if (ts.empty()) return {tensor(all.front()->dims)};
  const size_t d = norm_dim(int_at(c, 1, "dim", constant(0))->value(), ts.front()->rank());
  std::vector<ExprPtr> out = ts.front()->dims;
  for (size_t i = 1; i < ts.size(); ++i) {
    if (ts[i]->rank() != out.size()) mismatch("cat of different ranks");
    out[d] = add(out[d], ts[i]->dims[d]);
    for (size_t k = 0; k < out.size(); ++k)
      if (k != d && out[k]->kind() == Kind::none && ts[i]->dims[k]->kind() != Kind::none) out[k] = ts[i]->dims[k];
  }
  return {tensor(out)};
}

std::vector<Value> stack(RuleContext& c) {
  std::vector<const Value*> ts = tensor_list(c);
  const size_t d = norm_dim(int_at(c, 1, "dim", constant(0))->value(), ts.front()->rank() + 1);
  Value b = Value::make_tensor(broadcast(c, ts));
  b.dims.insert(b.dims.begin() + d, constant(static_cast<int64_t>(ts.size())));
  return {b};
}

std::vector<Value> pieces(const Value& t, size_t d, const std::vector<ExprPtr>& sizes) {
  std::vector<Value> out;
  for (const auto& s : sizes) {
    std::vector<ExprPtr> dims = t.dims;
    dims[d] = s;
    out.push_back(tensor(dims));
  }
  return out;
}

std::vector<Value> split(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const Value* s = c.call.arg(1, "split_size_or_sections");
  if (!s) s = c.call.arg(1, "split_size");
  if (!s) s = c.call.arg(1, "split_sizes");
  if (!s) mismatch("split without sizes");
  const size_t d = norm_dim(int_at(c, 2, "dim", constant(0))->value(), t.rank());
  if (s->is_list()) return pieces(t, d, int_list(*s));
  if (!s->is_int() || s->int_value() <= 0) mismatch("split size");
  const ExprPtr& size = s->label;
  const ExprPtr& total = t.dims[d];
  const int64_t n = (total->value() + size->value() - 1) / size->value();
  std::vector<ExprPtr> sizes;
  for (int64_t i = 0; i < n; ++i)
    sizes.push_back(i + 1 < n || total->value() % size->value() == 0 ? size : sub(total, mul(size, constant(n - 1))));
  if (n == 1) sizes = {total};
  return pieces(t, d, sizes);
}

std::vector<Value> chunk(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const ExprPtr chunks = int_at(c, 1, "chunks");
  const size_t d = norm_dim(int_at(c, 2, "dim", constant(0))->value(), t.rank());
  const ExprPtr& total = t.dims[d];
  const ExprPtr size = ceildiv(total, chunks);
  if (size->value() <= 0) mismatch("chunk of an empty dim");
  const int64_t n = (total->value() + size->value() - 1) / size->value();
  std::vector<ExprPtr> sizes;
  for (int64_t i = 0; i < n; ++i)
    sizes.push_back(i + 1 < n || total->value() % size->value() == 0 ? size : sub(total, mul(size, constant(n - 1))));
  return pieces(t, d, sizes);
}

std::vector<Value> unbind(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const size_t d = norm_dim(int_at(c, 1, "dim", constant(0))->value(), t.rank());
  std::vector<ExprPtr> dims = t.dims;
  dims.erase(dims.begin() + d);
  return std::vector<Value>(static_cast<size_t>(t.dims[d]->value()), tensor(dims));
}

}  // namespace

void register_concat(RuleRegistry& r) {
  r.add("cat", "concat", cat);
  r.add("concat", "concat", cat);
  r.add("concatenate", "concat", cat);
  r.add("stack", "concat", stack);
  r.add("split", "concat", split);
  r.add("split_with_sizes", "concat", split);
  r.add("chunk", "concat", chunk);
  r.add("unbind", "concat", unbind);
}

}  // namespace dooly::taint::rules
