#pragma once
// Where a signature was measured, and how its quantities depend on each other there.
//
// A signature's points bind its swept quantities (NUM_TOKS, KV_TOKS, ...). Some of them are tied on every point: a
// prefill-only attention traced without cache reads has KV_TOKS == NUM_TOKS, a quantity may be one value throughout.
// Such a quantity is an *alias* (x_j = scale * x_i + offset, or a constant) and is dropped before a model sees the
// point, so a "2-D" sweep along a line is fitted as the 1-D sweep it is. The remaining *free* quantities are what
// the candidate models take.
//
// The *measured region*, which every prediction is checked against (never silently extrapolated): every quantity
// within the range it was measured over, every alias holding, and with two free quantities the point inside the
// convex hull of the measured points. With three or more free quantities (the engine's step compositions) the
// region is the box of the ranges.
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dooly::predict {

inline constexpr size_t max_quantities = 8;

class Domain {
 public:
  struct Alias {
    size_t dim = 0;   // the tied quantity
    int source = -1;  // the free quantity it follows; -1: a constant (offset)
    double scale = 0;
    double offset = 0;
  };

  Domain() = default;
  // The domain of n points (row-major, quantities.size() values each). Throws InputError for more than
  // max_quantities quantities or no points.
  static Domain of_points(std::vector<std::string> quantities, std::span<const double> x, size_t rows);

  const std::vector<std::string>& quantities() const noexcept { return quantities_; }
  size_t dims() const noexcept { return quantities_.size(); }
  size_t free_dims() const noexcept { return free_.size(); }
  const std::vector<size_t>& free_quantities() const noexcept { return free_; }
  const std::vector<Alias>& aliases() const noexcept { return aliases_; }
  double lo(size_t q) const noexcept { return lo_[q]; }
  double hi(size_t q) const noexcept { return hi_[q]; }

  // Writes the free coordinates of x (dims() values) into out (free_dims() values or more); true when x lies in
  // the measured region. No allocation.
  bool reduce(std::span<const double> x, std::span<double> out) const noexcept;
  // The same for free coordinates alone: inside the free quantities' ranges and (two of them) their hull.
  bool contains_free(std::span<const double> free) const noexcept;

  nlohmann::json to_json() const;
  // Throws InputError naming what is malformed.
  static Domain from_json(const nlohmann::json& j);

 private:
  void find_aliases(std::span<const double> x, size_t rows);
  void build_hull(std::span<const double> x, size_t rows);

  std::vector<std::string> quantities_;
  std::vector<double> lo_, hi_;
  std::vector<size_t> free_;
  std::vector<Alias> aliases_;
  std::vector<std::array<double, 2>> hull_;  // two free quantities: the hull's corners, counter-clockwise
};

}  // namespace dooly::predict
