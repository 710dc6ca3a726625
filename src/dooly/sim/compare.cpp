#include "dooly/sim/compare.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/plot/cdf.hpp"
#include "dooly/plot/figure.hpp"
#include "dooly/plot/text.hpp"
#include "dooly/sim/metrics.hpp"

namespace dooly::sim {

namespace {

using nlohmann::json;

constexpr const char* kFix = "give the result files of `dooly live --out` and `dooly simulate --out` (version 1)";
constexpr const char* kMetrics[] = {"ttft", "tpot", "e2e", "energy"};

// A field's value, when the object has a finite number there.
std::optional<double> finite_number(const json& s, const std::string& key) {
  const auto it = s.find(key);
  if (it == s.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// A request's value of one metric, when the file has a finite number there.
std::optional<double> value_of(const json& r, const char* metric) {
  return finite_number(r, std::string(metric) + (std::string(metric) == "energy" ? "_j" : "_s"));
}

// A number field of a request (0 when absent, not a number or not finite).
double number_or_zero(const json& r, const char* key) {
  const auto it = r.find(key);
  if (it == r.end() || !it->is_number()) return 0.0;
  const double v = it->get<double>();
  return std::isfinite(v) ? v : 0.0;
}

std::string id_of(const json& r) {
  const auto it = r.find("id");
  if (it == r.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// A request counts as finished when it has an E2E time (and, where the file says, finished is true).
bool finished(const json& r) {
  if (r.contains("finished") && r["finished"].is_boolean() && !r["finished"].get<bool>()) return false;
  return value_of(r, "e2e").has_value();
}

std::map<std::string, const json*> by_id(const json& file) {
  std::map<std::string, const json*> out;
  for (const json& r : file["requests"]) out.emplace(id_of(r), &r);
  return out;
}

double quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : percentile(v, p);
}

double rel(double sim, double live) { return live != 0 ? (sim - live) / live : 0.0; }

MetricError metric_error(const char* name, const std::vector<std::pair<double, double>>& pairs) {
  MetricError m;
  m.name = name;
  m.requests = static_cast<int64_t>(pairs.size());
  std::vector<double> live, sim;
  double sum = 0;
  for (const auto& [l, s] : pairs) {
    live.push_back(l);
    sim.push_back(s);
    sum += l != 0 ? std::abs(s - l) / std::abs(l) : 0.0;
  }
  if (pairs.empty()) return m;
  m.mape = sum / static_cast<double>(pairs.size());
  m.live_median = quantile(live, 50);
  m.sim_median = quantile(sim, 50);
  m.live_p90 = quantile(live, 90);
  m.sim_p90 = quantile(sim, 90);
  m.median_error = rel(m.sim_median, m.live_median);
  m.p90_error = rel(m.sim_p90, m.live_p90);
  return m;
}

struct Totals {
  double output_tokens = 0, energy_j = 0, first_s = 0, last_s = 0;
  bool all_energy = true;
};

Totals totals_of(const json& file) {
  Totals t;
  bool any = false;
  for (const json& r : file["requests"]) {
    if (!finished(r)) continue;
    const double arrival = number_or_zero(r, "arrival_s");
    t.first_s = any ? std::min(t.first_s, arrival) : arrival;
    t.last_s = any ? std::max(t.last_s, arrival + *value_of(r, "e2e")) : arrival + *value_of(r, "e2e");
    any = true;
    t.output_tokens += number_or_zero(r, "output_tokens");
    const auto e = value_of(r, "energy");
    t.all_energy = t.all_energy && e.has_value();
    t.energy_j += e.value_or(0.0);
  }
  t.all_energy = t.all_energy && any;
  return t;
}

struct StepKey {
  int64_t requests = 0, tokens = 0, prefill = 0, decodes = 0;
  bool operator==(const StepKey&) const = default;
};

// A step's count under either file's name; -1 when absent or not an integer that fits (a float is never cast:
// out of range that is undefined behaviour).
int64_t int_field(const json& s, const char* a, const char* b) {
  const auto it = s.find(a) != s.end() ? s.find(a) : s.find(b);
  if (it == s.end()) return -1;
  if (it->is_number_unsigned()) return it->get<uint64_t>() <= INT64_MAX ? it->get<int64_t>() : -1;
  return it->is_number_integer() ? it->get<int64_t>() : -1;
}

StepKey step_key(const json& s) {
  return {int_field(s, "num_requests", "requests"), int_field(s, "num_tokens", "tokens"),
          int_field(s, "num_prefill_tokens", "prefill_tokens"), int_field(s, "num_decode_requests", "decode_requests")};
}

constexpr const char* kKinds[] = {"prefill", "decode", "mixed"};
constexpr const char* kPaths[] = {"eager", "graph", "capture"};

// Index into kKinds: prefill (no decodes), decode (no prefill tokens), mixed.
int kind_of(const StepKey& k) {
  if (k.decodes == 0) return 0;
  return k.prefill == 0 ? 1 : 2;
}

// The live step's time: to the next step's start where the engine went straight on (a gap under 5 ms), else its
// own duration; nullopt without a positive one.
std::optional<double> live_step_s(const json& steps, size_t i) {
  constexpr double kStraightOnS = 0.005;
  std::optional<double> d = finite_number(steps[i], "duration_s");
  if (i + 1 < steps.size() && steps[i + 1].is_object()) {
    const auto start = finite_number(steps[i], "start_s"), end = finite_number(steps[i], "end_s"),
               next = finite_number(steps[i + 1], "start_s");
    if (start && end && next && *next - *end < kStraightOnS) d = *next - *start;
  }
  return d && *d > 0 ? d : std::nullopt;
}

// The simulation's price of its step: the cost model's own where the duration was the live run's.
std::optional<double> sim_step_s(const json& s) {
  std::optional<double> d = finite_number(s, "model_dt_s");
  if (!d) d = finite_number(s, "dt_s");
  return d && *d > 0 ? d : std::nullopt;
}

// The step-time table: each matched step's (live, simulated) time under its (kind, path).
class PricingTally {
 public:
  void add(const StepKey& key, const json& live_steps, size_t i, const json& sim_step) {
    const auto live_s = live_step_s(live_steps, i), sim_s = sim_step_s(sim_step);
    const auto path = sim_step.find("path");
    const std::string p = path != sim_step.end() && path->is_string() ? path->get<std::string>() : "eager";
    const auto pi = std::find(std::begin(kPaths), std::end(kPaths), p) - std::begin(kPaths);
    if (!live_s || !sim_s || pi >= static_cast<std::ptrdiff_t>(std::size(kPaths))) return;
    priced_[{kind_of(key), static_cast<int>(pi)}].emplace_back(*live_s, *sim_s);
    all_.emplace_back(*live_s, *sim_s);
  }
  // By kind then path, then "all".
  std::vector<StepPricing> rows() const {
    std::vector<StepPricing> out;
    for (const auto& [key, pairs] : priced_) {
      const std::string name = fmt::format("{} {}", kKinds[key.first], kPaths[key.second]);
      out.push_back({kKinds[key.first], kPaths[key.second], metric_error(name.c_str(), pairs)});
    }
    if (!all_.empty()) out.push_back({"all", "", metric_error("all", all_)});
    return out;
  }

 private:
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> priced_;
  std::vector<std::pair<double, double>> all_;
};

std::string describe(const StepKey& k) {
  return fmt::format("{} requests, {} tokens ({} prefill, {} decodes)", k.requests, k.tokens, k.prefill, k.decodes);
}

StepMatch match_steps(const json& live, const json& sim) {
  StepMatch m;
  const json empty = json::array();
  const json& a = live.contains("steps") ? live["steps"] : empty;
  const json& b = sim.contains("steps") ? sim["steps"] : empty;
  m.live_steps = static_cast<int64_t>(a.size());
  m.sim_steps = static_cast<int64_t>(b.size());
  m.compared = std::min(m.live_steps, m.sim_steps);
  auto live_captured = [&](size_t i) {
    const json& s = a[i];
    return s.is_object() && s.contains("captured") && s["captured"].is_boolean() && s["captured"].get<bool>();
  };
  auto sim_captured = [&](size_t i) {
    const json& s = b[i];
    return s.is_object() && s.contains("path") && s["path"].is_string() && s["path"].get<std::string>() == "capture";
  };
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].is_object() && a[i].contains("captured")) m.live_captures = m.live_captures.value_or(0) + live_captured(i);
  for (size_t i = 0; i < b.size(); ++i) m.sim_captures += sim_captured(i);
  PricingTally pricing;
  bool leading = true;
  for (int64_t i = 0; i < m.compared; ++i) {
    const auto at = static_cast<size_t>(i);
    m.captures_in_both += live_captured(at) && sim_captured(at);
    const StepKey x = step_key(a[at]), y = step_key(b[at]);
    if (x == y) {
      ++m.matching;
      m.horizon += leading ? 1 : 0;
      pricing.add(x, a, at, b[at]);
      continue;
    }
    if (leading) m.first_mismatch = fmt::format("step {}: live {}; simulated {}", i, describe(x), describe(y));
    leading = false;
  }
  m.pricing = pricing.rows();
  return m;
}

using Pairs = std::array<std::vector<std::pair<double, double>>, 4>;  // per metric of kMetrics: (live, simulated)

// A request finished in both runs: each metric both have, paired; the latencies (ms) kept for the CDFs.
void add_pairs(const json& live, const json& sim, Comparison& c, Pairs& pairs) {
  for (size_t m = 0; m < 4; ++m) {
    const auto x = value_of(live, kMetrics[m]), y = value_of(sim, kMetrics[m]);
    if (x && y) pairs[m].emplace_back(*x, *y);
    if (m < 3 && x) c.live_ms[m].push_back(*x * 1e3);
    if (m < 3 && y) c.sim_ms[m].push_back(*y * 1e3);
  }
}

}  // namespace

void check_result(const json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("version"))
    DOOLY_THROW(InputError, kFix, "{}: not a dooly result file (no \"version\")", path);
  if (!j["version"].is_number_integer() || j["version"].get<int>() != 1)
    DOOLY_THROW(InputError, kFix, "{}: result file version {} (this build reads version 1)", path, j["version"].dump());
  if (!j.contains("requests") || !j["requests"].is_array() || j["requests"].empty())
    DOOLY_THROW(InputError, kFix, "{}: the result file holds no requests", path);
  for (const json& r : j["requests"])
    if (!r.is_object()) DOOLY_THROW(InputError, kFix, "{}: a request is not a JSON object", path);
  if (j.contains("steps") && !j["steps"].is_array()) DOOLY_THROW(InputError, kFix, "{}: \"steps\" is not a list", path);
  if (j.contains("steps"))
    for (const json& s : j["steps"])
      if (!s.is_object()) DOOLY_THROW(InputError, kFix, "{}: a step is not a JSON object", path);
}

json read_result(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) DOOLY_THROW(InputError, kFix, "cannot read {}", path);
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) DOOLY_THROW(InputError, kFix, "{}: not JSON", path);
  check_result(j, path);
  return j;
}

