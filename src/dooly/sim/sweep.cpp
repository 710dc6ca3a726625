#include "dooly/sim/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"
#include "dooly/sim/simulator.hpp"

namespace dooly::sim {
namespace {

constexpr const char* kGridFix =
    "write --grid as key=v1,v2;key2=v3 with settings' names (dooly simulate --help) or rate";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// Applies one grid value to a configuration.
void apply(SimConfig& c, const std::string& key, const std::string& value) {
  if (key == "rate") {
    c.workload = with_rate(c.workload, value);
  } else {
    set_option(c, key, value);
  }
}

std::string point_name(const std::vector<GridAxis>& grid, const SweepPoint& p) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < grid.size(); ++i) parts.push_back(grid[i].key + "=" + p.values[i]);
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The columns after the grid's keys: (name, value of a summary).
struct Column {
  const char* name;
  double (*value)(const Summary& s);
};
constexpr Column kColumns[] = {
    {"completed", [](const Summary& s) { return static_cast<double>(s.completed); }},
    {"duration_s", [](const Summary& s) { return s.duration_s; }},
    {"request_throughput", [](const Summary& s) { return s.request_throughput; }},
    {"output_throughput", [](const Summary& s) { return s.output_throughput; }},
    {"ttft_ms_mean", [](const Summary& s) { return s.ttft_ms.mean; }},
    {"ttft_ms_p99", [](const Summary& s) { return s.ttft_ms.p99; }},
    {"tpot_ms_mean", [](const Summary& s) { return s.tpot_ms.mean; }},
    {"tpot_ms_p99", [](const Summary& s) { return s.tpot_ms.p99; }},
    {"itl_ms_mean", [](const Summary& s) { return s.itl_ms.mean; }},
    {"e2e_ms_mean", [](const Summary& s) { return s.e2e_ms.mean; }},
    {"e2e_ms_p99", [](const Summary& s) { return s.e2e_ms.p99; }},
    {"request_goodput", [](const Summary& s) { return s.request_goodput; }},
    {"j_per_output_token", [](const Summary& s) { return s.j_per_output_token; }},
    {"average_power_w", [](const Summary& s) { return s.average_power_w; }},
    {"preemptions", [](const Summary& s) { return static_cast<double>(s.preemptions); }},
    {"steps", [](const Summary& s) { return static_cast<double>(s.steps); }},
};

// Runs fn(i) for i in [0, n) on `jobs` threads; the first exception (in index order) is rethrown after all stop.
template <typename Fn>
void parallel_for(size_t n, int jobs, Fn fn) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t count = std::clamp<size_t>(static_cast<size_t>(std::max(jobs, 1)), 1, std::max<size_t>(n, 1));
  for (size_t t = 1; t < count; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

std::vector<GridAxis> parse_grid(const std::string& spec) {
  std::vector<GridAxis> grid;
  std::set<std::string> seen;
  for (const std::string& item : split(spec, ';')) {
    const size_t eq = item.find('=');
    GridAxis axis{item.substr(0, eq), {}};
    if (eq == std::string::npos || axis.key.empty())
      DOOLY_THROW(InputError, kGridFix, "--grid: '{}' is not key=values", utf8::echo(item));
    const Option* o = find_option(axis.key);
    if (axis.key != "rate" && (o == nullptr || o->output))
      DOOLY_THROW(InputError, kGridFix, "--grid: '{}' is not a setting a sweep can vary", utf8::echo(axis.key));
    if (!seen.insert(axis.key).second)
      DOOLY_THROW(InputError, kGridFix, "--grid: '{}' is given twice", utf8::echo(axis.key));
    axis.values = split(item.substr(eq + 1), ',');
    for (const std::string& v : axis.values)
      if (v.empty()) DOOLY_THROW(InputError, kGridFix, "--grid: {} has an empty value", axis.key);
    grid.push_back(std::move(axis));
  }
  return grid;
}

std::string with_rate(const std::string& workload, const std::string& rate) {
  const size_t colon = workload.find(':');
  const std::string kind = workload.substr(0, colon);
  if (colon == std::string::npos || (kind != "poisson" && kind != "gamma" && kind != "constant"))
    DOOLY_THROW(InputError, "sweep rate with a poisson, gamma or constant --workload",
                "rate cannot be set on workload '{}'", utf8::echo(workload));
  std::vector<std::string> fields = split(workload.substr(colon + 1), ',');
  bool replaced = false;
  for (std::string& f : fields)
    if (f.rfind("rate=", 0) == 0) {
      f = "rate=" + rate;
      replaced = true;
    }
  if (!replaced) fields.insert(fields.begin(), "rate=" + rate);
  return fmt::format("{}:{}", kind, fmt::join(fields, ","));
}

std::vector<SweepPoint> expand_grid(const SimConfig& base, const std::vector<GridAxis>& grid) {
  std::vector<SweepPoint> points(1, SweepPoint{{}, base});
  for (const GridAxis& axis : grid) {
    std::vector<SweepPoint> next;
    for (const SweepPoint& p : points)
      for (const std::string& v : axis.values) {
        SweepPoint q = p;
        q.values.push_back(v);
        apply(q.config, axis.key, v);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

std::vector<Summary> run_sweep(const std::vector<SweepPoint>& points, const std::string& models_dir, int jobs) {
  std::vector<Summary> rows(points.size());
  // Checked first: every point's model, workload, engine and requests, before any runs.
  for (const SweepPoint& p : points) {
    try {
      (void)prepare(p.config, models_dir);
    } catch (const InputError& e) {
      std::vector<std::string> values = p.values;
      DOOLY_THROW(InputError, e.fix(), "sweep point ({}): {}", fmt::join(values, ", "), e.problem());
    }
  }
  parallel_for(points.size(), jobs, [&](size_t i) {
    auto sim = prepare(points[i].config, models_dir);
    rows[i] = run(*sim).summary;
  });
  return rows;
}

std::string sweep_csv(const std::vector<GridAxis>& grid, const std::vector<SweepPoint>& points,
                      const std::vector<Summary>& rows) {
  std::string out = "# dooly sweep, version 1\n";
  for (const GridAxis& a : grid) out += a.key + ",";
  for (const Column& c : kColumns) out += fmt::format("{}{}", c.name, &c == std::end(kColumns) - 1 ? "\n" : ",");
  for (size_t i = 0; i < points.size(); ++i) {
    for (const std::string& v : points[i].values) out += v + ",";
    for (const Column& c : kColumns)
      out += fmt::format("{}{}", c.value(rows[i]), &c == std::end(kColumns) - 1 ? "\n" : ",");
  }
  return out;
}

std::string sweep_table(const std::vector<GridAxis>& grid, const std::vector<SweepPoint>& points,
                        const std::vector<Summary>& rows) {
  std::string out;
  for (size_t i = 0; i < points.size(); ++i) {
    const Summary& s = rows[i];
    out += fmt::format(
        "{}: {:.3f} req/s, TTFT {:.1f} / p99 {:.1f} ms, TPOT {:.2f} ms, E2E {:.1f} ms, {:.3f} J/token{}\n",
        point_name(grid, points[i]), s.request_throughput, s.ttft_ms.mean, s.ttft_ms.p99, s.tpot_ms.mean, s.e2e_ms.mean,
        s.j_per_output_token, s.slo ? fmt::format(", goodput {:.3f} req/s", s.request_goodput) : "");
  }
  return out;
}

}  // namespace dooly::sim
