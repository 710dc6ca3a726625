// The step model on a small store: every term summed at the step's quantities (checked against the formulas the
// store was built from), the phase a step takes, what is missing and why, the host cost, the errors.
#include "dooly/predict/step_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "dooly/common/error.hpp"
#include "dooly/predict/composition_text.hpp"
#include "dooly/predict/fitter.hpp"
#include "dooly/store/store.hpp"
#include "predict/tiny_store.hpp"
#include "support/temp_dir.hpp"

namespace dooly::predict {
namespace {

using testing::TinyStore;

StepModelOptions tiny(std::string attention = "paged|sdpa") {
  StepModelOptions o;
  o.model = "tiny-llama";
  o.attention = std::move(attention);
  return o;
}

double prefill_device_s(double tok) {
  return 2 * TinyStore::linear_s(tok) + TinyStore::sdpa_prefill_s(tok) + TinyStore::mean_s();
}
double mixed_device_s(double tok, double kv) {
  return 2 * TinyStore::linear_s(tok) + TinyStore::sdpa_cache_s(tok, kv) + 2 * TinyStore::index_select_s(kv) +
         TinyStore::mean_s();
}
// Energy: 300 W times latency, except mean (measured without energy).
double prefill_energy_j(double tok) { return TinyStore::power_w * (prefill_device_s(tok) - TinyStore::mean_s()); }

class StepModelTest : public ::testing::Test {
 protected:
  StepModelTest() : db(store::Store::open(dir.file("tiny.sqlite"))), t(testing::build_tiny_store(db)) {}
  // A MoE model "tiny-moe" beside tiny-llama: one grouped GEMM (4 experts, 2 routed rows a token), 3 a step, measured
  // uniformly on the tiny store's token grid at cost(tokens); returns its signature id.
  static double moe_cost(double tokens) { return 10e-6 + 1e-9 * tokens; }
  int64_t add_tiny_moe() {
    const int64_t moe = db.upsert_model({0, "tiny-moe", "olmoe", "OlmoeForCausalLM", "cfg-moe"});
    const int64_t gemm =
        db.upsert_signature(
              std::string(64, 'e'), "_grouped_mm", store::SignatureKind::op,
              R"({"inputs":[{"dtype":"bfloat16","shape":["MIX:2*NUM_TOKS","8"]},{"dtype":"bfloat16","shape":["4","8","8"]},)"
              R"({"dtype":"int32","shape":["4"]}],"kind":"op","name":"_grouped_mm","v":1})",
              R"({"rule":"matmul","example_module":"model.layers.0.mlp.experts"})")
            .id;
    db.replace_occurrences(moe, t.traced, std::vector<store::Occurrence>{{gemm, store::Phase::prefill, 3}});
    for (double tok = 1; tok <= 4096; tok *= 2)
      db.insert_measurement(
          testing::tiny_point(gemm, t.measured, fmt::format(R"({{"NUM_TOKS":{}}})", tok), moe_cost(tok)));
    return gemm;
  }

