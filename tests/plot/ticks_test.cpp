// Nice ticks and limits on linear and log axes, tick labels, and the data-to-pixel mapping.
#include <cmath>

#include <gtest/gtest.h>

#include "dooly/plot/scale.hpp"
#include "dooly/plot/ticks.hpp"

namespace dooly::plot {
namespace {

std::vector<double> values(const std::vector<Tick>& ticks) {
  std::vector<double> v;
  for (const Tick& t : ticks) v.push_back(t.value);
  return v;
}
std::vector<std::string> labels(const std::vector<Tick>& ticks) {
  std::vector<std::string> v;
  for (const Tick& t : ticks) v.push_back(t.label);
  return v;
}

// 1, 2 or 5 times a power of ten.
bool is_nice(double step) {
  // The step is measured between two ticks: near 1e5 a difference of 2e-4 carries about 1e-11 of rounding.
  const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-6));
  return std::fabs(m - 1) < 1e-6 || std::fabs(m - 2) < 1e-6 || std::fabs(m - 5) < 1e-6;
}

TEST(NiceStep, IsOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(10, 6), 2);
  EXPECT_DOUBLE_EQ(nice_step(10, 11), 1);
  EXPECT_DOUBLE_EQ(nice_step(1, 6), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(3000, 8), 500);
  EXPECT_DOUBLE_EQ(nice_step(7e-6, 8), 1e-6);
  EXPECT_DOUBLE_EQ(nice_step(0, 8), 1);  // degenerate: any step
}

