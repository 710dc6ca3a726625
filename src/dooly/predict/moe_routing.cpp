#include "dooly/predict/moe_routing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dooly/common/error.hpp"
#include "dooly/plan/composition.hpp"
#include "dooly/plan/value_expr.hpp"

namespace dooly::predict {
namespace {

// y at x on the polyline (xs ascending), held at the ends.
double along(const std::vector<double>& xs, const std::vector<double>& ys, double x) noexcept {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto i = static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  const double f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys[i - 1] + f * (ys[i] - ys[i - 1]);
}

// The first dim of input `k` of a canonical op: its value form without the kind ("MIX:8*NUM_TOKS" -> "8*NUM_TOKS").
std::string first_dim(const nlohmann::json& c, size_t k) {
  if (!c.is_object() || !c.contains("inputs") || !c["inputs"].is_array() || c["inputs"].size() <= k) return "";
  const nlohmann::json& in = c["inputs"][k];
  if (!in.is_object() || !in.contains("shape") || !in["shape"].is_array() || in["shape"].empty() ||
      !in["shape"][0].is_string())
    return "";
  const std::string text = in["shape"][0].get<std::string>();
  const size_t colon = text.find(':');
  return colon == std::string::npos ? text : text.substr(colon + 1);
}

}  // namespace

std::optional<MoeRouting> parse_moe_routing(const std::string& text) {
  const std::string fix =
      "give auto (random where measured), uniform, random (as the engine routes), experts:K (the rows forced onto "
      "K >= 1 experts) or skew:S (0 < S <= 10, in steps of 0.01)";
  if (text == "uniform") return std::nullopt;
  if (text == "random") return MoeRouting{MoeRouting::Mode::random, 0, 0};
  if (text == "auto") return MoeRouting{MoeRouting::Mode::random, 0, 0, true};
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon), value = colon == std::string::npos ? "" : text.substr(colon + 1);
  try {
    size_t used = 0;
    if (kind == "experts") {
      const int64_t k = std::stoll(value, &used);
      if (used == value.size() && k >= 1) return MoeRouting{MoeRouting::Mode::forced, k, 0};
    } else if (kind == "skew") {
      const double v = std::stod(value, &used);
      const auto pct = static_cast<int64_t>(std::llround(v * 100));
      if (used == value.size() && v > 0 && v <= 10 && std::abs(v * 100 - static_cast<double>(pct)) < 1e-6)
        return MoeRouting{MoeRouting::Mode::skewed, 0, pct};
    }
  } catch (const std::exception&) {  // stoll / stod: not a number, out of range
  }
  DOOLY_THROW(InputError, fix, "unknown MoE routing '{}'", text);
}

std::string format_moe_routing(const std::optional<MoeRouting>& r) {
  if (!r) return "uniform";
  switch (r->mode) {
    case MoeRouting::Mode::random:
      return r->if_measured ? "auto" : "random";
    case MoeRouting::Mode::skewed:
      return fmt::format("skew:{:g}", static_cast<double>(r->skew_percent) / 100);
    case MoeRouting::Mode::forced:
      break;
  }
  return fmt::format("experts:{}", r->experts);
}

std::optional<GroupedGemmShape> grouped_gemm_shape(const nlohmann::json& canonical) {
  const std::string rows = first_dim(canonical, 0), experts = first_dim(canonical, 2);
  auto rows_at = [&](int64_t tokens) {
    const plan::Composition at{{{tokens, 0}}};
    return static_cast<double>(plan::evaluate(rows, [&](const std::string& n) { return at.value_of(n); }));
  };
  GroupedGemmShape s;
  try {
    size_t used = 0;
    s.experts = std::stoll(experts, &used);
    if (used != experts.size()) return std::nullopt;
    s.rows_per_token = rows_at(2) - rows_at(1);
    s.rows_offset = rows_at(1) - s.rows_per_token;
  } catch (const std::exception&) {  // a form that does not evaluate (InputError), or experts not a number
    return std::nullopt;
  }
  if (s.experts < 2 || s.rows_per_token <= 0 || rows_at(1024) != s.rows(1024)) return std::nullopt;
  return s;
}

