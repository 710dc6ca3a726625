#include "dooly/energy/power_trace.hpp"

#include <algorithm>

#include "dooly/common/time_math.hpp"

namespace dooly::energy {

bool PowerTrace::append(int64_t t_ns, double power_w) {
  if (points_.empty() && !trimmed_) {
    first_power_w_ = power_w;
    points_.push_back({t_ns, power_w, 0.0, 0.0});
    return true;
  }
  Point& last = points_.back();
  if (t_ns <= last.t_ns) return false;
  const double dt_ns = diff_ns(t_ns, last.t_ns);
  last.slope_w_per_ns = (power_w - last.power_w) / dt_ns;
  const Point next{t_ns, power_w, last.energy_j + 0.5 * (last.power_w + power_w) * dt_ns * 1e-9, 0.0};
  points_.push_back(next);
  return true;
}

double PowerTrace::energy_j_located(int64_t t_ns, bool* extrapolated) const {
  if (points_.empty()) {
    if (extrapolated) *extrapolated = true;
    return 0.0;
  }
  const Point& last = points_.back();
  if (t_ns >= last.t_ns) {
    if (extrapolated && t_ns > last.t_ns) *extrapolated = true;
    return last.energy_j + last.power_w * diff_ns(t_ns, last.t_ns) * 1e-9;
  }
  const Point& first = points_.front();
  if (t_ns < first.t_ns) {
    // Before every kept reading. Only meaningful before the very first reading (trim keeps what is needed).
    if (extrapolated) *extrapolated = true;
    return first.energy_j - first_power_w_ * diff_ns(first.t_ns, t_ns) * 1e-9;
  }
  return points_[locate(t_ns)].integral_to(t_ns);
}

size_t PowerTrace::locate(int64_t t_ns) const noexcept {
  // Precondition: front().t_ns <= t_ns < back().t_ns. Consecutive queries are mostly in one interval or a few
  // readings later: walk from the cursor, binary search beyond that.
  size_t i = cursor_ + 1 < points_.size() && points_[cursor_].t_ns <= t_ns ? cursor_ : 0;
  for (int step = 0; step < 4 && points_[i + 1].t_ns <= t_ns; ++step) ++i;
  if (points_[i + 1].t_ns <= t_ns) {
    auto it = std::upper_bound(points_.begin() + static_cast<std::ptrdiff_t>(i), points_.end(), t_ns,
                               [](int64_t t, const Point& p) { return t < p.t_ns; });
    i = static_cast<size_t>(it - points_.begin()) - 1;
  }
  cursor_ = i;
  at_ = points_[i];
  at_end_ns_ = points_[i + 1].t_ns;
  return i;
}

double PowerTrace::power_w(int64_t t_ns) const {
  if (points_.empty()) return 0.0;
  if (t_ns <= points_.front().t_ns) return points_.front().power_w;
  if (t_ns >= points_.back().t_ns) return points_.back().power_w;
  const size_t i = locate(t_ns);
  const Point& a = points_[i];
  return a.power_w + a.slope_w_per_ns * diff_ns(t_ns, a.t_ns);
}

void PowerTrace::trim_before(int64_t t_ns) {
  while (points_.size() > 2 && points_[1].t_ns <= t_ns) {
    points_.pop_front();
    trimmed_ = true;
    cursor_ = cursor_ > 0 ? cursor_ - 1 : 0;
  }
}

}  // namespace dooly::energy
