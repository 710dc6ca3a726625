// The event loop end to end: determinism (same input, same bytes), event order at equal times, energy conservation,
// closed-loop users, and every bad input as one line before any work.
#include "dooly/sim/simulator.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "dooly/common/error.hpp"
#include "dooly/sim/result_writer.hpp"
#include "dooly/sim/step_times_cost.hpp"
#include "sim_support.hpp"
#include "support/temp_dir.hpp"

namespace dooly::sim {
namespace {

using testing::models_dir;

const char* kWorkload = "poisson:rate=20,n=300,prompt=lognormal:200:0.7:16:2048,output=lognormal:40:0.75:1:256,seed=7";

SimConfig config(const std::string& workload = kWorkload) {
  SimConfig c;
  c.model = "llama-3.1-8b";
  c.workload = workload;
  return c;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string result_bytes(const SimConfig& c, const std::string& path) {
  auto sim = prepare(c, models_dir());
  ResultWriter out(path, *sim);
  const SimResult r = run(*sim, &out);
  out.finish(*sim, r);
  return slurp(path);
}

std::string error_of(const SimConfig& c) {
  try {
    auto sim = prepare(c, models_dir());
    (void)run(*sim);
  } catch (const Error& e) {  // InputError, or the store's StoreError
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(Simulator, SameSeedGivesByteIdenticalResults) {
  dooly::testing::TempDir dir;
  for (const char* engine : {"hf", "vllm"}) {
    SimConfig c = config();
    c.engine.engine = engine;
    const std::string a = result_bytes(c, dir.file("a.json")), b = result_bytes(c, dir.file("b.json"));
    EXPECT_EQ(a, b) << engine;
    EXPECT_NE(a.find("\"version\": 1"), std::string::npos);
    c.workload = "poisson:rate=20,n=300,prompt=lognormal:200:0.7:16:2048,output=lognormal:40:0.75:1:256,seed=8";
    EXPECT_NE(result_bytes(c, dir.file("c.json")), a) << engine;
  }
}

TEST(Simulator, StreamedAndKeptStepsWriteTheSameFile) {
  dooly::testing::TempDir dir;
  const std::string streamed = result_bytes(config(), dir.file("a.json"));
  auto sim = prepare(config(), models_dir());
  const SimResult r = run(*sim, nullptr, /*keep_steps=*/true);
  write_result_json(dir.file("b.json"), *sim, r);
  EXPECT_EQ(slurp(dir.file("b.json")), streamed);
  EXPECT_EQ(static_cast<int64_t>(r.recorder.steps.size()), r.summary.steps);
}

TEST(Simulator, EventsAreOrderedByTimeTypeId) {
  EventQueue q;
  q.push({1.0, EventType::step_start, 0});
  q.push({1.0, EventType::arrival, 5});
  q.push({1.0, EventType::arrival, 2});
  q.push({1.0, EventType::step_end, 9});
  q.push({0.5, EventType::step_start, 1});
  std::vector<std::pair<int, int64_t>> order;
  while (!q.empty()) {
    const Event e = q.pop();
    order.emplace_back(static_cast<int>(e.type), e.id);
  }
  EXPECT_EQ(order, (std::vector<std::pair<int, int64_t>>{{2, 1}, {0, 9}, {1, 2}, {1, 5}, {2, 0}}));
}

TEST(Simulator, RequestsArrivingTogetherShareTheFirstStep) {
  dooly::testing::TempDir dir;
  std::ofstream(dir.file("t.jsonl"))
      << "{\"id\": \"a\", \"arrival_s\": 1.0, \"prompt_tokens\": 30, \"output_tokens\": 3}\n"
         "{\"id\": \"b\", \"arrival_s\": 1.0, \"prompt_tokens\": 20, \"output_tokens\": 2}\n";
  auto sim = prepare(config("trace:" + dir.file("t.jsonl")), models_dir());
  const SimResult r = run(*sim, nullptr, true);
  ASSERT_FALSE(r.recorder.steps.empty());
  EXPECT_DOUBLE_EQ(r.recorder.steps[0].t_s, 1.0);
  EXPECT_EQ(r.recorder.steps[0].requests, 2);
  EXPECT_EQ(r.recorder.steps[0].tokens, 50);
  EXPECT_DOUBLE_EQ(sim->states[0].first_token_s, sim->states[1].first_token_s);
}

TEST(Simulator, RequestEnergiesSumToTheStepsEnergy) {
  for (const char* engine : {"hf", "vllm"}) {
    SimConfig c = config();
    c.engine.engine = engine;
    auto sim = prepare(c, models_dir());
    const SimResult r = run(*sim);
    double sum = 0;
    for (const RequestState& s : sim->states) sum += s.energy_j;
    EXPECT_NEAR(sum, r.summary.step_energy_j, 1e-9 * r.summary.step_energy_j) << engine;
    EXPECT_NEAR(r.summary.energy_j, r.summary.step_energy_j + r.summary.idle_energy_j, 1e-9 * r.summary.energy_j);
    EXPECT_EQ(r.summary.completed, 300);
  }
}

TEST(Simulator, ClosedLoopUsersSendAfterThinking) {
  auto sim =
      prepare(config("closed:users=3,n=12,prompt=uniform:50:200,output=uniform:5:20,think=0.25,seed=1"), models_dir());
  const SimResult r = run(*sim);
  EXPECT_EQ(r.summary.completed, 12);
  const auto& st = sim->states;
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(st[i].arrival_s, 0.0);
  for (size_t i = 3; i < st.size(); ++i) {
    // Request i was sent by the user of an earlier request, exactly 0.25 s after that one finished.
    bool found = false;
    for (size_t j = 0; j < i; ++j)
      if (st[j].user == st[i].user && std::abs(st[j].finish_s + 0.25 - st[i].arrival_s) < 1e-12) found = true;
    EXPECT_TRUE(found) << i;
  }
  // Never more than 3 requests in flight.
  for (const RequestState& a : st) {
    int in_flight = 0;
    for (const RequestState& b : st)
      if (b.arrival_s <= a.arrival_s && b.finish_s > a.arrival_s) ++in_flight;
    EXPECT_LE(in_flight, 3);
  }
}

// The parts of a step combined per path (cost_model.hpp): a capture is the warm-up forward (launch-bound here) and one
// more device pass; under --step-times every path takes the live duration, also one shorter than the device alone.
TEST(StepTimesCost, EveryPathTakesTheLiveDurationAndKeepsTheModelsPrice) {
  struct Fixed final : CostModel {
    StepCost step(const plan::Composition&, const StepShape&) const override {
      StepCost c;
      c.device_s = 0.030;
      c.host_serial_s = 0.002;
      c.host_launch_s = 0.080;
      c.energy_j = 9;
      return c;
    }
    double idle_power_w() const override { return 100; }
    std::string describe() const override { return "fixed"; }
  };
  const plan::Composition c{{{4, 0}}};
  const StepCost parts = Fixed().step(c, {});
  EXPECT_DOUBLE_EQ(step_duration(parts, ForwardPath::eager), 0.082);
  EXPECT_DOUBLE_EQ(step_duration(parts, ForwardPath::graph_replay), 0.112);
  EXPECT_DOUBLE_EQ(step_duration(parts, ForwardPath::graph_capture), 0.112);
  const std::vector<double> live{0.1, 0.1, 0.1, 0.05, 0.02};
  StepTimesCost timed(std::make_unique<Fixed>(), live, "live");
  const ForwardPath paths[] = {ForwardPath::eager, ForwardPath::graph_replay, ForwardPath::graph_capture,
                               ForwardPath::graph_capture, ForwardPath::eager};
  for (size_t i = 0; i < live.size(); ++i) {
    const StepCost s = timed.step(c, {paths[i], 4, 0, 1});
    EXPECT_NEAR(step_duration(s, paths[i]), live[i], 1e-12) << i;
    EXPECT_LE(s.device_s, parts.device_s) << i;
    EXPECT_GE(s.host_serial_s, 0) << i;
    EXPECT_DOUBLE_EQ(s.model_duration_s, step_duration(parts, paths[i])) << i;
  }
}

// The scheduler check: the k-th step takes the k-th given duration, so arrivals meet the scheduler at the live
// engine's step boundaries; the steps after the file's end take the cost model's price.
TEST(Simulator, StepTimesSetEachStepsDurationInOrder) {
  dooly::testing::TempDir dir;
  // Two requests; the second arrives at 0.25 s: during step 1 with the given times (0.1 + 0.2 s), so it joins
  // step 2; with the analytic model's few-ms steps it would wait for nothing and start earlier.
  std::ofstream(dir.file("t.jsonl"))
      << "{\"id\": \"a\", \"arrival_s\": 0.0, \"prompt_tokens\": 30, \"output_tokens\": 6}\n"
         "{\"id\": \"b\", \"arrival_s\": 0.25, \"prompt_tokens\": 20, \"output_tokens\": 2}\n";
  std::ofstream(dir.file("times.txt")) << "# seconds\n0.1\n\n0.2\n0.05 \n";
  SimConfig c = config("trace:" + dir.file("t.jsonl"));
  c.step_times = dir.file("times.txt");
  auto sim = prepare(c, models_dir());
  const SimResult r = run(*sim, nullptr, true);
  const auto& steps = r.recorder.steps;
  ASSERT_GE(steps.size(), 4u);
  EXPECT_DOUBLE_EQ(steps[0].duration_s, 0.1);
  EXPECT_DOUBLE_EQ(steps[1].duration_s, 0.2);
  EXPECT_DOUBLE_EQ(steps[2].duration_s, 0.05);
  EXPECT_DOUBLE_EQ(steps[2].t_s, 0.3);
  EXPECT_EQ(steps[2].requests, 2);  // b (arrived at 0.25) is scheduled at 0.3
  EXPECT_EQ(steps[2].prefill_tokens, 20);
  EXPECT_LT(steps[3].duration_s, 0.05);  // past the file: the analytic model's price
  EXPECT_NE(sim->cost->describe().find("steps past its end priced by the cost model"), std::string::npos)
      << sim->cost->describe();
  // Energy: the cost model's device energy within the step, idle power for the rest.
  EXPECT_GE(steps[0].energy_j, sim->cost->idle_power_w() * (0.1 - steps[0].device_s) - 1e-9);
  // The cost model's own price stays with each step given a live time (`model_dt_s`, for dooly compare's step
  // pricing): step 0 computes what the run without --step-times computes first, at the price it takes there.
  SimConfig own = c;
  own.step_times.clear();
  auto plain = prepare(own, models_dir());
  const SimResult p = run(*plain, nullptr, true);
  ASSERT_FALSE(p.recorder.steps.empty());
  EXPECT_EQ(p.recorder.steps[0].tokens, steps[0].tokens);
  EXPECT_DOUBLE_EQ(steps[0].model_duration_s, p.recorder.steps[0].duration_s);
  EXPECT_LT(p.recorder.steps[0].model_duration_s, 0);  // its duration is the model's own
  EXPECT_LT(steps[3].model_duration_s, 0);             // past the file: priced by the model
  write_result_json(dir.file("timed.json"), *sim, r);
  write_result_json(dir.file("own.json"), *plain, p);
  EXPECT_NE(slurp(dir.file("timed.json")).find(fmt::format("\"model_dt_s\": {}}}", steps[0].model_duration_s)),
            std::string::npos);
  EXPECT_EQ(slurp(dir.file("own.json")).find("model_dt_s"), std::string::npos);

  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"0.1\nfast\n", "times.txt:2: the step duration (seconds) is 'fast', not a finite number"},
           {"0.1 0.2\n", "times.txt:1: the step duration (seconds) is '0.1 0.2', not a finite number"},
           {"-1\n", "times.txt:1: the step duration (seconds) is -1, outside [0, 86400]"},
           {"# none\n", "no durations in it"}}) {
    std::ofstream(dir.file("times.txt")) << text;
    EXPECT_NE(error_of(c).find(want), std::string::npos) << error_of(c);
  }
  c.step_times = dir.file("missing.txt");
  EXPECT_NE(error_of(c).find("missing.txt: cannot open it"), std::string::npos);
}

TEST(Simulator, WarmupRequestsLeaveTheGraphsTheyCapturedAsDoolyLiveDoes) {
  dooly::testing::TempDir dir;
  // Two requests of the same lengths, far apart: alone, each computes the same padded shapes.
  std::ofstream(dir.file("t.jsonl"))
      << "{\"id\": \"a\", \"arrival_s\": 0.0, \"prompt_tokens\": 100, \"output_tokens\": 4}\n"
         "{\"id\": \"b\", \"arrival_s\": 5.0, \"prompt_tokens\": 100, \"output_tokens\": 4}\n";
  SimConfig c = config("trace:" + dir.file("t.jsonl"));
  c.engine.cuda_graphs = "on";
  auto captures = [&](const SimConfig& cfg, bool first_request_only) {
    auto sim = prepare(cfg, models_dir());
    const SimResult r = run(*sim, nullptr, true);
    int64_t n = 0;
    for (const StepRecord& st : r.recorder.steps)
      if (!first_request_only || st.t_s < 5.0) n += st.path == ForwardPath::graph_capture ? 1 : 0;
    return n;
  };
  const int64_t cold = captures(c, true);
  EXPECT_GT(cold, 0);                   // a's shapes are new to the engine
  EXPECT_EQ(captures(c, false), cold);  // and b replays them
  // `dooly live --warmup 1` served a's lengths before the run: the engine kept those graphs.
  c.engine.warmup_requests = 1;
  EXPECT_EQ(captures(c, false), 0);
  // More than the workload has: the first repeated, as dooly live does. Three prompts served together are one
  // prefill of 300 tokens (padded to 320), so a's prefill alone (128) is still new; the decodes (64) replay.
  c.engine.warmup_requests = 3;
  EXPECT_EQ(captures(c, false), 1);
  // vLLM keeps nothing from a warm-up (it captures at start-up): the same steps as without.
  c.engine.engine = "vllm";
  c.engine.warmup_requests = 0;
  auto plain = prepare(c, models_dir());
  const SimResult p = run(*plain, nullptr, true);
  c.engine.warmup_requests = 2;
  auto warmed = prepare(c, models_dir());
  const SimResult w = run(*warmed, nullptr, true);
  ASSERT_EQ(p.recorder.steps.size(), w.recorder.steps.size());
  for (size_t i = 0; i < p.recorder.steps.size(); ++i)
    EXPECT_DOUBLE_EQ(p.recorder.steps[i].duration_s, w.recorder.steps[i].duration_s) << i;
}

TEST(Simulator, BadInputIsOneLineBeforeAnyWork) {
  SimConfig unknown = config();
  unknown.model = "no-such-model";
  EXPECT_NE(error_of(unknown).find("unknown model 'no-such-model'"), std::string::npos);

  dooly::testing::TempDir dir;
  std::ofstream(dir.file("bad.jsonl")) << "{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 2}\n"
                                          "{\"arrival_s\": 1, \"prompt_tokens\": \"many\"}\n";
  EXPECT_NE(error_of(config("trace:" + dir.file("bad.jsonl"))).find("bad.jsonl:2: prompt_tokens"), std::string::npos);

  SimConfig small = config("constant:rate=1,n=2,prompt=fixed:5000,output=fixed:10");
  small.engine.num_blocks = 10;
  EXPECT_NE(error_of(small).find("needs 20 KV blocks alone, the HF cache has 10"), std::string::npos)
      << error_of(small);

  SimConfig store = config();
  store.db = "no/such/h200.sqlite";
  EXPECT_NE(error_of(store).find("no/such/h200.sqlite: cannot open (read-only)"), std::string::npos);

  SimConfig slo = config();
  slo.slo = "ttft:fast";
  EXPECT_NE(error_of(slo).find("--slo 'ttft:fast'"), std::string::npos);

  SimConfig engine = config();
  engine.engine.engine = "sglang";
  EXPECT_NE(error_of(engine).find("unknown engine 'sglang'"), std::string::npos);
}

TEST(Simulator, SettingsTableNamesEveryFlagOnce) {
  SimConfig c;
  set_option(c, "max-batch-tokens", "512");
  set_option(c, "cuda-graphs", "on");
  set_option(c, "engine", "vllm");
  EXPECT_EQ(c.engine.max_batch_tokens, 512);
  EXPECT_EQ(c.engine.cuda_graphs, "on");
  EXPECT_EQ(c.engine.engine, "vllm");
  EXPECT_THROW(set_option(c, "max-batch-tokens", "0"), InputError);
  EXPECT_THROW(set_option(c, "cuda-graphs", "maybe"), InputError);
  try {
    set_option(c, "bogus", "1");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown setting 'bogus'"), std::string::npos);
  }
}

}  // namespace
}  // namespace dooly::sim
