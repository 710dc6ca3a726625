// The engine against the reference attributor (reference_attributor.hpp) on random streams: one or two channels of
// different sensors (window, lag, update period, readings that carry their own window), one to three threads,
// kernels nested in regions on several devices, free sections, an idle window, lost events (ends without a
// begin, begins without an end), counter reads. The engine is fed twice: as `dooly analyze` feeds it (every
// reading, then every event, then finish) and as the live sampler does (tick by tick: the tick's readings, how
// far events are complete, the tick's events, advance).
//
// Tolerances: trapezoid figures, times and counts agree to 1e-9 relative (the same sums in the same order, E(t)
// computed two ways); model coefficients and energies to 1e-6 relative of the run's scale (the engine accumulates
// X'X reading by reading, the reference builds X whole; NNLS by two methods); intervals to 1e-5 relative.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "dooly/energy/attributor.hpp"
#include "reference_attributor.hpp"

namespace dooly::energy {
namespace {

constexpr int64_t kMs = 1'000'000;

struct Stream {
  testing::ReferenceRun run;
  KeyTable keys;
};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

 private:
  std::mt19937_64 rng_;
};

void random_stream(uint64_t seed, Stream& s) {
  Gen g(seed);
  testing::ReferenceRun& run = s.run;
  const int channels = static_cast<int>(g.uniform(1, 2));
  for (int c = 0; c < channels; ++c) {
    power::Channel ch;
    ch.name = "ch" + std::to_string(c);
    ch.domain = c == 1 && g.chance(0.3) ? power::Domain::cpu : power::Domain::gpu;
    ch.device = ch.domain == power::Domain::gpu ? c : -1;
    ch.sensor.window_ns = g.chance(0.3) ? 0 : g.uniform(2, 30) * kMs;
    ch.sensor.delay_ns = g.chance(0.3) ? 0 : g.uniform(0, 40) * kMs / 10;
    ch.sensor.update_ns = g.uniform(5, 20) * kMs;
    run.channels.push_back(ch);
  }
  const int64_t t_end = g.uniform(800, 3000) * kMs;
  run.run_t0 = 0;
  run.t_end = t_end;
  // Kernel powers per key and a floor: the readings are what a boxcar sensor of that window would see, plus
  // noise, so the fit has something to find (and sometimes does not: that must agree too).
  const int n_kernels = static_cast<int>(g.uniform(1, 4));
  std::vector<KeyId> kernels;
  std::vector<double> extra;
  for (int k = 0; k < n_kernels; ++k) {
    kernels.push_back(s.keys.intern("k" + std::to_string(k), Kind::kernel_for));
    extra.push_back(g.real(20, 300));
  }
  const KeyId region = s.keys.intern("region", Kind::region), sect = s.keys.intern("section", Kind::section);
  const KeyId idle = s.keys.intern("idle", Kind::idle);
  const int threads = static_cast<int>(g.uniform(1, 3));
  struct Busy {
    int64_t t0, t1;
    double w;
  };
  std::vector<Busy> busy;
  std::vector<Event> events;
  if (g.chance(0.3)) {
    events.push_back({0, idle, 0, -1, true, 0});
    events.push_back({100 * kMs, idle, 0, -1, false, 0});
  }
  for (int th = 0; th < threads; ++th) {
    int64_t t = g.uniform(100, 200) * kMs;
    while (t < t_end - 50 * kMs) {
      const bool in_region = g.chance(0.3);
      if (in_region) events.push_back({t, region, static_cast<uint32_t>(th), -1, true, flags::nested});
      const int n = static_cast<int>(g.uniform(1, 6));
      for (int i = 0; i < n; ++i) {
        t += g.uniform(0, 2) * kMs / 2;
        const int k = static_cast<int>(g.uniform(0, n_kernels - 1));
        const int64_t d = g.uniform(1, 12) * kMs / 2;
        const int32_t dev = static_cast<int32_t>(g.uniform(-1, 1));
        events.push_back({t, kernels[static_cast<size_t>(k)], static_cast<uint32_t>(th), dev, true, flags::nested});
        events.push_back(
            {t + d, kernels[static_cast<size_t>(k)], static_cast<uint32_t>(th), dev, false, flags::nested});
        busy.push_back({t, t + d, extra[static_cast<size_t>(k)]});
        t += d;
      }
      if (in_region) events.push_back({t + kMs / 4, region, static_cast<uint32_t>(th), -1, false, flags::nested});
      if (g.chance(0.1)) {
        events.push_back({t, sect, static_cast<uint32_t>(th), -1, true, 0});
        events.push_back({t + 3 * kMs, sect, static_cast<uint32_t>(th), -1, false, 0});
      }
      t += g.uniform(1, 60) * kMs;
    }
  }
  // Lost events: a few begins or ends dropped.
  if (g.chance(0.4)) {
    const int drops = static_cast<int>(g.uniform(1, 4));
    for (int i = 0; i < drops && events.size() > 4; ++i)
      events.erase(events.begin() + static_cast<std::ptrdiff_t>(g.uniform(0, static_cast<int64_t>(events.size()) - 1)));
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.t_ns < b.t_ns; });
  run.events = events;
  std::sort(busy.begin(), busy.end(), [](const Busy& a, const Busy& b) { return a.t0 < b.t0; });
  auto power = [&](int64_t a, int64_t b) {  // mean over [a, b) (a point when a == b)
    double j = 0;
    for (const Busy& x : busy) {
      if (a == b) {
        if (x.t0 <= a && a < x.t1) j += x.w;
        continue;
      }
      const int64_t ns = std::min(b, x.t1) - std::max(a, x.t0);
      if (ns > 0) j += x.w * static_cast<double>(ns) / static_cast<double>(b - a);
    }
    return 120.0 + j;
  };
  // Readings up to the run's end, not past it (the live profiler's end is its last instant: nothing is stamped
  // after it, and the trace it keeps reaches it).
  for (uint32_t c = 0; c < run.channels.size(); ++c) {
    const power::Channel& ch = run.channels[c];
    const bool own = g.chance(0.2);
    const int64_t every = g.uniform(4, 20) * kMs;
    int64_t prev = -every;
    for (int64_t t = g.uniform(0, 5) * kMs; t <= t_end; t += every + g.uniform(-1, 1) * kMs / 2) {
      power::Reading r{c, t, 0.0};
      int64_t w = ch.sensor.window_ns;
      if (own) {
        r.window_ns = t - prev;
        w = r.window_ns;
      }
      prev = t;
      const int64_t b = t - ch.sensor.delay_ns;
      r.power_w = power(b - w, b) + g.real(-3, 3);
      run.readings.push_back(r);
    }
  }
  for (uint32_t c = 0; c < run.channels.size(); ++c) {
    if (g.chance(0.5)) run.counters.push_back({c, 50 * kMs, 1000.0 + c});
    if (g.chance(0.5)) run.counters.push_back({c, t_end - 20 * kMs, 1300.0 + 7.0 * c});
  }
  // As a sampler would see them: every channel's readings in one time order (each channel's own order kept).
  std::stable_sort(run.readings.begin(), run.readings.end(),
                   [](const power::Reading& a, const power::Reading& b) { return a.t_ns < b.t_ns; });
  std::stable_sort(run.counters.begin(), run.counters.end(),
                   [](const auto& a, const auto& b) { return a.t_ns < b.t_ns; });
  if (g.chance(0.2)) run.baseline_w = 118.0;
}

