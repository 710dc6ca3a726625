#pragma once
// The empirical CDF of raw samples as a step line: F(x) = the fraction of samples <= x.
#include <string>
#include <vector>

#include "dooly/plot/series.hpp"

namespace dooly::plot {

// Points (x_i, F(x_i)) for the distinct sample values in increasing order, led by (min, 0) so the line rises
// from 0. NaNs are left out (infinities are kept: they sort to the ends). No samples: no points.
Line empirical_cdf(std::string label, std::vector<double> samples);

}  // namespace dooly::plot
