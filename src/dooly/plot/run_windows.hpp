#pragma once
// Where each region of a recorded run was open, for shading: the windows that are outermost on their thread
// (a region's, or a kernel's launched outside any region), per key, merged into disjoint time ranges. A run
// with 10^5 kernel windows inside a few regions shades the regions; one without regions shades its kernels,
// and back-to-back kernels merge into one range.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dooly/energy/recording.hpp"
#include "dooly/plot/series.hpp"

namespace dooly::plot {

struct RegionTime {
  std::string name;
  std::string kind;              // the recording's word: region, for, copy, ...
  std::vector<XRange> ranges_s;  // seconds since the run's start, disjoint, sorted
  uint64_t windows = 0;          // outermost windows merged into them
  double open_s = 0.0;           // the ranges' summed length
};

struct RunWindows {
  int64_t start_ns = 0;  // the run's start (meta run_start_ns, else its first reading or window edge)
  int64_t end_ns = 0;
  std::vector<RegionTime> regions;  // by open_s, longest first (ties: by name)
  uint64_t unmatched_ends = 0;      // ends with no open window of their key on their thread
  uint64_t closed_at_end = 0;       // windows still open when the recording ends, closed at its end
};

// Only nesting windows take part (free sections may overlap anything and are left out). With `device`, only
// windows on that CUDA device or on the host (-1), as a channel of that GPU is charged.
RunWindows outermost_windows(const energy::Recording& recording, std::optional<int> device = std::nullopt);

// The run's start and end as outermost_windows takes them.
std::pair<int64_t, int64_t> run_span_ns(const energy::Recording& recording);

}  // namespace dooly::plot