Report engine_offline(const Stream& s) {
  AttributorOptions o;
  o.baseline_w = s.run.baseline_w;
  Attributor a(s.run.channels, s.keys, o);
  a.begin_run(s.run.run_t0);
  for (const auto& c : s.run.counters) a.add_counter(c.channel, c.t_ns, c.energy_j);
  for (const auto& r : s.run.readings) a.add_reading(r);
  for (const auto& e : s.run.events) a.add_event(e);
  return a.finish(s.run.t_end);
}

Report engine_live(const Stream& s, int64_t tick) {
  AttributorOptions o;
  o.baseline_w = s.run.baseline_w;
  Attributor a(s.run.channels, s.keys, o);
  a.begin_run(s.run.run_t0);
  size_t next_r = 0, next_e = 0, next_c = 0;
  for (int64_t t = tick;; t += tick) {
    // What a sampler tick has by then: readings stamped up to t, counter reads, events up to t.
    while (next_r < s.run.readings.size() && s.run.readings[next_r].t_ns <= t) a.add_reading(s.run.readings[next_r++]);
    while (next_c < s.run.counters.size() && s.run.counters[next_c].t_ns <= t) {
      a.add_counter(s.run.counters[next_c].channel, s.run.counters[next_c].t_ns, s.run.counters[next_c].energy_j);
      ++next_c;
    }
    a.expect_events(t);
    while (next_e < s.run.events.size() && s.run.events[next_e].t_ns <= t) a.add_event(s.run.events[next_e++]);
    a.advance(t);
    if (next_r == s.run.readings.size() && next_e == s.run.events.size() && next_c == s.run.counters.size()) break;
  }
  return a.finish(s.run.t_end);
}

