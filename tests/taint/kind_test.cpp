// Property tests of the combination table: random compositions obey the table, and combine is
// commutative, associative and idempotent; the documented table is checked cell by cell.
#include <gtest/gtest.h>

#include <random>

#include "dooly/common/error.hpp"
#include "dooly/taint/kind.hpp"

namespace dooly::taint {
namespace {

constexpr Kind N = Kind::none, C = Kind::model_config, T = Kind::num_toks, R = Kind::num_reqs,
               MT = Kind::max_num_toks, MR = Kind::max_num_reqs, X = Kind::mix, U = Kind::unknown;

TEST(Kind, TableAsDocumented) {
  // Rows and columns in the order N C T R MT MR X U (docs/dooly-tracing.md, "Combination table").
  const Kind table[8][8] = {
      /* N  */ {N, C, T, R, MT, MR, X, U},
      /* C  */ {C, C, X, X, X, X, X, U},
      /* T  */ {T, X, T, X, T, X, X, U},
      /* R  */ {R, X, X, R, X, R, X, U},
      /* MT */ {MT, X, T, X, MT, X, X, U},
      /* MR */ {MR, X, X, R, X, MR, X, U},
      /* X  */ {X, X, X, X, X, X, X, U},
      /* U  */ {U, U, U, U, U, U, U, U},
  };
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(combine(kAllKinds[i], kAllKinds[j]), table[i][j])
          << to_string(kAllKinds[i]) << " + " << to_string(kAllKinds[j]);
}

TEST(Kind, CommutativeAssociativeIdempotent) {
  for (Kind a : kAllKinds) {
    EXPECT_EQ(combine(a, a), a);
    EXPECT_EQ(combine(a, N), a) << "NONE is the identity";
    EXPECT_EQ(combine(a, U), U) << "UNKNOWN absorbs";
    for (Kind b : kAllKinds) {
      EXPECT_EQ(combine(a, b), combine(b, a));
      for (Kind c : kAllKinds) EXPECT_EQ(combine(combine(a, b), c), combine(a, combine(b, c)));
    }
  }
}

// A fold over a random sequence equals a direct reading of the rules: UNKNOWN if any is UNKNOWN;
// otherwise count the axes (config, tokens, requests) present; 0 -> NONE, >=2 (or any MIX) -> MIX;
// one axis -> that kind, a limit only if every contributor on that axis was the limit.
TEST(Kind, RandomCompositionsObeyTheRules) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 20000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<Kind> seq;
    for (int i = 0; i < n; ++i) seq.push_back(kAllKinds[rng() % 8]);
    Kind folded = N;
    for (Kind k : seq) folded = combine(folded, k);
    // Also fold in a shuffled order: the result must not depend on order.
    std::vector<Kind> shuffled = seq;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    Kind folded2 = N;
    for (Kind k : shuffled) folded2 = combine(k, folded2);
    ASSERT_EQ(folded, folded2);

    bool any_u = false, any_x = false, cfg = false, toks = false, reqs = false, toks_real = false, reqs_real = false;
    for (Kind k : seq) {
      any_u |= k == U; any_x |= k == X; cfg |= k == C;
      toks |= k == T || k == MT; toks_real |= k == T;
      reqs |= k == R || k == MR; reqs_real |= k == R;
    }
    Kind expect;
    if (any_u) expect = U;
    else if (any_x || int(cfg) + int(toks) + int(reqs) >= 2) expect = X;
    else if (cfg) expect = C;
    else if (toks) expect = toks_real ? T : MT;
    else if (reqs) expect = reqs_real ? R : MR;
    else expect = N;
    ASSERT_EQ(folded, expect) << "trial " << trial;
  }
}

TEST(Kind, NamesRoundTripAndBadNameIsClear) {
  for (Kind k : kAllKinds) EXPECT_EQ(kind_from_string(to_string(k)), k);
  try {
    kind_from_string("NUM_TOKENS");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'NUM_TOKENS' is not a taint kind"), std::string::npos);
  }
}

TEST(Kind, LimitsBecomeTheQuantityTheyBound) {
  EXPECT_EQ(bound_by(MT), T);
  EXPECT_EQ(bound_by(MR), R);
  EXPECT_EQ(bound_by(C), C);
  EXPECT_TRUE(varies_with_requests(X));
  EXPECT_FALSE(varies_with_requests(MT));
  EXPECT_TRUE(hashed_by_value(C));
  EXPECT_FALSE(hashed_by_value(T));
}

}  // namespace
}  // namespace dooly::taint
