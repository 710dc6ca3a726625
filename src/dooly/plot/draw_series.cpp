// The data of an Axes: shaded spans, bars, lines and points, clipped to the plot area.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "dooly/plot/render.hpp"

namespace dooly::plot::render {

namespace {

// Far off-area coordinates held where cairo's fixed-point paths still take them; the clip hides them anyway.
double safe(double px) { return std::isnan(px) ? 0.0 : std::clamp(px, -1e5, 1e5); }

void set_color(cairo_t* cr, const Rgb& c, double opacity = 1.0) { cairo_set_source_rgba(cr, c.r, c.g, c.b, opacity); }

// The spans' ranges in pixels, clamped to the area, sorted, and merged where less than a pixel apart.
std::vector<XRange> span_pixels(const Axes& axes, const Spans& spans) {
  const Rect& a = axes.area();
  const auto clamp_px = [&](double v) {
    const double px = axes.x_to_px(v);
    return std::isnan(px) ? a.x : std::clamp(px, a.x, a.right());
  };
  std::vector<XRange> px;
  px.reserve(spans.ranges.size());
  for (const XRange& r : spans.ranges) {
    const double p0 = clamp_px(std::min(r.x0, r.x1)), p1 = clamp_px(std::max(r.x0, r.x1));
    if (p1 > p0) px.push_back({p0, p1});
  }
  std::sort(px.begin(), px.end(), [](const XRange& l, const XRange& r) { return l.x0 < r.x0; });
  std::vector<XRange> merged;
  for (const XRange& r : px) {
    if (!merged.empty() && r.x0 - merged.back().x1 < 1.0)
      merged.back().x1 = std::max(merged.back().x1, r.x1);
    else
      merged.push_back(r);
  }
  return merged;
}

void draw_spans(cairo_t* cr, Text& text, const Axes& axes, const Spans& spans) {
  const Rect& a = axes.area();
  const std::vector<XRange> px = span_pixels(axes, spans);
  if (px.empty()) return;
  set_color(cr, *spans.color, spans.opacity);
  for (const XRange& r : px) cairo_rectangle(cr, r.x0, a.y, r.x1 - r.x0, a.height);
  cairo_fill(cr);
  if (!spans.text_in_widest || spans.label.empty()) return;
  const XRange widest = *std::max_element(px.begin(), px.end(),
                                          [](const XRange& l, const XRange& r) { return l.x1 - l.x0 < r.x1 - r.x0; });
  text.font(kTickFont);
  const double room = widest.x1 - widest.x0 - 2 * 3.0;
  if (text.width(spans.label) <= room)
    text.draw(spans.label, widest.x0 + 3.0, a.y + 3.0, HAlign::left, VAlign::top, kInk);
}

// A bar's extent on the value axis starts at 0, or at the axis' low end on a log axis.
double bar_base(const Scale& s) { return s.kind() == ScaleKind::log ? std::min(s.limits().lo, s.limits().hi) : 0.0; }

struct BarGeometry {
  const Scale* value = nullptr;     // the value axis
  const Scale* category = nullptr;  // the category axis
  bool horizontal = false;
  double half = 0.0;  // half the bar's thickness, px

