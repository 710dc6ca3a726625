#pragma once
// A chart to look at: a size in pixels, a title, one or more Axes stacked top to bottom, and notes under them
// (what was left out or thinned). Written as PNG or SVG through cairo; the same figure gives the same bytes
// (no time stamps, fixed font options).
//
//   plot::Figure fig(1200, 500, "power over time");
//   plot::Axes& ax = fig.add_axes();
//   ax.x_label("time (s)").y_label("power (W)").y_from_zero();
//   ax.add(plot::Line{.label = "gpu0", .x = t_s, .y = power_w});
//   ax.add(plot::Spans{.label = "solve", .ranges = {{1.0, 2.5}}});
//   fig.write_png("power.png");
#include <deque>
#include <string>
#include <vector>

#include <cairo.h>

#include "dooly/plot/axes.hpp"

namespace dooly::plot {

class Figure {
 public:
  // Throws std::invalid_argument for a size outside 16..16384 px.
  Figure(int width_px, int height_px, std::string title = {});

  // A new Axes below the others; its height is its share of the weights.
  Axes& add_axes(double height_weight = 1.0);
  Axes& axes(size_t i) { return axes_.at(i); }
  const Axes& axes(size_t i) const { return axes_.at(i); }
  size_t axes_count() const noexcept { return axes_.size(); }
  // A line of small text under the axes.
  void add_note(std::string line);
  const std::vector<std::string>& notes() const noexcept { return notes_; }

  int width_px() const noexcept { return width_px_; }
  int height_px() const noexcept { return height_px_; }

  // Places every Axes (their area() and mappings); the writers do it too.
  void layout();
  // Draws the figure on a context of width_px x height_px (laying it out first).
  void draw(cairo_t* cr);

  std::string png();  // the PNG file's bytes (8-bit RGB)
  std::string svg();  // the SVG file's text
  // Write the file atomically (a temporary beside it, then a rename). A path that cannot be written throws
  // InputError naming it, why and what to do.
  void write_png(const std::string& path);
  void write_svg(const std::string& path);

 private:
  void layout(cairo_t* cr);

  int width_px_, height_px_;
  std::string title_;
  std::deque<Axes> axes_;  // a deque: add_axes hands out references that must stay valid
  std::vector<double> weights_;
  std::vector<std::string> notes_;
  std::vector<Rect> cells_;
};

}  // namespace dooly::plot
