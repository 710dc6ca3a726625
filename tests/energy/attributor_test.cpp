// Analytic traces with per-region energies known in closed form, driven through the real attributor.
#include "dooly/energy/attributor.hpp"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

namespace dooly::energy {
namespace {

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

}  // namespace
}  // namespace dooly::energy
