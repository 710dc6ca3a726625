#pragma once
// Thins a long series for drawing: the x range is cut into `buckets` equal parts and each part keeps its lowest
// and highest point, in x order. Peaks and dips survive (a plain 1-in-k subsample loses them); a series already
// short enough is returned as it is.
#include <cstddef>
#include <vector>

namespace dooly::plot {

struct Decimated {
  std::vector<double> x, y;
  bool thinned = false;  // false: the input came back unchanged
};

// x must be sorted (non-decreasing); non-finite y values are left out of a thinned series.
Decimated min_max_decimate(const std::vector<double>& x, const std::vector<double>& y, size_t buckets);

}  // namespace dooly::plot
