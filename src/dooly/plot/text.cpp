#include "dooly/plot/text.hpp"

#include <algorithm>
#include <vector>

#include <fontconfig/fontconfig.h>

#include "dooly/common/utf8.hpp"

namespace dooly::plot {

namespace {

constexpr const char* kFamily = "sans-serif";

// The text split into code points (each valid UTF-8 after make_valid).
std::vector<std::string> code_points(const std::string& valid) {
  std::vector<std::string> out;
  for (size_t i = 0; i < valid.size();) {
    const size_t n = utf8::code_point_length(valid, i);
    out.push_back(valid.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

Text::Text(cairo_t* cr) : cr_(cr) {
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
  cairo_set_font_options(cr_, options);
  cairo_font_options_destroy(options);
  font(size_px_);
}

void Text::font(double size_px, bool bold) {
  size_px_ = size_px;
  bold_ = bold;
  cairo_select_font_face(cr_, kFamily, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr_, size_px);
}

double Text::width(std::string_view text) const {
  const std::string valid = utf8::make_valid(text);
  cairo_text_extents_t e;
  cairo_text_extents(cr_, valid.c_str(), &e);
  return e.x_advance;
}

double Text::line_height() const {
  cairo_font_extents_t f;
  cairo_font_extents(cr_, &f);
  return f.ascent + f.descent;
}

void Text::draw(std::string_view text, double x, double y, HAlign h, VAlign v, const Rgb& color,
                double angle_rad) const {
  if (text.empty()) return;
  const std::string valid = utf8::make_valid(text);
  cairo_font_extents_t f;
  cairo_font_extents(cr_, &f);
  const double w = width(valid);
  const double dx = h == HAlign::left ? 0.0 : h == HAlign::center ? -w / 2 : -w;
  const double dy = v == VAlign::top ? f.ascent : v == VAlign::middle ? (f.ascent - f.descent) / 2 : -f.descent;
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_rotate(cr_, -angle_rad);
  cairo_move_to(cr_, dx, dy);
  cairo_set_source_rgb(cr_, color.r, color.g, color.b);
  cairo_show_text(cr_, valid.c_str());
  cairo_restore(cr_);
}

std::string Text::fit(std::string_view text, double max_width_px) const {
  std::string valid = utf8::make_valid(text);
  if (width(valid) <= max_width_px) return valid;
  const std::vector<std::string> cps = code_points(valid);
  // Keep the head and the tail, dropping code points from the middle until it fits (names differ at both ends:
  // "deep_copy Host:a <- Cuda:a", "stream_triad@calibrate").
  // Start near the length that fits (widths are about proportional), then step down.
  const double ratio = max_width_px / std::max(width(valid), 1.0);
  size_t keep = std::min(cps.size() - 1, static_cast<size_t>(static_cast<double>(cps.size()) * ratio) + 2);
  for (; keep > 0; --keep) {
    std::string s;
    const size_t head = (keep + 1) / 2, tail = keep / 2;
    for (size_t i = 0; i < head; ++i) s += cps[i];
    s += "\xE2\x80\xA6";  // …
    for (size_t i = cps.size() - tail; i < cps.size(); ++i) s += cps[i];
    if (width(s) <= max_width_px) return s;
  }
  return "\xE2\x80\xA6";
}

void release_font_caches() noexcept {
  cairo_debug_reset_static_data();
  FcFini();
}

}  // namespace dooly::plot
