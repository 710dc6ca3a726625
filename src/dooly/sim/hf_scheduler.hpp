#pragma once
// HF continuous batching's scheduler (transformers 5.17 generation/continuous_batching/scheduler.py), emulated rule
// for rule on the simulator's request states:
// - Candidates (FIFOScheduler.schedule_batch / PrefillFirstScheduler.schedule_batch): the active requests in the
//   order they became active, decodes first then split prefills (FIFO) or the other way round (prefill_first),
//   then the waiting requests in arrival order unless new requests are blocked (after an eviction, until a request
//   finishes).
// - Each candidate (Scheduler._process_candidates): stop at the first non-decoding candidate once free blocks are
//   under safety_margin × num_blocks (unless nothing is scheduled yet); take min(its tokens, the token budget);
//   skip it when the cache-read budget is short; allocate its blocks (_allocate_blocks_if_needed: when the free
//   space of its blocks is under the tokens, ((tokens − free space + 1) // block_size) + 1 more blocks); on failure
//   skip it (an active one is "starved"), or stop if the cache is full and it was waiting; schedule it whole, or split
//   it at the budget (_schedule_request); stop when the token budget, the cache budget or the request budget runs out.
// - Nothing scheduled and an allocation failed: the engine evicts (OffloadingManager.offload_requests; no CPU pool
//   by default, so every victim is soft reset: its prompt and tokens so far become a new prompt, queued last).
// Policies are registered by name; the registry rejects duplicates.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dooly/sim/hf_cache.hpp"
#include "dooly/sim/request_state.hpp"

namespace dooly::sim {

struct HfSchedulerPolicy {
  double default_safety_margin = 0;  // the scheduler class's default when the config leaves it None
  bool decodes_first = true;         // FIFO: decodes, then split prefills; prefill_first: the other way round
  std::string source;                // where transformers defines it
};
// Throws DuplicateError for a name already registered.
void register_hf_scheduler(const std::string& name, HfSchedulerPolicy policy);
// Throws InputError naming the registered schedulers.
const HfSchedulerPolicy& hf_scheduler_policy(const std::string& name);
std::vector<std::string> hf_scheduler_names();

struct HfScheduled {
  int32_t request = 0;
  int64_t tokens = 0;      // query length
  int64_t context = 0;     // position_offset before the step
  int64_t read_cache = 0;  // the cache-read budget it took (Scheduler: read_cache_needed)
  bool new_token = false;  // FutureRequestState.has_new_token
};

class HfScheduler {
 public:
  HfScheduler(HfSchedulerPolicy policy, double safety_margin, int64_t max_requests, HfCache& cache,
              std::vector<RequestState>& requests);

  void add_waiting(int32_t request);  // Scheduler.add_waiting_request
  // schedule_batch: fills `out`; false for the engine's None (nothing scheduled and an allocation failed).
  bool schedule_batch(int64_t token_budget, int64_t cache_budget, std::vector<HfScheduled>& out);
  // OffloadingManager.offload_requests without a CPU pool: soft-resets starved requests, newest first, until the
  // others' demand fits, never the last active one. Returns how many.
  int offload_requests();
  bool has_starved() const { return !starved_.empty(); }
  void finish(int32_t request);  // Scheduler.finish_request, after its last token
  void drop_finished();          // compacts the active list after a step's updates

  bool block_new_requests = false;
  int64_t waiting() const { return waiting_count_; }
  int64_t active() const { return static_cast<int64_t>(active_.size()); }
  bool has_pending() const { return waiting_count_ > 0 || !active_.empty(); }
  double safety_margin() const { return margin_; }

 private:
  enum class Verdict { next, stop };
  struct Budgets {
    int64_t tokens = 0, cache = 0, requests = 0;
  };
  Verdict consider(int32_t id, Budgets& b, std::vector<HfScheduled>& out, bool& one_failed);
  bool allocate_if_needed(int32_t id, int64_t tokens);
  int64_t schedule_request(int32_t id, int64_t tokens, int64_t budget);
  void activate(int32_t id);
  void remove_active(int32_t id);
  void soft_reset(int32_t id);
  void trim_waiting();

  HfSchedulerPolicy policy_;
  double margin_;
  int64_t max_requests_;
  HfCache& cache_;
  std::vector<RequestState>& reqs_;
  std::vector<int32_t> active_;                        // in the order they became active (a Python dict's)
  std::vector<std::pair<int32_t, uint32_t>> waiting_;  // (request, queue epoch); stale entries are skipped
  size_t waiting_head_ = 0;
  int64_t waiting_count_ = 0;
  std::vector<std::pair<int32_t, int64_t>> starved_;  // (request, physical blocks it asked for)
  std::vector<int32_t> candidates_;
};

}  // namespace dooly::sim
