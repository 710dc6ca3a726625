#pragma once
// The Hugging Face transformers 5.17 continuous-batching engine (docs/engine-hf.md), as a simulator engine model.
// Resolution (what the engine decides before serving; initialization.py, cache.py):
// - attention paged|sdpa or paged|eager: an attention mask is needed, so the decode fast path (block table,
//   flash_attn_with_kvcache) is off and CUDA graphs default to off (decide_use_cuda_graphs); --cuda-graphs on forces
//   them on both paths; async batching stays off (decide_use_async_batching).
// - block_size 256; num_blocks and max_batch_tokens from the memory planner (hf_memory.hpp) unless given;
//   max_requests_per_batch 1024, capped at max_batch_tokens and, without prefix sharing (any sliding layer), at
//   num_blocks (update_cb_config_after_cache_creation).
// A step (ContinuousBatchProcessor.prepare_next_batch, _generation_step, update_batch): new arrivals join the
// waiting queue; the scheduler (hf_scheduler.hpp) picks the batch with token budget max_batch_tokens and cache
// budget num_blocks × block_size; on "nothing fits" the engine evicts and retries; after a batch, starved requests
// are evicted too; under graphs the query tokens are padded to a multiple of 64 (at most max_batch_tokens) and the
// cached tokens read to a multiple of 16384 (at most the cache), and the first step at a padded shape captures a
// graph (ModelRunner.maybe_pad_inputs, compute_batch). A token comes out at the end of the step for every request
// whose prompt is done; a request finishes with its last token and frees its blocks.
#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "dooly/sim/engine.hpp"
#include "dooly/sim/hf_cache.hpp"
#include "dooly/sim/hf_memory.hpp"
#include "dooly/sim/hf_scheduler.hpp"

namespace dooly::sim {

class HfEngine final : public Engine {
 public:
  explicit HfEngine(const EngineContext& ctx);

  void check(const std::vector<RequestState>& requests) const override;
  void admit(int32_t request) override { inbox_.push_back(request); }
  const StepPlan* schedule() override;
  void complete(std::vector<int32_t>& finished) override;
  bool has_pending() const override { return !inbox_.empty() || scheduler_->has_pending(); }
  nlohmann::json resolved() const override;
  // Mask rows that are not 16-byte aligned (num_blocks x block_size + max_batch_tokens elements wide).
  std::vector<std::string> cautions() const override;
  void carry_over(const Engine& warmed) override;

  const HfCache& cache() const { return *cache_; }
  const HfScheduler& scheduler() const { return *scheduler_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }
  int64_t max_requests() const { return max_requests_; }
  bool cuda_graphs() const { return graphs_; }
  // The logical blocks HF's allocation rule gives a request served alone, at its end.
  int64_t blocks_alone(int64_t prompt_tokens, int64_t output_tokens) const;

 private:
  using GraphKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // q, kv read, max_seqlen_k full / sliding
  void shape_step();
  // _get_graph_key (varlen): padded queries and cached tokens read, max_seqlen_k per layer type padded to a power
  // of two of at least 1024 (get_model_kwargs).
  GraphKey graph_key(int64_t q_padded, int64_t kv_padded, int64_t seqlen_full, int64_t seqlen_sliding) const;

  const EngineConfig& config_;
  const ModelSpec& model_;
  const CostModel& cost_;
  std::vector<RequestState>& reqs_;
  bool graphs_ = false;
  int64_t max_batch_tokens_ = 0;
  int64_t max_requests_ = 0;
  HfCachePlan plan_;
  int64_t available_bytes_ = 0;
  std::unique_ptr<HfCache> cache_;
  std::unique_ptr<HfScheduler> scheduler_;
  std::vector<int32_t> inbox_;
  std::vector<HfScheduled> batch_;
  std::set<GraphKey> graphs_seen_;
  StepPlan step_;
};

std::unique_ptr<Engine> make_hf_engine(const EngineContext& ctx);

}  // namespace dooly::sim
