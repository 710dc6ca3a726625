#pragma once
// Re-analyses a recorded run offline: the same attributor, fed from a dooly recording instead of live
// hooks. This is how `dooly analyze` and the no-GPU main job reproduce a run measured on a GPU.
#include <string>

#include "dooly/energy/attributor.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/energy/report.hpp"

namespace dooly::energy {

struct AnalysisOptions {
  AttributorOptions attribution;
  Mode mode = Mode::model;
  std::optional<int64_t> sensor_window_ns;  // override what the recording says about the sensor
  std::optional<int64_t> sensor_delay_ns;
};

Report analyze_recording(const Recording& recording, const AnalysisOptions& options);

}  // namespace dooly::energy
