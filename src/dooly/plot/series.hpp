#pragma once
// What an Axes draws: lines (or steps), scatter points, bars over labelled categories, and shaded x-spans.
// Each is a plain struct of data and looks; Axes::add takes them. A colour left unset takes the axes' next
// palette colour. Points whose value cannot be drawn (NaN, infinite, <= 0 on a log axis) break a line.
#include <optional>
#include <string>
#include <vector>

#include "dooly/plot/color.hpp"

namespace dooly::plot {

enum class YSide { left, right };  // which y axis a series is read against

struct Line {
  std::string label{};  // legend text; empty: not in the legend
  std::vector<double> x{}, y{};
  std::optional<Rgb> color{};
  double width_px = 2.0;
  bool step = false;  // hold each y until the next x (a step function), as a CDF or a counter is drawn
  YSide side = YSide::left;
};

struct Scatter {
  std::string label{};
  std::vector<double> x{}, y{};
  std::optional<Rgb> color{};
  double radius_px = 3.0;
  YSide side = YSide::left;
};

// One bar per category. Horizontal bars list the categories down the y axis, the first at the top; vertical
// ones along the x axis, the first at the left. Bars start at 0.
struct Bars {
  std::string label{};
  std::vector<std::string> categories{};
  std::vector<double> values{};
  std::vector<double> errors{};            // empty, or a half-width per bar (drawn as whiskers; not finite: none)
  std::vector<std::string> values_text{};  // empty, or a text per bar written past its end
  std::optional<Rgb> color{};
  bool horizontal = false;
};

struct XRange {
  double x0 = 0.0, x1 = 0.0;
};

// Shaded bands over the axes' whole height, one per x range, all in one colour: where a region ran over time.
// Ranges closer than a pixel are drawn as one, so 10^5 windows cost what the pixels they cover cost.
struct Spans {
  std::string label{};  // legend text
  std::vector<XRange> ranges{};
  std::optional<Rgb> color{};
  double opacity = 0.25;
  bool text_in_widest = true;  // write the label inside the widest band when it fits there
};

}  // namespace dooly::plot
