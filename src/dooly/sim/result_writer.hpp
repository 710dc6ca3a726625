#pragma once
// What `dooly simulate` writes: result.json (version 1), a per-request CSV, and PNG charts. The JSON is streamed:
// the steps are written as the simulation makes them (a run of 100,000 requests has millions of steps; none is
// kept in memory), then the requests and the summary. Numbers are written shortest-round-trip, so the same run gives
// the same bytes.
//
// result.json, in this key order: {"version": 1, "tool": "dooly simulate", "config": {...}, "model": {...},
//   "engine": {...the configuration the engine resolved...}, "cost_model": "...",
//   "steps": [{"i", "t_s", "dt_s", "requests", "tokens", "prefill_tokens", "decode_requests", "padded_tokens",
//              "path" (eager | graph | capture), "device_s", "host_s", "energy_j", "waiting", "free_blocks",
//              "preempted"}, ...],
//   "requests": [{"id", "arrival_s", "ttft_s", "tpot_s" (null for one output token), "e2e_s", "energy_j",
//                 "prompt_tokens", "output_tokens", "first_token_s", "finish_s", "preemptions"}, ...],
//   "summary": {"requests", "completed", "total_input_tokens", "total_output_tokens", "duration_s",
//               "request_throughput", "output_throughput", "total_token_throughput",
//               "ttft_ms": {"mean", "median", "p90", "p99"}, "tpot_ms", "itl_ms", "e2e_ms",
//               "goodput": {"slo": {...}, "requests", "request_goodput"} | null, "energy_j", "step_energy_j",
//               "idle_energy_j", "j_per_output_token", "j_per_request", "average_power_w", "steps", "preemptions",
//               "mean_batch_requests", "mean_batch_tokens", "extrapolated_steps"}}
#include <memory>
#include <string>

#include "dooly/sim/simulator.hpp"

namespace dooly::sim {

// Throws InputError when `path`'s folder does not exist or cannot be written (checked before any work).
void check_writable(const std::string& path);

// Streams result.json: the head when made, each step as the simulation records it, the rest at finish().
// Without finish() (an error mid-run) nothing is left behind.
class ResultWriter final : public StepObserver {
 public:
  ResultWriter(const std::string& path, const Simulation& sim);
  ~ResultWriter() override;
  ResultWriter(const ResultWriter&) = delete;
  ResultWriter& operator=(const ResultWriter&) = delete;
  void on_step(int64_t index, const StepRecord& step) override;
  void finish(const Simulation& sim, const SimResult& result);

  struct Sink;  // the buffered file (result_writer.cpp)

 private:
  std::unique_ptr<Sink> out_;
};

// The same file from a finished run that kept its steps.
void write_result_json(const std::string& path, const Simulation& sim, const SimResult& result);
void write_requests_csv(const std::string& path, const Simulation& sim);
// PREFIX-latency.png (CDFs of TTFT, TPOT, E2E) and PREFIX-steps.png (batch, queue, step time and power over time).
void write_plots(const std::string& prefix, const Simulation& sim, const SimResult& result);

}  // namespace dooly::sim
