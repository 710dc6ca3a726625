#pragma once
// CUPTI stamps its records on its own clock (cuptiGetTimestamp, ns). They are converted once, when a buffer is
// read, onto the one clock (steady_clock ns): steady = cupti + offset, the offset taken from the tightest of a
// few back-to-back reads (steady, CUPTI, steady) at start and again whenever the tracer flushes, so the
// conversion follows a drift between the two clocks. The first and last offsets, the largest change between two
// calibrations and the widest bracket are kept for the report ("the residual").
#include <cstdint>
#include <functional>

namespace dooly::cupti {

class GpuClock {
 public:
  using Read = std::function<uint64_t()>;  // CUPTI's clock now (ns)
  explicit GpuClock(Read read_gpu_ns);

  void calibrate() noexcept;
  int64_t to_steady_ns(uint64_t gpu_ns) const noexcept { return static_cast<int64_t>(gpu_ns) + offset_ns_; }

  int64_t offset_ns() const noexcept { return offset_ns_; }
  int64_t first_offset_ns() const noexcept { return first_offset_ns_; }
  int64_t max_step_ns() const noexcept { return max_step_ns_; }        // largest |offset change| between calibrations
  int64_t max_bracket_ns() const noexcept { return max_bracket_ns_; }  // widest (steady, CUPTI, steady) bracket used
  uint64_t calibrations() const noexcept { return calibrations_; }

 private:
  Read read_;
  int64_t offset_ns_ = 0, first_offset_ns_ = 0, max_step_ns_ = 0, max_bracket_ns_ = 0;
  uint64_t calibrations_ = 0;
};

}  // namespace dooly::cupti
