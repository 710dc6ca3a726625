#include "dooly/taint/rules.hpp"

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::taint {

const Value* OpCall::arg(size_t pos, std::string_view name) const noexcept {
  if (pos < args.size()) return &args[pos];
  for (const auto& [k, v] : kwargs)
    if (!name.empty() && k == name) return &v;
  return nullptr;
}

std::vector<const Value*> OpCall::tensor_args() const {
  std::vector<const Value*> out;
  auto visit = [&](const Value& v) {
    if (v.is_tensor())
      out.push_back(&v);
    else if (v.is_list())
      for (const auto& item : v.items)
        if (item.is_tensor()) out.push_back(&item);
  };
  for (const auto& a : args) visit(a);
  for (const auto& [k, v] : kwargs) visit(v);
  return out;
}

void RuleRegistry::add(const std::string& op, const std::string& rule_class, Rule fn) {
  if (rules_.count(op))
    DOOLY_THROW(DuplicateError, "register each op once; remove one of the two registrations",
                "op '{}' already has a rule (class '{}'), refusing a second one (class '{}')", op,
                rules_.at(op).rule_class, rule_class);
  rules_.emplace(op, Entry{rule_class, std::move(fn)});
}

const RuleRegistry::Entry* RuleRegistry::find(std::string_view op) const noexcept {
  auto it = rules_.find(op);
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<std::string> RuleRegistry::ops() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : rules_) out.push_back(k);
  return out;
}

std::string normalize_op_name(std::string_view name) {
  std::string s(name);
  if (auto p = s.rfind("::"); p != std::string::npos) s = s.substr(p + 2);
  if (auto p = s.rfind('.'); p != std::string::npos) s = s.substr(p + 1);
  if (s.size() > 4 && s.rfind("__", 0) == 0 && s.compare(s.size() - 2, 2, "__") == 0) {
    s = s.substr(2, s.size() - 4);
    if (s.size() > 1 && s[0] == 'i' &&
        (s == "iadd" || s == "isub" || s == "imul" || s == "itruediv" || s == "ifloordiv" || s == "imod" ||
         s == "ipow" || s == "iand" || s == "ior"))
      s = s.substr(1);
  }
  if (s.size() > 1 && s.back() == '_' && s[s.size() - 2] != '_') s.pop_back();
  return s;
}

namespace {

// Replaces a predicted label whose value disagrees with the observation by UNKNOWN, with a note.
ExprPtr checked(const ExprPtr& predicted, int64_t observed, const std::string& where, OpResult& r) {
  if (predicted && predicted->value() == observed) return predicted;
  r.notes.push_back(predicted ? fmt::format("{}: rule predicted {}={} but the op produced {}", where, predicted->text(),
                                            predicted->value(), observed)
                              : fmt::format("{}: rule gave no label", where));
  return unknown(observed);
}

// An observed tensor keeps the predicted dims only when the prediction is a tensor of the same rank.
void reconcile_tensor(Value& out, const Value* p, const std::string& where, OpResult& r) {
  const bool shape_ok = p && p->is_tensor() && p->rank() == out.rank();
  if (!shape_ok && p)
    r.notes.push_back(fmt::format("{}: rule predicted rank {} but the op produced rank {}", where,
                                  p->is_tensor() ? p->rank() : 0, out.rank()));
  for (size_t d = 0; d < out.rank(); ++d)
    out.dims[d] = checked(shape_ok ? p->dims[d] : nullptr, out.dims[d]->value(), fmt::format("{} dim {}", where, d), r);
}

void reconcile_output(Value& out, const Value* p, const std::string& where, OpResult& r) {
  if (out.is_tensor()) {
    reconcile_tensor(out, p, where, r);
  } else if (out.is_int()) {
    out.label = checked(p && p->is_int() ? p->label : nullptr, out.int_value(), where, r);
  } else if (out.is_list()) {
    r.notes.push_back(fmt::format("{}: nested outputs must be flattened by the adapter", where));
  }
}

int count_unknown_labels(const std::vector<Value>& outputs) {
  int n = 0;
  for (const auto& out : outputs) {
    for (const auto& d : out.dims) n += d->kind() == Kind::unknown;
    if (out.is_int()) n += out.label->kind() == Kind::unknown;
  }
  return n;
}

void reconcile(const std::vector<Value>& predicted, const OpCall& call, OpResult& r) {
  r.outputs = call.outputs;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const Value* p = i < predicted.size() ? &predicted[i] : nullptr;
    reconcile_output(r.outputs[i], p, fmt::format("{} output {}", call.op, i), r);
  }
  r.unknown_dims += count_unknown_labels(r.outputs);
}

