// The plan over the golden traces: one unit per op signature, points by what a unit depends on, committed points
// skipped, shards disjoint, the naive plan larger. Uses a real store (a temporary file).
#include "dooly/plan/plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/plan/profile_store.hpp"
#include "dooly/store/ingest.hpp"
#include "dooly/store/sqlite.hpp"
#include "dooly/store/store.hpp"
#include "support/temp_dir.hpp"

namespace dooly::plan {
namespace {

using nlohmann::json;

std::vector<std::string> golden_paths() {
  const std::string d = std::string(DOOLY_SOURCE_DIR) + "/tests/data/traces/";
  return {d + "llama-3.1-8b-tiny__paged_sdpa.json", d + "qwen2.5-7b-tiny__paged_sdpa.json",
          d + "gemma-2-9b-it-tiny__paged_sdpa.json"};
}

// Reading the golden traces and ingesting them is most of a test's time (seconds under the sanitizers): done
// once per process; each test gets its own copy of the ingested store (tests write points into it) and of the
// traces (one test edits them).
struct Ingested {
  testing::TempDir dir;
  std::vector<std::string> paths = golden_paths();
  std::vector<trace::Trace> traces;
  std::string db_path = dir.file("ingested.sqlite");
  Ingested() {
    for (const auto& p : paths) traces.push_back(trace::read_trace(p));
    store::Store db = store::Store::open(db_path);
    store::ingest_traces(db, paths);
  }  // the store closes here: the file is whole
};
const Ingested& ingested() {
  static const Ingested g;
  return g;
}

struct Fixture {
  testing::TempDir dir;
  std::vector<std::string> paths = ingested().paths;
  std::vector<trace::Trace> traces = ingested().traces;
  store::Store db = open_copy(ingested().db_path, dir.file("p.sqlite"));
  Grid grid = read_grid(std::string(DOOLY_SOURCE_DIR) + "/tests/data/grids/tiny.json");
  Plan plan(int64_t prov = 0, PlanOptions o = {}) { return build_plan(db, paths, traces, grid, prov, o); }
  // The first trace alone (tiny Llama, a fifth of the golden traces' ops): for tests of what the plan does with the
  // store's rows and options, which any trace shows (a plan of all three takes seconds under the sanitizers).
  void llama_only() {
    paths.resize(1);
    traces.resize(1);
  }

