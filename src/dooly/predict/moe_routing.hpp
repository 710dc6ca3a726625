#pragma once
// How a MoE's grouped GEMMs are priced under a routing other than the uniform one their predictors were fitted on
// (docs/predict.md, "MoE routing"). The profile measures each grouped GEMM at routing points besides its uniform
// token grid (docs/profile.md, "MoE routing"): the rows forced onto k experts, and skewed. A RoutingScale holds those
// points as ratios over the uniform prediction and answers, for a step, by how much to scale the GEMM:
//
//   experts:K  the rows forced onto K experts
//   skew:S     skewed over every expert, expert i's share ~ 1/(i+1)^S
//   auto       random where the store measured the grouped GEMM's routing points, uniform elsewhere (a dense
//              model, a grouped GEMM measured inside a module or without routing points): the simulator's and
//              `dooly predict step`'s default, since random is what the engine's router does
//   random     what the engine runs: each real token's top-k experts drawn at random (a router's choices, balanced
//              on average), E (1 - (1 - k/E)^T) experts reached by T tokens; under CUDA graphs the padding tokens are
//              all alike (the engine zeroes them) and reach the same k experts, so a replay padded to 64 tokens for
//              one request reads ~16 experts' weights, not all of them
//
// The ratio at a step: 1 where the routing reaches no fewer experts than a uniform spread of the rows would; else the
// forced points' ratio at that many experts (interpolated in log experts between the measured k, up to the uniform
// spread's count, where it is 1), relative to the same slice's ratio at the step's own uniform spread (so it is 1
// there, also for steps of fewer tokens than the smallest measured, whose uniform spread is narrower), interpolated
// in log tokens between the token counts measured and held beyond them.
// Skew: its points' ratio in log tokens. Energy takes its own ratios (the time's where a point has no energy).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/predict/dataset.hpp"

namespace dooly::predict {

struct MoeRouting {
  enum class Mode : uint8_t { forced, skewed, random };
  Mode mode = Mode::forced;
  int64_t experts = 0;       // forced: the rows go to this many experts
  int64_t skew_percent = 0;  // skewed: the exponent x 100
  bool if_measured = false;  // "auto": applied where routing points exist, uniform elsewhere, never refused
};
// "uniform" -> nullopt, "experts:K" (K >= 1), "skew:S" (0 < S <= 10, steps of 0.01), "random", "auto" (random,
// if_measured); InputError otherwise.
std::optional<MoeRouting> parse_moe_routing(const std::string& text);
std::string format_moe_routing(const std::optional<MoeRouting>& r);

// A grouped GEMM's routed rows (rows_per_token x tokens + rows_offset) and experts, from its signature's canonical
// JSON (`_grouped_mm(rows, weights, offsets)`: input 0's first dim, e.g. "MIX:8*NUM_TOKS", and input 2's one dim);
// nullopt when they cannot be read or the rows are not linear in the tokens.
struct GroupedGemmShape {
  double rows_per_token = 0, rows_offset = 0;
  int64_t experts = 0;
  double rows(double tokens) const noexcept { return rows_per_token * tokens + rows_offset; }
};
std::optional<GroupedGemmShape> grouped_gemm_shape(const nlohmann::json& canonical);

class RoutingScale {
 public:
  // The uniform predictions the points are divided by (seconds and joules per call at a token count; energy may
  // return 0 where the signature has no energy predictor).
  using Uniform = std::function<double(double tokens)>;
  // Throws InputError naming the signature and the routings measured when the points hold none for `want`.
  static RoutingScale build(const GroupedGemmShape& shape, const MoeRouting& want,
                            const std::vector<RoutedPoint>& points, const Uniform& uniform_s, const Uniform& uniform_j,
                            const std::string& what);

  // The GEMM at `tokens` (padding included) of which `real_tokens` were routed by the router (the rest: the engine's
  // identical padding). No allocation.
  double ratio(double tokens, double real_tokens, bool of_energy) const noexcept;
  // Experts whose weights the step reads (forced and random), the uniform spread's where it reads fewer.
  double experts_read(double tokens, double real_tokens) const noexcept;
  // Whether the ratio depends on the real tokens apart from the padded ones (random routing).
  bool reads_real_tokens() const noexcept { return want_.mode == MoeRouting::Mode::random; }

 private:
  struct Slice {  // the forced points at one token count, ascending in experts, closed by (the uniform spread, 1)
    double log_tokens = 0;
    std::vector<double> log_experts, latency, energy;
  };
  double forced_ratio(double tokens, double experts, double uniform, bool of_energy) const noexcept;

  GroupedGemmShape shape_;
  MoeRouting want_;
  std::vector<Slice> slices_;                                         // forced and random
  std::vector<double> skew_log_tokens_, skew_latency_, skew_energy_;  // skewed
};

}  // namespace dooly::predict
