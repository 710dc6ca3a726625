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
//    their fitted marginal power times their time. This separates regions that alternate faster than the
//    sensor updates, where the trapezoid hands each of them the mix's average.
//
// Events must arrive in time order. An event is processed once every live channel's trace covers its time
// (or it is older than max_lag_ns), so energies are exact and memory stays bounded. The live profiler, which
// adds each tick's readings before its events, says how far the events are complete (expect_events): events
// the traces already cover are then processed as they are added, without a trip through the pending queue.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include <Eigen/Dense>

#include "dooly/common/fifo.hpp"
#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/power_trace.hpp"
#include "dooly/energy/report.hpp"
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
  // Charge a window that opens and closes with no event in between in one step (see process_pair). The same
  // figures either way, bit for bit; false processes every event on its own (the tests compare the two).
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
    // The usual cases inline (the live profiler calls this for every event it drains): a kernel's end straight
    // after its begin, a begin in time order that the traces cover, an event in order that they do not yet.
    if (holding_) {
      if (pairs_with_held(e)) [[likely]] {
        holding_ = false;
        return process_pair(held_, e);
      }
    } else if (e.t_ns >= last_event_ns_ && e.t_ns >= processed_ns_) {
      if (e.t_ns > ready_ns_) {
        last_event_ns_ = e.t_ns;
        pending_.push_back(e);
        return;
      }
      // What add_event_in_general does here when nothing is pending and no counter read is due: hold it.
      if (may_hold(e) && pending_.empty() && (counter_marks_.empty() || counter_marks_.front().t_ns > e.t_ns)) {
        last_event_ns_ = e.t_ns;
        held_ = e;
        holding_ = true;
        return;
      }
    }
    add_event_in_general(e);
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

  // Events added but not processed yet: the queue's, and a begin held back for its end (see process_pair).
  size_t pending_events() const noexcept { return pending_.size() + (holding_ ? 1 : 0); }
  // What is held in memory now (the bounded-memory tests watch these).
  size_t retained_readings() const noexcept;
  size_t retained_segments() const noexcept { return segments_.size(); }

 private:
  static constexpr KeyId kRunMarker = 0xffffffffu;

  struct Acc {
    uint64_t calls = 0;
    int64_t time_ns = 0;
    double energy_j = 0;
    int64_t excl_time_ns = 0;
    double excl_energy_j = 0;
    uint64_t short_windows = 0;
    uint64_t extrapolated = 0;
  };
  // Time per key in a short list, the entry last added to kept at hand: the keys under one window (a reading's,
  // or an open region's) are few, and runs of one key are long.
  struct KeyTally {
    std::vector<std::pair<KeyId, int64_t>> items;
    size_t last = 0;
    void clear() noexcept {
      items.clear();
      last = 0;
    }
    // Adds ns to key's entry; false (nothing added) when key has none and the list already holds `cap` keys.
    // Inlined into its two callers: it runs once per segment a reading's window holds, and once per kernel per
    // enclosing region (as a call: 10 % slower on a stream of kernels inside a region, where the two alternate).
    [[gnu::always_inline]] bool add(KeyId key, int64_t ns, size_t cap = SIZE_MAX) {
      if (last < items.size() && items[last].first == key) [[likely]] {
        items[last].second += ns;
        return true;
      }
      for (size_t i = 0; i < items.size(); ++i)
        if (items[i].first == key) {
          items[i].second += ns;
          last = i;
          return true;
        }
      if (items.size() >= cap) return false;
      last = items.size();
      items.emplace_back(key, ns);
      return true;
    }
  };
  struct Open {
    KeyId key = 0;
    int32_t device = -1;
    int64_t t0 = 0;
    int64_t seg_t0 = 0;
    std::vector<double> e0;      // E(t0) per channel
    std::vector<double> seg_e0;  // E(seg_t0) per channel
    // Innermost time of other keys under this window so far, merged into overlap_ns_ when it closes: a region
    // holds thousands of kernels of a few keys, and a short list beats a hash lookup per kernel. Keys beyond
    // the first kInnerKeys go to the map directly (a scan stays short however many there are).
    static constexpr size_t kInnerKeys = 16;
    KeyTally inner;
  };
  // dst = src (n channels) without a memmove call for the usual one or two channels (this runs twice per event).
  static void copy_energies(std::vector<double>& dst, const double* src, size_t n) {
    if (dst.size() != n) dst.resize(n);
    double* d = dst.data();
    if (n <= 2) {
      for (size_t i = 0; i < n; ++i) d[i] = src[i];
    } else {
      std::copy(src, src + n, d);
    }
  }
  // One thread's open nested windows. Frames are reused (their energy vectors keep their capacity), so the
  // sampler thread allocates nothing per event once a stack has reached its depth.
  class FrameStack {
   public:
    bool empty() const noexcept { return depth_ == 0; }
    size_t size() const noexcept { return depth_; }
    Open& back() noexcept { return frames_[depth_ - 1]; }
    const Open& back() const noexcept { return frames_[depth_ - 1]; }
    void push(KeyId key, int32_t device, int64_t t, const double* e, size_t n) {
      if (depth_ == allocated_) {
        frames_.emplace_back();
        ++allocated_;
      }
      Open& o = frames_[depth_++];
      o.key = key;
      o.device = device;
      o.t0 = o.seg_t0 = t;
      copy_energies(o.e0, e, n);
      copy_energies(o.seg_e0, e, n);
      o.inner.clear();
    }
    void pop_back() noexcept { --depth_; }
    std::vector<Open>::const_iterator begin() const noexcept { return frames_.begin(); }
    std::vector<Open>::const_iterator end() const noexcept { return frames_.begin() + static_cast<std::ptrdiff_t>(depth_); }
    std::vector<Open>::iterator begin() noexcept { return frames_.begin(); }
    std::vector<Open>::iterator end() noexcept { return frames_.begin() + static_cast<std::ptrdiff_t>(depth_); }

    uint32_t thread = 0;

   private:
    std::vector<Open> frames_;
    size_t allocated_ = 0;  // frames_.size(), as a plain count (Open's size is not a power of two)
    size_t depth_ = 0;
  };
  FrameStack& stack_of(uint32_t thread) {
    if (thread < n_stacks_) [[likely]]
      return stacks_[thread];
    while (thread >= stacks_.size()) {
      stacks_.emplace_back();
      stacks_.back().thread = static_cast<uint32_t>(stacks_.size() - 1);
    }
    n_stacks_ = stacks_.size();
    return stacks_[thread];
  }
  struct Segment {  // a stretch during which `key` was the innermost window on thread `thread`
    int64_t t0, t1;
    KeyId key;
    int32_t device;
    uint32_t thread;
  };
  struct Model {
    std::unordered_map<KeyId, int> column;  // key -> column (0 is the intercept)
    std::vector<KeyId> keys;                // column - 1 -> key
    Eigen::MatrixXd gram;                   // X'X
    Eigen::VectorXd xty;                    // X'y
    double yy = 0;
    uint64_t n = 0;
    uint64_t over_cap = 0;
  };
  struct ChannelState {
    PowerTrace trace;
    int32_t only_device = -1;  // a GPU channel's device (it takes that GPU's windows only); -1: takes all
    bool dead = false;
    uint64_t samples = 0, dropped = 0;
    Fifo<power::Reading> model_pending;
    int64_t widest_window_ns = 0;  // of the readings that carry their own window (RAPL)  // readings whose window the events have not reached yet
    Model model;
    std::vector<double> quiet_w, all_w;         // reservoirs for the baseline
    uint64_t quiet_seen = 0, all_seen = 0;
    std::optional<std::pair<int64_t, double>> counter_first, counter_last;
    std::optional<double> counter_first_e, counter_last_e;  // the trace's E(t) at those two reads
    int busy = 0;            // open top-level windows relevant to this channel
    double busy_e0 = 0;
    double attributed_j = 0;
    std::optional<double> run_e0;
    std::optional<double> idle_measured_w;
    int64_t idle_measured_ns = 0;
  };

  // Whether a window on `device` is charged on channel c (a GPU channel only takes its own GPU's windows).
  // How far events can be processed: every live channel's trace covers it and events are complete to it.
  int64_t horizon(int64_t events_complete_ns) const noexcept;
  bool relevant(size_t c, int32_t device) const noexcept {
    const int32_t only = state_[c].only_device;
    return only < 0 || device < 0 || only == device;
  }
  Acc& acc(KeyId key, size_t c) {
    const size_t i = static_cast<size_t>(key) * n_channels_ + c;
    if (i >= acc_.size()) grow_acc(key);
    return acc_[i];
  }
  void grow_acc(KeyId key);
  // Time the innermost `inner` ran under an open `outer` (the model's inclusive energies).
  int64_t overlap_ns(KeyId outer, KeyId inner) const;
  void process_until(int64_t horizon_ns);
  // One event on its own: the counter reads due before it, the event, the keep-up count.
  void process_one(const Event& e) {
    process_counter_marks(e.t_ns);
    process_event(e);
    keep_up();
  }
  void process_oldest_pending();
  // Every kKeepUpEvents processed events: feed the model and trim. A sampler tick hands over a whole period of
  // events at once (NVML's: 500 ms, ~70,000 kernels on a busy GPU); feeding the model and trimming as
  // processing goes, rather than once at the end, keeps the segment queue at the sensor's reach (~100 ms)
  // instead of a whole period: less memory, fewer page faults, a queue that stays in cache. Only what lies
  // strictly before processed_ns_ is final (more events may come at that very nanosecond: the next kernel's
  // begin at the previous one's end), and the trace itself is left to advance(): finish() evaluates E(t) at
  // the run's end, which events may have gone past (a recording re-analysed).
  void keep_up() {
    if (++since_keep_up_ >= kKeepUpEvents) [[unlikely]]
      keep_up_now();
  }
  void keep_up_now();
  static constexpr uint32_t kKeepUpEvents = 4096;
  uint32_t since_keep_up_ = 0;
  void add_event_in_general(const Event& e);
  void process_event(const Event& e);
  // A window that opens and closes with no event in between (a kernel's, nearly always) is charged in one step
  // from its two edges (process_pair): no frame pushed and popped, no energies copied, one trip through the
  // queues. Its begin is therefore held back by one event; anything else that comes first releases it to the
  // usual path. The figures are the same, bit for bit, as the begin and the end processed one after the other.
  //
  // may_hold: the kind of event that is held back (or paired from the queue), given that it comes in time order
  // and the traces cover it.
  bool may_hold(const Event& e) const noexcept { return e.begin && (e.flags & flags::nested) && options_.pair_windows; }
  static bool closes(const Event& begin, const Event& e) noexcept {
    return !e.begin && (e.flags & flags::nested) && e.key == begin.key && e.thread == begin.thread && e.t_ns >= begin.t_ns;
  }
  bool pairs_with_held(const Event& e) const noexcept { return closes(held_, e) && e.t_ns <= ready_ns_; }
  void release_held() {
    if (!holding_) return;
    holding_ = false;
    process_one(held_);
  }
  void process_pair(const Event& begin, const Event& end) {
    // As after the end's own processing (finish() closes open windows at the last event's instant).
    if (end.t_ns > last_event_ns_) last_event_ns_ = end.t_ns;
    if (since_keep_up_ + 1 >= kKeepUpEvents) [[unlikely]] {
      // The begin's keep_up would fall between the two (feeding the model and trimming there, before any
      // reading that arrives with the end): one at a time, so that it does, and the count stays in step.
      process_one(begin);
      process_one(end);
      return;
    }
    if (n_channels_ == 1) return process_pair_n<1>(begin, end);
    process_pair_n<0>(begin, end);
  }
  template <size_t N>  // N channels (0: n_channels_): one GPU's is the usual case, its energies stay in registers
  void process_pair_n(const Event& begin, const Event& end);
  // A closing window's figures on one channel: dt and de over the whole window, seg_dt and seg_de over its last
  // innermost stretch (exclusive).
  void charge(Acc& a, size_t c, int64_t dt, double de, int64_t seg_dt, double seg_de, bool extrapolated) const noexcept {
    if (seg_dt > 0) {
      a.excl_time_ns += seg_dt;
      a.excl_energy_j += seg_de;
    }
    ++a.calls;
    a.time_ns += dt;
    a.energy_j += de;
    if (dt < channels_[c].sensor.update_ns) ++a.short_windows;
    if (extrapolated) ++a.extrapolated;
  }
  void process_counter_marks(int64_t until_ns) {
    if (!counter_marks_.empty() && counter_marks_.front().t_ns <= until_ns) take_counter_marks(until_ns);
  }
  void take_counter_marks(int64_t until_ns);
  // E(t) of every channel into out[0, n_channels_) (once or twice per event: inline).
  void energies_at(int64_t t_ns, double* out, bool& extrapolated) const {
    const size_t n = n_channels_;
    bool ex = false;
    for (size_t c = 0; c < n; ++c) out[c] = state_[c].trace.energy_j(t_ns, &ex);
    if (ex) extrapolated = true;
  }
  void close_segment(Open& top, int64_t t, const double* e, FrameStack& stack);
  // For the model: key ran innermost over [t0, t1) on the stack's thread, under the stack's open windows, which
  // hold key's own window unless `own_window_apart` (a pair's window is on no stack). Once per kernel: inline.
  void record_segment(KeyId key, int32_t device, int64_t t0, int64_t t1, FrameStack& stack, bool own_window_apart) {
    if (!options_.model) return;
    if (segments_.size() >= options_.max_segments) [[unlikely]] {
      segments_.pop_front();
      ++segments_dropped_;
    }
    segments_.push_back({t0, t1, key, device, stack.thread});
    if (key >= n_self_overlap_) [[unlikely]]
      grow_self_overlap(key);
    if (own_window_apart) self_overlap_ns_[key] += t1 - t0;
    if (!stack.empty()) record_overlaps(key, t1 - t0, stack);
  }
  void record_overlaps(KeyId key, int64_t dt, FrameStack& stack);
  void grow_self_overlap(KeyId key);
  void end_nested(FrameStack& stack, int64_t t, const double* e, bool extrapolated);
  void process_model_samples(int64_t horizon_ns, bool all);
  void add_model_sample(size_t c, const power::Reading& r);
  void reservoir(std::vector<double>& v, uint64_t& seen, double value);
  void trim(int64_t horizon_ns, bool trace = true);  // segments no reading can need; trace points too if `trace`
  ChannelReport build_channel(size_t c, int64_t t_end);

  std::vector<power::Channel> channels_;
  // channels_.size() == state_.size(), kept as a plain count: the per-event loops would otherwise recompute a
  // vector's size (a subtraction and a multiplication by the element size's inverse) on every iteration.
  size_t n_channels_ = 0;
  const KeyTable& keys_;
  std::vector<Kind> kinds_;  // cache of keys_' kinds: looked up per event without the table's lock
  AttributorOptions options_;
  std::vector<ChannelState> state_;
  std::vector<Acc> acc_;  // [key * channels + channel]
  Fifo<Event> pending_;
  std::vector<FrameStack> stacks_;  // by thread index
  size_t n_stacks_ = 0;             // stacks_.size()
  std::unordered_map<KeyId, std::vector<Open>> free_open_;
  Fifo<Segment> segments_;
  struct CounterMark {  // a counter read not yet reached
    int64_t t_ns;
    uint32_t channel;
  };
  Fifo<CounterMark> counter_marks_;
  std::vector<int64_t> self_overlap_ns_;              // [key]: innermost time under its own window(s)
  size_t n_self_overlap_ = 0;                         // self_overlap_ns_.size()
  std::unordered_map<uint64_t, int64_t> overlap_ns_;  // (ancestor << 32 | innermost) -> time, ancestor != innermost,
                                                      // of closed ancestor windows (open ones: Open::inner)
  Event held_{};          // a nested begin that came in time order and is covered: see pairs_with_held()
  bool holding_ = false;
  int64_t processed_ns_ = INT64_MIN;                   // events processed up to here
  int64_t last_event_ns_ = INT64_MIN;
  int64_t ready_ns_ = INT64_MIN;  // an event added at or before this (and in order) is processed at once
  int64_t run_t0_ = INT64_MIN;
  uint64_t unmatched_ = 0;
  uint64_t segments_dropped_ = 0;
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;
  std::vector<double> scratch_e_, scratch_e0_;  // n_channels_ each, from the start
  std::vector<bool> scratch_past_;
  KeyTally scratch_occ_;  // add_model_sample's occupancy per key
};

}  // namespace dooly::energy
