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
