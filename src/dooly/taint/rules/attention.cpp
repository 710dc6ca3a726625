// Fused attention: scaled_dot_product_attention(q [..., L, E], k [..., S, E], v [..., S, Ev]) ->
// [..., L, Ev], with the batch dims broadcast between q and v.
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> sdpa(RuleContext& c) {
  const Value& q = tensor_at(c, 0, "query");
  const Value& v = tensor_at(c, 2, "value");
  if (q.rank() < 2 || v.rank() < 2) mismatch("attention inputs need at least 2 dims");
  std::vector<ExprPtr> out(q.dims.begin(), q.dims.end() - 1);
  out.push_back(v.dims.back());
  return {tensor(out)};
}

}  // namespace

void register_attention(RuleRegistry& r) { r.add("scaled_dot_product_attention", "attention", sdpa); }

}  // namespace dooly::taint::rules
