#include "dooly/energy/sampler.hpp"

#include <sys/mman.h>
#include <unistd.h>

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
  const int64_t t0 = now_ns();
  s.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  s.stop();
  const double elapsed_periods = static_cast<double>(now_ns() - t0) / 5e6;
  std::lock_guard<std::mutex> lock(mu);
  // On the grid, ticks plus skipped deadlines count whole periods (~40 here). A sampler that slept one
  // period after each tick would reach only elapsed / (5 ms + 2 ms) ~ 28, however loaded the machine.
  const double grid_slots = static_cast<double>(s.ticks() - 1 + s.missed_deadlines());
  EXPECT_GE(grid_slots, 0.9 * elapsed_periods - 2) << s.ticks() << " ticks, " << s.missed_deadlines() << " missed";
  EXPECT_LE(grid_slots, elapsed_periods + 1);
  // And no tick ever fires before its deadline.
  for (size_t k = 1; k + 1 < stamps.size(); ++k) EXPECT_GE(stamps[k] - stamps[0], static_cast<int64_t>(k) * 5'000'000 - 1'000'000);
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

TEST(Sampler, CountsThePageFaultsOfItsOwnThreadOnly) {
  // Each tick maps 64 fresh pages and touches them: at least 64 faults a tick. The test thread faults 4096
  // pages of its own meanwhile, which must not be counted.
  const long page = sysconf(_SC_PAGESIZE);
  auto touch_fresh = [page](int pages) {
    void* m = mmap(nullptr, static_cast<size_t>(pages * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    for (int i = 0; i < pages; ++i) static_cast<volatile char*>(m)[i * page] = 1;
    munmap(m, static_cast<size_t>(pages * page));
  };
  Sampler s(1'000'000'000, [&](int64_t) { touch_fresh(64); });
  s.start();
  touch_fresh(4096);
  s.stop();
  EXPECT_EQ(s.ticks(), 2u);
  EXPECT_GE(s.page_faults(), 2u * 64u);
  EXPECT_LT(s.page_faults(), 2048u);  // the thread's own (start-up and 128), not the test thread's 4096
}

}  // namespace
}  // namespace dooly::energy
