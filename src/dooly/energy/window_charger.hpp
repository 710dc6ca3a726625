#pragma once
// Trapezoid charging of windows. Every window gets, on each channel it is relevant to, E(end) - E(begin) of that
// channel's power trace, summed per key over calls (inclusive; exclusive = minus nested children). Nested windows
// live on their thread's stack; free windows (sections) open and close in any order. Along the way it records
// what the occupancy model needs: each stretch during which a key was the innermost window of its thread (a
// Segment), and how long each key was innermost under each enclosing window (for the model's inclusive energies).
//
// It is handed events in time order with the energies E(t) of every channel at the event's instant; it never
// looks at power itself.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/key_tally.hpp"

namespace dooly::energy {

class OccupancyModel;

// Per key and channel.
struct KeyTotals {
  uint64_t calls = 0;
  int64_t time_ns = 0;
  double energy_j = 0;
  int64_t excl_time_ns = 0;
  double excl_energy_j = 0;
  uint64_t short_windows = 0;  // shorter than the channel's update period
  uint64_t extrapolated = 0;   // needed power beyond the readings
};

// A stretch during which `key` was the innermost window on thread `thread`.
struct Segment {
  int64_t t0, t1;
  KeyId key;
  int32_t device;
  uint32_t thread;
};

// The innermost window open on a thread now (it runs on until its next event).
struct OpenInnermost {
  KeyId key;
  int32_t device;
  int64_t since_ns;
};

class WindowCharger {
 public:
  // only_device[c]: channel c takes only that GPU's windows (-1: every window). update_ns[c]: the channel's
  // sensor update period (shorter windows are counted). model: where segments go (nullptr: nowhere).
  WindowCharger(std::vector<int32_t> only_device, std::vector<int64_t> update_ns, const KeyTable& keys,
                OccupancyModel* model);

  // e[c] = E(t) of channel c at the event's instant.
  void begin_nested(const Event& ev, const double* e);
  void end_nested(const Event& ev, const double* e, bool extrapolated);
  // A nested window that opens and closes with no other event in between (a kernel's, nearly always): the same
  // figures as begin_nested then end_nested, without a frame pushed and popped.
  void nested_window(const Event& begin, int64_t t_end, const double* e0, const double* e1, bool extrapolated);
  void free_event(const Event& ev, const double* e, bool extrapolated);
  // Closes every window still open (the run's end), counting each as unmatched.
  void close_all(int64_t t, const double* e, bool extrapolated);

  const KeyTotals* totals(KeyId key, size_t c) const noexcept {
    const size_t i = static_cast<size_t>(key) * n_channels_ + c;
    return i < totals_.size() ? &totals_[i] : nullptr;
  }
  KeyId key_bound() const noexcept { return static_cast<KeyId>(totals_.size() / (n_channels_ ? n_channels_ : 1)); }
  // Time `inner` was innermost while a window of `outer` was open (outer == inner: under its own window).
  int64_t overlap_ns(KeyId outer, KeyId inner) const;
  // Energy of channel c over the spans when some window relevant to it was open (conservation's "attributed").
  double attributed_j(size_t c) const noexcept { return channels_[c].attributed_j; }
  std::optional<std::pair<double, int64_t>> idle_measured(size_t c) const noexcept {  // (W, ns)
    return channels_[c].idle_measured;
  }
  uint64_t unmatched() const noexcept { return unmatched_; }
  // Threads seen so far (dense indexes 0..n-1), and what is innermost on each now.
  size_t threads() const noexcept { return stacks_.size(); }
  template <typename F>
  void for_each_open_innermost(F&& f) const {
    for (const FrameStack& s : stacks_)
      if (!s.empty()) f(s.thread, OpenInnermost{s.back().key, s.back().device, s.back().seg_t0});
  }

 private:
  struct Frame {
    KeyId key = 0;
    int32_t device = -1;
    int64_t t0 = 0;
    int64_t seg_t0 = 0;          // start of its current innermost stretch
    std::vector<double> e0;      // E(t0) per channel
    std::vector<double> seg_e0;  // E(seg_t0) per channel
    // Innermost time of the keys under this window so far (its own included), handed to its parent when it
    // closes: one add per kernel, whatever the depth.
    KeyTally inner;
  };
  // One thread's open nested windows. Frames are reused (their vectors keep their capacity), so nothing is
  // allocated per event once a stack has reached its depth.
  struct FrameStack {
    std::vector<Frame> frames;
    size_t depth = 0;
    uint32_t thread = 0;  // dense index
    bool empty() const noexcept { return depth == 0; }
    Frame& back() noexcept { return frames[depth - 1]; }
    const Frame& back() const noexcept { return frames[depth - 1]; }
    Frame& push();
  };
  struct FreeWindow {
    KeyId key;
    int32_t device;
    int64_t t0;
    std::vector<double> e0;
  };
  struct ChannelState {
    int32_t only_device = -1;
    int64_t update_ns = 0;
    int busy = 0;  // open top-level windows relevant to this channel
    double busy_e0 = 0;
    double attributed_j = 0;
    std::optional<std::pair<double, int64_t>> idle_measured;
  };

  bool relevant(size_t c, int32_t device) const noexcept {
    const int32_t only = channels_[c].only_device;
    return only < 0 || device < 0 || only == device;
  }
  KeyTotals& totals_of(KeyId key, size_t c) {
    const size_t i = static_cast<size_t>(key) * n_channels_ + c;
    if (i >= totals_.size()) totals_.resize((static_cast<size_t>(key) + 1) * n_channels_);
    return totals_[i];
  }
  FrameStack& stack_of(uint32_t thread);
  void charge(KeyTotals& t, size_t c, int64_t dt, double de, int64_t seg_dt, double seg_de, bool extrapolated) const;
  // The parent's innermost stretch ends at t (a child opens).
  void close_stretch(FrameStack& stack, int64_t t, const double* e);
  // The parent's innermost stretch starts again at t (a child closed).
  void resume_parent(FrameStack& stack, int64_t t, const double* e);
  void record_segment(KeyId key, int32_t device, int64_t t0, int64_t t1, const FrameStack& stack);
  void pop_frame(FrameStack& stack, int64_t t, const double* e, bool extrapolated);
  void add_overlaps(KeyId outer, const KeyTally& inner);
  Kind kind_of(KeyId key);

  size_t n_channels_;
  std::vector<ChannelState> channels_;
  const KeyTable& keys_;
  OccupancyModel* model_;
  std::vector<KeyTotals> totals_;  // [key * channels + channel]
  std::vector<FrameStack> stacks_;
  std::vector<uint32_t> dense_;                       // thread id -> stacks_ index + 1 (0: none), small ids
  std::unordered_map<uint32_t, uint32_t> dense_big_;  // the same for large ids
  std::unordered_map<KeyId, std::vector<FreeWindow>> free_open_;
  std::vector<Kind> kinds_;                           // cache of keys_' kinds (no lock per event)
  std::vector<int64_t> self_overlap_ns_;              // [key]: innermost time under its own window(s)
  std::unordered_map<uint64_t, int64_t> overlap_ns_;  // (outer << 32 | inner) -> ns, outer != inner
  uint64_t unmatched_ = 0;
};

}  // namespace dooly::energy
