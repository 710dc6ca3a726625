// How much room an Axes' labels need, and the ticks and legend entries that decide it.
#include <algorithm>
#include <cmath>

#include "dooly/plot/render.hpp"

namespace dooly::plot::render {

namespace {

std::vector<Tick> category_ticks(const Bars& bars) {
  std::vector<Tick> out;
  for (size_t i = 0; i < bars.categories.size(); ++i) out.push_back({static_cast<double>(i), bars.categories[i]});
  return out;
}

double widest(Text& text, const std::vector<Tick>& ticks) {
  double w = 0.0;
  for (const Tick& t : ticks) w = std::max(w, text.width(t.label));
  return w;
}

}  // namespace

std::vector<Tick> x_ticks(const Axes& axes) {
  if (axes.vertical_bars() && !axes.x_spec().fixed) return category_ticks(*axes.bars());
  const Limits l = axes.x_limits();
  return make_ticks(axes.x_spec().kind, l.lo, l.hi, kMaxTicks);
}

std::vector<Tick> y_ticks(const Axes& axes, YSide side) {
  if (side == YSide::left && axes.horizontal_bars() && !axes.y_spec().fixed) return category_ticks(*axes.bars());
  const Limits l = axes.y_limits(side);
  return make_ticks(axes.y_spec(side).kind, l.lo, l.hi, kMaxTicks);
}

std::vector<LegendEntry> legend_entries(const Axes& axes) {
  using Mark = LegendEntry::Mark;
  std::vector<LegendEntry> out;
  const auto text_of = [](const std::string& label, bool empty) { return empty ? label + " (no data)" : label; };
  for (const Line& l : axes.lines())
    if (!l.label.empty()) out.push_back({Mark::line, text_of(l.label, l.x.empty()), *l.color});
  for (const Scatter& s : axes.scatters())
    if (!s.label.empty()) out.push_back({Mark::dot, text_of(s.label, s.x.empty()), *s.color});
  if (axes.bars() && !axes.bars()->label.empty())
    out.push_back({Mark::box, text_of(axes.bars()->label, axes.bars()->values.empty()), *axes.bars()->color});
  for (const Spans& s : axes.spans())
    if (!s.label.empty()) out.push_back({Mark::band, text_of(s.label, s.ranges.empty()), *s.color, s.opacity});
  return out;
}

double legend_width(Text& text, const std::vector<LegendEntry>& entries) {
  text.font(kLegendFont);
  double w = 0.0;
  for (const LegendEntry& e : entries) w = std::max(w, text.width(e.text));
  return w + 18.0 + 3 * kPad;  // the mark, the gaps and the box
}

Rect plot_area(Text& text, const Axes& axes, const Rect& cell) {
  double top = cell.y + kPad, bottom = cell.bottom() - kPad, left = cell.x + kPad, right = cell.right() - kPad;
  if (!axes.title().empty()) {
    text.font(kAxesTitleFont, true);
    top += text.line_height() + kPad;
  }
  text.font(kLabelFont);
  const double label_h = text.line_height();
  if (!axes.x_spec().label.empty()) bottom -= label_h + kPad / 2;
  if (!axes.y_spec().label.empty()) left += label_h + kPad;
  const bool right_axis = axes.uses_right_axis();
  if (right_axis && !axes.y_spec(YSide::right).label.empty()) right -= label_h + kPad;

  text.font(kTickFont);
  bottom -= kTickLength + text.line_height() + kPad / 2;
  // Category names may be long: they get at most a third of the width and are shortened to fit when drawn.
  left += std::min(widest(text, y_ticks(axes, YSide::left)), cell.width / 3) + kTickLength + kPad / 2;
  if (right_axis) right -= widest(text, y_ticks(axes, YSide::right)) + kTickLength + kPad / 2;
  const std::vector<Tick> xt = x_ticks(axes);
  if (!xt.empty()) right -= text.width(xt.back().label) / 2;  // the last x label is centred on the right edge
  if (axes.legend_place() == LegendPlace::outside_right) {
    const std::vector<LegendEntry> entries = legend_entries(axes);
    if (!entries.empty()) right -= std::min(legend_width(text, entries), 0.35 * cell.width) + kPad;
  }
  Rect r{std::round(left), std::round(top), 0.0, 0.0};
  r.width = std::max(10.0, std::round(right) - r.x);
  r.height = std::max(10.0, std::round(bottom) - r.y);
  return r;
}

}  // namespace dooly::plot::render
