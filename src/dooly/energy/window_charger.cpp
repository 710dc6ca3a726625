#include "dooly/energy/window_charger.hpp"

#include <algorithm>
#include <iterator>

namespace dooly::energy {

namespace {
constexpr uint32_t kDenseLimit = 4096;  // thread ids below this index a vector, larger ones a map
constexpr size_t kMaxEndSearch = 256;   // an end looks this deep for its window (deeper: unmatched)
}  // namespace

WindowCharger::WindowCharger(std::vector<int32_t> only_device, std::vector<int64_t> update_ns, const KeyTable& keys,
                             SegmentLog* segments)
    : n_channels_(only_device.size()), channels_(n_channels_), keys_(keys), segments_(segments) {
  for (size_t c = 0; c < n_channels_; ++c) {
    channels_[c].only_device = only_device[c];
    channels_[c].update_ns = update_ns[c];
  }
}

WindowCharger::Frame& WindowCharger::FrameStack::push() {
  if (depth == frames.size()) frames.emplace_back();
  return frames[depth++];
}

WindowCharger::FrameStack& WindowCharger::new_or_big_stack(uint32_t thread) {
  uint32_t* slot = nullptr;
  if (thread < kDenseLimit) {
    if (thread >= dense_.size()) dense_.resize(thread + 1, 0);
    slot = &dense_[thread];
  } else {
    slot = &dense_big_[thread];
  }
  if (*slot == 0) {
    stacks_.emplace_back();
    stacks_.back().thread = static_cast<uint32_t>(stacks_.size() - 1);
    *slot = static_cast<uint32_t>(stacks_.size());
  }
  return stacks_[*slot - 1];
}

int64_t WindowCharger::overlap_ns(KeyId outer, KeyId inner) const {
  if (outer == inner) return outer < self_overlap_ns_.size() ? self_overlap_ns_[outer] : 0;
  auto it = overlap_ns_.find((static_cast<uint64_t>(outer) << 32) | inner);
  return it != overlap_ns_.end() ? it->second : 0;
}

void WindowCharger::begin_nested(const Event& ev, const double* e) {
  FrameStack& stack = stack_of(ev.thread);
  if (!stack.empty()) {
    close_stretch(stack, ev.t_ns, e);
  } else {
    for (size_t c = 0; c < n_channels_; ++c) {
      if (!relevant(c, ev.device)) continue;
      ChannelState& s = channels_[c];
      if (s.busy++ == 0) s.busy_e0 = e[c];
    }
  }
  Frame& f = stack.push();
  f.key = ev.key;
  f.device = ev.device;
  f.t0 = f.seg_t0 = ev.t_ns;
  copy_energies(f.e0, e);
  copy_energies(f.seg_e0, e);
  f.inner.clear();
}

void WindowCharger::add_overlaps(KeyId outer, const KeyTally& inner) {
  inner.for_each([&](KeyId key, int64_t ns) {
    if (key == outer) {
      add_self_overlap(key, ns);
    } else {
      add_ns(overlap_ns_[(static_cast<uint64_t>(outer) << 32) | key], ns);
    }
  });
}

void WindowCharger::pop_frame(FrameStack& stack, int64_t t, const double* e, bool extrapolated) {
  Frame& top = stack.back();
  const int64_t seg_dt = t - top.seg_t0;
  const int64_t dt = t - top.t0;
  const bool outermost = stack.depth == 1;
  for (size_t c = 0; c < n_channels_; ++c) {
    if (!relevant(c, top.device)) continue;
    charge(totals_of(top.key, c), c, dt, e[c] - top.e0[c], seg_dt, e[c] - top.seg_e0[c], extrapolated);
    if (outermost) {
      ChannelState& s = channels_[c];
      if (--s.busy == 0) s.attributed_j += e[c] - s.busy_e0;
    }
  }
  if (seg_dt > 0) {
    record_segment(top.key, top.device, top.seg_t0, t, stack);
    if (segments_) top.inner.add(top.key, seg_dt);
  }
  if (segments_) {
    add_overlaps(top.key, top.inner);
    if (!outermost) stack.frames[stack.depth - 2].inner.merge(top.inner);
  }
  --stack.depth;
  resume_parent(stack, t, e);
}

void WindowCharger::end_nested(const Event& ev, const double* e, bool extrapolated) {
  // Normally the top of the stack. The end of a window whose begin was lost, or one that closes an outer window
  // before its inner ones, is repaired (the inner ones are closed here) and counted.
  FrameStack& stack = stack_of(ev.thread);
  size_t depth = stack.depth;
  const size_t floor = depth > kMaxEndSearch ? depth - kMaxEndSearch : 0;
  while (depth > floor && stack.frames[depth - 1].key != ev.key) --depth;
  if (depth == floor) {
    ++unmatched_;
    return;
  }
  while (stack.depth > depth) {
    ++unmatched_;
    pop_frame(stack, ev.t_ns, e, extrapolated);
  }
  pop_frame(stack, ev.t_ns, e, extrapolated);
}

Kind WindowCharger::kind_of(KeyId key) {
  if (key >= kinds_.size()) {
    const size_t from = kinds_.size();
    kinds_.resize(static_cast<size_t>(key) + 1, Kind::other);
    for (size_t k = from; k <= key; ++k) kinds_[k] = keys_.info(static_cast<KeyId>(k)).kind;
  }
  return kinds_[key];
}

void WindowCharger::free_event(const Event& ev, const double* e, bool extrapolated) {
  if (ev.begin) {
    free_open_.push_back(FreeWindow{ev.key, ev.device, ev.t_ns, std::vector<double>(e, e + n_channels_), {}});
    return;
  }
  // The key's most recent open window (free windows of one key close last-opened first).
  auto it = std::find_if(free_open_.rbegin(), free_open_.rend(), [&](const FreeWindow& w) { return w.key == ev.key; });
  if (it == free_open_.rend()) {
    ++unmatched_;
    return;
  }
  FreeWindow o = std::move(*it);
  free_open_.erase(std::next(it).base());
  const int64_t dt = ev.t_ns - o.t0;
  const bool idle = kind_of(ev.key) == Kind::idle;
  for (size_t c = 0; c < n_channels_; ++c) {
    if (!relevant(c, o.device)) continue;
    if (idle) {
      if (dt > 0) channels_[c].idle_measured = {(e[c] - o.e0[c]) / (static_cast<double>(dt) * 1e-9), dt};
      continue;
    }
    KeyTotals& t = totals_of(o.key, c);
    ++t.calls;
    add_ns(t.time_ns, dt);
    t.energy_j += e[c] - o.e0[c];
    if (dt < channels_[c].update_ns) ++t.short_windows;
    if (extrapolated) ++t.extrapolated;
  }
  if (!segments_ || idle) return;
  // What is innermost now ran inside it too, since the later of its stretch's start and the window's.
  for_each_open_innermost([&](uint32_t, const OpenInnermost& in) {
    const int64_t from = std::max(in.since_ns, o.t0);
    if (ev.t_ns > from) o.inner.add(in.key, ev.t_ns - from);
  });
  add_overlaps(o.key, o.inner);
}

void WindowCharger::close_all(int64_t t, const double* e, bool extrapolated) {
  for (FrameStack& stack : stacks_)
    while (!stack.empty()) {
      ++unmatched_;
      pop_frame(stack, t, e, extrapolated);
    }
}

}  // namespace dooly::energy
