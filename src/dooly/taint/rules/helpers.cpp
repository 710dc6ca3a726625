#include "dooly/taint/rules/helpers.hpp"

#include <fmt/format.h>

namespace dooly::taint::rules {

void mismatch(const std::string& why) { throw RuleMismatch(why); }

std::vector<Value> from_tensor_data(RuleContext& c, std::string_view why) {
  std::vector<Value> out;
  for (const auto& o : c.call.outputs) {
    Value p = o;
    for (auto& d : p.dims) d = unknown(d->value(), "DATA");
    if (p.is_int()) p.label = unknown(p.int_value(), "DATA");
    out.push_back(p);
  }
  c.notes.push_back(fmt::format("{}: {} -> UNKNOWN", c.call.op, why));
  return out;
}

bool has(const RuleContext& c, size_t pos, std::string_view name) {
  const Value* v = c.call.arg(pos, name);
  return v && !v->is_none();
}

const Value& tensor_at(const RuleContext& c, size_t pos, std::string_view name) {
  const Value* v = c.call.arg(pos, name);
  if (!v || !v->is_tensor()) mismatch(fmt::format("argument {} ('{}') is not a tensor", pos, name));
  return *v;
}

ExprPtr int_at(const RuleContext& c, size_t pos, std::string_view name, ExprPtr def) {
  const Value* v = c.call.arg(pos, name);
  if (!v || v->is_none()) {
    if (!def) mismatch(fmt::format("missing integer argument {} ('{}')", pos, name));
    return def;
  }
  if (v->type == Value::Type::boolean) return constant(v->boolean ? 1 : 0);
  if (!v->is_int()) mismatch(fmt::format("argument {} ('{}') is not an integer", pos, name));
  return v->label;
}

bool bool_at(const RuleContext& c, size_t pos, std::string_view name, bool def) {
  const Value* v = c.call.arg(pos, name);
  if (!v || v->is_none()) return def;
  if (v->type == Value::Type::boolean) return v->boolean;
  if (v->is_int()) return v->int_value() != 0;
  mismatch(fmt::format("argument {} ('{}') is not a bool", pos, name));
}

std::vector<ExprPtr> int_list(const Value& v) {
  if (v.is_int()) return {v.label};
  if (!v.is_list()) mismatch("expected a list of integers");
  std::vector<ExprPtr> out;
  for (const auto& item : v.items) {
    if (!item.is_int()) mismatch("expected a list of integers");
    out.push_back(item.label);
  }
  return out;
}

std::vector<ExprPtr> sizes_from(const RuleContext& c, size_t from, std::string_view name) {
  const Value* first = c.call.arg(from, name);
  if (!first) return {};
  if (first->is_list()) return int_list(*first);
  std::vector<ExprPtr> out;
  for (size_t i = from; i < c.call.args.size(); ++i) {
    if (!c.call.args[i].is_int()) mismatch("sizes must be integers");
    out.push_back(c.call.args[i].label);
  }
  if (out.empty() && first->is_int()) out.push_back(first->label);
  return out;
}

size_t norm_dim(int64_t d, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (d < -r || d >= r) mismatch(fmt::format("dimension {} out of range for rank {}", d, rank));
  return static_cast<size_t>(d < 0 ? d + r : d);
}

std::vector<size_t> dims_at(const RuleContext& c, size_t pos, std::string_view name, size_t rank, bool* given) {
  const Value* v = c.call.arg(pos, name);
  *given = v && !v->is_none();
  std::vector<size_t> out;
  if (!*given) return out;
  for (const auto& l : int_list(*v)) out.push_back(norm_dim(l->value(), rank));
  return out;
}

namespace {

// Dim i counted from the right, or nullptr when the tensor has fewer dims.
const ExprPtr* dim_from_right(const Value& t, size_t i) { return i < t.rank() ? &t.dims[t.rank() - 1 - i] : nullptr; }

// The broadcast size of dim i from the right: the last size other than 1, or 1.
int64_t broadcast_size(const std::vector<const Value*>& tensors, size_t i) {
  int64_t size = 1;
  for (const auto* t : tensors) {
    const ExprPtr* d = dim_from_right(*t, i);
    if (d && (*d)->value() != 1) size = (*d)->value();
  }
  return size;
}

// The label of dim i from the right: the first labelled partner of the broadcast size, else the first
// partner of that size, else a constant. Partners with a different label kind are a conflict, noted.
ExprPtr broadcast_label(RuleContext& c, const std::vector<const Value*>& tensors, size_t i) {
  const int64_t size = broadcast_size(tensors, i);
  ExprPtr chosen, first;
  for (const auto* t : tensors) {
    const ExprPtr* pd = dim_from_right(*t, i);
    if (!pd || (*pd)->value() != size) continue;
    const ExprPtr& d = *pd;
    if (!first) first = d;
    if (d->kind() == Kind::none) continue;
    if (!chosen) {
      chosen = d;
      continue;
    }
    if (chosen->kind() != d->kind()) {
      ++c.conflicts;
      c.notes.push_back(
          fmt::format("{}: broadcast partners of size {} disagree: '{}' ({}) vs '{}' ({}); kept the first", c.call.op,
                      size, chosen->text(), to_string(chosen->kind()), d->text(), to_string(d->kind())));
    }
  }
  if (chosen) return chosen;
  return first ? first : constant(size);
}

}  // namespace

std::vector<ExprPtr> broadcast(RuleContext& c, const std::vector<const Value*>& tensors) {
  size_t rank = 0;
  for (const auto* t : tensors) rank = std::max(rank, t->rank());
  std::vector<ExprPtr> out(rank);
  for (size_t i = 0; i < rank; ++i) out[rank - 1 - i] = broadcast_label(c, tensors, i);
  return out;
}

Value tensor(std::vector<ExprPtr> dims) { return Value::make_tensor(std::move(dims)); }
Value integer(ExprPtr l) { return Value::make_int(std::move(l)); }

}  // namespace dooly::taint::rules

namespace dooly::taint {

RuleRegistry default_rules() {
  RuleRegistry r;
  for (rules::Registrar reg :
       {rules::register_factory, rules::register_view, rules::register_matmul, rules::register_concat,
        rules::register_index, rules::register_elementwise, rules::register_reduce, rules::register_permute,
        rules::register_embedding, rules::register_attention, rules::register_query})
    reg(r);
  return r;
}

}  // namespace dooly::taint
