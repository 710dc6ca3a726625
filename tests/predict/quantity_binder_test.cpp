// The one-pass binder gives what plan::Composition::value_of defines, for every quantity the store's sweeps use.
#include "dooly/predict/quantity_binder.hpp"

#include <gtest/gtest.h>

#include <random>

namespace dooly::predict {
namespace {

TEST(QuantityBinder, AgreesWithValueOfOnRandomCompositions) {
  const std::vector<std::string> names{"NUM_TOKS",
                                       "NUM_REQS",
                                       "KV_TOKS",
                                       "MAX_SEQLEN_Q",
                                       "MAX_SEQLEN_K",
                                       "KV_TOKS_SLIDING(512)",
                                       "KV_TOKS_SLIDING(4096)",
                                       "MAX_SEQLEN_K_SLIDING(2047)",
                                       "PREFILL_TOKS",
                                       "DECODE_REQS",
                                       "NOT_A_QUANTITY"};
  const QuantityBinder binder(names);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    plan::Composition c;
    const size_t n = rng() % 40;
    for (size_t r = 0; r < n; ++r) {
      const bool decode = rng() % 3 != 0;
      c.requests.push_back({decode ? 1 : static_cast<int64_t>(1 + rng() % 900),
                            rng() % 4 == 0 ? 0 : static_cast<int64_t>(rng() % 9000)});
    }
    int64_t values[16];
    binder.bind(c, values);
    for (size_t i = 0; i < names.size(); ++i)
      EXPECT_EQ(values[i], QuantityBinder::value(c, names[i]).value_or(0)) << names[i] << " trial " << trial;
  }
  EXPECT_EQ(QuantityBinder::value(plan::Composition{{{5, 0}, {1, 9}}}, "PREFILL_TOKS"), 5);
  EXPECT_EQ(QuantityBinder::value(plan::Composition{{{5, 0}, {1, 9}}}, "DECODE_REQS"), 1);
  EXPECT_FALSE(QuantityBinder::value(plan::Composition{}, "MAX_NUM_TOKS"));  // a limit, not a step quantity
}

}  // namespace
}  // namespace dooly::predict
