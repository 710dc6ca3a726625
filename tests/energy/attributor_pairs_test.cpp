// A window whose end is the very next event after its begin is charged in one step (Attributor::process_pair).
// Every reported figure must be what processing the two events one at a time gives, to the last bit
// (AttributorOptions::pair_windows off). Two regressions a review found, then random streams compared both ways.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "dooly/energy/attributor.hpp"
#include "report_diff.hpp"

namespace dooly::energy {
namespace {

constexpr int64_t kUs = 1'000, kMs = 1'000'000;

power::Channel channel(std::string name, power::Domain domain, int device, int64_t window_ns, int64_t delay_ns,
                       int64_t update_ns) {
  power::Channel ch;
  ch.name = std::move(name);
  ch.domain = domain;
  ch.device = device;
  ch.sensor.window_ns = window_ns;
  ch.sensor.delay_ns = delay_ns;
  ch.sensor.update_ns = update_ns;
  return ch;
}

// Windows still open at the end are closed at the last event's instant when the run's end comes before it (a
// recording whose run_end_ns precedes its last events): a paired kernel's end is such an event.
TEST(AttributorPairs, APairedEndCountsAsTheLastEventForWindowsClosedAtFinish) {
  KeyTable keys;
  const KeyId r = keys.intern("R", Kind::region), k = keys.intern("K", Kind::kernel_for);
  for (const bool pairs : {false, true}) {
    SCOPED_TRACE(pairs ? "pairs" : "one at a time");
    AttributorOptions o;
    o.pair_windows = pairs;
    Attributor a({channel("gpu0", power::Domain::gpu, 0, 0, 0, kMs)}, keys, o);
    a.add_reading({0, 0, 100.0});
    a.add_reading({0, 100 * kMs, 100.0});
    a.expect_events(100 * kMs);
    a.add_event({0, r, 0, 0, true, flags::nested});
    a.add_event({10 * kMs, k, 0, 0, true, flags::nested});
    a.add_event({20 * kMs, k, 0, 0, false, flags::nested});
    const Report rep = a.finish(15 * kMs);
    ASSERT_EQ(rep.channels.size(), 1u);
    const RegionRow* row = nullptr;
    for (const auto& x : rep.channels[0].rows)
      if (x.name == "R") row = &x;
    ASSERT_NE(row, nullptr);
    EXPECT_DOUBLE_EQ(row->time_s, 0.020);  // closed at its child's end, not before it
    EXPECT_DOUBLE_EQ(row->energy_j, 2.0);
  }
}

// Every 4,096 events the model is fed and old segments trimmed. When that point falls on a pair's begin, it
// must fall there (before the readings that come with the end), as one at a time, and the count stay in step.
// A node channel whose source failed (marked dead before its last readings arrive) makes the difference show.
TEST(AttributorPairs, TheModelsKeepUpPointFallsOnTheSameEventAsOneAtATime) {
  KeyTable keys;
  const KeyId ka = keys.intern("A", Kind::kernel_for), kb = keys.intern("B", Kind::kernel_for);
  auto run = [&](bool pairs) {
    AttributorOptions o;
    o.pair_windows = pairs;
    Attributor a({channel("gpu0", power::Domain::gpu, 0, 0, 0, kMs), channel("node", power::Domain::node, -1, 5 * kMs, 0, kMs)},
                 keys, o);
    a.begin_run(0);  // the run marker: one event on its own
    for (int64_t t = 0; t <= 200 * kMs; t += kMs) a.add_reading({0, t, 100.0});
    a.mark_dead(1);
    a.expect_events(200 * kMs);
    int64_t t = 10 * kMs;
    for (int i = 0; i < 4096; ++i, t += 20 * kUs) {
      const KeyId k = (i / 100) % 2 ? ka : kb;
      a.add_event({t, k, 0, 0, true, flags::nested});
      if (i == 4095)
        for (int j = 0; j < 4; ++j) a.add_reading({1, t - 3 * kMs + j * kMs + 1, 50.0 + 40 * j});
      a.add_event({t + 10 * kUs, k, 0, 0, false, flags::nested});
    }
    return a.finish(200 * kMs);
  };
  const Report one_at_a_time = run(false), paired = run(true);
  ASSERT_EQ(one_at_a_time.channels.size(), 2u);
  EXPECT_EQ(one_at_a_time.channels[1].fit.samples, 4u);
  EXPECT_EQ(first_difference(one_at_a_time, paired), "");
}

// Random streams: 1-3 channels (GPUs and a CPU, point sensors and windows, delays), 1-3 threads, kernels that
// pair and kernels left open, nested, mis-nested and unmatched windows, free sections and an idle window, equal
// stamps (coarse time grids), events a tick late or stamped before what is processed, readings between events,
// stale readings and readings carrying their own window, counter reads, a channel that dies, tight queue
// bounds, a run end before the last event; and long streams that cross the model's keep-up point many times.
struct Script {
  struct Expect {
    int64_t t;
  };
  struct Advance {
    int64_t t;
  };
  struct Counter {
    uint32_t channel;
    int64_t t;
    double j;
  };
  struct Dead {
    uint32_t channel;
  };
  using Op = std::variant<power::Reading, Event, Counter, Expect, Advance, Dead>;
  std::vector<power::Channel> channels;
  AttributorOptions options;
  int keys = 0;
  bool begin_run = true;
  int64_t run0 = 0, t_end = 0;
  std::vector<Op> ops;
};

Script random_script(uint64_t seed, int flavour) {
  std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(flavour));
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  Script s;
  const int n_channels = static_cast<int>(uniform(1, 3));
  for (int c = 0; c < n_channels; ++c) {
    const bool gpu = chance(0.7);
    s.channels.push_back(channel("c" + std::to_string(c), gpu ? power::Domain::gpu : power::Domain::cpu,
                                 gpu ? static_cast<int>(uniform(0, 1)) : -1, chance(0.5) ? 0 : uniform(1, 30) * kMs,
                                 chance(0.5) ? 0 : uniform(0, 10) * kMs, uniform(1, 20) * kMs));
  }
  AttributorOptions& o = s.options;
  o.model = !chance(0.1);
  if (chance(0.3)) o.max_pending_events = static_cast<size_t>(uniform(1, 40));
  if (chance(0.3)) o.max_segments = static_cast<size_t>(uniform(2, 200));
  if (chance(0.3)) o.max_quiet_samples = static_cast<size_t>(uniform(1, 20));
  if (chance(0.2)) o.model_max_keys = static_cast<size_t>(uniform(1, 4));
  if (chance(0.3)) o.max_lag_ns = uniform(0, 50) * kMs;
  if (chance(0.1)) o.baseline_w = 42.0;
  s.begin_run = !chance(0.05);
  s.run0 = uniform(0, 5) * kMs;
  const int n_threads = static_cast<int>(uniform(1, 3));
  const int n_keys = static_cast<int>(uniform(1, 6));
  s.keys = n_keys;
  const bool long_stream = flavour == 3;
  const int64_t grid = flavour == 1 ? 100 * kUs : flavour == 2 ? 1 : kUs;  // coarse grids give equal stamps
  const int ticks = static_cast<int>(uniform(5, 60));
  const int64_t tick = uniform(2, 20) * kMs;
  std::vector<std::vector<KeyId>> stacks(static_cast<size_t>(n_threads));
  int free_open[2] = {0, 0};
  std::vector<double> power(static_cast<size_t>(n_channels), 100.0);
  std::vector<int64_t> last_reading(static_cast<size_t>(n_channels), -1);
  std::vector<bool> dead(static_cast<size_t>(n_channels), false);
  std::vector<Event> late;
  int64_t now = s.run0, last_t = 0;
  for (int k = 0; k < ticks; ++k) {
    const int64_t t_tick = s.run0 + (k + 1) * tick;
    for (size_t c = 0; c < power.size(); ++c) {
      if (dead[c] || chance(0.15)) continue;  // this channel lags this tick
      const int64_t step = uniform(1, 8) * kMs / (chance(0.2) ? 4 : 1);
      for (int64_t t = std::max(last_reading[c] + 1, t_tick - tick); t <= t_tick; t += step) {
        if (chance(0.05)) continue;
        power[c] = std::max(0.0, power[c] + static_cast<double>(uniform(-30, 30)));
        power::Reading r{static_cast<uint32_t>(c), t, power[c], chance(0.2) ? uniform(0, 40) * kMs : -1};
        if (chance(0.03)) r.t_ns = t - uniform(0, 3) * kMs;  // stale: dropped
        s.ops.emplace_back(r);
        last_reading[c] = t;
      }
    }
    if (chance(0.2))
      s.ops.emplace_back(Script::Counter{static_cast<uint32_t>(uniform(0, n_channels - 1)),
                                         t_tick - uniform(0, 3 * tick / kMs) * kMs, static_cast<double>(uniform(0, 1000))});
    if (chance(0.03)) {
      const auto c = static_cast<uint32_t>(uniform(0, n_channels - 1));
      s.ops.emplace_back(Script::Dead{c});
      dead[c] = true;
    }
    std::vector<Event> events;
    const int n_events = static_cast<int>(long_stream ? uniform(0, 1500) : uniform(0, 60));
    for (int i = 0; i < n_events; ++i) {
      now = std::min(t_tick, now + uniform(0, 3) * grid * (chance(0.3) ? 0 : 1) * (chance(0.5) ? 1 : 37));
      const auto thread = static_cast<uint32_t>(uniform(0, n_threads - 1));
      std::vector<KeyId>& stack = stacks[thread];
      Event e{now, 0, thread, static_cast<int32_t>(uniform(-1, 1)), true, flags::nested};
      const int what = static_cast<int>(uniform(0, 99));
      if (what < 35) {  // a kernel: mostly its end straight after (sometimes before its begin, or on another thread)
        e.key = static_cast<KeyId>(uniform(0, n_keys - 1));
        events.push_back(e);
        if (chance(0.8)) {
          now = std::min(t_tick, now + uniform(0, 5) * grid * (chance(0.2) ? 0 : 1));
          Event end = e;
          end.t_ns = chance(0.05) ? e.t_ns - uniform(0, 2) * grid : now;
          end.begin = false;
          if (chance(0.05)) end.thread = static_cast<uint32_t>(uniform(0, n_threads - 1));
          events.push_back(end);
        } else {
          stack.push_back(e.key);
        }
      } else if (what < 55) {  // a region opens
        e.key = static_cast<KeyId>(uniform(0, n_keys - 1));
        stack.push_back(e.key);
        events.push_back(e);
      } else if (what < 75) {  // the innermost closes
        if (stack.empty()) continue;
        e.key = stack.back();
        stack.pop_back();
        e.begin = false;
        events.push_back(e);
      } else if (what < 82) {  // an outer one closes first
        if (stack.empty()) continue;
        const auto at = static_cast<size_t>(uniform(0, static_cast<int64_t>(stack.size()) - 1));
        e.key = stack[at];
        stack.resize(at);
        e.begin = false;
        events.push_back(e);
      } else if (what < 85) {  // an end without a begin
        e.key = static_cast<KeyId>(uniform(0, n_keys - 1));
        e.begin = false;
        events.push_back(e);
      } else {  // free windows: the section (key n_keys) and the idle window (n_keys + 1)
        const int f = static_cast<int>(uniform(0, 1));
        e.key = static_cast<KeyId>(n_keys + f);
        e.flags = 0;
        e.begin = free_open[f] == 0 || chance(0.4);
        free_open[f] += e.begin ? 1 : -1;
        events.push_back(e);
      }
    }
    std::vector<Event> feed = late;  // last tick's late ones first
    late.clear();
    for (const Event& e : events) (chance(0.035) ? late : feed).push_back(e);
    if (chance(0.05) && feed.size() > 1)
      std::swap(feed[static_cast<size_t>(uniform(0, static_cast<int64_t>(feed.size()) - 1))],
                feed[static_cast<size_t>(uniform(0, static_cast<int64_t>(feed.size()) - 1))]);
    if (chance(0.05))
      feed.push_back(Event{s.run0 + uniform(0, k + 1) * tick, static_cast<KeyId>(uniform(0, n_keys - 1)),
                           static_cast<uint32_t>(uniform(0, n_threads - 1)), -1, chance(0.5), flags::nested});
    for (const Event& e : feed) last_t = std::max(last_t, e.t_ns);
    if (chance(0.7)) s.ops.emplace_back(Script::Expect{t_tick - (chance(0.2) ? uniform(0, tick / kMs) * kMs : 0)});
    for (const Event& e : feed) {
      s.ops.emplace_back(e);
      if (chance(0.02)) s.ops.emplace_back(Script::Expect{t_tick + uniform(0, tick / kMs) * kMs});
      if (chance(0.01))
        s.ops.emplace_back(Script::Counter{static_cast<uint32_t>(uniform(0, n_channels - 1)), e.t_ns + uniform(-2, 2) * grid, 1.0});
      if (chance(0.01))
        s.ops.emplace_back(power::Reading{static_cast<uint32_t>(uniform(0, n_channels - 1)), t_tick + uniform(0, 2) * kMs, 50.0, -1});
    }
    if (chance(0.8)) s.ops.emplace_back(Script::Advance{t_tick - (chance(0.2) ? uniform(0, tick / kMs) * kMs : 0)});
  }
  for (const Event& e : late) s.ops.emplace_back(e);
  s.t_end = chance(0.5) ? s.run0 + ticks * tick : std::max(s.run0, last_t - uniform(0, 3 * tick / kMs) * kMs);
  return s;
}

Report play(const Script& s, bool pairs) {
  KeyTable keys;
  for (int k = 0; k < s.keys; ++k) keys.intern("k" + std::to_string(k), k % 2 ? Kind::region : Kind::kernel_for);
  keys.intern("section", Kind::section);
  keys.intern("idle", Kind::idle);
  AttributorOptions o = s.options;
  o.pair_windows = pairs;
  o.sensor_check = false;  // pairs change the order of event work only; the neighbours' fits would only cost time
  Attributor a(s.channels, keys, o);
  if (s.begin_run) a.begin_run(s.run0);
  for (const Script::Op& op : s.ops) {
    if (const auto* r = std::get_if<power::Reading>(&op)) a.add_reading(*r);
    else if (const auto* e = std::get_if<Event>(&op)) a.add_event(*e);
    else if (const auto* c = std::get_if<Script::Counter>(&op)) a.add_counter(c->channel, c->t, c->j);
    else if (const auto* x = std::get_if<Script::Expect>(&op)) a.expect_events(x->t);
    else if (const auto* v = std::get_if<Script::Advance>(&op)) a.advance(v->t);
    else if (const auto* d = std::get_if<Script::Dead>(&op)) a.mark_dead(d->channel);
  }
  return a.finish(s.t_end);
}

// Unoptimised (sanitizer) builds run a fortieth of the streams (the long one among them): the fit at finish() is
// Eigen's, unoptimised. The plain CI tier runs the whole set (label `random`).
#ifdef NDEBUG
constexpr uint64_t kSeeds = 2000;
#else
constexpr uint64_t kSeeds = 50;
#endif

TEST(AttributorPairs, RandomStreamsGiveTheSameFiguresToTheLastBit) {
  std::vector<size_t> long_stream_events;
  for (uint64_t seed = 0; seed < kSeeds; ++seed)
    for (int flavour = 0; flavour < 4; ++flavour) {
      if (flavour == 3 && seed % 100 != 0) continue;  // a long stream every 100 seeds, from seed 0
      const Script s = random_script(seed, flavour);
      const Report one_at_a_time = play(s, false), paired = play(s, true);
      ASSERT_EQ(first_difference(one_at_a_time, paired), "") << "seed " << seed << ", flavour " << flavour;
      if (flavour == 3)
        long_stream_events.push_back(static_cast<size_t>(std::count_if(
            s.ops.begin(), s.ops.end(), [](const Script::Op& op) { return std::holds_alternative<Event>(op); })));
    }
  // The long streams reach the model's keep-up point (every 4,096 processed events), where pairs fall back.
  ASSERT_EQ(long_stream_events.size(), (kSeeds + 99) / 100);
  for (size_t n : long_stream_events) EXPECT_GT(n, 4096u);
}

}  // namespace
}  // namespace dooly::energy
