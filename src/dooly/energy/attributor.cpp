#include "dooly/energy/attributor.hpp"

#include <algorithm>

#include "dooly/energy/report_builder.hpp"

namespace dooly::energy {

namespace {
int64_t sensor_window(const power::Channel& ch, const power::Reading& r) {
  return r.window_ns >= 0 ? r.window_ns : ch.sensor.window_ns;
}
std::vector<int32_t> only_devices(const std::vector<power::Channel>& channels) {
  std::vector<int32_t> v;
  v.reserve(channels.size());
  for (const auto& ch : channels) v.push_back(ch.domain == power::Domain::gpu && ch.device >= 0 ? ch.device : -1);
  return v;
}
std::vector<int64_t> update_periods(const std::vector<power::Channel>& channels) {
  std::vector<int64_t> v;
  v.reserve(channels.size());
  for (const auto& ch : channels) v.push_back(ch.sensor.update_ns);
  return v;
}
std::unique_ptr<OccupancyModel> make_model(const std::vector<power::Channel>& channels, const AttributorOptions& o) {
  if (!o.model) return nullptr;
  OccupancyOptions mo;
  mo.max_keys = o.model_max_keys;
  mo.max_segments = o.max_segments;
  mo.max_pending = o.max_pending_events;
  mo.sensor_check = o.sensor_check;
  mo.split_overlaps = o.split_overlaps;
  mo.split_span_ns = o.split_span_ns;
  return std::make_unique<OccupancyModel>(channels, mo);
}
}  // namespace

Attributor::Attributor(std::vector<power::Channel> channels, const KeyTable& keys, AttributorOptions options)
    : channels_(std::move(channels)),
      n_channels_(channels_.size()),
      keys_(keys),
      options_(options),
      in_(n_channels_),
      model_(make_model(channels_, options_)),
      charger_(only_devices(channels_), update_periods(channels_), keys, model_ ? model_->segment_log() : nullptr),
      e0_(n_channels_),
      e1_(n_channels_),
      trace_end_(n_channels_),
      dead_(n_channels_) {}

size_t Attributor::retained_readings() const noexcept {
  size_t n = model_ ? model_->retained_readings() : 0;
  for (const auto& s : in_) n += s.trace.size();
  return n;
}

void Attributor::begin_run(int64_t t_ns) {
  run_t0_ = t_ns;
  add_event(Event{t_ns, kRunMarker, 0, -1, true, 0});
}

void Attributor::sample(Reservoir& r, double value) {
  ++r.seen;
  if (r.values.size() < options_.max_quiet_samples) {
    r.values.push_back(value);
    return;
  }
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const uint64_t j = rng_ % r.seen;
  if (j < r.values.size()) r.values[j] = value;
}

void Attributor::add_reading(const power::Reading& r) {
  if (r.channel >= n_channels_) return;
  release_held();  // its E(t) is taken before this reading, as it would have been had it not been held
  ChannelInput& s = in_[r.channel];
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
  sample(s.all, r.power_w);
  if (model_) model_->add_reading(r.channel, r);
}

void Attributor::add_late_event(const Event& e) {
  release_held();  // a begin held for its end is processed first, as if it had not been held
  const bool in_order = std::max(e.t_ns, order_.processed_ns()) >= order_.last_event_ns();
  order_.push(e);
  if (in_order && std::max(e.t_ns, order_.processed_ns()) <= ready_ns_) process(ready_ns_, /*hold_last=*/true);
}

void Attributor::add_counter(uint32_t channel, int64_t t_ns, double energy_j) {
  if (channel >= n_channels_) return;
  release_held();
  ChannelInput& s = in_[channel];
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
    ChannelInput& s = in_[channel];
    const double e = s.trace.energy_j(t);
    if (!s.counter_first_e) s.counter_first_e = e;
    s.counter_last_e = e;
  }
}

void Attributor::mark_dead(uint32_t channel) {
  release_held();
  if (channel < n_channels_) in_[channel].dead = true;
}

int64_t Attributor::horizon(int64_t events_complete_ns) const noexcept {
  int64_t horizon = events_complete_ns;
  for (const ChannelInput& s : in_) {
    if (s.dead) continue;
    horizon = std::min(horizon, s.trace.empty() ? INT64_MIN : s.trace.last_t());
  }
  // A channel that lags too far (a stalled sensor) stops holding everything back; its figures are then
  // extrapolated and counted as such.
  const int64_t floor =
      events_complete_ns < INT64_MIN + options_.max_lag_ns ? INT64_MIN : events_complete_ns - options_.max_lag_ns;
  return std::max(horizon, floor);
}

void Attributor::expect_events(int64_t events_complete_ns) {
  // Monotonic: traces only grow, events_complete_ns only advances.
  ready_ns_ = std::max(ready_ns_, horizon(events_complete_ns));
}

void Attributor::process(int64_t horizon_ns, bool hold_last) {
  for (int step = 0; (step = order_.next(horizon_ns, hold_last, pairs_allowed())) != 0; order_.pop(step)) {
    if (step == 2)
      process_pair_any(order_.front(), order_.second());
    else
      process_one(order_.front());
  }
}

