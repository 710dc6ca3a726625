#pragma once
// The two charts of a run (`dooly plot`): power over time with the regions shaded, from a recording; and
// energy by region as horizontal bars with their 95 % intervals, from a report (or a recording analysed).
#include <cstddef>
#include <optional>
#include <string>

#include "dooly/energy/recording.hpp"
#include "dooly/energy/report.hpp"
#include "dooly/plot/figure.hpp"

namespace dooly::plot {

struct RunChartOptions {
  std::optional<std::string> channel{};  // only this channel; unset: every channel
  size_t top = 10;                       // regions shaded (the rest in grey as one) or bars drawn
  int width_px = 1400;
  std::string source{};  // the input file, for the title and messages
};

struct Chart {
  Figure figure;
  std::string summary;  // one line: what it shows and what it left out
};

// Each channel's readings over time (placed at the middle of what they measure; thinned to the lowest and
// highest of each pixel column's slice when there are more, which a note under the chart says), over the
// outermost windows of the `top` regions open longest, each shaded in its colour (the rest in grey).
Chart power_chart(const energy::Recording& recording, const RunChartOptions& options);

// Per channel, the `top` regions by energy in the mode the report leads with (the model where it was fitted,
// with its 95 % interval as whiskers; else the trapezoid), longest bar first.
Chart energy_chart(const energy::Report& report, const RunChartOptions& options);

}  // namespace dooly::plot
