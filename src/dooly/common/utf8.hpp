#pragma once
// UTF-8 checks for text that readers take from files and writers put into JSON: a byte string is valid when it
// is a sequence of shortest-form code points outside the surrogates (RFC 3629).
#include <cstddef>
#include <string>
#include <string_view>

namespace dooly::utf8 {

// Length of the valid code point that starts at s[i], or 0 when the bytes there are not one.
inline size_t code_point_length(std::string_view s, size_t i) noexcept {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

// Offset of the first byte that does not start a valid code point; npos when the whole text is valid.
inline size_t first_invalid(std::string_view s) noexcept {
  for (size_t i = 0; i < s.size();) {
    const size_t n = code_point_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline bool valid(std::string_view s) noexcept { return first_invalid(s) == std::string_view::npos; }

// The text with every byte that does not start a valid code point replaced by U+FFFD.
inline std::string make_valid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = code_point_length(s, i);
    if (n == 0) {
      out.append("\xEF\xBF\xBD");
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

// User text echoed in a one-line message: control bytes (a newline in a JSON key, say) become '?', and more than
// `max` bytes end in "...".
inline std::string echo(std::string_view s, size_t max = 60) {
  std::string out;
  for (char c : s.substr(0, max)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return s.size() > max ? out + "..." : out;
}

}  // namespace dooly::utf8
