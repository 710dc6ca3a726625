// The empirical CDF and the min/max thinning of long series.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "dooly/plot/cdf.hpp"
#include "dooly/plot/decimate.hpp"

namespace dooly::plot {
namespace {

TEST(EmpiricalCdf, StepsAtDistinctValues) {
  const Line l = empirical_cdf("latency", {3, 1, 2, 2, NAN});
  EXPECT_TRUE(l.step);
  EXPECT_EQ(l.label, "latency");
  EXPECT_EQ(l.x, (std::vector<double>{1, 1, 2, 3}));
  EXPECT_EQ(l.y, (std::vector<double>{0, 0.25, 0.75, 1.0}));
}

TEST(EmpiricalCdf, OneSampleAndNone) {
  const Line one = empirical_cdf("x", {4.5});
  EXPECT_EQ(one.x, (std::vector<double>{4.5, 4.5}));
  EXPECT_EQ(one.y, (std::vector<double>{0, 1}));
  EXPECT_TRUE(empirical_cdf("x", {}).x.empty());
  EXPECT_TRUE(empirical_cdf("x", {NAN, NAN}).x.empty());
}

TEST(EmpiricalCdf, MatchesTheFractionBelowOnRandomSamples) {
  std::vector<double> s;
  uint64_t state = 12345;
  for (int i = 0; i < 1000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    s.push_back(static_cast<double>(state >> 54));  // 0..1023: many ties
  }
  const Line l = empirical_cdf("", s);
  for (size_t i = 1; i < l.x.size(); ++i) {
    const double below = static_cast<double>(std::count_if(s.begin(), s.end(), [&](double v) { return v <= l.x[i]; }));
    EXPECT_DOUBLE_EQ(l.y[i], below / 1000.0);
    if (i > 1) {
      EXPECT_GT(l.x[i], l.x[i - 1]);
    }
  }
  EXPECT_DOUBLE_EQ(l.y.back(), 1.0);
}

TEST(MinMaxDecimate, KeepsPeaksAndBounds) {
  std::vector<double> x, y;
  for (int i = 0; i < 100000; ++i) {
    x.push_back(i * 0.001);
    y.push_back(i == 54321 ? 500.0 : (i == 77777 ? -20.0 : 100.0 + (i % 7)));
  }
  const Decimated d = min_max_decimate(x, y, 1000);
  EXPECT_TRUE(d.thinned);
  EXPECT_LE(d.x.size(), 2000u);
  EXPECT_GE(d.x.size(), 1000u);
  EXPECT_EQ(d.x.size(), d.y.size());
  EXPECT_DOUBLE_EQ(*std::max_element(d.y.begin(), d.y.end()), 500.0);
  EXPECT_DOUBLE_EQ(*std::min_element(d.y.begin(), d.y.end()), -20.0);
  EXPECT_TRUE(std::is_sorted(d.x.begin(), d.x.end()));
  // The peak keeps its place in time.
  const auto peak = std::max_element(d.y.begin(), d.y.end()) - d.y.begin();
  EXPECT_DOUBLE_EQ(d.x[static_cast<size_t>(peak)], 54.321);
}

TEST(MinMaxDecimate, ShortSeriesComeBackUnchanged) {
  const Decimated d = min_max_decimate({0, 1, 2}, {5, 6, 7}, 10);
  EXPECT_FALSE(d.thinned);
  EXPECT_EQ(d.y, (std::vector<double>{5, 6, 7}));
  EXPECT_THROW(min_max_decimate({0, 1}, {5}, 10), std::invalid_argument);
}

}  // namespace
}  // namespace dooly::plot
