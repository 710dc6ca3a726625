#include "dooly/predict/domain.hpp"

#include <algorithm>
#include <cmath>

#include "dooly/common/error.hpp"

namespace dooly::predict {
namespace {

bool close(double a, double b) noexcept { return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}); }

// Does x_j = scale * x_i + offset hold on every row? Fitted through the rows with the smallest and largest x_i.
bool affine_tie(std::span<const double> x, size_t rows, size_t dims, size_t i, size_t j, Domain::Alias& alias) {
  size_t a = 0, b = 0;
  for (size_t r = 1; r < rows; ++r) {
    if (x[r * dims + i] < x[a * dims + i]) a = r;
    if (x[r * dims + i] > x[b * dims + i]) b = r;
  }
  const double xi_a = x[a * dims + i], xi_b = x[b * dims + i];
  if (xi_a == xi_b) return false;
  const double scale = (x[b * dims + j] - x[a * dims + j]) / (xi_b - xi_a);
  const double offset = x[a * dims + j] - scale * xi_a;
  for (size_t r = 0; r < rows; ++r)
    if (!close(x[r * dims + j], scale * x[r * dims + i] + offset)) return false;
  alias = {j, static_cast<int>(i), scale, offset};
  return true;
}

double cross(const std::array<double, 2>& o, const std::array<double, 2>& a, const std::array<double, 2>& b) noexcept {
  return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

std::vector<double> numbers(const nlohmann::json& j, const char* field) {
  if (!j.contains(field) || !j[field].is_array())
    DOOLY_THROW(InputError, "refit the store's predictors (`dooly predict fit --db FILE`)",
                "predictor domain lacks the array '{}'", field);
  std::vector<double> out;
  for (const auto& v : j[field]) out.push_back(v.get<double>());
  return out;
}

}  // namespace

Domain Domain::of_points(std::vector<std::string> quantities, std::span<const double> x, size_t rows) {
  const size_t dims = quantities.size();
  if (dims > max_quantities)
    DOOLY_THROW(InputError, "a signature sweeps a handful of step quantities; check its point keys",
                "{} swept quantities, more than the {} a predictor takes", dims, max_quantities);
  if (rows == 0) DOOLY_THROW(InputError, "fit a predictor to at least one measured point", "no points to fit");
  Domain d;
  d.quantities_ = std::move(quantities);
  d.lo_.assign(dims, 0);
  d.hi_.assign(dims, 0);
  for (size_t q = 0; q < dims; ++q) {
    d.lo_[q] = d.hi_[q] = x[q];
    for (size_t r = 1; r < rows; ++r) {
      d.lo_[q] = std::min(d.lo_[q], x[r * dims + q]);
      d.hi_[q] = std::max(d.hi_[q], x[r * dims + q]);
    }
  }
  d.find_aliases(x, rows);
  d.build_hull(x, rows);
  return d;
}

void Domain::find_aliases(std::span<const double> x, size_t rows) {
  const size_t dims = quantities_.size();
  for (size_t j = 0; j < dims; ++j) {
    if (lo_[j] == hi_[j]) {
      aliases_.push_back({j, -1, 0.0, lo_[j]});
      continue;
    }
    Alias alias;
    bool tied = false;
    for (size_t i : free_)
      if (affine_tie(x, rows, dims, i, j, alias)) {
        tied = true;
        break;
      }
    if (tied)
      aliases_.push_back(alias);
    else
      free_.push_back(j);
  }
}

// Andrew's monotone chain over the two free quantities, in coordinates scaled to their ranges.
void Domain::build_hull(std::span<const double> x, size_t rows) {
  if (free_.size() != 2) return;
  const size_t dims = quantities_.size(), a = free_[0], b = free_[1];
  std::vector<std::array<double, 2>> p(rows);
  for (size_t r = 0; r < rows; ++r)
    p[r] = {(x[r * dims + a] - lo_[a]) / (hi_[a] - lo_[a]), (x[r * dims + b] - lo_[b]) / (hi_[b] - lo_[b])};
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  std::vector<std::array<double, 2>> h(2 * p.size());
  size_t k = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    while (k >= 2 && cross(h[k - 2], h[k - 1], p[i]) <= 0) --k;
    h[k++] = p[i];
  }
  for (size_t i = p.size() - 1, t = k + 1; i > 0; --i) {
    while (k >= t && cross(h[k - 2], h[k - 1], p[i - 1]) <= 0) --k;
    h[k++] = p[i - 1];
  }
  h.resize(k > 1 ? k - 1 : k);
  hull_ = std::move(h);
}