bool close(double a, double b, double rel, double scale = 0) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= rel * std::max({std::fabs(a), std::fabs(b), scale});
}

// The first difference between the engine's report and the reference's, or "".
std::string compare(const Report& e, const Report& r) {
  if (e.unmatched_events != r.unmatched_events)
    return "unmatched " + std::to_string(e.unmatched_events) + " vs " + std::to_string(r.unmatched_events);
  for (size_t c = 0; c < e.channels.size(); ++c) {
    const ChannelReport& x = e.channels[c];
    const ChannelReport& y = r.channels[c];
    const std::string at = "channel " + std::to_string(c) + ": ";
    if (x.samples != y.samples || x.samples_dropped != y.samples_dropped) return at + "samples";
    if (!close(x.baseline_w, y.baseline_w, 1e-9))
      return at + "baseline " + std::to_string(x.baseline_w) + " vs " + std::to_string(y.baseline_w);
    const double scale = std::fabs(x.conservation.run_energy_j) + 1;
    if (!close(x.conservation.run_energy_j, y.conservation.run_energy_j, 1e-9, scale))
      return at + "run energy " + std::to_string(x.conservation.run_energy_j) + " vs " +
             std::to_string(y.conservation.run_energy_j);
    if (!close(x.conservation.attributed_j, y.conservation.attributed_j, 1e-9, scale)) return at + "attributed";
    if (x.conservation.counter_delta_j != y.conservation.counter_delta_j) return at + "counter";
    if (x.rows.size() != y.rows.size())
      return at + "rows " + std::to_string(x.rows.size()) + " vs " + std::to_string(y.rows.size());
    std::map<std::string, const RegionRow*> ref;
    for (const auto& row : y.rows) ref[row.name] = &row;
    for (const auto& a : x.rows) {
      const RegionRow& b = *ref.at(a.name);
      const std::string w = at + a.name + ": ";
      if (a.calls != b.calls || a.short_windows != b.short_windows || a.extrapolated_windows != b.extrapolated_windows)
        return w + "counts " + std::to_string(a.calls) + "/" + std::to_string(a.short_windows) + "/" +
               std::to_string(a.extrapolated_windows) + " vs " + std::to_string(b.calls) + "/" +
               std::to_string(b.short_windows) + "/" + std::to_string(b.extrapolated_windows);
      if (!close(a.time_s, b.time_s, 1e-9) || !close(a.excl_time_s, b.excl_time_s, 1e-9, a.time_s)) return w + "time";
      if (!close(a.energy_j, b.energy_j, 1e-9, scale) || !close(a.excl_energy_j, b.excl_energy_j, 1e-9, scale))
        return w + "energy";
      if (x.fit.fitted != y.fit.fitted) return at + "fitted " + x.fit.why_not;
      if (!x.fit.fitted) continue;
      const double model_scale = scale + std::fabs(x.fit.intercept_w) * a.time_s;
      if (!close(*a.model_energy_j, *b.model_energy_j, 1e-6, model_scale))
        return w + "model energy " + std::to_string(*a.model_energy_j) + " vs " + std::to_string(*b.model_energy_j);
      if (a.model_power_w.has_value() != b.model_power_w.has_value() ||
          (a.model_power_w && !close(*a.model_power_w, *b.model_power_w, 1e-6, 400)))
        return w + "model power";
      if (!close(*a.model_j_per_call_hw_j, *b.model_j_per_call_hw_j, 1e-5, 1e-9))
        return w + "interval " + std::to_string(*a.model_j_per_call_hw_j) + " vs " +
               std::to_string(*b.model_j_per_call_hw_j);
      if (a.model_sensor_sensitive != b.model_sensor_sensitive) return w + "sensor sensitivity";
    }
    if (x.fit.fitted) {
      if (!close(x.fit.intercept_w, y.fit.intercept_w, 1e-6, 400)) return at + "intercept";
      if (!close(x.fit.residual_rms_w, y.fit.residual_rms_w, 1e-6, 1)) return at + "residual";
      if (x.fit.interval_blocks != y.fit.interval_blocks) return at + "blocks";
      if (x.fit.concurrent_readings != y.fit.concurrent_readings)
        return at + "readings split " + std::to_string(x.fit.concurrent_readings) + " vs " +
               std::to_string(y.fit.concurrent_readings);
      if (x.sensor_check.neighbours.size() != y.sensor_check.neighbours.size()) return at + "neighbours";
      for (size_t i = 0; i < x.sensor_check.neighbours.size(); ++i) {
        const auto& p = x.sensor_check.neighbours[i];
        const auto& q = y.sensor_check.neighbours[i];
        if (p.window_ns != q.window_ns || p.delay_ns != q.delay_ns || p.fitted != q.fitted)
          return at + "neighbour setting";
        if (p.fitted && !close(p.residual_rms_w, q.residual_rms_w, 1e-6, 1)) return at + "neighbour residual";
      }
    }
  }
  return "";
}

