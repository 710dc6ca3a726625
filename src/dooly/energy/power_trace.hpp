#pragma once
// One channel's power readings as a piecewise-linear function of time, kept with its running integral so that
// the energy up to any covered instant, E(t), is exact and O(log n); the integral over [a, b] is E(b) - E(a).
// Old readings are trimmed, so memory stays bounded however long the run.
#include <cstdint>
#include <cstddef>
#include <deque>

namespace dooly::energy {

class PowerTrace {
 public:
  // Appends a reading; returns false (and drops it) unless t_ns is strictly after the last reading.
  bool append(int64_t t_ns, double power_w);

  bool empty() const noexcept { return points_.empty(); }
  size_t size() const noexcept { return points_.size(); }
  int64_t first_t() const noexcept { return points_.front().t_ns; }
  int64_t last_t() const noexcept { return points_.back().t_ns; }
  double last_power_w() const noexcept { return points_.back().power_w; }

  // Energy (J) from the first reading ever appended to t. Outside the readings the power is held constant
  // (first value before, last value after); `extrapolated` is set when that happened.
  double energy_j(int64_t t_ns, bool* extrapolated = nullptr) const;
  // Power at t, linearly interpolated (held constant outside).
  double power_w(int64_t t_ns) const;

  // Drops readings before t_ns, keeping the last one at or before it so E(t >= t_ns) stays exact.
  void trim_before(int64_t t_ns);

 private:
  struct Point {
    int64_t t_ns;
    double power_w;
    double energy_j;  // integral from the first reading ever appended up to t_ns
  };
  std::deque<Point> points_;
  bool trimmed_ = false;
  double first_power_w_ = 0.0;  // for extrapolation before the first reading
  int64_t origin_t_ns_ = 0;
};

}  // namespace dooly::energy