  testing::TempDir dir;
  store::Store db;
  TinyStore t;
};

TEST_F(StepModelTest, StepKinds) {
  EXPECT_EQ(step_kind(parse_composition("300,150")), StepKind::prefill);
  EXPECT_EQ(step_kind(parse_composition("1")), StepKind::prefill);  // a one-token prompt
  EXPECT_EQ(step_kind(parse_composition("3x1@100")), StepKind::decode);
  EXPECT_EQ(step_kind(parse_composition("64,3x1@100")), StepKind::mixed);
  EXPECT_EQ(step_kind(parse_composition("64@100")), StepKind::mixed);  // a chunk over cached context
  // The fast path finds the kind in its own pass over the requests.
  const StepModel m = StepModel::load(db, tiny());
  for (const char* text : {"300,150", "1", "3x1@100", "64,3x1@100", "64@100", "2@0,1@5", "1@1"})
    EXPECT_EQ(m.predict(parse_composition(text)).kind, step_kind(parse_composition(text))) << text;
}

TEST_F(StepModelTest, SumsEveryTermAtTheStepsQuantities) {
  const StepModel m = StepModel::load(db, tiny());
  EXPECT_EQ(m.trace_provenance_id(), t.traced);
  EXPECT_EQ(m.measurement_provenance_id(), t.measured);
  EXPECT_EQ(m.attention_backend(), "paged|sdpa[efficient]");
  // Prefill of 300 + 200 tokens: T = KV = 500.
  StepCost c = m.predict(parse_composition("300,200"));
  EXPECT_EQ(c.kind, StepKind::prefill);
  EXPECT_NEAR(c.device_s, prefill_device_s(500), 1e-9 * prefill_device_s(500));
  EXPECT_NEAR(c.energy_j, prefill_energy_j(500), 1e-9 * prefill_energy_j(500));
  EXPECT_EQ(c.extrapolated_terms, 0);
  // A mixed step: a 100-token chunk and 3 decodes at 1000 cached tokens: T = 103, KV = 100 + 3 * 1001.
  c = m.predict(parse_composition("100,3x1@1000"));
  EXPECT_EQ(c.kind, StepKind::mixed);
  EXPECT_NEAR(c.device_s, mixed_device_s(103, 3103), 1e-9 * mixed_device_s(103, 3103));
  EXPECT_EQ(c.extrapolated_terms, 0);
  // Decodes take the mixed phase (no decode step was traced).
  c = m.predict(parse_composition("8x1@2000"));
  EXPECT_EQ(c.kind, StepKind::decode);
  EXPECT_EQ(m.phase_taken(StepKind::decode), StepKind::mixed);
  EXPECT_NEAR(c.device_s, mixed_device_s(8, 8 * 2001), 1e-9 * mixed_device_s(8, 8 * 2001));
  EXPECT_EQ(m.predict(plan::Composition{}).device_s, 0.0);
}

TEST_F(StepModelTest, ExplainAgreesWithPredictAndSplitsByClass) {
  const StepModel m = StepModel::load(db, tiny());
  for (const char* text : {"300,200", "1", "4096", "100,3x1@1000", "8x1@2000", "60x1@20", "5000", "2x1@70000"}) {
    const plan::Composition c = parse_composition(text);
    const StepCost fast = m.predict(c);
    const StepBreakdown b = m.explain(c);
    double device = 0, energy = 0;
    int outside = 0;
    for (size_t k = 0; k < op_class_count; ++k) {
      if (static_cast<OpClass>(k) == OpClass::engine) continue;
      device += b.by_class[k].device_s;
      energy += b.by_class[k].energy_j;
      outside += b.by_class[k].extrapolated;
    }
    EXPECT_NEAR(device, fast.device_s, 1e-12 * fast.device_s) << text;
    EXPECT_NEAR(energy, fast.energy_j, 1e-12 * fast.energy_j) << text;
    EXPECT_EQ(outside + b.by_class[static_cast<size_t>(OpClass::engine)].extrapolated, fast.extrapolated_terms) << text;
    EXPECT_EQ(b.by_class[static_cast<size_t>(OpClass::engine)].device_s, fast.host_s) << text;
  }
  const StepBreakdown prefill = m.explain(parse_composition("512"));
  EXPECT_EQ(prefill.by_class[static_cast<size_t>(OpClass::attention_prefill)].terms, 1);
  EXPECT_EQ(prefill.by_class[static_cast<size_t>(OpClass::linear)].terms, 1);
  EXPECT_EQ(prefill.by_class[static_cast<size_t>(OpClass::norm)].terms, 1);
  EXPECT_NEAR(prefill.by_class[static_cast<size_t>(OpClass::linear)].device_s, 2 * TinyStore::linear_s(512), 1e-15);
  const StepBreakdown decode = m.explain(parse_composition("8x1@2000"));
  EXPECT_EQ(decode.by_class[static_cast<size_t>(OpClass::attention_decode)].terms, 2);  // sdpa and the cache read
  EXPECT_EQ(m.explain(parse_composition("64,8x1@2000")).by_class[static_cast<size_t>(OpClass::attention_mixed)].terms,
            2);
}

TEST_F(StepModelTest, CountsTermsOutsideTheirMeasuredRegion) {
  const StepModel m = StepModel::load(db, tiny());
  EXPECT_EQ(m.predict(parse_composition("4096")).extrapolated_terms, 0);
  // 5000 tokens: beyond linear's and prefill sdpa's range (mean has no quantity; the host cost is inside).
  EXPECT_EQ(m.predict(parse_composition("5000")).extrapolated_terms, 2);
  // KV 140002 beyond the cache sdpa's and index_select's range; T = 2 inside; the host cost inside.
  EXPECT_EQ(m.predict(parse_composition("2x1@70000")).extrapolated_terms, 2);
  // A decode batch of 60 at short context: sdpa's (T = 60, KV = 1260) lies outside its measured hull.
  EXPECT_GE(m.predict(parse_composition("60x1@20")).extrapolated_terms, 1);
}

TEST_F(StepModelTest, ListsWhatAddsNothingAndWhy) {
  const StepModel m = StepModel::load(db, tiny());
  ASSERT_EQ(m.missing().size(), 2u);
  EXPECT_EQ(m.missing()[0].name, "cat");
  EXPECT_EQ(m.missing()[0].phase, StepKind::prefill);
  EXPECT_EQ(m.missing()[0].reason, "unrunnable: RuntimeError: needs the rotary cache");
  EXPECT_EQ(m.missing()[1].name, "mul");
  EXPECT_EQ(m.missing()[1].phase, StepKind::mixed);
  EXPECT_EQ(m.missing()[1].reason, fmt::format("not measured under provenance {}", t.measured));
  ASSERT_EQ(m.missing_energy().size(), 2u);  // mean, in both phases
  EXPECT_EQ(m.missing_energy()[0].name, "mean");
}

TEST_F(StepModelTest, HostCostOfTheEngineSignature) {
  const StepModel m = StepModel::load(db, tiny());
  ASSERT_TRUE(m.has_host_cost());
  EXPECT_TRUE(m.host_cuda_graphs());
  EXPECT_NEAR(m.predict(parse_composition("64,7x1@100")).host_s, TinyStore::host_s(8), 1e-9);
  StepModelOptions off = tiny();
  off.cuda_graphs = false;  // only graphs on was measured
  EXPECT_FALSE(StepModel::load(db, off).has_host_cost());
  EXPECT_TRUE(StepModel::load(db, tiny("paged|sdpa[efficient]")).has_host_cost());  // the exact backend, too
}

TEST_F(StepModelTest, PrefersTheHostCostTimedInTheEnginesOwnThreadThenTheNewest) {
  // A second measurement of the engine, timed in the engine's thread (3x the first), then a third, newer one timed
  // in the caller's thread: the engine-thread one is used; without it, the newest.
  auto add = [&](int n, const char* loop, double scale) {
    const int64_t id =
        db.upsert_signature(testing::hex(n), "hf-continuous-batching", store::SignatureKind::engine,
                            fmt::format(R"({{"attrs":{{"attention":"paged|sdpa","config_hash":"cfg",)"
                                        R"("cuda_graphs":[true,true],{}"model":"tiny-llama"}},"kind":"engine",)"
                                        R"("name":"hf-continuous-batching","v":1}})",
                                        loop[0] ? fmt::format(R"("loop":"{}",)", loop) : std::string()))
            .id;
    for (int reqs : {1, 2, 4, 8, 16, 32})
      db.insert_measurement(testing::tiny_point(id, t.measured,
                                                fmt::format(R"({{"DECODE_REQS":{0},"NUM_REQS":{0},"NUM_TOKS":{0},)"
                                                            R"("PREFILL_TOKS":0}})",
                                                            reqs),
                                                scale * TinyStore::host_s(reqs), false));
    return id;
  };
  const auto host = [&] { return StepModel::load(db, tiny()).predict(parse_composition("4x1@100")).host_s; };
  add(20, "", 2);
  EXPECT_NEAR(host(), 2 * TinyStore::host_s(4), 1e-9);  // the newest
  add(21, "engine-thread", 3);
  add(22, "caller", 5);
  EXPECT_NEAR(host(), 3 * TinyStore::host_s(4), 1e-9);  // timed as the engine serves, though older
  StepModelOptions off = tiny();
  off.cuda_graphs = false;  // only graphs on was measured: still none (not another mode's)
  EXPECT_FALSE(StepModel::load(db, off).has_host_cost());
}

TEST_F(StepModelTest, UsesStoredPredictorsWhenTheirPointsAreUnchanged) {
  EXPECT_GT(StepModel::load(db, tiny()).fitted_at_load(), 0u);  // nothing stored yet: fitted in memory
  fit_store(db);
  const StepModel stored = StepModel::load(db, tiny());
  EXPECT_EQ(stored.fitted_at_load(), 0u);
  db.insert_measurement(testing::tiny_point(t.linear, t.measured, R"({"NUM_TOKS":8192})", TinyStore::linear_s(8192)));
  const StepModel changed = StepModel::load(db, tiny());
  EXPECT_EQ(changed.fitted_at_load(), 2u);                                      // linear's latency and energy
  EXPECT_EQ(changed.predict(parse_composition("6000")).extrapolated_terms, 1);  // now only prefill sdpa
}

TEST_F(StepModelTest, BadRequestsAreOneLineNamingTheFix) {
  auto message = [&](const StepModelOptions& o) {
    try {
      StepModel::load(db, o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  StepModelOptions unknown = tiny();
  unknown.model = "gpt-5";
  EXPECT_EQ(message(unknown), fmt::format("model 'gpt-5' is not in store {} (it holds: tiny-llama) — pick a model the "
                                          "store holds, or trace it first (`dooly trace`, `dooly signatures`)",
                                          db.path()));
  EXPECT_EQ(message(tiny("paged|flash_attention_2")),
            fmt::format("model 'tiny-llama' has no trace with attention backend 'paged|flash_attention_2' in store {} "
                        "(traced: paged|sdpa[efficient] (provenance {})) — pass one of the backends it was traced with "
                        "as --attention",
                        db.path(), t.traced));
  StepModelOptions unmeasured = tiny();
  unmeasured.measurement_provenance_id = t.traced;
  EXPECT_EQ(message(unmeasured),
            fmt::format("store {} holds no measurements under provenance {} — pick a provenance that holds "
                        "measurements (`dooly store info`), or measure first",
                        db.path(), t.traced));
}

// The tiny MoE (add_tiny_moe) measured besides at two routing points: forced onto 2 experts (2x the uniform cost at 16
// tokens, 3x at 256) and skewed with exponent 1 (1.5x the time, 1.2x the energy at both).
TEST_F(StepModelTest, MoeRoutingScalesTheGroupedGemmByItsRoutingPoints) {
  const int64_t gemm = add_tiny_moe();
  auto cost = [](double tok) { return moe_cost(tok); };
  auto routed = [&](const char* key, double tok, double time_ratio, double energy_ratio) {
    store::Measurement m = testing::tiny_point(gemm, t.measured, key, cost(tok) * time_ratio);
    m.energy_j = cost(tok) * TinyStore::power_w * energy_ratio;
    db.insert_measurement(m);
  };
  routed(R"({"MOE_EXPERTS":2,"MOE_SKEW":0,"NUM_TOKS":16})", 16, 2.0, 2.0);
  routed(R"({"MOE_EXPERTS":2,"MOE_SKEW":0,"NUM_TOKS":256})", 256, 3.0, 3.0);
  routed(R"({"MOE_EXPERTS":4,"MOE_SKEW":100,"NUM_TOKS":16})", 16, 1.5, 1.2);
  routed(R"({"MOE_EXPERTS":4,"MOE_SKEW":100,"NUM_TOKS":256})", 256, 1.5, 1.2);
  StepModelOptions o = tiny("paged|sdpa[efficient]");
  o.model = "tiny-moe";
  // Uniform: the routing points stay out of the predictor, fitted on the uniform points alone.
  const StepModel uniform = StepModel::load(db, o);
  const StepCost u64 = uniform.predict(parse_composition("64"));
  EXPECT_NEAR(u64.device_s, 3 * cost(64), 1e-3 * cost(64));
  EXPECT_NEAR(u64.energy_j, 3 * cost(64) * TinyStore::power_w, 1e-3 * cost(64) * TinyStore::power_w);
  // Forced onto 2 experts: the ratio at a routing point, between them in log tokens, held beyond them, and 1 where
  // 2 rows (1 token) reach no more than 2 experts anyway.
  o.moe_routing = parse_moe_routing("experts:2");
  const StepModel forced = StepModel::load(db, o);
  EXPECT_NEAR(forced.predict(parse_composition("16")).device_s, 3 * 2.0 * cost(16), 1e-3 * cost(16));
  EXPECT_NEAR(forced.predict(parse_composition("64")).device_s, 3 * 2.5 * cost(64), 1e-3 * cost(64));
  EXPECT_NEAR(forced.predict(parse_composition("1024")).device_s, 3 * 3.0 * cost(1024), 1e-3 * cost(1024));
  EXPECT_NEAR(forced.predict(parse_composition("2")).device_s, 3 * 2.0 * cost(2), 1e-3 * cost(2));
  EXPECT_NEAR(forced.predict(parse_composition("1")).device_s, 3 * cost(1), 1e-3 * cost(1));
  EXPECT_NEAR(forced.explain(parse_composition("64")).total.device_s, 3 * 2.5 * cost(64), 1e-3 * cost(64));
  // Skewed: time and energy each by their own ratio.
  o.moe_routing = parse_moe_routing("skew:1");
  const StepCost s64 = StepModel::load(db, o).predict(parse_composition("64"));
  EXPECT_NEAR(s64.device_s, 3 * 1.5 * cost(64), 1e-3 * cost(64));
  EXPECT_NEAR(s64.energy_j, 3 * 1.2 * cost(64) * TinyStore::power_w, 1e-3 * cost(64) * TinyStore::power_w);
  // Random (the engine's): a step of 16 tokens, 15 of them a CUDA graph's padding, reads the real token's 2 experts
  // and the padding's 2, half of them new: 3 of 4, between the forced point (2: 2x) and the uniform spread (4: 1x)
  // in log experts. Unpadded, 16 random tokens reach all but 4 x 2^-16 of the 4 experts: uniform's cost.
  o.moe_routing = parse_moe_routing("random");
  const StepModel random = StepModel::load(db, o);
  const double padded_ratio = 2.0 - std::log(3.0 / 2) / std::log(2.0);
  EXPECT_NEAR(random.predict(parse_composition("16"), 15).device_s, 3 * padded_ratio * cost(16), 1e-9 * cost(16));
  EXPECT_NEAR(random.explain(parse_composition("16"), 15).total.device_s, 3 * padded_ratio * cost(16), 1e-9 * cost(16));
  EXPECT_NEAR(random.predict(parse_composition("16")).device_s, 3 * cost(16), 1e-3 * cost(16));
  EXPECT_TRUE(random.routes_moe());
  EXPECT_FALSE(uniform.routes_moe());
  // Auto (the simulator's default): random where the grouped GEMM has routing points; a dense model, and a MoE whose
  // grouped GEMM has none, load as uniform instead of being refused.
  o.moe_routing = parse_moe_routing("auto");
  const StepModel automatic = StepModel::load(db, o);
  EXPECT_TRUE(automatic.routes_moe());
  EXPECT_EQ(automatic.routing_summary(), "MoE grouped GEMMs routed at random (their routing points)");
  EXPECT_EQ(automatic.predict(parse_composition("16"), 15).device_s,
            random.predict(parse_composition("16"), 15).device_s);
  EXPECT_EQ(format_moe_routing(o.moe_routing), "auto");
  StepModelOptions dense_auto = tiny();
  dense_auto.moe_routing = parse_moe_routing("auto");
  const StepModel dense_model = StepModel::load(db, dense_auto);
  EXPECT_FALSE(dense_model.routes_moe());
  StepModelOptions dense_uniform = tiny();
  EXPECT_EQ(dense_model.predict(parse_composition("64")).device_s,
            StepModel::load(db, dense_uniform).predict(parse_composition("64")).device_s);
  // A routing not measured, and routing asked of a dense model: one line each, naming what was measured.
  auto message = [&](StepModelOptions opt) {
    try {
      StepModel::load(db, opt);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  o.moe_routing = parse_moe_routing("experts:1");
  EXPECT_NE(message(o).find(fmt::format("_grouped_mm of tiny-moe (signature {}) was not measured under MoE routing "
                                        "experts:1 (measured: experts:2, skew:1) — measure it (`dooly profile`",
                                        gemm)),
            std::string::npos)
      << message(o);
  StepModelOptions dense = tiny();
  dense.moe_routing = parse_moe_routing("skew:0.5");
  EXPECT_NE(message(dense).find("MoE routing skew:0.5 asked for, but the steps of tiny-llama hold no measured grouped "
                                "GEMM"),
            std::string::npos)
      << message(dense);
}

// Auto on a MoE whose grouped GEMM was measured on its token grid alone (no routing points yet, as a model profiled
// before the grid had its moe section): uniform, as fitted; random, asked for by name, is refused.
TEST_F(StepModelTest, AutoMoeRoutingWithoutRoutingPointsIsUniform) {
  const int64_t gemm = add_tiny_moe();
  // A skewed point only: random routing reads the forced points, so auto still finds nothing to route by.
  db.insert_measurement(
      testing::tiny_point(gemm, t.measured, R"({"MOE_EXPERTS":4,"MOE_SKEW":100,"NUM_TOKS":16})", 1.5 * moe_cost(16)));
  StepModelOptions o = tiny("paged|sdpa[efficient]");
  o.model = "tiny-moe";
  const double uniform = StepModel::load(db, o).predict(parse_composition("16"), 15).device_s;
  o.moe_routing = parse_moe_routing("auto");
  const StepModel automatic = StepModel::load(db, o);
  EXPECT_FALSE(automatic.routes_moe());
  EXPECT_EQ(automatic.predict(parse_composition("16"), 15).device_s, uniform);
  o.moe_routing = parse_moe_routing("random");
  EXPECT_THROW(StepModel::load(db, o), InputError);
  // A skewed point only: random routing reads the forced points, so auto still routes nothing (and refuses nothing).
  db.insert_measurement(
      testing::tiny_point(gemm, t.measured, R"({"MOE_EXPERTS":4,"MOE_SKEW":100,"NUM_TOKS":16})", 1.5 * moe_cost(16)));
  o.moe_routing = parse_moe_routing("auto");
  const StepModel skewed_only = StepModel::load(db, o);
  EXPECT_FALSE(skewed_only.routes_moe());
  EXPECT_EQ(skewed_only.routing_summary(), "");
  EXPECT_EQ(skewed_only.predict(parse_composition("16"), 15).device_s, uniform);
}

// Latency and energy are fitted apart; beyond the measured tokens their extensions disagree (here a latency flat at
// 10 us and an energy that keeps growing, 110 to 509.6 W over the points). The step's energy is held to the power
// the unit drew over its points, at the predicted latency; at a measured point it is the measurement.
TEST_F(StepModelTest, EnergyStaysWithinThePowerTheUnitDrewOverItsPoints) {
  const int64_t model = db.upsert_model({0, "tiny-flat", "llama", "LlamaForCausalLM", "cfg-flat"});
  const int64_t op = db.upsert_signature(std::string(64, 'f'), "rms_norm", store::SignatureKind::op, R"({"op":"flat"})",
                                         R"({"rule":"reduce"})")
                         .id;
  db.replace_occurrences(model, t.traced, std::vector<store::Occurrence>{{op, store::Phase::prefill, 2}});
  auto power_w = [](double tok) { return 100 + 0.1 * tok; };
  for (double tok = 1; tok <= 4096; tok *= 2) {
    store::Measurement m = testing::tiny_point(op, t.measured, fmt::format(R"({{"NUM_TOKS":{}}})", tok), 10e-6);
    m.energy_j = 10e-6 * power_w(tok);
    db.insert_measurement(m);
  }
  StepModelOptions o = tiny("paged|sdpa[efficient]");
  o.model = "tiny-flat";
  const StepModel m = StepModel::load(db, o);
  const StepCost inside = m.predict(parse_composition("1024"));
  EXPECT_NEAR(inside.energy_j, 2 * 10e-6 * power_w(1024), 1e-9);
  for (const char* far : {"100000", "40000,40000", "8192"}) {
    const StepCost c = m.predict(parse_composition(far));
    EXPECT_GT(c.extrapolated_terms, 0) << far;
    EXPECT_NEAR(c.device_s, 2 * 10e-6, 1e-9) << far;
    EXPECT_LE(c.energy_j, c.device_s * power_w(4096) * (1 + 1e-12)) << far;
    EXPECT_GE(c.energy_j, c.device_s * power_w(1) * (1 - 1e-12)) << far;
    EXPECT_NEAR(m.explain(parse_composition(far)).total.energy_j, c.energy_j, 1e-15) << far;
  }
  // Without the hold the energy's own extension would have run on (at 100,000 tokens, ~10 kW).
  EXPECT_NEAR(m.predict(parse_composition("100000")).energy_j, 2 * 10e-6 * power_w(4096), 1e-9);
}

TEST(CompositionText, ParsesAndFormats) {
  const plan::Composition c = parse_composition("256, 8x1@1024,3@5");
  ASSERT_EQ(c.requests.size(), 10u);
  EXPECT_EQ(c.requests[0].new_tokens, 256);
  EXPECT_EQ(c.requests[0].context, 0);
  EXPECT_EQ(c.requests[5].context, 1024);
  EXPECT_EQ(c.requests[9].new_tokens, 3);
  EXPECT_EQ(format_composition(c), "256,8x1@1024,3@5");
  for (const char* bad : {"", "0", "x1", "2x", "1@", "1@-3", "a", "1,,2", "0x5", "1.5"})
    EXPECT_THROW(parse_composition(bad), InputError) << bad;
}

}  // namespace
}  // namespace dooly::predict
