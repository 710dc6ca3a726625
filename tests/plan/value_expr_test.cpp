// Value forms at a point: the grammar the taint expressions print, Python's floor division, derived quantities.
#include "dooly/plan/value_expr.hpp"

#include <gtest/gtest.h>

#include <map>

#include "dooly/common/error.hpp"

namespace dooly::plan {
namespace {

Resolver from(std::map<std::string, int64_t> m) {
  return [m](const std::string& n) -> std::optional<int64_t> {
    auto it = m.find(n);
    return it == m.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
}

TEST(ValueExpr, EvaluatesWhatTheTracerPrints) {
  const Resolver r = from({{"NUM_TOKS", 37}, {"NUM_REQS", 5}, {"KV_TOKS_SLIDING(48)", 200}, {"CACHE_SLOTS", 85248}});
  EXPECT_EQ(evaluate("NUM_TOKS", r), 37);
  EXPECT_EQ(evaluate("128*NUM_TOKS", r), 4736);
  EXPECT_EQ(evaluate("1+NUM_REQS", r), 6);
  EXPECT_EQ(evaluate("-1*(NUM_TOKS//2)+NUM_TOKS", r), 19);  // what a split's uneven last piece prints
  EXPECT_EQ(evaluate("NUM_TOKS%8", r), 5);
  EXPECT_EQ(evaluate("ceildiv(NUM_TOKS,8)", r), 5);
  EXPECT_EQ(evaluate("min(NUM_TOKS,NUM_REQS)*max(2,3)", r), 15);
  EXPECT_EQ(evaluate("KV_TOKS_SLIDING(48)", r), 200);
  EXPECT_EQ(evaluate("CACHE_SLOTS-NUM_TOKS", r), 85211);
  EXPECT_EQ(evaluate("42", r), 42);
}

TEST(ValueExpr, FloorDivisionAndModuloFollowPython) {
  const Resolver r = from({{"X", -7}});
  EXPECT_EQ(evaluate("X//2", r), -4);
  EXPECT_EQ(evaluate("X%3", r), 2);
  EXPECT_EQ(evaluate("ceildiv(X,2)", r), -3);
}

TEST(ValueExpr, VariablesAreCollectedWithDerivedQuantitiesByTheirText) {
  EXPECT_EQ(variables_of("128*NUM_TOKS+ceildiv(KV_TOKS,256)"), (std::set<std::string>{"KV_TOKS", "NUM_TOKS"}));
  EXPECT_EQ(variables_of("KV_TOKS_SLIDING(48)+MAX_SEQLEN_K_SLIDING(48)"),
            (std::set<std::string>{"KV_TOKS_SLIDING(48)", "MAX_SEQLEN_K_SLIDING(48)"}));
  EXPECT_TRUE(variables_of("4096").empty());
}

TEST(ValueExpr, BadTextAndUnboundNamesAreOneLineErrors) {
  const Resolver r = from({{"NUM_TOKS", 3}});
  for (const char* bad : {"NUM_TOKS*", "(NUM_TOKS", "NUM_TOKS)", "NUM_TOKS $ 2", "", "ceildiv(1)"})
    EXPECT_THROW(evaluate(bad, r), InputError) << bad;
  try {
    evaluate("NUM_REQS+1", r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'NUM_REQS' is not bound"), std::string::npos) << e.what();
  }
  EXPECT_THROW(evaluate("NUM_TOKS//0", r), InputError);
  // What a fuzzer would try: overflow, deep nesting, a zero divisor where only variables are collected.
  EXPECT_THROW(evaluate("9223372036854775807+1", r), InputError);
  EXPECT_THROW(evaluate("99999999999999999999", r), InputError);
  EXPECT_THROW(evaluate("4611686018427387904*4", r), InputError);
  EXPECT_THROW(evaluate(std::string(1000, '(') + "1" + std::string(1000, ')'), r), InputError);
  try {  // found by the value_form fuzzer: a NUL and a line break in the text must not break the one-line message
    constexpr char kText[] = "-1*(N/M\0\n)%3";
    evaluate(std::string(kText, sizeof kText - 1), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  EXPECT_EQ(variables_of("NUM_TOKS//0+X%0"), (std::set<std::string>{"NUM_TOKS", "X"}));
}

}  // namespace
}  // namespace dooly::plan
