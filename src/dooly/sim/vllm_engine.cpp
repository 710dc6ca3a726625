#include "dooly/sim/vllm_engine.hpp"

#include <algorithm>
#include <cmath>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::sim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

VllmEngine::VllmEngine(const EngineContext& ctx)
    : config_(ctx.config), model_(ctx.model), cost_(ctx.cost), reqs_(ctx.requests) {
  const EngineConfig& c = config_;
  if (!c.scheduler.empty() && c.scheduler != "fcfs")
    DOOLY_THROW(InputError, "use --scheduler fcfs (or leave it out) with --engine vllm",
                "vLLM v1's scheduler is first-come first-served; '{}' is not modelled", utf8::echo(c.scheduler));
  block_size_ = c.block_size.value_or(16);
  if (block_size_ < 1)
    DOOLY_THROW(InputError, "give --block-size 1 or more (16 is vLLM's default)", "bad --block-size");
  budget_ = c.max_batch_tokens.value_or(8192);
  max_seqs_ = c.max_requests.value_or(1024);
  graphs_ = c.cuda_graphs != "off";
  const double block_bytes = static_cast<double>(model_.kv_bytes_per_token(c.dtype_bytes()) * block_size_);
  if (c.num_blocks) {
    num_blocks_ = *c.num_blocks;
  } else {
    const auto h = static_cast<double>(model_.hidden_size);
    const auto mlp = static_cast<double>(model_.is_moe() ? model_.experts_per_token * model_.expert_intermediate_size
                                                         : model_.intermediate_size);
    const auto qkv = static_cast<double>((model_.heads + 2 * model_.kv_heads) * model_.head_dim);
    const double activation = static_cast<double>(budget_) * (2 * h + 2 * mlp + qkv) * c.dtype_bytes() +
                              static_cast<double>(max_seqs_ * model_.vocab_size) * 4 * 2;
    const double weights = static_cast<double>(model_.params) * c.dtype_bytes();
    const double kv = c.gpu.memory_gib * kGiB * c.memory_fraction - weights - activation - c.reserved_gib * kGiB;
    num_blocks_ = static_cast<int64_t>(std::floor(std::max(0.0, kv) / block_bytes));
  }
  if (num_blocks_ < 2)
    DOOLY_THROW(InputError, "give more --gpu-memory-gib or --gpu-memory-utilization, or --num-blocks",
                "vLLM would find no memory for the KV cache ({} blocks)", num_blocks_);
  cache_gib_ = static_cast<double>(num_blocks_) * block_bytes / kGiB;
  free_ = num_blocks_ - 1;  // BlockPool keeps one null block
}

void VllmEngine::check(const std::vector<RequestState>& requests) const {
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestState& r = requests[i];
    const int64_t total = r.prompt_tokens + r.output_tokens;
    if (model_.max_position_embeddings > 0 && total > model_.max_position_embeddings)
      DOOLY_THROW(InputError, "shorten the request or give a model with a longer context",
                  "request {} (prompt {} + output {} tokens) is longer than the model's context of {}: vLLM would "
                  "reject it",
                  i, r.prompt_tokens, r.output_tokens, model_.max_position_embeddings);
    if (ceil_div(total - 1, block_size_) > num_blocks_ - 1)
      DOOLY_THROW(InputError, "give more --num-blocks or --gpu-memory-gib, or shorter requests",
                  "request {} (prompt {} + output {} tokens) needs {} KV blocks alone, the vLLM cache has {}", i,
                  r.prompt_tokens, r.output_tokens, ceil_div(total - 1, block_size_), num_blocks_ - 1);
    if (!config_.chunked_prefill && total - 1 > budget_)
      DOOLY_THROW(InputError, "turn --chunked-prefill on or raise --max-batch-tokens",
                  "request {} (prompt {} + output {} tokens) can never be scheduled without chunked prefill: its "
                  "tokens exceed max_num_batched_tokens = {}",
                  i, r.prompt_tokens, r.output_tokens, budget_);
  }
}

void VllmEngine::admit(int32_t request) {
  RequestState& s = reqs_[request];
  s.prefill_tokens = s.prompt_tokens;
  s.position = s.generated = s.allocated_blocks = 0;
  s.status = Status::waiting;
  waiting_.push_back(request);
}

bool VllmEngine::allocate_slots(int32_t id, int64_t tokens) {
  RequestState& s = reqs_[id];
  const int64_t need = ceil_div(s.position + tokens, block_size_) - s.allocated_blocks;
  if (need > free_) return false;
  if (need > 0) {
    free_ -= need;
    s.allocated_blocks += need;
  }
  return true;
}

void VllmEngine::release(int32_t id) {
  RequestState& s = reqs_[id];
  free_ += s.allocated_blocks;
  s.allocated_blocks = 0;
}

