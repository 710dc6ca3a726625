#pragma once
// Charges measured power to the windows the hooks recorded. Single-threaded and deterministic: the live
// profiler feeds it from its sampler thread, `dooly analyze` from a recording, the tests from analytic traces.
//
// Two modes run side by side over the same data:
//  - trapezoid: each window gets the exact integral of the piecewise-linear power trace over it, accumulated
//    over calls (inclusive; exclusive = minus nested children). Readings are placed at the centre of what
//    they measure (t - delay - window/2).
//  - model: every reading is regressed (non-negative least squares, intercept = idle floor) on the fraction of
//    its sensor window each region occupied as the innermost window; regions then get intercept * time plus
//    their fitted marginal power times their time, with 95 % intervals. This separates regions that alternate
//    faster than the sensor updates, where the trapezoid hands each of them the mix's average.
//
// The engine in parts, each with one job:
//   event_order.hpp      events and counter reads in time order, released as the traces cover them
//   power_trace.hpp      one channel's readings as E(t), the exact integral of power
//   window_charger.hpp   the trapezoid: windows, nesting, per-key totals, segments for the model
//   occupancy_model.hpp  the model's rows (each reading's occupancy) as normal equations, per sensor setting
//   model_fit.hpp        NNLS, intervals (jackknife over blocks of readings, the fit's covariance)
//   report_builder.hpp   baseline, rows, flags, the sensor-model check
// This class owns them and drives the order: readings into the traces, events out of the queue into the
// charger, and every kKeepUpEvents events the model fed and what no reading needs any more trimmed.
//
// Events must arrive in time order (late ones are sorted in). An event is processed once every live channel's
// trace covers its time (or it is older than max_lag_ns), so energies are exact and memory stays bounded. The
// live profiler, which adds each tick's readings before its events, says how far the events are complete
// (expect_events): events the traces already cover are then processed as they are added.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "dooly/common/fifo.hpp"
#include "dooly/energy/event.hpp"
#include "dooly/energy/event_order.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/occupancy_model.hpp"
#include "dooly/energy/power_trace.hpp"
#include "dooly/energy/report.hpp"
#include "dooly/energy/window_charger.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::energy {

struct AttributorOptions {
  int64_t max_lag_ns = 2'000'000'000;    // process events this far behind the slowest channel regardless
  size_t max_pending_events = 1u << 20;  // ... or when this many wait
  size_t model_max_keys = 512;           // model columns per channel; further regions are not fitted
  size_t max_segments = 1u << 21;        // recent innermost segments kept for the model's occupancy
  size_t max_quiet_samples = 1u << 17;   // reservoir for the quiet-sample baseline
  std::optional<double> baseline_w;      // given by the user: used for J/call and as the fixed intercept
  bool model = true;
  bool sensor_check = true;  // also fit the neighbouring sensor settings (the report's check)
  // Readings with concurrent kernels: set aside and split by J/call alone (occupancy_model.hpp), counting calls
  // this far back of their windows. false: fitted like the others.
  bool split_overlaps = true;
  int64_t split_span_ns = 100'000'000;
  int nnls_max_iterations = 0;  // 0: the solver's default
  // A window whose begin and end are consecutive events (a kernel's) is charged in one step: the same figures,
  // without a frame pushed and popped. false: every event on its own (the benchmark compares the two).
  bool pair_windows = true;
};

class Attributor {
 public:
  Attributor(std::vector<power::Channel> channels, const KeyTable& keys, AttributorOptions options = {});

  const std::vector<power::Channel>& channels() const noexcept { return channels_; }

  // The run's first instant: conservation is reckoned from here to finish()'s t_end.
  void begin_run(int64_t t_ns);
  void add_reading(const power::Reading& reading);
  void add_event(const Event& e) {
    if (e.t_ns < order_.last_event_ns() || e.t_ns < order_.processed_ns()) [[unlikely]]
      return add_late_event(e);
    // A kernel's end right after its begin, both covered: charged at once (what process() would do next).
    if (e.t_ns <= ready_ns_ && pairs_allowed() && order_.closes_front(e)) return pair_with_front(e);
    order_.push(e);
    // In order and covered: everything before it is too, so what waits is processed now (but a begin, which may
    // pair with the next event).
    if (e.t_ns <= ready_ns_ && !order_.holds_one_begin()) process(ready_ns_, /*hold_last=*/true);
  }
  void add_counter(uint32_t channel, int64_t t_ns, double energy_j);
  // Every event before events_complete_ns is being added now (after this batch's readings): add_event may
  // process the ones the traces cover straight away. Optional; advance() does the same at the batch's end.
  void expect_events(int64_t events_complete_ns);
  // The channel produces nothing more: stop waiting for it.
  void mark_dead(uint32_t channel);
  // Every event before events_complete_ns has been added: process all that the traces cover.
  void advance(int64_t events_complete_ns);
  // Processes everything (holding the last reading where traces end) and builds the report.
  Report finish(int64_t t_end_ns);

