// Shape queries that return Python integers: size()/shape give the dims' own labels (this is how taint
// leaves a tensor and flows through integer arithmetic), dim()/ndim the constant rank, numel() the product.
// item()/tolist() read tensor data: their values are data-dependent (UNKNOWN, noted).
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> size(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  if (has(c, 1, "dim")) return {integer(t.dims[norm_dim(int_at(c, 1, "dim")->value(), t.rank())])};
  std::vector<Value> out;
  for (const auto& d : t.dims) out.push_back(integer(d));
  return out;
}

std::vector<Value> rank(RuleContext& c) {
  return {integer(constant(static_cast<int64_t>(tensor_at(c, 0, "input").rank())))};
}
std::vector<Value> numel(RuleContext& c) { return {integer(product(tensor_at(c, 0, "input").dims))}; }
std::vector<Value> len(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  if (!t.rank()) mismatch("len of a 0-d tensor");
  return {integer(t.dims[0])};
}

std::vector<Value> data(RuleContext& c) { return from_tensor_data(c, "integer read from tensor data"); }

}  // namespace

void register_query(RuleRegistry& r) {
  r.add("size", "query", size);
  r.add("shape", "query", size);
  r.add("dim", "query", rank);
  r.add("ndimension", "query", rank);
  r.add("ndim", "query", rank);
  r.add("numel", "query", numel);
  r.add("nelement", "query", numel);
  r.add("len", "query", len);
  r.add("item", "query", data);
  r.add("tolist", "query", data);
}

}  // namespace dooly::taint::rules