void VllmEngine::preempt(int32_t id) {  // Scheduler._preempt_request: recompute later
  RequestState& s = reqs_[id];
  release(id);
  s.position = 0;
  s.prefill_tokens = s.prompt_tokens + s.generated;
  s.status = Status::waiting;
  ++s.preemptions;
  ++step_.preempted;
  waiting_.push_front(id);
}

void VllmEngine::add_slice(int32_t id, int64_t tokens, int64_t& budget) {
  RequestState& s = reqs_[id];
  const bool decode = s.position >= s.prefill_tokens;
  const bool new_token = s.position + tokens == s.prompt_tokens + s.generated;
  step_.slices.push_back({id, static_cast<int32_t>(tokens), s.position, new_token});
  step_.composition.requests.push_back({tokens, s.position});
  step_.tokens += tokens;
  step_.prefill_tokens += decode ? 0 : tokens;
  step_.decode_requests += decode ? 1 : 0;
  s.position += tokens;  // _update_after_schedule: num_computed_tokens advances at scheduling
  s.status = new_token ? Status::decoding : Status::prefilling;
  budget -= tokens;
}

bool VllmEngine::schedule_running(int64_t& budget) {
  bool preempted = false;
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    const int32_t id = running_[i];
    const int64_t tokens = std::min(tokens_left(reqs_[id]), budget);
    if (tokens == 0) {
      ++i;
      continue;
    }
    bool fits = true;
    while (!allocate_slots(id, tokens)) {
      const int32_t victim = running_.back();  // the lowest priority: admitted last
      running_.pop_back();
      preempt(victim);
      preempted = true;
      if (victim == id) {
        fits = false;
        break;
      }
    }
    if (!fits) break;
    add_slice(id, tokens, budget);
    ++i;
  }
  return preempted;
}

void VllmEngine::schedule_waiting(int64_t& budget) {
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < max_seqs_) {
    const int32_t id = waiting_.front();
    int64_t tokens = tokens_left(reqs_[id]);
    if (!config_.chunked_prefill && tokens > budget) break;
    tokens = std::min(tokens, budget);
    if (!allocate_slots(id, tokens)) break;
    waiting_.pop_front();
    running_.push_back(id);
    add_slice(id, tokens, budget);
  }
}

int64_t VllmEngine::capture_size(int64_t tokens) const {
  if (!graphs_ || tokens > config_.max_capture_size) return 0;
  int64_t size = 1;
  if (tokens <= 4) {
    while (size < tokens) size *= 2;
  } else {
    const int64_t step = tokens <= 256 ? 8 : 16;
    size = ceil_div(tokens, step) * step;
  }
  return size <= config_.max_capture_size ? size : 0;
}

const StepPlan* VllmEngine::schedule() {
  step_.slices.clear();
  step_.composition.requests.clear();
  step_.tokens = step_.prefill_tokens = step_.decode_requests = 0;
  step_.preempted = 0;
  int64_t budget = budget_;
  if (!schedule_running(budget)) schedule_waiting(budget);
  if (step_.slices.empty()) return nullptr;
  int64_t kv_read = 0;
  for (const Slice& s : step_.slices) kv_read += s.context;
  const int64_t n = static_cast<int64_t>(step_.slices.size());
  const int64_t padded = capture_size(step_.tokens);
  step_.shape = padded > 0 ? StepShape{ForwardPath::graph_replay, padded, kv_read, n}
                           : StepShape{ForwardPath::eager, step_.tokens, kv_read, n};
  step_.cost = cost_.step(step_.composition, step_.shape);
  combine(step_, cost_.idle_power_w());
  step_.free_blocks = free_;
  step_.waiting = static_cast<int64_t>(waiting_.size());
  return &step_;
}

void VllmEngine::complete(std::vector<int32_t>& finished) {
  bool any = false;
  for (const Slice& s : step_.slices) {
    if (!s.new_token) continue;
    RequestState& r = reqs_[s.request];
    if (++r.generated >= r.output_tokens) {
      release(s.request);
      r.status = Status::finished;
      finished.push_back(s.request);
      any = true;
    }
  }
  if (any)
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [&](int32_t id) { return reqs_[id].status == Status::finished; }),
                   running_.end());
}

nlohmann::json VllmEngine::resolved() const {
  return {{"engine", "vllm"},          {"emulates", "vLLM v1 scheduler (not validated against a live vLLM)"},
          {"scheduler", "fcfs"},       {"block_size", block_size_},
          {"num_blocks", num_blocks_}, {"max_num_batched_tokens", budget_},
          {"max_num_seqs", max_seqs_}, {"chunked_prefill", config_.chunked_prefill},
          {"cuda_graphs", graphs_},    {"max_capture_size", config_.max_capture_size},
          {"dtype", config_.dtype},    {"cache_gib", cache_gib_}};
}

std::unique_ptr<Engine> make_vllm_engine(const EngineContext& ctx) { return std::make_unique<VllmEngine>(ctx); }

}  // namespace dooly::sim
