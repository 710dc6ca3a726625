// Reordering dims: transpose/swapaxes, permute, t, mT, T, movedim.
#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> transpose(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  std::vector<ExprPtr> out = t.dims;
  const size_t a = norm_dim(int_at(c, 1, "dim0")->value(), t.rank());
  const size_t b = norm_dim(int_at(c, 2, "dim1")->value(), t.rank());
  std::swap(out[a], out[b]);
  return {tensor(out)};
}

std::vector<Value> permute(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  std::vector<ExprPtr> order = sizes_from(c, 1, "dims");
  if (order.size() != t.rank()) mismatch("permute order has the wrong length");
  std::vector<ExprPtr> out;
  out.reserve(order.size());
  for (const auto& o : order) out.push_back(t.dims[norm_dim(o->value(), t.rank())]);
  return {tensor(out)};
}

std::vector<Value> last_two(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  std::vector<ExprPtr> out = t.dims;
  if (out.size() >= 2) std::swap(out[out.size() - 1], out[out.size() - 2]);
  return {tensor(out)};
}

std::vector<Value> reverse(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  return {tensor(std::vector<ExprPtr>(t.dims.rbegin(), t.dims.rend()))};
}

std::vector<Value> movedim(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const std::vector<ExprPtr> src = int_list(*c.call.arg(1, "source"));
  const Value* dst_v = c.call.arg(2, "destination");
  if (!dst_v) mismatch("movedim without destination");
  const std::vector<ExprPtr> dst = int_list(*dst_v);
  if (src.size() != dst.size()) mismatch("movedim lists differ in length");
  std::vector<ExprPtr> out(t.rank());
  std::vector<bool> used_src(t.rank()), used_dst(t.rank());
  for (size_t i = 0; i < src.size(); ++i) {
    const size_t s = norm_dim(src[i]->value(), t.rank()), d = norm_dim(dst[i]->value(), t.rank());
    out[d] = t.dims[s];
    used_src[s] = used_dst[d] = true;
  }
  size_t j = 0;
  for (size_t i = 0; i < t.rank(); ++i) {
    if (used_src[i]) continue;
    while (used_dst[j]) ++j;
    out[j++] = t.dims[i];
  }
  return {tensor(out)};
}

}  // namespace

void register_permute(RuleRegistry& r) {
  r.add("transpose", "permute", transpose);
  r.add("swapaxes", "permute", transpose);
  r.add("swapdims", "permute", transpose);
  r.add("permute", "permute", permute);
  r.add("t", "permute", last_two);
  r.add("mT", "permute", last_two);
  r.add("T", "permute", reverse);
  r.add("movedim", "permute", movedim);
  r.add("moveaxis", "permute", movedim);
}

}  // namespace dooly::taint::rules
