#include "dooly/sim/hf_engine.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::sim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kMinBlockSize = 4;           // PagedAttentionCache._min_block_size
constexpr int64_t kDefaultMaxRequests = 1024;  // initialization.py FALLBACK_DEFAULTS
constexpr int64_t kMaxSeqlenKPadMin = 1024;    // get_model_kwargs: pad_to_pow2(max_seqlen_k, num_pages, 1024)

void check_attention(const std::string& attention) {
  if (attention == "paged|sdpa" || attention == "paged|eager") return;
  DOOLY_THROW(InputError,
              "use --attention 'paged|sdpa' or 'paged|eager' (flash-attn, and with it the decode fast path, is not "
              "installed where this engine was measured: docs/engine-hf.md)",
              "--attention '{}' is not modelled for the HF engine", utf8::echo(attention));
}

}  // namespace

HfEngine::HfEngine(const EngineContext& ctx)
    : config_(ctx.config), model_(ctx.model), cost_(ctx.cost), reqs_(ctx.requests) {
  const EngineConfig& c = config_;
  check_attention(c.attention);
  const HfSchedulerPolicy& policy = hf_scheduler_policy(c.scheduler.empty() ? "fifo" : c.scheduler);
  // decide_use_cuda_graphs: with an attention mask (sdpa, eager) the engine's own choice is no graphs.
  graphs_ = c.cuda_graphs == "on";
  const int64_t block_size = c.block_size.value_or(256);
  if (block_size < kMinBlockSize)
    DOOLY_THROW(InputError, "give --block-size 4 or more (256 is the engine's default)",
                "the HF engine refuses block size {} (PagedAttentionCache: at least {})", block_size, kMinBlockSize);
  const double weights = static_cast<double>(model_.params) * c.dtype_bytes();
  available_bytes_ = hf_available_bytes(c.gpu.memory_gib * kGiB, weights + c.reserved_gib * kGiB, c.memory_fraction);
  const LayerGroups groups = layer_groups(model_);
  HfMemoryInput in;
  in.available_bytes = available_bytes_;
  in.dtype_bytes = c.dtype_bytes();
  in.block_size = block_size;
  in.max_batch_tokens = c.max_batch_tokens;
  in.num_blocks = c.num_blocks;
  in.attention_masks = groups.sliding > 0 ? 2 : 1;
  plan_ = plan_hf_cache(model_, in);
  max_batch_tokens_ = plan_.max_batch_tokens;
  // update_cb_config_after_cache_creation; prefix sharing needs one group of full-attention layers.
  max_requests_ = std::min(c.max_requests.value_or(kDefaultMaxRequests), max_batch_tokens_);
  if (groups.sliding > 0) max_requests_ = std::min(max_requests_, plan_.num_blocks);
  const double margin = c.safety_margin.value_or(policy.default_safety_margin);
  if (margin < 0 || margin > 1)
    DOOLY_THROW(InputError, "give --safety-margin in [0, 1]", "the HF scheduler refuses safety margin {}", margin);
  cache_ = std::make_unique<HfCache>(groups, plan_.num_blocks, block_size, model_.sliding_window);
  scheduler_ = std::make_unique<HfScheduler>(policy, margin, max_requests_, *cache_, reqs_);
  if (graphs_ && c.warmup) {
    // ModelRunner.warmup: the varlen path at its largest shape, one request reading the rest of the cache.
    const int64_t pages = cache_->num_pages(), kv = pages - max_batch_tokens_;
    const int64_t window = model_.sliding_window.value_or(INT64_MAX / 4);
    graphs_seen_.insert(graph_key(pad_to_interval(max_batch_tokens_, c.q_padding, max_batch_tokens_),
                                  pad_to_interval(kv, c.kv_padding, pages), pages,
                                  max_batch_tokens_ + std::min(kv, window - 1)));
  }
}

void HfEngine::carry_over(const Engine& warmed) {
  // The graph buffer outlives a run (transformers 5.17 never evicts a graph): the warm-up's shapes replay.
  if (const auto* hf = dynamic_cast<const HfEngine*>(&warmed))
    graphs_seen_.insert(hf->graphs_seen_.begin(), hf->graphs_seen_.end());
}

