#pragma once
// Non-negative least squares on the normal equations (Lawson & Hanson's active-set method):
// minimise ||X b - y||^2 subject to b >= 0, given only G = X'X and h = X'y, so the fit over a run of any
// length needs memory for G alone.
#include <Eigen/Dense>

namespace dooly::energy {

struct NnlsResult {
  Eigen::VectorXd x;
  int iterations = 0;
  bool converged = true;
};

NnlsResult nnls_normal(const Eigen::MatrixXd& gram, const Eigen::VectorXd& xty, int max_iterations = 0);

}  // namespace dooly::energy
