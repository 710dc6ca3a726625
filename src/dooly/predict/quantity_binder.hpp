#pragma once
// The values of named step quantities for a composition, in one pass over its requests: what
// plan::Composition::value_of gives (NUM_TOKS, NUM_REQS, KV_TOKS, MAX_SEQLEN_Q, MAX_SEQLEN_K and their
// _SLIDING(w) forms), plus the engine's PREFILL_TOKS and DECODE_REQS (Composition::prefill_tokens and
// decode_requests). value_of stays the definition: a binder checks its own rules against it on sample compositions
// when it is made, and binds a name it has no rule for (or whose rule disagrees) through value_of.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dooly/plan/composition.hpp"

namespace dooly::predict {

class QuantityBinder {
 public:
  QuantityBinder() = default;
  explicit QuantityBinder(const std::vector<std::string>& names);

  // The reference definition: value_of, then PREFILL_TOKS and DECODE_REQS; nullopt for a name it does not define.
  static std::optional<int64_t> value(const plan::Composition& c, const std::string& name);

  size_t size() const noexcept { return rules_.size(); }
  // What the same pass sees of the step's kind.
  struct Shape {
    bool any_context = false;  // some request has cached context
    bool all_decode = false;   // every request adds one token to cached context (and there is one)
  };
  // values[i] = the value of names[i] (0 for a name the composition does not define). No allocation for names
  // with a rule.
  Shape bind(const plan::Composition& c, int64_t* values) const noexcept;

 private:
  enum class Kind : uint8_t { tokens, requests, kv_sum, max_q, kv_max, prefill_tokens, decode_requests, other };
  struct Rule {
    Kind kind = Kind::other;
    int64_t window = 0;  // kv_sum, kv_max: at most window - 1 cached tokens per request (0: all)
    std::string name;
  };
  static Rule rule_for(const std::string& name);
  std::vector<Rule> rules_;
};

}  // namespace dooly::predict
