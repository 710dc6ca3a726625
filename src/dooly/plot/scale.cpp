#include "dooly/plot/scale.hpp"

#include <cmath>
#include <limits>

namespace dooly::plot {

namespace {
double forward(ScaleKind kind, double v) { return kind == ScaleKind::log ? std::log10(v) : v; }
}  // namespace

bool Scale::drawable(double v) const noexcept { return std::isfinite(v) && (kind_ == ScaleKind::linear || v > 0); }

double Scale::to_px(double v) const noexcept {
  if (kind_ == ScaleKind::log && !(v > 0)) return -std::numeric_limits<double>::infinity();
  const double a = forward(kind_, limits_.lo), b = forward(kind_, limits_.hi);
  if (a == b) return (px_lo_ + px_hi_) / 2;
  return px_lo_ + (forward(kind_, v) - a) / (b - a) * (px_hi_ - px_lo_);
}

}  // namespace dooly::plot