bool Domain::contains_free(std::span<const double> free) const noexcept {
  bool inside = true;
  for (size_t f = 0; f < free_.size(); ++f) {
    const size_t q = free_[f];
    if (free[f] < lo_[q] || free[f] > hi_[q]) inside = false;
  }
  if (!inside || hull_.size() < 3) return inside;
  const std::array<double, 2> p{(free[0] - lo_[free_[0]]) / (hi_[free_[0]] - lo_[free_[0]]),
                                (free[1] - lo_[free_[1]]) / (hi_[free_[1]] - lo_[free_[1]])};
  for (size_t i = 0; i < hull_.size(); ++i)
    if (cross(hull_[i], hull_[(i + 1) % hull_.size()], p) < -1e-12) return false;
  return true;
}

bool Domain::reduce(std::span<const double> x, std::span<double> out) const noexcept {
  bool inside = true;
  for (size_t q = 0; q < quantities_.size(); ++q)
    if (x[q] < lo_[q] || x[q] > hi_[q]) inside = false;
  for (const Alias& a : aliases_) {
    const double expected = a.source < 0 ? a.offset : a.scale * x[static_cast<size_t>(a.source)] + a.offset;
    if (!close(x[a.dim], expected)) inside = false;
  }
  for (size_t f = 0; f < free_.size(); ++f) out[f] = x[free_[f]];
  return contains_free(out.first(free_.size())) && inside;
}

nlohmann::json Domain::to_json() const {
  nlohmann::json aliases = nlohmann::json::array();
  for (const Alias& a : aliases_) aliases.push_back({a.dim, a.source, a.scale, a.offset});
  nlohmann::json hull = nlohmann::json::array();
  for (const auto& c : hull_) hull.push_back({c[0], c[1]});
  return {{"q", quantities_}, {"lo", lo_}, {"hi", hi_}, {"free", free_}, {"alias", aliases}, {"hull", hull}};
}

Domain Domain::from_json(const nlohmann::json& j) {
  const char* fix = "refit the store's predictors (`dooly predict fit --db FILE`)";
  if (!j.is_object() || !j.contains("q") || !j["q"].is_array())
    DOOLY_THROW(InputError, fix, "predictor domain '{}' lacks its quantities", j.dump().substr(0, 80));
  Domain d;
  for (const auto& q : j["q"]) d.quantities_.push_back(q.get<std::string>());
  d.lo_ = numbers(j, "lo");
  d.hi_ = numbers(j, "hi");
  const size_t dims = d.quantities_.size();
  if (dims > max_quantities || d.lo_.size() != dims || d.hi_.size() != dims)
    DOOLY_THROW(InputError, fix, "predictor domain has {} quantities, {} lower and {} upper bounds", dims, d.lo_.size(),
                d.hi_.size());
  for (double f : numbers(j, "free")) d.free_.push_back(static_cast<size_t>(f));
  for (const auto& a : j.value("alias", nlohmann::json::array()))
    d.aliases_.push_back({a.at(0).get<size_t>(), a.at(1).get<int>(), a.at(2).get<double>(), a.at(3).get<double>()});
  for (const auto& c : j.value("hull", nlohmann::json::array())) d.hull_.push_back({c.at(0), c.at(1)});
  const bool consistent =
      std::all_of(d.free_.begin(), d.free_.end(), [&](size_t f) { return f < dims; }) &&
      std::all_of(d.aliases_.begin(), d.aliases_.end(),
                  [&](const Alias& a) { return a.dim < dims && a.source < static_cast<int>(dims); }) &&
      d.free_.size() + d.aliases_.size() == dims;
  if (!consistent) DOOLY_THROW(InputError, fix, "predictor domain '{}' is inconsistent", j.dump().substr(0, 120));
  return d;
}

}  // namespace dooly::predict
