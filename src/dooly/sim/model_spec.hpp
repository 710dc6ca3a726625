#pragma once
// The sizes of a model that the simulator needs: the engines' memory planners (weights, KV bytes per token, the
// attention layer groups of HF's paged cache) and the analytic cost model (parameters per token, FLOPs). Read from a
// Hugging Face config.json (data/models/<name>.json), checked by trace::check_model_config first.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dooly::sim {

struct ModelSpec {
  std::string name;  // "llama-3.1-8b" (the file stem)
  std::string path;  // the config file read
  std::string model_type;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;  // the dense MLP's (0 for an all-MoE model)
  int64_t experts = 0;            // routed experts per MoE layer (0: dense)
  int64_t experts_per_token = 0;  // top-k
  int64_t expert_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  // Attention layer types as transformers 5.17 resolves them (its config classes' `layer_types`): counts of full
  // and sliding-window layers, and the window.
  int64_t full_layers = 0;
  int64_t sliding_layers = 0;
  std::optional<int64_t> sliding_window;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;  // 0 when the config has none

  int64_t params = 0;                   // parameter count (estimated from the sizes, within 0.5 % of transformers')
  int64_t active_params_per_token = 0;  // what one token multiplies through: dense parts + top-k experts, no embedding

  // KV cache bytes of one token over all layers (full-attention layers: every token is kept).
  int64_t kv_bytes_per_token(int dtype_bytes) const { return 2 * layers * kv_heads * head_dim * dtype_bytes; }
  bool is_moe() const { return experts > 0; }
};

// `name_or_path`: a config file, or the stem of one in `models_dir` ("llama-3.1-8b"). An unknown name is one
// InputError listing the known names.
ModelSpec load_model(const std::string& name_or_path, const std::string& models_dir);

// The same from config text (tests); `source` names it in messages.
ModelSpec model_from_json(const std::string& json_text, const std::string& source);

// The config files' stems in `models_dir`, sorted.
std::vector<std::string> list_models(const std::string& models_dir);

}  // namespace dooly::sim
