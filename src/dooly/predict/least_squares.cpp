#include "dooly/predict/least_squares.hpp"

#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <Eigen/Dense>

#include "dooly/predict/json_numbers.hpp"

namespace dooly::predict {
namespace {

std::string_view name_of(FeatureSet f) noexcept { return f == FeatureSet::product ? "ls_product" : "ls_linear"; }

// The number of features for `dims` free quantities; 0 when the set does not apply.
size_t feature_count(FeatureSet f, size_t dims) noexcept {
  if (f == FeatureSet::linear) return dims + 1;
  return dims == 1 ? 3 : dims == 2 ? 4 : 0;
}

// Writes the features of x into out (feature_count values). No allocation.
void features(FeatureSet f, std::span<const double> x, size_t dims, double* out) noexcept {
  out[0] = 1;
  for (size_t d = 0; d < dims; ++d) out[d + 1] = x[d];
  if (f == FeatureSet::product) out[dims + 1] = dims == 1 ? x[0] * x[0] : x[0] * x[1];
}

class LeastSquares final : public Model {
 public:
  LeastSquares(FeatureSet f, size_t dims, std::vector<double> coef) : f_(f), dims_(dims), coef_(std::move(coef)) {
    for (double& c : coef_) c = compact(c);
  }
  std::string_view name() const noexcept override { return name_of(f_); }
  double evaluate(std::span<const double> x) const noexcept override {
    double phi[8];
    features(f_, x, dims_, phi);
    double v = 0;
    for (size_t k = 0; k < coef_.size(); ++k) v += coef_[k] * phi[k];
    return v;
  }
  nlohmann::json params() const override { return {{"dims", dims_}, {"coef", coef_}}; }

 private:
  FeatureSet f_;
  size_t dims_;
  std::vector<double> coef_;
};

std::unique_ptr<Model> fit(FeatureSet f, const Samples& s) {
  const size_t k = feature_count(f, s.dims);
  if (k == 0 || k > 8 || s.rows() < k) return nullptr;
  std::vector<double> a(s.rows() * k);
  for (size_t i = 0; i < s.rows(); ++i) features(f, s.row(i), s.dims, &a[i * k]);
  std::vector<double> coef = nonnegative_relative_fit(a, k, s.y);
  if (coef.empty()) return nullptr;
  return std::make_unique<LeastSquares>(f, s.dims, std::move(coef));
}

std::unique_ptr<Model> load(FeatureSet f, const nlohmann::json& params) {
  std::vector<double> coef = param_numbers(params, "coef", name_of(f));
  const size_t dims = params.value("dims", size_t{0});
  if (coef.size() != feature_count(f, dims) || coef.empty())
    DOOLY_THROW(InputError, "refit the store's predictors (`dooly predict fit --db FILE`)",
                "{} parameters '{}' do not match {} quantities", name_of(f), params.dump().substr(0, 120), dims);
  return std::make_unique<LeastSquares>(f, dims, std::move(coef));
}

}  // namespace

namespace {

// The unconstrained solution on the columns `used` of w (z) and its squared residual; nullopt when they are
// rank-deficient or a coefficient is negative.
std::optional<std::pair<Eigen::VectorXd, double>> solve_subset(const Eigen::MatrixXd& w,
                                                               const std::vector<Eigen::Index>& used) {
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(w.rows());
  Eigen::MatrixXd sub(w.rows(), static_cast<Eigen::Index>(used.size()));
  for (size_t u = 0; u < used.size(); ++u) sub.col(static_cast<Eigen::Index>(u)) = w.col(used[u]);
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(sub);
  if (qr.rank() < sub.cols()) return std::nullopt;
  Eigen::VectorXd z = qr.solve(ones);
  if ((z.array() < 0).any()) return std::nullopt;
  const double residual = (sub * z - ones).squaredNorm();
  return std::make_pair(std::move(z), residual);
}

}  // namespace

std::vector<double> nonnegative_relative_fit(std::span<const double> a, size_t cols, std::span<const double> y) {
  const auto rows = static_cast<Eigen::Index>(y.size());
  const auto n = static_cast<Eigen::Index>(cols);
  // Weighted by 1 / y (relative error) and each column scaled to unit norm (the features span many decades).
  Eigen::MatrixXd w(rows, n);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index c = 0; c < n; ++c) w(i, c) = a[static_cast<size_t>(i * n + c)] / y[static_cast<size_t>(i)];
  const Eigen::VectorXd norm = w.colwise().norm().transpose();
  for (Eigen::Index c = 0; c < n; ++c)
    if (norm(c) > 0) w.col(c) /= norm(c);
  std::vector<double> best;
  double best_residual = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1; mask < (1u << cols); ++mask) {
    std::vector<Eigen::Index> used;
    for (Eigen::Index c = 0; c < n; ++c)
      if ((mask >> c & 1u) != 0 && norm(c) > 0) used.push_back(c);
    if (used.empty() || static_cast<Eigen::Index>(used.size()) > rows) continue;
    const auto solved = solve_subset(w, used);
    if (!solved || solved->second >= best_residual * (1 - 1e-12)) continue;
    best_residual = solved->second;
    best.assign(cols, 0.0);
    for (size_t u = 0; u < used.size(); ++u)
      best[static_cast<size_t>(used[u])] = solved->first(static_cast<Eigen::Index>(u)) / norm(used[u]);
  }
  return best;
}

Candidate least_squares_candidate(FeatureSet features) {
  return {std::string(name_of(features)), [features](const Samples& s) { return fit(features, s); },
          [features](const nlohmann::json& p) { return load(features, p); }};
}

}  // namespace dooly::predict