Comparison compare_results(const json& live, const json& sim) {
  Comparison c;
  const auto a = by_id(live), b = by_id(sim);
  c.live_requests = static_cast<int64_t>(a.size());
  c.sim_requests = static_cast<int64_t>(b.size());
  Pairs pairs;
  for (const auto& [id, l] : a) {
    const auto it = b.find(id);
    if (it == b.end()) {
      ++c.only_live;
      continue;
    }
    if (!finished(*l) || !finished(*it->second)) continue;
    ++c.both_finished;
    add_pairs(*l, *it->second, c, pairs);
  }
  for (const auto& [id, s] : b) c.only_sim += a.count(id) ? 0 : 1;
  for (size_t m = 0; m < 4; ++m) c.metrics.push_back(metric_error(kMetrics[m], pairs[m]));
  const Totals tl = totals_of(live), ts = totals_of(sim);
  c.live_throughput_tps = tl.last_s > tl.first_s ? tl.output_tokens / (tl.last_s - tl.first_s) : 0.0;
  c.sim_throughput_tps = ts.last_s > ts.first_s ? ts.output_tokens / (ts.last_s - ts.first_s) : 0.0;
  if (tl.all_energy && tl.output_tokens > 0) c.live_j_per_token = tl.energy_j / tl.output_tokens;
  if (ts.all_energy && ts.output_tokens > 0) c.sim_j_per_token = ts.energy_j / ts.output_tokens;
  c.steps = match_steps(live, sim);
  return c;
}