  static store::Store open_copy(const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, to);
    return store::Store::open(to);
  }
};

TEST(Plan, OneUnitPerOpSignatureWithPointsByWhatItDependsOn) {
  Fixture f;
  const Plan p = f.plan();
  EXPECT_EQ(p.op_occurrences, 2255);  // docs/dooly-tracing.md's table
  EXPECT_EQ(p.op_signatures, 104);    // tests/signature/dedup_test.cpp: 71 + 6 + 27
  ASSERT_EQ(p.units.size(), 104u);
  std::set<std::string> classes;
  int with_cache = 0;
  for (const UnitPlan& u : p.units) {
    EXPECT_TRUE(u.is_op);
    EXPECT_GT(u.signature_id, 0);
    EXPECT_EQ(u.points_total, static_cast<int64_t>(u.points.size()));
    classes.insert(u.point_class);
    if (u.point_class == "tokens") {
      EXPECT_EQ(u.swept, std::vector<std::string>{"NUM_TOKS"});
      EXPECT_EQ(u.points.size(), f.grid.tokens.size());
    }
    if (u.name == "scaled_dot_product_attention") {
      EXPECT_EQ(u.point_class, "compositions");
      EXPECT_EQ(u.op_class, "attention");
    }
    // Limits at the value the trace's dims show (the engine's cache: 333 blocks of 256, not the 331 asked for).
    if (u.fixed.count("CACHE_SLOTS")) {
      EXPECT_EQ(u.fixed.at("CACHE_SLOTS"), 85248);
      ++with_cache;
    }
    // largest first, keys distinct and canonical
    std::set<std::string> keys;
    for (const PointPlan& pt : u.points) {
      EXPECT_TRUE(keys.insert(pt.key).second);
      EXPECT_EQ(store::canonical_point_key(pt.key), pt.key);
    }
  }
  EXPECT_TRUE(classes.count("tokens") && classes.count("compositions"));
  EXPECT_GT(with_cache, 0);  // the cache reads and writes
  EXPECT_GT(p.naive.points, p.aware.points);
  EXPECT_GT(p.naive.estimated_s, p.aware.estimated_s);
}

TEST(Plan, OpsThatLaunchedNoKernelOnAGpuAreMeasuredAtTheirLargestPointOnly) {
  Fixture f;
  const Plan cpu = f.plan();  // the golden traces are CPU traces: no kernel symbols, so no op is judged by them
  for (const UnitPlan& u : cpu.units) EXPECT_NE(u.point_class, "no_kernel") << u.name;
  // The same traces as GPU traces: every op launched a kernel except views and transposes, and views did launch one
  // in the last trace (an op is judged by all its occurrences: a kernel anywhere keeps its whole grid).
  for (size_t i = 0; i < f.traces.size(); ++i) {
    f.traces[i].device = "cuda";
    for (trace::Step& st : f.traces[i].steps)
      for (trace::OpRecord& op : st.ops)
        if (op.op != "transpose" && (op.op != "view" || i + 1 == f.traces.size())) op.kernels = {"k_" + op.op};
  }
  std::set<std::string> in_last;  // signatures the last trace holds
  for (const UnitPlan& u : build_plan(f.db, {f.paths.back()}, {f.traces.back()}, f.grid, 0, {}).units)
    in_last.insert(u.hash);
  const Plan gpu = f.plan();
  std::map<std::string, const UnitPlan*> before;
  for (const UnitPlan& u : cpu.units) before[u.hash] = &u;
  int reduced = 0, kept_views = 0;
  for (const UnitPlan& u : gpu.units) {
    const UnitPlan& b = *before.at(u.hash);
    const bool silent = u.name == "transpose" || (u.name == "view" && !in_last.count(u.hash));
    kept_views += u.name == "view" && !silent;
    if (silent && b.points.size() > 1) {
      EXPECT_EQ(u.point_class, "no_kernel");
      ASSERT_EQ(u.points.size(), 1u);
      EXPECT_EQ(u.points.front().key, b.points.front().key);  // the largest point of the grid
      ++reduced;
    } else {
      EXPECT_EQ(u.points.size(), b.points.size()) << u.name;
      EXPECT_NE(u.point_class, "no_kernel") << u.name;
    }
  }
  EXPECT_GT(reduced, 0);
  EXPECT_GT(kept_views, 0);
  EXPECT_LT(gpu.aware.points, cpu.aware.points);
  EXPECT_LT(gpu.naive.points, cpu.naive.points);  // the naive plan uses the same grids
  EXPECT_NE(render_plan(gpu).find(fmt::format("{} units launched no kernel", reduced)), std::string::npos);
}

TEST(Plan, PrefillAttentionKeepsKvEqualToTokens) {
  Fixture f;
  f.llama_only();
  int prefill_like = 0;
  for (const UnitPlan& u : f.plan().units) {
    if (u.name != "scaled_dot_product_attention") continue;
    bool all_equal = true;
    for (const PointPlan& pt : u.points)
      for (const auto& [k, v] : pt.bindings)
        if (k.rfind("KV_TOKS", 0) == 0 && v != pt.bindings.at("NUM_TOKS")) all_equal = false;
    prefill_like += all_equal;
    EXPECT_FALSE(u.points.empty());
  }
  EXPECT_GE(prefill_like, 1);  // the prefill step's attention: no cache read, keys are the step's tokens
}

TEST(Plan, CommittedPointsAreSkippedAndFailedOnesRetriedOnRequest) {
  Fixture f;
  f.llama_only();
  const int64_t ctx = upsert_measurement_context(f.db, json{{"gpu_name", "test"}});
  Plan p = f.plan(ctx);
  const UnitPlan& u =
      *std::find_if(p.units.begin(), p.units.end(), [](const UnitPlan& x) { return x.points.size() >= 4; });
  // An ok row of the unit at `point` with `more` (energy, extra) merged in.
  auto commit_ok = [&](const json& point, const json& more) {
    json row = {{"signature", u.hash},
                {"provenance_id", ctx},
                {"point", point},
                {"status", "ok"},
                {"repetitions", 5},
                {"latency_s", {{"mean", 1e-5}, {"median", 1e-5}, {"min", 1e-5}, {"max", 1e-5}, {"std", 0.0}}}};
    row.update(more);
    commit_point(f.db, row);
  };
  commit_ok({{"key", u.points[0].key}, {"bindings", u.points[0].bindings}},
            {{"energy", {{"j", 0.01}, {"hw_j", 0.001}}}, {"extra", {{"point_s", 0.75}}}});
  json pt2 = {{"key", u.points[1].key}};
  commit_point(f.db, {{"signature", u.hash},
                      {"provenance_id", ctx},
                      {"point", pt2},
                      {"status", "failed"},
                      {"reason", "RuntimeError: boom"}});
  const Plan again = f.plan(ctx);
  const auto it =
      std::find_if(again.units.begin(), again.units.end(), [&](const UnitPlan& x) { return x.hash == u.hash; });
  ASSERT_NE(it, again.units.end());
  EXPECT_EQ(it->points_committed, 1);
  EXPECT_EQ(it->points_failed, 1);
  EXPECT_EQ(it->points.size(), u.points.size() - 2);
  EXPECT_EQ(again.todo.points, p.todo.points - 2);
  // The committed point's own time against the model's estimate of it: the pace of the rest.
  EXPECT_EQ(p.pace.points, 0);
  EXPECT_EQ(again.pace.points, 1);
  EXPECT_DOUBLE_EQ(again.pace.measured_s, 0.75);
  EXPECT_DOUBLE_EQ(again.pace.estimated_s, u.points[0].estimated_s);
  EXPECT_DOUBLE_EQ(to_json(again)["pace"]["ratio"].get<double>(), 0.75 / u.points[0].estimated_s);
  PlanOptions retry;
  retry.retry_failed = true;
  EXPECT_EQ(f.plan(ctx, retry).todo.points, p.todo.points - 1);
  // An ok row without energy is measured again when energy is wanted (a run with a power source), not otherwise.
  commit_ok({{"key", u.points[2].key}}, json::object());
  EXPECT_EQ(f.plan(ctx).todo.points, p.todo.points - 2);
  // One the engine found below its resolution floor is measured, not measured again.
  commit_ok({{"key", u.points.back().key}},
            {{"energy", {{"j", nullptr}}},
             {"extra", {{"energy", {{"below_floor", true}, {"note", "below the resolution floor"}}}}}});
  EXPECT_EQ(f.plan(ctx).todo.points, p.todo.points - 3);
  PlanOptions time_only;
  time_only.require_energy = false;
  EXPECT_EQ(f.plan(ctx, time_only).todo.points, p.todo.points - 4);
  // Another measurement context holds nothing.
  const int64_t other = upsert_measurement_context(f.db, json{{"gpu_name", "other"}});
  EXPECT_EQ(f.plan(other).todo.points, p.todo.points);
  EXPECT_EQ(latest_measurement_context(f.db), other);
}

// The dry run scales the model's estimate by the pace of the committed points, once there are enough of them.
TEST(Plan, TheDryRunGivesTheRestAtThePaceOfTheCommittedPoints) {
  Plan p;
  p.todo.points = 100;
  p.todo.estimated_s = 600;  // 10 GPU-min by the model
  p.pace = Pace{19, 38.0, 19.0};
  EXPECT_EQ(render_plan(p).find("at the pace"), std::string::npos);  // 19 points: too few to say
  p.pace = Pace{20, 30.0, 20.0};
  EXPECT_NE(render_plan(p).find("at the pace of the 20 points this context holds (1.500 s each inside the worker, "
                                "1.50x the model's estimate of them): 15.0 GPU-min"),
            std::string::npos)
      << render_plan(p);
  p.todo.points = 0;  // nothing left to measure: nothing to say of its pace
  EXPECT_EQ(render_plan(p).find("at the pace"), std::string::npos);
}

// A long point's energy stored without the settle period (before it existed, or shorter than the grid asks) is
// measured again; a short point, a time-only row and a settled row are not (H200, 2026-12-02: unsettled windows
// read up to 17 % off a 5 s reference for points of >= 1 ms).
TEST(Plan, LongPointsStoredWithoutTheSettlePeriodAreMeasuredAgain) {
  Fixture f;
  f.llama_only();
  f.grid.measure.settle_s = 0.5;
  f.grid.measure.settle_min_latency_s = 1e-3;
  const int64_t ctx = upsert_measurement_context(f.db, json{{"gpu_name", "test"}});
  Plan p = f.plan(ctx);
  const UnitPlan& u =
      *std::find_if(p.units.begin(), p.units.end(), [](const UnitPlan& x) { return x.points.size() >= 5; });
  auto row = [&](size_t i, double latency_s, json extra, bool energy = true) {
    json r = {{"signature", u.hash},
              {"provenance_id", ctx},
              {"point", {{"key", u.points[i].key}}},
              {"status", "ok"},
              {"repetitions", 5},
              {"latency_s",
               {{"mean", latency_s}, {"median", latency_s}, {"min", latency_s}, {"max", latency_s}, {"std", 0.0}}},
              {"extra", std::move(extra)}};
    if (energy) r["energy"] = {{"j", 0.01}, {"hw_j", 0.001}};
    commit_point(f.db, r);
  };
  row(0, 2e-3, json::object());        // long, no settle recorded: stale
  row(1, 2e-3, {{"settle_s", 0.2}});   // long, settled shorter than asked: stale
  row(2, 2e-3, {{"settle_s", 0.49}});  // long, settled (the worker's check lands just past 0.5)
  row(3, 5e-4, json::object());        // short: no settle asked
  row(4, 2e-3, {{"settle_s", 0.0}});   // the worker judged it short (one replay under 1 ms a call)
  const auto unit_of = [&](const Plan& q) {
    return *std::find_if(q.units.begin(), q.units.end(), [&](const UnitPlan& x) { return x.hash == u.hash; });
  };
  UnitPlan again = unit_of(f.plan(ctx));
  EXPECT_EQ(again.points_committed, 3);
  EXPECT_EQ(again.points_unsettled, 2);
  EXPECT_EQ(again.points.size(), u.points.size() - 3);  // the unsettled two among them
  EXPECT_NE(render_plan(f.plan(ctx)).find("2 of the points to measure were stored without the settle period"),
            std::string::npos);
  row(0, 2e-3, {{"settle_s", 0.51}});  // measured again, settled: the newer row commits the point
  EXPECT_EQ(unit_of(f.plan(ctx)).points_unsettled, 1);
  f.grid.measure.settle_s = 0;  // a grid without a settle period keeps every row
  EXPECT_EQ(unit_of(f.plan(ctx)).points_committed, 5);
}

// A unit whose input is a static buffer's rows (the engine's attention mask) has the rows measured under layout rule
// 1 (gaps grown in proportion, misaligned rows) measured again; other units keep theirs, and a newer row commits.
TEST(Plan, PointsMeasuredWithAnOlderLayoutOfABuffersRowsAreMeasuredAgain) {
  Fixture f;
  f.llama_only();
  const int64_t ctx = upsert_measurement_context(f.db, json{{"gpu_name", "test"}});
  Plan p = f.plan(ctx);
  const auto unit_named = [](const Plan& q, const std::string& name) {
    return *std::find_if(q.units.begin(), q.units.end(),
                         [&](const UnitPlan& x) { return x.name == name && x.points.size() >= 2; });
  };
  const UnitPlan sdpa = unit_named(p, "scaled_dot_product_attention"), mm = unit_named(p, "linear");
  const auto unit_of = [](const Plan& q, const UnitPlan& u) {
    return *std::find_if(q.units.begin(), q.units.end(), [&](const UnitPlan& x) { return x.hash == u.hash; });
  };
  auto row = [&](const UnitPlan& u, size_t i, json extra) {
    commit_point(f.db, {{"signature", u.hash},
                        {"provenance_id", ctx},
                        {"point", {{"key", u.points[i].key}}},
                        {"status", "ok"},
                        {"repetitions", 5},
                        {"latency_s", {{"mean", 1e-4}, {"median", 1e-4}, {"min", 1e-4}, {"max", 1e-4}, {"std", 0.0}}},
                        {"energy", {{"j", 0.01}, {"hw_j", 0.001}}},
                        {"extra", std::move(extra)}});
  };
  row(sdpa, 0, {{"layout_rule", 1}});  // the mask's rows laid out by the older rule: measured again
  row(sdpa, 1, json::object());        // committed now: the rule this build lays rows out by
  row(mm, 0, {{"layout_rule", 1}});    // no buffer rows: the rule does not matter
  const Plan again = f.plan(ctx);
  EXPECT_EQ(unit_of(again, sdpa).points_relaid, 1);
  EXPECT_EQ(unit_of(again, sdpa).points_committed, 1);
  EXPECT_EQ(unit_of(again, mm).points_committed, 1);
  EXPECT_EQ(unit_of(again, mm).points_relaid, 0);
  EXPECT_NE(render_plan(again).find("1 of the points to measure were measured with a static buffer's rows"),
            std::string::npos);
  row(sdpa, 0, json::object());  // measured again: the newer row commits the point
  EXPECT_EQ(unit_of(f.plan(ctx), sdpa).points_relaid, 0);
  EXPECT_EQ(unit_of(f.plan(ctx), sdpa).points_committed, 2);
}

// With the settle period carried over (settle_carry_gap_s > 0), a unit's points run back to back settle once: the
// dry run charges the settle to the unit's first long point only, the others carry it over.
TEST(Plan, TheSettlePeriodCarriedOverIsChargedOnceAUnit) {
  Fixture f;
  f.llama_only();
  f.grid.measure.settle_s = 0.5;
  f.grid.measure.capped_settle_s = 2.0;
  f.grid.measure.settle_min_latency_s = 0;  // every point is long by the guess
  const Plan each = f.plan(0);
  f.grid.measure.settle_carry_gap_s = 0.5;
  const Plan once = f.plan(0);
  ASSERT_EQ(each.units.size(), once.units.size());
  double saved = 0;
  for (size_t i = 0; i < each.units.size(); ++i) {
    const UnitPlan &a = each.units[i], &b = once.units[i];
    ASSERT_EQ(a.points.size(), b.points.size());
    ASSERT_FALSE(b.points.empty());
    EXPECT_DOUBLE_EQ(b.points[0].estimated_s, a.points[0].estimated_s);  // the first settles as before
    EXPECT_DOUBLE_EQ(b.points[0].settle_s, 0.5);
    for (size_t k = 1; k < b.points.size(); ++k) {
      EXPECT_DOUBLE_EQ(b.points[k].settle_s, 0.0);
      EXPECT_NEAR(a.points[k].estimated_s - b.points[k].estimated_s, 0.5, 1e-9);
    }
    saved += 0.5 * static_cast<double>(a.points.size() - 1);
  }
  EXPECT_NEAR(each.todo.estimated_s - once.todo.estimated_s, saved, 1e-6);
  EXPECT_GT(saved, 0);
  EXPECT_DOUBLE_EQ(to_json(once)["measure"]["settle_carry_gap_s"].get<double>(), 0.5);
}

TEST(Plan, AbsorbedAndUnrunnableSignaturesFollowTheirResolution) {
  Fixture f;
  f.llama_only();
  const int64_t ctx = upsert_measurement_context(f.db, json{{"gpu_name", "test"}});
  const Plan p = f.plan(ctx);
  const UnitPlan* with_parent = nullptr;
  for (const UnitPlan& u : p.units)
    if (!u.ancestors.empty() && u.name == "rsqrt") with_parent = &u;
  ASSERT_NE(with_parent, nullptr);
  const Ancestor& parent = with_parent->ancestors.front();
  commit_resolution(
      f.db, {{"signature", with_parent->hash},
             {"provenance_id", ctx},
             {"unit", parent.hash},
             {"level", 1},
             {"status", "absorbed"},
             {"attempts", json::array({{{"unit", with_parent->hash}, {"level", 0}, {"error", "RuntimeError: x"}}})}});
  const UnitPlan& other = p.units.back();
  commit_resolution(f.db, {{"signature", other.hash},
                           {"provenance_id", ctx},
                           {"unit", nullptr},
                           {"level", 0},
                           {"status", "unrunnable"},
                           {"attempts", json::array({{{"unit", other.hash}, {"level", 0}, {"error", "Timeout: t"}}})}});
  const Plan again = f.plan(ctx);
  bool module_unit = false;
  for (const UnitPlan& u : again.units) {
    EXPECT_NE(u.hash, with_parent->hash);
    EXPECT_NE(u.hash, other.hash);
    if (u.hash == parent.hash) {
      module_unit = true;
      EXPECT_FALSE(u.is_op);
      EXPECT_EQ(u.resolution, "absorbed");
      EXPECT_GE(u.call, 0);
      EXPECT_EQ(u.absorbs, std::vector<std::string>{with_parent->hash});
      EXPECT_EQ(u.swept, std::vector<std::string>{"NUM_TOKS"});
    }
  }
  EXPECT_TRUE(module_unit);
  ASSERT_EQ(again.uncovered.size(), 1u);
  EXPECT_EQ(again.uncovered[0].hash, other.hash);
  EXPECT_NE(render_plan(again).find("uncovered: 1 signatures"), std::string::npos);
  // --retry-failed resolves an unrunnable signature again (a hole is not permanent).
  PlanOptions retry;
  retry.retry_failed = true;
  const Plan retried = f.plan(ctx, retry);
  EXPECT_TRUE(retried.uncovered.empty());
  const auto it =
      std::find_if(retried.units.begin(), retried.units.end(), [&](const UnitPlan& u) { return u.hash == other.hash; });
  ASSERT_NE(it, retried.units.end());
  EXPECT_EQ(it->resolution, "unresolved");
}

TEST(Plan, ShardsAreDisjointAndCoverThePlan) {
  Fixture f;
  f.llama_only();
  std::set<std::string> all;
  int64_t points = 0;
  for (int i = 0; i < 3; ++i) {
    const Plan s = f.plan(0, parse_shard(std::to_string(i) + "/3"));
    EXPECT_FALSE(s.units.empty());
    for (const UnitPlan& u : s.units) EXPECT_TRUE(all.insert(u.hash).second) << "unit in two shards";
    points += s.todo.points;
  }
  EXPECT_EQ(all.size(), 71u);  // tiny Llama's op signatures (tests/signature/dedup_test.cpp)
  EXPECT_EQ(points, f.plan().todo.points);
  for (const char* bad : {"3/3", "-1/2", "1", "a/b", "1/0", "0/2x"}) EXPECT_THROW(parse_shard(bad), InputError) << bad;
}

// A MoE's grouped GEMM: the first linear of the first trace's first step made into `_grouped_mm(rows, weights,
// offsets)` over 4 experts, 2 rows a token (what OLMoE's experts record, smaller).
TEST(Plan, AGroupedGemmIsAlsoMeasuredUnderForcedAndSkewedRouting) {
  Fixture f;
  f.grid.moe = {{1, 16}, {1, 2, 4, 8}, {100}};
  trace::OpRecord* op = nullptr;
  trace::DimLabel tokens;
  for (trace::OpRecord& o : f.traces[0].steps[0].ops)
    for (const trace::DimLabel& d : o.inputs.empty() ? std::vector<trace::DimLabel>{} : o.inputs[0].shape)
      if (!op && o.op == "linear" && d.value_form == "NUM_TOKS") op = &o, tokens = d;
  ASSERT_NE(op, nullptr);
  auto fixed = [](int64_t v) {
    return trace::DimLabel{v, taint::Kind::model_config, std::to_string(v), std::to_string(v)};
  };
  const trace::DimLabel rows{2 * tokens.value, taint::Kind::mix, "2*NUM_TOKS", "2*NUM_TOKS"};
  op->op = "_grouped_mm";
  op->inputs = {
      {{rows, fixed(8)}, "bfloat16", {}}, {{fixed(4), fixed(8), fixed(8)}, "bfloat16", {}}, {{fixed(4)}, "int32", {}}};
  op->outputs = {{{rows, fixed(8)}, "bfloat16", {}}};
  op->scalars.clear();
  const Plan p = build_plan(f.db, {f.paths[0]}, {f.traces[0]}, f.grid, 0, {});
  const UnitPlan* g = nullptr;
  for (const UnitPlan& u : p.units)
    if (u.name == "_grouped_mm") g = &u;
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->point_class, "moe");
  std::set<std::string> keys;
  for (const PointPlan& pt : g->points) keys.insert(pt.key);
  // Uniform over the token grid (keys as before); at 1 token the 2 rows reach 2 experts: forced onto 1, and skewed;
  // at 16 tokens (32 rows) all 4: forced onto 1 and 2 (4 and 8 reach no fewer than uniform), and skewed.
  EXPECT_EQ(keys,
            (std::set<std::string>{
                R"({"NUM_TOKS":1})", R"({"NUM_TOKS":16})", R"({"NUM_TOKS":64})",
                R"({"MOE_EXPERTS":1,"MOE_SKEW":0,"NUM_TOKS":1})", R"({"MOE_EXPERTS":4,"MOE_SKEW":100,"NUM_TOKS":1})",
                R"({"MOE_EXPERTS":1,"MOE_SKEW":0,"NUM_TOKS":16})", R"({"MOE_EXPERTS":2,"MOE_SKEW":0,"NUM_TOKS":16})",
                R"({"MOE_EXPERTS":4,"MOE_SKEW":100,"NUM_TOKS":16})"}));
  for (const PointPlan& pt : g->points)
    if (pt.key.find("MOE_") != std::string::npos) {
      EXPECT_TRUE(pt.bindings.count("MOE_EXPERTS") && pt.bindings.count("MOE_SKEW")) << pt.key;
      EXPECT_EQ(pt.bindings.at("NUM_TOKS"), pt.composition.num_tokens());
    }
  EXPECT_EQ(to_json(p).at("units").size(), p.units.size());
  // Largest first by tokens: a routing point sorts with the uniform point of its tokens, after it.
  for (size_t i = 1; i < g->points.size(); ++i)
    EXPECT_GE(g->points[i - 1].bindings.at("NUM_TOKS"), g->points[i].bindings.at("NUM_TOKS")) << g->points[i].key;
  EXPECT_EQ(g->points.front().key, R"({"NUM_TOKS":64})");
  // A grid listing a value twice measures it once.
  f.grid.moe = {{1, 16, 16}, {1, 1, 2, 4, 8}, {100, 100}};
  for (const UnitPlan& u : build_plan(f.db, {f.paths[0]}, {f.traces[0]}, f.grid, 0, {}).units)
    if (u.name == "_grouped_mm") EXPECT_EQ(u.points.size(), g->points.size());
  // Without the grid's section, only the uniform sweep; other units never get routing points.
  f.grid.moe = {};
  for (const UnitPlan& u : build_plan(f.db, {f.paths[0]}, {f.traces[0]}, f.grid, 0, {}).units) {
    EXPECT_NE(u.point_class, "moe") << u.name;
    if (u.name == "_grouped_mm") EXPECT_EQ(u.points.size(), 3u);
  }
}

