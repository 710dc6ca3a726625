#include "dooly/plot/decimate.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dooly::plot {

namespace {

// The indices of the lowest and highest finite y in [begin, end); both end when there is none.
struct Extremes {
  size_t lo, hi;
};
Extremes extremes(const std::vector<double>& y, size_t begin, size_t end) {
  Extremes e{end, end};
  for (size_t i = begin; i < end; ++i) {
    if (!std::isfinite(y[i])) continue;
    if (e.lo == end || y[i] < y[e.lo]) e.lo = i;
    if (e.hi == end || y[i] > y[e.hi]) e.hi = i;
  }
  return e;
}

}  // namespace

Decimated min_max_decimate(const std::vector<double>& x, const std::vector<double>& y, size_t buckets) {
  if (x.size() != y.size()) throw std::invalid_argument("min_max_decimate: x and y differ in length");
  buckets = std::max<size_t>(buckets, 1);
  if (x.size() <= 2 * buckets) return {x, y, false};
  Decimated out;
  out.thinned = true;
  out.x.reserve(2 * buckets);
  out.y.reserve(2 * buckets);
  const double x0 = x.front(), width = x.back() - x.front();
  size_t begin = 0;
  for (size_t b = 0; b < buckets && begin < x.size(); ++b) {
    size_t end = x.size();
    if (b + 1 < buckets) {
      const double edge = x0 + width * static_cast<double>(b + 1) / static_cast<double>(buckets);
      end = static_cast<size_t>(std::lower_bound(x.begin() + static_cast<std::ptrdiff_t>(begin), x.end(), edge) -
                                x.begin());
    }
    const Extremes e = extremes(y, begin, end);
    begin = end;
    if (e.lo == end) continue;  // an empty bucket, or only non-finite values in it
    out.x.push_back(x[std::min(e.lo, e.hi)]);
    out.y.push_back(y[std::min(e.lo, e.hi)]);
    if (e.lo == e.hi) continue;
    out.x.push_back(x[std::max(e.lo, e.hi)]);
    out.y.push_back(y[std::max(e.lo, e.hi)]);
  }
  return out;
}

}  // namespace dooly::plot
