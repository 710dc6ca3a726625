#pragma once
// One channel's power readings as a piecewise-linear function of time, kept with its running integral so that
// the energy up to any covered instant, E(t), is exact; the integral over [a, b] is E(b) - E(a). Queries in time
// order (the attributor's) cost O(1) through a cursor, others O(log n). Old readings are trimmed, so memory
// stays bounded however long the run.
#include <cstddef>
#include <cstdint>

#include "dooly/common/fifo.hpp"
#include "dooly/common/time_math.hpp"

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
  double energy_j(int64_t t_ns, bool* extrapolated = nullptr) const {
    // Fast path: t in the reading interval the previous query found (time-ordered queries mostly are).
    if (at_.t_ns <= t_ns && t_ns < at_end_ns_) return at_.integral_to(t_ns);
    return energy_j_located(t_ns, extrapolated);
  }
  // Power at t, linearly interpolated (held constant outside).
  double power_w(int64_t t_ns) const;

  // Drops readings before t_ns, keeping the last one at or before it so E(t >= t_ns) stays exact.
  void trim_before(int64_t t_ns);

 private:
  struct Point {
    int64_t t_ns;
    double power_w;
    double energy_j;        // integral from the first reading ever appended up to t_ns
    double slope_w_per_ns;  // towards the next reading (0 for the last)
    // E(t) for t from here to the next reading: the trapezoid up to the power interpolated at t.
    double integral_to(int64_t t) const noexcept {
      const double dt = diff_ns(t, t_ns);
      return energy_j + (power_w + 0.5 * slope_w_per_ns * dt) * dt * 1e-9;
    }
  };
  double energy_j_located(int64_t t_ns, bool* extrapolated) const;
  // Index of the last point at or before t for the reading interval that holds t (the cursor).
  size_t locate(int64_t t_ns) const noexcept;

  Fifo<Point> points_;
  mutable size_t cursor_ = 0;  // index of the point the last in-range query found
  // A copy of that point and where its interval ends (a point's values are final once the next one is
  // appended, and trimming moves no value): the fast path reads these alone. Empty (end INT64_MIN) at first.
  mutable Point at_{0, 0.0, 0.0, 0.0};
  mutable int64_t at_end_ns_ = INT64_MIN;
  bool trimmed_ = false;
  double first_power_w_ = 0.0;  // for extrapolation before the first reading
};

}  // namespace dooly::energy
