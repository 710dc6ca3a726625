// The vLLM v1 policy model (not validated live) on hand-made scenarios: running requests first, chunked prefill,
// recompute preemption of the last admitted request on KV exhaustion, no admission in a step that preempted,
// max_num_seqs, and capture-size padding.
#include "dooly/sim/vllm_engine.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "sim_support.hpp"

namespace dooly::sim {
namespace {

using testing::slices;
using testing::Stepper;
using testing::tiny;

EngineConfig vllm_config(int64_t budget, int64_t num_blocks, int64_t block_size) {
  EngineConfig c;
  c.engine = "vllm";
  c.max_batch_tokens = budget;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  return c;
}

TEST(VllmEngine, RunningFirstThenWaitingWithChunkedPrefill) {
  Stepper s("vllm", vllm_config(10, 100, 4), tiny("llama-3.1-8b"), {{4, 3}, {12, 2}, {5, 2}});
  s.admit_all();
  s.run();
  ASSERT_EQ(s.seen.size(), 4u);
  EXPECT_EQ(s.seen[0].slices, slices({{0, 4}, {1, 6}}));
  EXPECT_EQ(s.seen[1].slices, slices({{0, 1}, {1, 6}, {2, 3}}));
  EXPECT_EQ(s.seen[2].slices, slices({{0, 1}, {1, 1}, {2, 2}}));
  EXPECT_EQ(s.seen[3].slices, slices({{2, 1}}));
}

TEST(VllmEngine, WithoutChunkedPrefillALongPromptWaitsForAFullBudget) {
  EngineConfig c = vllm_config(10, 100, 4);
  c.chunked_prefill = false;
  Stepper s("vllm", c, tiny("llama-3.1-8b"), {{4, 3}, {8, 2}});
  s.admit_all();
  s.run();
  EXPECT_EQ(s.seen[0].slices, slices({{0, 4}}));  // 8 > the 6 tokens left
  EXPECT_EQ(s.seen[1].slices, slices({{0, 1}, {1, 8}}));
}

// 7 blocks of 4 (6 usable, one is the null block): two prompts of 7 hold 2 blocks each, 3 from their ninth token.
// When the first computes its 13th token (step 6) it needs a fourth block and none is free: the last admitted is
// preempted (its 3 blocks freed, first in the waiting queue), and no waiting request is admitted in that step. It
// is readmitted, recomputing its prompt and its 6 tokens, once the first finishes.
TEST(VllmEngine, KvExhaustionPreemptsTheLastAdmittedForRecompute) {
  Stepper s("vllm", vllm_config(100, 7, 4), tiny("llama-3.1-8b"), {{7, 10}, {7, 10}});
  s.admit_all();
  s.run();
  EXPECT_EQ(s.seen[0].slices, slices({{0, 7}, {1, 7}}));
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(s.seen[i].slices, slices({{0, 1}, {1, 1}})) << i;
  EXPECT_EQ(s.seen[6].slices, slices({{0, 1}}));
  EXPECT_EQ(s.seen[6].preempted, 1);
  for (int i = 7; i <= 9; ++i) EXPECT_EQ(s.seen[i].slices, slices({{0, 1}})) << i;  // 2 free < the 4 it needs
  EXPECT_EQ(s.seen[10].slices, slices({{1, 13}}));                                  // 7 + 6 generated, recomputed
  for (int i = 11; i <= 13; ++i) EXPECT_EQ(s.seen[i].slices, slices({{1, 1}})) << i;
  ASSERT_EQ(s.seen.size(), 14u);
  EXPECT_EQ(s.states()[1].preemptions, 1);
  EXPECT_EQ(s.states()[1].generated, 10);
}

TEST(VllmEngine, MaxNumSeqsCapsRunningRequests) {
  EngineConfig c = vllm_config(100, 100, 4);
  c.max_requests = 2;
  Stepper s("vllm", c, tiny("llama-3.1-8b"), {{3, 2}, {3, 2}, {3, 2}});
  s.admit_all();
  s.run();
  EXPECT_EQ(s.seen[0].slices, slices({{0, 3}, {1, 3}}));
  EXPECT_EQ(s.seen[1].slices, slices({{0, 1}, {1, 1}}));
  EXPECT_EQ(s.seen[2].slices, slices({{2, 3}}));
}

TEST(VllmEngine, GraphsPadToTheCaptureSizesUpTo512Tokens) {
  Stepper s("vllm", vllm_config(8192, 1000, 16), tiny("llama-3.1-8b"), {{3, 2}, {300, 1}, {600, 1}});
  s.admit(0);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.seen[0].padded, 4);
  EXPECT_EQ(s.seen[0].path, ForwardPath::graph_replay);
  s.admit(1);
  ASSERT_TRUE(s.step());  // 1 + 300 tokens: to 304 (multiples of 16 above 256)
  EXPECT_EQ(s.seen[1].padded, 304);
  s.admit(2);
  ASSERT_TRUE(s.step());  // 600 > 512: eager, unpadded
  EXPECT_EQ(s.seen[2].padded, 600);
  EXPECT_EQ(s.seen[2].path, ForwardPath::eager);
}

TEST(VllmEngine, RefusesRequestsVllmWouldReject) {
  Stepper s("vllm", vllm_config(100, 5, 4), tiny("llama-3.1-8b"), {{20, 10}});
  EXPECT_THROW(s.engine().check(s.states()), InputError);  // 29 tokens need 8 blocks, 4 usable
  Stepper t("vllm", vllm_config(100, 100000, 16), tiny("llama-3.1-8b"), {{131000, 100}});
  EXPECT_THROW(t.engine().check(t.states()), InputError);  // beyond max_position_embeddings 131072
  EngineConfig c = vllm_config(100, 100, 4);
  c.scheduler = "fifo";
  EXPECT_THROW(Stepper("vllm", c, tiny("llama-3.1-8b"), {}), InputError);
}

}  // namespace
}  // namespace dooly::sim
