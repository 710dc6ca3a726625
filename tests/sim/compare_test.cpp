// dooly compare's arithmetic on hand-made result files: per-request MAPE over the requests finished in both,
// the error of the median and p90, throughput and J per token, and the steps' match and divergence horizon.
#include "dooly/sim/compare.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "dooly/common/error.hpp"
#include "support/temp_dir.hpp"

namespace dooly::sim {
namespace {

using nlohmann::json;

json request(const std::string& id, double ttft, double tpot, double e2e, double energy, int out = 5) {
  return {{"id", id},     {"arrival_s", 0.0},   {"ttft_s", ttft},      {"tpot_s", tpot},
          {"e2e_s", e2e}, {"energy_j", energy}, {"output_tokens", out}};
}

TEST(Compare, MetricErrorsOverTheRequestsFinishedInBoth) {
  json live = {{"version", 1},
               {"requests",
                {request("a", 0.1, 0.02, 1.0, 10), request("b", 0.2, 0.04, 2.0, 20), request("c", 0.4, 0.01, 4.0, 40),
                 request("only-live", 1, 1, 1, 1)}}};
  json sim = {{"version", 1},
              {"requests",
               {request("a", 0.11, 0.02, 1.0, 11), request("b", 0.18, 0.05, 2.0, 20), request("c", 0.4, 0.01, 5.0, 30),
                request("only-sim", 1, 1, 1, 1)}}};
  live["requests"][2]["finished"] = true;
  sim["requests"][1]["tpot_s"] = nullptr;  // one output token in the simulation: no TPOT to compare
  const Comparison c = compare_results(live, sim);
  EXPECT_EQ(c.both_finished, 3);
  EXPECT_EQ(c.only_live, 1);
  EXPECT_EQ(c.only_sim, 1);
  ASSERT_EQ(c.metrics.size(), 4u);
  const MetricError& ttft = c.metrics[0];
  EXPECT_EQ(ttft.name, "ttft");
  EXPECT_EQ(ttft.requests, 3);
  EXPECT_NEAR(ttft.mape, (0.1 + 0.1 + 0.0) / 3, 1e-12);
  EXPECT_NEAR(ttft.live_median, 0.2, 1e-12);
  EXPECT_NEAR(ttft.sim_median, 0.18, 1e-12);
  EXPECT_NEAR(ttft.median_error, -0.1, 1e-12);
  EXPECT_NEAR(ttft.live_p90, 0.2 + 0.8 * 0.2, 1e-12);  // numpy's linear interpolation: 0.36
  EXPECT_EQ(c.metrics[1].requests, 2);                 // TPOT where both have one
  EXPECT_NEAR(c.metrics[2].mape, 0.25 / 3, 1e-12);     // E2E: only c differs, by 25 %
  EXPECT_NEAR(c.metrics[3].mape, (0.1 + 0 + 0.25) / 3, 1e-12);
  // J per output token over each file's finished requests (both: 4 requests of 5 tokens).
  EXPECT_NEAR(*c.live_j_per_token, 71.0 / 20, 1e-12);
  EXPECT_NEAR(*c.sim_j_per_token, 62.0 / 20, 1e-12);
  EXPECT_NE(render_comparison(c).find("(1 only live, 1 only simulated)"), std::string::npos);
}

TEST(Compare, StepsMatchUntilTheFirstDifferenceAndAreCountedAfter) {
  auto live_step = [](int r, int t, int p, int d) {
    return json{{"num_requests", r}, {"num_tokens", t}, {"num_prefill_tokens", p}, {"num_decode_requests", d}};
  };
  auto sim_step = [](int r, int t, int p, int d) {
    return json{{"requests", r}, {"tokens", t}, {"prefill_tokens", p}, {"decode_requests", d}};
  };
  const json live = {{"version", 1},
                     {"requests", {request("a", 0.1, 0.02, 1, 1)}},
                     {"steps",
                      {live_step(3, 521, 521, 0), live_step(4, 521, 518, 3), live_step(4, 4, 0, 4),
                       live_step(2, 2, 0, 2), live_step(1, 1, 0, 1)}}};
  const json sim = {
      {"version", 1},
      {"requests", {request("a", 0.1, 0.02, 1, 1)}},
      {"steps", {sim_step(3, 521, 521, 0), sim_step(4, 521, 518, 3), sim_step(3, 3, 0, 3), sim_step(2, 2, 0, 2)}}};
  const StepMatch m = compare_results(live, sim).steps;
  EXPECT_EQ(m.live_steps, 5);
  EXPECT_EQ(m.sim_steps, 4);
  EXPECT_EQ(m.compared, 4);
  EXPECT_EQ(m.matching, 3);
  EXPECT_EQ(m.horizon, 2);
  EXPECT_EQ(m.first_mismatch,
            "step 2: live 4 requests, 4 tokens (0 prefill, 4 decodes); simulated 3 requests, 3 tokens (0 prefill, "
            "3 decodes)");
  const json j = comparison_json(compare_results(live, sim));
  EXPECT_EQ(j["steps"]["horizon"], 2);
  EXPECT_EQ(j["version"], 1);
  // Live files from before the capture flag: no capture count, not zero.
  EXPECT_FALSE(m.live_captures);
  EXPECT_TRUE(j["steps"]["captures"]["live"].is_null());
}

TEST(Compare, CapturesAreCountedWhereTheLiveRunRecordedThem) {
  auto live_step = [](bool captured) {
    return json{{"num_requests", 1},
                {"num_tokens", 1},
                {"num_prefill_tokens", 0},
                {"num_decode_requests", 1},
                {"captured", captured}};
  };
  auto sim_step = [](const char* path) {
    return json{{"requests", 1}, {"tokens", 1}, {"prefill_tokens", 0}, {"decode_requests", 1}, {"path", path}};
  };
  const json live = {{"version", 1},
                     {"requests", {request("a", 0.1, 0.02, 1, 1)}},
                     {"steps", {live_step(true), live_step(false), live_step(true), live_step(true)}}};
  const json sim = {{"version", 1},
                    {"requests", {request("a", 0.1, 0.02, 1, 1)}},
                    {"steps", {sim_step("capture"), sim_step("capture"), sim_step("graph")}}};
  const Comparison c = compare_results(live, sim);
  EXPECT_EQ(c.steps.live_captures, 3);
  EXPECT_EQ(c.steps.sim_captures, 2);
  EXPECT_EQ(c.steps.captures_in_both, 1);
  EXPECT_NE(render_comparison(c).find("CUDA graph captures: live 3, simulated 2; at the same step 1"),
            std::string::npos);
  EXPECT_EQ(comparison_json(c)["steps"]["captures"]["live"], 3);
}

TEST(Compare, StepTimesArePricedByKindAndPathAtMatchingCompositions) {
  // Live: a prefill, two decodes the engine ran straight on from (gaps of 1 ms: their time runs to the next start),
  // a decode followed by a 50 ms pause (its own duration), then a step the simulation composed differently.
  auto live_step = [](double start, double end, int64_t prefill, int64_t decodes) {
    return json{{"start_s", start},
                {"end_s", end},
                {"duration_s", end - start},
                {"num_requests", std::max<int64_t>(decodes, 1)},
                {"num_tokens", prefill + decodes},
                {"num_prefill_tokens", prefill},
                {"num_decode_requests", decodes}};
  };
  auto sim_step = [](double dt, int64_t prefill, int64_t decodes, const char* path, double model_dt = -1) {
    json s = {{"dt_s", dt},
              {"requests", std::max<int64_t>(decodes, 1)},
              {"tokens", prefill + decodes},
              {"prefill_tokens", prefill},
              {"decode_requests", decodes},
              {"path", path}};
    if (model_dt >= 0) s["model_dt_s"] = model_dt;
    return s;
  };
  const json live = {{"version", 1},
                     {"requests", {request("a", 0.1, 0.02, 1, 1)}},
                     {"steps",
                      {live_step(0.000, 0.099, 100, 0), live_step(0.100, 0.119, 0, 1), live_step(0.120, 0.139, 0, 1),
                       live_step(0.140, 0.160, 0, 1), live_step(0.210, 0.230, 0, 2)}}};
  // Under --step-times the simulated dt_s is the live one; model_dt_s is the cost model's price.
  const json sim = {{"version", 1},
                    {"requests", {request("a", 0.1, 0.02, 1, 1)}},
                    {"steps",
                     {sim_step(0.1, 100, 0, "capture", 0.150), sim_step(0.02, 0, 1, "graph", 0.022),
                      sim_step(0.02, 0, 1, "graph", 0.022), sim_step(0.02, 0, 1, "graph", 0.025),
                      sim_step(0.02, 0, 3, "graph", 0.030)}}};
  const StepMatch m = compare_results(live, sim).steps;
  ASSERT_EQ(m.pricing.size(), 3u);  // prefill capture, decode graph, all (the last step's composition differs)
  EXPECT_EQ(m.pricing[0].error.name, "prefill capture");
  EXPECT_EQ(m.pricing[0].error.requests, 1);
  EXPECT_NEAR(m.pricing[0].error.live_median, 0.100, 1e-12);  // to the next start
  EXPECT_NEAR(m.pricing[0].error.mape, 0.5, 1e-9);
  EXPECT_EQ(m.pricing[1].kind, "decode");
  EXPECT_EQ(m.pricing[1].path, "graph");
  EXPECT_EQ(m.pricing[1].error.requests, 3);
  // live 20, 20, 20 ms (the last one's own duration, the pause after it not counted); priced 22, 22, 25
  EXPECT_NEAR(m.pricing[1].error.mape, (0.1 + 0.1 + 0.25) / 3, 1e-9);
  EXPECT_NEAR(m.pricing[1].error.median_error, 0.1, 1e-9);
  EXPECT_EQ(m.pricing[2].kind, "all");
  EXPECT_EQ(m.pricing[2].error.requests, 4);
  // Without model_dt_s (the simulator's own timing) dt_s is the price.
  json own = sim;
  for (json& s : own["steps"]) s.erase("model_dt_s");
  EXPECT_NEAR(compare_results(live, own).steps.pricing[0].error.mape, 0.0, 1e-9);
  const json j = comparison_json(compare_results(live, sim));
  EXPECT_EQ(j["steps"]["pricing"][1]["steps"], 3);
  EXPECT_NE(render_comparison(compare_results(live, sim)).find("decode graph"), std::string::npos);
}

TEST(Compare, WhatIsNotAResultFileIsOneLineNamingIt) {
  ::dooly::testing::TempDir dir;
  auto error_of = [&](const std::string& text) -> std::string {
    const std::string path = dir.file("r.json");
    std::ofstream(path) << text;
    try {
      (void)read_result(path);
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("{").find("not JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("not a dooly result file"), std::string::npos);
  EXPECT_NE(error_of(R"({"version": 2, "requests": [{}]})").find("version 2 (this build reads version 1)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version": 1, "requests": []})").find("holds no requests"), std::string::npos);
  EXPECT_NE(error_of(R"({"version": 1, "requests": [1]})").find("a request is not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"version": 1, "requests": [{}], "steps": {}})").find("\"steps\" is not a list"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"version": 1, "requests": [{"id": "a"}]})").size(), 0u);  // a valid, if empty, file
}

}  // namespace
}  // namespace dooly::sim
