#pragma once
// Every figure of two attributor reports compared, for tests that feed one stream two ways.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "dooly/energy/report.hpp"

namespace dooly::energy {

// a and b at most `ulps` representable doubles apart (0: the same value; two NaNs count as alike).
inline bool within_ulps(double a, double b, int64_t ulps) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return true;
  if (ulps == 0 || std::isnan(a) || std::isnan(b) || std::signbit(a) != std::signbit(b)) return false;
  int64_t ia = 0, ib = 0;  // same sign: the bit patterns order like the magnitudes
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return std::llabs(ia - ib) <= ulps;
}

// "" when every figure agrees (to `ulps`), else the first that does not.
inline std::string first_difference(const Report& x, const Report& y, int64_t ulps = 0) {
  auto same = [ulps](const std::optional<double>& a, const std::optional<double>& b) {
    return a.has_value() == b.has_value() && (!a || within_ulps(*a, *b, ulps));
  };
  if (x.unmatched_events != y.unmatched_events) return "unmatched events";
  if (x.channels.size() != y.channels.size()) return "channel count";
  for (size_t c = 0; c < x.channels.size(); ++c) {
    const ChannelReport &p = x.channels[c], &q = y.channels[c];
    const std::string ch = "channel " + std::to_string(c) + ": ";
    if (!same(p.baseline_w, q.baseline_w) || p.baseline_method != q.baseline_method) return ch + "baseline";
    if (!same(p.run_time_s, q.run_time_s) || p.samples != q.samples || p.samples_dropped != q.samples_dropped)
      return ch + "run time or samples";
    if (!same(p.conservation.run_energy_j, q.conservation.run_energy_j)) return ch + "run energy";
    if (!same(p.conservation.attributed_j, q.conservation.attributed_j)) return ch + "attributed energy";
    if (!same(p.conservation.unattributed_j, q.conservation.unattributed_j)) return ch + "unattributed energy";
    if (!same(p.conservation.counter_delta_j, q.conservation.counter_delta_j)) return ch + "counter delta";
    const auto &f = p.fit, &g = q.fit;
    if (f.fitted != g.fitted || f.why_not != g.why_not || f.samples != g.samples || !same(f.intercept_w, g.intercept_w) ||
        !same(f.residual_rms_w, g.residual_rms_w) || !same(f.r_squared, g.r_squared) || f.columns != g.columns ||
        f.keys_over_cap != g.keys_over_cap)
      return ch + "model fit";
    if (p.rows.size() != q.rows.size()) return ch + "row count";
    for (size_t i = 0; i < p.rows.size(); ++i) {
      const RegionRow &a = p.rows[i], &b = q.rows[i];
      if (a.name != b.name || a.calls != b.calls || a.short_windows != b.short_windows ||
          a.extrapolated_windows != b.extrapolated_windows || !same(a.time_s, b.time_s) || !same(a.energy_j, b.energy_j) ||
          !same(a.excl_time_s, b.excl_time_s) || !same(a.excl_energy_j, b.excl_energy_j) ||
          !same(a.model_power_w, b.model_power_w) || !same(a.model_energy_j, b.model_energy_j) ||
          !same(a.model_excl_energy_j, b.model_excl_energy_j) || a.model_inseparable != b.model_inseparable ||
          a.model_too_little_data != b.model_too_little_data)
        return ch + "row " + a.name;
    }
  }
  return "";
}

}  // namespace dooly::energy
