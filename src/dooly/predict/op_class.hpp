#pragma once
// The op classes predictions are reported by (docs/predict.md): from a signature's kind, name, the rule the tracer
// applied and the module it was first seen in (metadata_json), and its swept quantities.
//
//   linear       linear, matmul (the dense GEMMs: projections, MLP, lm_head)
//   norm         ops inside a *norm module (the RMSNorm chain: to, pow, mean, rsqrt, mul)
//   elementwise  elementwise and reduction ops elsewhere (activations, residual adds, rotary, softmax of routers)
//   attention    anything that scales with the KV tokens it reads (SDPA, eager attention's matmuls and softmax,
//                KV-cache reads), split by step: prefill (no cached context), decode (every request decodes), mixed
//   moe          a mixture of experts' routing and expert GEMMs (modules under .experts or an MoE gate)
//   other        views, permutes, indexing, cache writes, embedding, factories
//   engine       the serving engine's own host time per step (kind 'engine')
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "dooly/predict/dataset.hpp"
#include "dooly/store/records.hpp"

namespace dooly::predict {

enum class OpClass : uint8_t {
  linear,
  norm,
  elementwise,
  attention_prefill,
  attention_decode,
  attention_mixed,
  moe,
  other,
  engine
};
inline constexpr size_t op_class_count = 9;

std::string_view to_string(OpClass c) noexcept;
bool is_attention(OpClass c) noexcept;
// The attention class of a measured point or a step of this kind (other: mixed).
OpClass attention_class(PointKind kind) noexcept;

// Attention signatures come back as attention_mixed: the step or the point decides which of the three.
OpClass classify(store::SignatureKind kind, std::string_view name, std::string_view metadata_json,
                 std::span<const std::string> quantities);

}  // namespace dooly::predict
