// The simulator's speed (issue 12): 100,000 requests of docs/simulate.md's benchmark workload (Poisson at 6.45
// req/s, prompts ~1,150 tokens, outputs ~210), simulated end to end from the configuration (model, workload,
// engine, cost model, checks, the event loop, the summary), per engine model. Writing result.json is timed by
// bench/run_sim_bench.sh, which times the whole `dooly simulate` command.
#include <benchmark/benchmark.h>

#include <string>

#include "dooly/sim/simulator.hpp"

namespace {

using namespace dooly::sim;

constexpr const char* kWorkload =
    "poisson:rate=6.45,n=100000,prompt=lognormal:900:0.7:16:8192,output=lognormal:160:0.75:1:2048,seed=1";

void simulate(benchmark::State& state, const char* engine) {
  SimConfig c;
  c.model = "llama-3.1-8b";
  c.workload = kWorkload;
  c.engine.engine = engine;
  int64_t steps = 0;
  for (auto _ : state) {
    auto sim = prepare(c, std::string(DOOLY_SOURCE_DIR) + "/data/models");
    const SimResult r = run(*sim);
    steps = r.summary.steps;
    benchmark::DoNotOptimize(r.summary.ttft_ms.mean);
  }
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["requests/s"] = benchmark::Counter(100000.0, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Simulate100kHf(benchmark::State& state) { simulate(state, "hf"); }
void BM_Simulate100kVllm(benchmark::State& state) { simulate(state, "vllm"); }
BENCHMARK(BM_Simulate100kHf)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Simulate100kVllm)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
