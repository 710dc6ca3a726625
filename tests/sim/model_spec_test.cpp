// Model sizes from config.json: parameter counts against transformers 5.17 (counted on the meta device), the
// attention layer types its config classes resolve, and the one-line errors.
#include "dooly/sim/model_spec.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "dooly/common/error.hpp"
#include "sim_support.hpp"

namespace dooly::sim {
namespace {

using testing::models_dir;

// sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters()) on the meta device.
struct Expected {
  const char* name;
  int64_t params;
  int64_t full, sliding;
};
constexpr Expected kModels[] = {
    {"gemma-2-9b-it", 9241705984, 21, 21},
    {"gemma-3-1b-it", 999885952, 4, 22},
    {"granite-3.1-8b-instruct", 8170848256, 40, 0},
    {"llama-3.1-8b", 8030261248, 32, 0},
    {"mistral-7b-v0.3", 7248023552, 32, 0},
    {"mixtral-8x7b-v0.1", 46702792704, 32, 0},
    {"olmo-2-1124-7b", 7298617344, 32, 0},
    {"olmoe-1b-7b-0924", 6919161856, 16, 0},
    {"phi-3-mini-4k-instruct", 3821079552, 0, 32},
    {"phi-4-mini-instruct", 3836021760, 0, 32},
    {"qwen2.5-7b", 7615616512, 28, 0},
    {"qwen3-30b-a3b", 30532122624, 48, 0},
    {"qwen3-8b", 8190735360, 36, 0},
};

TEST(ModelSpec, ParameterCountsAreWithinHalfAPercentOfTransformers) {
  for (const Expected& e : kModels) {
    const ModelSpec m = load_model(e.name, models_dir());
    EXPECT_EQ(m.name, e.name);
    EXPECT_NEAR(static_cast<double>(m.params), static_cast<double>(e.params), 0.005 * static_cast<double>(e.params))
        << e.name;
  }
}

TEST(ModelSpec, LayerTypesAreTransformersOwn) {
  for (const Expected& e : kModels) {
    const ModelSpec m = load_model(e.name, models_dir());
    EXPECT_EQ(m.full_layers, e.full) << e.name;
    EXPECT_EQ(m.sliding_layers, e.sliding) << e.name;
    EXPECT_EQ(m.sliding_window.has_value(), e.sliding > 0) << e.name;
  }
  EXPECT_EQ(*load_model("gemma-3-1b-it", models_dir()).sliding_window, 512);
  // Qwen2.5's config carries a window, but use_sliding_window is false.
  EXPECT_FALSE(load_model("qwen2.5-7b", models_dir()).sliding_window);
}

TEST(ModelSpec, MixtureOfExpertsSizes) {
  const ModelSpec q = load_model("qwen3-30b-a3b", models_dir());
  EXPECT_EQ(q.experts, 128);
  EXPECT_EQ(q.experts_per_token, 8);
  EXPECT_EQ(q.expert_intermediate_size, 768);
  EXPECT_LT(q.active_params_per_token, q.params / 5);  // ~3B active of 30B
  const ModelSpec mx = load_model("mixtral-8x7b-v0.1", models_dir());
  EXPECT_EQ(mx.experts, 8);
  EXPECT_EQ(mx.expert_intermediate_size, 14336);
  EXPECT_EQ(load_model("llama-3.1-8b", models_dir()).kv_bytes_per_token(2), 2 * 32 * 8 * 128 * 2);
}

TEST(ModelSpec, UnknownModelIsOneLineNamingTheKnownOnes) {
  try {
    (void)load_model("no-such-model", models_dir());
    FAIL();
  } catch (const InputError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("unknown model 'no-such-model'"), std::string::npos) << w;
    EXPECT_NE(w.find("llama-3.1-8b"), std::string::npos) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos);
  }
  EXPECT_THROW((void)load_model("/no/such/config.json", models_dir()), InputError);
  EXPECT_THROW((void)model_from_json("{\"model_type\": \"llama\"}", "x.json"), InputError);
}

}  // namespace
}  // namespace dooly::sim