TEST(LinearTicks, KnownRanges) {
  EXPECT_EQ(values(make_ticks(ScaleKind::linear, 0, 10, 8)), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(labels(make_ticks(ScaleKind::linear, 0, 1, 8)),
            (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  EXPECT_EQ(labels(make_ticks(ScaleKind::linear, -3.7, 12.2, 8)), (std::vector<std::string>{"0", "5", "10"}));
  EXPECT_EQ(labels(make_ticks(ScaleKind::linear, -1, 1, 5)),
            (std::vector<std::string>{"-1.0", "-0.5", "0", "0.5", "1.0"}));
  EXPECT_EQ(labels(make_ticks(ScaleKind::linear, 1e6, 5e6, 5)),
            (std::vector<std::string>{"1e+06", "2e+06", "3e+06", "4e+06", "5e+06"}));
  EXPECT_EQ(labels(make_ticks(ScaleKind::linear, 0, 3e-5, 4)),
            (std::vector<std::string>{"0", "1e-05", "2e-05", "3e-05"}));
  EXPECT_TRUE(make_ticks(ScaleKind::linear, 5, 5, 8).empty());
  EXPECT_TRUE(make_ticks(ScaleKind::linear, 0, NAN, 8).empty());
}

// Over many ranges: every step is nice, every tick lies within the range, there are 2..max of them, and the
// labels are free of binary rounding noise.
TEST(LinearTicks, NiceForManyRanges) {
  for (double lo : {-1234.5, -1.0, -0.003, 0.0, 0.1, 7.0, 1e5}) {
    for (double span : {1e-3, 0.07, 0.3, 1.0, 2.5, 9.9, 47.0, 1e3, 3.3e6}) {
      const double hi = lo + span;
      const auto t = make_ticks(ScaleKind::linear, lo, hi, 8);
      SCOPED_TRACE(::testing::Message() << "[" << lo << ", " << hi << "]");
      ASSERT_GE(t.size(), 2u);
      EXPECT_LE(t.size(), 8u);
      const double step = t[1].value - t[0].value;
      EXPECT_TRUE(is_nice(step)) << step;
      for (const Tick& k : t) {
        EXPECT_GE(k.value, lo - 1e-9 * std::fabs(span));
        EXPECT_LE(k.value, hi + 1e-9 * std::fabs(span));
        EXPECT_EQ(k.label.find("0000000"), std::string::npos) << k.label;
        EXPECT_EQ(k.label.find("9999999"), std::string::npos) << k.label;
      }
    }
  }
}

TEST(TickLabel, DigitsFollowTheStep) {
  EXPECT_EQ(tick_label(0.1 + 0.2, 0.1), "0.3");
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(1500, 500), "1500");
  EXPECT_EQ(tick_label(-0.0, 1), "0");
  EXPECT_EQ(tick_label(1.5e6, 5e5), "1.5e+06");
  EXPECT_EQ(tick_label(2.5e-7, 5e-8), "2.5e-07");
}

TEST(NiceLimits, WidenToTicksOrDecades) {
  const Limits a = nice_limits(ScaleKind::linear, 0, 24.97, 8);
  EXPECT_DOUBLE_EQ(a.lo, 0);
  EXPECT_DOUBLE_EQ(a.hi, 25);
  const Limits b = nice_limits(ScaleKind::linear, 77.9, 365.2, 8);
  EXPECT_DOUBLE_EQ(b.lo, 50);
  EXPECT_DOUBLE_EQ(b.hi, 400);
  const Limits c = nice_limits(ScaleKind::linear, 5, 5, 8);  // one value: widened around it
  EXPECT_LT(c.lo, 5);
  EXPECT_GT(c.hi, 5);
  const Limits d = nice_limits(ScaleKind::log, 3, 470, 8);
  EXPECT_DOUBLE_EQ(d.lo, 1);
  EXPECT_DOUBLE_EQ(d.hi, 1000);
  const Limits e = nice_limits(ScaleKind::log, 10, 10, 8);
  EXPECT_DOUBLE_EQ(e.lo, 10);
  EXPECT_DOUBLE_EQ(e.hi, 100);
  const Limits f = nice_limits(ScaleKind::log, -5, 100, 8);  // a log axis cannot hold -5: it starts below 100
  EXPECT_GT(f.lo, 0);
  EXPECT_DOUBLE_EQ(f.hi, 100);
}

TEST(LogTicks, DecadesThenOneTwoFive) {
  EXPECT_EQ(labels(make_ticks(ScaleKind::log, 1, 1e4, 8)),
            (std::vector<std::string>{"1", "10", "100", "1000", "10000"}));
  EXPECT_EQ(values(make_ticks(ScaleKind::log, 1, 100, 8)), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  // Twelve decades do not fit in eight ticks: every other one.
  EXPECT_EQ(labels(make_ticks(ScaleKind::log, 1, 1e12, 8)),
            (std::vector<std::string>{"1", "100", "10000", "1e+06", "1e+08", "1e+10", "1e+12"}));
  EXPECT_EQ(labels(make_ticks(ScaleKind::log, 1e-3, 1, 8)), (std::vector<std::string>{"0.001", "0.01", "0.1", "1"}));
  // Within one decade there is no power of ten to mark: linear ticks.
  EXPECT_EQ(values(make_ticks(ScaleKind::log, 200, 800, 8)), (std::vector<double>{200, 300, 400, 500, 600, 700, 800}));
}

TEST(Scale, MapsLinearLogAndReversed) {
  const Scale lin(ScaleKind::linear, {0, 10}, 100, 200);
  EXPECT_DOUBLE_EQ(lin.to_px(0), 100);
  EXPECT_DOUBLE_EQ(lin.to_px(2.5), 125);
  EXPECT_DOUBLE_EQ(lin.to_px(10), 200);
  const Scale y(ScaleKind::linear, {0, 10}, 300, 100);  // a y axis: bottom to top
  EXPECT_DOUBLE_EQ(y.to_px(5), 200);
  const Scale log(ScaleKind::log, {1, 1e4}, 0, 400);
  EXPECT_DOUBLE_EQ(log.to_px(100), 200);
  EXPECT_DOUBLE_EQ(log.to_px(10), 100);
  EXPECT_TRUE(std::isinf(log.to_px(0)));
  EXPECT_FALSE(log.drawable(0));
  EXPECT_FALSE(log.drawable(-1));
  EXPECT_TRUE(lin.drawable(-1));
  EXPECT_FALSE(lin.drawable(NAN));
  const Scale categories(ScaleKind::linear, {2.5, -0.5}, 400, 100);  // three categories, the first on top
  EXPECT_DOUBLE_EQ(categories.to_px(0), 150);
  EXPECT_DOUBLE_EQ(categories.to_px(2), 350);
}

}  // namespace
}  // namespace dooly::plot
