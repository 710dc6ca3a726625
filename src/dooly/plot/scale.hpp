#pragma once
// One axis' mapping from data to pixels: linear or log10, over limits [lo, hi] onto pixels [px_lo, px_hi].
// lo > hi is allowed (a category axis read top to bottom); a y axis maps lo to the bottom (px_lo > px_hi).
#include "dooly/plot/ticks.hpp"

namespace dooly::plot {

class Scale {
 public:
  Scale() = default;
  Scale(ScaleKind kind, Limits limits, double px_lo, double px_hi) noexcept
      : kind_(kind), limits_(limits), px_lo_(px_lo), px_hi_(px_hi) {}

  // The pixel coordinate of a data value (may lie outside the plot area; a log axis maps v <= 0 to -inf).
  double to_px(double v) const noexcept;
  // Whether a value can be drawn on this axis at all (finite, and positive on a log axis).
  bool drawable(double v) const noexcept;

  ScaleKind kind() const noexcept { return kind_; }
  const Limits& limits() const noexcept { return limits_; }

 private:
  ScaleKind kind_ = ScaleKind::linear;
  Limits limits_;
  double px_lo_ = 0.0, px_hi_ = 1.0;
};

}  // namespace dooly::plot