std::string render_comparison(const Comparison& c) {
  std::string out = fmt::format("requests: live {}, simulated {}, finished in both {}", c.live_requests, c.sim_requests,
                                c.both_finished);
  if (c.only_live || c.only_sim) out += fmt::format(" ({} only live, {} only simulated)", c.only_live, c.only_sim);
  out += "\n";
  out += fmt::format("{:<8} {:>8} {:>9} {:>12} {:>12} {:>9} {:>12} {:>12} {:>9}\n", "metric", "requests", "MAPE",
                     "live median", "sim median", "error", "live p90", "sim p90", "error");
  for (const MetricError& m : c.metrics) {
    const double unit = m.name == "energy" ? 1.0 : 1e3;
    out +=
        fmt::format("{:<8} {:>8} {:>8.2f}% {:>12.4g} {:>12.4g} {:>+8.2f}% {:>12.4g} {:>12.4g} {:>+8.2f}%  ({})\n",
                    m.name, m.requests, 100 * m.mape, m.live_median * unit, m.sim_median * unit, 100 * m.median_error,
                    m.live_p90 * unit, m.sim_p90 * unit, 100 * m.p90_error, m.name == "energy" ? "J" : "ms");
  }
  out +=
      fmt::format("output throughput: live {:.2f} tok/s, simulated {:.2f} tok/s ({:+.2f} %)\n", c.live_throughput_tps,
                  c.sim_throughput_tps, 100 * rel(c.sim_throughput_tps, c.live_throughput_tps));
  if (c.live_j_per_token && c.sim_j_per_token)
    out += fmt::format("energy: live {:.4f} J/output token, simulated {:.4f} ({:+.2f} %)\n", *c.live_j_per_token,
                       *c.sim_j_per_token, 100 * rel(*c.sim_j_per_token, *c.live_j_per_token));
  const StepMatch& s = c.steps;
  out += fmt::format("steps: live {}, simulated {}; same composition {} of {} ({:.2f} %); horizon {} leading steps",
                     s.live_steps, s.sim_steps, s.matching, s.compared,
                     s.compared ? 100.0 * static_cast<double>(s.matching) / static_cast<double>(s.compared) : 0.0,
                     s.horizon);
  out += s.first_mismatch.empty() ? "\n" : fmt::format("; first difference at {}\n", s.first_mismatch);
  if (s.live_captures)
    out += fmt::format("CUDA graph captures: live {}, simulated {}; at the same step {}\n", *s.live_captures,
                       s.sim_captures, s.captures_in_both);
  if (!s.pricing.empty()) {
    out += "step time at the same composition (live: to the next step's start; simulated: the cost model's price)\n";
    out += fmt::format("{:<16} {:>7} {:>9} {:>12} {:>12} {:>9}\n", "kind, path", "steps", "MAPE", "live median",
                       "sim median", "error");
    for (const StepPricing& p : s.pricing)
      out += fmt::format("{:<16} {:>7} {:>8.2f}% {:>12.4g} {:>12.4g} {:>+8.2f}%  (ms)\n", p.error.name,
                         p.error.requests, 100 * p.error.mape, p.error.live_median * 1e3, p.error.sim_median * 1e3,
                         100 * p.error.median_error);
  }
  return out;
}

