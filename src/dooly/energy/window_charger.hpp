#pragma once
// Trapezoid charging of windows. Every window gets, on each channel it is relevant to, E(end) - E(begin) of that
// channel's power trace, summed per key over calls (inclusive; exclusive = minus nested children). Nested windows
// live on their thread's stack; free windows (sections) open and close in any order. Along the way it records
// what the occupancy model needs: each stretch during which a key was the innermost window of its thread (a
// Segment), and how long each key was innermost under each enclosing window (for the model's inclusive energies).
//
// It is handed events in time order with the energies E(t) of every channel at the event's instant; it never
// looks at power itself. What runs once per kernel (a window charged in one step, the parent's stretch closed and
// resumed around it) is defined in this header so that it inlines into the attributor's loop; the rest is in
// window_charger.cpp.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "dooly/common/fifo.hpp"
#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/key_tally.hpp"

namespace dooly::energy {

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

// The segments recorded so far, in order of their end, for the occupancy model (which owns this log, reads it
// and trims it). At most `cap` are kept: beyond it the oldest go, and are counted.
struct SegmentLog {
  Fifo<Segment> items;
  size_t cap = size_t{1} << 21;
  uint64_t dropped = 0;
  void add(const Segment& s) {
    if (items.size() >= cap) [[unlikely]] {
      items.pop_front();
      ++dropped;
    }
    items.push_back(s);
  }
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
  // sensor update period (shorter windows are counted). segments: where segments go, and the innermost time
  // under each window is tallied (nullptr: the model is off, neither is kept).
  WindowCharger(std::vector<int32_t> only_device, std::vector<int64_t> update_ns, const KeyTable& keys,
                SegmentLog* segments);

  // e[c] = E(t) of channel c at the event's instant.
  void begin_nested(const Event& ev, const double* e);
  void end_nested(const Event& ev, const double* e, bool extrapolated);
  // A nested window that opens and closes with no other event in between (a kernel's, nearly always): the same
  // figures as begin_nested then end_nested, without a frame pushed and popped.
  // N: the number of channels where the caller knows it at compile time (1, one GPU: the common case), 0: any.
  template <size_t N = 0>
  [[gnu::always_inline]] void nested_window(const Event& begin, int64_t t_end, const double* e0, const double* e1,
                                            bool extrapolated) {
    const size_t n = N ? N : n_channels_;
    FrameStack& stack = stack_of(begin.thread);
    const bool outermost = stack.empty();
    if (!outermost) close_stretch<N>(stack, begin.t_ns, e0);
    const int64_t dt = t_end - begin.t_ns;
    for (size_t c = 0; c < n; ++c) {
      if (!relevant(c, begin.device)) continue;
      const double de = e1[c] - e0[c];
      charge(totals_of(begin.key, c), c, dt, de, dt, de, extrapolated);
      if (outermost && channels_[c].busy == 0) channels_[c].attributed_j += de;  // busy from begin to end, alone
    }
    if (dt > 0 && segments_) {
      record_segment(begin.key, begin.device, begin.t_ns, t_end, stack);
      add_self_overlap(begin.key, dt);
      if (!outermost) stack.back().inner.add(begin.key, dt);
    }
    if (!outermost) resume_parent(stack, t_end, e1);
  }

  void free_event(const Event& ev, const double* e, bool extrapolated);
  // Closes every window still open (the run's end), counting each as unmatched.
  void close_all(int64_t t, const double* e, bool extrapolated);

