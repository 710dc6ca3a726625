#pragma once
// HF's paged KV cache as its scheduler sees it: a pool of blocks shared by the attention layer groups
// (transformers 5.17 cache.py PagedAttentionCache, cache_manager.py). A request holds `allocated` logical blocks
// (state.allocated_blocks); each full-attention group holds that many physical blocks for it, each sliding-window
// group at most ceil(window / block_size) (SlidingAttentionCacheAllocator._max_blocks_per_request).
// Prompts are taken as distinct, so prefix sharing finds no match and changes no count.
#include <cstdint>
#include <optional>

#include "dooly/sim/hf_memory.hpp"

namespace dooly::sim {

class HfCache {
 public:
  HfCache(LayerGroups groups, int64_t num_blocks, int64_t block_size, std::optional<int64_t> sliding_window);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t num_pages() const { return num_blocks_ * block_size_; }
  int64_t free_blocks() const { return free_; }
  const LayerGroups& groups() const { return groups_; }
  // The window, when the model has no full-attention group (Scheduler.read_cache_limit).
  std::optional<int64_t> read_cache_limit() const;

  // Physical blocks to give `requested` more logical blocks to a request holding `allocated` (blocks_needed).
  int64_t blocks_needed(int64_t requested, int64_t allocated) const;
  // allocate_blocks: the logical blocks added (the most any group added), or nullopt when the pool is short.
  std::optional<int64_t> allocate(int64_t requested, int64_t allocated);
  // Physical blocks a request holding `allocated` logical blocks has (blocks_in_use).
  int64_t held(int64_t allocated) const;
  void release(int64_t allocated);  // free_blocks

 private:
  LayerGroups groups_;
  int64_t num_blocks_;
  int64_t block_size_;
  int64_t max_sliding_blocks_ = 0;
  std::optional<int64_t> window_;
  int64_t free_;
};

}  // namespace dooly::sim
