#pragma once
// HF continuous batching's cache sizing, as transformers 5.17 resolves it (generation/continuous_batching/cache.py,
// PagedAttentionMemoryHandler): the memory it may use is (total − max(allocated, reserved)) × max_memory_percent
// (get_available_memory; the percent is 0.9 without logits processors, initialization.py
// resolve_max_memory_percent), and the footprint is a polynomial in M = max_batch_tokens and N = cache pages
// (num_blocks × block_size), evaluated at two activation peaks (the LM head, the attention):
//   memory(M, N) = coeff_m·M + coeff_n·N + coeff_mn·M·N + coeff_mm·M²          (_equation_coefficients)
// Neither given: M = min(8192, the M of a cache where one batch fills 10 %), at least 256, then N for that M
// (infer_max_batch_tokens_and_num_blocks). One given: the other solved. Both: checked (_check_footprint); a
// footprint over the memory is the engine's MemoryError, here one InputError.
#include <cstdint>
#include <optional>

#include "dooly/sim/model_spec.hpp"

namespace dooly::sim {

// The attention layer groups of the paged cache (cache.py group_layers_by_attn_type): every group holds the same
// number of layers, the gcd of the per-type counts.
struct LayerGroups {
  int64_t group_size = 0;  // layers per group
  int64_t full = 0;        // full-attention groups
  int64_t sliding = 0;     // sliding-window groups
  int64_t count() const { return full + sliding; }
};
LayerGroups layer_groups(const ModelSpec& m);

struct HfMemoryInput {
  int64_t available_bytes = 0;  // what the cache may use (hf_available_bytes)
  int dtype_bytes = 2;          // activations and cache (the engine uses the model's dtype for both)
  int64_t block_size = 256;
  std::optional<int64_t> max_batch_tokens;
  std::optional<int64_t> num_blocks;
  int attention_masks = 1;             // 0 for flash attention, 2 with sliding layers (mask per layer type), else 1
  int64_t max_blocks_per_request = 0;  // the decode fast path's block table (0: off, as for sdpa and eager)
};

struct HfCachePlan {
  int64_t max_batch_tokens = 0;
  int64_t num_blocks = 0;
  int64_t footprint_bytes = 0;
};

// int((total − allocated) × percent), allocated = what the process holds before the cache (weights and the
// allocator's reserve).
int64_t hf_available_bytes(double total_bytes, double allocated_bytes, double max_memory_percent);

// Throws InputError when the engine would refuse the configuration (footprint over the memory, or no room).
HfCachePlan plan_hf_cache(const ModelSpec& m, const HfMemoryInput& in);

}  // namespace dooly::sim
