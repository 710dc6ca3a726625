#include "dooly/sim/hf_scheduler.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::sim {
namespace {

std::map<std::string, HfSchedulerPolicy>& policies() {
  static std::map<std::string, HfSchedulerPolicy> r = {
      {"fifo", {0.15, true, "scheduler.py FIFOScheduler (safety margin default 0.15)"}},
      {"prefill_first", {0.0, false, "scheduler.py PrefillFirstScheduler (safety margin default 0.0)"}},
  };
  return r;
}

}  // namespace

void register_hf_scheduler(const std::string& name, HfSchedulerPolicy policy) {
  if (!policies().emplace(name, std::move(policy)).second)
    DOOLY_THROW(DuplicateError, "give the policy another name", "HF scheduler '{}' is already registered", name);
}

std::vector<std::string> hf_scheduler_names() {
  std::vector<std::string> out;
  for (const auto& [name, p] : policies()) out.push_back(name);
  return out;
}

const HfSchedulerPolicy& hf_scheduler_policy(const std::string& name) {
  const auto it = policies().find(name);
  if (it == policies().end())
    DOOLY_THROW(InputError, fmt::format("use --scheduler {}", fmt::join(hf_scheduler_names(), " or ")),
                "unknown HF scheduler '{}'", utf8::echo(name));
  return it->second;
}

HfScheduler::HfScheduler(HfSchedulerPolicy policy, double safety_margin, int64_t max_requests, HfCache& cache,
                         std::vector<RequestState>& requests)
    : policy_(std::move(policy)), margin_(safety_margin), max_requests_(max_requests), cache_(cache), reqs_(requests) {}

void HfScheduler::add_waiting(int32_t request) {
  RequestState& s = reqs_[request];
  s.status = Status::waiting;
  ++s.queue_epoch;
  waiting_.emplace_back(request, s.queue_epoch);
  ++waiting_count_;
}

void HfScheduler::trim_waiting() {
  auto stale = [&](const std::pair<int32_t, uint32_t>& e) {
    const RequestState& s = reqs_[e.first];
    return s.status != Status::waiting || s.queue_epoch != e.second;
  };
  while (waiting_head_ < waiting_.size() && stale(waiting_[waiting_head_])) ++waiting_head_;
  if (waiting_head_ > 1024 && waiting_head_ * 2 > waiting_.size()) {
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(waiting_head_));
    waiting_head_ = 0;
  }
}

void HfScheduler::activate(int32_t id) {
  active_.push_back(id);
  --waiting_count_;
}

void HfScheduler::remove_active(int32_t id) { active_.erase(std::find(active_.begin(), active_.end(), id)); }

bool HfScheduler::allocate_if_needed(int32_t id, int64_t tokens) {
  RequestState& s = reqs_[id];
  const int64_t occupancy = s.allocated_blocks * cache_.block_size() - s.position;
  if (occupancy >= tokens && s.allocated_blocks != 0) return true;
  const int64_t needed = (tokens - occupancy + 1) / cache_.block_size() + 1;
  const std::optional<int64_t> got = cache_.allocate(needed, s.allocated_blocks);
  if (!got) {
    // Only active requests are tracked as starved; waiting ones hold no cache and keep waiting.
    if (s.status != Status::waiting) starved_.emplace_back(id, cache_.blocks_needed(needed, s.allocated_blocks));
    return false;
  }
  s.allocated_blocks += *got;
  return true;
}

int64_t HfScheduler::schedule_request(int32_t id, int64_t tokens, int64_t budget) {
  RequestState& s = reqs_[id];
  if (tokens <= budget) {
    if (s.status == Status::waiting) activate(id);
    if (s.status == Status::decoding) return 1;
    s.remaining_prefill = 0;  // set DECODING already (the engine's choice, for async batching)
    s.status = Status::decoding;
    return tokens;
  }
  if (s.status == Status::waiting) {
    activate(id);
    s.status = Status::prefilling;
  }
  s.remaining_prefill = tokens - budget;
  return budget;
}

