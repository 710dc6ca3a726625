// The analytic cost model's formulas on cases checked by hand, and the factory's honesty about the store.
#include "dooly/sim/analytic_cost.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "sim_support.hpp"

namespace dooly::sim {
namespace {

CostSpec spec(const std::string& engine, const std::string& model = "llama-3.1-8b") {
  CostSpec s;
  s.engine = engine;
  s.model = load_model(model, testing::models_dir());
  return s;
}

plan::Composition decodes(int n, int64_t context) {
  plan::Composition c;
  for (int i = 0; i < n; ++i) c.requests.push_back({1, context});
  return c;
}

TEST(AnalyticCost, ADecodeIsBoundByReadingTheWeights) {
  const AnalyticCost m = AnalyticCost::for_spec(spec("hf"));
  const plan::Composition c = decodes(1, 100);
  const StepCost s = m.step(c, {ForwardPath::eager, 1, 100, 1});
  // ~15 GB of weights (the embedding table is looked up, not read) at 0.8 x 4.8 TB/s, plus 640 kernels x 2 us.
  const double weights_s = (8030261248.0 - 128256.0 * 4096 + 4096) * 2 / (4.8e12 * 0.8);
  EXPECT_NEAR(s.device_s, weights_s + 640 * 2e-6, 0.0002);
  EXPECT_NEAR(s.host_launch_s, 32 * 0.82e-3, 1e-12);  // eager: every op launched
  EXPECT_NEAR(s.host_serial_s, 0.9e-3 + 0.05e-3 + 0.9e-6, 1e-12);
  EXPECT_GT(s.energy_j, s.device_s * 124);  // above idle power
  EXPECT_LT(s.energy_j, s.device_s * 700);  // under the cap
}

TEST(AnalyticCost, ALongPrefillIsComputeBound) {
  const AnalyticCost m = AnalyticCost::for_spec(spec("vllm"));
  plan::Composition c;
  c.requests.push_back({8192, 0});
  const StepCost s = m.step(c, {ForwardPath::eager, 8192, 0, 1});
  const double linear_flops = 2.0 * (8030261248.0 - 128256.0 * 4096 * 2) * 8192;  // the layers' matmuls
  EXPECT_GT(s.device_s, linear_flops / (989e12 * 0.6));
  EXPECT_LT(s.device_s, 2 * linear_flops / (989e12 * 0.6));
}

TEST(AnalyticCost, HfComputesItsWholeMaskVllmOnlyTheCausalPart) {
  plan::Composition c = decodes(64, 2000);  // 64 decodes over 2,000 cached tokens each
  const StepShape shape{ForwardPath::eager, 64, 64 * 2000, 64};
  const StepCost hf = AnalyticCost::for_spec(spec("hf")).step(c, shape);
  const StepCost vllm = AnalyticCost::for_spec(spec("vllm")).step(c, shape);
  EXPECT_GT(hf.device_s, vllm.device_s);  // 64 x 128,064 pairs against 64 x 2,001, and the gathered KV copy
}

TEST(AnalyticCost, GraphsReplayOneCallAndPriceThePaddedShape) {
  const AnalyticCost m = AnalyticCost::for_spec(spec("hf"));
  const plan::Composition c = decodes(3, 500);
  const StepCost replay = m.step(c, {ForwardPath::graph_replay, 64, 16384, 64});
  const StepCost eager = m.step(c, {ForwardPath::eager, 3, 1500, 3});
  EXPECT_DOUBLE_EQ(replay.host_launch_s, 0.15e-3);
  EXPECT_GT(replay.device_s, eager.device_s);  // 64 padded queries over 16,448 keys
  EXPECT_DOUBLE_EQ(m.step(c, {ForwardPath::graph_capture, 64, 16384, 64}).host_launch_s, eager.host_launch_s);
}

TEST(AnalyticCost, MixtureOfExpertsReadsOnlyTheExpertsReached) {
  const AnalyticCost m = AnalyticCost::for_spec(spec("hf", "qwen3-30b-a3b"));
  const StepCost one = m.step(decodes(1, 10), {ForwardPath::eager, 1, 10, 1});
  const StepCost many = m.step(decodes(256, 10), {ForwardPath::eager, 256, 2560, 256});
  EXPECT_LT(one.device_s * 4, many.device_s);  // 8 of 128 experts per layer, against nearly all
}

TEST(AnalyticCost, FactoryIsHonestAboutTheStore) {
  CostSpec s = spec("hf");
  EXPECT_NE(make_cost_model(s)->describe().find("analytic"), std::string::npos);
  s.db = "no/such/h200.sqlite";  // auto: a store given means the store, never a silent fallback to the analytic model
  try {
    (void)make_cost_model(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/h200.sqlite: cannot open"), std::string::npos) << e.what();
  }
  s.kind = "store";
  s.db.clear();
  try {
    (void)make_cost_model(s);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--cost analytic"), std::string::npos) << e.what();
  }
  s.db = "no/such/h200.sqlite";
  s.kind = "analytic";
  EXPECT_NO_THROW((void)make_cost_model(s));
}

}  // namespace
}  // namespace dooly::sim
