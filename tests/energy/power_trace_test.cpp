#include "dooly/energy/power_trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace dooly::energy {
namespace {

constexpr double kS = 1e-9;  // ns -> s

TEST(PowerTrace, LinearRampIntegratesExactlyBetweenArbitraryInstants) {
  // p(t) = 100 + 50 t (t in s) sampled every 10 ms: the piecewise-linear trace is the ramp itself.
  PowerTrace tr;
  for (int i = 0; i <= 100; ++i) {
    const int64_t t = i * 10'000'000LL;
    tr.append(t, 100 + 50 * t * kS);
  }
  auto exact = [](double a, double b) { return 100 * (b - a) + 25 * (b * b - a * a); };
  const int64_t a = 3'141'592, b = 912'345'678;
  EXPECT_NEAR(tr.energy_j(b) - tr.energy_j(a), exact(a * kS, b * kS), 1e-9 * exact(a * kS, b * kS));
}

TEST(PowerTrace, KinkedTraceMatchesClosedForm) {
  // Triangle: 0 W at 0 s, 200 W at 1 s, 0 W at 2 s, 100 W at 3 s.
  PowerTrace tr;
  tr.append(0, 0);
  tr.append(1'000'000'000, 200);
  tr.append(2'000'000'000, 0);
  tr.append(3'000'000'000, 100);
  // From 0.5 s to 2.5 s: 0.5..1: avg(100,200)*0.5 = 75; 1..2: 100; 2..2.5: avg(0,50)*0.5 = 12.5.
  EXPECT_NEAR(tr.energy_j(2'500'000'000) - tr.energy_j(500'000'000), 187.5, 187.5 * 1e-12);
  EXPECT_DOUBLE_EQ(tr.power_w(2'500'000'000), 50);
}

TEST(PowerTrace, RejectsReadingsThatAreNotNewer) {
  PowerTrace tr;
  EXPECT_TRUE(tr.append(10, 1));
  EXPECT_FALSE(tr.append(10, 2));
  EXPECT_FALSE(tr.append(5, 2));
  EXPECT_EQ(tr.size(), 1u);
}

TEST(PowerTrace, HoldsLastValueBeyondTheReadingsAndSaysSo) {
  PowerTrace tr;
  tr.append(0, 100);
  tr.append(1'000'000'000, 100);
  bool ex = false;
  EXPECT_NEAR(tr.energy_j(3'000'000'000, &ex), 300, 1e-9);
  EXPECT_TRUE(ex);
  ex = false;
  tr.energy_j(500'000'000, &ex);
  EXPECT_FALSE(ex);
}

TEST(PowerTrace, TrimKeepsLaterIntegralsExact) {
  PowerTrace tr, full;
  for (int i = 0; i <= 1000; ++i) {
    const int64_t t = i * 1'000'000LL;
    const double p = 100 + 30 * std::sin(i * 0.1);
    tr.append(t, p);
    full.append(t, p);
  }
  tr.trim_before(700'000'000);
  EXPECT_LT(tr.size(), 310u);
  for (int64_t t : {700'000'000LL, 812'345'678LL, 1'000'000'000LL})
    EXPECT_DOUBLE_EQ(tr.energy_j(t), full.energy_j(t));
}

// E(t) computed from scratch: the trapezoid over every reading up to t (reference for the cursor).
double reference_energy(const std::vector<std::pair<int64_t, double>>& pts, int64_t t) {
  double e = 0;
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    const auto [t0, p0] = pts[i];
    const auto [t1, p1] = pts[i + 1];
    if (t <= t0) break;
    const int64_t end = std::min(t, t1);
    const double p_end = p0 + (p1 - p0) * static_cast<double>(end - t0) / static_cast<double>(t1 - t0);
    e += 0.5 * (p0 + p_end) * static_cast<double>(end - t0) * kS;
  }
  return e;
}

TEST(PowerTrace, AnyQueryOrderGivesTheSameEnergies) {
  // Irregular readings; queries in time order (the cursor's fast path), backwards, at random, and exactly on
  // readings, interleaved with appends and trims. Every answer equals the from-scratch trapezoid.
  std::mt19937_64 rng(11);
  PowerTrace tr;
  std::vector<std::pair<int64_t, double>> pts;
  int64_t t = 1'000'000;
  for (int i = 0; i < 400; ++i) {
    t += 1'000'000 + static_cast<int64_t>(rng() % 30'000'000);
    const double p = 100 + static_cast<double>(rng() % 300);
    ASSERT_TRUE(tr.append(t, p));
    pts.emplace_back(t, p);
  }
  auto check = [&](int64_t q) {
    const double want = reference_energy(pts, q);
    ASSERT_NEAR(tr.energy_j(q), want, 1e-9 * want + 1e-12) << "t=" << q;
  };
  const int64_t t_first = pts.front().first, t_last = pts.back().first;
  for (int64_t q = t_first; q < t_last; q += 777'777) check(q);         // forwards, many per interval
  for (int64_t q = t_last - 1; q > t_first; q -= 3'333'333) check(q);   // backwards
  for (int i = 0; i < 2000; ++i) check(t_first + static_cast<int64_t>(rng() % static_cast<uint64_t>(t_last - t_first)));
  for (const auto& [tp, p] : pts) check(tp);                             // on the readings themselves
  // Trim in steps, querying forwards after each: the cursor follows the dropped readings.
  for (int64_t cut = t_first; cut < t_last; cut += 250'000'000) {
    tr.trim_before(cut);
    for (int64_t q = cut; q < std::min(cut + 300'000'000, t_last); q += 5'555'555) check(q);
  }
}

TEST(PowerTrace, StampsAtTheEndsOfInt64GiveFiniteEnergyWithoutOverflow) {
  // The differences span 2^64 ns: taken in int64 they overflowed (UBSan) and wrapped to -1 ns, so the energy
  // came out negative. Found by fuzzing `dooly analyze`.
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const double span_s = 18446744073.709551615;  // 2^64 - 1 ns
  PowerTrace tr;
  ASSERT_TRUE(tr.append(lo, 100.0));
  ASSERT_TRUE(tr.append(hi, 100.0));
  EXPECT_NEAR(tr.energy_j(hi), 100.0 * span_s, 1e-9 * 100.0 * span_s);
  EXPECT_NEAR(tr.energy_j(0), 100.0 * span_s / 2, 1e-9 * 100.0 * span_s);
  EXPECT_DOUBLE_EQ(tr.power_w(0), 100.0);
  PowerTrace one;
  ASSERT_TRUE(one.append(lo, 50.0));
  bool extrapolated = false;
  EXPECT_NEAR(one.energy_j(hi, &extrapolated), 50.0 * span_s, 1e-9 * 50.0 * span_s);
  EXPECT_TRUE(extrapolated);
  PowerTrace late;
  ASSERT_TRUE(late.append(hi, 50.0));
  EXPECT_NEAR(late.energy_j(lo), -50.0 * span_s, 1e-9 * 50.0 * span_s);
}

}  // namespace
}  // namespace dooly::energy
