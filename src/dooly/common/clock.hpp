#pragma once
// One clock for the whole process (docs/design.md, "One clock"): steady_clock nanoseconds.
// Sources that stamp with wall-clock time convert once, at their boundary, through WallToSteady.
#include <time.h>

#include <chrono>
#include <cstdint>

namespace dooly {

inline int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time the calling thread has used (not on dooly's clock: for cost accounting only).
inline int64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t wall_now_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Maps microseconds since the epoch (NVML, Variorum) onto the steady clock. The offset is taken once,
// from the tightest of a few back-to-back reads of both clocks, so every converted stamp shares it.
class WallToSteady {
 public:
  WallToSteady() noexcept { calibrate(); }
  explicit WallToSteady(int64_t offset_ns) noexcept : offset_ns_(offset_ns) {}

  void calibrate() noexcept {
    int64_t best_gap = INT64_MAX;
    for (int i = 0; i < 5; ++i) {
      const int64_t s0 = now_ns();
      const int64_t w = wall_now_us();
      const int64_t s1 = now_ns();
      if (s1 - s0 < best_gap) {
        best_gap = s1 - s0;
        offset_ns_ = (s0 + (s1 - s0) / 2) - w * 1000;
      }
    }
  }
  int64_t steady_ns(int64_t wall_us) const noexcept { return wall_us * 1000 + offset_ns_; }
  int64_t offset_ns() const noexcept { return offset_ns_; }

 private:
  int64_t offset_ns_ = 0;
};

}  // namespace dooly
