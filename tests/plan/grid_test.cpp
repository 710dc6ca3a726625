// The grid file: the shipped default parses; every bad field is one InputError naming the file and the field.
#include "dooly/plan/grid.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"

namespace dooly::plan {
namespace {

using nlohmann::json;

json minimal() {
  return json::parse(R"({"version": 1, "tokens": [1, 8], "requests": [1],
                         "compositions": {"decode": {"batch": [2], "context": [16]}}})");
}

std::string error_of(const json& j) {
  try {
    parse_grid(j, "g.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Grid, TheShippedDefaultParses) {
  const Grid g = read_grid(std::string(DOOLY_SOURCE_DIR) + "/data/grids/default.json");
  EXPECT_EQ(g.tokens.front(), 1);
  EXPECT_EQ(g.tokens.back(), 8192);
  EXPECT_GT(g.tokens_for("matmul").size(), g.tokens.size());
  EXPECT_EQ(g.tokens_for("reduce"), g.tokens);
  EXPECT_LT(g.tokens_for("elementwise").size(), g.tokens.size());
  EXPECT_LT(g.compositions_for("view").size(), g.compositions().size());
  EXPECT_GT(g.compositions().size(), 30u);
  EXPECT_EQ(g.sha256.size(), 64u);
  for (const Composition& c : g.compositions()) EXPECT_LE(c.num_tokens(), g.max_tokens);
  // The settle period the H200 energy check chose (docs/results/2026-12-02-h200-issue11-checks.md).
  EXPECT_DOUBLE_EQ(g.measure.settle_s, 0.5);
  EXPECT_DOUBLE_EQ(g.measure.settle_min_latency_s, 1e-3);
  EXPECT_DOUBLE_EQ(g.measure.capped_settle_s, 2.0);
  // Carried over between a unit's points: the same 18 of 20 within 3 % as settling each point
  // (docs/results/2026-12-05-h200-settle-carry-check.md).
  EXPECT_DOUBLE_EQ(g.measure.settle_carry_gap_s, 0.5);
  // The input policy the H200 composition check chose (docs/results/2026-12-03-h200-issue11-session5.md).
  EXPECT_EQ(g.measure.inputs, "warm");
  EXPECT_EQ(measure_json(g.measure).at("inputs"), "warm");
  // MoE routing: forced onto fewer experts and skewed, over a coarser token grid than the uniform sweep.
  EXPECT_FALSE(g.moe.empty());
  EXPECT_LT(g.moe.tokens.size(), g.tokens_for("matmul").size());
  EXPECT_EQ(g.moe.experts.front(), 1);
  EXPECT_EQ(g.moe.skew_percent, (std::vector<int64_t>{50, 100, 200}));
}

TEST(Grid, MoeRoutingSection) {
  json j = minimal();
  EXPECT_TRUE(parse_grid(j, "g.json").moe.empty());
  j["moe"] = json::parse(R"({"tokens": [4, 64], "skew": [1.25]})");
  const Grid g = parse_grid(j, "g.json");
  EXPECT_EQ(g.moe.tokens, (std::vector<int64_t>{4, 64}));
  EXPECT_TRUE(g.moe.experts.empty());
  EXPECT_EQ(g.moe.skew_percent, (std::vector<int64_t>{125}));
  j["moe"] = json::parse(R"({"tokens": [4]})");
  EXPECT_NE(error_of(j).find("moe: give 'experts' (forced routing), 'skew' (skewed routing) or both"),
            std::string::npos);
  j["moe"] = json::parse(R"({"tokens": [4], "skew": [1.234]})");
  EXPECT_NE(error_of(j).find("moe.skew[0]: must be a number in (0, 10] in steps of 0.01 (got 1.234)"),
            std::string::npos);
  j["moe"] = json::parse(R"({"tokens": [4], "skew": [0]})");
  EXPECT_NE(error_of(j).find("moe.skew[0]"), std::string::npos);
  j["moe"] = json::parse(R"({"tokens": [4], "experts": [0]})");
  EXPECT_NE(error_of(j).find("moe.experts[0]: must be an integer in [1, "), std::string::npos);
  j["moe"] = json::parse(R"({"tokens": [4], "experts": [2], "router": "topk"})");
  EXPECT_NE(error_of(j).find("moe: unknown field 'router'"), std::string::npos);
  j["moe"] = json::parse(R"({"experts": [2]})");
  EXPECT_NE(error_of(j).find("moe: missing field 'tokens'"), std::string::npos);
}

TEST(Grid, MinimalGridAndDefaults) {
  const Grid g = parse_grid(minimal(), "g.json");
  ASSERT_EQ(g.compositions().size(), 1u);
  EXPECT_EQ(g.compositions()[0].num_requests(), 2);
  EXPECT_DOUBLE_EQ(g.measure.rel_ci, 0.01);
}

TEST(Grid, ACompositionStrideKeepsEveryKthAndTheLast) {
  json j = minimal();
  j["compositions"]["decode"] = json::parse(R"({"batch": [1, 2, 3, 4, 5, 6, 7, 8], "context": [16]})");
  j["composition_stride_by_class"] = {{"view", 3}};
  const Grid g = parse_grid(j, "g.json");
  ASSERT_EQ(g.compositions_for("matmul").size(), 8u);
  std::vector<int64_t> batches;
  for (const Composition& c : g.compositions_for("view")) batches.push_back(c.num_requests());
  EXPECT_EQ(batches, (std::vector<int64_t>{1, 4, 7, 8}));  // every third, and the largest
  j["composition_stride_by_class"] = {{"view", 0}};
  EXPECT_THROW(parse_grid(j, "g.json"), InputError);
}

TEST(Grid, BadFieldsAreNamed) {
  auto with = [](const char* path, json v) {
    json j = minimal();
    j[json::json_pointer(path)] = std::move(v);
    return j;
  };
  EXPECT_NE(error_of(with("/version", 2)).find("grid file version 2 is not supported"), std::string::npos);
  EXPECT_NE(error_of(with("/speed", 1)).find("g.json: unknown field 'speed'"), std::string::npos);
  // A key with a newline in it (found by fuzzing): the message stays one line.
  const std::string nl = error_of(with("/compositions/mixed", json::parse(R"([{"chu\nk": 1}])")));
  EXPECT_NE(nl.find("unknown field 'chu?k'"), std::string::npos) << nl;
  EXPECT_NE(error_of(with("/measure/warmup_reps", 3)).find("measure: unknown field 'warmup_reps'"), std::string::npos);
  json settle = with("/measure/settle_s", 1.0);
  settle["measure"]["capped_settle_s"] = 0.5;
  EXPECT_NE(error_of(settle).find("measure: capped_settle_s 0.5 is below settle_s 1"), std::string::npos);
  EXPECT_NE(error_of(with("/measure/settle_s", -1)).find("settle_s"), std::string::npos);
  EXPECT_NE(error_of(with("/measure/inputs", "hot")).find(R"(measure.inputs must be "warm" or "cycled", not "hot")"),
            std::string::npos);
  EXPECT_NE(error_of(with("/measure/inputs", 1)).find("measure.inputs must be"), std::string::npos);
  EXPECT_EQ(parse_grid(with("/measure/inputs", "cycled"), "g.json").measure.inputs, "cycled");
  EXPECT_DOUBLE_EQ(parse_grid(with("/measure/settle_carry_gap_s", 0.25), "g.json").measure.settle_carry_gap_s, 0.25);
  EXPECT_NE(error_of(with("/measure/settle_carry_gap_s", -1)).find("settle_carry_gap_s"), std::string::npos);
  EXPECT_NE(error_of(with("/tokens", json::array())).find("tokens: must be a non-empty list"), std::string::npos);
  EXPECT_NE(error_of(with("/tokens/0", -4)).find("tokens[0]: must be an integer in [1, "), std::string::npos);
  EXPECT_NE(error_of(with("/measure/rel_ci", 0)).find("measure.rel_ci"), std::string::npos);
  EXPECT_NE(error_of(with("/bounds", json{{"max_tokens", 1}})).find("every composition exceeds the bounds"),
            std::string::npos);
  EXPECT_NE(error_of(with("/requests/0", 99999)).find("exceeds bounds.max_tokens"), std::string::npos);
  EXPECT_NE(error_of(with("/bounds", json{{"max_tokens", int64_t{1} << 40}})).find("bounds.max_tokens: must be"),
            std::string::npos);
  json huge = minimal();
  huge["bounds"] = {{"max_tokens", 1 << 20}};
  huge["compositions"]["decode"] = {{"batch", json::array({1 << 20, 1 << 20})}, {"context", json::array({1, 2, 3})}};
  EXPECT_NE(error_of(huge).find("request slices in all"), std::string::npos);
  json no_comp = minimal();
  no_comp.erase("compositions");
  EXPECT_NE(error_of(no_comp).find("missing field 'compositions'"), std::string::npos);
}

TEST(Grid, MissingOrBrokenFile) { EXPECT_THROW(read_grid("/nonexistent/grid.json"), InputError); }

}  // namespace
}  // namespace dooly::plan
