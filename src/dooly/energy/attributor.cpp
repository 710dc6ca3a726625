#include "dooly/energy/attributor.hpp"

#include <algorithm>
#include <cmath>

#include "dooly/common/error.hpp"
#include "dooly/energy/nnls.hpp"

namespace dooly::energy {

namespace {
int64_t sensor_window(const power::Channel& ch, const power::Reading& r) {
  return r.window_ns >= 0 ? r.window_ns : ch.sensor.window_ns;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}
}  // namespace

Attributor::Attributor(std::vector<power::Channel> channels, const KeyTable& keys, AttributorOptions options)
    : channels_(std::move(channels)),
      n_channels_(channels_.size()),
      keys_(keys),
      options_(options),
      state_(n_channels_),
      scratch_e_(n_channels_),
      scratch_e0_(n_channels_) {
  for (size_t c = 0; c < n_channels_; ++c) {
    ChannelState& s = state_[c];
    s.model.gram = Eigen::MatrixXd::Zero(1, 1);
    s.model.xty = Eigen::VectorXd::Zero(1);
    const power::Channel& ch = channels_[c];
    if (ch.domain == power::Domain::gpu && ch.device >= 0) s.only_device = ch.device;
  }
}

void Attributor::grow_acc(KeyId key) { acc_.resize((static_cast<size_t>(key) + 1) * n_channels_); }

int64_t Attributor::overlap_ns(KeyId outer, KeyId inner) const {
  if (outer == inner) return outer < self_overlap_ns_.size() ? self_overlap_ns_[outer] : 0;
  auto it = overlap_ns_.find((static_cast<uint64_t>(outer) << 32) | inner);
  return it != overlap_ns_.end() ? it->second : 0;
}

size_t Attributor::retained_readings() const noexcept {
  size_t n = 0;
  for (const auto& s : state_) n += s.trace.size() + s.model_pending.size();
  return n;
}

void Attributor::begin_run(int64_t t_ns) {
  run_t0_ = t_ns;
  add_event(Event{t_ns, kRunMarker, 0, -1, true, 0});
}

void Attributor::add_reading(const power::Reading& r) {
  if (r.channel >= state_.size()) return;
  release_held();  // its E(t) is taken before this reading, as it would have been had it not been held
  ChannelState& s = state_[r.channel];
  const power::Channel& ch = channels_[r.channel];
  const int64_t aligned = r.t_ns - ch.sensor.delay_ns - sensor_window(ch, r) / 2;
  if (!s.trace.append(aligned, r.power_w)) {
    ++s.dropped;
    return;
  }
  ++s.samples;
  // Readings from before the run (NVML hands over up to a second of backlog from before the program) stay out
  // of the baseline and the model: the device was in another state then.
  if (r.t_ns < run_t0_) return;
  s.widest_window_ns = std::max(s.widest_window_ns, r.window_ns);
  reservoir(s.all_w, s.all_seen, r.power_w);
  if (options_.model) s.model_pending.push_back(r);
}

void Attributor::add_event_in_general(const Event& event) {
  release_held();  // add_event() pairs it with this event when it can; here it cannot
  // An event older than what is already processed (its thread was preempted between its clock read and its
  // store, and processing has moved on, trimming the readings behind it) is moved up to that instant.
  Event e = event;
  if (e.t_ns < processed_ns_) e.t_ns = processed_ns_;
  if (e.t_ns >= last_event_ns_) {
    last_event_ns_ = e.t_ns;
    if (e.t_ns > ready_ns_) {
      pending_.push_back(e);
      return;
    }
    // Covered already: everything pending is older (this event is the newest), so process it all, then this.
    if (!pending_.empty()) process_until(e.t_ns);
    process_counter_marks(e.t_ns);
    if (may_hold(e)) {
      held_ = e;
      holding_ = true;
      return;
    }
    process_one(e);
    return;
  }
  // Late among the events still pending: back into time order.
  auto pos = std::upper_bound(pending_.begin(), pending_.end(), e.t_ns,
                              [](int64_t t, const Event& x) { return t < x.t_ns; });
  pending_.insert(pos, e);
}

void Attributor::add_counter(uint32_t channel, int64_t t_ns, double energy_j) {
  if (channel >= state_.size()) return;
  release_held();
  ChannelState& s = state_[channel];
  if (!s.counter_first) s.counter_first = {t_ns, energy_j};
  s.counter_last = {t_ns, energy_j};
  // The trace's integral at this instant is taken when processing reaches it, before old readings are trimmed
  // away, so conservation compares like with like however long the run. Counter reads may arrive out of order
  // with the events (they are read on another thread): they wait in their own time-sorted queue.
  auto pos = std::upper_bound(counter_marks_.begin(), counter_marks_.end(), t_ns,
                              [](int64_t t, const CounterMark& m) { return t < m.t_ns; });
  counter_marks_.insert(pos, CounterMark{t_ns, channel});
}

void Attributor::take_counter_marks(int64_t until_ns) {
  while (!counter_marks_.empty() && counter_marks_.front().t_ns <= until_ns) {
    const auto [t, channel] = counter_marks_.front();
    counter_marks_.pop_front();
    ChannelState& s = state_[channel];
    const double e = s.trace.energy_j(t);
    if (!s.counter_first_e) s.counter_first_e = e;
    s.counter_last_e = e;
  }
}

void Attributor::mark_dead(uint32_t channel) {
  release_held();
  if (channel < state_.size()) state_[channel].dead = true;
}

int64_t Attributor::horizon(int64_t events_complete_ns) const noexcept {
  int64_t horizon = events_complete_ns;
  for (size_t c = 0; c < n_channels_; ++c) {
    const ChannelState& s = state_[c];
    if (s.dead) continue;
    horizon = std::min(horizon, s.trace.empty() ? INT64_MIN : s.trace.last_t());
  }
  // A channel that lags too far (a stalled sensor) stops holding everything back; its figures are
  // then extrapolated and counted as such.
  return std::max(horizon, events_complete_ns - options_.max_lag_ns);
}

void Attributor::expect_events(int64_t events_complete_ns) {
  // Monotonic: traces only grow, events_complete_ns only advances.
  ready_ns_ = std::max(ready_ns_, horizon(events_complete_ns));
}

void Attributor::advance(int64_t events_complete_ns) {
  release_held();
  const int64_t horizon = this->horizon(events_complete_ns);
  ready_ns_ = std::max(ready_ns_, horizon);
  process_until(horizon);
  while (pending_.size() > options_.max_pending_events) process_oldest_pending();
  process_model_samples(processed_ns_, false);
  trim(processed_ns_);
}

void Attributor::process_oldest_pending() {
  const Event e = pending_.front();
  pending_.pop_front();
  process_one(e);
}

void Attributor::process_until(int64_t horizon_ns) {
  while (!pending_.empty() && pending_.front().t_ns <= horizon_ns) {
    const Event& e = pending_.front();
    if (pending_.size() > 1 && may_hold(e) && closes(e, pending_[1]) && pending_[1].t_ns <= horizon_ns) {
      const Event begin = e, end = pending_[1];
      pending_.pop_front();
      pending_.pop_front();
      process_counter_marks(begin.t_ns);
      process_pair(begin, end);
      continue;
    }
    process_oldest_pending();
  }
  process_counter_marks(horizon_ns);
  if (horizon_ns > processed_ns_) processed_ns_ = horizon_ns;
}

void Attributor::close_segment(Open& top, int64_t t, const double* e, FrameStack& stack) {
  const int64_t dt = t - top.seg_t0;
  if (dt <= 0) return;
  for (size_t c = 0; c < n_channels_; ++c) {
    if (!relevant(c, top.device)) continue;
    Acc& a = acc(top.key, c);
    a.excl_time_ns += dt;
    a.excl_energy_j += e[c] - top.seg_e0[c];
  }
  record_segment(top.key, top.device, top.seg_t0, t, stack, false);
}

void Attributor::record_overlaps(KeyId key, int64_t dt, FrameStack& stack) {
  // Time this innermost stretch adds under each enclosing window (for the model's inclusive energies); under
  // its own window (always once, more when a key nests in itself) it goes to a plain array.
  for (Open& o : stack) {
    if (o.key == key) {
      self_overlap_ns_[key] += dt;
    } else if (!o.inner.add(key, dt, Open::kInnerKeys)) {
      overlap_ns_[(static_cast<uint64_t>(o.key) << 32) | key] += dt;
    }
  }
}

void Attributor::grow_self_overlap(KeyId key) {
  self_overlap_ns_.resize(static_cast<size_t>(key) + 1, 0);
  n_self_overlap_ = self_overlap_ns_.size();
}

void Attributor::keep_up_now() {
  since_keep_up_ = 0;
  const int64_t final_before = processed_ns_ == INT64_MIN ? INT64_MIN : processed_ns_ - 1;
  process_model_samples(final_before, false);
  trim(final_before, /*trace=*/false);
}

void Attributor::end_nested(FrameStack& stack, int64_t t, const double* e, bool extrapolated) {
  Open& top = stack.back();
  const int64_t seg_dt = t - top.seg_t0;
  const int64_t dt = t - top.t0;
  const bool outermost = stack.size() == 1;
  // One pass per channel: the last innermost stretch (exclusive), the whole window (inclusive), and for an
  // outermost window the busy span.
  for (size_t c = 0; c < n_channels_; ++c) {
    if (!relevant(c, top.device)) continue;
    charge(acc(top.key, c), c, dt, e[c] - top.e0[c], seg_dt, e[c] - top.seg_e0[c], extrapolated);
    if (outermost) {
      ChannelState& s = state_[c];
      if (--s.busy == 0) s.attributed_j += e[c] - s.busy_e0;
    }
  }
  if (seg_dt > 0) record_segment(top.key, top.device, top.seg_t0, t, stack, false);
  for (const auto& [inner, ns] : top.inner.items) overlap_ns_[(static_cast<uint64_t>(top.key) << 32) | inner] += ns;
  stack.pop_back();
  if (!stack.empty()) {
    stack.back().seg_t0 = t;
    copy_energies(stack.back().seg_e0, e, n_channels_);
  }
}

template <size_t N>
void Attributor::process_pair_n(const Event& begin, const Event& end) {
  // What process_event does with the begin and then the end, without the frame in between.
  const size_t n = N ? N : n_channels_;
  process_counter_marks(end.t_ns);
  double e0_local[N ? N : 1], e1_local[N ? N : 1];
  double* e0 = N ? e0_local : scratch_e0_.data();
  double* e1 = N ? e1_local : scratch_e_.data();
  bool extrapolated = false;
  for (size_t c = 0; c < n; ++c) {
    const PowerTrace& trace = state_[c].trace;
    bool ignored = false;  // a begin's extrapolation is not counted (as in process_event)
    e0[c] = trace.energy_j(begin.t_ns, &ignored);
    e1[c] = trace.energy_j(end.t_ns, &extrapolated);
  }
  processed_ns_ = std::max(processed_ns_, end.t_ns);
  FrameStack& stack = stack_of(begin.thread);
  if (!stack.empty()) close_segment(stack.back(), begin.t_ns, e0, stack);
  const bool outermost = stack.empty();
  const int64_t dt = end.t_ns - begin.t_ns;
  for (size_t c = 0; c < n; ++c) {
    if (!relevant(c, begin.device)) continue;
    const double de = e1[c] - e0[c];
    charge(acc(begin.key, c), c, dt, de, dt, de, extrapolated);
    if (outermost && state_[c].busy == 0) state_[c].attributed_j += de;  // busy from begin to end, alone
  }
  if (dt > 0) record_segment(begin.key, begin.device, begin.t_ns, end.t_ns, stack, true);
  if (!stack.empty()) {
    stack.back().seg_t0 = end.t_ns;
    copy_energies(stack.back().seg_e0, e1, n);
  }
  since_keep_up_ += 1;  // the begin; keep_up() counts the end
  keep_up();
}

// Instantiated here for the inline dispatch in the header (add_event's fast path runs in other units).
template void Attributor::process_pair_n<0>(const Event&, const Event&);
template void Attributor::process_pair_n<1>(const Event&, const Event&);

void Attributor::process_event(const Event& ev) {
  bool extrapolated = false;
  double* e = scratch_e_.data();
  energies_at(ev.t_ns, e, extrapolated);
  processed_ns_ = std::max(processed_ns_, ev.t_ns);

  if (ev.key == kRunMarker) {
    for (size_t c = 0; c < n_channels_; ++c) state_[c].run_e0 = e[c];
    return;
  }
  if (!(ev.flags & flags::nested)) {
    if (ev.key >= kinds_.size()) {
      kinds_.resize(ev.key + 1, Kind::other);
      for (KeyId k = 0; k <= ev.key; ++k) kinds_[k] = keys_.info(k).kind;
    }
    const Kind kind = kinds_[ev.key];
    auto& opens = free_open_[ev.key];
    if (ev.begin) {
      Open& o = opens.emplace_back();
      o.key = ev.key;
      o.device = ev.device;
      o.t0 = o.seg_t0 = ev.t_ns;
      o.e0.assign(e, e + n_channels_);
      return;
    }
    if (opens.empty()) {
      ++unmatched_;
      return;
    }
    Open o = std::move(opens.back());
    opens.pop_back();
    const int64_t dt = ev.t_ns - o.t0;
    for (size_t c = 0; c < n_channels_; ++c) {
      if (!relevant(c, o.device)) continue;
      if (kind == Kind::idle) {
        if (dt > 0) {
          state_[c].idle_measured_w = (e[c] - o.e0[c]) / (static_cast<double>(dt) * 1e-9);
          state_[c].idle_measured_ns = dt;
        }
        continue;
      }
      Acc& a = acc(o.key, c);
      ++a.calls;
      a.time_ns += dt;
      a.energy_j += e[c] - o.e0[c];
      if (dt < channels_[c].sensor.update_ns) ++a.short_windows;
      if (extrapolated) ++a.extrapolated;
    }
    return;
  }

  FrameStack& stack = stack_of(ev.thread);
  if (ev.begin) {
    if (!stack.empty()) close_segment(stack.back(), ev.t_ns, e, stack);
    if (stack.empty()) {
      for (size_t c = 0; c < n_channels_; ++c) {
        if (!relevant(c, ev.device)) continue;
        ChannelState& s = state_[c];
        if (s.busy++ == 0) s.busy_e0 = e[c];
      }
    }
    stack.push(ev.key, ev.device, ev.t_ns, e, n_channels_);
    return;
  }
  // An end: normally the top of the stack. Ends of windows whose begin was lost, or that close an outer
  // window before its inner ones, are repaired (inner ones closed here) and counted.
  size_t depth = stack.size();
  while (depth > 0 && (stack.begin() + static_cast<std::ptrdiff_t>(depth - 1))->key != ev.key) --depth;
  if (depth == 0) {
    ++unmatched_;
    return;
  }
  while (stack.size() > depth) {
    ++unmatched_;
    end_nested(stack, ev.t_ns, e, extrapolated);
  }
  end_nested(stack, ev.t_ns, e, extrapolated);
}

void Attributor::reservoir(std::vector<double>& v, uint64_t& seen, double value) {
  ++seen;
  if (v.size() < options_.max_quiet_samples) {
    v.push_back(value);
    return;
  }
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const uint64_t j = rng_ % seen;
  if (j < v.size()) v[j] = value;
}

void Attributor::process_model_samples(int64_t horizon_ns, bool all) {
  if (!options_.model) return;
  for (size_t c = 0; c < n_channels_; ++c) {
    ChannelState& s = state_[c];
    const power::Channel& ch = channels_[c];
    while (!s.model_pending.empty()) {
      const power::Reading& r = s.model_pending.front();
      if (!all && r.t_ns - ch.sensor.delay_ns > horizon_ns && s.model_pending.size() < options_.max_pending_events)
        break;
      add_model_sample(c, r);
      s.model_pending.pop_front();
    }
  }
}

void Attributor::add_model_sample(size_t c, const power::Reading& r) {
  ChannelState& s = state_[c];
  const power::Channel& ch = channels_[c];
  const int64_t b = r.t_ns - ch.sensor.delay_ns;
  const int64_t w = sensor_window(ch, r);
  const int64_t a = b - w;

  // Occupancy of the reading's window by each innermost region, in ns of the window (point sensors: who is
  // innermost at b, as the whole "window" of 1). Summed as integers and divided once per key: a window holds
  // some thousand segments of a few keys, and consecutive segments are mostly of one key.
  KeyTally& occ = scratch_occ_;
  occ.clear();
  const int32_t only = s.only_device;
  // Inlined: it runs for every segment the window holds (a thousand or so per NVML reading).
  auto add = [&](KeyId key, int32_t device, int64_t t0, int64_t t1) __attribute__((always_inline)) {
    if (only >= 0 && device >= 0 && only != device) return;  // relevant(c, device)
    const int64_t ns = w == 0 ? int64_t{t0 <= b && b < t1} : std::min(b, t1) - std::max(a, t0);
    if (ns > 0) occ.add(key, ns);
  };
  const auto end = segments_.end();
  auto first = std::lower_bound(segments_.begin(), end, a, [](const Segment& sg, int64_t t) { return sg.t1 <= t; });
  // Segments are in order of their end; each thread's are disjoint and in order, so once a thread shows a
  // segment starting after the window, none of its later ones can overlap it: stop when every thread has.
  std::vector<bool>& past = scratch_past_;
  past.assign(stacks_.size(), false);
  const size_t n_threads = past.size();
  size_t threads_past = 0;
  for (auto it = first; it != end && threads_past < n_threads; ++it) {
    if (it->t0 < b || (w == 0 && it->t0 <= b)) {
      add(it->key, it->device, it->t0, it->t1);
    } else if (it->thread < n_threads && !past[it->thread]) {
      past[it->thread] = true;
      ++threads_past;
    }
  }
  for (const FrameStack& stack : stacks_)
    if (!stack.empty()) add(stack.back().key, stack.back().device, stack.back().seg_t0, INT64_MAX);

  if (occ.items.empty()) reservoir(s.quiet_w, s.quiet_seen, r.power_w);

  Model& m = s.model;
  std::vector<std::pair<int, double>> x;
  x.reserve(occ.items.size() + 1);
  x.emplace_back(0, 1.0);
  const double per_ns = w == 0 ? 1.0 : 1.0 / static_cast<double>(w);
  for (const auto& [key, ns] : occ.items) {
    const double f = static_cast<double>(ns) * per_ns;
    auto it = m.column.find(key);
    if (it == m.column.end()) {
      if (m.keys.size() >= options_.model_max_keys) {
        ++m.over_cap;
        continue;
      }
      const int col = static_cast<int>(m.keys.size()) + 1;
      it = m.column.emplace(key, col).first;
      m.keys.push_back(key);
      m.gram.conservativeResize(col + 1, col + 1);
      m.gram.row(col).setZero();
      m.gram.col(col).setZero();
      m.xty.conservativeResize(col + 1);
      m.xty(col) = 0;
    }
    x.emplace_back(it->second, f);
  }
  for (const auto& [i, xi] : x) {
    m.xty(i) += xi * r.power_w;
    for (const auto& [j, xj] : x) m.gram(i, j) += xi * xj;
  }
  m.yy += r.power_w * r.power_w;
  ++m.n;
}

void Attributor::trim(int64_t horizon_ns, bool trace) {
  int64_t keep_from = horizon_ns;
  for (size_t c = 0; c < n_channels_; ++c) {
    ChannelState& s = state_[c];
    if (trace && horizon_ns != INT64_MIN) s.trace.trim_before(horizon_ns);
    const power::Channel& ch = channels_[c];
    if (!s.model_pending.empty()) {
      const auto& r = s.model_pending.front();
      keep_from = std::min(keep_from, r.t_ns - ch.sensor.delay_ns - sensor_window(ch, r));
    } else if (!s.dead) {
      // Readings still to come lie after this channel's trace (they arrive in order), so their windows start at
      // most one window before its end: keep two, and an update period, of the widest seen. The trace's end,
      // not the horizon: a channel that lags more than max_lag_ns is behind the horizon, and its late readings
      // still need their segments. A live channel with no reading yet needs everything.
      const int64_t end = s.trace.empty() ? INT64_MIN : std::min(horizon_ns, s.trace.last_t());
      const int64_t w = std::max({ch.sensor.window_ns, s.widest_window_ns, ch.sensor.update_ns});
      const int64_t reach = ch.sensor.delay_ns + 2 * w + ch.sensor.update_ns;
      keep_from = std::min(keep_from, end < INT64_MIN + reach ? INT64_MIN : end - reach);
    }
  }
  while (!segments_.empty() && segments_.front().t1 < keep_from) segments_.pop_front();
}

Report Attributor::finish(int64_t t_end_ns) {
  release_held();
  process_until(INT64_MAX);
  // Windows still open at the end of the run are closed there (and counted as unmatched).
  const int64_t t_close = std::max(t_end_ns, last_event_ns_);
  bool extrapolated = false;
  std::vector<double> e(n_channels_);
  energies_at(t_close, e.data(), extrapolated);
  for (FrameStack& stack : stacks_)
    while (!stack.empty()) {
      ++unmatched_;
      end_nested(stack, t_close, e.data(), extrapolated);
    }
  process_model_samples(INT64_MAX, true);

  Report report;
  report.unmatched_events = unmatched_;
  for (size_t c = 0; c < n_channels_; ++c) report.channels.push_back(build_channel(c, t_end_ns));
  return report;
}

ChannelReport Attributor::build_channel(size_t c, int64_t t_end) {
  ChannelState& s = state_[c];
  ChannelReport cr;
  cr.channel = channels_[c];
  cr.samples = s.samples;
  cr.samples_dropped = s.dropped;

  // Baseline: given > measured at start > median of quiet readings > lowest 5 % of all readings.
  if (options_.baseline_w) {
    cr.baseline_w = *options_.baseline_w;
    cr.baseline_method = "given";
  } else if (s.idle_measured_w) {
    cr.baseline_w = *s.idle_measured_w;
    cr.baseline_method = fmt::format("measured at start ({} ms)", s.idle_measured_ns / 1'000'000);
  } else if (s.quiet_w.size() >= 5) {
    cr.baseline_w = median(s.quiet_w);
    cr.baseline_method = fmt::format("median of {} quiet readings", s.quiet_seen);
  } else if (!s.all_w.empty()) {
    std::vector<double> v = s.all_w;
    auto k = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 20);
    std::nth_element(v.begin(), k, v.end());
    cr.baseline_w = *k;
    cr.baseline_method = "lowest 5% of readings (no quiet interval)";
  } else {
    cr.baseline_method = "none (no readings)";
  }

