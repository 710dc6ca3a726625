#pragma once
// The points a candidate model is fitted to: n rows of `dims` coordinates (row-major) and one positive target value
// per row (seconds or joules per call). Coordinates are the free quantities of a signature (Domain::reduce), so an
// aliased quantity (KV_TOKS == NUM_TOKS in a prefill step) never reaches a model.
#include <cstddef>
#include <span>
#include <vector>

namespace dooly::predict {

struct Samples {
  size_t dims = 0;
  std::vector<double> x;  // rows() * dims values
  std::vector<double> y;  // > 0

  size_t rows() const noexcept { return y.size(); }
  std::span<const double> row(size_t i) const noexcept { return {x.data() + i * dims, dims}; }
  double at(size_t i, size_t d) const noexcept { return x[i * dims + d]; }

  void add(std::span<const double> coordinates, double value) {
    x.insert(x.end(), coordinates.begin(), coordinates.end());
    y.push_back(value);
  }
  // The rows whose index is listed, in that order.
  Samples subset(std::span<const size_t> indices) const {
    Samples out;
    out.dims = dims;
    out.x.reserve(indices.size() * dims);
    out.y.reserve(indices.size());
    for (size_t i : indices) out.add(row(i), y[i]);
    return out;
  }
};

}  // namespace dooly::predict
