#pragma once
// The line-level reading shared by dooly's text formats (the recording, power/replay/readings_format.hpp and
// energy/recording.hpp): comma-separated fields, checked numbers and text, and errors that name file:line
// and the field. Header-only so that every library may use it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <istream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly {

// Splits on commas into at most max_fields fields; the last one keeps the rest of the line (free text, or
// the surplus of a line with too many fields, which expect_fields then reports without a long vector).
inline std::vector<std::string_view> split_fields(std::string_view s, size_t max_fields) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    if (out.size() + 1 == max_fields) {
      out.push_back(s.substr(start));
      break;
    }
    const size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(s.substr(start));
      break;
    }
    out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Checks one line's fields; every failure is an InputError "<file>:<line>: <problem>" with a fix.
class LineReader {
 public:
  LineReader(const std::string& path, size_t line) : path_(path), line_(line) {}

  size_t line() const noexcept { return line_; }

  [[noreturn]] void fail(const std::string& what, const std::string& fix) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line_, what), fix);
  }

  template <typename Int>
  Int integer(std::string_view text, std::string_view field, Int min = std::numeric_limits<Int>::min(),
              Int max = std::numeric_limits<Int>::max()) const {
    Int v{};
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < min)
      fail(fmt::format("{} is '{}', not a whole number{}", field, shorten(text),
                       min == 0 ? " >= 0" : (min == std::numeric_limits<Int>::min() ? "" : fmt::format(" >= {}", min))),
           fmt::format("write {} as a plain integer", field));
    if (v > max)
      fail(fmt::format("{} is {}, above the format's limit of {}", field, v, max),
           fmt::format("write {} no larger than {} (the format's bound)", field, max));
    return v;
  }

  double real(std::string_view text, std::string_view field, double min, double max) const {
    double v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
      fail(fmt::format("{} is '{}', not a finite number", field, shorten(text)),
           fmt::format("write {} as a decimal number such as 123.5", field));
    if (v < min || v > max)
      fail(fmt::format("{} is {}, outside [{}, {}]", field, v, min, max),
           fmt::format("write {} within [{}, {}] (the format's bound)", field, min, max));
    return v;
  }

  // Free text must be UTF-8 (reports print it and JSON carries it).
  std::string text(std::string_view value, std::string_view field) const {
    if (const size_t at = utf8::first_invalid(value); at != std::string_view::npos)
      fail(fmt::format("{} is not valid UTF-8 (byte {} of it)", field, at + 1),
           fmt::format("write {} as UTF-8 text (dooly's writer replaces invalid bytes with U+FFFD)", field));
    return std::string(value);
  }

  void expect_fields(const std::vector<std::string_view>& f, size_t lo, size_t hi, std::string_view form) const {
    if (f.size() < lo || f.size() > hi)
      fail(fmt::format("this '{}' line has {}{} fields; expected {}", shorten(f[0]), f.size() > hi ? "more than " : "",
                       f.size() > hi ? hi : f.size(), form),
           fmt::format("write it as {}", form));
  }

  static std::string shorten(std::string_view s) {
    return fmt::format("{}{}", s.substr(0, 40), s.size() > 40 ? "..." : "");
  }

 private:
  const std::string& path_;
  size_t line_;
};

// Calls on_line(number, text) for every line (1-based, a trailing '\r' dropped) and returns the number of
// lines. A read error is an InputError: getline stops on it as at the end, and the file would read short.
template <typename OnLine>
size_t for_each_line(std::istream& in, const std::string& path, OnLine&& on_line) {
  std::string text;
  size_t no = 0;
  while (std::getline(in, text)) {
    ++no;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    on_line(no, text);
  }
  if (in.bad())
    DOOLY_THROW(InputError, "check the disk and the file, then run again",
                "{}:{}: reading the file failed after line {}", path, no + 1, no);
  return no;
}

}  // namespace dooly
