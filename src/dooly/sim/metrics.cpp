#include "dooly/sim/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::sim {
namespace {

constexpr const char* kSloFix = "write --slo as ttft:MS,tpot:MS[,e2e:MS] (milliseconds, each at most once)";

// The value at rank k (0-based) of the runs laid out in order; `ends[i]` = ranks covered by runs 0..i.
double at_rank(const std::vector<std::pair<double, int64_t>>& runs, const std::vector<int64_t>& ends, int64_t k) {
  const auto it = std::upper_bound(ends.begin(), ends.end(), k);
  return runs[static_cast<size_t>(it - ends.begin())].first;
}

double run_percentile(const std::vector<std::pair<double, int64_t>>& runs, const std::vector<int64_t>& ends, double p) {
  const int64_t n = ends.back();
  const double rank = p / 100.0 * static_cast<double>(n - 1);
  const auto lo = static_cast<int64_t>(std::floor(rank));
  const int64_t hi = std::min(lo + 1, n - 1);
  const double a = at_rank(runs, ends, lo), b = at_rank(runs, ends, hi);
  return a + (rank - static_cast<double>(lo)) * (b - a);
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Stat stat_of(std::vector<double>& values) {
  Stat s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.median = percentile(values, 50);
  s.p90 = percentile(values, 90);
  s.p99 = percentile(values, 99);
  return s;
}

Stat stat_of_runs(std::vector<std::pair<double, int64_t>>& runs) {
  Stat s;
  if (runs.empty()) return s;
  std::sort(runs.begin(), runs.end());
  std::vector<int64_t> ends;
  ends.reserve(runs.size());
  int64_t n = 0;
  double sum = 0;
  for (const auto& [v, count] : runs) {
    n += count;
    sum += v * static_cast<double>(count);
    ends.push_back(n);
  }
  s.mean = sum / static_cast<double>(n);
  s.median = run_percentile(runs, ends, 50);
  s.p90 = run_percentile(runs, ends, 90);
  s.p99 = run_percentile(runs, ends, 99);
  return s;
}

Slo parse_slo(const std::string& spec) {
  Slo slo;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    const size_t colon = item.find(':');
    const std::string key = item.substr(0, colon);
    std::optional<double>* field = key == "ttft"                   ? &slo.ttft_ms
                                   : key == "tpot"                 ? &slo.tpot_ms
                                   : key == "e2e" || key == "e2el" ? &slo.e2e_ms
                                                                   : nullptr;
    double ms = 0;
    const char* first = item.data() + std::min(colon + 1, item.size());
    const auto [end, ec] = std::from_chars(first, item.data() + item.size(), ms);
    if (field == nullptr || colon == std::string::npos || ec != std::errc() || end != item.data() + item.size() ||
        !std::isfinite(ms) || ms <= 0 || field->has_value())
      DOOLY_THROW(InputError, kSloFix, "--slo '{}': '{}' is not ttft:MS, tpot:MS or e2e:MS", utf8::echo(spec),
                  utf8::echo(item));
    *field = ms;
    start = comma + 1;
  }
  return slo;
}

bool meets(const Slo& slo, double ttft_s, double tpot_s, double e2e_s) {
  return (!slo.ttft_ms || ttft_s * 1e3 <= *slo.ttft_ms) && (!slo.tpot_ms || tpot_s * 1e3 <= *slo.tpot_ms) &&
         (!slo.e2e_ms || e2e_s * 1e3 <= *slo.e2e_ms);
}

Summary summarize(const std::vector<RequestState>& requests, Recorder& recorder, double idle_power_w,
                  const std::optional<Slo>& slo) {
  Summary s;
  s.requests = static_cast<int64_t>(requests.size());
  s.slo = slo;
  std::vector<double> ttft, tpot, e2e;
  ttft.reserve(requests.size());
  e2e.reserve(requests.size());
  for (const RequestState& r : requests) {
    if (r.finish_s < 0) continue;
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    s.duration_s = std::max(s.duration_s, r.finish_s);
    const double first = r.first_token_s - r.arrival_s, total = r.finish_s - r.arrival_s;
    const double per_token = r.output_tokens > 1 ? (total - first) / static_cast<double>(r.output_tokens - 1) : 0;
    ttft.push_back(first * 1e3);
    e2e.push_back(total * 1e3);
    if (r.output_tokens > 1) tpot.push_back(per_token * 1e3);
    if (slo && meets(*slo, first, per_token, total)) ++s.good_requests;
  }
  s.ttft_ms = stat_of(ttft);
  s.tpot_ms = stat_of(tpot);
  s.e2e_ms = stat_of(e2e);
  s.itl_ms = stat_of_runs(recorder.itl.runs());
  for (double* v : {&s.itl_ms.mean, &s.itl_ms.median, &s.itl_ms.p90, &s.itl_ms.p99}) *v *= 1e3;
  const double d = s.duration_s > 0 ? s.duration_s : 1;
  s.request_throughput = static_cast<double>(s.completed) / d;
  s.output_throughput = static_cast<double>(s.output_tokens) / d;
  s.total_token_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / d;
  s.request_goodput = static_cast<double>(s.good_requests) / d;
  s.step_energy_j = recorder.step_energy_j;
  s.idle_energy_j = idle_power_w * std::max(0.0, s.duration_s - recorder.busy_s);
  s.energy_j = s.step_energy_j + s.idle_energy_j;
  s.j_per_output_token = s.output_tokens > 0 ? s.energy_j / static_cast<double>(s.output_tokens) : 0;
  s.j_per_request = s.completed > 0 ? s.energy_j / static_cast<double>(s.completed) : 0;
  s.average_power_w = s.duration_s > 0 ? s.energy_j / s.duration_s : 0;
  s.steps = recorder.step_count;
  s.preemptions = recorder.preemptions;
  s.extrapolated_steps = recorder.extrapolated_steps;
  const double steps = recorder.step_count > 0 ? static_cast<double>(recorder.step_count) : 1;
  s.mean_batch_requests = static_cast<double>(recorder.batch_requests) / steps;
  s.mean_batch_tokens = static_cast<double>(recorder.batch_tokens) / steps;
  return s;
}

}  // namespace dooly::sim
