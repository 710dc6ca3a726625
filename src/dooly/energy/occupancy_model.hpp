#pragma once
// The occupancy model's data: every power reading, once the events have passed its sensor window, becomes one
// row of a regression of its power on the share of that window each key occupied as the innermost window
// (intercept = the device's floor). Only the normal equations are kept (X'X, X'y), so a run of any length needs
// memory for those alone; the segments the shares are computed from are trimmed as readings are consumed.
//
// Three sets of normal equations per channel:
//  - the sensor model as given (the fit the report leads with);
//  - that one again per block of consecutive readings (16-32 blocks, merged pairwise as the run grows), for the
//    delete-one-block jackknife that gives the fitted figures their intervals (model_fit.hpp);
//  - one per neighbouring sensor setting (window and lag moved by a step each way), to check the sensor model
//    against the data and to show which figures depend on it.
//
// Concurrent kernels (windows of one device on different tracks, i.e. streams, overlapping in time) draw less
// power together than the sum of their draws alone, while their energy per call stays nearly additive
// (docs/energy-attribution.md, "Concurrent kernels"). A reading whose window holds such an overlap is therefore
// kept out of the regression (whose rows assume additive power) and set aside: its power, its own slice of time
// (the update period up to its window's end) and each kernel's calls in its window, widened back by
// `split_span_ns`. Once the fit is known (report_builder.cpp) each set-aside slice's energy above the floor is
// split among those kernels in proportion to their calls times their J/call alone.
#include <cstdint>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "dooly/common/fifo.hpp"
#include "dooly/energy/key_tally.hpp"
#include "dooly/energy/window_charger.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::energy {

// One sensor setting's normal equations. Column 0 is the intercept.
struct Design {
  std::unordered_map<KeyId, int> column;  // key -> column
  std::vector<KeyId> keys;                // column - 1 -> key
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(1, 1);
  Eigen::VectorXd xty = Eigen::VectorXd::Zero(1);
  double yy = 0;
  uint64_t n = 0;
  uint64_t over_cap = 0;  // shares of keys beyond the column cap, left out
  int columns() const noexcept { return static_cast<int>(keys.size()); }
};

// A slice of the given setting's equations over consecutive readings (same columns).
struct DesignBlock {
  Eigen::MatrixXd gram;
  Eigen::VectorXd xty;
  double yy = 0;
  uint64_t n = 0;
};

struct SensorSetting {
  int64_t window_ns = 0;
  int64_t delay_ns = 0;
};

// A reading set aside for the split: its power and slice, and its kernels' calls (a range of the shares pool).
struct ConcurrentRow {
  double power_w = 0;
  int64_t slice_ns = 0;
  int64_t span_ns = 0;  // the window and the span before it, over which its calls were counted
  uint32_t first = 0, count = 0;
};
// Per key over the set-aside readings' slices: time it ran there and calls (each call counted by the share of
// its own duration inside the slice).
struct SliceTotals {
  int64_t ns = 0;
  double calls = 0;
};

struct OccupancyOptions {
  size_t max_keys = 512;                // columns per channel; further keys are not fitted
  size_t max_segments = 1u << 21;       // recent segments kept
  size_t max_pending = 1u << 20;        // readings waiting for the events to reach them
  size_t max_block_columns = 64;        // the jackknife's blocks are kept while a channel has at most this many columns
  bool sensor_check = true;             // fit the neighbouring sensor settings too
  bool split_overlaps = true;           // set readings with concurrent kernels aside for the split (above)
  int64_t split_span_ns = 100'000'000;  // how far back of a set-aside window the split counts calls
  size_t max_split_shares = 1u << 21;   // (key, calls) pairs kept for the split; beyond, readings are fitted
};

class OccupancyModel {
 public:
  OccupancyModel(const std::vector<power::Channel>& channels, OccupancyOptions options);

  // A reading of channel c from within the run (its window lies before the events that will reach it).
  void add_reading(size_t c, const power::Reading& r) { channels_[c].pending.push_back(r); }
  // Where the charger records the segments (WindowCharger's constructor takes it).
  SegmentLog* segment_log() noexcept { return &segments_; }
  // Consumes the readings whose sensor windows end at or before horizon_ns (all of them with `all`): the events
  // are final there. `open` is what is innermost on each thread now. `quiet` gets the power of readings whose
  // window no window occupied.
  template <typename Quiet>
  void consume(int64_t horizon_ns, bool all, const WindowCharger& open, Quiet&& quiet) {
    for (size_t c = 0; c < channels_.size(); ++c) {
      ChannelModel& m = channels_[c];
      while (!m.pending.empty()) {
        const power::Reading& r = m.pending.front();
        if (!all && r.t_ns - m.min_delay_ns > horizon_ns && m.pending.size() < options_.max_pending) break;
        if (add_row(c, r, open)) quiet(c, r.power_w);
        m.pending.pop_front();
      }
      release_deferred(m, open, all);
    }
  }
  // Drops segments no pending or future reading can need. trace_end[c]: the last instant channel c's readings
  // reach (INT64_MIN: none yet); dead[c]: it reads no more.
  void trim(int64_t horizon_ns, const std::vector<int64_t>& trace_end, const std::vector<bool>& dead);

