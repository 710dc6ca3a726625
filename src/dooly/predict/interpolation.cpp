#include "dooly/predict/interpolation.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "dooly/predict/delaunay.hpp"
#include "dooly/predict/json_numbers.hpp"
#include "dooly/predict/least_squares.hpp"

namespace dooly::predict {
namespace {

std::string_view name_of(InterpolationScale scale) noexcept {
  return scale == InterpolationScale::loglog ? "interp_loglog" : "interp_linear";
}

struct Space {
  InterpolationScale scale;
  double to(double v) const noexcept { return scale == InterpolationScale::loglog ? std::log(v) : v; }
  double from(double v) const noexcept { return scale == InterpolationScale::loglog ? std::exp(v) : v; }
  // A coordinate in this space; a non-positive one in log-log (outside every sweep) becomes the lowest, lo.
  double coordinate(double v, double lo) const noexcept {
    return scale == InterpolationScale::loglog ? (v > 0 ? std::log(v) : lo) : v;
  }
};

bool positive(const Samples& s) {
  return std::all_of(s.x.begin(), s.x.end(), [](double v) { return v > 0; }) &&
         std::all_of(s.y.begin(), s.y.end(), [](double v) { return v > 0; });
}

// How the cost grows beyond the points: ls_linear's fit of all of them, c_0 + sum c_d x_d with c >= 0. Outside,
// an interpolation takes the value at the nearest point of its region and scales it by the trend's ratio between
// the two (clamp-and-scale): it follows the measured growth without trusting an end segment's slope, which two
// close points (KV 1024 and 1025) can make anything.
struct Trend {
  std::vector<double> coef;  // empty: no scaling

  static Trend of(const Samples& s) {
    const size_t k = s.dims + 1;
    std::vector<double> a;
    a.reserve(s.rows() * k);
    for (size_t i = 0; i < s.rows(); ++i) {
      a.push_back(1.0);
      for (size_t d = 0; d < s.dims; ++d) a.push_back(s.at(i, d));
    }
    Trend t{s.rows() >= k ? nonnegative_relative_fit(a, k, s.y) : std::vector<double>{}};
    for (double& c : t.coef) c = compact(c);
    return t;
  }
  double at(std::span<const double> x) const noexcept {
    double v = coef[0];
    for (size_t d = 1; d < coef.size(); ++d) v += coef[d] * x[d - 1];
    return v;
  }
  double ratio(std::span<const double> x, std::span<const double> from) const noexcept {
    if (coef.empty()) return 1.0;
    const double base = at(from);
    return base > 0 ? at(x) / base : 1.0;
  }
};

nlohmann::json with_trend(nlohmann::json params, const Trend& trend) {
  if (!trend.coef.empty()) params["trend"] = trend.coef;
  return params;
}

Trend trend_of(const nlohmann::json& params, std::string_view name, size_t dims) {
  if (!params.contains("trend")) return {};
  Trend t{param_numbers(params, "trend", name)};
  if (t.coef.size() != dims + 1)
    DOOLY_THROW(InputError, "refit the store's predictors (`dooly predict fit --db FILE`)",
                "{} trend has {} coefficients for {} quantities", name, t.coef.size(), dims);
  return t;
}

// ---------------------------------------------------------------------------------------------- one quantity

class Piecewise final : public Model {
 public:
  // x ascending and distinct; y > 0 in log-log.
  Piecewise(InterpolationScale scale, std::vector<double> x, std::vector<double> y, Trend trend)
      : space_{scale}, x_(std::move(x)), y_(std::move(y)), trend_(std::move(trend)) {
    for (double& v : y_) v = compact(v);
    for (size_t i = 0; i < x_.size(); ++i) {
      t_.push_back(space_.to(x_[i]));
      v_.push_back(space_.to(y_[i]));
    }
  }

  std::string_view name() const noexcept override { return name_of(space_.scale); }