HfScheduler::Verdict HfScheduler::consider(int32_t id, Budgets& b, std::vector<HfScheduled>& out, bool& one_failed) {
  RequestState& s = reqs_[id];
  const int64_t free = cache_.free_blocks();
  const bool outside_margin = static_cast<double>(free) < margin_ * static_cast<double>(cache_.num_blocks());
  if (outside_margin && !out.empty() && s.status != Status::decoding) return Verdict::stop;
  const int64_t tokens = s.status == Status::decoding ? 1 : s.remaining_prefill;
  int64_t read = s.position;
  if (const auto limit = cache_.read_cache_limit()) read = std::min(read, *limit);
  if (b.cache < read) return Verdict::next;  // the decode fast path is never available (no flash attention)
  if (!allocate_if_needed(id, std::min(tokens, b.tokens))) {
    one_failed = true;
    // A waiting request meeting a full cache: every later waiting one would need blocks too.
    return free == 0 && s.status == Status::waiting ? Verdict::stop : Verdict::next;
  }
  const int64_t scheduled = schedule_request(id, tokens, b.tokens);
  b.tokens -= scheduled;
  b.cache -= read;
  b.requests -= 1;
  out.push_back({id, scheduled, s.position, read, s.remaining_prefill == 0});
  return b.tokens == 0 || b.cache <= 0 || b.requests <= 0 ? Verdict::stop : Verdict::next;
}

bool HfScheduler::schedule_batch(int64_t token_budget, int64_t cache_budget, std::vector<HfScheduled>& out) {
  out.clear();
  starved_.clear();
  candidates_.clear();
  const Status first = policy_.decodes_first ? Status::decoding : Status::prefilling;
  const Status second = policy_.decodes_first ? Status::prefilling : Status::decoding;
  for (int32_t id : active_)
    if (reqs_[id].status == first) candidates_.push_back(id);
  for (int32_t id : active_)
    if (reqs_[id].status == second) candidates_.push_back(id);

  Budgets b{token_budget, cache_budget, max_requests_};
  bool one_failed = false;
  for (int32_t id : candidates_)
    if (consider(id, b, out, one_failed) == Verdict::stop) return !(out.empty() && one_failed);
  if (!block_new_requests) {
    trim_waiting();
    const size_t end = waiting_.size();  // the candidates are the requests waiting now
    for (size_t i = waiting_head_; i < end; ++i) {
      const auto [id, epoch] = waiting_[i];
      if (reqs_[id].status != Status::waiting || reqs_[id].queue_epoch != epoch) continue;
      if (consider(id, b, out, one_failed) == Verdict::stop) break;
    }
  }
  return !(out.empty() && one_failed);
}

void HfScheduler::soft_reset(int32_t id) {
  RequestState& s = reqs_[id];
  cache_.release(s.allocated_blocks);
  remove_active(id);
  // RequestState.create_equivalent_initial_request: the tokens so far become the prompt of a fresh request.
  s.prefill_tokens = s.prompt_tokens + s.generated;
  s.remaining_prefill = s.prefill_tokens;
  s.position = 0;
  s.allocated_blocks = 0;
  ++s.preemptions;
  add_waiting(id);
}

int HfScheduler::offload_requests() {
  if (starved_.empty()) return 0;
  int64_t free = cache_.free_blocks();
  int64_t demand = 0;
  for (const auto& [id, blocks] : starved_) demand += blocks;
  const auto active = static_cast<int64_t>(active_.size());
  std::vector<int32_t> victims;
  while (demand > free && !starved_.empty() && active - static_cast<int64_t>(victims.size()) > 1) {
    const auto [id, blocks] = starved_.back();
    starved_.pop_back();
    victims.push_back(id);
    demand -= blocks;
    free += cache_.held(reqs_[id].allocated_blocks);
  }
  std::reverse(victims.begin(), victims.end());  // oldest first, so they queue in their original order
  for (int32_t id : victims) soft_reset(id);
  if (!victims.empty()) block_new_requests = true;
  return static_cast<int>(victims.size());
}

void HfScheduler::finish(int32_t request) {
  RequestState& s = reqs_[request];
  cache_.release(s.allocated_blocks);
  s.allocated_blocks = 0;
  s.status = Status::finished;
  block_new_requests = false;
}

void HfScheduler::drop_finished() {
  active_.erase(
      std::remove_if(active_.begin(), active_.end(), [&](int32_t id) { return reqs_[id].status == Status::finished; }),
      active_.end());
}

}  // namespace dooly::sim
