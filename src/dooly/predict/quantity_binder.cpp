#include "dooly/predict/quantity_binder.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace dooly::predict {
namespace {

// "KV_TOKS_SLIDING(48)" -> 48 after the prefix; 0 when the rest is not "(w)" with w >= 1.
int64_t window_of(std::string_view rest) {
  if (rest.size() < 3 || rest.front() != '(' || rest.back() != ')') return 0;
  int64_t w = 0;
  const auto [end, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size() - 1, w);
  return ec == std::errc() && end == rest.data() + rest.size() - 1 && w >= 1 ? w : 0;
}

// Compositions the rules are checked on: prefill, decodes, a mix, contexts around small windows.
const std::vector<plan::Composition>& samples() {
  static const std::vector<plan::Composition> s{
      {{{300, 0}, {150, 0}, {71, 0}}},
      {{{1, 300}, {1, 150}, {129, 71}}},
      {{{1, 5}, {1, 4096}, {1, 1}, {7, 0}, {3, 40}}},
      {{{1, 1}}},
  };
  return s;
}

}  // namespace

std::optional<int64_t> QuantityBinder::value(const plan::Composition& c, const std::string& name) {
  if (auto v = c.value_of(name)) return v;
  if (name == "PREFILL_TOKS") return c.prefill_tokens();
  if (name == "DECODE_REQS") return c.decode_requests();
  return std::nullopt;
}

QuantityBinder::Rule QuantityBinder::rule_for(const std::string& name) {
  constexpr std::string_view kv = "KV_TOKS_SLIDING", maxk = "MAX_SEQLEN_K_SLIDING";
  const std::string_view n = name;
  if (n == "NUM_TOKS") return {Kind::tokens, 0, name};
  if (n == "NUM_REQS") return {Kind::requests, 0, name};
  if (n == "KV_TOKS") return {Kind::kv_sum, 0, name};
  if (n == "MAX_SEQLEN_Q") return {Kind::max_q, 0, name};
  if (n == "MAX_SEQLEN_K") return {Kind::kv_max, 0, name};
  if (n == "PREFILL_TOKS") return {Kind::prefill_tokens, 0, name};
  if (n == "DECODE_REQS") return {Kind::decode_requests, 0, name};
  if (n.substr(0, kv.size()) == kv && window_of(n.substr(kv.size())) > 0)
    return {Kind::kv_sum, window_of(n.substr(kv.size())), name};
  if (n.substr(0, maxk.size()) == maxk && window_of(n.substr(maxk.size())) > 0)
    return {Kind::kv_max, window_of(n.substr(maxk.size())), name};
  return {Kind::other, 0, name};
}

QuantityBinder::QuantityBinder(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    Rule r = rule_for(name);
    QuantityBinder one;
    one.rules_.push_back(r);
    for (const plan::Composition& c : samples()) {
      int64_t v = 0;
      one.bind(c, &v);
      if (r.kind != Kind::other && value(c, name).value_or(-1) != v) r.kind = Kind::other;  // keep value_of's word
    }
    rules_.push_back(r);
  }
}

QuantityBinder::Shape QuantityBinder::bind(const plan::Composition& c, int64_t* values) const noexcept {
  int64_t tokens = 0, max_q = 0, prefill = 0, decodes = 0;
  Shape shape;
  for (const plan::RequestSlice& r : c.requests) {
    tokens += r.new_tokens;
    max_q = std::max(max_q, r.new_tokens);
    shape.any_context = shape.any_context || r.context > 0;
    if (r.new_tokens == 1 && r.context > 0)
      ++decodes;
    else
      prefill += r.new_tokens;
  }
  shape.all_decode = !c.requests.empty() && decodes == c.num_requests();
  for (size_t i = 0; i < rules_.size(); ++i) {
    const Rule& rule = rules_[i];
    int64_t v = 0;
    switch (rule.kind) {
      case Kind::tokens:
        v = tokens;
        break;
      case Kind::requests:
        v = c.num_requests();
        break;
      case Kind::max_q:
        v = max_q;
        break;
      case Kind::prefill_tokens:
        v = prefill;
        break;
      case Kind::decode_requests:
        v = decodes;
        break;
      case Kind::kv_sum:
      case Kind::kv_max: {
        const int64_t cap = rule.window > 0 ? rule.window - 1 : INT64_MAX / 4;
        for (const plan::RequestSlice& r : c.requests) {
          const int64_t read = std::min(r.context, cap) + r.new_tokens;
          v = rule.kind == Kind::kv_sum ? v + read : std::max(v, read);
        }
        break;
      }
      case Kind::other:
        try {
          v = value(c, rule.name).value_or(0);
        } catch (...) {  // value_of allocates at most for a name it parses; predict() stays noexcept regardless
          v = 0;
        }
        break;
    }
    values[i] = v;
  }
  return shape;
}

}  // namespace dooly::predict
