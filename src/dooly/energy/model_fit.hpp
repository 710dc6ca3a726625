#pragma once
// Fits the occupancy model's normal equations (non-negative least squares, intercept = floor) and says how well
// each fitted figure is known.
//
// Intervals (95 %) come from two estimates, and the wider is reported:
//  - a delete-one-block jackknife over 16-32 blocks of consecutive readings (the fit redone without each block):
//    readings' errors are correlated in time (neighbouring sensor windows overlap, the device drifts as it warms),
//    which the covariance formula ignores and the blocks keep;
//  - the fit's covariance, residual variance times (X'X)^-1: it sees what blocks cannot, a figure the run never
//    varied at all (X'X singular in its direction) has an unbounded interval.
// Every reported figure is linear in the coefficients (a power, an energy, a J/call), so its interval follows
// from a weight vector c: the spread of c'b over the replicates and c' cov c.
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "dooly/energy/occupancy_model.hpp"

namespace dooly::energy {

struct FitOptions {
  std::optional<double> intercept_w;  // given floor (fixed, not fitted)
  int max_iterations = 0;             // NNLS; 0: its default
};

struct Fit {
  bool fitted = false;
  std::string why_not;
  bool converged = true;
  int iterations = 0;
  Eigen::VectorXd beta;  // [0]: the floor
  double rss = 0.0;
  uint64_t n = 0;
  double residual_rms_w = 0.0;
  double r_squared = 0.0;
  Eigen::MatrixXd cov;                      // residual variance times (X'X)^-1 (the free columns)
  int dof = 0;                              // readings minus fitted coefficients
  std::vector<Eigen::VectorXd> replicates;  // the jackknife's, one per block left out
  std::vector<bool> inseparable;            // [column]: X'X is (nearly) singular in its direction

  // Half-width of the 95 % interval of c'beta (infinite when the run does not determine it).
  double half_width(const Eigen::VectorXd& c) const;
  std::string interval_method() const;
};

// Fits the given setting's equations, with the jackknife's replicates when `blocks` holds enough of them.
Fit fit_design(const Design& d, const std::vector<DesignBlock>* blocks, const FitOptions& options);

// Student's t quantile for a two-sided 95 % interval with `dof` degrees of freedom.
double t_quantile_95(int dof) noexcept;

}  // namespace dooly::energy