TEST(Plan, TheJsonCarriesWhatTheWorkerReads) {
  Fixture f;
  const json j = to_json(f.plan());
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("units").size(), 104u);
  const json& u = j.at("units")[0];
  for (const char* k : {"hash", "kind", "trace", "step", "seq", "ancestors", "swept", "points", "resolution"})
    EXPECT_TRUE(u.contains(k)) << k;
  const json& pt = u.at("points")[0];
  for (const char* k : {"key", "bindings", "requests", "num_tokens", "kv_tokens", "estimated_s"})
    EXPECT_TRUE(pt.contains(k)) << k;
}

TEST(Plan, TheEngineSignatureKeepsWhereItsLoopWasTimed) {
  testing::TempDir dir;
  store::Store db = store::Store::open(dir.file("e.sqlite"));
  json engine = {{"name", "hf-continuous-batching"},
                 {"model", "m"},
                 {"config_hash", "c"},
                 {"attention", "paged|sdpa"},
                 {"dtype", "bfloat16"},
                 {"block_size", 256},
                 {"max_batch_tokens", 2048},
                 {"cuda_graphs", {false, false}}};
  const std::string before = upsert_engine_signature(db, engine);  // a store from before 'loop': the same hash
  engine["loop"] = "engine-thread";
  const std::string thread = upsert_engine_signature(db, engine);
  engine["loop"] = "caller";
  const std::string caller = upsert_engine_signature(db, engine);
  EXPECT_EQ(std::set<std::string>({before, thread, caller}).size(), 3u);
  store::Statement s = db.database().prepare("SELECT canonical_json FROM signatures WHERE hash = ?");
  s.bind(1, thread);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(json::parse(s.column_text(0)).at("attrs").at("loop"), "engine-thread");
  for (const json& bad : {json(""), json(3)}) {
    engine["loop"] = bad;
    try {
      upsert_engine_signature(db, engine);
      ADD_FAILURE() << "accepted loop " << bad.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("'loop' must be a non-empty string"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dooly::plan
