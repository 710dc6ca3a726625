#pragma once
// A tracing session as seen from an engine adapter: a table of labels addressed by integer ids (the
// adapter keeps ids on its tainted integers and tensors), integer arithmetic on labels, and op
// propagation with calls and results encoded as JSON (docs/dooly-tracing.md, "Adapter protocol").
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/taint/rules.hpp"

namespace dooly::taint {

struct SessionCounters {
  int64_t ops = 0;                // calls propagated
  int64_t fallback_ops = 0;       // calls no rule covered (labelled by the fallback rule)
  int64_t unknown_dims = 0;       // output dims/integers labelled UNKNOWN
  int64_t unlabelled_inputs = 0;  // input dims the adapter sent without a label
  int64_t ambiguous = 0;
  int64_t conflicts = 0;
};

class Session {
 public:
  Session();
  explicit Session(RuleRegistry rules);

  int64_t sym(const std::string& name, Kind kind, int64_t value);
  int64_t constant(int64_t value);
  int64_t unknown(int64_t value, const std::string& why);
  // A quantity of the given kind and observed value that depends on other labels in a way no integer
  // formula states: a function node `name(args...)` whose value form keeps the name and folds config-side
  // arguments to their values, e.g. KV_TOKS_SLIDING(sliding_window) -> "KV_TOKS_SLIDING(48)" (the tokens a
  // sliding-window layer reads: the window reaches the hash).
  int64_t derived(const std::string& name, Kind kind, int64_t value, const std::vector<int64_t>& args);
  int64_t binary(const std::string& op, int64_t a, int64_t b);
  int64_t unary(const std::string& op, int64_t a);
  const ExprPtr& label(int64_t id) const;
  // {"v": value, "k": "NUM_TOKS", "e": "NUM_TOKS*head_dim", "f": "128*NUM_TOKS"} (f = value_form text)
  nlohmann::json describe(int64_t id) const;

  // Decodes a call, propagates it and encodes the labelled outputs. Format in docs/dooly-tracing.md.
  nlohmann::json propagate(const nlohmann::json& call);
  std::string propagate_text(const std::string& call_json) {
    return propagate(nlohmann::json::parse(call_json)).dump();
  }

  const SessionCounters& counters() const noexcept { return counters_; }
  const RuleRegistry& rules() const noexcept { return rules_; }
  size_t size() const noexcept { return labels_.size(); }

 private:
  int64_t intern(ExprPtr e);
  // observed: an output as the op produced it (sizes only; labels come from the rules).
  Value decode(const nlohmann::json& j, bool observed = false);
  nlohmann::json encode(const Value& v);

  RuleRegistry rules_;
  std::vector<ExprPtr> labels_;
  SessionCounters counters_;
};

}  // namespace dooly::taint