int64_t HfEngine::blocks_alone(int64_t prompt_tokens, int64_t output_tokens) const {
  const int64_t bs = cache_->block_size();
  int64_t allocated = 0, position = 0;
  for (int64_t left = prompt_tokens; left > 0;) {
    const int64_t len = std::min(left, max_batch_tokens_);
    const int64_t occupancy = allocated * bs - position;
    if (occupancy < len || allocated == 0) allocated += (len - occupancy + 1) / bs + 1;
    position += len;
    left -= len;
  }
  const int64_t last = prompt_tokens + output_tokens - 1;  // the last token is never fed back
  return std::max(allocated, (last + bs - 1) / bs);
}

void HfEngine::check(const std::vector<RequestState>& requests) const {
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestState& r = requests[i];
    const int64_t need = cache_->held(blocks_alone(r.prompt_tokens, r.output_tokens));
    if (need > cache_->num_blocks())
      DOOLY_THROW(InputError, "give more --num-blocks or --gpu-memory-gib, a smaller --block-size, or shorter requests",
                  "request {} (prompt {} + output {} tokens) needs {} KV blocks alone, the HF cache has {}: the engine "
                  "would stop (no request can be scheduled, none offloaded)",
                  i, r.prompt_tokens, r.output_tokens, need, cache_->num_blocks());
  }
}

HfEngine::GraphKey HfEngine::graph_key(int64_t q_padded, int64_t kv_padded, int64_t seqlen_full,
                                       int64_t seqlen_sliding) const {
  const LayerGroups& g = cache_->groups();
  const int64_t pages = cache_->num_pages();
  return {q_padded, kv_padded, g.full ? pad_to_pow2(seqlen_full, pages, kMaxSeqlenKPadMin) : 0,
          g.sliding ? pad_to_pow2(seqlen_sliding, pages, kMaxSeqlenKPadMin) : 0};
}

void HfEngine::shape_step() {
  int64_t tokens = 0, kv_read = 0;
  for (const HfScheduled& s : batch_) {
    tokens += s.tokens;
    kv_read += s.read_cache;
  }
  StepShape& shape = step_.shape;
  if (!graphs_) {
    shape = {ForwardPath::eager, tokens, kv_read, static_cast<int64_t>(batch_.size())};
    return;
  }
  // ModelRunner.maybe_pad_inputs (varlen path: the only one without flash attention), then the graph cache.
  const int64_t q = pad_to_interval(tokens, config_.q_padding, max_batch_tokens_);
  const int64_t kv = pad_to_interval(kv_read, config_.kv_padding, cache_->num_pages());
  int64_t full = 0, sliding = 0;  // max_seqlen_k per layer type (cache.get_seqlens_k)
  const int64_t window = model_.sliding_window.value_or(INT64_MAX / 4);
  for (const HfScheduled& s : batch_) {
    full = std::max(full, s.context + s.tokens);
    sliding = std::max(sliding, s.tokens + std::min(s.context, window - 1));
  }
  const bool fresh = graphs_seen_.insert(graph_key(q, kv, full, sliding)).second;
  shape = {fresh ? ForwardPath::graph_capture : ForwardPath::graph_replay, q, kv, std::min(q, max_requests_)};
}

