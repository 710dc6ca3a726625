// Each candidate recovers functions it can represent, exactly or within a stated bound, from synthetic points; its
// parameters round-trip; it declines what it cannot fit.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "dooly/common/error.hpp"
#include "dooly/predict/boosted_trees.hpp"
#include "dooly/predict/constant.hpp"
#include "dooly/predict/interpolation.hpp"
#include "dooly/predict/least_squares.hpp"
#include "dooly/predict/model.hpp"

namespace dooly::predict {
namespace {

Samples one_d(const std::vector<double>& xs, const std::function<double(double)>& f) {
  Samples s;
  s.dims = 1;
  for (double x : xs) s.add(std::vector<double>{x}, f(x));
  return s;
}

Samples two_d(const std::vector<double>& as, const std::vector<double>& bs,
              const std::function<double(double, double)>& f) {
  Samples s;
  s.dims = 2;
  for (double a : as)
    for (double b : bs) s.add(std::vector<double>{a, b}, f(a, b));
  return s;
}

double at(const Model& m, double a) { return m.evaluate(std::vector<double>{a}); }
double at(const Model& m, double a, double b) { return m.evaluate(std::vector<double>{a, b}); }

std::unique_ptr<Model> round_trip(const Model& m) { return load_model(default_candidates(), m.name(), m.params()); }

const std::vector<double> kTokens{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};

TEST(Candidates, RegistryHoldsEachNameOnceInSelectionOrder) {
  std::vector<std::string> names;
  for (const Candidate& c : default_candidates().all()) names.push_back(c.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"constant", "ls_linear", "ls_product", "interp_linear", "interp_loglog", "gbt"}));
  CandidateRegistry r;
  r.add(constant_candidate());
  EXPECT_THROW(r.add(constant_candidate()), DuplicateError);
  EXPECT_THROW(r.add(Candidate{"", nullptr, nullptr}), InputError);
  EXPECT_THROW(load_model(default_candidates(), "spline", {}), InputError);
}

TEST(Candidates, ConstantIsTheMedian) {
  const auto m = constant_candidate().fit(one_d({1, 2, 3}, [](double x) { return x == 2 ? 5.0 : x; }));
  ASSERT_TRUE(m);
  EXPECT_EQ(at(*m, 100), 3.0);
  EXPECT_EQ(at(*round_trip(*m), 7), 3.0);
}

TEST(Candidates, LinearLeastSquaresRecoversAnAffineCostExactly) {
  // A launch floor plus a per-token cost: t = 5 us + 2 ns * T.
  const auto f = [](double t) { return 5e-6 + 2e-9 * t; };
  const auto m = least_squares_candidate(FeatureSet::linear).fit(one_d(kTokens, f));
  ASSERT_TRUE(m);
  for (double t : {1.0, 3.0, 700.0, 8192.0, 20000.0}) EXPECT_NEAR(at(*m, t) / f(t), 1.0, 1e-9) << t;
  EXPECT_NEAR(at(*round_trip(*m), 700) / f(700), 1.0, 1e-9);
}

TEST(Candidates, LeastSquaresKeepsCoefficientsNonNegative) {
  // Falling with the tokens: the best non-negative fit is flat, never a negative slope.
  const auto m = least_squares_candidate(FeatureSet::linear).fit(one_d({1, 2, 4, 8}, [](double t) { return 10 - t; }));
  ASSERT_TRUE(m);
  const auto coef = m->params()["coef"].get<std::vector<double>>();
  ASSERT_EQ(coef.size(), 2u);
  EXPECT_GE(coef[0], 0);
  EXPECT_EQ(coef[1], 0);
}

TEST(Candidates, ProductLeastSquaresRecoversAttentionLikeCosts) {
  // Prefill attention along KV == T: quadratic; over T x KV: the T*KV term.
  const auto q = [](double t) { return 8e-6 + 1e-9 * t + 1e-13 * t * t; };
  const auto m1 = least_squares_candidate(FeatureSet::product).fit(one_d(kTokens, q));
  ASSERT_TRUE(m1);
  EXPECT_NEAR(at(*m1, 3000) / q(3000), 1.0, 1e-9);
  const auto a = [](double t, double kv) { return 1e-5 + 2e-9 * t + 4e-11 * kv + 3e-13 * t * kv; };
  const auto m2 = least_squares_candidate(FeatureSet::product).fit(two_d({1, 16, 256, 4096}, {16, 1024, 65536}, a));
  ASSERT_TRUE(m2);
  EXPECT_NEAR(at(*m2, 100, 5000) / a(100, 5000), 1.0, 1e-9);
  EXPECT_FALSE(least_squares_candidate(FeatureSet::product).fit(Samples{3, {1, 2, 3, 4, 5, 6}, {1, 2}}));
}

