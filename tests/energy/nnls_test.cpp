#include "dooly/energy/nnls.hpp"

#include <gtest/gtest.h>

#include <random>

#include "brute_nnls.hpp"

namespace dooly::energy {
namespace {

TEST(Nnls, RecoversNonNegativeSolutionExactly) {
  Eigen::MatrixXd x(6, 3);
  x << 1, 0, 0.5, 1, 1, 0, 1, 0.3, 0.7, 1, 0.9, 0.1, 1, 0, 0, 1, 0.5, 0.5;
  Eigen::VectorXd truth(3);
  truth << 120, 300, 180;
  Eigen::VectorXd y = x * truth;
  NnlsResult r = nnls_normal(x.transpose() * x, x.transpose() * y);
  ASSERT_TRUE(r.converged);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.x(i), truth(i), 1e-8);
}

TEST(Nnls, ClampsWhatLeastSquaresWouldMakeNegative) {
  // Unconstrained least squares gives b < 0 here; NNLS must return b = 0 and refit a.
  Eigen::MatrixXd x(3, 2);
  x << 1, 0, 1, 1, 1, 2;
  Eigen::VectorXd y(3);
  y << 10, 8, 6;  // slope -2
  NnlsResult r = nnls_normal(x.transpose() * x, x.transpose() * y);
  EXPECT_DOUBLE_EQ(r.x(1), 0.0);
  EXPECT_NEAR(r.x(0), 8.0, 1e-9);  // mean of y
}

// The active-set solver against an independent one (every support tried, brute_nnls.hpp) on random problems:
// 1-9 columns, some nearly collinear, truths with negative parts (so the constraint binds), noisy readings. The
// objective ||Xb - y||^2 must match to a relative 1e-9; where the problem is well conditioned, the solution too.
// Unoptimised (sanitizer) builds solve the first 108 problems (every column count 12 times; the reference tries
// up to 512 supports with unoptimised Eigen); the plain CI tier solves all 400 (label `random`).
#ifdef NDEBUG
constexpr int kTrials = 400;
#else
constexpr int kTrials = 108;
#endif

TEST(Nnls, RandomProblemsMatchAnIndependentSolver) {
  std::mt19937_64 rng(20261201);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 1.0);
  int compared_solutions = 0, bound = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int k = 1 + trial % 9;
    const int rows = k + 2 + static_cast<int>(rng() % 60);
    Eigen::MatrixXd x(rows, k);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < k; ++j) x(i, j) = u(rng);
    if (k > 2 && trial % 4 == 0)  // two columns nearly the same (kernels that always run together)
      x.col(1) = x.col(0) + 1e-3 * Eigen::VectorXd::NullaryExpr(rows, [&] { return u(rng); });
    Eigen::VectorXd truth(k);
    for (int j = 0; j < k; ++j) truth(j) = 400.0 * (u(rng) - 0.3);
    Eigen::VectorXd y = x * truth;
    for (int i = 0; i < rows; ++i) y(i) += 5.0 * noise(rng);
    const Eigen::MatrixXd g = x.transpose() * x;
    const Eigen::VectorXd h = x.transpose() * y;

    const NnlsResult r = nnls_normal(g, h);
    ASSERT_TRUE(r.converged);
    ASSERT_EQ(r.x.size(), k);
    EXPECT_TRUE((r.x.array() >= 0).all()) << r.x.transpose();
    const Eigen::VectorXd ref = testing::brute_force_nnls(g, h);
    const double f = (x * r.x - y).squaredNorm(), f_ref = (x * ref - y).squaredNorm();
    EXPECT_LE(f, f_ref * (1 + 1e-9) + 1e-9) << "active set " << r.x.transpose() << " vs " << ref.transpose();
    bound += (ref.array() == 0).any() ? 1 : 0;
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(x);
    const double cond = svd.singularValues()(0) / svd.singularValues()(k - 1);
    if (cond < 1e3) {
      ++compared_solutions;
      EXPECT_LE((r.x - ref).norm(), 1e-6 * (1 + ref.norm())) << r.x.transpose() << " vs " << ref.transpose();
    }
  }
  EXPECT_GE(compared_solutions, kTrials * 5 / 8);
  EXPECT_GE(bound, kTrials / 4) << "the constraint must bind in many problems";
}

}  // namespace
}  // namespace dooly::energy
