// An Axes' frame, grid, ticks, labels and title; the series and the legend are drawn by their own files.
#include <cmath>
#include <numbers>

#include "dooly/plot/render.hpp"

namespace dooly::plot::render {

namespace {

constexpr double kQuarterTurn = std::numbers::pi / 2;

void set_color(cairo_t* cr, const Rgb& c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

bool inside(double px, double a, double b) { return px >= std::min(a, b) - 0.5 && px <= std::max(a, b) + 0.5; }

// Light lines at the ticks of the x axis and the left y axis (not at category ticks: bars need none).
void draw_grid(cairo_t* cr, const Axes& axes, const std::vector<Tick>& xt, const std::vector<Tick>& yt) {
  const Rect& a = axes.area();
  const bool x_categories = axes.vertical_bars();
  const bool y_categories = axes.horizontal_bars();
  set_color(cr, kGrid);
  cairo_set_line_width(cr, 1.0);
  for (const Tick& t : x_categories ? std::vector<Tick>{} : xt) {
    const double px = std::round(axes.x_to_px(t.value)) + 0.5;
    if (!inside(px, a.x, a.right())) continue;
    cairo_move_to(cr, px, a.y);
    cairo_line_to(cr, px, a.bottom());
  }
  for (const Tick& t : y_categories ? std::vector<Tick>{} : yt) {
    const double py = std::round(axes.y_to_px(t.value)) + 0.5;
    if (!inside(py, a.y, a.bottom())) continue;
    cairo_move_to(cr, a.x, py);
    cairo_line_to(cr, a.right(), py);
  }
  cairo_stroke(cr);
}

void draw_x_ticks(cairo_t* cr, Text& text, const Axes& axes, const std::vector<Tick>& ticks) {
  const Rect& a = axes.area();
  text.font(kTickFont);
  const bool categories = axes.vertical_bars();
  const double room = ticks.empty() ? a.width : a.width / static_cast<double>(ticks.size());
  set_color(cr, kInk);
  for (const Tick& t : ticks) {
    const double px = std::round(axes.x_to_px(t.value)) + 0.5;
    if (!inside(px, a.x, a.right())) continue;
    cairo_move_to(cr, px, a.bottom());
    cairo_line_to(cr, px, a.bottom() + kTickLength);
    cairo_stroke(cr);
    const std::string label = categories ? text.fit(t.label, room - 4) : t.label;
    text.draw(label, px, a.bottom() + kTickLength + 2, HAlign::center, VAlign::top, kMuted);
  }
}

void draw_y_ticks(cairo_t* cr, Text& text, const Axes& axes, const std::vector<Tick>& ticks, YSide side) {
  const Rect& a = axes.area();
  text.font(kTickFont);
  const bool categories = side == YSide::left && axes.horizontal_bars();
  const double edge = side == YSide::left ? a.x : a.right();
  const double dir = side == YSide::left ? -1.0 : 1.0;
  const double room = a.x - kPad - kTickLength - 2;  // the left margin, less the y label's strip (about)
  set_color(cr, kInk);
  for (const Tick& t : ticks) {
    const double py = std::round(axes.y_to_px(t.value, side)) + 0.5;
    if (!inside(py, a.y, a.bottom())) continue;
    cairo_move_to(cr, edge, py);
    cairo_line_to(cr, edge + dir * kTickLength, py);
    cairo_stroke(cr);
    const std::string label = categories ? text.fit(t.label, room) : t.label;
    text.draw(label, edge + dir * (kTickLength + 2), py, side == YSide::left ? HAlign::right : HAlign::left,
              VAlign::middle, categories ? kInk : kMuted);
  }
}

void draw_labels(Text& text, const Axes& axes, const Rect& cell) {
  const Rect& a = axes.area();
  text.font(kLabelFont);
  text.draw(axes.x_spec().label, a.x + a.width / 2, cell.bottom() - kPad, HAlign::center, VAlign::bottom, kInk);
  text.draw(axes.y_spec().label, cell.x + kPad, a.y + a.height / 2, HAlign::center, VAlign::top, kInk, kQuarterTurn);
  if (axes.uses_right_axis())
    text.draw(axes.y_spec(YSide::right).label, cell.right() - kPad, a.y + a.height / 2, HAlign::center, VAlign::top,
              kInk, -kQuarterTurn);
  if (!axes.title().empty()) {
    text.font(kAxesTitleFont, true);
    text.draw(axes.title(), a.x, cell.y + kPad, HAlign::left, VAlign::top, kInk);
  }
}

}  // namespace

void draw_axes(cairo_t* cr, Text& text, const Axes& axes, const Rect& cell) {
  const Rect& a = axes.area();
  const std::vector<Tick> xt = x_ticks(axes), yt = y_ticks(axes, YSide::left);
  draw_grid(cr, axes, xt, yt);
  draw_series(cr, text, axes);
  set_color(cr, kInk);
  cairo_set_line_width(cr, 1.0);
  cairo_rectangle(cr, a.x + 0.5, a.y + 0.5, a.width - 1, a.height - 1);
  cairo_stroke(cr);
  draw_x_ticks(cr, text, axes, xt);
  draw_y_ticks(cr, text, axes, yt, YSide::left);
  if (axes.uses_right_axis()) draw_y_ticks(cr, text, axes, y_ticks(axes, YSide::right), YSide::right);
  draw_labels(text, axes, cell);
  if (axes.empty()) {
    text.font(kLabelFont);
    text.draw("no data", a.x + a.width / 2, a.y + a.height / 2, HAlign::center, VAlign::middle, kMuted);
  }
  draw_legend(cr, text, axes);
}

}  // namespace dooly::plot::render
