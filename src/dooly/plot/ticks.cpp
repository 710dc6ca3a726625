#include "dooly/plot/ticks.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dooly::plot {

namespace {

constexpr double kEps = 1e-9;

// Ticks k * step for the integers k with k * step in [lo, hi] (to rounding).
std::vector<Tick> linear_ticks(double lo, double hi, int max_ticks) {
  const double step = nice_step(hi - lo, max_ticks);
  std::vector<Tick> out;
  const double first = std::ceil(lo / step - kEps), last = std::floor(hi / step + kEps);
  for (double k = first; k <= last && out.size() < 1000; k += 1.0) {
    double v = k * step;
    if (std::fabs(v) < step * kEps) v = 0.0;  // no "-0"
    out.push_back({v, tick_label(v, step)});
  }
  return out;
}

bool within(double v, double lo, double hi) { return v >= lo * (1 - kEps) && v <= hi * (1 + kEps); }

std::vector<Tick> log_ticks(double lo, double hi, int max_ticks) {
  const int d0 = static_cast<int>(std::floor(std::log10(lo) + kEps));
  const int d1 = static_cast<int>(std::ceil(std::log10(hi) - kEps));
  const int decades = std::max(1, d1 - d0);
  const int stride =
      std::max(1, static_cast<int>(std::ceil(static_cast<double>(decades) / std::max(1, max_ticks - 1))));
  const bool minor = decades <= 2;  // 1, 2, 5 in each decade when there are few
  std::vector<Tick> out;
  for (int d = d0; d <= d1; ++d) {
    if (d % stride != 0) continue;
    for (double m : {1.0, 2.0, 5.0}) {
      if (m > 1.0 && !minor) break;
      const double v = m * std::pow(10.0, d);
      if (within(v, lo, hi)) out.push_back({v, fmt::format("{:g}", v)});
    }
  }
  // A range of about one decade holds two of those at most: a linear scale's ticks read better there.
  if (out.size() < 3) return linear_ticks(lo, hi, max_ticks);
  return out;
}

}  // namespace

double nice_step(double span, int max_ticks) {
  if (!(span > 0) || !std::isfinite(span)) return 1.0;
  const double raw = span / std::max(1, max_ticks - 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  if (f <= 1 + kEps) return p;
  if (f <= 2 + kEps) return 2 * p;
  if (f <= 5 + kEps) return 5 * p;
  return 10 * p;
}

Limits nice_limits(ScaleKind kind, double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (lo > hi) std::swap(lo, hi);
  if (kind == ScaleKind::log) {
    if (!(hi > 0)) return {1.0, 10.0};
    if (!(lo > 0)) lo = hi / 1000;
    const double l = std::pow(10.0, std::floor(std::log10(lo) + kEps));
    double h = std::pow(10.0, std::ceil(std::log10(hi) - kEps));
    if (h <= l) h = l * 10;
    return {l, h};
  }
  if (lo == hi) {
    const double d = lo != 0 ? std::fabs(lo) * 0.5 : 1.0;
    lo -= d;
    hi += d;
  }
  const double step = nice_step(hi - lo, max_ticks);
  return {std::floor(lo / step + kEps) * step, std::ceil(hi / step - kEps) * step};
}

std::vector<Tick> make_ticks(ScaleKind kind, double lo, double hi, int max_ticks) {
  if (lo > hi) std::swap(lo, hi);
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (kind == ScaleKind::log && lo > 0) return log_ticks(lo, hi, max_ticks);
  return linear_ticks(lo, hi, max_ticks);
}

std::string tick_label(double value, double step) {
  if (value == 0.0) return "0";
  step = std::fabs(step);
  const double mag = std::max(std::fabs(value), step);
  if (step >= 1e-4 && mag < 1e6) {
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + kEps)));
    return fmt::format("{:.{}f}", value, decimals);
  }
  const int digits = static_cast<int>(std::floor(std::log10(std::fabs(value)) + kEps) -
                                      std::floor(std::log10(step > 0 ? step : std::fabs(value)) + kEps)) +
                     1;
  return fmt::format("{:.{}g}", value, std::clamp(digits, 1, 15));
}

}  // namespace dooly::plot
