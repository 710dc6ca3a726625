#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/taint/expr.hpp"

namespace dooly::taint {
namespace {

const ExprPtr T = sym("NUM_TOKS", Kind::num_toks, 37);
const ExprPtr R = sym("NUM_REQS", Kind::num_reqs, 5);
const ExprPtr H = sym("hidden_size", Kind::model_config, 64);
const ExprPtr NH = sym("num_attention_heads", Kind::model_config, 4);
const ExprPtr D = sym("head_dim", Kind::model_config, 16);

TEST(Expr, ArithmeticKeepsValuesAndKinds) {
  ExprPtr e = mul(T, D);
  EXPECT_EQ(e->value(), 37 * 16);
  EXPECT_EQ(e->kind(), Kind::mix);
  EXPECT_EQ(e->text(), "NUM_TOKS*head_dim");
  EXPECT_EQ(mul(D, T)->text(), e->text()) << "products are sorted";
  EXPECT_EQ(floordiv(H, NH)->text(), "hidden_size//num_attention_heads");
  EXPECT_EQ(floordiv(H, NH)->kind(), Kind::model_config);
  EXPECT_EQ(floordiv(H, NH)->value(), 16);
  EXPECT_EQ(add(constant(1), R)->text(), "1+NUM_REQS");
  EXPECT_EQ(add(constant(1), R)->kind(), Kind::num_reqs);
}

TEST(Expr, DivisionCancelsRequestFactors) {
  // view(T, H) -> view(T, -1, D): the -1 is (T*H)//(T*D) = H//D, config only.
  ExprPtr e = floordiv(mul(T, H), mul(T, D));
  EXPECT_EQ(e->text(), "hidden_size//head_dim");
  EXPECT_EQ(e->kind(), Kind::model_config);
  EXPECT_EQ(e->value(), 4);
  EXPECT_EQ(floordiv(mul(T, D), D)->text(), "NUM_TOKS");
  EXPECT_EQ(floordiv(mul(T, D), D)->kind(), Kind::num_toks);
}

TEST(Expr, LikeTermsMergeAndCancel) {
  EXPECT_EQ(sub(add(T, D), D)->text(), "NUM_TOKS");
  EXPECT_EQ(sub(T, T)->text(), "0");
  EXPECT_EQ(sub(T, T)->kind(), Kind::none);
  EXPECT_EQ(add(T, T)->text(), "2*NUM_TOKS");
  EXPECT_EQ(add(add(T, R), constant(3))->text(), add(constant(3), add(R, T))->text()) << "sums are canonical";
}

TEST(Expr, ValueFormSubstitutesConfigKeepsRequests) {
  EXPECT_EQ(value_form(mul(T, D))->text(), "16*NUM_TOKS");
  EXPECT_EQ(value_form(floordiv(H, NH))->text(), "16");
  ExprPtr idx = sym("layer_idx", Kind::none, 3);
  EXPECT_EQ(value_form(idx)->text(), "layer_idx") << "index names never split layers by value";
  EXPECT_EQ(value_form(add(T, mul(R, D)))->text(), "16*NUM_REQS+NUM_TOKS");
}

TEST(Expr, PythonDivisionSemantics) {
  EXPECT_EQ(floordiv(constant(-7), constant(2))->value(), -4);
  EXPECT_EQ(mod(constant(-7), constant(2))->value(), 1);
  EXPECT_EQ(ceildiv(T, constant(8))->value(), 5);
  EXPECT_EQ(apply_binary("rsub", constant(1), T)->text(), "-1+NUM_TOKS");
  EXPECT_EQ(apply_binary("rsub", constant(1), T)->value(), 36);
  EXPECT_THROW(apply_binary("matmul", T, T), Error);
  EXPECT_THROW(floordiv(T, constant(0)), Error);
}

TEST(Expr, BoundChangesTheKind) {
  ExprPtr lim = sym("MAX_NUM_TOKS", Kind::max_num_toks, 521);
  ExprPtr b = func("bound", {lim}, 521, bound_by(lim->kind()));
  EXPECT_EQ(b->kind(), Kind::num_toks);
  EXPECT_EQ(b->text(), "bound(MAX_NUM_TOKS)");
  EXPECT_TRUE(b->has_request_symbol());
}

}  // namespace
}  // namespace dooly::taint
