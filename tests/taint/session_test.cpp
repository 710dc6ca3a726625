// The adapter protocol: label ids, integer arithmetic, JSON calls in and out.
#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/taint/session.hpp"

namespace dooly::taint {
namespace {

using nlohmann::json;

TEST(Session, IntegerArithmeticAndDescribe) {
  Session s;
  const int64_t h = s.sym("hidden_size", Kind::model_config, 64);
  const int64_t n = s.sym("num_attention_heads", Kind::model_config, 4);
  const int64_t d = s.binary("floordiv", h, n);
  EXPECT_EQ(s.describe(d), (json{{"v", 16}, {"k", "MODEL_CONFIG"}, {"e", "hidden_size//num_attention_heads"}, {"f", "16"}}));
  const int64_t t = s.sym("NUM_TOKS", Kind::num_toks, 9);
  const int64_t td = s.binary("mul", t, d);
  EXPECT_EQ(s.describe(td)["k"], "MIX");
  EXPECT_EQ(s.describe(td)["f"], "16*NUM_TOKS");
  EXPECT_THROW(s.label(9999), InputError);
}

// The KV tokens a sliding-window layer reads depend on the window (sum over requests of q + min(past, w-1)),
// which no formula over the step's totals states: a derived label keeps the window's value in its value
// form, so windows 48 and 4096 hash apart while the read count itself is still hashed by name.
TEST(Session, DerivedQuantityKeepsConfigArgumentsByValue) {
  Session s;
  const int64_t w48 = s.sym("sliding_window", Kind::model_config, 48);
  const int64_t w4096 = s.sym("sliding_window", Kind::model_config, 4096);
  const int64_t a = s.derived("KV_TOKS_SLIDING", Kind::num_toks, 272, {w48});
  const int64_t b = s.derived("KV_TOKS_SLIDING", Kind::num_toks, 652, {w4096});
  EXPECT_EQ(s.describe(a), (json{{"v", 272}, {"k", "NUM_TOKS"}, {"e", "KV_TOKS_SLIDING(sliding_window)"},
                                 {"f", "KV_TOKS_SLIDING(48)"}}));
  EXPECT_EQ(s.describe(b)["f"], "KV_TOKS_SLIDING(4096)");
  const int64_t h = s.sym("head_dim", Kind::model_config, 16);
  EXPECT_EQ(s.describe(s.binary("mul", a, h))["f"], "16*KV_TOKS_SLIDING(48)");
  EXPECT_EQ(s.describe(s.binary("mul", a, h))["k"], "MIX");
  EXPECT_THROW(s.derived("X", Kind::num_toks, 1, {9999}), InputError);
}

TEST(Session, PropagatesAJsonCall) {
  Session s;
  const int64_t t = s.sym("NUM_TOKS", Kind::num_toks, 9);
  const int64_t h = s.sym("hidden_size", Kind::model_config, 64);
  const int64_t one = s.constant(1);
  json call = {{"op", "Tensor.view"},
               {"args", json::array({json{{"s", {1, 9, 64}}, {"t", {one, t, h}}, {"d", "float32"}},
                                     json{{"i", 9}, {"l", t}}, -1, 8})},
               {"outputs", json::array({json{{"s", {9, 8, 8}}}})}};
  json r = s.propagate(call);
  EXPECT_EQ(r["op"], "view");
  EXPECT_EQ(r["rule"], "view");
  auto ids = r["outputs"][0]["t"];
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(s.describe(ids[0])["e"], "NUM_TOKS");
  EXPECT_EQ(s.describe(ids[1])["e"], "hidden_size//8");
  EXPECT_EQ(s.describe(ids[1])["k"], "MODEL_CONFIG");
  EXPECT_EQ(s.describe(ids[2])["e"], "8");
  EXPECT_EQ(s.counters().ops, 1);
  EXPECT_EQ(s.counters().fallback_ops, 0);
}

TEST(Session, UnlabelledInputsAndUnknownOpsAreCounted) {
  Session s;
  json call = {{"op", "mylib.fused_thing"},
               {"args", json::array({json{{"s", {3, 5}}}})},
               {"outputs", json::array({json{{"s", {5, 7}}}})}};
  json r = s.propagate(call);
  EXPECT_EQ(r["rule"], "fallback");
  EXPECT_EQ(s.counters().unlabelled_inputs, 2);
  EXPECT_EQ(s.counters().fallback_ops, 1);
  EXPECT_EQ(s.counters().unknown_dims, 2) << "5 matches an UNLABELLED (unknown) input; 7 matches nothing";
}

TEST(Session, LabelValueMismatchIsAnError) {
  Session s;
  const int64_t t = s.sym("NUM_TOKS", Kind::num_toks, 9);
  json call = {{"op", "add"}, {"args", json::array({json{{"i", 10}, {"l", t}}})}, {"outputs", json::array()}};
  EXPECT_THROW(s.propagate(call), InputError);
}

}  // namespace
}  // namespace dooly::taint