  size_t pending_events() const noexcept { return order_.size(); }
  // What is held in memory now (the bounded-memory tests watch these).
  size_t retained_readings() const noexcept;
  size_t retained_segments() const noexcept { return model_ ? model_->retained_segments() : 0; }

 private:
  static constexpr KeyId kRunMarker = 0xffffffffu;
  static constexpr uint32_t kKeepUpEvents = 4096;

  struct Reservoir {  // a uniform sample of at most `cap` values
    std::vector<double> values;
    uint64_t seen = 0;
  };
  struct ChannelInput {
    PowerTrace trace;
    bool dead = false;
    uint64_t samples = 0, dropped = 0;
    Reservoir quiet, all;
    std::optional<std::pair<int64_t, double>> counter_first, counter_last;  // (t, J) as read
    std::optional<double> counter_first_e, counter_last_e;                  // the trace's E(t) there
    std::optional<double> run_e0;
  };
  struct CounterMark {  // a counter read that processing has not reached yet
    int64_t t_ns;
    uint32_t channel;
  };

  // How far events can be processed: every live channel's trace covers it and events are complete to it.
  int64_t horizon(int64_t events_complete_ns) const noexcept;
  // Processes what is ready up to horizon_ns, in order; hold_last keeps a trailing begin for its end.
  void process(int64_t horizon_ns, bool hold_last);
  void process_one(const Event& e);
  // An event older than the newest one added, or than what is processed (its thread was preempted between its
  // clock read and its store): sorted in among those waiting, or moved up to the processed instant.
  void add_late_event(const Event& e);
  // A window's begin and end with nothing in between, charged in one step. Inlined into process() and
  // pair_with_front(): it runs once per kernel. N: the number of channels, where known (1: one GPU), else 0.
  template <size_t N>
  [[gnu::always_inline]] void process_pair(const Event& begin, const Event& end) {
    if (!counter_marks_.empty()) take_counter_marks(end.t_ns);
    double e0_local[N ? N : 1], e1_local[N ? N : 1];
    double* e0 = N ? e0_local : e0_.data();
    double* e1 = N ? e1_local : e1_.data();
    bool extrapolated = false, ignored = false;  // a begin's extrapolation is not counted (as in begin_nested)
    energies_at<N>(begin.t_ns, e0, ignored);
    energies_at<N>(end.t_ns, e1, extrapolated);
    charger_.nested_window<N>(begin, end.t_ns, e0, e1, extrapolated);
    since_keep_up_ += 2;
    if (since_keep_up_ >= kKeepUpEvents) [[unlikely]]
      keep_up();
  }
  [[gnu::always_inline]] void process_pair_any(const Event& begin, const Event& end) {
    if (n_channels_ == 1)
      process_pair<1>(begin, end);
    else
      process_pair<0>(begin, end);
  }
  void pair_with_front(const Event& end);
  // A pair counts as two events; where the keep-up point would fall between them they go one at a time, so that
  // it falls where it would have.
  bool pairs_allowed() const noexcept { return options_.pair_windows && since_keep_up_ + 1 < kKeepUpEvents; }
  // A nested begin waiting for its end is processed now (something else comes between them).
  void release_held() {
    if (order_.size() == 1) process(ready_ns_, /*hold_last=*/false);
  }
  // Every kKeepUpEvents processed events: feed the model and trim. A sampler tick hands over a whole period of
  // events at once (NVML's: 500 ms, ~70,000 kernels on a busy GPU); feeding and trimming as processing goes
  // keeps the segment queue at the sensor's reach (~100 ms) instead of a whole period. Only what lies strictly
  // before the processed instant is final (the next kernel's begin may come at the previous one's end), and the
  // trace itself is left to advance(): finish() evaluates E(t) at the run's end, which events may have passed.
  void keep_up();
  void feed_model(int64_t horizon_ns, bool all);
  void trim(int64_t horizon_ns, bool trace);
  void take_counter_marks(int64_t until_ns);
  template <size_t N = 0>
  void energies_at(int64_t t_ns, double* out, bool& extrapolated) const {
    bool ex = false;
    for (size_t c = 0; c < (N ? N : n_channels_); ++c) out[c] = in_[c].trace.energy_j(t_ns, &ex);
    if (ex) extrapolated = true;
  }
  void sample(Reservoir& r, double value);
  Conservation conservation(size_t c, int64_t t_end, double& run_time_s) const;

  std::vector<power::Channel> channels_;
  size_t n_channels_ = 0;
  const KeyTable& keys_;
  AttributorOptions options_;
  std::vector<ChannelInput> in_;
  std::unique_ptr<OccupancyModel> model_;  // null with the model off
  WindowCharger charger_;
  EventOrder order_;
  Fifo<CounterMark> counter_marks_;
  int64_t ready_ns_ = INT64_MIN;  // an event added at or before this is processed at once
  int64_t run_t0_ = INT64_MIN;
  uint32_t since_keep_up_ = 0;
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;
  std::vector<double> e0_, e1_;     // n_channels_ each
  std::vector<int64_t> trace_end_;  // trim's scratch
  std::vector<bool> dead_;
};

}  // namespace dooly::energy
