#pragma once
// Axis ticks at "nice" numbers: steps of 1, 2 or 5 times a power of ten on a linear axis, powers of ten (with 2
// and 5 between them over a short range) on a log axis, and labels with as many digits as the step needs.
#include <string>
#include <vector>

namespace dooly::plot {

enum class ScaleKind { linear, log };

struct Tick {
  double value = 0.0;
  std::string label;
};

struct Limits {
  double lo = 0.0;
  double hi = 1.0;
};

// The smallest step of 1, 2 or 5 x 10^k that cuts `span` into at most `max_ticks - 1` intervals.
double nice_step(double span, int max_ticks);

// [lo, hi] widened outward to the nearest ticks (linear) or to whole decades (log). An empty range (lo == hi)
// is widened around its value; a log axis needs hi > 0 (a lo <= 0 becomes hi / 1000).
Limits nice_limits(ScaleKind kind, double lo, double hi, int max_ticks);

// The ticks that lie within [lo, hi] (lo < hi), at most about max_ticks of them.
std::vector<Tick> make_ticks(ScaleKind kind, double lo, double hi, int max_ticks);

// A tick value written with the digits its step needs: 0.25 with step 0.05 is "0.25", 2e6 is "2e+06".
std::string tick_label(double value, double step);

}  // namespace dooly::plot