  // Conservation over the run: between the first and last counter reads when there are two (the counter's
  // span), else from the run's start to its end (one read, e.g. a counter that appeared mid-run, spans nothing).
  const bool counter_span = s.counter_first && s.counter_last && s.counter_last->first > s.counter_first->first;
  const int64_t t0 = counter_span ? s.counter_first->first : run_t0_;
  const int64_t t1 = counter_span ? s.counter_last->first : t_end;
  if (t0 != INT64_MIN && !s.trace.empty()) {
    const double e_start = counter_span && s.counter_first_e ? *s.counter_first_e
                           : s.run_e0                        ? *s.run_e0
                                                             : s.trace.energy_j(t0);
    const double e_end = counter_span && s.counter_last_e ? *s.counter_last_e : s.trace.energy_j(t1);
    cr.conservation.run_energy_j = e_end - e_start;
    cr.run_time_s = static_cast<double>(t1 - t0) * 1e-9;
  }
  cr.conservation.attributed_j = s.attributed_j;
  cr.conservation.unattributed_j = cr.conservation.run_energy_j - s.attributed_j;
  if (counter_span) cr.conservation.counter_delta_j = s.counter_last->second - s.counter_first->second;

  // Model fit.
  Model& m = s.model;
  const int k = static_cast<int>(m.keys.size());
  std::vector<double> power_by_col(k + 1, 0.0);
  std::vector<bool> inseparable(k + 1, false), little(k + 1, false);
  if (!options_.model) {
    cr.fit.why_not = "model mode off";
  } else if (m.n < static_cast<uint64_t>(k) + 2) {
    cr.fit.why_not = fmt::format("{} readings for {} regions: too few to fit", m.n, k);
  } else {
    const double n = static_cast<double>(m.n);
    Eigen::VectorXd beta;
    double rss;
    if (options_.baseline_w) {
      const double b = *options_.baseline_w;
      Eigen::MatrixXd g = m.gram.bottomRightCorner(k, k);
      Eigen::VectorXd h = m.xty.tail(k) - b * m.gram.col(0).tail(k);
      NnlsResult r = nnls_normal(g, h);
      beta = Eigen::VectorXd::Zero(k + 1);
      beta(0) = b;
      beta.tail(k) = r.x;
    } else {
      beta = nnls_normal(m.gram, m.xty).x;
    }
    rss = m.yy - 2 * beta.dot(m.xty) + beta.dot(m.gram * beta);
    const double mean_y = m.xty(0) / n;
    const double tss = m.yy - n * mean_y * mean_y;
    cr.fit.fitted = true;
    cr.fit.samples = m.n;
    cr.fit.columns = k;
    cr.fit.intercept_w = beta(0);
    cr.fit.intercept_fixed = options_.baseline_w.has_value();
    cr.fit.residual_rms_w = std::sqrt(std::max(0.0, rss) / n);
    cr.fit.r_squared = tss > 0 ? 1 - std::max(0.0, rss) / tss : 0.0;
    cr.fit.keys_over_cap = m.over_cap;
    for (int i = 1; i <= k; ++i) power_by_col[i] = beta(i);
    // Identifiability: the share of a column's energy not explained by the other columns (Schur complement
    // of the Gram matrix, via the regularised inverse). Near zero: the run never varied this region apart
    // from the others, so its power cannot be separated.
    Eigen::MatrixXd g = m.gram;
    const double ridge = 1e-10 * std::max(1.0, g.diagonal().mean());
    g.diagonal().array() += ridge;
    Eigen::MatrixXd ginv = g.ldlt().solve(Eigen::MatrixXd::Identity(k + 1, k + 1));
    for (int i = 1; i <= k; ++i) {
      const double unique = 1.0 / ginv(i, i);
      inseparable[i] = unique < 1e-4 * m.gram(i, i);
      little[i] = m.gram(i, 0) < 3.0;  // less than three readings' worth of occupancy
    }
  }

