// The legend: one row per labelled series, a mark in its colour and its label; inside the plot area's top
// right corner, or to the right of the area. Rows that do not fit end in "... and N more".
#include <algorithm>
#include <numbers>

#include <fmt/format.h>

#include "dooly/plot/render.hpp"

namespace dooly::plot::render {

namespace {

constexpr double kMarkWidth = 18.0;

void draw_mark(cairo_t* cr, const LegendEntry& e, double x, double y_mid) {
  const Rgb& c = e.color;
  switch (e.mark) {
    case LegendEntry::Mark::line:
      cairo_set_source_rgb(cr, c.r, c.g, c.b);
      cairo_set_line_width(cr, 2.0);
      cairo_move_to(cr, x, y_mid);
      cairo_line_to(cr, x + kMarkWidth, y_mid);
      cairo_stroke(cr);
      break;
    case LegendEntry::Mark::dot:
      cairo_set_source_rgb(cr, c.r, c.g, c.b);
      cairo_arc(cr, x + kMarkWidth / 2, y_mid, 3.5, 0.0, 2 * std::numbers::pi);
      cairo_fill(cr);
      break;
    case LegendEntry::Mark::box:
    case LegendEntry::Mark::band:
      cairo_set_source_rgba(cr, c.r, c.g, c.b, e.opacity);
      cairo_rectangle(cr, x + 2, y_mid - 6, kMarkWidth - 4, 12);
      cairo_fill(cr);
      break;
  }
}

}  // namespace

void draw_legend(cairo_t* cr, Text& text, const Axes& axes) {
  if (axes.legend_place() == LegendPlace::none) return;
  std::vector<LegendEntry> entries = legend_entries(axes);
  if (entries.empty()) return;
  const Rect& a = axes.area();
  const bool outside = axes.legend_place() == LegendPlace::outside_right;
  text.font(kLegendFont);
  const double row = text.line_height() + 4;
  const size_t fits = std::max<size_t>(1, static_cast<size_t>((a.height - 2 * kPad) / row));
  if (entries.size() > fits) {
    const size_t more = entries.size() - (fits - 1);
    entries.resize(fits - 1);
    entries.push_back({LegendEntry::Mark::line, fmt::format("... and {} more", more), kWhite, 0.0});
  }
  const double w = std::min(legend_width(text, entries), outside ? 1e9 : a.width / 2);
  const double h = static_cast<double>(entries.size()) * row + kPad;
  const double x = outside ? a.right() + kPad : a.right() - w - kPad;
  const double y = outside ? a.y : a.y + kPad;
  cairo_set_source_rgba(cr, 1, 1, 1, outside ? 1.0 : 0.85);
  cairo_rectangle(cr, x + 0.5, y + 0.5, w, h);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, kGrid.r, kGrid.g, kGrid.b);
  cairo_set_line_width(cr, 1.0);
  cairo_stroke(cr);
  const double text_room = w - kMarkWidth - 3 * kPad;
  for (size_t i = 0; i < entries.size(); ++i) {
    const double y_mid = y + kPad / 2 + row * (static_cast<double>(i) + 0.5);
    if (entries[i].opacity > 0) draw_mark(cr, entries[i], x + kPad, y_mid);
    text.draw(text.fit(entries[i].text, text_room), x + kMarkWidth + 2 * kPad, y_mid, HAlign::left, VAlign::middle,
              kInk);
  }
}

}  // namespace dooly::plot::render
