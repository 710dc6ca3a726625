#pragma once
// Differences of nanosecond stamps without signed overflow: t1 - t0 of two int64 stamps can exceed int64
// (INT64_MAX - INT64_MIN); where it does, the difference is taken in double (rounded, never undefined).
#include <cstdint>

namespace dooly {

// (a - b) as a double; exact whenever the difference fits in int64 and in double's 53 bits.
inline double diff_ns(int64_t a, int64_t b) noexcept {
  int64_t d = 0;
  if (!__builtin_sub_overflow(a, b, &d)) return static_cast<double>(d);
  return static_cast<double>(a) - static_cast<double>(b);
}

}  // namespace dooly
