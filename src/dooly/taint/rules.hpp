#pragma once
// Propagation rules: one per op class (factory, view, matmul, concat, index, elementwise, reduce, permute,
// embedding, attention, query), looked up by normalised op name in a registry that rejects duplicates.
// Ops without a rule go through the fallback rule (size matching, ambiguities flagged, else UNKNOWN).
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dooly/taint/value.hpp"

namespace dooly::taint {

// What a rule sees: the call plus a place for notes. A rule returns the outputs it predicts (flattened,
// as in OpCall::outputs); propagate() checks every predicted value against the observed one.
struct RuleContext {
  const OpCall& call;
  std::vector<std::string>& notes;
  int ambiguous = 0;
  int conflicts = 0;
};
using Rule = std::function<std::vector<Value>(RuleContext&)>;

// Thrown by a rule whose op was called in a form it does not handle; propagate() then uses the fallback
// rule and records the reason.
struct RuleMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class RuleRegistry {
 public:
  struct Entry {
    std::string rule_class;
    Rule fn;
  };
  // Throws DuplicateError when op already has a rule.
  void add(const std::string& op, const std::string& rule_class, Rule fn);
  const Entry* find(std::string_view op) const noexcept;
  std::vector<std::string> ops() const;
  size_t size() const noexcept { return rules_.size(); }

 private:
  std::map<std::string, Entry, std::less<>> rules_;
};

// Every built-in rule class registered (each class lives in rules/<class>.cpp).
RuleRegistry default_rules();

// Strips namespaces and decorations: "torch.nn.functional.linear" -> "linear", "Tensor.__getitem__" ->
// "getitem", "add_" -> "add", "aten::view" -> "view", "__radd__" -> "radd".
std::string normalize_op_name(std::string_view name);

// Labels the outputs of one call. Never throws for an uncovered op: it is labelled by the fallback
// rule, and unknown dimensions are counted in the result.
OpResult propagate(const RuleRegistry& rules, const OpCall& call);

// The fallback rule on its own (custom ops): an output dimension inherits the label of an input
// dimension or integer argument of equal size; a size matched by labels of different kinds is
// ambiguous (UNKNOWN, noted); no match -> UNKNOWN.
std::vector<Value> fallback_rule(RuleContext& ctx);

}  // namespace dooly::taint
