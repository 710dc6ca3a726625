// Dedup counts across the golden tiny traces (tests/data/traces/, regenerate with
// `python -m dooly.tracer.golden`, see docs/dooly-tracing.md). The numbers are exact; why they are what
// they are is written next to each assertion.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dooly/signature/sign.hpp"
#include "dooly/trace/trace.hpp"

namespace dooly::signature {
namespace {

trace::Trace golden(const std::string& model) {
  return trace::read_trace(std::string(DOOLY_SOURCE_DIR) + "/tests/data/traces/" + model + "-tiny__paged_sdpa.json");
}

struct ModelUnits {
  std::set<std::string> ops;                 // distinct op hashes (both phases)
  std::map<std::string, std::set<std::string>> ops_by_phase;
  int64_t op_occurrences = 0;
  std::map<std::string, std::vector<int64_t>> layer_counts;  // phase -> counts of each decoder-layer representative
};

ModelUnits units_of(const trace::Trace& t) {
  ModelUnits m;
  for (const auto& u : count_units(t)) {
    if (u.sig.is_op) {
      m.ops.insert(u.sig.hash);
      m.ops_by_phase[u.phase].insert(u.sig.hash);
      m.op_occurrences += u.count;
    } else if (u.sig.name.find("DecoderLayer") != std::string::npos) {
      m.layer_counts[u.phase].push_back(u.count);
    }
  }
  return m;
}

size_t shared(const std::set<std::string>& a, const std::set<std::string>& b) {
  size_t n = 0;
  for (const auto& h : a) n += b.count(h);
  return n;
}

TEST(Dedup, RepeatedLayersCollapse) {
  // Tiny Llama and Qwen2 have 3 identical decoder layers: one representative with count 3 per phase.
  // Gemma 2 alternates sliding-window (even layers) and global attention (odd layers) over 6 layers: two
  // representatives with 3 each. They differ in the attention module's sliding_window attribute (32 vs None)
  // and, in the mixed step, in the ops (the sliding path reads the cache with eq/masked_scatter).
  for (const char* m : {"llama-3.1-8b", "qwen2.5-7b"}) {
    ModelUnits u = units_of(golden(m));
    EXPECT_EQ(u.layer_counts["prefill"], std::vector<int64_t>{3}) << m;
    EXPECT_EQ(u.layer_counts["mixed"], std::vector<int64_t>{3}) << m;
  }
  ModelUnits g = units_of(golden("gemma-2-9b-it"));
  EXPECT_EQ(g.layer_counts["prefill"], (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(g.layer_counts["mixed"], (std::vector<int64_t>{3, 3}));
}

TEST(Dedup, CountsAcrossLlamaQwenGemma) {
  const ModelUnits l = units_of(golden("llama-3.1-8b"));
  const ModelUnits q = units_of(golden("qwen2.5-7b"));
  const ModelUnits g = units_of(golden("gemma-2-9b-it"));

  // Llama: 60 distinct ops in the prefill step and 62 in the mixed one; 54 are the same in both. The prefill
  // step has no cached tokens, so its attention uses the new keys directly (KV dims labelled NUM_TOKS: 6 ops,
  // expand..sdpa); the mixed step reads the paged cache (index_select + KV_TOKS dims: 8 ops). 60 + 62 - 54 = 68.
  EXPECT_EQ(l.ops_by_phase.at("prefill").size(), 60u);
  EXPECT_EQ(l.ops_by_phase.at("mixed").size(), 62u);
  EXPECT_EQ(l.ops.size(), 68u);
  EXPECT_EQ(l.op_occurrences, 494);  // 244 ops in the prefill forward + 250 in the mixed one

  // Qwen2 has the Llama layout with q/k/v biases, default RoPE and rms_norm_eps 1e-6 (Llama: llama3 RoPE,
  // 1e-5, no biases). Shared with Llama (20): the embedding and residual add, the MLP's gate/down/mul/silu
  // (same sizes, no bias), the bias-free [hidden x hidden] projection (Llama's q_proj/o_proj = Qwen's o_proj),
  // lm_head, the logits row gather, and the rotary frequency ops (cat/cos/sin/matmul/...) whose shapes and
  // scalars coincide. The attention-module ops differ: Qwen2Attention carries a sliding_window attribute.
  EXPECT_EQ(q.ops.size(), 71u);
  EXPECT_EQ(shared(q.ops, l.ops), 20u);

  // Gemma 2 (GELU-tanh MLP, (1+w) RMSNorm, scaled embedding, logit soft-capping, head_dim 16 explicit) shares
  // only plain linears of equal shape (q/k/o, gate/down, lm_head), the MLP's mul, the residual add and the
  // logits row gather with the two earlier models: 8.
  EXPECT_EQ(g.ops.size(), 121u);
  std::set<std::string> earlier = l.ops;
  earlier.insert(q.ops.begin(), q.ops.end());
  EXPECT_EQ(shared(g.ops, earlier), 8u);

  std::set<std::string> all = earlier;
  all.insert(g.ops.begin(), g.ops.end());
  EXPECT_EQ(all.size(), 68u + (71u - 20u) + (121u - 8u));  // 232
}

TEST(Dedup, SignaturesAreStableAcrossRuns) {
  // Same input -> same hashes, computed twice from two reads of the file.
  const auto a = count_units(golden("gemma-2-9b-it"));
  const auto b = count_units(golden("gemma-2-9b-it"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].sig.hash, b[i].sig.hash);
    EXPECT_EQ(a[i].sig.canonical, b[i].sig.canonical);
    EXPECT_EQ(a[i].count, b[i].count);
  }
}

}  // namespace
}  // namespace dooly::signature
