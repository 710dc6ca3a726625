#include "dooly/predict/composition_text.hpp"

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::predict {
namespace {

constexpr int64_t kMaxRequests = 1 << 20;

// A whole non-negative integer, or nullopt.
std::optional<int64_t> number(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_item(std::string_view text, std::string_view item) {
  DOOLY_THROW(InputError,
              "write each request as [COUNTx]NEW[@CONTEXT], e.g. '512' (a prefill chunk) or '8x1@1024' (eight "
              "decodes at 1024 cached tokens), separated by commas",
              "composition '{}': '{}' is not a request", text, item);
}

void add_item(std::string_view text, std::string_view item, plan::Composition& c) {
  std::optional<int64_t> count = 1, context = 0;
  const size_t x = item.find('x');
  if (x != std::string_view::npos) {
    count = number(item.substr(0, x));
    item.remove_prefix(x + 1);
  }
  const size_t at = item.find('@');
  const std::optional<int64_t> fresh = number(item.substr(0, at));
  if (at != std::string_view::npos) context = number(item.substr(at + 1));
  if (!count || !fresh || !context || *count < 1 || *fresh < 1 || *count > kMaxRequests) bad_item(text, item);
  for (int64_t i = 0; i < *count; ++i) c.requests.push_back({*fresh, *context});
}

}  // namespace

plan::Composition parse_composition(std::string_view text) {
  plan::Composition c;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) bad_item(text, item);
    add_item(text, item, c);
    if (c.num_requests() > kMaxRequests)
      DOOLY_THROW(InputError, "a step holds at most a million requests", "composition '{}' has too many", text);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return c;
}

std::string format_composition(const plan::Composition& c) {
  std::string out;
  for (size_t i = 0; i < c.requests.size();) {
    size_t j = i;
    while (j < c.requests.size() && c.requests[j].new_tokens == c.requests[i].new_tokens &&
           c.requests[j].context == c.requests[i].context)
      ++j;
    if (!out.empty()) out += ',';
    if (j - i > 1) out += fmt::format("{}x", j - i);
    out += std::to_string(c.requests[i].new_tokens);
    if (c.requests[i].context > 0) out += fmt::format("@{}", c.requests[i].context);
    i = j;
  }
  return out;
}

}  // namespace dooly::predict
