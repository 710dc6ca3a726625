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

trace::Trace read_golden(const std::string& model) {
  return trace::read_trace(std::string(DOOLY_SOURCE_DIR) + "/tests/data/traces/" + model + "-tiny__paged_sdpa.json");
}
// Each golden trace read once for the counting tests (they are large, and those tests only read them).
const trace::Trace& golden(const std::string& model) {
  static std::map<std::string, trace::Trace> cache;
  auto it = cache.find(model);
  if (it == cache.end()) it = cache.emplace(model, read_golden(model)).first;
  return it->second;
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
  // and in the ops: the SDPA's KV dims (KV_TOKS_SLIDING(sliding_window) vs KV_TOKS) in both steps, and in
  // the mixed step the sliding path's cache read (eq/masked_scatter).
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

  // Llama: 63 distinct ops in the prefill step and 64 in the mixed one; 56 are the same in both. The prefill
  // step has no cached tokens, so its attention uses the new keys directly (KV dims labelled NUM_TOKS: 6 ops,
  // expand..sdpa); the mixed step reads the paged cache (index_select + KV_TOKS dims: 8 ops). 63 + 64 - 56 = 71.
  // Trace format 3 hashes layouts: 33 of format 2's 68 signatures take a view (the rotary halves, transposed
  // heads, expanded KV heads) and changed hash, and 3 split from a contiguous twin (the rotary `mul` on a view of
  // q and of k, a `contiguous` of transposed heads): 68 -> 71.
  EXPECT_EQ(l.ops_by_phase.at("prefill").size(), 63u);
  EXPECT_EQ(l.ops_by_phase.at("mixed").size(), 64u);
  EXPECT_EQ(l.ops.size(), 71u);
  EXPECT_EQ(l.op_occurrences, 494);  // 244 ops in the prefill forward + 250 in the mixed one

  // Qwen2 has the Llama layout with q/k/v biases, default RoPE and rms_norm_eps 1e-6 (Llama: llama3 RoPE,
  // 1e-5, no biases). An op's signature holds only what it receives (no module attributes), so everything of
  // equal shapes and scalars is shared with Llama: 68 of 74, the whole attention path included (Qwen2Attention's
  // sliding_window attribute, None here, is in module signatures only). Qwen's own 6: the q and k/v
  // projections with bias (2), its norms' add (eps 1e-6 as a scalar), and three casts in its rotary module
  // (float/to with other arguments than Llama's).
  EXPECT_EQ(q.ops.size(), 74u);
  EXPECT_EQ(shared(q.ops, l.ops), 68u);

  // Gemma 2 (GELU-tanh MLP, (1+w) RMSNorm, scaled embedding, logit soft-capping, head_dim 16 explicit, sliding
  // and global layers alternating). 95 distinct ops (91 in format 2, before layouts were hashed): its sliding and global attention ops merge where they
  // receive the same things, and stay apart where the window reaches the labels (the SDPA's mask/KV dims
  // KV_TOKS_SLIDING(sliding_window) in both steps, the sliding path's cache read with eq/masked_scatter in the
  // mixed step). Shared with the two earlier models: 68, the norm's pow/mean/rsqrt and its add (eps 1e-6,
  // as Qwen's), the projections, the rotary ops and the global layers' attention (same shapes and scale 0.25).
  // Its own 27: GELU-tanh, soft-capping (div/tanh/mul), the scaled embedding, the (1+w) norm's mul/type_as,
  // the sliding attention and cache-read ops.
  EXPECT_EQ(g.ops.size(), 95u);
  std::set<std::string> earlier = l.ops;
  earlier.insert(q.ops.begin(), q.ops.end());
  EXPECT_EQ(shared(g.ops, earlier), 68u);

  std::set<std::string> all = earlier;
  all.insert(g.ops.begin(), g.ops.end());
  EXPECT_EQ(all.size(), 71u + (74u - 68u) + (95u - 68u));  // 104
}

TEST(Dedup, SignaturesAreStableAcrossRuns) {
  // Same input -> same hashes, computed twice from two reads of the file.
  const auto a = count_units(read_golden("gemma-2-9b-it"));
  const auto b = count_units(read_golden("gemma-2-9b-it"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].sig.hash, b[i].sig.hash);
    EXPECT_EQ(a[i].sig.canonical, b[i].sig.canonical);
    EXPECT_EQ(a[i].count, b[i].count);
  }
}

}  // namespace
}  // namespace dooly::signature