TEST(Candidates, InterpolationIsExactOnItsPointsAndPiecewiseBetween) {
  // A kernel switch: flat, then linear.
  const auto f = [](double t) { return t <= 64 ? 1e-5 : 1e-5 * t / 64; };
  const auto lin = interpolation_candidate(InterpolationScale::linear).fit(one_d(kTokens, f));
  ASSERT_TRUE(lin);
  for (double t : kTokens) EXPECT_DOUBLE_EQ(at(*lin, t), f(t));
  EXPECT_DOUBLE_EQ(at(*lin, 48), 1e-5);
  EXPECT_NEAR(at(*lin, 3072), f(3072), 1e-15);  // between 2048 and 4096, on the line
  EXPECT_DOUBLE_EQ(at(*round_trip(*lin), 3072), at(*lin, 3072));
}

TEST(Candidates, LogLogInterpolationRecoversPowerLawsExactly) {
  const auto f = [](double t) { return 3e-7 * std::pow(t, 1.5); };
  const auto m = interpolation_candidate(InterpolationScale::loglog).fit(one_d(kTokens, f));
  ASSERT_TRUE(m);
  for (double t : {3.0, 100.0, 5000.0}) EXPECT_NEAR(at(*m, t) / f(t), 1.0, 1e-9) << t;
  EXPECT_FALSE(interpolation_candidate(InterpolationScale::loglog).fit(one_d({0, 1, 2}, [](double) { return 1.0; })));
}

// Outside its points an interpolation clamps to the nearest point and scales by its trend (ls_linear's fit of all
// the points): an affine cost is followed exactly beyond both ends, in either space, however the points are spaced
// (two close end points do not set the slope).
TEST(Candidates, InterpolationClampsAndScalesOutsideItsPoints) {
  const auto f = [](double t) { return 5e-6 + 2e-9 * t; };
  for (auto scale : {InterpolationScale::linear, InterpolationScale::loglog}) {
    const auto m = interpolation_candidate(scale).fit(one_d({16, 64, 256, 1024, 1025, 4096, 4097}, f));
    ASSERT_TRUE(m);
    for (double t : {1.0, 8.0, 5000.0, 65536.0, 1e6}) EXPECT_NEAR(at(*m, t) / f(t), 1.0, 1e-8) << t;
    EXPECT_NEAR(at(*round_trip(*m), 65536) / f(65536), 1.0, 1e-8);
  }
  // Without a trend (too few points for one, or a load of parameters without it): the end point's value.
  const auto two = interpolation_candidate(InterpolationScale::linear).fit(one_d({1, 2}, f));
  ASSERT_TRUE(two);
  EXPECT_NEAR(at(*two, 10) / f(10), 1.0, 1e-8);  // two points: the trend is the line through them
  nlohmann::json p = two->params();
  p.erase("trend");
  EXPECT_NEAR(at(*load_model(default_candidates(), "interp_linear", p), 10), f(2), 1e-15);
}

TEST(Candidates, TriangulatedInterpolationReducesToOneDimensionOnGridLines) {
  // On a rectilinear grid, along a grid line (T fixed, or KV fixed) the 2-D scheme is the 1-D one between its
  // points: exact for a function linear along the line, whatever it does across.
  const auto f = [](double t, double kv) { return 1 + t + 0.001 * kv + 0.01 * t * kv; };
  const std::vector<double> ts{1, 4, 16, 64}, kvs{128, 1024, 4096, 16384};
  const auto m = interpolation_candidate(InterpolationScale::linear).fit(two_d(ts, kvs, f));
  ASSERT_TRUE(m);
  for (double t : ts)
    for (double kv : {200.0, 2000.0, 9000.0}) EXPECT_NEAR(at(*m, t, kv), f(t, kv), 1e-9 * f(t, kv)) << t << " " << kv;
  for (double kv : kvs)
    for (double t : {2.0, 10.0, 50.0}) EXPECT_NEAR(at(*m, t, kv), f(t, kv), 1e-9 * f(t, kv)) << t << " " << kv;
  // Inside a cell a plane through three corners: exact for any plane.
  const auto plane = [](double t, double kv) { return 2 + 3 * t + 0.5 * kv; };
  const auto p = interpolation_candidate(InterpolationScale::linear).fit(two_d(ts, kvs, plane));
  EXPECT_NEAR(at(*p, 9, 3000), plane(9, 3000), 1e-9);
  EXPECT_NEAR(at(*round_trip(*p), 9, 3000), plane(9, 3000), 1e-9);
}