  double evaluate(std::span<const double> x) const noexcept override {
    const double t = space_.coordinate(x[0], t_.front());
    const size_t n = t_.size();
    const size_t upper = static_cast<size_t>(std::upper_bound(t_.begin(), t_.end(), t) - t_.begin());
    if (upper > 0 && upper < n) {
      const size_t i = upper - 1;
      const double w = (t - t_[i]) / (t_[i + 1] - t_[i]);
      return space_.from(v_[i] + w * (v_[i + 1] - v_[i]));
    }
    if (upper == n && t == t_.back()) return y_.back();
    const size_t end = upper == 0 ? 0 : n - 1;  // outside: clamp to the end point, scale by the trend
    return y_[end] * trend_.ratio(x, std::span<const double>(&x_[end], 1));
  }

  nlohmann::json params() const override { return with_trend({{"x", x_}, {"y", y_}}, trend_); }

 private:
  Space space_;
  std::vector<double> x_, y_;  // as measured (y rounded)
  Trend trend_;
  std::vector<double> t_, v_;  // in the model's space
};

std::unique_ptr<Model> fit_piecewise(InterpolationScale scale, const Samples& s) {
  std::map<double, std::pair<double, int>> by_x;  // a repeated coordinate: the mean of its values
  for (size_t i = 0; i < s.rows(); ++i) {
    auto& [sum, count] = by_x[s.at(i, 0)];
    sum += s.y[i];
    ++count;
  }
  if (by_x.size() < 2) return nullptr;
  std::vector<double> x, y;
  for (const auto& [k, v] : by_x) {
    x.push_back(k);
    y.push_back(v.first / v.second);
  }
  return std::make_unique<Piecewise>(scale, std::move(x), std::move(y), Trend::of(s));
}

// ----------------------------------------------------------------------------------------------- two quantities

class Triangulated final : public Model {
 public:
  Triangulated(InterpolationScale scale, std::vector<double> x0, std::vector<double> x1, std::vector<double> y,
               Trend trend)
      : space_{scale}, x0_(std::move(x0)), x1_(std::move(x1)), y_(std::move(y)), trend_(std::move(trend)) {
    for (double& v : y_) v = compact(v);
    p_.resize(y_.size());
    for (size_t i = 0; i < y_.size(); ++i) p_[i] = {space_.to(x0_[i]), space_.to(x1_[i])};
    lo_ = hi_ = p_[0];
    for (const auto& q : p_)
      for (int d = 0; d < 2; ++d) lo_[d] = std::min(lo_[d], q[d]), hi_[d] = std::max(hi_[d], q[d]);
    if (!(hi_[0] > lo_[0] && hi_[1] > lo_[1])) return;  // on a line: no triangle
    for (auto& q : p_)
      for (int d = 0; d < 2; ++d) q[d] = (q[d] - lo_[d]) / (hi_[d] - lo_[d]);
    for (const auto& t : delaunay_triangles(p_)) add_triangle(t);
  }

  bool empty() const noexcept { return tris_.empty(); }
  std::string_view name() const noexcept override { return name_of(space_.scale); }

  double evaluate(std::span<const double> x) const noexcept override {
    const double px = (space_.coordinate(x[0], lo_[0]) - lo_[0]) / (hi_[0] - lo_[0]);
    const double py = (space_.coordinate(x[1], lo_[1]) - lo_[1]) / (hi_[1] - lo_[1]);
    const Tri* best = nullptr;
    std::array<double, 3> l{};
    double best_min = -1e300;
    for (const Tri& t : tris_) {
      const double dx = px - t.ax, dy = py - t.ay;
      const double l1 = t.inv[0] * dx + t.inv[1] * dy, l2 = t.inv[2] * dx + t.inv[3] * dy, l0 = 1 - l1 - l2;
      const double m = std::min({l0, l1, l2});
      if (m >= -1e-12) return space_.from(l0 * t.value[0] + l1 * t.value[1] + l2 * t.value[2]);
      if (m > best_min) best_min = m, best = &t, l = {l0, l1, l2};
    }
    // Outside every triangle: the nearest triangle's value clamped to it, scaled by the trend.
    double sum = 0;
    for (double& w : l) sum += (w = std::max(0.0, w));
    double value = 0, cx = 0, cy = 0;
    for (size_t k = 0; k < 3; ++k) {
      value += l[k] / sum * best->value[k];
      cx += l[k] / sum * p_[best->v[k]][0];
      cy += l[k] / sum * p_[best->v[k]][1];
    }
    const double clamped[2] = {space_.from(lo_[0] + cx * (hi_[0] - lo_[0])),
                               space_.from(lo_[1] + cy * (hi_[1] - lo_[1]))};
    return space_.from(value) * trend_.ratio(x, clamped);
  }

