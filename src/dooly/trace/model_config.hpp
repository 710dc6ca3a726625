#pragma once
// The checks a model config (a Hugging Face config.json) must pass before dooly builds a model from it.
// transformers fills a missing size with its own default (hidden_size 4096, vocab_size 32000: another
// model, traced silently) and turns a bad one into a traceback after minutes of work; these checks say
// which field is wrong, in one line, before anything is built.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dooly::trace {

// Upper bound of every checked size: generous for any real model (vocabularies are ~2^18), small enough
// that nothing sized from these values can exhaust memory because of a typo.
inline constexpr int64_t kMaxConfigSize = int64_t{1} << 24;

// The checked values. Fields of a `text_config` object are used when the top level has no hidden_size
// (multimodal wrappers); `prefix` is then "text_config.".
struct ModelConfigCheck {
  std::string model_type;
  std::string prefix;  // "" or "text_config.": where the sizes below were read
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;        // = num_attention_heads when the config leaves it out (or null)
  int64_t head_dim = 0;                   // the config's, or hidden_size / num_attention_heads
  int64_t intermediate_size = 0;          // the dense FFN size; moe_intermediate_size when only that is given
  std::optional<int64_t> sliding_window;  // absent or null: none
};

// Parses json_text (a config.json) and checks it. Throws InputError "<source>: <field>: <problem>" with a
// fix for: text that is not JSON or not an object, JSON nested deeper than 64 levels, a missing or
// non-string model_type, a missing, non-integer, non-positive or absurd (> kMaxConfigSize) hidden_size,
// vocab_size, num_hidden_layers, num_attention_heads, intermediate_size (or moe_intermediate_size),
// num_key_value_heads, head_dim or sliding_window (the last three may be absent or null),
// num_key_value_heads not dividing num_attention_heads, hidden_size not divisible by num_attention_heads
// when head_dim is absent. Throws nothing else.
ModelConfigCheck check_model_config(std::string_view json_text, const std::string& source);

}  // namespace dooly::trace