  const KeyTotals* totals(KeyId key, size_t c) const noexcept {
    const size_t i = static_cast<size_t>(key) * n_channels_ + c;
    return i < totals_.size() ? &totals_[i] : nullptr;
  }
  KeyId key_bound() const noexcept { return static_cast<KeyId>(totals_keys_); }
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
    // Innermost time of every key (on any thread) while it is open: its model figures, as a nested window's
    // `inner` gives them (a section, an NVTX range over a stream's kernels).
    KeyTally inner;
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
    if (key >= totals_keys_) [[unlikely]] {
      totals_keys_ = static_cast<size_t>(key) + 1;
      totals_.resize(totals_keys_ * n_channels_);
    }
    return totals_[static_cast<size_t>(key) * n_channels_ + c];
  }
  FrameStack& stack_of(uint32_t thread) {
    if (thread < dense_.size() && dense_[thread] != 0) [[likely]]
      return stacks_[dense_[thread] - 1];
    return new_or_big_stack(thread);
  }
  FrameStack& new_or_big_stack(uint32_t thread);
  void charge(KeyTotals& t, size_t c, int64_t dt, double de, int64_t seg_dt, double seg_de, bool extrapolated) const {
    if (seg_dt > 0) {
      add_ns(t.excl_time_ns, seg_dt);
      t.excl_energy_j += seg_de;
    }
    ++t.calls;
    add_ns(t.time_ns, dt);
    t.energy_j += de;
    if (dt < channels_[c].update_ns) ++t.short_windows;
    if (extrapolated) ++t.extrapolated;
  }
  // The parent's innermost stretch ends at t (a child opens).
  template <size_t N = 0>
  void close_stretch(FrameStack& stack, int64_t t, const double* e) {
    Frame& top = stack.back();
    const int64_t dt = t - top.seg_t0;
    if (dt <= 0) return;
    for (size_t c = 0; c < (N ? N : n_channels_); ++c) {
      if (!relevant(c, top.device)) continue;
      KeyTotals& tot = totals_of(top.key, c);
      add_ns(tot.excl_time_ns, dt);
      tot.excl_energy_j += e[c] - top.seg_e0[c];
    }
    if (!segments_) return;
    record_segment(top.key, top.device, top.seg_t0, t, stack);
    top.inner.add(top.key, dt);
  }
  // The parent's innermost stretch starts again at t (a child closed).
  void resume_parent(FrameStack& stack, int64_t t, const double* e) {
    if (stack.empty()) return;
    Frame& parent = stack.back();
    parent.seg_t0 = t;
    copy_energies(parent.seg_e0, e);
  }
  void record_segment(KeyId key, int32_t device, int64_t t0, int64_t t1, const FrameStack& stack) {
    if (!segments_) return;
    segments_->add({t0, t1, key, device, stack.thread});
    if (!free_open_.empty()) [[unlikely]]
      tally_free(key, t0, t1);
  }
  // The part of a segment inside each open free window.
  void tally_free(KeyId key, int64_t t0, int64_t t1) {
    for (FreeWindow& w : free_open_)
      if (t1 > std::max(t0, w.t0)) w.inner.add(key, t1 - std::max(t0, w.t0));
  }
  void add_self_overlap(KeyId key, int64_t ns) {
    if (key >= self_overlap_ns_.size()) self_overlap_ns_.resize(static_cast<size_t>(key) + 1, 0);
    add_ns(self_overlap_ns_[key], ns);
  }
  // E(t) per channel into a frame's copy. One channel (one GPU) is the common case: one store, not a memmove.
  void copy_energies(std::vector<double>& dst, const double* src) const {
    if (dst.size() != n_channels_) dst.resize(n_channels_);
    if (n_channels_ == 1)
      dst[0] = src[0];
    else
      std::copy(src, src + n_channels_, dst.data());
  }
  // Sums of window times saturate instead of overflowing: overlapping windows (sections on many threads, a key
  // nested in itself) can add up to more than int64 holds, though no single span can.
  static void add_ns(int64_t& sum, int64_t ns) {
    if (__builtin_add_overflow(sum, ns, &sum)) [[unlikely]]
      saturate(sum, ns);
  }
  [[gnu::cold, gnu::noinline]] static void saturate(int64_t& sum, int64_t ns) { sum = ns > 0 ? INT64_MAX : INT64_MIN; }
  void pop_frame(FrameStack& stack, int64_t t, const double* e, bool extrapolated);
  void add_overlaps(KeyId outer, const KeyTally& inner);
  Kind kind_of(KeyId key);

  size_t n_channels_;
  std::vector<ChannelState> channels_;
  const KeyTable& keys_;
  SegmentLog* segments_;
  std::vector<KeyTotals> totals_;  // [key * channels + channel]
  size_t totals_keys_ = 0;         // keys it has room for
  std::vector<FrameStack> stacks_;
  std::vector<uint32_t> dense_;                       // thread id -> stacks_ index + 1 (0: none), small ids
  std::unordered_map<uint32_t, uint32_t> dense_big_;  // the same for large ids
  std::vector<FreeWindow> free_open_;                 // open free windows, in the order they opened (few at a time)
  std::vector<Kind> kinds_;                           // cache of keys_' kinds (no lock per event)
  std::vector<int64_t> self_overlap_ns_;              // [key]: innermost time under its own window(s)
  std::unordered_map<uint64_t, int64_t> overlap_ns_;  // (outer << 32 | inner) -> ns, outer != inner
  uint64_t unmatched_ = 0;
};

}  // namespace dooly::energy
