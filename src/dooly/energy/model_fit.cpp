#include "dooly/energy/model_fit.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dooly/energy/nnls.hpp"

namespace dooly::energy {

namespace {
constexpr size_t kMinBlocks = 8;  // fewer blocks: the jackknife's spread is itself too uncertain to report

struct Solved {
  Eigen::VectorXd beta;
  bool converged = true;
  int iterations = 0;
};

// NNLS on (gram, xty), the intercept fixed when given.
Solved solve(const Eigen::MatrixXd& gram, const Eigen::VectorXd& xty, const FitOptions& o) {
  const auto k = static_cast<int>(xty.size()) - 1;
  Solved s;
  if (o.intercept_w) {
    const double b = *o.intercept_w;
    const Eigen::MatrixXd g = gram.bottomRightCorner(k, k);
    const Eigen::VectorXd h = xty.tail(k) - b * gram.col(0).tail(k);
    const NnlsResult r = nnls_normal(g, h, o.max_iterations);
    s.beta = Eigen::VectorXd::Zero(k + 1);
    s.beta(0) = b;
    s.beta.tail(k) = r.x;
    s.converged = r.converged;
    s.iterations = r.iterations;
  } else {
    const NnlsResult r = nnls_normal(gram, xty, o.max_iterations);
    s.beta = r.x;
    s.converged = r.converged;
    s.iterations = r.iterations;
  }
  return s;
}

double rss_of(const Eigen::MatrixXd& gram, const Eigen::VectorXd& xty, double yy, const Eigen::VectorXd& beta) {
  return std::max(0.0, yy - 2 * beta.dot(xty) + beta.dot(gram * beta));
}
}  // namespace

double t_quantile_95(int dof) noexcept {
  static constexpr double kSmall[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228};
  if (dof <= 0) return std::numeric_limits<double>::infinity();
  if (dof <= 10) return kSmall[dof];
  // Cornish-Fisher expansion around the normal quantile (within 0.001 of the table from 11 degrees on).
  const double z = 1.959963984540054, v = dof;
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

double Fit::half_width(const Eigen::VectorXd& c) const {
  if (!fitted) return std::numeric_limits<double>::infinity();
  double hw = 0;
  if (cov.size() > 0) {
    const double var = c.dot(cov * c);
    hw = t_quantile_95(dof) * std::sqrt(std::max(0.0, var));
  }
  if (replicates.size() >= kMinBlocks) {
    const double nb = static_cast<double>(replicates.size());
    double mean = 0;
    for (const auto& r : replicates) mean += c.dot(r);
    mean /= nb;
    double ss = 0;
    for (const auto& r : replicates) ss += (c.dot(r) - mean) * (c.dot(r) - mean);
    const double var = (nb - 1) / nb * ss;
    hw = std::max(hw, t_quantile_95(static_cast<int>(replicates.size()) - 1) * std::sqrt(var));
  }
  return hw;
}

std::string Fit::interval_method() const {
  if (replicates.size() >= kMinBlocks)
    return fmt::format("95 %: the wider of a jackknife over {} blocks of readings and the fit's covariance",
                       replicates.size());
  return "95 %: the fit's covariance (too few readings for the jackknife's blocks)";
}

Fit fit_design(const Design& d, const std::vector<DesignBlock>* blocks, const FitOptions& o) {
  Fit f;
  const int k = d.columns();
  const int free = k + (o.intercept_w ? 0 : 1);
  f.n = d.n;
  if (d.n < static_cast<uint64_t>(k) + 2) {
    f.why_not = fmt::format("{} readings for {} regions: too few to fit", d.n, k);
    return f;
  }
  const Solved s = solve(d.gram, d.xty, o);
  f.converged = s.converged;
  f.iterations = s.iterations;
  if (!s.converged) {
    f.why_not = fmt::format("the non-negative least-squares solver did not converge in {} iterations", s.iterations);
    return f;
  }
  f.fitted = true;
  f.beta = s.beta;
  const double n = static_cast<double>(d.n);
  f.rss = rss_of(d.gram, d.xty, d.yy, f.beta);
  f.residual_rms_w = std::sqrt(f.rss / n);
  const double mean_y = d.xty(0) / n;
  const double tss = d.yy - n * mean_y * mean_y;
  f.r_squared = tss > 0 ? 1 - f.rss / tss : 0.0;
  f.dof = static_cast<int>(std::min<uint64_t>(d.n - static_cast<uint64_t>(free), INT32_MAX));

  // Covariance of the free coefficients from the (lightly regularised) inverse of X'X: a direction the run
  // never varied gets a huge variance instead of a division by zero.
  Eigen::MatrixXd g = d.gram;
  const double ridge = 1e-10 * std::max(1.0, g.diagonal().mean());
  g.diagonal().array() += ridge;
  const Eigen::MatrixXd ginv = g.ldlt().solve(Eigen::MatrixXd::Identity(k + 1, k + 1));
  const double sigma2 = f.dof > 0 ? f.rss / f.dof : 0.0;
  f.cov = Eigen::MatrixXd::Zero(k + 1, k + 1);
  if (o.intercept_w) {
    Eigen::MatrixXd gk = d.gram.bottomRightCorner(k, k);
    gk.diagonal().array() += ridge;
    f.cov.bottomRightCorner(k, k) = sigma2 * gk.ldlt().solve(Eigen::MatrixXd::Identity(k, k));
  } else {
    f.cov = sigma2 * ginv;
  }
  // Identifiability: the share of a column's signal not explained by the others (the Schur complement of X'X).
  f.inseparable.assign(static_cast<size_t>(k) + 1, false);
  for (int i = 1; i <= k; ++i) f.inseparable[i] = 1.0 / ginv(i, i) < 1e-4 * d.gram(i, i);

  if (blocks && blocks->size() >= kMinBlocks) {
    for (const DesignBlock& b : *blocks) {
      if (b.gram.rows() != k + 1) continue;  // a block from before a column existed is padded; not this case
      const Solved r = solve(d.gram - b.gram, d.xty - b.xty, o);
      if (r.converged) f.replicates.push_back(r.beta);
    }
  }
  return f;
}

}  // namespace dooly::energy
