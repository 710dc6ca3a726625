#include "dooly/plot/figure.hpp"

#include <numeric>
#include <stdexcept>

#include "dooly/plot/output.hpp"
#include "dooly/plot/render.hpp"

namespace dooly::plot {

namespace {

constexpr int kMinSize = 16, kMaxSize = 16384;

}  // namespace

Figure::Figure(int width_px, int height_px, std::string title)
    : width_px_(width_px), height_px_(height_px), title_(std::move(title)) {
  if (width_px < kMinSize || width_px > kMaxSize || height_px < kMinSize || height_px > kMaxSize)
    throw std::invalid_argument("plot::Figure: width and height must lie in 16..16384 px");
}

Axes& Figure::add_axes(double height_weight) {
  weights_.push_back(height_weight > 0 ? height_weight : 1.0);
  return axes_.emplace_back();
}

void Figure::add_note(std::string line) { notes_.push_back(std::move(line)); }

// Title at the top, notes at the bottom, the axes' cells share the height between by weight.
void Figure::layout(cairo_t* cr) {
  using namespace render;
  Text text(cr);
  double top = 0.0, bottom = height_px_;
  if (!title_.empty()) {
    text.font(kTitleFont, true);
    top += text.line_height() + 2 * kPad;
  }
  text.font(kNoteFont);
  bottom -= static_cast<double>(notes_.size()) * (text.line_height() + 2) + (notes_.empty() ? 0.0 : kPad);
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  cells_.clear();
  double y = top;
  for (size_t i = 0; i < axes_.size(); ++i) {
    const double h = (bottom - top) * weights_[i] / total;
    cells_.push_back({0.0, y, static_cast<double>(width_px_), h});
    axes_[i].place(plot_area(text, axes_[i], cells_.back()));
    y += h;
  }
}

void Figure::layout() {
  // Text is measured on a small scratch surface: the sizes do not depend on the surface.
  encode_png(kMinSize, kMinSize, [this](cairo_t* cr) { layout(cr); });
}

void Figure::draw(cairo_t* cr) {
  using namespace render;
  layout(cr);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  Text text(cr);
  if (!title_.empty()) {
    text.font(kTitleFont, true);
    text.draw(text.fit(title_, width_px_ - 2 * kPad), width_px_ / 2.0, kPad, HAlign::center, VAlign::top, kInk);
  }
  for (size_t i = 0; i < axes_.size(); ++i) draw_axes(cr, text, axes_[i], cells_[i]);
  text.font(kNoteFont);
  const double row = text.line_height() + 2;
  double y = height_px_ - kPad - row * static_cast<double>(notes_.size());
  for (const std::string& note : notes_) {
    text.draw(text.fit(note, width_px_ - 2 * kPad), kPad, y, HAlign::left, VAlign::top, kMuted);
    y += row;
  }
}

std::string Figure::png() {
  return encode_png(width_px_, height_px_, [this](cairo_t* cr) { draw(cr); });
}

std::string Figure::svg() {
  return encode_svg(width_px_, height_px_, [this](cairo_t* cr) { draw(cr); });
}

void Figure::write_png(const std::string& path) { write_file_atomic(path, png()); }
void Figure::write_svg(const std::string& path) { write_file_atomic(path, svg()); }

}  // namespace dooly::plot
