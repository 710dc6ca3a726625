// energy_chart (run_charts.hpp): energy per region as horizontal bars with the 95 % interval.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dooly/plot/run_charts.hpp"
#include "dooly/plot/run_input.hpp"

namespace dooly::plot {

namespace {

constexpr double kBarRowPx = 30.0, kAxesChromePx = 110.0, kFigureChromePx = 90.0;
constexpr Rgb kBarColor = Rgb::hex(0x1f77b4);

// Significant digits that stay readable from microjoules to kilojoules (as the report's table prints them).
std::string compact(double v) {
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.3f}", v);
  return fmt::format("{:.3g}", v);
}

struct BarRow {
  const energy::RegionRow* row = nullptr;
  double energy_j = 0.0;
  double hw_j = NAN;  // the 95 % half-width, NaN when the mode has none
};

std::vector<BarRow> leading_rows(const energy::ChannelReport& ch, bool model_lead) {
  std::vector<BarRow> rows;
  for (const energy::RegionRow& r : ch.rows) {
    if (model_lead)
      rows.push_back({&r, r.model_energy_j.value_or(0.0), r.model_energy_hw_j.value_or(NAN)});
    else
      rows.push_back({&r, r.energy_j});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const BarRow& a, const BarRow& b) { return a.energy_j > b.energy_j; });
  return rows;
}

std::string bar_text(const BarRow& b) {
  if (std::isnan(b.hw_j)) return compact(b.energy_j) + " J";
  const bool unbounded = !std::isfinite(b.hw_j) || b.hw_j > 1e15;
  return fmt::format("{} J \u00b1 {}", compact(b.energy_j), unbounded ? "inf" : compact(b.hw_j));
}

void add_channel(Figure& fig, const energy::Report& report, const energy::ChannelReport& ch, size_t top) {
  const bool model_lead = report.mode == energy::Mode::model && ch.fit.fitted;
  std::vector<BarRow> rows = leading_rows(ch, model_lead);
  const size_t all = rows.size();
  if (rows.size() > top) rows.resize(top);
  Bars bars{.color = kBarColor, .horizontal = true};
  double end_j = 0.0;  // the furthest bar or whisker end
  for (const BarRow& b : rows) {
    end_j = std::max(end_j, b.energy_j + (std::isfinite(b.hw_j) ? b.hw_j : 0.0));
    bars.categories.push_back(b.row->name);
    bars.values.push_back(b.energy_j);
    bars.errors.push_back(b.hw_j);
    bars.values_text.push_back(bar_text(b));
  }
  Axes& ax = fig.add_axes(kAxesChromePx + kBarRowPx * static_cast<double>(std::max<size_t>(rows.size(), 1)));
  ax.title(fmt::format("{} [{}]: {} mode{}{}", ch.channel.name, power::to_string(ch.channel.domain),
                       energy::to_string(model_lead ? energy::Mode::model : energy::Mode::trapezoid),
                       model_lead ? ", whiskers: the 95 % interval" : "",
                       all > rows.size() ? fmt::format(" (the top {} of {} regions)", rows.size(), all) : ""))
      .x_label("energy (J), inclusive: a region's bar holds what ran inside it")
      .legend(LegendPlace::none);
  // Room past the longest bar for its text.
  if (end_j > 0) ax.x_limits(0.0, nice_limits(ScaleKind::linear, 0.0, end_j * 1.2, kMaxTicks).hi);
  ax.add(std::move(bars));
}

}  // namespace

Chart energy_chart(const energy::Report& report, const RunChartOptions& o) {
  std::vector<std::string> names;
  for (const energy::ChannelReport& c : report.channels) names.push_back(c.channel.name);
  const std::vector<size_t> channels = chosen_channels(names, o.channel, o.source);
  double height = kFigureChromePx;
  for (size_t c : channels)
    height +=
        kAxesChromePx + kBarRowPx * static_cast<double>(std::clamp<size_t>(report.channels[c].rows.size(), 1, o.top));
  Chart chart{Figure(o.width_px, static_cast<int>(std::min(height, 16000.0)), "energy by region: " + o.source), {}};
  std::string shown;
  for (size_t c : channels) {
    add_channel(chart.figure, report, report.channels[c], o.top);
    shown += fmt::format("{}{}: {} of {} regions", shown.empty() ? "" : "; ", names[c],
                         std::min(o.top, report.channels[c].rows.size()), report.channels[c].rows.size());
  }
  chart.summary = shown.empty() ? "no channels" : shown;
  return chart;
}

}  // namespace dooly::plot
