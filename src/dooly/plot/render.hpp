#pragma once
// Inside the plot library: how a Figure lays out and draws each of its Axes on a cairo context. Not for callers;
// they use Figure.
#include <string>
#include <vector>

#include <cairo.h>

#include "dooly/plot/axes.hpp"
#include "dooly/plot/text.hpp"

namespace dooly::plot::render {

// Font sizes (px) and the small distances everything is laid out with.
inline constexpr double kTitleFont = 18.0, kAxesTitleFont = 14.0, kLabelFont = 13.0, kTickFont = 11.0,
                        kLegendFont = 12.0, kNoteFont = 11.0;
inline constexpr double kTickLength = 5.0, kPad = 6.0;

// The labelled ticks of an axis: nice numbers, or the bars' categories on a category axis.
std::vector<Tick> x_ticks(const Axes& axes);
std::vector<Tick> y_ticks(const Axes& axes, YSide side);

// What the legend lists, in drawing order.
struct LegendEntry {
  enum class Mark { line, dot, box, band } mark = Mark::line;
  std::string text;
  Rgb color;
  double opacity = 1.0;
};
std::vector<LegendEntry> legend_entries(const Axes& axes);
double legend_width(Text& text, const std::vector<LegendEntry>& entries);

// The plot area inside `cell` once the titles, tick labels, axis labels and an outside legend have their room.
Rect plot_area(Text& text, const Axes& axes, const Rect& cell);

// Draws the axes (laid out: Axes::place was called) in the order grid, spans, bars, lines, points, frame,
// ticks and labels, legend.
void draw_axes(cairo_t* cr, Text& text, const Axes& axes, const Rect& cell);
void draw_series(cairo_t* cr, Text& text, const Axes& axes);
void draw_legend(cairo_t* cr, Text& text, const Axes& axes);

}  // namespace dooly::plot::render
