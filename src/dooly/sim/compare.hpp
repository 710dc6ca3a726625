#pragma once
// `dooly compare LIVE SIM`: how far a simulation is from a live run of the same workload (issue 12 §4). Both are
// result files of version 1 (`dooly live`'s and `dooly simulate`'s); only the fields both write are read:
// requests[] {id, ttft_s, tpot_s, e2e_s, energy_j, output_tokens} and steps[] (live: num_requests, num_tokens,
// num_prefill_tokens, num_decode_requests; simulated: requests, tokens, prefill_tokens, decode_requests).
//
// Per metric (TTFT, TPOT, E2E, energy per request): the per-request MAPE over the requests both finished (matched
// by id; TPOT where both have one, energy where both have one), and the signed error of the median and the p90
// ((sim - live) / live). Throughput and J per output token over the finished requests.
//
// Steps: step i of one run against step i of the other (the same requests in the same order give the same steps
// while the scheduler emulation is exact): the share of steps whose composition (requests, tokens, prefill tokens,
// decode requests) is the same over the steps both runs have, and the divergence horizon: the number of leading
// steps that all match, with the first step that does not. Arrival timing can reorder admission once a request
// arrives while the engine is busy, so the horizon is the measure of the scheduler emulation itself; an offline
// batch (every request at 0: `constant:rate=1e9,...`) has no such arrival and should match throughout.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dooly::sim {

struct MetricError {
  std::string name;         // "ttft", "tpot", "e2e", "energy"
  int64_t requests = 0;     // in both, with a value in both
  double mape = 0;          // mean |sim - live| / live over them
  double median_error = 0;  // (sim median - live median) / live median
  double p90_error = 0;
  double live_median = 0, sim_median = 0, live_p90 = 0, sim_p90 = 0;
};

// The step-time model at the same composition: over the compared steps whose composition matches, the live step's
// time (to the next step's start where the engine went straight on, a gap under 5 ms; else its own duration)
// against the simulation's price of the step (`model_dt_s` where its times came from the live run, --step-times;
// else its `dt_s`), by the step's kind and the simulated forward path. `error`: MAPE and median error as for the
// requests; its name is "KIND PATH" ("decode graph", "mixed eager", ...; "all" for every matched step).
struct StepPricing {
  std::string kind;  // "prefill" (no decodes), "decode" (no prefill tokens), "mixed", "all"
  std::string path;  // the simulated step's: "eager", "graph", "capture"; "" for "all"
  MetricError error;
};

struct StepMatch {
  int64_t live_steps = 0, sim_steps = 0;
  int64_t compared = 0;        // min of the two
  int64_t matching = 0;        // of `compared`, same composition
  int64_t horizon = 0;         // leading steps that all match
  std::string first_mismatch;  // "step 12: live 8 requests, 520 tokens (512 prefill, 7 decodes); sim ..."
  // CUDA graphs: the steps that captured a graph (live: `captured`, recorded by dooly live since 2026-12-04, absent
  // before; simulated: path "capture"), and of the compared steps those that captured in both.
  std::optional<int64_t> live_captures;
  int64_t sim_captures = 0, captures_in_both = 0;
  // By kind (prefill, decode, mixed) then path, the groups that have steps; then "all". Empty when no matched step
  // has a time in both files.
  std::vector<StepPricing> pricing;
};

struct Comparison {
  int64_t live_requests = 0, sim_requests = 0, both_finished = 0;
  int64_t only_live = 0, only_sim = 0;  // ids in one file only
  std::vector<MetricError> metrics;
  double live_throughput_tps = 0, sim_throughput_tps = 0;  // output tokens per second of the finished requests
  std::optional<double> live_j_per_token, sim_j_per_token;
  StepMatch steps;
  // The finished requests' TTFT, TPOT, E2E in ms, per file (for the CDF plot).
  std::vector<double> live_ms[3], sim_ms[3];
};

// Throws InputError naming the file and the fix: not JSON, not a result file of version 1, no requests.
nlohmann::json read_result(const std::string& path);
// The checks read_result makes on parsed JSON (`origin` names it in messages).
void check_result(const nlohmann::json& j, const std::string& origin);
Comparison compare_results(const nlohmann::json& live, const nlohmann::json& sim);
std::string render_comparison(const Comparison& c);
nlohmann::json comparison_json(const Comparison& c);
// PREFIX-cdf.png: the CDFs of TTFT, TPOT and E2E, live and simulated on one panel each.
void write_comparison_plot(const std::string& prefix, const Comparison& c);

}  // namespace dooly::sim
