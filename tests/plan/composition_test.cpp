// A step composition gives every step quantity its value: checked against what the engine itself produced in the
// golden traces (the tracer labels the step's inputs by role and records their sizes).
#include "dooly/plan/composition.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dooly/trace/trace.hpp"

namespace dooly::plan {
namespace {

// Every request-side quantity whose value form is a bare step quantity, with its traced value, per step.
std::map<std::string, int64_t> traced_quantities(const trace::Step& step) {
  std::map<std::string, int64_t> out;
  for (const auto& op : step.ops)
    for (const auto* list : {&op.inputs, &op.outputs})
      for (const auto& t : *list)
        for (const auto& d : t.shape)
          if (is_step_quantity(d.value_form)) out[d.value_form] = d.value;
  return out;
}

trace::Trace golden(const std::string& model) {
  return trace::read_trace(std::string(DOOLY_SOURCE_DIR) + "/tests/data/traces/" + model + "-tiny__paged_sdpa.json");
}

// The golden traces' requests: prompts 300, 150, 200 under max_batch_tokens 521. Step 0 prefills 300 + 150 + 71;
// step 1 decodes requests 0 and 1 and prefills the remaining 129 tokens of request 2 after its first 71.
const Composition kPrefill{{{300, 0}, {150, 0}, {71, 0}}};
const Composition kMixed{{{1, 300}, {1, 150}, {129, 71}}};

TEST(Composition, ReproducesEveryTracedQuantityOfTheGoldenSteps) {
  for (const char* model : {"llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b-it"}) {
    const trace::Trace t = golden(model);
    ASSERT_EQ(t.steps.size(), 2u);
    const Composition* comps[] = {&kPrefill, &kMixed};
    for (size_t s = 0; s < 2; ++s) {
      const auto traced = traced_quantities(t.steps[s]);
      ASSERT_FALSE(traced.empty());
      for (const auto& [name, value] : traced)
        EXPECT_EQ(comps[s]->value_of(name), value) << model << " step " << s << " " << name;
    }
  }
}

TEST(Composition, GemmaSlidingLayersReadAtMostTheWindow) {
  const auto traced = traced_quantities(golden("gemma-2-9b-it").steps[1]);
  ASSERT_TRUE(traced.count("KV_TOKS_SLIDING(32)"));
  EXPECT_EQ(traced.at("KV_TOKS_SLIDING(32)"), 224);  // 31+1 + 31+1 + 31+129
  EXPECT_EQ(traced.at("KV_TOKS"), 652);              // 301 + 151 + 200
}

TEST(Composition, CountsAndClasses) {
  EXPECT_EQ(kMixed.num_tokens(), 131);
  EXPECT_EQ(kMixed.decode_requests(), 2);
  EXPECT_EQ(kMixed.prefill_tokens(), 129);
  EXPECT_EQ(kMixed.value_of("MAX_SEQLEN_Q"), 129);
  EXPECT_EQ(kMixed.value_of("MAX_SEQLEN_K"), 301);
  EXPECT_EQ(kMixed.value_of("MAX_SEQLEN_K_SLIDING(32)"), 160);
  EXPECT_EQ(kMixed.value_of("hidden_size"), std::nullopt);
  EXPECT_TRUE(is_limit("CACHE_SLOTS"));
  EXPECT_FALSE(is_step_quantity("CACHE_SLOTS"));
  EXPECT_FALSE(is_step_quantity("KV_TOKS_SLIDING(0)"));
}

}  // namespace
}  // namespace dooly::plan
