// The store-backed cost model on the predict tests' tiny store: device time and energy are the step model's at the
// step (at the padded shape under graphs), the host cost is the engine's measured one in its CUDA-graph mode and the
// analytic model's where the store has none, and a model with unmeasured op signatures is refused unless asked.
#include "dooly/sim/store_cost.hpp"

#include <gtest/gtest.h>

#include <string>

#include "dooly/common/error.hpp"
#include "dooly/predict/composition_text.hpp"
#include "dooly/predict/step_model.hpp"
#include "predict/tiny_store.hpp"
#include "support/temp_dir.hpp"

namespace dooly::sim {
namespace {

using testing::TinyStore;

class StoreCostTest : public ::testing::Test {
 protected:
  StoreCostTest() {
    store::Store db = store::Store::open(path);
    t = dooly::testing::build_tiny_store(db);
  }
  CostSpec spec(bool graphs, bool allow_missing = true) const {
    CostSpec s;
    s.kind = "store";
    s.db = path;
    s.engine = "hf";
    s.attention = "paged|sdpa";
    s.cuda_graphs = graphs;
    s.allow_missing = allow_missing;  // the tiny store has an unrunnable `cat` and an unmeasured `mul`
    s.model.name = "tiny-llama";
    s.model.layers = 2;
    s.model.hidden_size = 64;
    return s;
  }
  predict::StepModel step_model(bool graphs) const {
    store::Store db = store::Store::open(path, store::Store::Mode::read_only);
    predict::StepModelOptions o;
    o.model = "tiny-llama";
    o.attention = "paged|sdpa";
    o.cuda_graphs = graphs;
    return predict::StepModel::load(db, o);
  }
  ::dooly::testing::TempDir dir;
  std::string path = dir.file("tiny.sqlite");
  TinyStore t;
};

TEST_F(StoreCostTest, EagerStepsAreTheStepModelsWithTheAnalyticHostWhereNoneWasMeasured) {
  const auto cost = make_cost_model(spec(false));
  const plan::Composition c = predict::parse_composition("64,7x1@100");
  const predict::StepCost want = step_model(false).predict(c);
  const StepCost got = cost->step(c, {ForwardPath::eager, c.num_tokens(), 700, 8});
  EXPECT_DOUBLE_EQ(got.device_s, want.device_s);
  EXPECT_DOUBLE_EQ(got.energy_j, want.energy_j);
  EXPECT_GT(got.device_s, 0);
  // Only graphs on was measured for the engine: eager takes the analytic host terms, and says so.
  const StepCost analytic = AnalyticCost::for_spec(spec(false)).step(c, {ForwardPath::eager, 71, 700, 8});
  EXPECT_DOUBLE_EQ(got.host_launch_s, analytic.host_launch_s);
  EXPECT_DOUBLE_EQ(got.host_serial_s, analytic.host_serial_s);
  EXPECT_NE(cost->describe().find("host cost analytic"), std::string::npos) << cost->describe();
  EXPECT_NE(cost->describe().find("2 op signatures without a measured unit"), std::string::npos);
  EXPECT_DOUBLE_EQ(cost->idle_power_w(), spec(false).gpu.idle_power_w);  // no idle baseline in the tiny store
}

TEST_F(StoreCostTest, UnderGraphsTheDeviceRunsThePaddedShapeAndTheHostIsMeasured) {
  const auto cost = make_cost_model(spec(true));
  const plan::Composition c = predict::parse_composition("64,7x1@100");
  const StepShape shape{ForwardPath::graph_replay, 128, 1024, 8};
  const plan::Composition run = padded(c, shape);
  ASSERT_EQ(run.requests.size(), c.requests.size() + 1);
  EXPECT_EQ(run.num_tokens(), 128);
  EXPECT_EQ(*run.value_of("KV_TOKS"), 1024 + 128);  // every cached token read, and the step's own
  const predict::StepModel m = step_model(true);
  const StepCost got = cost->step(c, shape);
  EXPECT_DOUBLE_EQ(got.device_s, m.predict(run).device_s);
  EXPECT_GT(got.device_s, m.predict(c).device_s);
  // The engine's host work is for the 8 requests it scheduled, not for the padding: 1 ms + 10 us x 8.
  EXPECT_NEAR(got.host_serial_s, TinyStore::host_s(8), 1e-9);
  EXPECT_DOUBLE_EQ(got.host_launch_s, 0);
  // A capture repeats the eager launch: not measured here, so the analytic one.
  const StepCost capture = cost->step(c, {ForwardPath::graph_capture, 128, 1024, 8});
  EXPECT_DOUBLE_EQ(
      capture.host_launch_s,
      AnalyticCost::for_spec(spec(true)).step(c, {ForwardPath::graph_capture, 128, 1024, 8}).host_launch_s);
  EXPECT_NE(cost->describe().find("host cost measured for tiny-llama with CUDA graphs on"), std::string::npos);
  // No padding: the composition itself.
  EXPECT_EQ(padded(c, {ForwardPath::graph_replay, 71, 700, 8}).requests.size(), c.requests.size());
}

TEST_F(StoreCostTest, UnmeasuredSignaturesAreRefusedWithTheCommandThatMeasuresThem) {
  try {
    make_cost_model(spec(false, false));
    FAIL() << "a model with unmeasured op signatures was priced";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 op signatures of tiny-llama"), std::string::npos) << what;
    EXPECT_NE(what.find("cat ("), std::string::npos) << what;
    EXPECT_NE(what.find("mul ("), std::string::npos) << what;
    EXPECT_NE(what.find("dooly profile <the traces of tiny-llama> --db"), std::string::npos) << what;
    EXPECT_NE(what.find("--allow-missing on"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  CostSpec unknown = spec(false);
  unknown.model.name = "no-such-model";
  EXPECT_THROW(make_cost_model(unknown), InputError);
}

}  // namespace
}  // namespace dooly::sim
