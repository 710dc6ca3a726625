// Reductions: the reduced dims disappear (or become 1 with keepdim); no dim -> a 0-d result.
// max/min with a dim give values and indices; with a tensor second operand they are elementwise.
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<ExprPtr> reduce_dims(RuleContext& c, size_t dim_pos, size_t keep_pos) {
  const Value& t = tensor_at(c, 0, "input");
  bool given = false;
  std::vector<size_t> dims = dims_at(c, dim_pos, "dim", t.rank(), &given);
  const bool keep = bool_at(c, keep_pos, "keepdim", false);
  std::vector<ExprPtr> out;
  for (size_t i = 0; i < t.rank(); ++i) {
    const bool reduced = !given || std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced)
      out.push_back(t.dims[i]);
    else if (keep)
      out.push_back(constant(1));
  }
  return out;
}

std::vector<Value> reduce(RuleContext& c) { return {tensor(reduce_dims(c, 1, 2))}; }
std::vector<Value> reduce_pair(RuleContext& c) {
  Value v = tensor(reduce_dims(c, 1, 2));
  return {v, v};
}
std::vector<Value> norm(RuleContext& c) { return {tensor(reduce_dims(c, 2, 3))}; }

std::vector<Value> max_min(RuleContext& c) {
  const Value* second = c.call.arg(1, "dim");
  if (second && second->is_tensor()) return {tensor(broadcast(c, {&tensor_at(c, 0, "input"), second}))};
  if (second && second->is_int()) return reduce_pair(c);
  return {tensor(reduce_dims(c, 1, 2))};
}

}  // namespace

void register_reduce(RuleRegistry& r) {
  for (const char* op : {"sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "all", "any", "logsumexp",
                         "count_nonzero", "nansum", "nanmean", "var", "std"})
    r.add(op, "reduce", reduce);
  for (const char* op : {"median", "mode", "var_mean", "std_mean", "aminmax"}) r.add(op, "reduce", reduce_pair);
  r.add("norm", "reduce", norm);
  r.add("vector_norm", "reduce", norm);
  // histc(input, bins): a histogram of `bins` counts.
  r.add("histc", "reduce", [](RuleContext& c) -> std::vector<Value> {
    (void)tensor_at(c, 0, "input");
    return {tensor({int_at(c, 1, "bins", constant(100))})};
  });
  r.add("max", "reduce", max_min);
  r.add("min", "reduce", max_min);
}

}  // namespace dooly::taint::rules
