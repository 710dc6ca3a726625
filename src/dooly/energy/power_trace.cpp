#include "dooly/energy/power_trace.hpp"

#include <algorithm>

namespace dooly::energy {

bool PowerTrace::append(int64_t t_ns, double power_w) {
  if (points_.empty() && !trimmed_) {
    origin_t_ns_ = t_ns;
    first_power_w_ = power_w;
    points_.push_back({t_ns, power_w, 0.0});
    return true;
  }
  const Point& last = points_.back();
  if (t_ns <= last.t_ns) return false;
  const double dt_s = static_cast<double>(t_ns - last.t_ns) * 1e-9;
  points_.push_back({t_ns, power_w, last.energy_j + 0.5 * (last.power_w + power_w) * dt_s});
  return true;
}

double PowerTrace::energy_j(int64_t t_ns, bool* extrapolated) const {
  if (points_.empty()) {
    if (extrapolated) *extrapolated = true;
    return 0.0;
  }
  const Point& last = points_.back();
  if (t_ns >= last.t_ns) {
    if (extrapolated && t_ns > last.t_ns) *extrapolated = true;
    return last.energy_j + last.power_w * static_cast<double>(t_ns - last.t_ns) * 1e-9;
  }
  const Point& first = points_.front();
  if (t_ns < first.t_ns) {
    // Before every kept reading. Only meaningful before the very first reading (trim keeps what is needed).
    if (extrapolated) *extrapolated = true;
    return first.energy_j - first_power_w_ * static_cast<double>(first.t_ns - t_ns) * 1e-9;
  }
  // Last point with t <= t_ns.
  auto it = std::upper_bound(points_.begin(), points_.end(), t_ns,
                             [](int64_t t, const Point& p) { return t < p.t_ns; });
  const Point& a = *(it - 1);
  if (a.t_ns == t_ns) return a.energy_j;
  const Point& b = *it;
  const double frac = static_cast<double>(t_ns - a.t_ns) / static_cast<double>(b.t_ns - a.t_ns);
  const double p_t = a.power_w + frac * (b.power_w - a.power_w);
  return a.energy_j + 0.5 * (a.power_w + p_t) * static_cast<double>(t_ns - a.t_ns) * 1e-9;
}

double PowerTrace::power_w(int64_t t_ns) const {
  if (points_.empty()) return 0.0;
  if (t_ns <= points_.front().t_ns) return points_.front().power_w;
  if (t_ns >= points_.back().t_ns) return points_.back().power_w;
  auto it = std::upper_bound(points_.begin(), points_.end(), t_ns,
                             [](int64_t t, const Point& p) { return t < p.t_ns; });
  const Point& a = *(it - 1);
  const Point& b = *it;
  const double frac = static_cast<double>(t_ns - a.t_ns) / static_cast<double>(b.t_ns - a.t_ns);
  return a.power_w + frac * (b.power_w - a.power_w);
}

void PowerTrace::trim_before(int64_t t_ns) {
  while (points_.size() > 2 && points_[1].t_ns <= t_ns) {
    points_.pop_front();
    trimmed_ = true;
  }
}

}  // namespace dooly::energy