  size_t channels() const noexcept { return channels_.size(); }
  const Design& design(size_t c) const noexcept { return channels_[c].given; }
  const std::vector<DesignBlock>& blocks(size_t c) const noexcept { return channels_[c].blocks; }
  bool blocks_kept(size_t c) const noexcept { return channels_[c].blocks_kept; }
  const SensorSetting& given_setting(size_t c) const noexcept { return channels_[c].settings[0]; }
  // The neighbouring settings and their equations (empty without the sensor check).
  size_t neighbours(size_t c) const noexcept { return channels_[c].settings.size() - 1; }
  const SensorSetting& neighbour_setting(size_t c, size_t i) const noexcept { return channels_[c].settings[i + 1]; }
  const Design& neighbour(size_t c, size_t i) const noexcept { return channels_[c].others[i]; }
  // The readings set aside for the split, the (key, calls) pairs their rows point into, the slice totals per key;
  // and the readings with concurrent kernels that were fitted after all (the pool was full).
  const std::vector<ConcurrentRow>& concurrent_rows(size_t c) const noexcept { return channels_[c].concurrent; }
  const std::vector<std::pair<KeyId, double>>& split_shares() const noexcept { return shares_; }
  const std::unordered_map<KeyId, SliceTotals>& slice_totals(size_t c) const noexcept { return channels_[c].slices; }
  uint64_t concurrent_unsplit(size_t c) const noexcept { return channels_[c].concurrent_unsplit; }
  int64_t split_span_ns() const noexcept { return options_.split_span_ns; }
  uint64_t segments_dropped() const noexcept { return segments_.dropped; }
  size_t retained_segments() const noexcept { return segments_.items.size(); }
  size_t retained_readings() const noexcept;

 private:
  struct ChannelModel {
    int32_t only_device = -1;
    std::vector<SensorSetting> settings;  // [0]: as given; then the neighbours
    int64_t update_ns = 0;
    int64_t min_delay_ns = 0, max_delay_ns = 0, max_window_ns = 0;  // over the settings
    Fifo<power::Reading> pending;
    int64_t widest_own_window_ns = 0;  // of the readings that carry their own window (RAPL)
    Design given;
    std::vector<Design> others;
    std::vector<DesignBlock> blocks;
    uint64_t block_rows = 1;  // readings per block
    bool blocks_kept = true;
    int64_t last_reading_ns = INT64_MIN;
    // Readings with concurrent kernels wait here while a window that reaches back into them is still open (its
    // calls' shares need its end).
    struct Deferred {
      double power_w;
      int64_t b, w, since;
    };
    Fifo<Deferred> deferred;
    std::vector<ConcurrentRow> concurrent;
    std::unordered_map<KeyId, SliceTotals> slices;
    uint64_t concurrent_unsplit = 0;
  };
  // Calls f(key, device, t0, t1, thread) for every segment and open innermost window (t1: INT64_MAX) of channel
  // m's devices reaching into [x, y) (kPoint: holding the instant y).
  template <bool kPoint, typename F>
  void visit(const ChannelModel& m, int64_t x, int64_t y, const WindowCharger& open, F&& f);
  // The given setting's occupancy of the window of w ns ending at b into occ_; true when device windows of two
  // tracks overlap in it (looked for only where the split is on and there are two tracks).
  bool given_occupancy(const ChannelModel& m, int64_t b, int64_t w, const WindowCharger& open);
  // Notes the reading's instant; true when its window (w ns ending at b) holds an overlap and the reading was
  // deferred for the split (false: it is fitted, also when the split's pool is full).
  bool defer_if_concurrent(ChannelModel& m, const power::Reading& r, int64_t b, int64_t w, bool overlap);
  // Sets a reading aside for the split (its window of w ns ends at b; `since`: ns since the channel's previous
  // reading).
  void set_aside(ChannelModel& m, double power_w, int64_t b, int64_t w, int64_t since, const WindowCharger& open);
  // Sets aside the deferred readings no open window reaches back into (all: every one).
  void release_deferred(ChannelModel& m, const WindowCharger& open, bool all);
  // Adds one reading's row to every set of equations; true when no window occupied it (a quiet reading).
  bool add_row(size_t c, const power::Reading& r, const WindowCharger& open);
  // Adds sign * (ns of [x, y) each key was innermost) to `tally`; a point (x == y) counts who is innermost at it.
  void occupancy(const ChannelModel& m, int64_t x, int64_t y, int sign, const WindowCharger& open, DenseTally& tally);
  void add_to_block(ChannelModel& m, const std::vector<std::pair<int, double>>& x, double y);

  OccupancyOptions options_;
  std::vector<ChannelModel> channels_;
  SegmentLog segments_;
  DenseTally occ_, scratch_;
  std::vector<bool> past_;
  std::vector<std::pair<int, double>> x_;
  std::vector<std::pair<int64_t, int64_t>> spans_;
  std::unordered_map<KeyId, double> calls_;
  std::vector<std::tuple<KeyId, int64_t, double>> slice_calls_;  // (key, ns, calls) in a set-aside slice
  std::vector<std::pair<KeyId, double>> shares_;
};

}  // namespace dooly::energy
