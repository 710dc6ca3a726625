// MoE routing's scale of a grouped GEMM (moe_routing.hpp): the shape read from a signature, the experts each routing
// reads, the forced points' ratio interpolated in log experts and log tokens, the random routing of the engine's
// padded replays, and the one-line refusals.
#include "dooly/predict/moe_routing.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "dooly/common/error.hpp"

namespace dooly::predict {
namespace {

// OLMoE's grouped GEMM: 8 routed rows a token over 64 experts.
nlohmann::json olmoe_gemm(const char* rows = "MIX:8*NUM_TOKS", const char* experts = "64") {
  return {{"inputs",
           {{{"dtype", "bfloat16"}, {"shape", {rows, "2048"}}},
            {{"dtype", "bfloat16"}, {"shape", {experts, "2048", "2048"}}},
            {{"dtype", "int32"}, {"shape", {experts}}}}},
          {"kind", "op"},
          {"name", "_grouped_mm"}};
}

RoutedPoint forced(double tokens, int64_t experts, double time_ratio, double energy_ratio) {
  return {tokens, experts, 0, time_ratio * 1e-3 * tokens, energy_ratio * 0.3 * tokens};
}

// Uniform cost: 1 ms and 0.3 J per token, so a point's ratio is what forced() was given.
const RoutingScale::Uniform kSeconds = [](double t) { return 1e-3 * t; };
const RoutingScale::Uniform kJoules = [](double t) { return 0.3 * t; };

TEST(MoeRouting, TheGemmsShapeComesFromItsSignature) {
  const auto s = grouped_gemm_shape(olmoe_gemm());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->experts, 64);
  EXPECT_DOUBLE_EQ(s->rows(3), 24);
  EXPECT_FALSE(grouped_gemm_shape(olmoe_gemm("MIX:NUM_TOKS*NUM_TOKS")));  // not linear in the tokens
  EXPECT_FALSE(grouped_gemm_shape(olmoe_gemm("MIX:8*NUM_TOKS", "E")));
  EXPECT_FALSE(grouped_gemm_shape(olmoe_gemm("MIX:8*NUM_TOKS", "1")));
  EXPECT_FALSE(grouped_gemm_shape(nlohmann::json::parse(R"({"inputs": [{"shape": ["NUM_TOKS"]}]})")));
  EXPECT_FALSE(grouped_gemm_shape(nlohmann::json()));
}

TEST(MoeRouting, RandomRoutingReadsTheExpertsRealTokensAndThePaddingReach) {
  const GroupedGemmShape shape = *grouped_gemm_shape(olmoe_gemm());
  const RoutingScale r =
      RoutingScale::build(shape, *parse_moe_routing("random"), {forced(64, 8, 0.3, 0.4)}, kSeconds, kJoules, "g");
  EXPECT_TRUE(r.reads_real_tokens());
  EXPECT_DOUBLE_EQ(r.experts_read(1, 1), 8);                                   // one token: its top 8
  EXPECT_NEAR(r.experts_read(8, 8), 64 * (1 - std::pow(56.0 / 64, 8)), 1e-9);  // 42.0, where uniform spreads 64
  EXPECT_NEAR(r.experts_read(64, 1), 8 + 8 * (1 - 8.0 / 64), 1e-9);            // a replay padded for one request: 15
  EXPECT_NEAR(r.experts_read(64, 4), 64 * (1 - std::pow(56.0 / 64, 4)) * (1 - 8.0 / 64) + 8, 1e-9);
  EXPECT_LE(r.experts_read(4096, 4096), 64);
}

TEST(MoeRouting, TheForcedPointsAreInterpolatedInLogExpertsThenLogTokens) {
  const GroupedGemmShape shape = *grouped_gemm_shape(olmoe_gemm());
  // At 64 tokens (512 rows): onto 8, 16, 32 experts; at 256 tokens: onto 8 only (its slice ends at 64 experts, 1).
  const std::vector<RoutedPoint> points{forced(64, 8, 0.3, 0.4),
                                        forced(64, 32, 0.7, 0.8),
                                        forced(64, 16, 0.45, 0.6),
                                        forced(256, 8, 0.6, 0.6),
                                        {64, 64, 100, 1e-3 * 64 * 1.5, std::nullopt}};
  const RoutingScale r = RoutingScale::build(shape, *parse_moe_routing("random"), points, kSeconds, kJoules, "g");
  // A replay of 64 tokens padded for one request reads 15 experts: between 8 and 16 in log experts.
  const double f = std::log(15.0 / 8) / std::log(2.0);
  EXPECT_NEAR(r.ratio(64, 1, false), 0.3 + f * 0.15, 1e-12);
  EXPECT_NEAR(r.ratio(64, 1, true), 0.4 + f * 0.2, 1e-12);
  // 64 real tokens reach nearly every expert: close to the uniform spread's 1 (the slice's closing point).
  EXPECT_GT(r.ratio(64, 64, false), 0.99);
  EXPECT_DOUBLE_EQ(r.ratio(1, 1, false), 1.0);  // one token's 8 rows: routing cannot differ from uniform
  // Between the token counts measured, in log tokens; beyond them, held.
  const double read = r.experts_read(128, 1);  // 15 experts again
  const double at64 = 0.3 + std::log(read / 8) / std::log(2.0) * 0.15;
  const double at256 = 0.6 + std::log(read / 8) / std::log(8.0) * 0.4;
  EXPECT_NEAR(r.ratio(128, 1, false), at64 + 0.5 * (at256 - at64), 1e-12);
  EXPECT_NEAR(r.ratio(4096, 1, false), 0.6 + std::log(read / 8) / std::log(8.0) * 0.4, 1e-12);
  // Forced onto 16: read 16 wherever the rows reach more, the same slices.
  const RoutingScale k16 = RoutingScale::build(shape, *parse_moe_routing("experts:16"), points, kSeconds, kJoules, "g");
  EXPECT_FALSE(k16.reads_real_tokens());
  EXPECT_NEAR(k16.ratio(64, 0, false), 0.45, 1e-12);
  EXPECT_DOUBLE_EQ(k16.ratio(2, 0, false), 1.0);  // 16 rows: no more experts than forced
  // Skewed: its own points; the energy ratio falls back to the time's where the point has none.
  const RoutingScale skew = RoutingScale::build(shape, *parse_moe_routing("skew:1"), points, kSeconds, kJoules, "g");
  EXPECT_NEAR(skew.ratio(512, 512, false), 1.5, 1e-12);
  EXPECT_NEAR(skew.ratio(512, 512, true), 1.5, 1e-12);
}

TEST(MoeRouting, BelowTheSmallestTokenCountTheRatioIsRelativeToTheStepsOwnUniformSpread) {
  const GroupedGemmShape shape = *grouped_gemm_shape(olmoe_gemm());
  // Measured at 16 tokens (128 rows; a uniform spread reaches all 64 experts, the slice's closing point).
  const std::vector<RoutedPoint> points{forced(16, 8, 0.3, 0.3), forced(16, 16, 0.45, 0.45), forced(16, 32, 0.7, 0.7)};
  const RoutingScale r = RoutingScale::build(shape, *parse_moe_routing("random"), points, kSeconds, kJoules, "g");
  // 4 tokens (32 rows): uniform reaches 32 experts, random ~26.7; the slice between 16 and 32 experts, over its
  // value at 32 (0.7), not over its closing 1 at 64 experts.
  const double read = r.experts_read(4, 4);
  EXPECT_NEAR(read, 64 * (1 - std::pow(56.0 / 64, 4)), 1e-9);
  const double at_read = 0.45 + std::log(read / 16) / std::log(2.0) * 0.25;
  EXPECT_NEAR(r.ratio(4, 4, false), at_read / 0.7, 1e-12);
  // Forced onto 16 at 4 tokens: half the 32 experts its rows would spread over, relative to the slice at 32.
  const RoutingScale k16 = RoutingScale::build(shape, *parse_moe_routing("experts:16"), points, kSeconds, kJoules, "g");
  EXPECT_NEAR(k16.ratio(4, 0, false), 0.45 / 0.7, 1e-12);
  EXPECT_NEAR(k16.ratio(16, 0, false), 0.45, 1e-12);  // at the measured count: the point itself
}

TEST(MoeRouting, ARoutingWithoutPointsIsOneLineNamingWhatWasMeasured) {
  const GroupedGemmShape shape = *grouped_gemm_shape(olmoe_gemm());
  auto message = [&](const char* want, const std::vector<RoutedPoint>& points) {
    try {
      RoutingScale::build(shape, *parse_moe_routing(want), points, kSeconds, kJoules, "_grouped_mm of m (signature 7)");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      message("random", {})
          .rfind("_grouped_mm of m (signature 7) was not measured under MoE routing random (measured: uniform only; "
                 "random routing reads the forced points) — measure it",
                 0),
      0u);
  EXPECT_NE(message("experts:4", {forced(64, 8, 0.3, 0.3)}).find("under MoE routing experts:4 (measured: experts:8)"),
            std::string::npos);
  EXPECT_NE(message("skew:2", {forced(64, 8, 0.3, 0.3)}).find("under MoE routing skew:2 (measured: experts:8)"),
            std::string::npos);
  EXPECT_EQ(message("experts:8", {forced(64, 8, 0.3, 0.3)}), "no error");
}

TEST(MoeRouting, TextParsesAndFormats) {
  EXPECT_FALSE(parse_moe_routing("uniform"));
  EXPECT_EQ(parse_moe_routing("random")->mode, MoeRouting::Mode::random);
  EXPECT_FALSE(parse_moe_routing("random")->if_measured);
  EXPECT_EQ(parse_moe_routing("auto")->mode, MoeRouting::Mode::random);  // random where measured, never refused
  EXPECT_TRUE(parse_moe_routing("auto")->if_measured);
  EXPECT_EQ(parse_moe_routing("experts:8")->experts, 8);
  EXPECT_EQ(parse_moe_routing("skew:1.25")->skew_percent, 125);
  for (const char* text : {"auto", "random", "experts:8", "skew:1.25", "skew:2"})
    EXPECT_EQ(format_moe_routing(parse_moe_routing(text)), text);
  EXPECT_EQ(format_moe_routing(std::nullopt), "uniform");
  for (const char* bad :
       {"", "forced", "experts:0", "experts:2x", "skew:0", "skew:11", "skew:1.234", "skew:", "zipf:1", "Random", "Auto"})
    EXPECT_THROW(parse_moe_routing(bad), InputError) << bad;
}

}  // namespace
}  // namespace dooly::predict
