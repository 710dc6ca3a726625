#pragma once
// Serving metrics with vLLM's definitions (`vllm bench serve`, benchmarks/benchmark_serving.py calculate_metrics):
//   TTFT = first token time − arrival; E2E = last token time − arrival;
//   TPOT = (E2E − TTFT) / (output tokens − 1), for requests with more than one output token;
//   ITL  = the gaps between a request's successive tokens, all requests' gaps together;
//   percentiles as numpy's default (linear interpolation between closest ranks);
//   throughput = completed requests (or tokens) / duration, duration = from 0 to the last completion;
//   goodput = completed requests meeting every given SLO / duration (a one-token request's TPOT counts as 0).
// Energy: steps' energy (device + idle power over their host time) plus idle power while the engine has nothing to
// do; J per output token and per request divide all of it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dooly/sim/recorder.hpp"
#include "dooly/sim/request_state.hpp"

namespace dooly::sim {

struct Stat {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};

// numpy.percentile(values, p) with the default linear method; `sorted` ascending, non-empty.
double percentile(const std::vector<double>& sorted, double p);
// Mean and percentiles (0 for all when empty). Sorts `values`.
Stat stat_of(std::vector<double>& values);
// The same over (value, count) runs, as if each value were repeated count times. Sorts `runs`.
Stat stat_of_runs(std::vector<std::pair<double, int64_t>>& runs);

struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
};
// "ttft:200,tpot:50[,e2e:MS]" (e2el is accepted for vLLM's name); InputError for anything else.
Slo parse_slo(const std::string& spec);
bool meets(const Slo& slo, double ttft_s, double tpot_s, double e2e_s);

struct Summary {
  int64_t requests = 0, completed = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Stat ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::optional<Slo> slo;
  int64_t good_requests = 0;
  double request_goodput = 0;
  double energy_j = 0, step_energy_j = 0, idle_energy_j = 0;
  double j_per_output_token = 0, j_per_request = 0, average_power_w = 0;
  int64_t steps = 0, preemptions = 0, extrapolated_steps = 0;
  double mean_batch_requests = 0, mean_batch_tokens = 0;
};

// `recorder.itl` is sorted in place.
Summary summarize(const std::vector<RequestState>& requests, Recorder& recorder, double idle_power_w,
                  const std::optional<Slo>& slo);

}  // namespace dooly::sim
