#include "dooly/trace/model_config.hpp"

#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"

namespace dooly::trace {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;

// The parser's message quotes the bytes it last read, which may be any bytes of the file: keep the message
// printable ASCII so that it is one readable line (and valid UTF-8 for the Python binding).
std::string printable(std::string_view text, size_t max_chars) {
  std::string out;
  for (char ch : text.substr(0, max_chars)) {
    const auto c = static_cast<unsigned char>(ch);
    out += (c >= 0x20 && c < 0x7f) ? ch : '?';
  }
  return out;
}

struct Checker {
  const json& obj;  // the object the sizes are read from (the config or its text_config)
  const std::string& source;
  const std::string& prefix;

  [[noreturn]] void fail(std::string_view field, const std::string& problem, const std::string& fix) const {
    DOOLY_THROW(InputError, fix, "{}: {}{}: {}", source, prefix, field, problem);
  }

  // nullopt when the field is absent or null and optional; otherwise a checked positive size.
  std::optional<int64_t> size(std::string_view field, bool required, const std::string& example) const {
    const auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) {
      if (!required) return std::nullopt;
      fail(field, "missing",
           fmt::format("add \"{}\": <the model's value> (e.g. {}); without it transformers would "
                       "use its own default and trace another model",
                       field, example));
    }
    if (!it->is_number_integer())
      fail(field, fmt::format("{} is not an integer", it->dump(-1, ' ', true).substr(0, 40)),
           fmt::format("write \"{}\" as a positive integer (e.g. {})", field, example));
    const bool negative = it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0;
    if (negative || (it->is_number_unsigned() ? it->get<uint64_t>() == 0 : it->get<int64_t>() == 0))
      fail(field, fmt::format("{} is not positive", it->dump()), fmt::format("give a size >= 1 (e.g. {})", example));
    if (it->is_number_unsigned() ? it->get<uint64_t>() > uint64_t(kMaxConfigSize) : it->get<int64_t>() > kMaxConfigSize)
      fail(field, fmt::format("{} is above {} (2^24), no real model has that", it->dump(), kMaxConfigSize),
           fmt::format("check the value (e.g. {})", example));
    return it->get<int64_t>();
  }
};

}  // namespace

ModelConfigCheck check_model_config(std::string_view json_text, const std::string& source) {
  json doc;
  bool too_deep = false;
  try {
    // The callback sees every value with its depth; anything nested deeper than kMaxDepth is dropped (and
    // the config refused below), so a hostile file cannot make the checks recurse without bound.
    json::parser_callback_t depth_guard = [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth) too_deep = true;
      return depth <= kMaxDepth;
    };
    doc = json::parse(json_text.begin(), json_text.end(), depth_guard);
  } catch (const json::parse_error& e) {
    DOOLY_THROW(InputError, "fix the file so that it is one JSON object (a Hugging Face config.json)",
                "{}: not JSON (byte {}: {})", source, e.byte, printable(e.what(), 160));
  } catch (const json::exception& e) {  // out_of_range: a number beyond double (1e999)
    DOOLY_THROW(InputError, "write sizes as plain integers (a Hugging Face config.json)", "{}: not JSON ({})", source,
                printable(e.what(), 160));
  }
  if (too_deep)
    DOOLY_THROW(InputError, "a config.json is a flat object with a few nested parameter objects",
                "{}: JSON nested deeper than {} levels", source, kMaxDepth);
  if (!doc.is_object())
    DOOLY_THROW(InputError, "a model config is one JSON object of config.json keys",
                "{}: the top level is a JSON {}, not an object", source, doc.type_name());

  ModelConfigCheck out;
  const auto mt = doc.find("model_type");
  if (mt == doc.end() || !mt->is_string() || mt->get_ref<const std::string&>().empty())
    DOOLY_THROW(InputError, "add the Hugging Face model type, e.g. \"model_type\": \"llama\"",
                "{}: model_type: missing or not a non-empty string", source);
  out.model_type = mt->get<std::string>();

  const json* sizes = &doc;
  if (!doc.contains("hidden_size")) {
    const auto tc = doc.find("text_config");
    if (tc != doc.end() && tc->is_object()) {
      sizes = &*tc;
      out.prefix = "text_config.";
    }
  }
  const Checker c{*sizes, source, out.prefix};
  out.hidden_size = *c.size("hidden_size", true, "4096 for Llama 3.1 8B");
  out.vocab_size = *c.size("vocab_size", true, "128256 for Llama 3.1 8B");
  out.num_hidden_layers = *c.size("num_hidden_layers", true, "32 for Llama 3.1 8B");
  out.num_attention_heads = *c.size("num_attention_heads", true, "32 for Llama 3.1 8B");
  // MoE-only architectures may give only the expert size.
  const bool moe_only = !sizes->contains("intermediate_size") && sizes->contains("moe_intermediate_size");
  out.intermediate_size = moe_only ? *c.size("moe_intermediate_size", true, "768 for Qwen3-30B-A3B")
                                   : *c.size("intermediate_size", true, "14336 for Llama 3.1 8B");
  const auto kv = c.size("num_key_value_heads", false, "8 for Llama 3.1 8B");
  out.num_key_value_heads = kv.value_or(out.num_attention_heads);
  if (out.num_attention_heads % out.num_key_value_heads != 0)
    c.fail("num_key_value_heads",
           fmt::format("{} does not divide num_attention_heads = {}", out.num_key_value_heads, out.num_attention_heads),
           "use a divisor of num_attention_heads (grouped-query attention shares each KV head among an equal "
           "number of query heads)");
  const auto hd = c.size("head_dim", false, "128 for Llama 3.1 8B");
  if (hd) {
    out.head_dim = *hd;
  } else {
    if (out.hidden_size % out.num_attention_heads != 0)
      c.fail("hidden_size",
             fmt::format("{} is not divisible by num_attention_heads = {} and head_dim is not given", out.hidden_size,
                         out.num_attention_heads),
             "make hidden_size a multiple of num_attention_heads, or give head_dim");
    out.head_dim = out.hidden_size / out.num_attention_heads;
  }
  out.sliding_window = c.size("sliding_window", false, "4096 for Mistral 7B v0.1");
  return out;
}

}  // namespace dooly::trace
