// check_model_config: every shipped config passes with its own values; each bad field is refused with one
// message naming the source and the field.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/trace/model_config.hpp"

namespace dooly::trace {
namespace {

using nlohmann::json;

json tiny_llama() {
  return {{"model_type", "llama"},    {"hidden_size", 64},
          {"vocab_size", 512},        {"num_hidden_layers", 3},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"intermediate_size", 176}, {"max_position_embeddings", 4096}};
}

// The message of the InputError check_model_config throws for j ("" when it throws none).
std::string error_of(const std::string& text) {
  try {
    check_model_config(text, "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
std::string error_of(const json& j) { return error_of(j.dump()); }

TEST(ModelConfig, TinyLlamaValues) {
  const ModelConfigCheck c = check_model_config(tiny_llama().dump(), "cfg.json");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.prefix, "");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 176);
  EXPECT_FALSE(c.sliding_window.has_value());
}

TEST(ModelConfig, OptionalFieldsDefaultAsTransformersDoes) {
  json j = tiny_llama();
  j.erase("num_key_value_heads");
  j["head_dim"] = 24;  // explicit head_dim: hidden_size need not be a multiple of the heads
  j["hidden_size"] = 66;
  j["sliding_window"] = 48;
  const ModelConfigCheck c = check_model_config(j.dump(), "cfg.json");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 24);
  ASSERT_TRUE(c.sliding_window.has_value());
  EXPECT_EQ(*c.sliding_window, 48);
  j["num_key_value_heads"] = nullptr;
  j["sliding_window"] = nullptr;
  const ModelConfigCheck d = check_model_config(j.dump(), "cfg.json");
  EXPECT_EQ(d.num_key_value_heads, 4);
  EXPECT_FALSE(d.sliding_window.has_value());
}

TEST(ModelConfig, MissingSizesAreRefusedNotDefaulted) {
  for (const char* field :
       {"hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"}) {
    json j = tiny_llama();
    j.erase(field);
    EXPECT_EQ(error_of(j).rfind(std::string("cfg.json: ") + field + ": missing", 0), 0u)
        << field << ": " << error_of(j);
  }
  json moe = tiny_llama();
  moe.erase("intermediate_size");
  moe["moe_intermediate_size"] = 80;
  EXPECT_EQ(check_model_config(moe.dump(), "cfg.json").intermediate_size, 80);
}

TEST(ModelConfig, BadValuesNameTheField) {
  struct Case {
    const char* field;
    json value;
    const char* problem;
  };
  const Case cases[] = {
      {"hidden_size", 0, "hidden_size: 0 is not positive"},
      {"hidden_size", -64, "hidden_size: -64 is not positive"},
      {"vocab_size", 64.5, "vocab_size: 64.5 is not an integer"},
      {"num_hidden_layers", "3", "num_hidden_layers: \"3\" is not an integer"},
      {"num_attention_heads", true, "num_attention_heads: true is not an integer"},
      {"intermediate_size", json::array({176}), "intermediate_size: [176] is not an integer"},
      {"vocab_size", int64_t{1} << 25, "vocab_size: 33554432 is above 16777216"},
      {"hidden_size", uint64_t{18446744073709551615ull}, "hidden_size: 18446744073709551615 is above"},
      {"num_key_value_heads", 3, "num_key_value_heads: 3 does not divide num_attention_heads = 4"},
      {"num_key_value_heads", 0, "num_key_value_heads: 0 is not positive"},
      {"head_dim", -1, "head_dim: -1 is not positive"},
      {"sliding_window", 0, "sliding_window: 0 is not positive"},
      {"hidden_size", 66, "hidden_size: 66 is not divisible by num_attention_heads = 4 and head_dim is not given"},
  };
  for (const auto& c : cases) {
    json j = tiny_llama();
    j[c.field] = c.value;
    const std::string msg = error_of(j);
    EXPECT_EQ(msg.rfind(std::string("cfg.json: ") + c.problem, 0), 0u) << msg;
    EXPECT_NE(msg.find(" — "), std::string::npos) << "a fix sentence: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(ModelConfig, NotAConfigAtAll) {
  EXPECT_EQ(error_of(std::string("{\"model_type\": \"llama\",")).rfind("cfg.json: not JSON (byte", 0), 0u);
  EXPECT_EQ(error_of(std::string("")).rfind("cfg.json: not JSON", 0), 0u);
  EXPECT_EQ(error_of(json::array({1, 2})).rfind("cfg.json: the top level is a JSON array, not an object", 0), 0u);
  json j = tiny_llama();
  j.erase("model_type");
  EXPECT_EQ(error_of(j).rfind("cfg.json: model_type: missing", 0), 0u);
  j["model_type"] = 7;
  EXPECT_EQ(error_of(j).rfind("cfg.json: model_type: missing or not a non-empty string", 0), 0u);
  EXPECT_EQ(
      error_of(std::string(100000, '[') + std::string(100000, ']')).rfind("cfg.json: JSON nested deeper than 64", 0),
      0u);
  EXPECT_EQ(
      error_of(std::string("{\"model_type\": \"llama\", \"hidden_size\": 13e1072}")).rfind("cfg.json: not JSON (", 0),
      0u);
  // Bytes that are not UTF-8 are not echoed: the message stays printable ASCII (the binding makes a str of it).
  const std::string bad = error_of(std::string("{\"model_type\": \"ll\xc3\x28ma\"}"));
  EXPECT_EQ(bad.rfind("cfg.json: not JSON", 0), 0u) << bad;
  const std::string problem = bad.substr(0, bad.find(" — "));
  for (char c : problem) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << bad;
}

TEST(ModelConfig, TextConfigOfAWrapper) {
  json j = {{"model_type", "gemma3"}, {"text_config", tiny_llama()}};
  const ModelConfigCheck c = check_model_config(j.dump(), "cfg.json");
  EXPECT_EQ(c.prefix, "text_config.");
  EXPECT_EQ(c.hidden_size, 64);
  j["text_config"]["vocab_size"] = 0;
  EXPECT_EQ(error_of(j).rfind("cfg.json: text_config.vocab_size: 0 is not positive", 0), 0u);
}

TEST(ModelConfig, EveryShippedConfigPasses) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const char* dir : {"data/models", "data/models/tiny"}) {
    for (const auto& e : fs::directory_iterator(fs::path(DOOLY_SOURCE_DIR) / dir)) {
      if (e.path().extension() != ".json") continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      const json j = json::parse(text.str());
      const ModelConfigCheck c = check_model_config(text.str(), e.path().string());
      EXPECT_EQ(c.hidden_size, j["hidden_size"].get<int64_t>()) << e.path();
      EXPECT_EQ(c.num_hidden_layers, j["num_hidden_layers"].get<int64_t>()) << e.path();
      ++n;
    }
  }
  EXPECT_EQ(n, 28);
}

}  // namespace
}  // namespace dooly::trace
