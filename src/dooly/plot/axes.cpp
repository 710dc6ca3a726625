#include "dooly/plot/axes.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dooly::plot {

namespace {

// The smallest and largest values that can be drawn on an axis of this kind.
struct Extent {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v, ScaleKind kind) {
    if (!std::isfinite(v) || (kind == ScaleKind::log && v <= 0)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

Limits finish(const AxisSpec& spec, Extent e) {
  if (spec.fixed) return *spec.fixed;
  if (spec.from_zero && spec.kind == ScaleKind::linear) e.add(0.0, spec.kind);
  if (e.empty()) return spec.kind == ScaleKind::log ? Limits{1.0, 10.0} : Limits{0.0, 1.0};
  return nice_limits(spec.kind, e.lo, e.hi, kMaxTicks);
}

// The category axis of n bars: each category one unit wide, centred on its index.
Limits category_limits(size_t n, bool top_down) {
  const double last = static_cast<double>(n) - 0.5;
  return top_down ? Limits{last, -0.5} : Limits{-0.5, last};
}

void add_bar_values(Extent& e, const Bars& bars, ScaleKind kind) {
  e.add(0.0, kind);
  for (size_t i = 0; i < bars.values.size(); ++i) {
    const double v = bars.values[i];
    e.add(v, kind);
    const double err = i < bars.errors.size() ? bars.errors[i] : 0.0;
    if (std::isfinite(err)) {
      e.add(v + err, kind);
      e.add(v - err, kind);
    }
  }
}

void check_lengths(size_t a, size_t b, const char* what) {
  if (a != b) throw std::invalid_argument(std::string("plot: ") + what + ": x and y differ in length");
}

}  // namespace

Axes& Axes::title(std::string text) {
  title_ = std::move(text);
  return *this;
}
Axes& Axes::x_label(std::string text) {
  x_.label = std::move(text);
  return *this;
}
Axes& Axes::y_label(std::string text, YSide side) {
  (side == YSide::left ? y_ : y2_).label = std::move(text);
  return *this;
}
Axes& Axes::x_scale(ScaleKind kind) {
  x_.kind = kind;
  return *this;
}
Axes& Axes::y_scale(ScaleKind kind, YSide side) {
  (side == YSide::left ? y_ : y2_).kind = kind;
  return *this;
}
Axes& Axes::x_limits(double lo, double hi) {
  x_.fixed = Limits{lo, hi};
  return *this;
}
Axes& Axes::y_limits(double lo, double hi, YSide side) {
  (side == YSide::left ? y_ : y2_).fixed = Limits{lo, hi};
  return *this;
}
Axes& Axes::y_from_zero(YSide side) {
  (side == YSide::left ? y_ : y2_).from_zero = true;
  return *this;
}
Axes& Axes::legend(LegendPlace place) {
  legend_ = place;
  return *this;
}

Rgb Axes::next_color() { return palette(colors_used_++); }

Axes& Axes::add(Line line) {
  check_lengths(line.x.size(), line.y.size(), "line");
  if (!line.color) line.color = next_color();
  lines_.push_back(std::move(line));
  return *this;
}

Axes& Axes::add(Scatter scatter) {
  check_lengths(scatter.x.size(), scatter.y.size(), "scatter");
  if (!scatter.color) scatter.color = next_color();
  scatters_.push_back(std::move(scatter));
  return *this;
}

Axes& Axes::add(Bars bars) {
  if (bars_) throw std::invalid_argument("plot: one Bars per Axes");
  check_lengths(bars.categories.size(), bars.values.size(), "bars (categories and values)");
  if (!bars.errors.empty()) check_lengths(bars.errors.size(), bars.values.size(), "bars (errors and values)");
  if (!bars.values_text.empty())
    check_lengths(bars.values_text.size(), bars.values.size(), "bars (values_text and values)");
  if (!bars.color) bars.color = next_color();
  bars_ = std::move(bars);
  return *this;
}

Axes& Axes::add(Spans spans) {
  if (!spans.color) spans.color = next_color();
  spans_.push_back(std::move(spans));
  return *this;
}

bool Axes::uses_right_axis() const noexcept {
  const auto right = [](const auto& s) { return s.side == YSide::right; };
  return std::any_of(lines_.begin(), lines_.end(), right) || std::any_of(scatters_.begin(), scatters_.end(), right);
}

bool Axes::empty() const noexcept {
  const auto no_points = [](const auto& s) { return s.x.empty(); };
  return std::all_of(lines_.begin(), lines_.end(), no_points) &&
         std::all_of(scatters_.begin(), scatters_.end(), no_points) && (!bars_ || bars_->values.empty()) &&
         std::all_of(spans_.begin(), spans_.end(), [](const Spans& s) { return s.ranges.empty(); });
}

Limits Axes::x_limits() const {
  if (vertical_bars() && !x_.fixed) return category_limits(bars_->values.size(), false);
  Extent e;
  for (const Line& l : lines_)
    for (double v : l.x) e.add(v, x_.kind);
  for (const Scatter& s : scatters_)
    for (double v : s.x) e.add(v, x_.kind);
  for (const Spans& s : spans_)
    for (const XRange& r : s.ranges) {
      e.add(r.x0, x_.kind);
      e.add(r.x1, x_.kind);
    }
  if (horizontal_bars()) add_bar_values(e, *bars_, x_.kind);
  return finish(x_, e);
}

Limits Axes::y_limits(YSide side) const {
  const AxisSpec& spec = side == YSide::left ? y_ : y2_;
  if (side == YSide::left && horizontal_bars() && !spec.fixed) return category_limits(bars_->values.size(), true);
  Extent e;
  for (const Line& l : lines_)
    if (l.side == side)
      for (double v : l.y) e.add(v, spec.kind);
  for (const Scatter& s : scatters_)
    if (s.side == side)
      for (double v : s.y) e.add(v, spec.kind);
  if (side == YSide::left && vertical_bars()) add_bar_values(e, *bars_, spec.kind);
  return finish(spec, e);
}

void Axes::place(const Rect& area) {
  area_ = area;
  x_scale_ = Scale(x_.kind, x_limits(), area.x, area.right());
  y_scale_ = Scale(y_.kind, y_limits(YSide::left), area.bottom(), area.y);
  y2_scale_ = Scale(y2_.kind, y_limits(YSide::right), area.bottom(), area.y);
}

}  // namespace dooly::plot