TEST(Candidates, TriangulatedInterpolationTakesScatteredPoints) {
  // The attention sweep's shape: decode batches (T small, KV large), prefill chunks (KV >= T), mixed steps.
  const std::vector<std::array<double, 2>> pts{{1, 129},    {1, 1025},   {1, 16385},   {4, 516},      {4, 65540},
                                               {16, 16},    {16, 2064},  {64, 64},     {64, 8256},    {256, 256},
                                               {256, 4352}, {264, 8456}, {1024, 1024}, {1024, 17408}, {4096, 4096}};
  const auto f = [](double t, double kv) { return 1e-5 + 3e-9 * t + 4e-11 * kv; };  // linear: recovered exactly
  Samples s;
  s.dims = 2;
  for (const auto& p : pts) s.add(std::vector<double>{p[0], p[1]}, f(p[0], p[1]));
  const auto m = interpolation_candidate(InterpolationScale::linear).fit(s);
  ASSERT_TRUE(m);
  for (const auto& q : std::vector<std::array<double, 2>>{{2, 3000}, {100, 5000}, {512, 4000}, {1000, 10000}})
    EXPECT_NEAR(at(*m, q[0], q[1]) / f(q[0], q[1]), 1.0, 1e-9) << q[0] << " " << q[1];
  // Outside the hull: clamped to the nearest triangle and scaled by the (here exact) affine trend.
  for (const auto& q : std::vector<std::array<double, 2>>{{1, 200000}, {8000, 9000}, {2, 20}})
    EXPECT_NEAR(at(*m, q[0], q[1]) / f(q[0], q[1]), 1.0, 1e-8) << q[0] << " " << q[1];
  // Collinear points have no triangle: declined.
  EXPECT_FALSE(interpolation_candidate(InterpolationScale::linear).fit(Samples{2, {1, 1, 2, 2, 3, 3}, {1, 2, 3}}));
}

TEST(Candidates, BoostedTreesFollowASteppedCostWithinABound) {
  // Tile quantisation: the cost steps every 128 tokens. Measured on a dense grid, the trees hold every point to
  // within a few percent (shrinkage leaves part of each step to later trees).
  std::vector<double> xs;
  for (double t = 8; t <= 1024; t += 8) xs.push_back(t);
  const auto f = [](double t) { return 1e-5 * (1 + std::floor((t - 1) / 128)); };
  const auto m = boosted_trees_candidate().fit(one_d(xs, f));
  ASSERT_TRUE(m);
  double worst = 0;
  for (double t : xs) worst = std::max(worst, std::abs(at(*m, t) / f(t) - 1));
  EXPECT_LT(worst, 0.05);
  EXPECT_DOUBLE_EQ(at(*round_trip(*m), 500), at(*m, 500));
  // Deterministic: the same points, the same trees.
  EXPECT_EQ(boosted_trees_candidate().fit(one_d(xs, f))->params(), m->params());
  EXPECT_FALSE(boosted_trees_candidate().fit(one_d({1, 2, 3}, f)));  // too few points
}

// The ensemble is evaluated through a table over its thresholds' grid: it must give what walking the stored trees
// gives, everywhere (on and between the thresholds, beyond them), in two quantities too.
TEST(Candidates, CompiledTreesEvaluateAsTheirTrees) {
  const auto f = [](double t, double kv) { return 1e-5 * (1 + (t > 100) + 2 * (kv > 5000) + (t * kv > 1e6)); };
  Samples s;
  s.dims = 2;
  for (double t = 1; t <= 1000; t *= 1.7)
    for (double kv = 100; kv <= 50000; kv *= 2.1) s.add(std::vector<double>{t, kv}, f(t, kv));
  const auto m = boosted_trees_candidate().fit(s);
  ASSERT_TRUE(m);
  const nlohmann::json p = m->params();
  auto walk = [&](double a, double b) {
    double v = p["base"].get<double>();
    const double x[2] = {a, b};
    for (const auto& t : p["trees"]) {
      const int side = x[t[0].get<int>()] <= t[1].get<double>() ? 0 : 1;
      const int feature = t[2 + 2 * side].get<int>();
      const int below = feature < 0 || x[feature] <= t[3 + 2 * side].get<double>() ? 0 : 1;
      v += t[6 + 2 * side + below].get<double>();
    }
    return std::exp(v);
  };
  for (double t = 0.5; t <= 3000; t *= 1.31)
    for (double kv = 50; kv <= 90000; kv *= 1.43) EXPECT_DOUBLE_EQ(at(*m, t, kv), walk(t, kv)) << t << " " << kv;
}

TEST(Candidates, NonNegativeFitPicksTheBestFeasibleSubset) {
  // y = 2 + 3x exactly: both coefficients positive, recovered.
  const std::vector<double> a{1, 1, 1, 2, 1, 3, 1, 4};
  const std::vector<double> y{5, 8, 11, 14};
  const auto c = nonnegative_relative_fit(a, 2, y);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0], 2, 1e-12);
  EXPECT_NEAR(c[1], 3, 1e-12);
}

}  // namespace
}  // namespace dooly::predict
