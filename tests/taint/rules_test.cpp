// Rule classes, driven through OpCall values the way an adapter's facts arrive.
#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/taint/rules.hpp"

namespace dooly::taint {
namespace {

const ExprPtr T = sym("NUM_TOKS", Kind::num_toks, 37);
const ExprPtr R = sym("NUM_REQS", Kind::num_reqs, 5);
const ExprPtr H = sym("hidden_size", Kind::model_config, 64);
const ExprPtr NH = sym("num_attention_heads", Kind::model_config, 4);
const ExprPtr D = sym("head_dim", Kind::model_config, 16);
const ExprPtr V = sym("vocab_size", Kind::model_config, 37);  // collides with NUM_TOKS on purpose

Value t(std::vector<ExprPtr> d) { return Value::make_tensor(std::move(d), "float32"); }
Value i(ExprPtr l) { return Value::make_int(std::move(l)); }
Value c(int64_t v) { return Value::make_int(constant(v)); }
Value observed(std::vector<int64_t> sizes) {
  std::vector<ExprPtr> d;
  for (auto s : sizes) d.push_back(unknown(s, "UNLABELLED"));
  return Value::make_tensor(d);
}
std::vector<std::string> texts(const Value& v) {
  std::vector<std::string> out;
  for (const auto& d : v.dims) out.push_back(d->text());
  return out;
}

const RuleRegistry& rules() {
  static const RuleRegistry r = default_rules();
  return r;
}

TEST(Rules, RegistryRejectsDuplicates) {
  RuleRegistry r;
  r.add("myop", "custom", fallback_rule);
  EXPECT_THROW(r.add("myop", "other", fallback_rule), DuplicateError);
  EXPECT_GT(rules().size(), 150u);
}

TEST(Rules, NormalisesNames) {
  EXPECT_EQ(normalize_op_name("torch.nn.functional.linear"), "linear");
  EXPECT_EQ(normalize_op_name("Tensor.__getitem__"), "getitem");
  EXPECT_EQ(normalize_op_name("add_"), "add");
  EXPECT_EQ(normalize_op_name("aten::view"), "view");
  EXPECT_EQ(normalize_op_name("__radd__"), "radd");
  EXPECT_EQ(normalize_op_name("__iadd__"), "add");
}

TEST(Rules, ViewInfersMinusOneFromProducts) {
  // [1, T, H] -> view(1, T, -1, D): the -1 is H//D (config), not MIX.
  OpCall call{"view", {t({constant(1), T, H}), c(1), i(T), c(-1), i(D)}, {}, {observed({1, 37, 4, 16})}};
  OpResult r = propagate(rules(), call);
  EXPECT_EQ(r.rule_class, "view");
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(texts(r.outputs[0]), (std::vector<std::string>{"1", "NUM_TOKS", "hidden_size//head_dim", "head_dim"}));
  EXPECT_EQ(r.outputs[0].dims[2]->kind(), Kind::model_config);
  EXPECT_EQ(r.unknown_dims, 0);
}

TEST(Rules, LinearMatmulAndAttention) {
  OpResult lin = propagate(rules(), {"linear", {t({constant(1), T, H}), t({mul(NH, D), H})}, {}, {observed({1, 37, 64})}});
  EXPECT_EQ(texts(lin.outputs[0]), (std::vector<std::string>{"1", "NUM_TOKS", "head_dim*num_attention_heads"}));
  OpResult mm = propagate(rules(), {"matmul", {t({NH, T, D}), t({NH, D, T})}, {}, {observed({4, 37, 37})}});
  EXPECT_EQ(texts(mm.outputs[0]), (std::vector<std::string>{"num_attention_heads", "NUM_TOKS", "NUM_TOKS"}));
  OpResult at = propagate(rules(), {"scaled_dot_product_attention", {t({constant(1), NH, T, D}), t({constant(1), NH, T, D}),
                                    t({constant(1), NH, T, D})}, {}, {observed({1, 4, 37, 16})}});
  EXPECT_EQ(texts(at.outputs[0]), (std::vector<std::string>{"1", "num_attention_heads", "NUM_TOKS", "head_dim"}));
}

TEST(Rules, CatSplitChunk) {
  OpResult cat = propagate(rules(), {"cat", {Value::make_list({t({T, D}), t({T, D})}), c(-1)}, {}, {observed({37, 32})}});
  EXPECT_EQ(texts(cat.outputs[0]), (std::vector<std::string>{"NUM_TOKS", "2*head_dim"}));
  OpResult ch = propagate(rules(), {"chunk", {t({T, mul(constant(2), D)}), c(2), c(-1)}, {}, {observed({37, 16}), observed({37, 16})}});
  ASSERT_EQ(ch.outputs.size(), 2u);
  EXPECT_EQ(texts(ch.outputs[1]), (std::vector<std::string>{"NUM_TOKS", "head_dim"}));
  OpResult sp = propagate(rules(), {"split", {t({T, H}), Value::make_list({i(D), i(sub(H, D))}), c(-1)}, {},
                                    {observed({37, 16}), observed({37, 48})}});
  EXPECT_EQ(texts(sp.outputs[1]), (std::vector<std::string>{"NUM_TOKS", "-1*head_dim+hidden_size"}));
}

TEST(Rules, SlicingBoundsAndLimits) {
  Value sl;
  sl.type = Value::Type::slice;
  sl.items = {Value{}, i(T), Value{}};
  ExprPtr lim = sym("MAX_NUM_TOKS", Kind::max_num_toks, 521);
  // buffer[:T] on a [MAX_NUM_TOKS, H] buffer -> [NUM_TOKS, H]
  OpResult r = propagate(rules(), {"getitem", {t({lim, H}), sl}, {}, {observed({37, 64})}});
  EXPECT_EQ(texts(r.outputs[0]), (std::vector<std::string>{"NUM_TOKS", "hidden_size"}));
  // buf[:MAX_NUM_TOKS] on a bigger scratch buffer: the limit bounds the slice -> NUM_TOKS
  Value sl2 = sl;
  sl2.items[1] = i(lim);
  OpResult r2 = propagate(rules(), {"getitem", {t({constant(4096)}), sl2}, {}, {observed({521})}});
  EXPECT_EQ(r2.outputs[0].dims[0]->kind(), Kind::num_toks);
  // x[..., -1:] -> 1 (a literal); x[None, :, 0]
  Value tail;
  tail.type = Value::Type::slice;
  tail.items = {c(-1), Value{}, Value{}};
  Value idx = Value::make_list({Value{}, [] { Value e; e.type = Value::Type::ellipsis; return e; }(), tail});
  idx.text = "tuple";
  OpResult r3 = propagate(rules(), {"getitem", {t({T, H}), idx}, {}, {observed({1, 37, 1})}});
  EXPECT_EQ(texts(r3.outputs[0]), (std::vector<std::string>{"1", "NUM_TOKS", "1"}));
  // advanced indexing with a [NUM_REQS] index tensor: rows selected per request.
  OpResult r4 = propagate(rules(), {"getitem", {t({T, H}), t({R})}, {}, {observed({5, 64})}});
  EXPECT_EQ(texts(r4.outputs[0]), (std::vector<std::string>{"NUM_REQS", "hidden_size"}));
}

TEST(Rules, BroadcastAndReduce) {
  OpResult b = propagate(rules(), {"mul", {t({constant(1), T, H}), t({H})}, {}, {observed({1, 37, 64})}});
  EXPECT_EQ(texts(b.outputs[0]), (std::vector<std::string>{"1", "NUM_TOKS", "hidden_size"}));
  OpResult m = propagate(rules(), {"mean", {t({constant(1), T, H}), c(-1)}, {{"keepdim", [] { Value b; b.type = Value::Type::boolean; b.boolean = true; return b; }()}},
                                   {observed({1, 37, 1})}});
  EXPECT_EQ(texts(m.outputs[0]), (std::vector<std::string>{"1", "NUM_TOKS", "1"}));
  OpResult p = propagate(rules(), {"transpose", {t({T, NH, D}), c(0), c(1)}, {}, {observed({4, 37, 16})}});
  EXPECT_EQ(texts(p.outputs[0]), (std::vector<std::string>{"num_attention_heads", "NUM_TOKS", "head_dim"}));
  OpResult e = propagate(rules(), {"embedding", {t({constant(1), T}), t({V, H})}, {}, {observed({1, 37, 64})}});
  EXPECT_EQ(texts(e.outputs[0]), (std::vector<std::string>{"1", "NUM_TOKS", "hidden_size"}));
}

TEST(Rules, SizeQueriesCarryLabelsIntoIntegers) {
  OpResult s = propagate(rules(), {"size", {t({constant(1), T, H})}, {}, {c(1), c(37), c(64)}});
  ASSERT_EQ(s.outputs.size(), 3u);
  EXPECT_EQ(s.outputs[1].label->text(), "NUM_TOKS");
  EXPECT_EQ(s.outputs[2].label->kind(), Kind::model_config);
  OpResult it = propagate(rules(), {"item", {t({})}, {}, {c(12)}});
  EXPECT_EQ(it.outputs[0].label->kind(), Kind::unknown);
  EXPECT_EQ(it.unknown_dims, 1);
}

TEST(Rules, UncoveredOpUsesFallbackAndFlagsAmbiguity) {
  // my_custom_op([T, V]) -> [37, 64, 3]: 37 matches both NUM_TOKS and vocab_size (collision), 64 matches
  // hidden_size... no: H is not an input here, so 64 matches nothing -> UNKNOWN; 3 matches nothing.
  OpResult r = propagate(rules(), {"my_custom_op", {t({T, V}), t({D})}, {}, {observed({37, 16, 3})}});
  EXPECT_EQ(r.rule_class, "fallback");
  EXPECT_EQ(r.coverage, Coverage::fallback);
  EXPECT_EQ(r.outputs[0].dims[0]->kind(), Kind::unknown);
  EXPECT_EQ(r.outputs[0].dims[0]->text(), "AMBIGUOUS");
  EXPECT_EQ(r.ambiguous, 1);
  EXPECT_EQ(r.outputs[0].dims[1]->text(), "head_dim");
  EXPECT_EQ(r.outputs[0].dims[2]->kind(), Kind::unknown);
  EXPECT_EQ(r.unknown_dims, 2);
  EXPECT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.front().find("no rule covers op 'my_custom_op'"), std::string::npos);
}

TEST(Rules, WrongPredictionIsNeverKeptSilently) {
  // A rule that lies about a size: the observed value wins, the dim is UNKNOWN and a note says why.
  RuleRegistry r;
  r.add("liar", "test", [](RuleContext&) { return std::vector<Value>{t({constant(3)})}; });
  OpResult res = propagate(r, {"liar", {}, {}, {observed({4})}});
  EXPECT_EQ(res.outputs[0].dims[0]->kind(), Kind::unknown);
  EXPECT_EQ(res.unknown_dims, 1);
  ASSERT_EQ(res.notes.size(), 1u);
  EXPECT_NE(res.notes[0].find("rule predicted 3=3 but the op produced 4"), std::string::npos);
}

TEST(Rules, MismatchedCallFallsBack) {
  // view with a non-integer size list -> the view rule declines, fallback labels by size.
  OpResult r = propagate(rules(), {"view", {t({T, H}), [] { Value e; e.type = Value::Type::string; return e; }()}, {}, {observed({37, 64})}});
  EXPECT_EQ(r.rule_class, "fallback");
  EXPECT_EQ(texts(r.outputs[0]), (std::vector<std::string>{"NUM_TOKS", "hidden_size"}));
}

}  // namespace
}  // namespace dooly::taint