json comparison_json(const Comparison& c) {
  json metrics = json::object();
  for (const MetricError& m : c.metrics)
    metrics[m.name] = {{"requests", m.requests},         {"mape", m.mape},
                       {"median_error", m.median_error}, {"p90_error", m.p90_error},
                       {"live_median", m.live_median},   {"sim_median", m.sim_median},
                       {"live_p90", m.live_p90},         {"sim_p90", m.sim_p90}};
  const StepMatch& s = c.steps;
  json pricing = json::array();
  for (const StepPricing& p : s.pricing)
    pricing.push_back({{"kind", p.kind},
                       {"path", p.path},
                       {"steps", p.error.requests},
                       {"mape", p.error.mape},
                       {"median_error", p.error.median_error},
                       {"p90_error", p.error.p90_error},
                       {"live_median_s", p.error.live_median},
                       {"sim_median_s", p.error.sim_median}});
  return {{"version", 1},
          {"requests",
           {{"live", c.live_requests},
            {"sim", c.sim_requests},
            {"both_finished", c.both_finished},
            {"only_live", c.only_live},
            {"only_sim", c.only_sim}}},
          {"metrics", metrics},
          {"output_throughput_tps", {{"live", c.live_throughput_tps}, {"sim", c.sim_throughput_tps}}},
          {"j_per_output_token",
           {{"live", c.live_j_per_token ? json(*c.live_j_per_token) : json()},
            {"sim", c.sim_j_per_token ? json(*c.sim_j_per_token) : json()}}},
          {"steps",
           {{"live", s.live_steps},
            {"sim", s.sim_steps},
            {"compared", s.compared},
            {"matching", s.matching},
            {"horizon", s.horizon},
            {"first_mismatch", s.first_mismatch},
            {"captures",
             {{"live", s.live_captures ? json(*s.live_captures) : json()},
              {"sim", s.sim_captures},
              {"in_both", s.captures_in_both}}},
            {"pricing", pricing}}}};
}

void write_comparison_plot(const std::string& prefix, const Comparison& c) {
  struct FontCaches {  // cairo's and fontconfig's process-wide caches, freed however the chart ends
    FontCaches() = default;
    FontCaches(const FontCaches&) = delete;
    FontCaches& operator=(const FontCaches&) = delete;
    ~FontCaches() { plot::release_font_caches(); }
  } caches;
  plot::Figure fig(1200, 960, fmt::format("Live and simulated: {} requests finished in both", c.both_finished));
  const char* names[] = {"TTFT", "TPOT", "E2E"};
  for (size_t m = 0; m < 3; ++m) {
    plot::Axes& ax = fig.add_axes();
    ax.title(names[m]).x_label(fmt::format("{} (ms)", names[m])).y_label("share of requests").y_limits(0, 1);
    if (!c.live_ms[m].empty()) ax.add(plot::empirical_cdf("live", c.live_ms[m]));
    if (!c.sim_ms[m].empty()) ax.add(plot::empirical_cdf("simulated", c.sim_ms[m]));
  }
  fig.write_png(prefix + "-cdf.png");
}

}  // namespace dooly::sim
