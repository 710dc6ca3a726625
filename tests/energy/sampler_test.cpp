#include "dooly/energy/sampler.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dooly/common/clock.hpp"

namespace dooly::energy {
namespace {

TEST(Sampler, TicksOnAbsoluteDeadlinesWithoutDrift) {
  std::vector<int64_t> stamps;
  std::mutex mu;
  Sampler s(5'000'000, [&](int64_t now) {
    std::lock_guard<std::mutex> lock(mu);
    stamps.push_back(now);
    // A tick that costs 2 ms must not push later deadlines back.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  s.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(205));
  s.stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(stamps.size(), 30u);
  // With drift (sleep period after each tick) 200 ms would give ~28 ticks at 7 ms each; on the grid, ~41.
  // The k-th tick lies within a scheduling slack of origin + k * 5 ms.
  const int64_t origin = stamps.front();
  const size_t k = stamps.size() - 2;  // the last one is stop()'s extra tick
  EXPECT_NEAR(static_cast<double>(stamps[k] - origin), static_cast<double>(k) * 5e6, 4e6);
}

TEST(Sampler, OverrunsSkipToTheNextDeadlineAndAreCounted) {
  std::atomic<int> n{0};
  Sampler s(2'000'000, [&](int64_t) {
    if (n++ == 1) std::this_thread::sleep_for(std::chrono::milliseconds(11));
  });
  s.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  s.stop();
  EXPECT_GE(s.missed_deadlines(), 4u);
  EXPECT_GT(s.thread_cpu_s(), 0.0);
}

TEST(Sampler, StopWakesAtOnceAndRunsALastTick) {
  std::atomic<int> n{0};
  Sampler s(10'000'000'000, [&](int64_t) { ++n; });  // 10 s period
  s.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int64_t t0 = now_ns();
  s.stop();
  EXPECT_LT(now_ns() - t0, 1'000'000'000);
  EXPECT_EQ(n.load(), 2);  // the first tick and the last
}

}  // namespace
}  // namespace dooly::energy