// Streams whose fit is ill-conditioned (a key that never varies apart from another) have many solutions: NNLS by
// two methods may pick different ones. Those are compared on the trapezoid only.
bool well_conditioned(const Report& r) {
  for (const auto& c : r.channels)
    for (const auto& row : c.rows)
      if (row.model_inseparable) return false;
  return true;
}

// Optimised builds (the plain CI tier runs this test there too: label `random`) compare 300 streams; unoptimised
// sanitizer builds 20, as the reference's NNLS by enumeration and Eigen are slow there.
#ifdef NDEBUG
constexpr int kStreams = 300;
#else
constexpr int kStreams = 20;
#endif

TEST(ReferenceAttributor, RandomStreamsAgreeWithTheEngine) {
  int compared = 0, model_compared = 0, split = 0;
  for (uint64_t seed = 1; seed <= kStreams; ++seed) {
    Stream s;
    random_stream(seed, s);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Report ref = testing::reference_attribute(s.run, s.keys);
    const Report offline = engine_offline(s);
    const Report live = engine_live(s, (seed % 3 + 1) * 50 * kMs);
    const bool model = well_conditioned(offline);
    if (!model)
      for (auto& c : ref.channels) c.fit.fitted = false;
    for (const Report* e : {&offline, &live}) {
      Report cmp = *e;
      if (!model)
        for (auto& c : cmp.channels) c.fit.fitted = false;
      EXPECT_EQ(compare(cmp, ref), "") << (e == &offline ? "offline" : "live");
    }
    ++compared;
    model_compared += model ? 1 : 0;
    bool any_split = false;
    for (const auto& c : offline.channels) any_split |= c.fit.concurrent_readings > 0;
    split += model && any_split ? 1 : 0;
  }
  EXPECT_EQ(compared, kStreams);
  // Kernels of two threads overlap in many streams: their readings are set aside and split (the model compared).
  EXPECT_GE(split, kStreams / 10) << "too few streams exercise the split of concurrent kernels";
  EXPECT_GE(model_compared, kStreams / 2) << "most streams must compare the model too";
}

}  // namespace
}  // namespace dooly::energy
