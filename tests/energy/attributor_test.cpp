// Analytic traces with per-region energies known in closed form, driven through the real attributor.
#include "dooly/energy/attributor.hpp"

#include <cmath>
#include <algorithm>
#include <functional>

#include <gtest/gtest.h>

#include "report_diff.hpp"

namespace dooly::energy {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

power::Channel gpu(int device, int64_t window_ns = 0, int64_t update_ns = 20 * kMs) {
  power::Channel ch;
  ch.name = "gpu" + std::to_string(device);
  ch.domain = power::Domain::gpu;
  ch.device = device;
  ch.sensor.window_ns = window_ns;
  ch.sensor.update_ns = update_ns;
  ch.sensor.description = "test";
  return ch;
}

const RegionRow& row(const ChannelReport& c, const std::string& name) {
  for (const auto& r : c.rows)
    if (r.name == name) return r;
  throw std::runtime_error("no row " + name);
}

struct Feed {
  KeyTable keys;
  std::unique_ptr<Attributor> attr;
  explicit Feed(std::vector<power::Channel> chs, AttributorOptions o = {}) {
    attr = std::make_unique<Attributor>(std::move(chs), keys, o);
  }
  void samples(uint32_t channel, int64_t t0, int64_t t1, int64_t step, const std::function<double(int64_t)>& p) {
    for (int64_t t = t0; t <= t1; t += step) attr->add_reading({channel, t, p(t)});
  }
  void window(const std::string& name, int64_t b, int64_t e, int device = -1, uint32_t thread = 0,
              Kind kind = Kind::kernel_for) {
    const KeyId k = keys.intern(name, kind);
    attr->add_event({b, k, thread, device, true, flags::nested});
    attr->add_event({e, k, thread, device, false, flags::nested});
  }
  void edge(const std::string& name, int64_t t, bool begin, int device = -1, Kind kind = Kind::region,
            uint32_t fl = flags::nested) {
    attr->add_event({t, keys.intern(name, kind), 0, device, begin, fl});
  }
};

TEST(Attributor, RampEnergyPerWindowMatchesClosedFormAndAccumulatesOverCalls) {
  // p(t) = 100 + 40 t W (t in s), readings every 20 ms; 50 windows of 7 ms at irregular offsets.
  Feed run({gpu(0)});
  auto p = [](int64_t t) { return 100 + 40 * (t * 1e-9); };
  run.attr->begin_run(0);
  run.samples(0, 0, 2 * kSec, 20 * kMs, p);
  double expected = 0;
  for (int i = 0; i < 50; ++i) {
    const int64_t b = 13 * kMs + i * 37 * kMs + i * i * 1000;
    const int64_t e = b + 7 * kMs;
    run.window("k", b, e, 0);
    const double a = b * 1e-9, z = e * 1e-9;
    expected += 100 * (z - a) + 20 * (z * z - a * a);
  }
  Report rep = run.attr->finish(2 * kSec);
  const RegionRow& r = row(rep.channels[0], "k");
  EXPECT_EQ(r.calls, 50u);
  EXPECT_NEAR(r.energy_j, expected, 1e-9 * expected);
  EXPECT_NEAR(r.time_s, 50 * 7e-3, 1e-12);
  EXPECT_EQ(r.short_windows, 50u);  // 7 ms < 20 ms update period
  EXPECT_TRUE(r.mostly_short());
  // Conservation: the run's integral is exactly 100*2 + 20*4 = 280 J.
  EXPECT_NEAR(rep.channels[0].conservation.run_energy_j, 280.0, 1e-9 * 280);
  EXPECT_NEAR(rep.channels[0].conservation.attributed_j + rep.channels[0].conservation.unattributed_j, 280.0, 1e-9);
  EXPECT_NEAR(rep.channels[0].conservation.attributed_j, expected, 1e-9 * expected);
}

TEST(Attributor, NestedRegionsInclusiveAndExclusive) {
  // Piecewise constant-ish: 200 W flat. Outer region 0..1 s, inner kernels 0.1..0.3 and 0.5..0.6.
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.samples(0, 0, 2 * kSec, 10 * kMs, [](int64_t) { return 200.0; });
  run.edge("outer", 0, true);
  run.edge("inner", 100 * kMs, true, 0, Kind::kernel_for);
  run.edge("inner", 300 * kMs, false, 0, Kind::kernel_for);
  run.edge("inner", 500 * kMs, true, 0, Kind::kernel_for);
  run.edge("inner", 600 * kMs, false, 0, Kind::kernel_for);
  run.edge("outer", 1 * kSec, false);
  Report rep = run.attr->finish(2 * kSec);
  const auto& c = rep.channels[0];
  EXPECT_NEAR(row(c, "outer").energy_j, 200.0, 1e-9);
  EXPECT_NEAR(row(c, "outer").excl_energy_j, 200.0 * 0.7, 1e-9);
  EXPECT_NEAR(row(c, "outer").excl_time_s, 0.7, 1e-12);
  EXPECT_NEAR(row(c, "inner").energy_j, 200.0 * 0.3, 1e-9);
  EXPECT_EQ(row(c, "inner").calls, 2u);
  EXPECT_NEAR(c.conservation.attributed_j, 200.0, 1e-9);  // top level only: no double counting
  EXPECT_NEAR(c.conservation.unattributed_j, 200.0, 1e-9);
  EXPECT_EQ(rep.unmatched_events, 0u);
}

TEST(Attributor, KernelsAreChargedOnlyOnTheirOwnGpu) {
  Feed run({gpu(0), gpu(1)});
  run.attr->begin_run(0);
  run.samples(0, 0, kSec, 10 * kMs, [](int64_t) { return 100.0; });
  run.samples(1, 0, kSec, 10 * kMs, [](int64_t) { return 300.0; });
  run.window("on1", 200 * kMs, 400 * kMs, 1);
  run.window("host", 500 * kMs, 600 * kMs, -1, 0, Kind::region);
  Report rep = run.attr->finish(kSec);
  EXPECT_THROW(row(rep.channels[0], "on1"), std::runtime_error);
  EXPECT_NEAR(row(rep.channels[1], "on1").energy_j, 60.0, 1e-9);
  EXPECT_NEAR(row(rep.channels[0], "host").energy_j, 10.0, 1e-9);
  EXPECT_NEAR(row(rep.channels[1], "host").energy_j, 30.0, 1e-9);
}

TEST(Attributor, FreeWindowsOverlapWithoutNesting) {
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.samples(0, 0, kSec, 10 * kMs, [](int64_t) { return 100.0; });
  run.edge("s1", 100 * kMs, true, -1, Kind::section, 0);
  run.edge("s2", 200 * kMs, true, -1, Kind::section, 0);
  run.edge("s1", 300 * kMs, false, -1, Kind::section, 0);
  run.edge("s2", 500 * kMs, false, -1, Kind::section, 0);
  Report rep = run.attr->finish(kSec);
  EXPECT_NEAR(row(rep.channels[0], "s1").energy_j, 20.0, 1e-9);
  EXPECT_NEAR(row(rep.channels[0], "s2").energy_j, 30.0, 1e-9);
  EXPECT_NEAR(rep.channels[0].conservation.attributed_j, 0.0, 1e-12);  // sections are not top-level windows
}

TEST(Attributor, UnmatchedAndMisnestedEventsAreRepairedAndCounted) {
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.samples(0, 0, kSec, 10 * kMs, [](int64_t) { return 100.0; });
  run.edge("ghost", 50 * kMs, false);  // end without begin
  run.edge("a", 100 * kMs, true);
  run.edge("b", 200 * kMs, true);
  run.edge("a", 300 * kMs, false);     // closes b too
  run.edge("open", 400 * kMs, true);   // never closed: closed at the end of the run
  Report rep = run.attr->finish(kSec);
  EXPECT_EQ(rep.unmatched_events, 3u);
  EXPECT_NEAR(row(rep.channels[0], "a").energy_j, 20.0, 1e-9);
  EXPECT_NEAR(row(rep.channels[0], "b").energy_j, 10.0, 1e-9);
  EXPECT_NEAR(row(rep.channels[0], "open").energy_j, 60.0, 1e-9);
}

TEST(Attributor, ConservationAgainstVendorCounter) {
  Feed run({gpu(0)});
  run.samples(0, 0, kSec, 10 * kMs, [](int64_t) { return 150.0; });
  run.attr->add_counter(0, 100 * kMs, 1000.0);
  run.attr->add_counter(0, 900 * kMs, 1000.0 + 123.0);
  run.window("k", 200 * kMs, 300 * kMs, 0);
  Report rep = run.attr->finish(kSec);
  const auto& cs = rep.channels[0].conservation;
  EXPECT_NEAR(cs.run_energy_j, 120.0, 1e-9);  // 150 W over the counter's 0.8 s
  ASSERT_TRUE(cs.counter_delta_j);
  EXPECT_NEAR(*cs.ratio(), 120.0 / 123.0, 1e-12);
}

TEST(Attributor, OneCounterReadLeavesTheRunToItsStartAndEnd) {
  // A single read spans nothing (a replayed counter that appears mid-run): the run's energy and time are then
  // reckoned from begin_run to finish, and no ratio is claimed.
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.samples(0, 0, kSec, 10 * kMs, [](int64_t) { return 150.0; });
  run.attr->add_counter(0, 600 * kMs, 5000.0);
  run.window("k", 200 * kMs, 300 * kMs, 0);
  Report rep = run.attr->finish(kSec);
  const auto& ch = rep.channels[0];
  EXPECT_NEAR(ch.run_time_s, 1.0, 1e-12);
  EXPECT_NEAR(ch.conservation.run_energy_j, 150.0, 1e-9);
  EXPECT_NEAR(ch.conservation.unattributed_j, 150.0 - 15.0, 1e-9);
  EXPECT_FALSE(ch.conservation.counter_delta_j);
  EXPECT_FALSE(ch.conservation.ratio());
}

TEST(Attributor, ConservationHoldsWhenOldReadingsAreTrimmedDuringTheRun) {
  // Live use: the trace is trimmed as processing advances, yet the run's integral between the two counter
  // reads must stay exact (it once read E(t0) after t0's readings were gone).
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.attr->add_counter(0, 5 * kMs, 0.0);
  const KeyId k = run.keys.intern("k", Kind::kernel_for);
  for (int64_t t = 0; t <= 60 * kSec; t += 20 * kMs) {
    run.attr->add_reading({0, t, 100.0 + (t % (2 * kSec) < kSec ? 50.0 : 0.0)});
    if (t % kSec == 0 && t > 0) {
      run.attr->add_event({t + kMs, k, 0, 0, true, flags::nested});
      run.attr->add_event({t + 11 * kMs, k, 0, 0, false, flags::nested});
    }
    run.attr->advance(t);
  }
  EXPECT_LT(run.attr->retained_readings(), 200u);
  run.attr->add_counter(0, 60 * kSec, 7000.0);
  Report rep = run.attr->finish(60 * kSec);
  // Exact integral of the piecewise-linear trace from 5 ms to 60 s: 100 W throughout, plus 50 W for the
  // first second of every two, with 20 ms linear ramps at each switch (counted half).
  double expected = 0;
  PowerTrace ref;
  for (int64_t t = 0; t <= 60 * kSec; t += 20 * kMs) ref.append(t, 100.0 + (t % (2 * kSec) < kSec ? 50.0 : 0.0));
  expected = ref.energy_j(60 * kSec) - ref.energy_j(5 * kMs);
  EXPECT_NEAR(rep.channels[0].conservation.run_energy_j, expected, 1e-9 * expected);
  EXPECT_NEAR(*rep.channels[0].conservation.ratio(), expected / 7000.0, 1e-12);
}

// Kernels A (3 ms, +300 W) and B (2 ms, +100 W) and 1 ms of idle (120 W), repeating every 6 ms, far faster
// than the 20 ms sensor. The trapezoid hands both the mix's average; the model recovers each one's power.
struct SquareWave {
  static constexpr double kIdle = 120, kA = 300, kB = 100;
  static double power(int64_t t) {
    const int64_t ph = t % (6 * kMs);
    return ph < 3 * kMs ? kIdle + kA : ph < 5 * kMs ? kIdle + kB : kIdle;
  }
  // Mean power over [a, b] of the square wave (exact, by summing over milliseconds' pieces).
  static double mean(int64_t a, int64_t b) {
    double e = 0;
    for (int64_t t = a; t < b;) {
      const int64_t next = std::min(b, (t / kMs + 1) * kMs);
      e += power(t) * static_cast<double>(next - t);
      t = next;
    }
    return e / static_cast<double>(b - a);
  }
};

void square_wave_run(Feed& run, int64_t window_ns, int64_t until) {
  run.attr->begin_run(0);
  for (int64_t t0 = 0; t0 + 6 * kMs <= until; t0 += 6 * kMs) {
    run.window("A", t0, t0 + 3 * kMs, 0);
    run.window("B", t0 + 3 * kMs, t0 + 5 * kMs, 0);
  }
  // Readings every 7 ms (incommensurate with the 6 ms cycle) of what the sensor would report.
  for (int64_t t = std::max<int64_t>(21 * kMs, window_ns + kMs); t <= until; t += 7 * kMs)
    run.attr->add_reading({0, t, window_ns ? SquareWave::mean(t - window_ns, t) : SquareWave::power(t)});
}

TEST(Attributor, ModelSeparatesRegionsFasterThanTheSensor_PointSensor) {
  Feed run({gpu(0, 0)});
  square_wave_run(run, 0, 3 * kSec);
  Report rep = run.attr->finish(3 * kSec);
  const auto& c = rep.channels[0];
  ASSERT_TRUE(c.fit.fitted) << c.fit.why_not;
  EXPECT_NEAR(c.fit.intercept_w, SquareWave::kIdle, 1e-6);
  EXPECT_NEAR(*row(c, "A").model_power_w, SquareWave::kA, 1e-6);
  EXPECT_NEAR(*row(c, "B").model_power_w, SquareWave::kB, 1e-6);
  EXPECT_NEAR(c.fit.residual_rms_w, 0.0, 1e-6);
  const double calls = static_cast<double>(row(c, "A").calls);
  EXPECT_NEAR(*row(c, "A").model_j_per_call(c.fit.intercept_w), SquareWave::kA * 3e-3, 1e-9 * calls);
  EXPECT_NEAR(*row(c, "B").model_j_per_call(c.fit.intercept_w), SquareWave::kB * 2e-3, 1e-9 * calls);
  EXPECT_FALSE(row(c, "A").model_inseparable);
}

TEST(Attributor, ModelSeparatesRegionsUnderABoxcarSensor) {
  // A 20 ms averaging sensor: each reading is the mean over its window. The trapezoid sees ~the mix average
  // for both kernels; the model must recover the true marginal powers exactly (noise-free data).
  Feed run({gpu(0, 20 * kMs)});
  // Break the fixed A/B proportion: in the second half, B runs alone for a while.
  run.attr->begin_run(0);
  for (int64_t t0 = 0; t0 + 6 * kMs <= kSec; t0 += 6 * kMs) {
    run.window("A", t0, t0 + 3 * kMs, 0);
    run.window("B", t0 + 3 * kMs, t0 + 5 * kMs, 0);
  }
  auto power = [](int64_t t) {
    if (t < 996 * kMs) return SquareWave::power(t);  // 166 whole cycles, then idle until 1 s
    if (t < kSec) return SquareWave::kIdle;
    const int64_t ph = (t - kSec) % (4 * kMs);
    return ph < 2 * kMs ? SquareWave::kIdle + SquareWave::kB : SquareWave::kIdle;
  };
  for (int64_t t0 = kSec; t0 + 4 * kMs <= 2 * kSec; t0 += 4 * kMs) run.window("B", t0, t0 + 2 * kMs, 0);
  auto mean = [&](int64_t a, int64_t b) {
    double e = 0;
    for (int64_t t = a; t < b;) {
      const int64_t next = std::min(b, (t / kMs + 1) * kMs);
      e += power(t) * static_cast<double>(next - t);
      t = next;
    }
    return e / static_cast<double>(b - a);
  };
  for (int64_t t = 20 * kMs; t <= 2 * kSec; t += 7 * kMs) run.attr->add_reading({0, t, mean(t - 20 * kMs, t)});
  Report rep = run.attr->finish(2 * kSec);
  const auto& c = rep.channels[0];
  ASSERT_TRUE(c.fit.fitted);
  EXPECT_NEAR(*row(c, "A").model_power_w, SquareWave::kA, 1e-6);
  EXPECT_NEAR(*row(c, "B").model_power_w, SquareWave::kB, 1e-6);
  EXPECT_NEAR(c.fit.intercept_w, SquareWave::kIdle, 1e-6);
}

// Regions get the model's inclusive energy: the floor over their time plus each inner region's fitted power
// over the time it ran inside them. The square wave's cycles, each wrapped in a "step" region, nine at a time
// in an "outer" one; every tenth cycle runs outside both (its idle millisecond fixes the floor).
TEST(Attributor, ModelChargesARegionWithTheRegionsItHolds) {
  Feed run({gpu(0, 0)});
  run.attr->begin_run(0);
  const int64_t until = 3 * kSec;
  for (int64_t t0 = 0, cycle = 0; t0 + 6 * kMs <= until; t0 += 6 * kMs, ++cycle) {
    const bool wrapped = cycle % 10 != 9;
    if (cycle % 10 == 0) run.edge("outer", t0, true);
    if (wrapped) run.edge("step", t0, true);
    run.window("A", t0, t0 + 3 * kMs, 0);
    run.window("B", t0 + 3 * kMs, t0 + 5 * kMs, 0);
    if (wrapped) run.edge("step", t0 + 6 * kMs, false);
    if (cycle % 10 == 8) run.edge("outer", t0 + 6 * kMs, false);
  }
  for (int64_t t = 21 * kMs; t <= until; t += 7 * kMs) run.attr->add_reading({0, t, SquareWave::power(t)});
  const Report rep = run.attr->finish(until);
  const auto& c = rep.channels[0];
  ASSERT_TRUE(c.fit.fitted) << c.fit.why_not;
  EXPECT_NEAR(c.fit.intercept_w, SquareWave::kIdle, 1e-6);
  EXPECT_NEAR(*row(c, "A").model_power_w, SquareWave::kA, 1e-6);
  EXPECT_NEAR(*row(c, "step").model_power_w, 0.0, 1e-6);
  const double per_cycle = SquareWave::kIdle * 6e-3 + SquareWave::kA * 3e-3 + SquareWave::kB * 2e-3;
  const RegionRow& step = row(c, "step");
  const RegionRow& outer = row(c, "outer");
  ASSERT_EQ(step.calls, 450u);
  ASSERT_EQ(outer.calls, 50u);
  EXPECT_NEAR(*step.model_energy_j / static_cast<double>(step.calls), per_cycle, 1e-9);
  EXPECT_NEAR(*outer.model_energy_j / static_cast<double>(outer.calls), 9 * per_cycle, 1e-9);
}

// A region holding more kernel names than its frame lists (the rest go straight to the run's map): its model
// energy still counts every one. 40 kernels of 0.75 ms (+300 W), one after the other in a 40 ms region, then
// 2 ms outside it, 71 times; a point sensor every 1.3 ms.
TEST(Attributor, ModelChargesARegionHoldingManyKernelNames) {
  Feed run({gpu(0, 0)});
  run.attr->begin_run(0);
  constexpr int kKernels = 40;
  const int64_t cycle = 42 * kMs, until = 71 * cycle, on = 750'000;
  for (int64_t t0 = 0; t0 + cycle <= until; t0 += cycle) {
    run.edge("outer", t0, true);
    for (int i = 0; i < kKernels; ++i) run.window("k" + std::to_string(i), t0 + i * kMs, t0 + i * kMs + on, 0);
    run.edge("outer", t0 + kKernels * kMs, false);
  }
  auto power = [&](int64_t t) {
    const int64_t ph = t % cycle;
    return ph < kKernels * kMs && ph % kMs < on ? 420.0 : 120.0;
  };
  for (int64_t t = 1300 * kUs; t <= until; t += 1300 * kUs) run.attr->add_reading({0, t, power(t)});
  const Report rep = run.attr->finish(until);
  const auto& c = rep.channels[0];
  ASSERT_TRUE(c.fit.fitted) << c.fit.why_not;
  EXPECT_NEAR(c.fit.intercept_w, 120.0, 1e-6);
  const RegionRow& outer = row(c, "outer");
  ASSERT_EQ(outer.calls, 71u);
  EXPECT_NEAR(*outer.model_energy_j / 71.0, 120.0 * 0.040 + 300.0 * kKernels * 0.75e-3, 1e-9);
}

TEST(Attributor, ModelFlagsRegionsTheRunCannotSeparate) {
  // A and B always run together in the same proportion under a 96 ms boxcar (16 whole cycles): every
  // reading sees the same occupancies, so neither is separable from the other or from the idle floor.
  Feed run({gpu(0, 96 * kMs)});
  square_wave_run(run, 96 * kMs, 2 * kSec);
  Report rep = run.attr->finish(2 * kSec);
  const auto& c = rep.channels[0];
  ASSERT_TRUE(c.fit.fitted);
  EXPECT_TRUE(row(c, "A").model_inseparable);
  EXPECT_TRUE(row(c, "B").model_inseparable);
}

TEST(Attributor, BaselineFromQuietReadingsAndGivenBaseline) {
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.samples(0, 0, kSec, 10 * kMs, [](int64_t t) { return t < 500 * kMs ? 80.0 : 400.0; });
  run.window("busy", 500 * kMs, kSec, 0);
  Report rep = run.attr->finish(kSec);
  EXPECT_DOUBLE_EQ(rep.channels[0].baseline_w, 80.0);
  EXPECT_NE(rep.channels[0].baseline_method.find("quiet"), std::string::npos);
  // J/call = (energy - baseline * time) / calls.
  const RegionRow& r = row(rep.channels[0], "busy");
  EXPECT_NEAR(r.j_per_call(80.0), (r.energy_j - 80.0 * 0.5), 1e-12);

  AttributorOptions o;
  o.baseline_w = 61;
  Feed given({gpu(0)}, o);
  given.samples(0, 0, kSec, 10 * kMs, [](int64_t) { return 100.0; });
  Report rep2 = given.attr->finish(kSec);
  EXPECT_DOUBLE_EQ(rep2.channels[0].baseline_w, 61.0);
  EXPECT_EQ(rep2.channels[0].baseline_method, "given");
}

// A mixed stream, fed tick by tick: two GPUs with different sensors (channel 1 ignored when only one channel
// is given), nested regions around kernels, a free section, two threads whose kernels overlap, events that
// arrive a tick late, counter reads in between. `expect`: say how far events are complete before each tick's
// events (the live profiler does), so covered events are processed as they arrive.
Report feed_mixed_stream(std::vector<power::Channel> channels, bool expect, bool pairs) {
  constexpr int64_t kTick = 100 * kMs;
  struct Batch {
    std::vector<power::Reading> readings;
    std::vector<Event> events;
  };
  KeyTable keys;
  const KeyId k[3] = {keys.intern("triad", Kind::kernel_for), keys.intern("fma", Kind::kernel_for),
                      keys.intern("copy", Kind::kernel_for)};
  const KeyId step = keys.intern("step", Kind::region), sect = keys.intern("io", Kind::section);
  std::vector<Batch> batches(31);
  auto batch_of = [&](int64_t t) -> Batch& { return batches[std::min<size_t>(static_cast<size_t>(t / kTick), 30)]; };
  for (int64_t t = 0; t < 3 * kSec; t += 20 * kMs)
    batch_of(t + 4 * kMs).readings.push_back({0, t, 150 + 90.0 * std::sin(static_cast<double>(t) * 3e-8)});
  for (int64_t t = 0; t < 3 * kSec; t += 10 * kMs)
    batch_of(t).readings.push_back({1, t, 200 + 60.0 * std::cos(static_cast<double>(t) * 2e-8)});
  int n = 0;
  for (int64_t t = 1 * kMs; t < 2900 * kMs; t += 1'300'000, ++n) {
    Batch& b = batch_of(t);
    if (n % 37 == 0) b.events.push_back({t - 100'000, step, 0, -1, true, flags::nested});
    b.events.push_back({t, k[n % 2], 0, n % 2, true, flags::nested});
    batch_of(t + 900'000).events.push_back({t + 900'000, k[n % 2], 0, n % 2, false, flags::nested});
    if (n % 37 == 36) batch_of(t + 1'000'000).events.push_back({t + 1'000'000, step, 0, -1, false, flags::nested});
    if (n % 5 == 0) {  // thread 1: one kernel in five, on GPU 1; every fourth of its events is published a tick late
      Batch& late = batch_of(t + ((n / 5) % 4 == 0 ? kTick : 0));
      late.events.push_back({t + 200'000, k[2], 1, 1, true, flags::nested});
      batch_of(t + 700'000 + ((n / 5) % 4 == 0 ? kTick : 0)).events.push_back({t + 700'000, k[2], 1, 1, false, flags::nested});
    }
    if (n % 101 == 0) b.events.push_back({t + 50'000, sect, 0, -1, true, 0});
    if (n % 101 == 50) b.events.push_back({t + 50'000, sect, 0, -1, false, 0});
  }
  AttributorOptions options;
  options.pair_windows = pairs;
  Attributor a(std::move(channels), keys, options);
  a.begin_run(0);
  a.add_counter(0, 2 * kMs, 10.0);
  for (size_t i = 0; i < batches.size(); ++i) {
    const int64_t tick = static_cast<int64_t>(i + 1) * kTick;
    for (const auto& r : batches[i].readings) a.add_reading(r);
    if (i == 15) a.add_counter(1, tick - 30 * kMs, 500.0);  // read mid-run, arrives after later events
    std::vector<Event> evs = batches[i].events;
    std::stable_sort(evs.begin(), evs.end(), [](const Event& x, const Event& y) { return x.t_ns < y.t_ns; });
    if (expect) a.expect_events(tick);
    for (const auto& e : evs) a.add_event(e);
    a.advance(tick);
  }
  a.add_counter(0, 3 * kSec, 700.0);
  a.add_counter(1, 3 * kSec, 900.0);
  return a.finish(3 * kSec);
}

// The live profiler says how far events are complete before adding a tick's events (expect_events), so the
// attributor processes covered events at once instead of queueing them. The result must be the same, number
// for number, as queueing everything until advance().
TEST(Attributor, ProcessingEventsAsTheyArriveChangesNothing) {
  const Report queued = feed_mixed_stream({gpu(0, 25 * kMs), gpu(1)}, false, true);
  const Report direct = feed_mixed_stream({gpu(0, 25 * kMs), gpu(1)}, true, true);
  ASSERT_EQ(queued.channels.size(), 2u);
  EXPECT_EQ(first_difference(queued, direct, 4), "");
  for (const ChannelReport& c : queued.channels) {
    EXPECT_GE(c.rows.size(), 3u);
    EXPECT_TRUE(c.fit.fitted) << c.fit.why_not;
  }
  // The stream really exercised both paths: kernels on both GPUs, the late thread-1 kernels, the region.
  EXPECT_GT(row(queued.channels[1], "copy").calls, 400u);
  EXPECT_GT(row(queued.channels[0], "step").calls, 50u);
}

// A window whose end comes straight after its begin (a kernel's) is charged from its two edges in one step.
// Every figure must be what processing the two events one at a time gives, to the last bit: one channel (its
// own code path) and two, events processed as they arrive or queued.
TEST(Attributor, ChargingAWindowFromBothEdgesAtOnceChangesNothing) {
  for (const bool expect : {true, false}) {
    SCOPED_TRACE(expect ? "processed as they arrive" : "queued");
    EXPECT_EQ(first_difference(feed_mixed_stream({gpu(0, 25 * kMs), gpu(1)}, expect, false),
                               feed_mixed_stream({gpu(0, 25 * kMs), gpu(1)}, expect, true)),
              "");
    EXPECT_EQ(first_difference(feed_mixed_stream({gpu(0, 25 * kMs)}, expect, false),
                               feed_mixed_stream({gpu(0, 25 * kMs)}, expect, true)),
              "");
  }
}

TEST(Attributor, TrimmingOldSegmentsNeverChangesTheModel) {
  // The model needs each reading's window of innermost segments; segments older than any window still to come
  // are dropped as the run advances. Fed tick by tick (trimming) or all at once (nothing trimmed before the
  // end), the fit and every model energy must be the same, for a point sensor, NVML's 25 ms window and a
  // 1 s average; and for the point sensor the segments kept stay a fraction of a second's worth.
  for (const int64_t window : {int64_t{0}, 25 * kMs, kSec}) {
    SCOPED_TRACE("window " + std::to_string(window));
    auto feed = [&](bool incremental, size_t* peak_segments) {
      KeyTable keys;
      Attributor a({gpu(0, window)}, keys);
      const KeyId k[2] = {keys.intern("a", Kind::kernel_for), keys.intern("b", Kind::kernel_for)};
      a.begin_run(0);
      // Kernel n runs in millisecond n from +0.1 ms to +0.6..0.8 ms; runs of irregular length alternate a and b
      // so the columns vary apart. The power: 150 W, +120 W while a runs, +40 W while b runs, +30 W every other
      // 300 ms (unexplained by the kernels). Readings every ~20 ms at drifting offsets within the millisecond.
      auto key_of = [](int64_t n) { return (n / (7 + n % 5)) % 2; };
      auto power = [&](int64_t t) {
        const int64_t n = t / kMs, off = t % kMs;
        const bool running = off >= 100'000 && off < 600'000 + (n % 3) * 100'000;
        return 150.0 + (running ? (key_of(n) == 0 ? 120.0 : 40.0) : 0.0) + 30.0 * ((t / (300 * kMs)) % 2);
      };
      int64_t next_reading = 350'000;
      int64_t n = 0;
      for (int64_t tick = 100 * kMs; tick <= 6 * kSec; tick += 100 * kMs) {
        for (; next_reading <= tick; next_reading += 20'000'037) a.add_reading({0, next_reading, power(next_reading)});
        for (int64_t t = tick - 100 * kMs; t < tick; t += kMs, ++n) {
          const KeyId key = k[key_of(n)];
          a.add_event({t + 100'000, key, 0, 0, true, flags::nested});
          a.add_event({t + 600'000 + (n % 3) * 100'000, key, 0, 0, false, flags::nested});
        }
        if (incremental) a.advance(tick);
        if (peak_segments) *peak_segments = std::max(*peak_segments, a.retained_segments());
      }
      return a.finish(6 * kSec);
    };
    size_t peak = 0;
    const Report inc = feed(true, &peak), once = feed(false, nullptr);
    const ChannelReport &x = inc.channels[0], &y = once.channels[0];
    ASSERT_TRUE(x.fit.fitted);
    // The same fit (to rounding: the two feeds accumulate the same sums in the same order, but allow an ulp's
    // worth of slack for compilers that contract differently).
    auto same = [](double u, double v) { return std::abs(u - v) <= 1e-9 * std::max(1.0, std::abs(v)); };
    EXPECT_TRUE(same(x.fit.residual_rms_w, y.fit.residual_rms_w)) << x.fit.residual_rms_w << " vs " << y.fit.residual_rms_w;
    EXPECT_TRUE(same(x.fit.intercept_w, y.fit.intercept_w)) << x.fit.intercept_w << " vs " << y.fit.intercept_w;
    for (const char* name : {"a", "b"}) {
      EXPECT_TRUE(same(*row(x, name).model_energy_j, *row(y, name).model_energy_j)) << name;
      EXPECT_TRUE(same(*row(x, name).model_power_w, *row(y, name).model_power_w)) << name;
    }
    if (window == 0) {
      EXPECT_LT(peak, 300u);  // 1 kernel per ms: ~0.3 s worth at most
      // A point sensor sees the kernels' own power: the fit is not degenerate (the 30 W square wave is noise).
      EXPECT_NEAR(*row(x, "a").model_power_w, 120.0, 10.0);
      EXPECT_NEAR(*row(x, "b").model_power_w, 40.0, 10.0);
    }
  }
}

TEST(Attributor, AChannelLaggingPastMaxLagKeepsTheSegmentsItsReadingsNeed) {
  // A sensor whose readings arrive 2.5 s late (more than max_lag_ns = 2 s): events are processed ahead of its
  // trace. Its readings, when they come, still need the innermost segments of their windows; the model must
  // see the kernel's 200 W above a 100 W floor, not take the late readings for idle ones.
  constexpr int64_t kLag = 2500 * kMs;
  Feed run({gpu(0)});
  const KeyId k = run.keys.intern("k", Kind::kernel_for);
  run.attr->begin_run(0);
  auto busy = [](int64_t t) { return (t / (50 * kMs)) % 2 == 1; };  // 50 ms on, 50 ms off
  int64_t next_reading = 0, next_edge = 50 * kMs;
  for (int64_t tick = 100 * kMs; tick <= 12 * kSec; tick += 100 * kMs) {
    for (; next_reading <= tick - kLag; next_reading += 7 * kMs)
      run.attr->add_reading({0, next_reading, busy(next_reading) ? 300.0 : 100.0});
    for (; next_edge <= tick && next_edge < 10 * kSec; next_edge += 50 * kMs)
      run.attr->add_event({next_edge, k, 0, 0, busy(next_edge), flags::nested});
    run.attr->advance(tick);
  }
  const Report rep = run.attr->finish(12 * kSec);
  const ChannelReport& c = rep.channels[0];
  ASSERT_TRUE(c.fit.fitted);
  EXPECT_NEAR(*row(c, "k").model_power_w, 200.0, 5.0);
  EXPECT_NEAR(c.fit.intercept_w, 100.0, 5.0);
  EXPECT_NEAR(c.baseline_w, 100.0, 5.0);
}

TEST(Attributor, AnEventOlderThanWhatIsProcessedMovesUpInsteadOfReadingTrimmedPower) {
  // 50 W at 0, then 100 W from 20 ms on. Processing reaches 500 ms (the readings before it are trimmed); a
  // window whose begin (300 ms) was published late, though after every event added so far, starts at 500 ms.
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  run.attr->add_reading({0, 0, 50.0});
  run.samples(0, 20 * kMs, kSec, 20 * kMs, [](int64_t) { return 100.0; });
  run.window("early", 100 * kMs, 110 * kMs, 0);
  run.attr->advance(500 * kMs);
  run.window("late", 300 * kMs, 700 * kMs, 0);
  const Report rep = run.attr->finish(kSec);
  const RegionRow& late = row(rep.channels[0], "late");
  EXPECT_EQ(late.extrapolated_windows, 0u);
  EXPECT_NEAR(late.time_s, 0.2, 1e-12);
  EXPECT_NEAR(late.energy_j, 100.0 * 0.2, 1e-9);
}

TEST(Attributor, MemoryStaysBoundedOverALongRun) {
  // An hour-long-equivalent stream fed incrementally: retained readings and segments must not grow with it.
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  const KeyId k = run.keys.intern("k", Kind::kernel_for);
  size_t peak_readings = 0, peak_segments = 0;
  for (int64_t t = 0; t < 600 * kSec; t += 20 * kMs) {
    run.attr->add_reading({0, t, 200.0});
    run.attr->add_event({t + 1 * kMs, k, 0, 0, true, flags::nested});
    run.attr->add_event({t + 5 * kMs, k, 0, 0, false, flags::nested});
    run.attr->advance(t + 10 * kMs);
    peak_readings = std::max(peak_readings, run.attr->retained_readings());
    peak_segments = std::max(peak_segments, run.attr->retained_segments());
  }
  EXPECT_LT(peak_readings, 200u);
  EXPECT_LT(peak_segments, 400u);
  Report rep = run.attr->finish(600 * kSec);
  EXPECT_EQ(row(rep.channels[0], "k").calls, 30000u);
  EXPECT_NEAR(row(rep.channels[0], "k").energy_j, 30000 * 200.0 * 4e-3, 1e-6);
}

// The model is fed as processing goes (every 4,096 events). Kernels back to back (each begins at the instant
// the previous ends) under a point sensor reading at every boundary: every reading lies inside a kernel, none
// is quiet. A reading at an instant whose next event (the next begin) is still to come must wait for it.
TEST(Attributor, APointReadingIsNotTakenForQuietWhileEventsAtItsInstantAreStillToCome) {
  KeyTable keys;
  const KeyId k = keys.intern("k", Kind::kernel_for), f = keys.intern("f", Kind::region);
  power::Channel ch = gpu(0, 0, 1000);
  Attributor a({ch}, keys);
  a.begin_run(0);
  constexpr int kKernels = 6 * 4096;
  for (int i = 0; i <= kKernels; ++i) a.add_reading({0, 1000 * int64_t{i} + 1000, 200.0});
  a.add_event({0, f, 1, -1, true, 0});  // one free event first: the 4,096th processed event is a kernel's end
  for (int i = 0; i < kKernels; ++i) {
    a.add_event({1000 * int64_t{i}, k, 0, 0, true, flags::nested});
    a.add_event({1000 * int64_t{i} + 1000, k, 0, 0, false, flags::nested});
  }
  const Report r = a.finish(1000 * int64_t{kKernels});
  EXPECT_EQ(r.channels[0].baseline_method.rfind("median of", 0), std::string::npos) << r.channels[0].baseline_method;
}

// Events past the run's end (finish closes windows at max(t_end, last event), as a re-analysed recording can
// have): E(t_end), and with it the run's energy, stays exact although processing went on past it.
TEST(Attributor, RunEnergyToTheRunsEndIsExactWhenEventsGoOnPastIt) {
  KeyTable keys;
  const KeyId k = keys.intern("k", Kind::kernel_for);
  Attributor a({gpu(0, 25'000, 1000)}, keys);
  a.begin_run(0);
  for (int64_t t = 0; t <= 20'000'000; t += 20'000) a.add_reading({0, t, t < 5'000'000 ? 100.0 : 300.0});
  for (int i = 0; i < 5000; ++i) {
    a.add_event({int64_t{i} * 4000, k, 0, 0, true, flags::nested});
    a.add_event({int64_t{i} * 4000 + 3000, k, 0, 0, false, flags::nested});
  }
  const Report r = a.finish(5'000'000);  // a 5 ms run at 100 W; the events go on to 20 ms, at 300 W after 5 ms
  EXPECT_NEAR(r.channels[0].conservation.run_energy_j, 100.0 * 0.005, 0.01);
}

}  // namespace
}  // namespace dooly::energy

namespace dooly::energy {
namespace {

// Window times add up per key; overlapping windows (a section opened on many threads at once) can sum to more
// than int64 holds although no single span does. The sum saturates (UBSan reports the overflow it replaced).
TEST(Attributor, TimeSumsOfOverlappingWindowsSaturateInsteadOfOverflowing) {
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  constexpr int64_t kSpan = int64_t{1} << 52;  // the widest span a recording may hold
  run.attr->add_reading({0, 0, 100.0});
  run.attr->add_reading({0, kSpan, 100.0});
  const KeyId k = run.keys.intern("io", Kind::section);
  for (uint32_t i = 0; i < 3000; ++i) run.attr->add_event({0, k, i, -1, true, 0});
  for (uint32_t i = 0; i < 3000; ++i) run.attr->add_event({kSpan, k, i, -1, false, 0});
  const Report rep = run.attr->finish(kSpan);
  const RegionRow& r = row(rep.channels[0], "io");
  EXPECT_EQ(r.calls, 3000u);
  EXPECT_DOUBLE_EQ(r.time_s, static_cast<double>(INT64_MAX) * 1e-9);
}

// 100,000 windows nested in one another on one thread: each closes its parent's stretch and later hands its
// tally to it, so the work per event does not grow with the depth (it used to: every stretch was added to every
// enclosing window, 5e9 additions here). The figures stay exact: each window's inclusive time is known.
TEST(Attributor, DeepNestingCostsNoMorePerEventThanShallow) {
  Feed run({gpu(0)});
  run.attr->begin_run(0);
  constexpr int kDepth = 100'000;
  run.attr->add_reading({0, 0, 100.0});
  run.attr->add_reading({0, 2 * kDepth * kUs + kSec, 100.0});
  const KeyId k = run.keys.intern("r", Kind::region);
  for (int i = 0; i < kDepth; ++i) run.attr->add_event({i * kUs, k, 0, -1, true, flags::nested});
  for (int i = kDepth - 1; i >= 0; --i) run.attr->add_event({(2 * kDepth - i) * kUs, k, 0, -1, false, flags::nested});
  const Report rep = run.attr->finish(2 * kDepth * kUs + kSec);
  const RegionRow& r = row(rep.channels[0], "r");
  EXPECT_EQ(r.calls, static_cast<uint64_t>(kDepth));
  // Window i spans [i, 2 kDepth - i) us: the sum over i is kDepth^2 + kDepth us.
  EXPECT_NEAR(r.time_s, (static_cast<double>(kDepth) * kDepth + kDepth) * 1e-6, 1e-6);
  EXPECT_NEAR(r.energy_j, 100.0 * r.time_s, 1e-6 * r.energy_j);
  EXPECT_EQ(rep.unmatched_events, 0u);
}

}  // namespace
}  // namespace dooly::energy
