#include "dooly/energy/nnls.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dooly::energy
