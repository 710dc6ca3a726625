// power_chart (run_charts.hpp): readings over time, regions shaded.
#include <algorithm>

#include <fmt/format.h>

#include "dooly/plot/decimate.hpp"
#include "dooly/plot/run_charts.hpp"
#include "dooly/plot/run_input.hpp"
#include "dooly/plot/run_windows.hpp"

namespace dooly::plot {

namespace {

constexpr double kSpanOpacity = 0.28;

std::string seconds(double s) { return s >= 10 ? fmt::format("{:.0f} s", s) : fmt::format("{:.2g} s", s); }

std::string title_of(const energy::Recording& rec, const std::string& source) {
  for (const auto& [k, v] : rec.meta)
    if (k == "recorded") return "power over time: " + v;
  return "power over time: " + source;
}

// The windows of one GPU's channel are those on that GPU and on the host; with several channels, all.
std::optional<int> device_of(const energy::Recording& rec, const std::vector<size_t>& channels) {
  if (channels.size() != 1) return std::nullopt;
  const power::Channel& c = rec.channels[channels.front()];
  if (c.domain != power::Domain::gpu || c.device < 0) return std::nullopt;
  return c.device;
}

// The `top` regions open longest in their colours, the rest as one grey band set.
size_t add_spans(Axes& ax, const RunWindows& w, size_t top) {
  const size_t shown = std::min(top, w.regions.size());
  for (size_t i = 0; i < shown; ++i) {
    const RegionTime& r = w.regions[i];
    ax.add(Spans{.label = fmt::format("{} ({})", r.name, seconds(r.open_s)),
                 .ranges = r.ranges_s,
                 .color = palette(i),
                 .opacity = kSpanOpacity});
  }
  if (w.regions.size() > shown) {
    Spans rest{.label = fmt::format("{} more regions", w.regions.size() - shown),
               .color = Rgb::hex(0x9a9a9a),
               .opacity = kSpanOpacity,
               .text_in_widest = false};
    for (size_t i = shown; i < w.regions.size(); ++i)
      rest.ranges.insert(rest.ranges.end(), w.regions[i].ranges_s.begin(), w.regions[i].ranges_s.end());
    ax.add(std::move(rest));
  }
  return shown;
}

// One channel's readings in seconds since the start, each at the middle of the interval it measures.
Line channel_line(const energy::Recording& rec, size_t channel, int64_t start_ns) {
  const power::SensorModel& sensor = rec.channels[channel].sensor;
  Line line;
  line.label = rec.channels[channel].name;
  for (const power::Reading& s : rec.samples) {
    if (s.channel != channel) continue;
    const int64_t window_ns = s.window_ns >= 0 ? s.window_ns : sensor.window_ns;
    const double centre_ns =
        static_cast<double>(s.t_ns - sensor.delay_ns - start_ns) - static_cast<double>(window_ns) / 2;
    line.x.push_back(centre_ns / 1e9);
    line.y.push_back(s.power_w);
  }
  // Readings are in time order per channel (the format's rule), but the shift per reading's window could swap two.
  if (!std::is_sorted(line.x.begin(), line.x.end())) {
    std::vector<size_t> idx(line.x.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return line.x[a] < line.x[b]; });
    Line sorted = line;
    for (size_t i = 0; i < idx.size(); ++i) sorted.x[i] = line.x[idx[i]], sorted.y[i] = line.y[idx[i]];
    return sorted;
  }
  return line;
}

}  // namespace

Chart power_chart(const energy::Recording& rec, const RunChartOptions& o) {
  std::vector<std::string> names;
  for (const power::Channel& c : rec.channels) names.push_back(c.name);
  const std::vector<size_t> channels = chosen_channels(names, o.channel, o.source);
  const RunWindows w = outermost_windows(rec, device_of(rec, channels));

  Chart chart{Figure(o.width_px, std::max(420, o.width_px * 2 / 5), title_of(rec, o.source)), {}};
  Axes& ax = chart.figure.add_axes();
  ax.x_label("time since the run started (s)").y_label("power (W)").y_from_zero().legend(LegendPlace::outside_right);
  ax.x_limits(0.0, std::max(1e-9, static_cast<double>(w.end_ns - w.start_ns) / 1e9));
  const size_t shaded = add_spans(ax, w, o.top);

  size_t readings = 0;
  for (size_t k = 0; k < channels.size(); ++k) {
    Line line = channel_line(rec, channels[k], w.start_ns);
    readings += line.x.size();
    // Two points per pixel column at most: the lowest and highest reading of the column's slice of the run.
    const Decimated d = min_max_decimate(line.x, line.y, static_cast<size_t>(o.width_px));
    if (d.thinned)
      chart.figure.add_note(fmt::format(
          "{}: {} readings drawn as {} points (the lowest and highest of each of {} equal slices of the run)",
          line.label, line.x.size(), d.x.size(), o.width_px));
    line.x = d.x;
    line.y = d.y;
    line.color = k == 0 ? kInk : palette(k);
    line.width_px = 1.5;
    ax.add(std::move(line));
  }
  uint64_t windows = 0;
  for (const RegionTime& r : w.regions) windows += r.windows;
  chart.figure.add_note(fmt::format(
      "shaded: where each region was open outermost on its thread ({} windows of {} regions, merged per region){}",
      windows, w.regions.size(),
      w.regions.size() > shaded ? fmt::format("; the {} open longest in colour (--top)", shaded) : ""));
  chart.summary = fmt::format("{} channel(s), {} readings, {} of {} regions shaded", channels.size(), readings, shaded,
                              w.regions.size());
  return chart;
}

}  // namespace dooly::plot
