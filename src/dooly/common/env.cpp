#include "dooly/common/env.hpp"

#include <charconv>
#include <cstdlib>

#include "dooly/common/error.hpp"

namespace dooly::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<double> get_double(const char* name, double min, double max) {
  auto s = get(name);
  if (!s) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s->c_str(), &end);
  if (end == s->c_str() || *end != '\0' || !(v >= min && v <= max))
    DOOLY_THROW(InputError, fmt::format("set {} to a number between {} and {}, or unset it", name, min, max),
                "{}='{}' is not a number in [{}, {}]", name, *s, min, max);
  return v;
}

std::optional<long long> get_int(const char* name, long long min, long long max) {
  auto s = get(name);
  if (!s) return std::nullopt;
  long long v = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || p != s->data() + s->size() || v < min || v > max)
    DOOLY_THROW(InputError, fmt::format("set {} to a whole number between {} and {}, or unset it", name, min, max),
                "{}='{}' is not a whole number in [{}, {}]", name, *s, min, max);
  return v;
}

std::optional<bool> get_bool(const char* name) {
  auto s = get(name);
  if (!s) return std::nullopt;
  if (*s == "1" || *s == "true" || *s == "yes" || *s == "on") return true;
  if (*s == "0" || *s == "false" || *s == "no" || *s == "off") return false;
  DOOLY_THROW(InputError, fmt::format("set {} to 1 or 0", name), "{}='{}' is not a yes/no value", name, *s);
}

std::optional<std::vector<std::string>> get_list(const char* name) {
  auto s = get(name);
  if (!s) return std::nullopt;
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = s->find(',', start);
    std::string item = s->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty())
      DOOLY_THROW(InputError, fmt::format("write {} as a comma-separated list without empty items", name),
                  "{}='{}' has an empty item", name, *s);
    out.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace dooly::env
