// `dooly simulate --plot PREFIX`: two small self-contained SVG line charts, no plotting library.
//   PREFIX-latency.svg  TTFT and E2E of every completed request, sorted (x: share of requests, y: ms)
//   PREFIX-steps.svg    step duration (ms) and batch size (requests) over simulated time, averaged into ≤ 1000 bins
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/sim/result_writer.hpp"

namespace dooly::sim {
namespace {

constexpr double kW = 800, kH = 400, kLeft = 70, kRight = 20, kTop = 30, kBottom = 50;
constexpr size_t kMaxPoints = 1000;

struct Series {
  std::string label, color;
  std::vector<double> x, y;
};

std::string polyline(const Series& s, double x_max, double y_max) {
  std::string pts;
  for (size_t i = 0; i < s.x.size(); ++i) {
    const double px = kLeft + (kW - kLeft - kRight) * (x_max > 0 ? s.x[i] / x_max : 0);
    const double py = kH - kBottom - (kH - kTop - kBottom) * (y_max > 0 ? s.y[i] / y_max : 0);
    pts += fmt::format("{:.1f},{:.1f} ", px, py);
  }
  return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", s.color, pts);
}

void write_chart(const std::string& path, const std::string& title, const std::string& x_label,
                 const std::string& y_label, const std::vector<Series>& series) {
  double x_max = 0, y_max = 0;
  for (const Series& s : series) {
    for (double x : s.x) x_max = std::max(x_max, x);
    for (double y : s.y) y_max = std::max(y_max, y);
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n<text x=\"{2}\" y=\"18\" "
      "font-size=\"14\">{3}</text>\n",
      kW, kH, kLeft, title);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft, kH - kBottom,
                     kW - kRight);
  svg +=
      fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kLeft, kTop, kH - kBottom);
  svg += fmt::format("<text x=\"{}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.4g}</text>\n",
                     kLeft, kH - kBottom + 16, kW - kRight, kH - kBottom + 16, x_max);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.4g}</text>\n", kLeft - 4, kTop + 4, y_max);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (kW + kLeft) / 2, kH - 12, x_label);
  svg += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>\n",
                     kH / 2, kH / 2, y_label);
  for (size_t i = 0; i < series.size(); ++i) {
    svg += polyline(series[i], x_max, y_max);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", kW - 200, kTop + 16 * (i + 1),
                       series[i].color, series[i].label);
  }
  svg += "</svg>\n";
  std::ofstream out(path);
  out << svg;
  if (!out) DOOLY_THROW(Error, "check the folder and the disk", "cannot write {}", path);
}

Series sorted_series(std::vector<double> v, std::string label, std::string color) {
  std::sort(v.begin(), v.end());
  Series s{std::move(label), std::move(color), {}, {}};
  const size_t step = std::max<size_t>(1, v.size() / kMaxPoints);
  for (size_t i = 0; i < v.size(); i += step) {
    s.x.push_back(100.0 * static_cast<double>(i + 1) / static_cast<double>(v.size()));
    s.y.push_back(v[i]);
  }
  if (!v.empty()) {
    s.x.push_back(100.0);
    s.y.push_back(v.back());
  }
  return s;
}

}  // namespace

void write_plots(const std::string& prefix, const Simulation& sim, const SimResult& result) {
  std::vector<double> ttft, e2e;
  for (const RequestState& r : sim.states) {
    if (r.finish_s < 0) continue;
    ttft.push_back((r.first_token_s - r.arrival_s) * 1e3);
    e2e.push_back((r.finish_s - r.arrival_s) * 1e3);
  }
  write_chart(prefix + "-latency.svg", "Latency per request, sorted", "requests (%)", "ms",
              {sorted_series(ttft, "TTFT", "#1f77b4"), sorted_series(e2e, "E2E", "#d62728")});

  const std::vector<StepRecord>& steps = result.recorder.steps;
  Series dt{"step time (ms)", "#1f77b4", {}, {}}, batch{"requests per step", "#2ca02c", {}, {}};
  const size_t bin = std::max<size_t>(1, (steps.size() + kMaxPoints - 1) / kMaxPoints);
  for (size_t i = 0; i < steps.size(); i += bin) {
    double t = 0, ms = 0, n = 0;
    const size_t end = std::min(steps.size(), i + bin);
    for (size_t j = i; j < end; ++j) {
      t += steps[j].t_s;
      ms += steps[j].duration_s * 1e3;
      n += steps[j].requests;
    }
    const auto k = static_cast<double>(end - i);
    dt.x.push_back(t / k);
    dt.y.push_back(ms / k);
    batch.x.push_back(t / k);
    batch.y.push_back(n / k);
  }
  write_chart(prefix + "-steps.svg", "Steps over time (bin means)", "simulated time (s)", "ms | requests", {dt, batch});
}

}  // namespace dooly::sim
