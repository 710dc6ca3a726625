#include "dooly/energy/nnls.hpp"

#include <algorithm>
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
// The variable with the largest positive negative-gradient enters the passive set; -1 means the KKT conditions
// hold to within tol and the current x is optimal.
int entering_variable(const Eigen::VectorXd& w, const std::vector<bool>& in_passive, double tol) {
  const int n = static_cast<int>(w.size());
  int best = -1;
  double best_w = tol;
  for (int j = 0; j < n; ++j)
    if (!in_passive[j] && w(j) > best_w) {
      best_w = w(j);
      best = j;
    }
  return best;
}

std::vector<int> passive_indices(const std::vector<bool>& in_passive) {
  const int n = static_cast<int>(in_passive.size());
  std::vector<int> passive;
  for (int j = 0; j < n; ++j)
    if (in_passive[j]) passive.push_back(j);
  return passive;
}

bool strictly_positive(const Eigen::VectorXd& z) {
  bool feasible = true;
  for (double v : z)
    if (v <= 0) feasible = false;
  return feasible;
}

// Step back towards the last feasible point until a passive variable hits zero; move it out.
void step_back(const Eigen::VectorXd& z, const std::vector<int>& passive, Eigen::VectorXd& x,
               std::vector<bool>& in_passive) {
  double alpha = 1.0;
  for (size_t i = 0; i < passive.size(); ++i)
    if (z(i) <= 0) {
      const double xi = x(passive[i]);
      const double a = xi / (xi - z(i));
      if (a < alpha) alpha = a;
    }
  for (size_t i = 0; i < passive.size(); ++i) {
    const int j = passive[i];
    x(j) += alpha * (z(i) - x(j));
    if (x(j) <= 1e-15) {
      x(j) = 0;
      in_passive[j] = false;
    }
  }
}

// Lawson-Hanson inner loop: shrink the passive set until its unconstrained solution is feasible, or it empties.
void settle_passive_set(const Eigen::MatrixXd& gram, const Eigen::VectorXd& xty, Eigen::VectorXd& x,
                        std::vector<bool>& in_passive) {
  while (true) {
    const std::vector<int> passive = passive_indices(in_passive);
    Eigen::VectorXd z = solve_passive(gram, xty, passive);
    if (strictly_positive(z)) {
      x.setZero();
      for (size_t i = 0; i < passive.size(); ++i) x(passive[i]) = z(i);
      return;
    }
    step_back(z, passive, x, in_passive);
    if (std::none_of(in_passive.begin(), in_passive.end(), [](bool b) { return b; })) return;
  }
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
    const int best = entering_variable(w, in_passive, tol);
    if (best < 0) {
      r.iterations = outer;
      return r;
    }
    in_passive[best] = true;
    settle_passive_set(gram, xty, r.x, in_passive);
  }
  r.converged = false;
  r.iterations = max_iterations;
  return r;
}

}  // namespace dooly::energy
