#include "dooly/energy/nnls.hpp"

#include <cmath>
#include <vector>

namespace dooly::energy {

namespace {
// Solves G_PP z = h_P over the passive set; a tiny ridge keeps rank-deficient sets solvable.
Eigen::VectorXd solve_passive(const Eigen::MatrixXd& g, const Eigen::VectorXd& h, const std::vector<int>& passive) {
  const int n = static_cast<int>(passive.size());
  Eigen::MatrixXd a(n, n);
  Eigen::VectorXd b(n);
  double trace = 0;
  for (int i = 0; i < n; ++i) {
    b(i) = h(passive[i]);
    for (int j = 0; j < n; ++j) a(i, j) = g(passive[i], passive[j]);
    trace += a(i, i);
  }
  const double ridge = 1e-12 * (n ? trace / n : 1.0);
  a.diagonal().array() += ridge;
  return a.ldlt().solve(b);
}
}  // namespace

NnlsResult nnls_normal(const Eigen::MatrixXd& gram, const Eigen::VectorXd& xty, int max_iterations) {
  const int n = static_cast<int>(xty.size());
  NnlsResult r;
  r.x = Eigen::VectorXd::Zero(n);
  if (n == 0) return r;
  if (max_iterations <= 0) max_iterations = 3 * n + 30;
  std::vector<bool> in_passive(n, false);
  const double tol = 1e-12 * std::max(1.0, gram.diagonal().cwiseAbs().maxCoeff());

  for (int outer = 0; outer < max_iterations; ++outer) {
    Eigen::VectorXd w = xty - gram * r.x;  // negative gradient / 2
    int best = -1;
    double best_w = tol;
    for (int j = 0; j < n; ++j)
      if (!in_passive[j] && w(j) > best_w) {
        best_w = w(j);
        best = j;
      }
    if (best < 0) {
      r.iterations = outer;
      return r;
    }
    in_passive[best] = true;
    while (true) {
      std::vector<int> passive;
      for (int j = 0; j < n; ++j)
        if (in_passive[j]) passive.push_back(j);
      Eigen::VectorXd z = solve_passive(gram, xty, passive);
      bool feasible = true;
      for (double v : z)
        if (v <= 0) feasible = false;
      if (feasible) {
        r.x.setZero();
        for (size_t i = 0; i < passive.size(); ++i) r.x(passive[i]) = z(i);
        break;
      }
      // Step back towards the last feasible point until a passive variable hits zero; move it out.
      double alpha = 1.0;
      for (size_t i = 0; i < passive.size(); ++i)
        if (z(i) <= 0) {
          const double xi = r.x(passive[i]);
          const double a = xi / (xi - z(i));
          if (a < alpha) alpha = a;
        }
      for (size_t i = 0; i < passive.size(); ++i) {
        const int j = passive[i];
        r.x(j) += alpha * (z(i) - r.x(j));
        if (r.x(j) <= 1e-15) {
          r.x(j) = 0;
          in_passive[j] = false;
        }
      }
      if (std::none_of(in_passive.begin(), in_passive.end(), [](bool b) { return b; })) break;
    }
  }
  r.converged = false;
  r.iterations = max_iterations;
  return r;
}

}  // namespace dooly::energy
