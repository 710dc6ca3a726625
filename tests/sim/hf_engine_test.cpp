// The HF engine model's rules on hand-made scenarios, each step's batch exact: FIFO and prefill-first candidate
// orders, split prefills, the free-block safety margin, eviction (soft reset) when the cache is full, CUDA-graph
// padding and capture, and the engine's own refusals.
#include "dooly/sim/hf_engine.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "sim_support.hpp"

namespace dooly::sim {
namespace {

using testing::Req;
using testing::slices;
using testing::Stepper;
using testing::tiny;

EngineConfig hf_config(int64_t max_batch_tokens, int64_t num_blocks, int64_t block_size = 256) {
  EngineConfig c;
  c.max_batch_tokens = max_batch_tokens;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  return c;
}

// docs/engine-hf.md's example, as the real engine scheduled it on the CPU (tiny Llama, max_batch_tokens 64, 331
// blocks, max_batch_requests 263): requests (40, 4), (30, 8), (50, 3).
TEST(HfEngine, ReproducesTheEnginesOwnStepsForTheDocumentedExample) {
  EngineConfig c = hf_config(64, 331);
  c.max_requests = 263;
  Stepper s("hf", c, tiny("llama-3.1-8b"), {{40, 4}, {30, 8}, {50, 3}});
  s.admit_all();
  s.run();
  ASSERT_EQ(s.seen.size(), 9u);
  EXPECT_EQ(s.seen[0].slices, slices({{0, 40}, {1, 24}}));
  EXPECT_EQ(s.seen[0].prefill_tokens, 64);
  EXPECT_EQ(s.seen[1].slices, slices({{0, 1}, {1, 6}, {2, 50}}));
  EXPECT_EQ(s.seen[1].tokens, 57);
  EXPECT_EQ(s.seen[1].prefill_tokens, 56);
  EXPECT_EQ(s.seen[1].decode_requests, 1);
  for (int i : {2, 3}) EXPECT_EQ(s.seen[i].slices, slices({{0, 1}, {1, 1}, {2, 1}})) << i;
  for (int i = 4; i <= 8; ++i) EXPECT_EQ(s.seen[i].slices, slices({{1, 1}})) << i;
  int64_t tokens = 0;
  for (const auto& st : s.seen) tokens += st.tokens;
  EXPECT_EQ(tokens, (40 + 30 + 50) + (3 + 7 + 2));  // sum(prompt) + sum(output - 1)
  for (const RequestState& r : s.states()) EXPECT_EQ(r.status, Status::finished);
}

// FIFO: decodes, then the split prefill's remainder, then waiting requests; the budget splits what does not fit.
TEST(HfEngine, FifoServesDecodesThenSplitPrefillsThenWaiting) {
  Stepper s("hf", hf_config(10, 50, 4), tiny("llama-3.1-8b"), {{4, 3}, {12, 2}, {5, 2}});
  s.admit_all();
  s.run();
  ASSERT_EQ(s.seen.size(), 4u);
  EXPECT_EQ(s.seen[0].slices, slices({{0, 4}, {1, 6}}));
  EXPECT_EQ(s.seen[1].slices, slices({{0, 1}, {1, 6}, {2, 3}}));
  EXPECT_EQ(s.seen[2].slices, slices({{0, 1}, {1, 1}, {2, 2}}));
  EXPECT_EQ(s.seen[3].slices, slices({{2, 1}}));
}

TEST(HfEngine, PrefillFirstServesSplitPrefillsBeforeDecodes) {
  EngineConfig c = hf_config(10, 50, 4);
  c.scheduler = "prefill_first";
  Stepper s("hf", c, tiny("llama-3.1-8b"), {{4, 3}, {12, 2}, {5, 2}});
  s.admit_all();
  s.run();
  ASSERT_EQ(s.seen.size(), 4u);
  EXPECT_EQ(s.seen[0].slices, slices({{0, 4}, {1, 6}}));
  EXPECT_EQ(s.seen[1].slices, slices({{1, 6}, {0, 1}, {2, 3}}));
  EXPECT_EQ(s.seen[2].slices, slices({{2, 2}, {0, 1}, {1, 1}}));
  EXPECT_EQ(s.seen[3].slices, slices({{2, 1}}));
}

// Block size 4, 10 blocks, margin 0.5: the first prompt takes 6 blocks ((20 + 1) // 4 + 1), leaving 4 < 5 free, so
// no other prefill is admitted until it finishes; decodes go on.
TEST(HfEngine, SafetyMarginStopsAdmissionButNotDecodes) {
  EngineConfig c = hf_config(100, 10, 4);
  c.safety_margin = 0.5;
  Stepper s("hf", c, tiny("llama-3.1-8b"), {{20, 5}, {6, 2}, {3, 2}});
  s.admit_all();
  s.run();
  ASSERT_GE(s.seen.size(), 7u);
  EXPECT_EQ(s.seen[0].slices, slices({{0, 20}}));
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(s.seen[i].slices, slices({{0, 1}})) << i;
  EXPECT_EQ(s.seen[5].slices, slices({{1, 6}, {2, 3}}));
  EXPECT_EQ(s.seen[6].slices, slices({{1, 1}, {2, 1}}));
}

TEST(HfEngine, FifoDefaultMarginIsTheEnginesFifteenPercent) {
  Stepper s("hf", hf_config(100, 20, 4), tiny("llama-3.1-8b"), {{4, 2}});
  EXPECT_DOUBLE_EQ(dynamic_cast<HfEngine&>(s.engine()).scheduler().safety_margin(), 0.15);
  EngineConfig pf = hf_config(100, 20, 4);
  pf.scheduler = "prefill_first";
  Stepper p("hf", pf, tiny("llama-3.1-8b"), {{4, 2}});
  EXPECT_DOUBLE_EQ(dynamic_cast<HfEngine&>(p.engine()).scheduler().safety_margin(), 0.0);
}

// 6 blocks of 4: two prompts of 7 take 3 blocks each ((7 + 1) // 4 + 1). At position 12 both need a block and none
// is free: nothing is scheduled, so the engine evicts the newest starved request (soft reset: its 7 + 6 tokens
// become a prompt, queued last), blocks new requests until one finishes, and schedules again.
TEST(HfEngine, FullCacheEvictsTheNewestStarvedRequest) {
  EngineConfig c = hf_config(100, 6, 4);
  c.safety_margin = 0.0;
  Stepper s("hf", c, tiny("llama-3.1-8b"), {{7, 10}, {7, 10}});
  s.admit_all();
  s.run();
  ASSERT_EQ(s.seen.size(), 14u);
  EXPECT_EQ(s.seen[0].slices, slices({{0, 7}, {1, 7}}));
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(s.seen[i].slices, slices({{0, 1}, {1, 1}})) << i;
  EXPECT_EQ(s.seen[6].slices, slices({{0, 1}}));
  EXPECT_EQ(s.seen[6].preempted, 1);
  for (int i = 7; i <= 9; ++i) EXPECT_EQ(s.seen[i].slices, slices({{0, 1}})) << i;  // new requests blocked
  EXPECT_EQ(s.seen[10].slices, slices({{1, 13}}));  // after request 0 finished: its recompute
  for (int i = 11; i <= 13; ++i) EXPECT_EQ(s.seen[i].slices, slices({{1, 1}})) << i;
  EXPECT_EQ(s.states()[1].preemptions, 1);
  EXPECT_EQ(s.states()[1].generated, 10);
}

// With graphs, queries pad to a multiple of 64 and cached tokens read to a multiple of 16384; the first step at a
// padded shape captures the graph, later ones replay it.
TEST(HfEngine, CudaGraphsPadAndCaptureOncePerShape) {
  EngineConfig c = hf_config(256, 100);
  c.cuda_graphs = "on";
  Stepper s("hf", c, tiny("llama-3.1-8b"), {{100, 3}});
  s.admit_all();
  s.run();
  ASSERT_EQ(s.seen.size(), 3u);
  EXPECT_EQ(s.seen[0].padded, 128);
  EXPECT_EQ(s.seen[0].path, ForwardPath::graph_capture);
  EXPECT_EQ(s.seen[1].padded, 64);
  EXPECT_EQ(s.seen[1].path, ForwardPath::graph_capture);  // another key: q 64 instead of 128
  EXPECT_EQ(s.seen[2].padded, 64);
  EXPECT_EQ(s.seen[2].path, ForwardPath::graph_replay);
}

// Decodes of the same padded size replay one graph until the cached tokens read cross a multiple of 16384: the
// staircase REFERENCE §5 measured (step time flat in the batch inside a stair, a step up at the next).
TEST(HfEngine, DecodeShapesFormAStaircaseInCachedTokens) {
  EngineConfig c = hf_config(8192, 200);  // 51,200 cached tokens: the padding is not capped by the cache
  c.cuda_graphs = "on";
  Stepper s("hf", c, tiny("llama-3.1-8b"), {{8000, 300}, {8000, 300}});
  s.admit_all();
  s.run();
  int switches = 0;
  for (const auto& st : s.seen) {
    if (st.prefill_tokens > 0) continue;
    EXPECT_EQ(st.padded, 64);
    EXPECT_EQ(st.kv_padded, st.kv_read <= 16384 ? 16384 : 32768) << st.kv_read;
    if (st.kv_read == 16385 || st.kv_read == 16386) {
      EXPECT_EQ(st.path, ForwardPath::graph_capture);  // the next stair: a new graph
      ++switches;
    }
  }
  EXPECT_EQ(switches, 1);
  EXPECT_EQ(s.seen.back().path, ForwardPath::graph_replay);
}

TEST(HfEngine, CombinationRulePerPath) {
  StepPlan p;
  p.cost.device_s = 0.010;
  p.cost.host_serial_s = 0.001;
  p.cost.host_launch_s = 0.005;
  p.cost.energy_j = 5;
  p.shape.path = ForwardPath::eager;
  combine(p, 100);
  EXPECT_DOUBLE_EQ(p.duration_s, 0.011);
  EXPECT_DOUBLE_EQ(p.energy_j, 5 + 100 * 0.001);
  p.cost.host_launch_s = 0.030;  // launch-bound: the device waits for the host
  combine(p, 100);
  EXPECT_DOUBLE_EQ(p.duration_s, 0.031);
  p.cost.host_launch_s = 0.0002;
  p.shape.path = ForwardPath::graph_replay;
  combine(p, 100);
  EXPECT_DOUBLE_EQ(p.duration_s, 0.0112);
  p.cost.host_launch_s = 0.030;
  p.shape.path = ForwardPath::graph_capture;
  combine(p, 100);
  EXPECT_DOUBLE_EQ(p.duration_s, 0.001 + 0.030 + 0.010);  // the warm-up forward, then one more device pass
  EXPECT_DOUBLE_EQ(p.energy_j, 5 + 100 * (0.041 - 0.010));
}

TEST(HfEngine, ResolvesLikeTheEngine) {
  Stepper s("hf", EngineConfig{}, testing::tiny("gemma-2-9b-it"), {{4, 2}});
  const auto& e = dynamic_cast<HfEngine&>(s.engine());
  EXPECT_FALSE(e.cuda_graphs());          // sdpa needs a mask: no graphs unless asked
  EXPECT_EQ(e.max_batch_tokens(), 8192);  // the planner's default
  EXPECT_EQ(e.max_requests(), std::min<int64_t>(1024, e.cache().num_blocks()));  // sliding layers: no prefix sharing
  EXPECT_EQ(e.cache().groups().sliding, 1);
}

// The mask buffer's rows are num_blocks x block_size + max_batch_tokens wide: a caution when not 16-byte aligned.
TEST(HfEngine, CautionsAboutMaskRowsThatAreNotSixteenByteAligned) {
  Stepper odd("hf", hf_config(521, 331), tiny("llama-3.1-8b"), {{40, 4}});
  const std::vector<std::string> c = odd.engine().cautions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].find("85257 elements"), std::string::npos) << c[0];  // 331 x 256 + 521
  EXPECT_TRUE(Stepper("hf", hf_config(2048, 1024), tiny("llama-3.1-8b"), {{40, 4}}).engine().cautions().empty());
  EXPECT_TRUE(Stepper("hf", hf_config(8, 331), tiny("llama-3.1-8b"), {{4, 4}}).engine().cautions().empty());
}

