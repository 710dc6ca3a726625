#pragma once
// Non-negative least squares by enumeration, for tests: the optimum of min b'Gb - 2h'b subject to b >= 0 has a
// support S on which b_S solves G_SS b_S = h_S; try every support, keep the feasible one with the lowest
// objective. Exponential in the number of columns (fine up to ~12), and independent of the engine's active-set
// solver.
#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Dense>

namespace dooly::energy::testing {

// fixed[j]: column j is not constrained (the intercept), it is in every support.
inline Eigen::VectorXd brute_force_nnls(const Eigen::MatrixXd& g, const Eigen::VectorXd& h,
                                        const std::vector<bool>& unconstrained = {}) {
  const int n = static_cast<int>(h.size());
  Eigen::VectorXd best = Eigen::VectorXd::Zero(n);
  double best_f = 0;  // b = 0
  bool have = false;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    bool skip = false;
    std::vector<int> s;
    for (int j = 0; j < n; ++j) {
      const bool in = (mask >> j) & 1u;
      if (!in && j < static_cast<int>(unconstrained.size()) && unconstrained[static_cast<size_t>(j)]) skip = true;
      if (in) s.push_back(j);
    }
    if (skip) continue;
    Eigen::VectorXd b = Eigen::VectorXd::Zero(n);
    if (!s.empty()) {
      const auto m = static_cast<int>(s.size());
      Eigen::MatrixXd a(m, m);
      Eigen::VectorXd r(m);
      for (int i = 0; i < m; ++i) {
        r(i) = h(s[static_cast<size_t>(i)]);
        for (int k = 0; k < m; ++k) a(i, k) = g(s[static_cast<size_t>(i)], s[static_cast<size_t>(k)]);
      }
      const Eigen::VectorXd z = a.colPivHouseholderQr().solve(r);
      bool feasible = true;
      for (int i = 0; i < m; ++i) {
        const int j = s[static_cast<size_t>(i)];
        const bool free_col = j < static_cast<int>(unconstrained.size()) && unconstrained[static_cast<size_t>(j)];
        if (!free_col && z(i) < 0) feasible = false;
        b(j) = z(i);
      }
      if (!feasible) continue;
    }
    const double f = b.dot(g * b) - 2 * h.dot(b);
    if (!have || f < best_f) {
      best_f = f;
      best = b;
      have = true;
    }
  }
  return best;
}

}  // namespace dooly::energy::testing
