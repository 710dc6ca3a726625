#include "dooly/plan/composition.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace dooly::plan {
namespace {

// "KV_TOKS_SLIDING(48)" -> ("KV_TOKS", 48); nullopt for anything else.
std::optional<std::pair<std::string, int64_t>> sliding(const std::string& name) {
  constexpr std::string_view suffix = "_SLIDING(";
  const size_t at = name.find(suffix);
  if (at == std::string::npos || name.back() != ')') return std::nullopt;
  int64_t w = 0;
  const char* first = name.data() + at + suffix.size();
  const char* last = name.data() + name.size() - 1;
  auto [ptr, ec] = std::from_chars(first, last, w);
  if (ec != std::errc() || ptr != last || w < 1) return std::nullopt;
  return std::make_pair(name.substr(0, at), w);
}

}  // namespace

int64_t Composition::num_tokens() const noexcept {
  int64_t n = 0;
  for (const auto& r : requests) n += r.new_tokens;
  return n;
}

int64_t Composition::prefill_tokens() const noexcept {
  int64_t n = 0;
  for (const auto& r : requests)
    if (r.new_tokens > 1 || r.context == 0) n += r.new_tokens;
  return n;
}

int64_t Composition::decode_requests() const noexcept {
  int64_t n = 0;
  for (const auto& r : requests)
    if (r.new_tokens == 1 && r.context > 0) ++n;
  return n;
}

std::optional<int64_t> Composition::value_of(const std::string& name) const {
  auto read_sum = [&](int64_t window) {
    int64_t n = 0;
    for (const auto& r : requests) n += std::min(r.context, window - 1) + r.new_tokens;
    return n;
  };
  auto read_max = [&](int64_t window) {
    int64_t n = 0;
    for (const auto& r : requests) n = std::max(n, std::min(r.context, window - 1) + r.new_tokens);
    return n;
  };
  constexpr int64_t all = INT64_MAX / 4;
  if (name == "NUM_TOKS") return num_tokens();
  if (name == "NUM_REQS") return num_requests();
  if (name == "KV_TOKS") return read_sum(all);
  if (name == "MAX_SEQLEN_K") return read_max(all);
  if (name == "MAX_SEQLEN_Q") {
    int64_t n = 0;
    for (const auto& r : requests) n = std::max(n, r.new_tokens);
    return n;
  }
  if (auto s = sliding(name)) {
    if (s->first == "KV_TOKS") return read_sum(s->second);
    if (s->first == "MAX_SEQLEN_K") return read_max(s->second);
  }
  return std::nullopt;
}

bool is_step_quantity(const std::string& name) {
  if (name == "NUM_TOKS" || name == "NUM_REQS" || name == "KV_TOKS" || name == "MAX_SEQLEN_Q" || name == "MAX_SEQLEN_K")
    return true;
  const auto s = sliding(name);
  return s && (s->first == "KV_TOKS" || s->first == "MAX_SEQLEN_K");
}

bool is_limit(const std::string& name) {
  return name == "MAX_NUM_TOKS" || name == "MAX_NUM_REQS" || name == "CACHE_SLOTS";
}

}  // namespace dooly::plan