TEST(HfEngine, RefusesWhatTheEngineWouldRefuse) {
  EXPECT_THROW(Stepper("hf", hf_config(64, 10, 2), tiny("llama-3.1-8b"), {}), InputError);  // block size < 4
  EngineConfig flash;
  flash.attention = "paged|flash_attention_2";
  EXPECT_THROW(Stepper("hf", flash, tiny("llama-3.1-8b"), {}), InputError);
  EngineConfig bad;
  bad.scheduler = "lifo";
  EXPECT_THROW(Stepper("hf", bad, tiny("llama-3.1-8b"), {}), InputError);
  Stepper s("hf", hf_config(256, 2), tiny("llama-3.1-8b"), {{600, 10}});
  try {
    s.engine().check(s.states());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("request 0 (prompt 600 + output 10 tokens) needs 3 KV blocks alone, the HF "
                                         "cache has 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(HfEngine, SchedulerRegistryRejectsDuplicates) {
  EXPECT_THROW(register_hf_scheduler("fifo", {}), DuplicateError);
  EXPECT_THROW(register_engine("hf", &make_hf_engine), DuplicateError);
  EXPECT_EQ(hf_scheduler_names(), (std::vector<std::string>{"fifo", "prefill_first"}));
}

}  // namespace
}  // namespace dooly::sim
