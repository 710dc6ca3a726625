#include "dooly/sim/hf_cache.hpp"

#include <algorithm>

namespace dooly::sim {

HfCache::HfCache(LayerGroups groups, int64_t num_blocks, int64_t block_size, std::optional<int64_t> sliding_window)
    : groups_(groups), num_blocks_(num_blocks), block_size_(block_size), window_(sliding_window), free_(num_blocks) {
  if (groups_.sliding > 0 && window_) max_sliding_blocks_ = (*window_ + block_size_ - 1) / block_size_;
}

std::optional<int64_t> HfCache::read_cache_limit() const {
  if (groups_.full > 0) return std::nullopt;
  return window_;
}

int64_t HfCache::blocks_needed(int64_t requested, int64_t allocated) const {
  int64_t needed = requested * groups_.full;
  if (groups_.sliding > 0) {
    const int64_t left = std::max<int64_t>(max_sliding_blocks_ - allocated, 0);
    needed += std::min(left, requested) * groups_.sliding;
  }
  return needed;
}

std::optional<int64_t> HfCache::allocate(int64_t requested, int64_t allocated) {
  const int64_t needed = blocks_needed(requested, allocated);
  if (needed > free_) return std::nullopt;
  free_ -= needed;
  if (groups_.full > 0) return requested;  // FullAttentionCacheAllocator: always the blocks requested
  return std::min(allocated + requested, max_sliding_blocks_) - std::min(allocated, max_sliding_blocks_);
}

int64_t HfCache::held(int64_t allocated) const {
  return allocated * groups_.full + std::min(allocated, max_sliding_blocks_) * groups_.sliding;
}

void HfCache::release(int64_t allocated) { free_ += held(allocated); }

}  // namespace dooly::sim
