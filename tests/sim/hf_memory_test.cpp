// HF's cache sizing against transformers 5.17's own PagedAttentionMemoryHandler, run on the same inputs (H200:
// 143,771 MiB; allocated = the parameters in bf16; max_memory_percent 0.9; paged|sdpa). Expected values were
// printed by infer_max_batch_tokens_and_num_blocks() with get_device_and_memory_breakdown patched to these numbers.
#include "dooly/sim/hf_memory.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "sim_support.hpp"

namespace dooly::sim {
namespace {

using testing::models_dir;

constexpr double kTotal = 143771.0 * 1024 * 1024;

struct Case {
  const char* name;
  int64_t params;  // transformers' count (the allocation the engine sees)
  int64_t auto_mbt, auto_blocks, blocks_at_521;
};
constexpr Case kCases[] = {
    {"gemma-2-9b-it", 9241705984, 8192, 2104, 2550},
    {"gemma-3-1b-it", 999885952, 8192, 13982, 99420},
    {"granite-3.1-8b-instruct", 8170848256, 8192, 2557, 2796},
    {"llama-3.1-8b", 8030261248, 8192, 3094, 3475},
    {"mistral-7b-v0.3", 7248023552, 8192, 3152, 3516},
    {"mixtral-8x7b-v0.1", 46702792704, 8192, 1322, 1479},
    {"olmo-2-1124-7b", 7298617344, 8192, 856, 883},
    {"olmoe-1b-7b-0924", 6919161856, 8192, 3085, 3430},
    {"phi-3-mini-4k-instruct", 3821079552, 8192, 1143, 1234},
    {"phi-4-mini-instruct", 3836021760, 8192, 2906, 3664},
    {"qwen2.5-7b", 7615616512, 8192, 6187, 7882},
    {"qwen3-30b-a3b", 30532122624, 8192, 2573, 3109},
    {"qwen3-8b", 8190735360, 8192, 2759, 3095},
};

HfMemoryInput input(const ModelSpec& m, int64_t params) {
  HfMemoryInput in;
  in.available_bytes = hf_available_bytes(kTotal, static_cast<double>(params) * 2, 0.9);
  in.attention_masks = m.sliding_layers > 0 ? 2 : 1;
  return in;
}

TEST(HfMemory, AutoSizingMatchesTheEngine) {
  for (const Case& c : kCases) {
    const ModelSpec m = load_model(c.name, models_dir());
    const HfCachePlan p = plan_hf_cache(m, input(m, c.params));
    EXPECT_EQ(p.max_batch_tokens, c.auto_mbt) << c.name;
    EXPECT_EQ(p.num_blocks, c.auto_blocks) << c.name;
  }
}

TEST(HfMemory, GivenMaxBatchTokensSolvesBlocks) {
  for (const Case& c : kCases) {
    const ModelSpec m = load_model(c.name, models_dir());
    HfMemoryInput in = input(m, c.params);
    in.max_batch_tokens = 521;
    EXPECT_EQ(plan_hf_cache(m, in).num_blocks, c.blocks_at_521) << c.name;
  }
}

TEST(HfMemory, GivenBlocksSolvesMaxBatchTokens) {
  const ModelSpec llama = load_model("llama-3.1-8b", models_dir());
  HfMemoryInput in = input(llama, 8030261248);
  EXPECT_EQ(in.available_bytes, 121224867840);
  in.num_blocks = 1000;
  EXPECT_EQ(plan_hf_cache(llama, in).max_batch_tokens, 74191);
  in.num_blocks = 3000;
  EXPECT_EQ(plan_hf_cache(llama, in).max_batch_tokens, 9896);
  const ModelSpec gemma = load_model("gemma-2-9b-it", models_dir());
  HfMemoryInput g = input(gemma, 9241705984);
  g.num_blocks = 500;
  EXPECT_EQ(plan_hf_cache(gemma, g).max_batch_tokens, 55022);
}

TEST(HfMemory, OtherBlockSizes) {
  const ModelSpec llama = load_model("llama-3.1-8b", models_dir());
  HfMemoryInput in = input(llama, 8030261248);
  in.block_size = 16;
  EXPECT_EQ(plan_hf_cache(llama, in).num_blocks, 49512);
  const ModelSpec q = load_model("qwen3-30b-a3b", models_dir());
  HfMemoryInput qi = input(q, 30532122624);
  qi.block_size = 32;
  qi.max_batch_tokens = 2048;
  EXPECT_EQ(plan_hf_cache(q, qi).num_blocks, 24138);
}

TEST(HfMemory, BothGivenAreCheckedLikeTheEngine) {
  const ModelSpec llama = load_model("llama-3.1-8b", models_dir());
  HfMemoryInput in = input(llama, 8030261248);
  in.max_batch_tokens = 8192;
  in.num_blocks = 3000;
  EXPECT_EQ(plan_hf_cache(llama, in).num_blocks, 3000);
  in.num_blocks = 4000;  // the engine's MemoryError
  try {
    (void)plan_hf_cache(llama, in);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("would refuse max_batch_tokens = 8192 with num_blocks = 4000"),
              std::string::npos)
        << e.what();
  }
}

TEST(HfMemory, LayerGroupsAreTheGcdOfTheTypeCounts) {
  const LayerGroups g2 = layer_groups(load_model("gemma-2-9b-it", models_dir()));
  EXPECT_EQ(g2.group_size, 21);
  EXPECT_EQ(g2.full, 1);
  EXPECT_EQ(g2.sliding, 1);
  const LayerGroups g3 = layer_groups(load_model("gemma-3-1b-it", models_dir()));  // 4 full, 22 sliding
  EXPECT_EQ(g3.group_size, 2);
  EXPECT_EQ(g3.full, 2);
  EXPECT_EQ(g3.sliding, 11);
  const LayerGroups p3 = layer_groups(load_model("phi-3-mini-4k-instruct", models_dir()));
  EXPECT_EQ(p3.full, 0);
  EXPECT_EQ(p3.sliding, 1);
}

}  // namespace
}  // namespace dooly::sim
