#include "dooly/predict/op_class.hpp"

#include <nlohmann/json.hpp>

namespace dooly::predict {
namespace {

constexpr std::array<std::string_view, op_class_count> kNames{
    "linear/matmul",   "norm", "elementwise", "attention prefill", "attention decode",
    "attention mixed", "moe",  "other",       "engine host"};

bool starts_with(std::string_view s, std::string_view prefix) noexcept { return s.substr(0, prefix.size()) == prefix; }

// The module path's components: "model.layers.0.mlp.experts" -> is any component `experts`, or `gate` right after
// `mlp` (an MoE router; a dense MLP's projection is `gate_proj`)?
bool in_moe(std::string_view module) noexcept {
  std::string_view previous;
  while (!module.empty()) {
    const size_t dot = module.find('.');
    const std::string_view part = module.substr(0, dot);
    if (part == "experts" || (part == "gate" && previous == "mlp") || part == "block_sparse_moe") return true;
    previous = part;
    module = dot == std::string_view::npos ? std::string_view() : module.substr(dot + 1);
  }
  return false;
}

bool in_norm(std::string_view module) noexcept {
  const size_t dot = module.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? module : module.substr(dot + 1);
  return last.find("norm") != std::string_view::npos;
}

}  // namespace

std::string_view to_string(OpClass c) noexcept { return kNames[static_cast<size_t>(c)]; }

bool is_attention(OpClass c) noexcept {
  return c == OpClass::attention_prefill || c == OpClass::attention_decode || c == OpClass::attention_mixed;
}

OpClass attention_class(PointKind kind) noexcept {
  switch (kind) {
    case PointKind::prefill:
      return OpClass::attention_prefill;
    case PointKind::decode:
      return OpClass::attention_decode;
    case PointKind::mixed:
    case PointKind::other:
      break;
  }
  return OpClass::attention_mixed;
}

OpClass classify(store::SignatureKind kind, std::string_view name, std::string_view metadata_json,
                 std::span<const std::string> quantities) {
  if (kind == store::SignatureKind::engine) return OpClass::engine;
  const nlohmann::json meta = nlohmann::json::parse(metadata_json, nullptr, false);
  const std::string rule = meta.is_object() ? meta.value("rule", "") : "";
  const std::string module = meta.is_object() ? meta.value("example_module", "") : "";
  bool reads_kv = false;
  for (const std::string& q : quantities)
    reads_kv = reads_kv || starts_with(q, "KV_TOKS") || starts_with(q, "MAX_SEQLEN_K");
  if (rule == "attention" || name.find("attention") != std::string_view::npos || reads_kv)
    return OpClass::attention_mixed;
  if (in_moe(module) || name == "_grouped_mm") return OpClass::moe;
  if (rule == "matmul" || name == "linear" || name == "matmul" || name == "mm" || name == "bmm") return OpClass::linear;
  if (in_norm(module) || name.find("norm") != std::string_view::npos) return OpClass::norm;
  if (rule == "elementwise" || rule == "reduce" || rule == "concat") return OpClass::elementwise;
  return OpClass::other;
}

}  // namespace dooly::predict
