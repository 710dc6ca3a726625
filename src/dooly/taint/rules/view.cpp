// Shape changes that keep the elements: view/reshape (a -1 takes the product of the input labels divided
// by the product of the other output labels, with common factors cancelled), expand, flatten, unflatten,
// squeeze/unsqueeze, repeat.
#include <fmt/format.h>

#include "dooly/taint/rules/helpers.hpp"

namespace dooly::taint::rules {
namespace {

std::vector<ExprPtr> infer(const std::vector<ExprPtr>& in, std::vector<ExprPtr> out) {
  int minus = -1;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i]->op() == ExprOp::constant && out[i]->value() == -1) {
      if (minus >= 0) mismatch("two -1 sizes");
      minus = static_cast<int>(i);
    }
  if (minus < 0) return out;
  std::vector<ExprPtr> others;
  for (size_t i = 0; i < out.size(); ++i)
    if (static_cast<int>(i) != minus) others.push_back(out[i]);
  out[minus] = floordiv(product(in), product(others));
  return out;
}

std::vector<Value> view(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const Value* s1 = c.call.arg(1, "shape");
  if (s1 && s1->is_tensor()) return {tensor(s1->dims)};  // view_as-like call with a tensor
  std::vector<ExprPtr> sizes = sizes_from(c, 1, "shape");
  if (sizes.empty()) sizes = sizes_from(c, 1, "size");
  return {tensor(infer(t.dims, sizes))};
}

std::vector<Value> as_other(RuleContext& c) { return {tensor(tensor_at(c, 1, "other").dims)}; }

std::vector<Value> expand(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  std::vector<ExprPtr> sizes = sizes_from(c, 1, "size");
  if (sizes.size() < t.rank()) mismatch("expand to fewer dims");
  const size_t lead = sizes.size() - t.rank();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < lead) continue;
    const ExprPtr& in = t.dims[i - lead];
    if (sizes[i]->value() == -1 || sizes[i]->value() == in->value()) {
      // Keep the input's own label unless the argument is tainted and the input dim is a literal.
      if (sizes[i]->value() == -1 || sizes[i]->kind() == Kind::none || in->kind() != Kind::none) sizes[i] = in;
    }
  }
  return {tensor(sizes)};
}

std::vector<Value> flatten(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  if (t.rank() == 0) return {tensor({constant(1)})};
  const size_t a = norm_dim(int_at(c, 1, "start_dim", constant(0))->value(), t.rank());
  const size_t b = norm_dim(int_at(c, 2, "end_dim", constant(-1))->value(), t.rank());
  std::vector<ExprPtr> out(t.dims.begin(), t.dims.begin() + a);
  out.push_back(product(std::vector<ExprPtr>(t.dims.begin() + a, t.dims.begin() + b + 1)));
  out.insert(out.end(), t.dims.begin() + b + 1, t.dims.end());
  return {tensor(out)};
}

std::vector<Value> unflatten(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const size_t d = norm_dim(int_at(c, 1, "dim")->value(), t.rank());
  const Value* s = c.call.arg(2, "sizes");
  if (!s) mismatch("unflatten without sizes");
  std::vector<ExprPtr> parts = infer({t.dims[d]}, int_list(*s));
  std::vector<ExprPtr> out(t.dims.begin(), t.dims.begin() + d);
  out.insert(out.end(), parts.begin(), parts.end());
  out.insert(out.end(), t.dims.begin() + d + 1, t.dims.end());
  return {tensor(out)};
}

std::vector<Value> unsqueeze(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const size_t d = norm_dim(int_at(c, 1, "dim")->value(), t.rank() + 1);
  std::vector<ExprPtr> out = t.dims;
  out.insert(out.begin() + d, constant(1));
  return {tensor(out)};
}

std::vector<Value> squeeze(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  bool given = false;
  std::vector<size_t> dims = dims_at(c, 1, "dim", t.rank(), &given);
  std::vector<ExprPtr> out;
  for (size_t i = 0; i < t.rank(); ++i) {
    const bool listed = !given || std::find(dims.begin(), dims.end(), i) != dims.end();
    if (listed && t.dims[i]->value() == 1) continue;
    out.push_back(t.dims[i]);
  }
  return {tensor(out)};
}

std::vector<Value> repeat(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  std::vector<ExprPtr> reps = sizes_from(c, 1, "repeats");
  if (reps.size() < t.rank()) mismatch("repeat with fewer repeats than dims");
  const size_t lead = reps.size() - t.rank();
  std::vector<ExprPtr> out;
  for (size_t i = 0; i < reps.size(); ++i) out.push_back(i < lead ? reps[i] : mul(t.dims[i - lead], reps[i]));
  return {tensor(out)};
}

std::vector<Value> repeat_interleave(RuleContext& c) {
  const Value& t = tensor_at(c, 0, "input");
  const Value* r = c.call.arg(1, "repeats");
  if (!r || !r->is_int()) mismatch("repeat_interleave with tensor repeats is data-dependent");
  if (!has(c, 2, "dim")) return {tensor({mul(product(t.dims), r->label)})};
  const size_t d = norm_dim(int_at(c, 2, "dim")->value(), t.rank());
  std::vector<ExprPtr> out = t.dims;
  out[d] = mul(out[d], r->label);
  return {tensor(out)};
}

}  // namespace

void register_view(RuleRegistry& r) {
  r.add("view", "view", view);
  r.add("reshape", "view", view);
  r.add("view_as", "view", as_other);
  r.add("reshape_as", "view", as_other);
  r.add("expand_as", "view", as_other);
  r.add("expand", "view", expand);
  r.add("broadcast_to", "view", expand);
  r.add("flatten", "view", flatten);
  r.add("unflatten", "view", unflatten);
  r.add("unsqueeze", "view", unsqueeze);
  r.add("squeeze", "view", squeeze);
  r.add("repeat", "view", repeat);
  r.add("tile", "view", repeat);
  r.add("repeat_interleave", "view", repeat_interleave);
}

}  // namespace dooly::taint::rules
