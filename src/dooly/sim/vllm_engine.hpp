#pragma once
// vLLM v1's scheduling policy as a simulator engine model. NOT VALIDATED against a live vLLM: vLLM cannot run on the
// machines of this project (REFERENCE §7); the rules follow vLLM v1's Scheduler.schedule (vllm/v1/core/sched/
// scheduler.py) and KVCacheManager.allocate_slots as of vLLM 0.8–0.11, written from their documented behaviour:
// - Running requests first, in the order they were admitted: each gets min(its tokens left, the token budget)
//   (chunked prefill: a long prompt takes several steps). When its blocks cannot be allocated, the last running
//   request is preempted (recompute: its blocks are freed, it goes to the front of the waiting queue, and computes
//   its prompt and outputs again when readmitted) until the allocation fits or the request itself was preempted.
// - Then, unless a request was preempted this step, waiting requests in order while the token budget lasts and
//   fewer than max_num_seqs run; the first whose blocks cannot be allocated stops admission (no skipping ahead).
//   Without chunked prefill, a prompt larger than the budget left waits.
// - Blocks: ceil((computed + new tokens) / block_size) per request, block_size 16, all layers as full attention (the
//   hybrid allocator's sliding-window savings are not modelled), one block of the pool reserved (the null block).
// - Cache size: (total memory × gpu_memory_utilization − weights − activation peak − reserved) / bytes per block,
//   the activation peak estimated from max_num_batched_tokens (vLLM profiles it with a dummy forward).
// - Defaults: max_num_batched_tokens 8192, max_num_seqs 1024 (the API server's on GPUs of 70 GiB and more),
//   CUDA graphs on: a batch of at most 512 tokens runs a graph captured at start-up, padded to the next capture
//   size (1, 2, 4, 8, ..., 248 by 8, 256, ..., 512 by 16); larger batches run eagerly.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "dooly/sim/engine.hpp"

namespace dooly::sim {

class VllmEngine final : public Engine {
 public:
  explicit VllmEngine(const EngineContext& ctx);

  void check(const std::vector<RequestState>& requests) const override;
  void admit(int32_t request) override;
  const StepPlan* schedule() override;
  void complete(std::vector<int32_t>& finished) override;
  bool has_pending() const override { return !waiting_.empty() || !running_.empty(); }
  nlohmann::json resolved() const override;

  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_blocks() const { return free_; }
  int64_t token_budget() const { return budget_; }
  int64_t max_num_seqs() const { return max_seqs_; }

 private:
  int64_t tokens_left(const RequestState& s) const { return s.prompt_tokens + s.generated - s.position; }
  bool allocate_slots(int32_t id, int64_t tokens);
  void release(int32_t id);
  void preempt(int32_t id);
  bool schedule_running(int64_t& budget);
  void schedule_waiting(int64_t& budget);
  void add_slice(int32_t id, int64_t tokens, int64_t& budget);
  int64_t capture_size(int64_t tokens) const;

  const EngineConfig& config_;
  const ModelSpec& model_;
  const CostModel& cost_;
  std::vector<RequestState>& reqs_;
  int64_t block_size_ = 16;
  int64_t num_blocks_ = 0;
  int64_t free_ = 0;
  int64_t budget_ = 8192;
  int64_t max_seqs_ = 1024;
  bool graphs_ = true;
  double cache_gib_ = 0;
  std::deque<int32_t> waiting_;
  std::vector<int32_t> running_;
  StepPlan step_;
};

std::unique_ptr<Engine> make_vllm_engine(const EngineContext& ctx);

}  // namespace dooly::sim