void Attributor::pair_with_front(const Event& end) {
  order_.take_end(end);
  process_pair_any(order_.front(), end);
  order_.pop(1);
}

void Attributor::process_one(const Event& ev) {
  take_counter_marks(ev.t_ns);
  bool extrapolated = false;
  double* e = e1_.data();
  energies_at(ev.t_ns, e, extrapolated);
  if (ev.key == kRunMarker) {
    for (size_t c = 0; c < n_channels_; ++c) in_[c].run_e0 = e[c];
  } else if (!(ev.flags & flags::nested)) {
    charger_.free_event(ev, e, extrapolated);
  } else if (ev.begin) {
    charger_.begin_nested(ev, e);
  } else {
    charger_.end_nested(ev, e, extrapolated);
  }
  if (++since_keep_up_ >= kKeepUpEvents) [[unlikely]]
    keep_up();
}

void Attributor::keep_up() {
  since_keep_up_ = 0;
  const int64_t processed = order_.processed_ns();
  const int64_t final_before = processed == INT64_MIN ? INT64_MIN : processed - 1;
  feed_model(final_before, false);
  trim(final_before, /*trace=*/false);
}

void Attributor::feed_model(int64_t horizon_ns, bool all) {
  if (!model_) return;
  model_->consume(horizon_ns, all, charger_, [this](size_t c, double power_w) { sample(in_[c].quiet, power_w); });
}

void Attributor::trim(int64_t horizon_ns, bool trace) {
  for (size_t c = 0; c < n_channels_; ++c) {
    ChannelInput& s = in_[c];
    if (trace && horizon_ns != INT64_MIN) s.trace.trim_before(horizon_ns);
    trace_end_[c] = s.trace.empty() ? INT64_MIN : s.trace.last_t();
    dead_[c] = s.dead;
  }
  if (model_) model_->trim(horizon_ns, trace_end_, dead_);
}

void Attributor::advance(int64_t events_complete_ns) {
  release_held();
  const int64_t horizon = this->horizon(events_complete_ns);
  ready_ns_ = std::max(ready_ns_, horizon);
  process(horizon, /*hold_last=*/false);
  take_counter_marks(horizon);
  order_.processed_to(horizon);
  while (order_.size() > options_.max_pending_events && order_.next(INT64_MAX, false, false) == 1) {
    process_one(order_.front());
    order_.pop(1);
  }
  feed_model(order_.processed_ns(), false);
  trim(order_.processed_ns(), /*trace=*/true);
}

Conservation Attributor::conservation(size_t c, int64_t t_end, double& run_time_s) const {
  // Over the run: between the first and last counter reads when there are two (the counter's span), else from
  // the run's start to its end (one read, e.g. a counter that appeared mid-run, spans nothing).
  const ChannelInput& s = in_[c];
  Conservation cs;
  const bool counter_span = s.counter_first && s.counter_last && s.counter_last->first > s.counter_first->first;
  const int64_t t0 = counter_span ? s.counter_first->first : run_t0_;
  const int64_t t1 = counter_span ? s.counter_last->first : t_end;
  if (t0 != INT64_MIN && !s.trace.empty()) {
    const double e_start = counter_span && s.counter_first_e ? *s.counter_first_e
                           : s.run_e0                        ? *s.run_e0
                                                             : s.trace.energy_j(t0);
    const double e_end = counter_span && s.counter_last_e ? *s.counter_last_e : s.trace.energy_j(t1);
    cs.run_energy_j = e_end - e_start;
    run_time_s = static_cast<double>(t1 - t0) * 1e-9;
  }
  cs.attributed_j = charger_.attributed_j(c);
  cs.unattributed_j = cs.run_energy_j - cs.attributed_j;
  if (counter_span) cs.counter_delta_j = s.counter_last->second - s.counter_first->second;
  return cs;
}

Report Attributor::finish(int64_t t_end_ns) {
  release_held();
  process(INT64_MAX, /*hold_last=*/false);
  take_counter_marks(INT64_MAX);
  // Windows still open at the end of the run are closed there (and counted as unmatched).
  const int64_t t_close = std::max(t_end_ns, order_.last_event_ns());
  bool extrapolated = false;
  energies_at(t_close, e1_.data(), extrapolated);
  charger_.close_all(t_close, e1_.data(), extrapolated);
  feed_model(INT64_MAX, true);

  Report report;
  report.unmatched_events = charger_.unmatched();
  const ModelReportOptions mo{options_.model, options_.nnls_max_iterations};
  for (size_t c = 0; c < n_channels_; ++c) {
    ChannelEvidence ev;
    ev.channel = channels_[c];
    ev.samples = in_[c].samples;
    ev.samples_dropped = in_[c].dropped;
    ev.given_baseline_w = options_.baseline_w;
    ev.quiet_w = &in_[c].quiet.values;
    ev.quiet_seen = in_[c].quiet.seen;
    ev.all_w = &in_[c].all.values;
    ev.conservation = conservation(c, t_end_ns, ev.run_time_s);
    report.channels.push_back(build_channel_report(c, ev, charger_, model_.get(), keys_, mo));
  }
  return report;
}

}  // namespace dooly::energy
