// Contractions: linear ([..., in] x [out, in] -> [..., out]), matmul with broadcast batch dims, mm, bmm,
// baddbmm/addmm (the product's shape), einsum (letters map to labels).
#include <map>

#include <fmt/format.h>

#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<Value> linear(RuleContext& c) {
  const Value& x = tensor_at(c, 0, "input");
  const Value& w = tensor_at(c, 1, "weight");
  if (x.rank() == 0 || w.rank() > 2) mismatch("linear shapes");
  std::vector<ExprPtr> out(x.dims.begin(), x.dims.end() - 1);
  if (w.rank() == 2) out.push_back(w.dims[0]);
  return {tensor(out)};
}

std::vector<ExprPtr> matmul_dims(RuleContext& c, const Value& a, const Value& b) {
  if (a.rank() == 0 || b.rank() == 0) mismatch("matmul of a scalar");
  if (a.rank() == 1 && b.rank() == 1) return {};
  if (b.rank() == 1) return std::vector<ExprPtr>(a.dims.begin(), a.dims.end() - 1);
  if (a.rank() == 1) {
    std::vector<ExprPtr> out(b.dims.begin(), b.dims.end() - 2);
    out.push_back(b.dims.back());
    return out;
  }
  Value ba = Value::make_tensor(std::vector<ExprPtr>(a.dims.begin(), a.dims.end() - 2));
  Value bb = Value::make_tensor(std::vector<ExprPtr>(b.dims.begin(), b.dims.end() - 2));
  std::vector<ExprPtr> out = broadcast(c, {&ba, &bb});
  out.push_back(a.dims[a.rank() - 2]);
  out.push_back(b.dims.back());
  return out;
}

std::vector<Value> matmul(RuleContext& c) {
  return {tensor(matmul_dims(c, tensor_at(c, 0, "input"), tensor_at(c, 1, "other")))};
}
// baddbmm(input, batch1, batch2) / addmm(input, mat1, mat2): shape of the product.
std::vector<Value> add_product(RuleContext& c) {
  return {tensor(matmul_dims(c, tensor_at(c, 1, "batch1"), tensor_at(c, 2, "batch2")))};
}

// The equation without spaces; only the explicit form "ab,bc->ac" without '...' is supported.
std::string einsum_equation(const RuleContext& c) {
  const Value* eq = c.call.arg(0, "equation");
  if (!eq || eq->type != Value::Type::string) mismatch("einsum without an equation");
  std::string s;
  for (char ch : eq->text)
    if (ch != ' ') s += ch;
  if (s.find("->") == std::string::npos || s.find("...") != std::string::npos)
    mismatch("einsum needs an explicit '->' and no '...'");
  return s;
}

// The comma-separated input subscripts before the arrow.
std::vector<std::string> einsum_inputs(const std::string& s, size_t arrow) {
  std::vector<std::string> ins;
  for (size_t p = 0, q = 0; p <= arrow; p = q + 1) {
    q = s.find(',', p);
    if (q == std::string::npos || q > arrow) q = arrow;
    ins.push_back(s.substr(p, q - p));
    if (q == arrow) break;
  }
  return ins;
}

// A letter takes the label of its first operand dim, replaced by a later one that is labelled where the
// first is not, or that is not a broadcast 1 where the first is.
std::map<char, ExprPtr> einsum_letters(const std::vector<std::string>& ins, const std::vector<const Value*>& ts) {
  std::map<char, ExprPtr> letter;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].size() != ts[i]->rank()) mismatch("einsum subscript rank");
    for (size_t d = 0; d < ins[i].size(); ++d) {
      auto& l = letter[ins[i][d]];
      const ExprPtr& x = ts[i]->dims[d];
      if (!l || (l->kind() == Kind::none && x->kind() != Kind::none) || (l->value() == 1 && x->value() != 1)) l = x;
    }
  }
  return letter;
}

std::vector<Value> einsum(RuleContext& c) {
  const std::string s = einsum_equation(c);
  const auto arrow = s.find("->");
  const std::vector<const Value*> ts = c.call.tensor_args();
  const std::vector<std::string> ins = einsum_inputs(s, arrow);
  if (ins.size() != ts.size()) mismatch("einsum operand count");
  std::map<char, ExprPtr> letter = einsum_letters(ins, ts);
  std::vector<ExprPtr> out;
  for (char ch : s.substr(arrow + 2)) {
    if (!letter.count(ch)) mismatch(fmt::format("einsum output letter '{}' not in inputs", ch));
    out.push_back(letter[ch]);
  }
  return {tensor(out)};
}

}  // namespace

void register_matmul(RuleRegistry& r) {
  r.add("linear", "matmul", linear);
  r.add("matmul", "matmul", matmul);
  r.add("mm", "matmul", matmul);
  r.add("bmm", "matmul", matmul);
  r.add("rmatmul", "matmul", [](RuleContext& c) {
    return std::vector<Value>{tensor(matmul_dims(c, tensor_at(c, 1, "other"), tensor_at(c, 0, "input")))};
  });
  r.add("baddbmm", "matmul", add_product);
  r.add("addmm", "matmul", add_product);
  r.add("einsum", "matmul", einsum);
  // Grouped GEMM of MoE experts: a [M, K] x b [G, K, N] (rows grouped by offsets) -> [M, N].
  auto grouped = [](RuleContext& c) -> std::vector<Value> {
    const Value& a = tensor_at(c, 0, "mat_a");
    const Value& b = tensor_at(c, 1, "mat_b");
    if (a.rank() != 2 || b.rank() != 3) mismatch("grouped_mm expects [M, K] x [G, K, N]");
    return {tensor({a.dims[0], b.dims[2]})};
  };
  r.add("_grouped_mm", "matmul", grouped);
  r.add("grouped_mm", "matmul", grouped);
}

}  // namespace dooly::taint::rules
