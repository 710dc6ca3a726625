#pragma once
// Builds one channel's report from what the attribution engine gathered: the trapezoid's totals and the window
// structure (WindowCharger), the occupancy model's equations (OccupancyModel), the baseline's evidence and the
// conservation figures. The model is fitted here (model_fit.hpp), with intervals and the sensor-model check.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "dooly/energy/key_table.hpp"
#include "dooly/energy/occupancy_model.hpp"
#include "dooly/energy/report.hpp"
#include "dooly/energy/window_charger.hpp"

namespace dooly::energy {

// A channel's figures that do not come from the charger or the model.
struct ChannelEvidence {
  power::Channel channel;
  uint64_t samples = 0;
  uint64_t samples_dropped = 0;
  std::optional<double> given_baseline_w;
  const std::vector<double>* quiet_w = nullptr;  // a sample of the readings no window occupied
  uint64_t quiet_seen = 0;
  const std::vector<double>* all_w = nullptr;  // a sample of all readings from within the run
  Conservation conservation;
  double run_time_s = 0.0;
};

struct ModelReportOptions {
  bool model = true;
  int nnls_max_iterations = 0;
  double imprecise_above = 0.05;  // a J/call interval wider than this share of it flags the row
};

// model: nullptr when the model mode is off.
ChannelReport build_channel_report(size_t c, const ChannelEvidence& evidence, const WindowCharger& charger,
                                   const OccupancyModel* model, const KeyTable& keys,
                                   const ModelReportOptions& options);

}  // namespace dooly::energy
