#pragma once
// One chart inside a Figure: an x axis, a left y axis and an optional right one, each linear or log with
// automatic "nice" limits and ticks (or limits the caller fixes), the series drawn on them and a legend.
// Build it through Figure::add_axes, fill it with add(...); the Figure places it and computes its mapping
// from data to pixels when it is laid out or written (then area(), x() and y() say where things land).
#include <optional>
#include <string>
#include <vector>

#include "dooly/plot/scale.hpp"
#include "dooly/plot/series.hpp"

namespace dooly::plot {

struct Rect {
  double x = 0.0, y = 0.0, width = 0.0, height = 0.0;  // pixels, y down
  double right() const noexcept { return x + width; }
  double bottom() const noexcept { return y + height; }
};

enum class LegendPlace { none, inside, outside_right };

struct AxisSpec {
  std::string label;
  ScaleKind kind = ScaleKind::linear;
  std::optional<Limits> fixed;  // unset: from the data, widened to nice numbers
  bool from_zero = false;       // automatic limits include 0 (a power or an energy reads against 0)
};

class Axes {
 public:
  Axes& title(std::string text);
  Axes& x_label(std::string text);
  Axes& y_label(std::string text, YSide side = YSide::left);
  Axes& x_scale(ScaleKind kind);
  Axes& y_scale(ScaleKind kind, YSide side = YSide::left);
  Axes& x_limits(double lo, double hi);
  Axes& y_limits(double lo, double hi, YSide side = YSide::left);
  Axes& y_from_zero(YSide side = YSide::left);
  Axes& legend(LegendPlace place);

  // Each throws std::invalid_argument when its vectors disagree in length.
  Axes& add(Line line);
  Axes& add(Scatter scatter);
  Axes& add(Bars bars);  // one Bars per Axes
  Axes& add(Spans spans);

  const std::string& title() const noexcept { return title_; }
  const AxisSpec& x_spec() const noexcept { return x_; }
  const AxisSpec& y_spec(YSide side = YSide::left) const noexcept { return side == YSide::left ? y_ : y2_; }
  const std::vector<Line>& lines() const noexcept { return lines_; }
  const std::vector<Scatter>& scatters() const noexcept { return scatters_; }
  const std::optional<Bars>& bars() const noexcept { return bars_; }
  const std::vector<Spans>& spans() const noexcept { return spans_; }
  LegendPlace legend_place() const noexcept { return legend_; }
  bool uses_right_axis() const noexcept;
  // Bars with data, lying along y (categories down the y axis) or standing on x.
  bool horizontal_bars() const noexcept { return bars_ && bars_->horizontal && !bars_->values.empty(); }
  bool vertical_bars() const noexcept { return bars_ && !bars_->horizontal && !bars_->values.empty(); }
  bool empty() const noexcept;  // nothing to draw: the chart says "no data"

  // The limits the axes will show: the fixed ones, else the data's range made nice (0..1 without data).
  Limits x_limits() const;
  Limits y_limits(YSide side = YSide::left) const;

  // Set when the figure is laid out (by Figure::layout or a write): the plot area and the mappings.
  void place(const Rect& area);
  const Rect& area() const noexcept { return area_; }
  const Scale& x() const noexcept { return x_scale_; }
  const Scale& y(YSide side = YSide::left) const noexcept { return side == YSide::left ? y_scale_ : y2_scale_; }
  double x_to_px(double v) const noexcept { return x_scale_.to_px(v); }
  double y_to_px(double v, YSide side = YSide::left) const noexcept { return y(side).to_px(v); }

 private:
  Rgb next_color();

  std::string title_;
  AxisSpec x_, y_, y2_;
  LegendPlace legend_ = LegendPlace::inside;
  std::vector<Line> lines_;
  std::vector<Scatter> scatters_;
  std::optional<Bars> bars_;
  std::vector<Spans> spans_;
  size_t colors_used_ = 0;
  Rect area_;
  Scale x_scale_, y_scale_, y2_scale_;
};

// At most this many ticks on an axis.
inline constexpr int kMaxTicks = 8;

}  // namespace dooly::plot