const StepPlan* HfEngine::schedule() {
  for (int32_t id : inbox_) {  // _update_tp_group_state: the input queue drained into the waiting queue
    RequestState& s = reqs_[id];
    s.prefill_tokens = s.remaining_prefill = s.prompt_tokens;
    s.position = s.generated = s.allocated_blocks = 0;
    scheduler_->add_waiting(id);
  }
  inbox_.clear();
  if (!scheduler_->has_pending()) return nullptr;
  step_.preempted = 0;
  const int64_t pages = cache_->num_pages();
  while (!scheduler_->schedule_batch(max_batch_tokens_, pages, batch_)) {
    const int evicted = scheduler_->offload_requests();
    if (evicted == 0)
      DOOLY_THROW(Error, "give the engine more KV blocks",
                  "the HF engine would stop: no request can be scheduled and "
                  "none can be offloaded (prepare_next_batch)");
    step_.preempted += evicted;
  }
  if (batch_.empty()) return nullptr;
  if (scheduler_->has_starved()) step_.preempted += scheduler_->offload_requests();

  step_.slices.clear();
  step_.composition.requests.clear();
  step_.tokens = step_.prefill_tokens = step_.decode_requests = 0;
  for (const HfScheduled& s : batch_) {
    const bool decode = s.context >= reqs_[s.request].prefill_tokens;  // its prompt is all cached: a generated token
    step_.slices.push_back({s.request, static_cast<int32_t>(s.tokens), s.context, s.new_token});
    step_.composition.requests.push_back({s.tokens, s.context});
    step_.tokens += s.tokens;
    step_.prefill_tokens += decode ? 0 : s.tokens;
    step_.decode_requests += decode ? 1 : 0;
    reqs_[s.request].position += s.tokens;  // prepare_batch_tensors advances position_offset
  }
  shape_step();
  step_.cost = cost_.step(step_.composition, step_.shape);
  combine(step_, cost_.idle_power_w());
  step_.free_blocks = cache_->free_blocks();
  step_.waiting = scheduler_->waiting();
  return &step_;
}

void HfEngine::complete(std::vector<int32_t>& finished) {
  for (const Slice& s : step_.slices) {
    if (!s.new_token) continue;  // a split prefill: no token yet
    RequestState& r = reqs_[s.request];
    if (++r.generated >= r.output_tokens) {
      scheduler_->finish(s.request);
      finished.push_back(s.request);
    }
  }
  scheduler_->drop_finished();
}

nlohmann::json HfEngine::resolved() const {
  const LayerGroups& g = cache_->groups();
  return {{"engine", "hf"},
          {"emulates", "transformers 5.17 continuous batching (ContinuousBatchingManager)"},
          {"scheduler", config_.scheduler.empty() ? "fifo" : config_.scheduler},
          {"safety_margin", scheduler_->safety_margin()},
          {"attention", config_.attention},
          {"cuda_graphs", graphs_},
          {"dtype", config_.dtype},
          {"block_size", cache_->block_size()},
          {"num_blocks", cache_->num_blocks()},
          {"max_batch_tokens", max_batch_tokens_},
          {"max_requests_per_batch", max_requests_},
          {"layer_groups", {{"layers_per_group", g.group_size}, {"full", g.full}, {"sliding", g.sliding}}},
          {"cache_memory_gib", static_cast<double>(available_bytes_) / kGiB},
          {"cache_footprint_gib", static_cast<double>(plan_.footprint_bytes) / kGiB},
          {"q_padding", config_.q_padding},
          {"kv_padding", config_.kv_padding}};
}

std::vector<std::string> HfEngine::cautions() const {
  // Both modelled attentions read a mask: a view of a buffer whose rows are num_pages + max_batch_tokens wide
  // (transformers 5.17, ContinuousBatchingIOs). The profiler measures attention on 128-byte-aligned rows
  // (docs/dooly-tracing.md, "Layouts"); cuDNN's SDPA reads rows that are not 16-byte aligned 1.7x slower.
  const int64_t row = cache_->num_blocks() * cache_->block_size() + max_batch_tokens_;
  if (row * config_.dtype_bytes() % 16 == 0) return {};
  return {fmt::format(
      "the engine's attention-mask rows (num_blocks x block_size + max_batch_tokens = {} elements) are not 16-byte "
      "aligned: cuDNN's SDPA ran 1.7x slower on such rows than on the aligned rows the profiler measures it on "
      "(docs/simulate.md, \"Cautions\"); a max_batch_tokens that makes the sum a multiple of 64 avoids it",
      row)};
}

std::unique_ptr<Engine> make_hf_engine(const EngineContext& ctx) { return std::make_unique<HfEngine>(ctx); }

}  // namespace dooly::sim
