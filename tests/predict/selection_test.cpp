// Selection by held-out error picks the candidate the data were made for; folds are deterministic.
#include "dooly/predict/selection.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace dooly::predict {
namespace {

Samples one_d(const std::vector<double>& xs, const std::function<double(double)>& f) {
  Samples s;
  s.dims = 1;
  for (double x : xs) s.add(std::vector<double>{x}, f(x));
  return s;
}

std::string chosen(const Samples& s) {
  const std::vector<PointKind> kinds(s.rows(), PointKind::other);
  const Selection sel = select_model(s, kinds, default_candidates());
  return std::string(sel.model->name());
}

std::vector<double> range(double from, double to, double step) {
  std::vector<double> out;
  for (double x = from; x <= to; x += step) out.push_back(x);
  return out;
}

TEST(Selection, FoldsAreDeterministicAndBalanced) {
  const auto a = assign_folds(37, {});
  EXPECT_EQ(a, assign_folds(37, {}));
  std::vector<int> per(5, 0);
  for (size_t f : a) ++per.at(f);
  for (int n : per) EXPECT_TRUE(n == 7 || n == 8) << n;
  EXPECT_NE(a, assign_folds(37, {5, 10, 42}));                              // another seed deals another way
  EXPECT_EQ(assign_folds(6, {}), (std::vector<size_t>{0, 1, 2, 3, 4, 5}));  // few points: leave one out
}

TEST(Selection, PicksTheModelTheDataWereMadeFor) {
  // An affine cost: least squares is exact everywhere, interpolation only at the points.
  EXPECT_EQ(
      chosen(one_d({1, 3, 7, 20, 50, 90, 200, 600, 1000, 3000, 8000, 9000}, [](double t) { return 4e-6 + 1e-9 * t; })),
      "ls_linear");
  // A power law with a non-integer exponent: log-log interpolation is exact, no low-order polynomial is.
  EXPECT_EQ(chosen(one_d({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048},
                         [](double t) { return 1e-6 * std::pow(t, 0.7); })),
            "interp_loglog");
  // Prefill attention along the diagonal: quadratic in the tokens.
  EXPECT_EQ(chosen(one_d(range(16, 4096, 256), [](double t) { return 1e-5 + 1e-9 * t + 2e-13 * t * t; })),
            "ls_product");
  // Flat: the constant (the simplest of the exact ones).
  EXPECT_EQ(chosen(one_d({1, 2, 4, 8, 16}, [](double) { return 2e-6; })), "constant");
  // A step (a kernel switch) on a dense grid: trees.
  EXPECT_EQ(chosen(one_d(range(8, 1024, 8), [](double t) { return t < 500 ? 1e-5 : 3e-5; })), "gbt");
}

TEST(Selection, OnePointIsAConstantWithNothingHeldOut) {
  const Selection s = select_model(one_d({64}, [](double) { return 3e-6; }), std::vector<PointKind>{PointKind::other},
                                   default_candidates());
  EXPECT_EQ(s.model->name(), "constant");
  EXPECT_FALSE(s.held_out_mape);
}

TEST(Selection, ReportsInteriorAndExtrapolatedErrorsApart) {
  const auto f = [](double t) { return 4e-6 + 1e-9 * t; };
  const Samples s = one_d({1, 2, 4, 8, 16, 32}, f);
  const Selection sel = select_model(s, std::vector<PointKind>(6, PointKind::decode), default_candidates());
  const CandidateScore& c = sel.scores[sel.chosen];
  EXPECT_EQ(c.interior.n, 4u);  // leave-one-out: the ends are extrapolated
  EXPECT_EQ(c.extrapolated.n, 2u);
  EXPECT_EQ(c.interior_by_kind[static_cast<size_t>(PointKind::decode)].n, 4u);
  EXPECT_TRUE(sel.interior_basis);
  EXPECT_NEAR(*sel.held_out_mape, 0.0, 1e-9);
}

}  // namespace
}  // namespace dooly::predict
