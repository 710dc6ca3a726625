#include "dooly/sim/model_spec.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/common/json_int.hpp"
#include "dooly/common/utf8.hpp"
#include "dooly/trace/model_config.hpp"

namespace dooly::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t int_field(const json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return json_integer<int64_t>(*it).value_or(fallback);
}

bool bool_field(const json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// How many layers use a sliding window, as transformers 5.17's config classes set `layer_types` (the paged cache
// groups layers by it: cache.py group_layers_by_attn_type).
int64_t sliding_layer_count(const json& j, const ModelSpec& m) {
  if (const auto lt = j.find("layer_types"); lt != j.end() && lt->is_array())
    return std::count(lt->begin(), lt->end(), json("sliding_attention"));
  if (!m.sliding_window) return 0;
  if (m.model_type == "gemma2") return (m.layers + 1) / 2;  // Gemma2Config: sliding iff (i + 1) % 2
  if (starts_with(m.model_type, "gemma3")) {                // Gemma3TextConfig: sliding iff (i + 1) % pattern
    const int64_t pattern = std::max<int64_t>(1, int_field(j, "sliding_window_pattern", 6));
    return m.layers - m.layers / pattern;
  }
  if (starts_with(m.model_type, "qwen2") || starts_with(m.model_type, "qwen3")) {
    // Qwen2/Qwen3 configs keep the window only with use_sliding_window, from layer max_window_layers on.
    if (!bool_field(j, "use_sliding_window", false)) return 0;
    return std::max<int64_t>(0, m.layers - int_field(j, "max_window_layers", m.layers));
  }
  return m.layers;  // a config with a window and no layer types: every layer slides (Mistral v0.1, Phi-3)
}

// Parameter count from the sizes: embeddings, attention, MLP or experts, norms. Biases and the small q/k norms of
// some families are left out (< 0.1 % of any shipped model).
void count_params(ModelSpec& m) {
  const int64_t h = m.hidden_size;
  const int64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  const int64_t attention = h * q + 2 * h * kv + q * h;
  const int64_t dense_mlp = 3 * h * m.intermediate_size;
  const int64_t expert = 3 * h * m.expert_intermediate_size;
  const int64_t shared = 3 * h * m.shared_expert_intermediate_size;
  const int64_t router = m.is_moe() ? h * m.experts : 0;
  const int64_t mlp_all = m.is_moe() ? m.experts * expert + shared + router : dense_mlp;
  const int64_t mlp_active = m.is_moe() ? m.experts_per_token * expert + shared + router : dense_mlp;
  const int64_t norms = (starts_with(m.model_type, "gemma") ? 4 : 2) * h;
  const int64_t embedding = m.vocab_size * h;
  m.params = embedding * (m.tie_word_embeddings ? 1 : 2) + m.layers * (attention + mlp_all + norms) + h;
  m.active_params_per_token = m.layers * (attention + mlp_active) + embedding;  // the LM head is a matmul too
}

}  // namespace

ModelSpec model_from_json(const std::string& json_text, const std::string& source) {
  const trace::ModelConfigCheck c = trace::check_model_config(json_text, source);
  const json doc = json::parse(json_text);  // valid: checked above
  const json& j = c.prefix.empty() ? doc : doc.at("text_config");
  ModelSpec m;
  m.path = source;
  m.model_type = c.model_type;
  m.hidden_size = c.hidden_size;
  m.vocab_size = c.vocab_size;
  m.layers = c.num_hidden_layers;
  m.heads = c.num_attention_heads;
  m.kv_heads = c.num_key_value_heads;
  m.head_dim = c.head_dim;
  m.sliding_window = c.sliding_window;
  m.max_position_embeddings = int_field(j, "max_position_embeddings", 0);
  m.tie_word_embeddings = bool_field(j, "tie_word_embeddings", starts_with(m.model_type, "gemma"));
  m.experts = std::max(int_field(j, "num_local_experts", 0), int_field(j, "num_experts", 0));
  if (m.is_moe()) {
    m.experts_per_token = std::clamp<int64_t>(int_field(j, "num_experts_per_tok", 2), 1, m.experts);
    m.expert_intermediate_size = int_field(j, "moe_intermediate_size", c.intermediate_size);
    m.shared_expert_intermediate_size = int_field(j, "shared_expert_intermediate_size", 0);
  } else {
    m.intermediate_size = c.intermediate_size;
  }
  m.sliding_layers = std::clamp<int64_t>(sliding_layer_count(j, m), 0, m.layers);
  m.full_layers = m.layers - m.sliding_layers;
  if (m.sliding_layers == 0) m.sliding_window.reset();
  count_params(m);
  return m;
}

std::vector<std::string> list_models(const std::string& models_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(models_dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

ModelSpec load_model(const std::string& name_or_path, const std::string& models_dir) {
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json");
  const std::string path = is_path ? name_or_path : (fs::path(models_dir) / (name_or_path + ".json")).string();
  std::ifstream in(path);
  if (!in) {
    if (is_path)
      DOOLY_THROW(InputError, "check the path of the config.json", "--model {}: cannot open", utf8::echo(path));
    DOOLY_THROW(
        InputError, fmt::format("use one of {} or the path of a config.json", fmt::join(list_models(models_dir), ", ")),
        "unknown model '{}' (no {}.json in {})", utf8::echo(name_or_path), utf8::echo(name_or_path), models_dir);
  }
  std::stringstream text;
  text << in.rdbuf();
  ModelSpec m = model_from_json(text.str(), path);
  m.name = fs::path(path).stem().string();
  return m;
}

}  // namespace dooly::sim
