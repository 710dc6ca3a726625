#include "dooly/sim/analytic_cost.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace dooly::sim {

namespace {

// Keys the attention reads and (query, key) pairs it computes, per layer kind.
struct Attention {
  double keys_full = 0, keys_sliding = 0;
  double pairs_full = 0, pairs_sliding = 0;
};

Attention attention_of(const plan::Composition& c, const StepShape& shape, const ModelSpec& m, bool whole_mask) {
  Attention a;
  const double window = static_cast<double>(m.sliding_window.value_or(INT64_MAX / 4));
  for (const plan::RequestSlice& r : c.requests) {
    const double ctx = static_cast<double>(r.context), added = static_cast<double>(r.new_tokens);
    a.keys_full += ctx + added;
    a.keys_sliding += std::min(ctx, window - 1) + added;
    a.pairs_full += added * (ctx + (added + 1) / 2);
    a.pairs_sliding += added * std::min(ctx + (added + 1) / 2, window);
  }
  if (whole_mask) {
    // One mask over the batch, computed whole (masked entries included); under graphs over the padded span.
    if (shape.path != ForwardPath::eager)
      a.keys_full = a.keys_sliding = static_cast<double>(shape.kv_read_tokens + shape.tokens);
    a.pairs_full = static_cast<double>(shape.tokens) * a.keys_full;
    a.pairs_sliding = static_cast<double>(shape.tokens) * a.keys_sliding;
  }
  return a;
}

}  // namespace

AnalyticCost::AnalyticCost(ModelSpec model, GpuSpec gpu, int dtype_bytes, std::string engine, Constants k)
    : model_(std::move(model)), gpu_(std::move(gpu)), dtype_bytes_(dtype_bytes), engine_(std::move(engine)), k_(k) {}

AnalyticCost AnalyticCost::for_spec(const CostSpec& spec) {
  Constants k;
  if (spec.engine == "vllm") {
    k.launch_per_layer_s = 0.2e-3;
    k.replay_launch_s = 0.1e-3;
    k.serial_s = 1.5e-3;
    k.serial_per_request_s = 10e-6;
    k.serial_per_token_s = 0;
    k.kv_read_factor = 1;
    k.whole_mask = false;
  } else if (spec.model.is_moe()) {
    k.launch_per_layer_s = 1.49e-3;  // OLMoE: 23.8 ms over 16 layers
  }
  return AnalyticCost(spec.model, spec.gpu, spec.dtype_bytes, spec.engine, k);
}

double AnalyticCost::device_flops_bytes(const plan::Composition& c, const StepShape& shape, double& bytes) const {
  const ModelSpec& m = model_;
  const double tokens = static_cast<double>(shape.tokens);
  const double rows = static_cast<double>(std::max<int64_t>(1, shape.sequences));
  const double h = static_cast<double>(m.hidden_size), v = static_cast<double>(m.vocab_size);
  const double layers = static_cast<double>(m.layers);
  const double embedding = v * h;
  const double layer_params = (static_cast<double>(m.active_params_per_token) - embedding) / layers;
  const Attention a = attention_of(c, shape, m, k_.whole_mask);
  const double full = static_cast<double>(m.full_layers), sliding = static_cast<double>(m.sliding_layers);
  const double qk_width = static_cast<double>(m.heads * m.head_dim);
  const double flops = 2 * layer_params * layers * tokens + 2 * embedding * rows +
                       4 * qk_width * (full * a.pairs_full + sliding * a.pairs_sliding);

  // Weights: everything but the experts no token reaches (uniform routing) and the embedding rows not looked up.
  double weights = static_cast<double>(m.params) - (m.tie_word_embeddings ? 0.0 : embedding - tokens * h);
  if (m.is_moe()) {
    const double e = static_cast<double>(m.experts), k = static_cast<double>(m.experts_per_token);
    const double reached = e * (1 - std::pow(1 - k / e, tokens));
    weights -= layers * (e - reached) * 3 * h * static_cast<double>(m.expert_intermediate_size);
  }
  const double kv_width = 2.0 * static_cast<double>(m.kv_heads * m.head_dim);  // K and V elements per token, layer
  const double kv_read = k_.kv_read_factor * kv_width * (full * a.keys_full + sliding * a.keys_sliding);
  const double kv_written = kv_width * layers * tokens;
  const double mlp_width =
      static_cast<double>(m.is_moe() ? m.experts_per_token * m.expert_intermediate_size : m.intermediate_size);
  const double activations = tokens * layers * (10 * h + 3 * mlp_width);
  bytes = static_cast<double>(dtype_bytes_) * (weights + kv_read + kv_written + activations) + rows * v * 4 * 2;
  return flops;
}

StepCost AnalyticCost::step(const plan::Composition& c, const StepShape& shape) const {
  double bytes = 0;
  const double flops = device_flops_bytes(c, shape, bytes);
  const double t_compute = flops / (gpu_.peak_flops * k_.compute_efficiency);
  const double t_memory = bytes / (gpu_.hbm_bytes_per_s * k_.memory_efficiency);
  const double kernels = k_.kernel_s * k_.kernels_per_layer * static_cast<double>(model_.layers);
  StepCost out;
  out.device_s = std::max(t_compute, t_memory) + kernels;
  const double busy = std::min(1.0, t_compute / out.device_s + k_.memory_power_share * t_memory / out.device_s);
  out.energy_j = out.device_s * (gpu_.idle_power_w + (gpu_.max_power_w - gpu_.idle_power_w) * busy);
  const double launch_eager = k_.launch_per_layer_s * static_cast<double>(model_.layers);
  out.host_launch_s = shape.path == ForwardPath::graph_replay ? k_.replay_launch_s : launch_eager;
  out.host_serial_s = k_.serial_s + k_.serial_per_request_s * static_cast<double>(c.num_requests()) +
                      k_.serial_per_token_s * static_cast<double>(c.num_tokens());
  return out;
}

std::string AnalyticCost::describe() const {
  return fmt::format("analytic (a roofline of {} on {}: {:.0f} TFLOP/s, {:.1f} TB/s; {} host costs; not measured)",
                     model_.name.empty() ? model_.model_type : model_.name, gpu_.name, gpu_.peak_flops / 1e12,
                     gpu_.hbm_bytes_per_s / 1e12, engine_ == "vllm" ? "assumed vLLM" : "H200-measured HF");
}

}  // namespace dooly::sim