  const double intercept = cr.fit.fitted ? cr.fit.intercept_w : cr.baseline_w;
  std::vector<KeyInfo> infos = keys_.snapshot();
  for (KeyId key = 0; static_cast<size_t>(key) * state_.size() < acc_.size(); ++key) {
    const Acc& a = acc_[static_cast<size_t>(key) * state_.size() + c];
    if (!a.calls) continue;
    RegionRow row;
    row.name = key < infos.size() ? infos[key].name : "<unknown>";
    row.kind = key < infos.size() ? infos[key].kind : Kind::other;
    row.calls = a.calls;
    row.time_s = static_cast<double>(a.time_ns) * 1e-9;
    row.energy_j = a.energy_j;
    row.excl_time_s = static_cast<double>(a.excl_time_ns) * 1e-9;
    row.excl_energy_j = a.excl_energy_j;
    row.short_windows = a.short_windows;
    row.extrapolated_windows = a.extrapolated;
    if (cr.fit.fitted) {
      double marginal = 0;
      for (int i = 1; i <= k; ++i) marginal += power_by_col[i] * static_cast<double>(overlap_ns(key, m.keys[i - 1])) * 1e-9;
      row.model_energy_j = intercept * row.time_s + marginal;
      if (auto it = m.column.find(key); it != m.column.end()) {
        row.model_power_w = power_by_col[it->second];
        row.model_excl_energy_j = (intercept + power_by_col[it->second]) * row.excl_time_s;
        row.model_inseparable = inseparable[it->second];
        row.model_too_little_data = little[it->second];
      }
    }
    cr.rows.push_back(std::move(row));
  }
  std::stable_sort(cr.rows.begin(), cr.rows.end(),
                   [](const RegionRow& x, const RegionRow& y) { return x.energy_j > y.energy_j; });
  return cr;
}

}  // namespace dooly::energy
