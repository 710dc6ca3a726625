#include "dooly/sim/hf_memory.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "dooly/common/error.hpp"

namespace dooly::sim {
namespace {

constexpr int64_t kMinMaxBatchTokens = 256;       // PagedAttentionMemoryHandler._min_max_batch_tokens
constexpr int64_t kDefaultMaxBatchTokens = 8192;  // ._default_max_batch_tokens
constexpr double kCacheFillPerBatch = 0.1;        // infer_max_batch_tokens_and_num_blocks
constexpr const char* kFix =
    "give fewer --num-blocks or --max-batch-tokens, or more --gpu-memory-gib (the engine's own check: "
    "PagedAttentionMemoryHandler._check_footprint)";

struct Coefficients {
  double m = 0, n = 0, mn = 0, mm = 0;
};

// _equation_coefficients for each activation peak (activation_peak: the LM head, the attention).
std::vector<Coefficients> coefficients(const ModelSpec& model, const HfMemoryInput& in) {
  const LayerGroups g = layer_groups(model);
  const double a = in.dtype_bytes, c = in.dtype_bytes, i = 4;  // int32 indices
  const double page = static_cast<double>(model.head_dim * model.kv_heads);
  const double groups = static_cast<double>(g.count());
  const double h = static_cast<double>(model.hidden_size);
  const double q = static_cast<double>(model.heads * model.head_dim);
  const std::pair<double, double> peaks[] = {
      {h * a + static_cast<double>(model.vocab_size) * 4, 0},  // lm_head: hidden states and fp32 logits
      {a * (h + q + 2 * page), 2 * page * a},                  // attention: q, new K/V, and the cache read back
  };
  std::vector<Coefficients> out;
  for (const auto& [delta_m, delta_n] : peaks) {
    Coefficients k;
    k.n = delta_n + 2 * static_cast<double>(g.group_size) * page * c + groups * 8;
    k.m =
        delta_m + 7 * i + 1 * i + groups * static_cast<double>(in.max_blocks_per_request) * i + groups * 8 + groups * 8;
    k.mn = in.attention_masks * a;
    k.mm = in.attention_masks * a;
    out.push_back(k);
  }
  return out;
}

// The largest positive root, rounded down (_solve_quadratic); linear when a == 0.
int64_t solve_quadratic(double a, double b, double c) {
  if (a == 0) return static_cast<int64_t>(-c / b);
  const double discriminant = b * b - 4 * a * c;
  const double root = discriminant < 0 ? -1 : (-b + std::sqrt(discriminant)) / (2 * a);
  if (root < 0)
    DOOLY_THROW(InputError, kFix, "the HF engine finds no cache size that fits: {} bytes are not enough",
                static_cast<int64_t>(-c));
  return static_cast<int64_t>(std::floor(root));
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

int64_t footprint(const std::vector<Coefficients>& ks, int64_t max_batch_tokens, int64_t pages) {
  double worst = 0;
  const auto m = static_cast<double>(max_batch_tokens), n = static_cast<double>(pages);
  for (const Coefficients& k : ks) worst = std::max(worst, k.n * n + k.m * m + k.mn * n * m + k.mm * m * m);
  return static_cast<int64_t>(worst);
}

}  // namespace

LayerGroups layer_groups(const ModelSpec& m) {
  LayerGroups g;
  g.group_size = std::gcd(m.full_layers, m.sliding_layers);  // gcd(x, 0) = x
  g.full = g.group_size ? m.full_layers / g.group_size : 0;
  g.sliding = g.group_size ? m.sliding_layers / g.group_size : 0;
  return g;
}

int64_t hf_available_bytes(double total_bytes, double allocated_bytes, double max_memory_percent) {
  return static_cast<int64_t>((total_bytes - allocated_bytes) * max_memory_percent);
}

HfCachePlan plan_hf_cache(const ModelSpec& model, const HfMemoryInput& in) {
  const std::vector<Coefficients> ks = coefficients(model, in);
  const auto avail = static_cast<double>(in.available_bytes);
  std::optional<int64_t> mbt = in.max_batch_tokens, blocks = in.num_blocks;
  if (!mbt && !blocks) {
    // Each batch fills 10 % of the cache at most: M = 0.1 N, solved per peak, the smallest kept.
    int64_t upper = INT64_MAX;
    const double m = kCacheFillPerBatch;
    for (const Coefficients& k : ks)
      upper = std::min(upper,
                       static_cast<int64_t>(
                           static_cast<double>(solve_quadratic(k.mn * m + k.mm * m * m, k.n + k.m * m, -avail)) * m));
    mbt = std::max(std::min(kDefaultMaxBatchTokens, upper), kMinMaxBatchTokens);
  }
  if (!blocks) {
    int64_t n = INT64_MAX;
    const auto m = static_cast<double>(*mbt);
    for (const Coefficients& k : ks) {
      const auto pages = static_cast<int64_t>(std::floor((avail - k.m * m - k.mm * m * m) / (k.n + k.mn * m)));
      n = std::min(n, floor_div(pages, in.block_size));
    }
    blocks = n;
  } else if (!mbt) {
    const auto pages = static_cast<double>(*blocks * in.block_size);
    int64_t best = INT64_MAX;
    for (const Coefficients& k : ks)
      best = std::min(best, solve_quadratic(k.mm, k.m + k.mn * pages, k.n * pages - avail));
    mbt = best;
  }
  HfCachePlan plan;
  plan.max_batch_tokens = *mbt;
  plan.num_blocks = *blocks;
  if (plan.max_batch_tokens <= 0 || plan.num_blocks <= 0)
    DOOLY_THROW(InputError, kFix,
                "the HF engine would refuse max_batch_tokens = {} and num_blocks = {} ({} bytes for the cache)",
                plan.max_batch_tokens, plan.num_blocks, in.available_bytes);
  plan.footprint_bytes = footprint(ks, plan.max_batch_tokens, plan.num_blocks * in.block_size);
  if (plan.footprint_bytes > in.available_bytes)
    DOOLY_THROW(
        InputError, kFix,
        "the HF engine would refuse max_batch_tokens = {} with num_blocks = {}: they need {:.2f} GiB, {:.2f} GiB "
        "are available",
        plan.max_batch_tokens, plan.num_blocks, static_cast<double>(plan.footprint_bytes) / (1 << 30),
        avail / (1 << 30));
  return plan;
}

}  // namespace dooly::sim
