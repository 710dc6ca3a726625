// Predictors on the shipped H200 store (data/profile/h200.sqlite), copied to a temporary folder first:
//   Predict/fit_store          fitting every predictor of a fresh copy (nothing stored yet), all provenances
//   Predict/refit_unchanged    a second fit of the same copy: hashes compared, nothing written
//   Predict/step_load          StepModel::load (llama-3.1-8b, paged|sdpa): predictors read, step tables built
//   Predict/step_predict       StepModel::predict over a rotating set of decode, prefill and mixed compositions
//                              (Time: per step; s_per_500k: what 500,000 steps take)
// Run: build/default/bench/predict_bench --benchmark_min_time=1s   (docs/predict.md has the numbers)
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "dooly/predict/fitter.hpp"
#include "dooly/predict/step_model.hpp"
#include "dooly/store/store.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace dooly;
namespace fs = std::filesystem;

const std::string kShipped = std::string(DOOLY_SOURCE_DIR) + "/data/profile/h200.sqlite";

// A copy of the shipped store, migrated to the current schema, with nothing fitted.
std::string fresh_copy(const testing::TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  fs::copy_file(kShipped, path, fs::copy_options::overwrite_existing);
  store::Store s = store::Store::open(path);
  s.database().execute("DELETE FROM predictors");
  return path;
}

void fit_store(benchmark::State& state) {
  testing::TempDir dir;
  size_t fitted = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string path = fresh_copy(dir, "fit.sqlite");
    store::Store s = store::Store::open(path);
    state.ResumeTiming();
    fitted = predict::fit_store(s).fitted;
  }
  state.counters["predictors"] = static_cast<double>(fitted);
}
BENCHMARK(fit_store)->Name("Predict/fit_store")->Unit(benchmark::kSecond)->Iterations(3)->UseRealTime();

void refit_unchanged(benchmark::State& state) {
  testing::TempDir dir;
  store::Store s = store::Store::open(fresh_copy(dir, "refit.sqlite"));
  predict::fit_store(s);
  size_t unchanged = 0;
  for (auto _ : state) unchanged = predict::fit_store(s).unchanged;
  state.counters["unchanged"] = static_cast<double>(unchanged);
}
BENCHMARK(refit_unchanged)->Name("Predict/refit_unchanged")->Unit(benchmark::kMillisecond)->UseRealTime();

predict::StepModelOptions llama() {
  predict::StepModelOptions o;
  o.model = "llama-3.1-8b";
  o.attention = "paged|sdpa";
  return o;
}

void step_load(benchmark::State& state) {
  testing::TempDir dir;
  store::Store s = store::Store::open(fresh_copy(dir, "load.sqlite"));
  predict::fit_store(s);
  for (auto _ : state) benchmark::DoNotOptimize(predict::StepModel::load(s, llama()));
}
BENCHMARK(step_load)->Name("Predict/step_load")->Unit(benchmark::kMillisecond)->UseRealTime();

// What a serving simulation asks: decode batches of 1-64 requests at 16-8192 cached tokens, with a prefill chunk
// of 16-512 tokens in every fourth step, and every twentieth a prefill alone.
std::vector<plan::Composition> workload(size_t n) {
  std::mt19937_64 rng(42);
  std::vector<plan::Composition> out;
  for (size_t i = 0; i < n; ++i) {
    plan::Composition c;
    if (i % 20 == 0) {
      c.requests.push_back({static_cast<int64_t>(16 + rng() % 2048), 0});
    } else {
      const size_t batch = 1 + rng() % 64;
      for (size_t r = 0; r < batch; ++r) c.requests.push_back({1, static_cast<int64_t>(16 + rng() % 8192)});
      if (i % 4 == 0) c.requests.push_back({static_cast<int64_t>(16 + rng() % 512), 0});
    }
    out.push_back(std::move(c));
  }
  return out;
}

void step_predict(benchmark::State& state) {
  testing::TempDir dir;
  store::Store s = store::Store::open(fresh_copy(dir, "predict.sqlite"));
  predict::fit_store(s);
  const predict::StepModel m = predict::StepModel::load(s, llama());
  const std::vector<plan::Composition> steps = workload(4096);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.predict(steps[i]));
    i = (i + 1) % steps.size();
  }
  state.counters["s_per_500k"] = benchmark::Counter(static_cast<double>(state.iterations()) / 500000.0,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(step_predict)->Name("Predict/step_predict")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
