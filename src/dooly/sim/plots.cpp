// `dooly simulate --plot PREFIX`: two PNG charts drawn with dooly::plot (docs/plot.md).
//   PREFIX-latency.png  the CDFs of TTFT, TPOT and E2E over the completed requests (one panel each, ms)
//   PREFIX-steps.png    over simulated time: requests per step and queue length, step time, and power (the steps'
//                       energy over their time, idle power while the engine waits)
// Long runs are thinned per pixel column (lowest and highest value kept: dooly::plot::min_max_decimate), and the
// figure says so.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/plot/cdf.hpp"
#include "dooly/plot/decimate.hpp"
#include "dooly/plot/figure.hpp"
#include "dooly/plot/text.hpp"
#include "dooly/sim/result_writer.hpp"

namespace dooly::sim {
namespace {

constexpr size_t kColumns = 1200;  // buckets of the thinned series: about one per pixel column

void latency_chart(const std::string& path, const Simulation& sim) {
  std::vector<double> ttft, tpot, e2e;
  for (const RequestState& r : sim.states) {
    if (r.finish_s < 0) continue;
    ttft.push_back((r.first_token_s - r.arrival_s) * 1e3);
    e2e.push_back((r.finish_s - r.arrival_s) * 1e3);
    if (r.output_tokens > 1)
      tpot.push_back((r.finish_s - r.first_token_s) * 1e3 / static_cast<double>(r.output_tokens - 1));
  }
  plot::Figure fig(1200, 960, fmt::format("Latency CDFs: {} completed requests ({})", e2e.size(), sim.model.name));
  const auto panel = [&](const char* name, std::vector<double> ms) {
    plot::Axes& ax = fig.add_axes();
    ax.title(name).x_label(fmt::format("{} (ms)", name)).y_label("share of requests").y_limits(0, 1);
    if (!ms.empty()) ax.add(plot::empirical_cdf(name, std::move(ms)));
  };
  panel("TTFT", std::move(ttft));
  panel("TPOT", std::move(tpot));
  panel("E2E", std::move(e2e));
  fig.write_png(path);
}

struct StepSeries {
  std::vector<double> t_s, requests, waiting, step_ms, power_w;
};

StepSeries step_series(const std::vector<StepRecord>& steps, double idle_w) {
  StepSeries s;
  double end_s = 0;
  for (const StepRecord& r : steps) {
    if (r.t_s > end_s + 1e-9) {  // the engine waited: idle power over the gap
      s.t_s.push_back(end_s);
      s.requests.push_back(0);
      s.waiting.push_back(0);
      s.step_ms.push_back(0);
      s.power_w.push_back(idle_w);
    }
    s.t_s.push_back(r.t_s);
    s.requests.push_back(r.requests);
    s.waiting.push_back(r.waiting);
    s.step_ms.push_back(r.duration_s * 1e3);
    s.power_w.push_back(r.duration_s > 0 ? r.energy_j / r.duration_s : idle_w);
    end_s = r.t_s + r.duration_s;
  }
  return s;
}

plot::Line thinned(std::string label, const std::vector<double>& x, const std::vector<double>& y, bool& thin) {
  plot::Decimated d = plot::min_max_decimate(x, y, kColumns);
  thin = thin || d.thinned;
  return plot::Line{.label = std::move(label), .x = std::move(d.x), .y = std::move(d.y), .step = true};
}

void steps_chart(const std::string& path, const Simulation& sim, const SimResult& result) {
  const StepSeries s = step_series(result.recorder.steps, sim.cost->idle_power_w());
  plot::Figure fig(1500, 900, fmt::format("Steps over simulated time: {} steps", result.recorder.steps.size()));
  bool thin = false;
  plot::Axes& batch = fig.add_axes();
  batch.y_label("requests").y_from_zero();
  batch.add(thinned("requests in the step", s.t_s, s.requests, thin));
  batch.add(thinned("waiting", s.t_s, s.waiting, thin));
  plot::Axes& time = fig.add_axes();
  time.y_label("step time (ms)").y_from_zero();
  time.add(thinned("step time", s.t_s, s.step_ms, thin));
  plot::Axes& power = fig.add_axes();
  power.x_label("simulated time (s)").y_label("power (W)").y_from_zero();
  power.add(thinned("average power over the step", s.t_s, s.power_w, thin));
  fig.add_note(fmt::format("cost model: {}", sim.cost->describe()).substr(0, 240));
  if (thin) fig.add_note("series thinned to the lowest and highest value per pixel column");
  fig.write_png(path);
}

}  // namespace

void write_plots(const std::string& prefix, const Simulation& sim, const SimResult& result) {
  struct FontCaches {  // cairo's and fontconfig's process-wide caches, freed however the charts end (LeakSanitizer)
    FontCaches() = default;
    FontCaches(const FontCaches&) = delete;
    FontCaches& operator=(const FontCaches&) = delete;
    ~FontCaches() { plot::release_font_caches(); }
  } caches;
  latency_chart(prefix + "-latency.png", sim);
  steps_chart(prefix + "-steps.png", sim, result);
}

}  // namespace dooly::sim
