#include "dooly/cupti/gpu_clock.hpp"

#include <cstdlib>

#include "dooly/common/clock.hpp"

namespace dooly::cupti {

GpuClock::GpuClock(Read read_gpu_ns) : read_(std::move(read_gpu_ns)) { calibrate(); }

void GpuClock::calibrate() noexcept {
  int64_t best_bracket = INT64_MAX, offset = offset_ns_;
  for (int i = 0; i < 5; ++i) {
    const int64_t s0 = now_ns();
    const auto g = static_cast<int64_t>(read_());
    const int64_t s1 = now_ns();
    if (s1 - s0 < best_bracket) {
      best_bracket = s1 - s0;
      offset = s0 + (s1 - s0) / 2 - g;
    }
  }
  if (calibrations_ == 0) {
    first_offset_ns_ = offset;
  } else if (std::llabs(offset - offset_ns_) > max_step_ns_) {
    max_step_ns_ = std::llabs(offset - offset_ns_);
  }
  if (best_bracket > max_bracket_ns_) max_bracket_ns_ = best_bracket;
  offset_ns_ = offset;
  ++calibrations_;
}

}  // namespace dooly::cupti