  nlohmann::json params() const override { return with_trend({{"x0", x0_}, {"x1", x1_}, {"y", y_}}, trend_); }

 private:
  struct Tri {
    double ax, ay;                // the first corner (read for every query: kept here, not behind p_)
    std::array<size_t, 3> v;      // corners (indices into p_)
    std::array<double, 4> inv;    // inverse of [b - a, c - a]: barycentric coordinates of corners 2 and 3
    std::array<double, 3> value;  // values in the model's space
  };

  void add_triangle(const std::array<int, 3>& t) {
    const std::array<size_t, 3> v{static_cast<size_t>(t[0]), static_cast<size_t>(t[1]), static_cast<size_t>(t[2])};
    const auto &a = p_[v[0]], &b = p_[v[1]], &c = p_[v[2]];
    const double m00 = b[0] - a[0], m01 = c[0] - a[0], m10 = b[1] - a[1], m11 = c[1] - a[1];
    const double det = m00 * m11 - m01 * m10;
    tris_.push_back({a[0],
                     a[1],
                     v,
                     {m11 / det, -m01 / det, -m10 / det, m00 / det},
                     {space_.to(y_[v[0]]), space_.to(y_[v[1]]), space_.to(y_[v[2]])}});
  }

  Space space_;
  std::vector<double> x0_, x1_, y_;
  Trend trend_;
  std::vector<std::array<double, 2>> p_;  // the points in the model's space, scaled to the unit square
  std::array<double, 2> lo_{}, hi_{};
  std::vector<Tri> tris_;
};

std::unique_ptr<Model> fit_triangulated(InterpolationScale scale, const Samples& s) {
  std::vector<double> x0, x1;
  for (size_t i = 0; i < s.rows(); ++i) x0.push_back(s.at(i, 0)), x1.push_back(s.at(i, 1));
  auto model = std::make_unique<Triangulated>(scale, std::move(x0), std::move(x1), s.y, Trend::of(s));
  if (model->empty()) return nullptr;  // collinear: no triangle
  return model;
}

std::unique_ptr<Model> fit(InterpolationScale scale, const Samples& s) {
  if (scale == InterpolationScale::loglog && !positive(s)) return nullptr;
  if (s.dims == 1) return fit_piecewise(scale, s);
  if (s.dims == 2 && s.rows() >= 3) return fit_triangulated(scale, s);
  return nullptr;
}

std::unique_ptr<Model> load(InterpolationScale scale, const nlohmann::json& params) {
  const std::string_view name = name_of(scale);
  std::vector<double> y = param_numbers(params, "y", name);
  std::unique_ptr<Model> model;
  if (params.contains("x")) {
    std::vector<double> x = param_numbers(params, "x", name);
    if (x.size() == y.size() && x.size() >= 2 && std::is_sorted(x.begin(), x.end()))
      model = std::make_unique<Piecewise>(scale, std::move(x), std::move(y), trend_of(params, name, 1));
  } else {
    std::vector<double> x0 = param_numbers(params, "x0", name), x1 = param_numbers(params, "x1", name);
    if (x0.size() == y.size() && x1.size() == y.size() && y.size() >= 3) {
      auto t =
          std::make_unique<Triangulated>(scale, std::move(x0), std::move(x1), std::move(y), trend_of(params, name, 2));
      if (!t->empty()) model = std::move(t);
    }
  }
  if (!model)
    DOOLY_THROW(InputError, "refit the store's predictors (`dooly predict fit --db FILE`)",
                "{} parameters do not describe an interpolation: '{}'", name, params.dump().substr(0, 120));
  return model;
}

}  // namespace

Candidate interpolation_candidate(InterpolationScale scale) {
  return {std::string(name_of(scale)), [scale](const Samples& s) { return fit(scale, s); },
          [scale](const nlohmann::json& p) { return load(scale, p); }};
}

}  // namespace dooly::predict
