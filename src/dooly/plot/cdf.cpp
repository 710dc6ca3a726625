#include "dooly/plot/cdf.hpp"

#include <algorithm>
#include <cmath>

namespace dooly::plot {

Line empirical_cdf(std::string label, std::vector<double> samples) {
  Line line;
  line.label = std::move(label);
  line.step = true;
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double v) { return std::isnan(v); }), samples.end());
  if (samples.empty()) return line;
  std::sort(samples.begin(), samples.end());
  const auto n = static_cast<double>(samples.size());
  line.x.push_back(samples.front());
  line.y.push_back(0.0);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i + 1 < samples.size() && samples[i + 1] == samples[i]) continue;  // a tie: its last index counts
    line.x.push_back(samples[i]);
    line.y.push_back(static_cast<double>(i + 1) / n);
  }
  return line;
}

}  // namespace dooly::plot
