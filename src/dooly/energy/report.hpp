#pragma once
// What a run produced: per channel, per region, the figures both attribution modes give. This is the one data
// model the table, CSV and JSON writers print; its persisted forms carry `kReportVersion`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dooly/energy/key_table.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::energy {

// 2: model-mode intervals, the sensor-model check, NNLS convergence.
inline constexpr int kReportVersion = 2;

// a - b, or 0 when the two agree to rounding (a J/call of 1e-12 J from subtracting equal sums is not a figure).
inline double net_of(double a, double b) noexcept {
  const double d = a - b;
  return std::fabs(d) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)) ? 0.0 : d;
}

enum class Mode { trapezoid, model };
std::string_view to_string(Mode mode) noexcept;
Mode mode_from_string(std::string_view word);  // throws InputError

struct RegionRow {
  std::string name;
  std::string short_name;  // a shorter label for the table where the name is long (CUPTI: a kernel's own name)
  Kind kind = Kind::other;
  uint64_t calls = 0;
  double time_s = 0.0;       // inclusive: summed over windows
  double energy_j = 0.0;     // trapezoid: integral of power over the windows (idle included)
  double excl_time_s = 0.0;  // nested windows minus their children
  double excl_energy_j = 0.0;
  uint64_t short_windows = 0;         // windows shorter than the sensor's update period
  uint64_t extrapolated_windows = 0;  // windows that needed power beyond the readings
  // Model mode (NNLS fit of every reading on the regions' occupancy of its sensor window).
  std::optional<double> model_power_w;   // marginal power above the intercept while this region is innermost
  std::optional<double> model_energy_j;  // inclusive, idle included: intercept * time + fitted marginal energy
  std::optional<double> model_excl_energy_j;
  bool model_inseparable = false;  // its occupancy is (nearly) a combination of others: not identifiable
  bool model_too_little_data = false;
  // Half-widths of the model figures' 95 % intervals: the fit's own (ModelFit::interval_method) and the sensor
  // model's part (the largest move at a neighbouring sensor setting), added in quadrature.
  std::optional<double> model_power_hw_w;
  std::optional<double> model_energy_hw_j;
  std::optional<double> model_j_per_call_hw_j;
  std::optional<double> model_j_per_call_sensor_j;  // the sensor model's part of the J/call interval
  bool model_imprecise = false;                     // the J/call interval is wider than 5 % of it
  bool model_sensor_sensitive = false;  // the sensor model's part of the J/call interval exceeds the fit's own
  // Concurrent kernels (report_builder.cpp, the split): the time and calls of this key inside the slices of the
  // readings whose windows held an overlap, and the energy above the floor the split gave it there.
  std::optional<double> model_overlap_time_s;
  std::optional<double> model_overlap_calls;
  std::optional<double> model_overlap_energy_j;
  bool model_never_alone = false;  // it ran only in overlaps: its J/call alone was fitted on the overlapped readings

  double avg_power_w() const noexcept { return time_s > 0 ? energy_j / time_s : 0.0; }
  // (energy - baseline * time) / calls: the region's own joules above the idle floor, per call.
  double j_per_call(double baseline_w) const noexcept {
    return calls ? net_of(energy_j, baseline_w * time_s) / static_cast<double>(calls) : 0.0;
  }
  std::optional<double> model_j_per_call(double baseline_w) const noexcept {
    if (!model_energy_j || !calls) return std::nullopt;
    return net_of(*model_energy_j, baseline_w * time_s) / static_cast<double>(calls);
  }
  // The model cannot be trusted for this row: not identifiable, or its interval is too wide.
  bool model_unresolved() const noexcept { return model_inseparable || model_imprecise; }
  bool mostly_short() const noexcept { return calls && short_windows * 2 > calls; }
  const std::string& label() const noexcept { return short_name.empty() ? name : short_name; }
};

struct ModelFit {
  bool fitted = false;
  std::string why_not;  // when not fitted
  uint64_t samples = 0;
  double intercept_w = 0.0;  // the fitted idle floor (or the given baseline)
  bool intercept_fixed = false;
  double residual_rms_w = 0.0;
  double r_squared = 0.0;
  int columns = 0;
  uint64_t keys_over_cap = 0;  // distinct regions beyond the model's column cap (not fitted)
  bool nnls_converged = true;  // false: the solver gave up; the channel falls back to the trapezoid
  int nnls_iterations = 0;
  std::string interval_method;       // how the rows' intervals were obtained
  uint64_t interval_blocks = 0;      // blocks of readings the jackknife used (0: covariance only)
  uint64_t concurrent_readings = 0;  // readings with concurrent kernels, split rather than fitted
  uint64_t concurrent_unsplit = 0;   // ... fitted after all (the split's pool was full)
  double split_span_ms = 0;          // how far back of a split reading's window its kernels' calls were counted
  uint64_t never_alone_keys = 0;     // kernels that ran only in overlaps (J/call alone fitted on them)
};

// The sensor model checked against the data: the fit at the given window and lag, and at neighbouring ones.
struct SensorSettingFit {
  int64_t window_ns = 0;
  int64_t delay_ns = 0;
  bool fitted = false;
  double residual_rms_w = 0.0;
  uint64_t rows_moved = 0;  // rows whose J/call moves by more than its interval at this setting
};
struct SensorCheck {
  bool done = false;
  std::string why_not;
  SensorSettingFit given;
  std::vector<SensorSettingFit> neighbours;
  int preferred = -1;  // the neighbour with the lowest residual when it beats the given setting, else -1
  uint64_t rows_sensitive = 0;
  const SensorSettingFit& best() const noexcept { return preferred >= 0 ? neighbours[preferred] : given; }
};

struct Conservation {
  double run_energy_j = 0.0;              // integral of the trace over the run
  double attributed_j = 0.0;              // top-level windows
  double unattributed_j = 0.0;            // run - attributed
  std::optional<double> counter_delta_j;  // vendor energy counter, start to stop
  std::optional<double> ratio() const noexcept {
    if (!counter_delta_j || *counter_delta_j <= 0) return std::nullopt;
    return (attributed_j + unattributed_j) / *counter_delta_j;
  }
};

struct ChannelReport {
  power::Channel channel;
  double baseline_w = 0.0;
  std::string
      baseline_method;  // "given", "measured at start (N ms)", "quiet samples (median of N)", "lowest 5%", "none"
  double run_time_s = 0.0;
  uint64_t samples = 0;
  uint64_t samples_dropped = 0;  // not newer than the previous reading
  Conservation conservation;
  ModelFit fit;
  SensorCheck sensor_check;
  std::vector<RegionRow> rows;  // sorted by energy, descending
};

struct Report {
  int version = kReportVersion;
  std::string backend;
  Mode mode = Mode::model;  // the mode the table leads with (trapezoid where the model could not be fitted)
  std::vector<std::pair<std::string, std::string>> meta;
  uint64_t events_dropped = 0;    // hooks that found the bounded event buffer full
  uint64_t unmatched_events = 0;  // ends without a begin (or mis-nested), repaired
  std::vector<ChannelReport> channels;
};

// Replaces a channel's sensor window / lag with values the user gave (after characterising the sensor) and
// says so in its description, so every report shows which sensor model its model-mode figures rest on.
void apply_sensor_overrides(power::Channel& channel, std::optional<int64_t> window_ns, std::optional<int64_t> delay_ns);

}  // namespace dooly::energy
