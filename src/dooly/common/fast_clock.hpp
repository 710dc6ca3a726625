#pragma once
// The hooks' clock. Where the CPU has an invariant time-stamp counter (constant_tsc + nonstop_tsc), a hook
// reads it (~9 ns) instead of steady_clock (~21 ns); the sampler thread maps ticks onto dooly's one clock
// (steady_clock ns) from pairs of both read together at every tick, so everything downstream still sees
// steady ns (docs/design.md, "One clock": converted once, at the boundary). Elsewhere ticks are steady ns.
#include <cstdint>
#include <utility>

#include "dooly/common/clock.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace dooly {

// True when ticks() reads the TSC. Decided once per process (DOOLY_TSC=0 turns it off).
bool tsc_ticks() noexcept;

// The TSC when `tsc`, else steady ns: for callers that keep tsc_ticks() at hand (the event rings).
inline uint64_t read_ticks(bool tsc) noexcept {
#if defined(__x86_64__)
  if (tsc) return __rdtsc();
#else
  (void)tsc;
#endif
  return static_cast<uint64_t>(now_ns());
}

inline uint64_t ticks() noexcept {
  static const bool tsc = tsc_ticks();
  return read_ticks(tsc);
}

// Maps ticks to steady ns along the line through the last two calibration pairs (taken by one thread, e.g. at
// every sampler tick, so events drained at a tick are interpolated between it and the previous one).
class TickConverter {
 public:
  // A pair (ticks, steady ns) read back to back, as tightly as possible.
  static std::pair<uint64_t, int64_t> read_pair() noexcept;
  void calibrate() noexcept;                  // takes a pair and keeps it with the previous one
  void calibrate_initial() noexcept;          // two pairs 1 ms apart: a first rate before the sampler's ticks
  int64_t to_ns(uint64_t t) const noexcept {  // once per event on the sampler thread: inline, no division
    if (!tsc_) return static_cast<int64_t>(t);
    if (pairs_ < 2) return ns1_;  // no rate yet (start() takes two pairs a millisecond apart)
    // The difference in integers, then one signed conversion (an unsigned 64-bit one is a dozen instructions on
    // x86-64, and two of them ran for every event); exact, and negative for stamps before the last pair.
    return ns1_ + static_cast<int64_t>(ns_per_tick_ * static_cast<double>(static_cast<int64_t>(t - t1_)));
  }

 private:
  bool tsc_ = tsc_ticks();
  uint64_t t0_ = 0, t1_ = 0;
  int64_t ns0_ = 0, ns1_ = 0;
  double ns_per_tick_ = 1.0;
  int pairs_ = 0;
};

}  // namespace dooly