  // A rectangle from value a to value b across category i (clipped by the caller's clip).
  void rect(cairo_t* cr, size_t i, double a, double b) const {
    const double c = category->to_px(static_cast<double>(i));
    double pa = safe(value->to_px(a)), pb = safe(value->to_px(b));
    if (pa > pb) std::swap(pa, pb);
    if (horizontal)
      cairo_rectangle(cr, pa, c - half, pb - pa, 2 * half);
    else
      cairo_rectangle(cr, c - half, pa, 2 * half, pb - pa);
  }
  void segment(cairo_t* cr, size_t i, double v0, double v1, double across) const {
    const double c = category->to_px(static_cast<double>(i));
    const double p0 = safe(value->to_px(v0)), p1 = safe(value->to_px(v1));
    if (horizontal) {
      cairo_move_to(cr, p0, c + across);
      cairo_line_to(cr, p1, c + across);
    } else {
      cairo_move_to(cr, c + across, p0);
      cairo_line_to(cr, c + across, p1);
    }
  }
};

void draw_error_bar(cairo_t* cr, const BarGeometry& g, size_t i, double v, double err) {
  if (!(err > 0) || !std::isfinite(err)) return;
  set_color(cr, kInk);
  cairo_set_line_width(cr, 1.5);
  g.segment(cr, i, v - err, v + err, 0.0);
  const double cap = g.half * 0.5;
  for (double end : {v - err, v + err}) {
    const double c = g.category->to_px(static_cast<double>(i));
    const double p = safe(g.value->to_px(end));
    if (g.horizontal) {
      cairo_move_to(cr, p, c - cap);
      cairo_line_to(cr, p, c + cap);
    } else {
      cairo_move_to(cr, c - cap, p);
      cairo_line_to(cr, c + cap, p);
    }
  }
  cairo_stroke(cr);
}

// The bar's text past its end (past the whisker), or inside the bar when the area ends first.
void draw_bar_text(Text& text, const Axes& axes, const BarGeometry& g, size_t i, double v, double err) {
  const Bars& bars = *axes.bars();
  if (i >= bars.values_text.size() || bars.values_text[i].empty()) return;
  text.font(kTickFont);
  const std::string& s = bars.values_text[i];
  const double end = v + (std::isfinite(err) && err > 0 ? err : 0.0);
  const double c = g.category->to_px(static_cast<double>(i));
  const Rect& a = axes.area();
  if (g.horizontal) {
    const double p = std::min(g.value->to_px(end), a.right());
    if (p + 4 + text.width(s) <= a.right())
      text.draw(s, p + 4, c, HAlign::left, VAlign::middle, kInk);
    else
      text.draw(s, std::min(g.value->to_px(v), a.right()) - 4, c, HAlign::right, VAlign::middle, kWhite);
  } else {
    const double p = std::max(g.value->to_px(end), a.y);
    text.draw(s, c, p - 3, HAlign::center, VAlign::bottom, kInk);
  }
}

void draw_bars(cairo_t* cr, Text& text, const Axes& axes) {
  const Bars& bars = *axes.bars();
  if (bars.values.empty()) return;
  BarGeometry g;
  g.horizontal = bars.horizontal;
  g.value = bars.horizontal ? &axes.x() : &axes.y();
  g.category = bars.horizontal ? &axes.y() : &axes.x();
  g.half = 0.35 * std::fabs(g.category->to_px(1.0) - g.category->to_px(0.0));
  const double base = bar_base(*g.value);
  set_color(cr, *bars.color);
  for (size_t i = 0; i < bars.values.size(); ++i)
    if (g.value->drawable(bars.values[i])) g.rect(cr, i, base, bars.values[i]);
  cairo_fill(cr);
  for (size_t i = 0; i < bars.values.size(); ++i) {
    const double err = i < bars.errors.size() ? bars.errors[i] : 0.0;
    if (!g.value->drawable(bars.values[i])) continue;
    draw_error_bar(cr, g, i, bars.values[i], err);
    draw_bar_text(text, axes, g, i, bars.values[i], err);
  }
}

void draw_line(cairo_t* cr, const Axes& axes, const Line& line) {
  const Scale& xs = axes.x();
  const Scale& ys = axes.y(line.side);
  bool pen_down = false;
  double last_py = 0.0;
  for (size_t i = 0; i < line.x.size(); ++i) {
    if (!xs.drawable(line.x[i]) || !ys.drawable(line.y[i])) {
      pen_down = false;  // a gap
      continue;
    }
    const double px = safe(xs.to_px(line.x[i])), py = safe(ys.to_px(line.y[i]));
    if (!pen_down) {
      cairo_move_to(cr, px, py);
    } else {
      if (line.step) cairo_line_to(cr, px, last_py);
      cairo_line_to(cr, px, py);
    }
    pen_down = true;
    last_py = py;
  }
  set_color(cr, *line.color);
  cairo_set_line_width(cr, line.width_px);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_stroke(cr);
}

void draw_points(cairo_t* cr, const Axes& axes, const Scatter& s) {
  const Scale& xs = axes.x();
  const Scale& ys = axes.y(s.side);
  for (size_t i = 0; i < s.x.size(); ++i) {
    if (!xs.drawable(s.x[i]) || !ys.drawable(s.y[i])) continue;
    const double px = safe(xs.to_px(s.x[i])), py = safe(ys.to_px(s.y[i]));
    cairo_new_sub_path(cr);
    cairo_arc(cr, px, py, s.radius_px, 0.0, 2 * std::numbers::pi);
  }
  set_color(cr, *s.color);
  cairo_fill(cr);
}

}  // namespace

void draw_series(cairo_t* cr, Text& text, const Axes& axes) {
  const Rect& a = axes.area();
  cairo_save(cr);
  cairo_rectangle(cr, a.x, a.y, a.width, a.height);
  cairo_clip(cr);
  for (const Spans& s : axes.spans()) draw_spans(cr, text, axes, s);
  if (axes.bars()) draw_bars(cr, text, axes);
  for (const Line& l : axes.lines()) draw_line(cr, axes, l);
  for (const Scatter& s : axes.scatters()) draw_points(cr, axes, s);
  cairo_restore(cr);
}

}  // namespace dooly::plot::render
