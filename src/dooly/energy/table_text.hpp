#pragma once
// The text pieces the report's writers (report_writers.cpp) and the ranks' writers (rank_writers.cpp) share: a
// name shortened for a table column, a figure in readable digits, CSV quoting and full-precision CSV numbers.
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace dooly::energy::table_text {

// "abcdef...uvwxyz": head and tail kept, the middle elided, at most `width` characters.
inline std::string shorten(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  const size_t head = (width - 3) / 2, tail = width - 3 - head;
  return name.substr(0, head) + "..." + name.substr(name.size() - tail);
}

// Significant digits that stay readable from microjoules to kilojoules.
inline std::string compact(double v) {
  const double a = std::fabs(v);
  if (a < 1e-12) return "0";  // rounding residue of a subtraction, not a figure
  if (a >= 100) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.3f}", v);
  return fmt::format("{:.3g}", v);
}

inline std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + '"';
}

// A CSV number that reads back exactly; an absent figure is an empty field.
inline std::string num(double v) { return fmt::format("{:.17g}", v); }
inline std::string num(std::optional<double> v) { return v ? num(*v) : std::string(); }

}  // namespace dooly::energy::table_text