namespace {

std::string list_routings(const std::set<std::pair<bool, int64_t>>& measured) {
  std::vector<std::string> names;
  names.reserve(measured.size());
  for (const auto& [skew, value] : measured)
    names.push_back(format_moe_routing(skew ? MoeRouting{MoeRouting::Mode::skewed, 0, value}
                                            : MoeRouting{MoeRouting::Mode::forced, value, 0}));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

RoutingScale RoutingScale::build(const GroupedGemmShape& shape, const MoeRouting& want,
                                 const std::vector<RoutedPoint>& points, const Uniform& uniform_s,
                                 const Uniform& uniform_j, const std::string& what) {
  RoutingScale r;
  r.shape_ = shape;
  r.want_ = want;
  std::set<std::pair<bool, int64_t>> measured;  // (skewed, its experts or skew percent): listed in that order
  std::map<double, Slice> slices;               // by tokens
  std::map<double, std::array<double, 2>> skewed;
  for (const RoutedPoint& p : points) {
    const bool skew = p.skew_percent > 0;
    measured.emplace(skew, skew ? p.skew_percent : p.experts);
    const double base_s = uniform_s(p.tokens), base_j = uniform_j(p.tokens);
    if (!(base_s > 0) || !(p.tokens >= 1) || !(p.experts >= 1)) continue;
    const double lat = p.latency_s / base_s;
    const double en = p.energy_j && base_j > 0 ? *p.energy_j / base_j : lat;
    if (skew && want.mode == MoeRouting::Mode::skewed && p.skew_percent == want.skew_percent) {
      skewed[p.tokens] = {lat, en};
    } else if (!skew && want.mode != MoeRouting::Mode::skewed &&
               static_cast<double>(p.experts) < shape.rows(p.tokens) && p.experts < shape.experts) {
      Slice& s = slices[p.tokens];
      s.log_tokens = std::log(p.tokens);
      s.log_experts.push_back(std::log(static_cast<double>(p.experts)));
      s.latency.push_back(lat);
      s.energy.push_back(en);
    }
  }
  for (const auto& [tokens, s] : slices) {  // ascending in experts, then the uniform spread's count at ratio 1
    std::vector<std::array<double, 3>> by_experts;
    for (size_t i = 0; i < s.log_experts.size(); ++i)
      by_experts.push_back({s.log_experts[i], s.latency[i], s.energy[i]});
    std::sort(by_experts.begin(), by_experts.end());
    Slice sorted{s.log_tokens, {}, {}, {}};
    for (const auto& [log_experts, latency, energy] : by_experts) {
      sorted.log_experts.push_back(log_experts);
      sorted.latency.push_back(latency);
      sorted.energy.push_back(energy);
    }
    sorted.log_experts.push_back(std::log(std::min(shape.rows(tokens), static_cast<double>(shape.experts))));
    sorted.latency.push_back(1.0);
    sorted.energy.push_back(1.0);
    r.slices_.push_back(std::move(sorted));
  }
  for (const auto& [tokens, ratios] : skewed) {
    r.skew_log_tokens_.push_back(std::log(tokens));
    r.skew_latency_.push_back(ratios[0]);
    r.skew_energy_.push_back(ratios[1]);
  }
  const bool forced_ok =
      !r.slices_.empty() && (want.mode != MoeRouting::Mode::forced ||
                             measured.count({false, want.experts}) > 0);  // a forced K is measured, not guessed
  if (want.mode == MoeRouting::Mode::skewed ? r.skew_log_tokens_.empty() : !forced_ok)
    DOOLY_THROW(InputError,
                "measure it (`dooly profile` with a grid whose `moe` section lists it, docs/profile.md \"MoE "
                "routing\"), or simulate with uniform routing",
                "{} was not measured under MoE routing {} (measured: {}{})", what, format_moe_routing(want),
                measured.empty() ? std::string("uniform only") : list_routings(measured),
                want.mode == MoeRouting::Mode::random ? "; random routing reads the forced points" : "");
  return r;
}

double RoutingScale::experts_read(double tokens, double real_tokens) const noexcept {
  const auto e = static_cast<double>(shape_.experts);
  const double uniform = std::min(shape_.rows(tokens), e);
  if (want_.mode == MoeRouting::Mode::forced) return std::min(static_cast<double>(want_.experts), uniform);
  if (want_.mode == MoeRouting::Mode::skewed) return uniform;
  // Random: each real token's k experts drawn from E; the padding's k experts (one token's) besides, if any.
  const double k = std::min(shape_.rows_per_token, e);
  const double real = std::clamp(real_tokens, 0.0, tokens);
  double reached = e * (1 - std::pow(1 - k / e, real));
  if (real < tokens) reached += k * (1 - reached / e);
  return std::min(std::max(reached, std::min(k, uniform)), uniform);
}

double RoutingScale::forced_ratio(double tokens, double experts, double uniform, bool of_energy) const noexcept {
  const double x = std::log(std::max(experts, 1.0));
  const double u = std::log(std::max(uniform, 1.0));
  const double t = std::log(std::max(tokens, 1.0));
  // A slice's ratio relative to its own value at the step's uniform spread: 1 where the step reads as many experts
  // as a uniform spread would, also below the smallest token count measured, where that spread is narrower than
  // the slice's (4 tokens reach 32 of OLMoE's 64 experts; a slice measured at 16 tokens closes at 64).
  auto at = [&](const Slice& s) {
    const std::vector<double>& ys = of_energy ? s.energy : s.latency;
    const double base = along(s.log_experts, ys, u);
    return base > 0 ? along(s.log_experts, ys, x) / base : along(s.log_experts, ys, x);
  };
  if (t <= slices_.front().log_tokens) return at(slices_.front());
  if (t >= slices_.back().log_tokens) return at(slices_.back());
  size_t i = 1;
  while (slices_[i].log_tokens < t) ++i;
  const double f = (t - slices_[i - 1].log_tokens) / (slices_[i].log_tokens - slices_[i - 1].log_tokens);
  return at(slices_[i - 1]) + f * (at(slices_[i]) - at(slices_[i - 1]));
}

double RoutingScale::ratio(double tokens, double real_tokens, bool of_energy) const noexcept {
  if (want_.mode == MoeRouting::Mode::skewed) {
    if (std::min(shape_.rows(tokens), static_cast<double>(shape_.experts)) < 2) return 1.0;
    return along(skew_log_tokens_, of_energy ? skew_energy_ : skew_latency_, std::log(std::max(tokens, 1.0)));
  }
  const double uniform = std::min(shape_.rows(tokens), static_cast<double>(shape_.experts));
  const double read = experts_read(tokens, real_tokens);
  if (read >= uniform) return 1.0;
  return forced_ratio(tokens, read, uniform, of_energy);
}

}  // namespace dooly::predict