// Candidate labels for the fallback: every input tensor dimension and integer argument, lists and slices
// searched recursively.
void collect_candidates(const Value& v, std::vector<ExprPtr>& candidates) {
  if (v.is_tensor()) {
    candidates.insert(candidates.end(), v.dims.begin(), v.dims.end());
  } else if (v.is_int()) {
    candidates.push_back(v.label);
  } else if (v.is_list() || v.type == Value::Type::slice) {
    for (const auto& item : v.items) collect_candidates(item, candidates);
  }
}

// The first candidate of each kind whose value equals the observed size.
struct SizeMatches {
  ExprPtr first, first_request, first_config;
};

SizeMatches find_size_matches(const std::vector<ExprPtr>& candidates, int64_t size) {
  SizeMatches m;
  for (const auto& c : candidates) {
    if (c->value() != size) continue;
    if (!m.first) m.first = c;
    if (c->kind() == Kind::model_config && !m.first_config) m.first_config = c;
    if (c->kind() != Kind::none && c->kind() != Kind::model_config && !m.first_request) m.first_request = c;
  }
  return m;
}

// Request-side labels win over config-side ones, which win over constants; a size that matches both a
// request-side and a config-side label cannot be attributed by value alone, so it becomes UNKNOWN.
ExprPtr match_size(RuleContext& ctx, const std::vector<ExprPtr>& candidates, int64_t size, const std::string& where) {
  const SizeMatches m = find_size_matches(candidates, size);
  if (!m.first) {
    ctx.notes.push_back(fmt::format("{}: size {} matches no input dimension -> UNKNOWN", where, size));
    return unknown(size);
  }
  if (m.first_config && m.first_request) {
    ++ctx.ambiguous;
    ctx.notes.push_back(
        fmt::format("{}: size {} is ambiguous: it matches config-side '{}' and request-side '{}' ({}) -> UNKNOWN",
                    where, size, m.first_config->text(), m.first_request->text(), to_string(m.first_request->kind())));
    return unknown(size, "AMBIGUOUS");
  }
  if (m.first_request) return m.first_request;
  if (m.first_config) return m.first_config;
  return m.first;
}

}  // namespace

std::vector<Value> fallback_rule(RuleContext& ctx) {
  std::vector<ExprPtr> candidates;
  for (const auto& a : ctx.call.args) collect_candidates(a, candidates);
  for (const auto& [k, v] : ctx.call.kwargs) collect_candidates(v, candidates);

  std::vector<Value> out;
  out.reserve(ctx.call.outputs.size());
  for (size_t i = 0; i < ctx.call.outputs.size(); ++i) {
    const Value& o = ctx.call.outputs[i];
    Value p = o;
    const std::string where = fmt::format("{} output {}", ctx.call.op, i);
    if (o.is_tensor())
      for (size_t d = 0; d < o.rank(); ++d)
        p.dims[d] = match_size(ctx, candidates, o.dims[d]->value(), fmt::format("{} dim {}", where, d));
    else if (o.is_int())
      p.label = match_size(ctx, candidates, o.int_value(), where);
    out.push_back(std::move(p));
  }
  return out;
}

OpResult propagate(const RuleRegistry& rules, const OpCall& call) {
  OpResult r;
  RuleContext ctx{call, r.notes};
  std::vector<Value> predicted;
  const RuleRegistry::Entry* e = rules.find(call.op);
  bool done = false;
  if (e) {
    try {
      predicted = e->fn(ctx);
      r.rule_class = e->rule_class;
      r.coverage = Coverage::rule;
      done = true;
    } catch (const RuleMismatch& m) {
      r.notes.push_back(fmt::format("rule '{}' does not apply to this call of '{}' ({}); used the fallback rule",
                                    e->rule_class, call.op, m.what()));
    } catch (const std::exception& m) {  // e.g. an index a rule did not expect: degrade, never abort the trace
      r.notes.push_back(
          fmt::format("rule '{}' failed on '{}' ({}); used the fallback rule", e->rule_class, call.op, m.what()));
    }
  } else {
    r.notes.push_back(fmt::format("no rule covers op '{}'; labelled by the fallback rule", call.op));
  }
  if (!done) {
    predicted = fallback_rule(ctx);
    r.rule_class = "fallback";
    r.coverage = Coverage::fallback;
  }
  r.ambiguous = ctx.ambiguous;
  r.conflicts = ctx.conflicts;
  reconcile(predicted, call, r);
  return r;
}

}  // namespace dooly::taint
