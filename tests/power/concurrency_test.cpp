// The energy engine polls from its sampler thread while the main thread reads the vendor energy counter
// (at start and end): both may run at once. Runs under ThreadSanitizer (label `threads`).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "dooly/power/nvml/nvml_provider.hpp"
#include "dooly/power/rapl/rapl_provider.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

// Polls on one thread while another reads the energy counter; returns the number of readings polled.
size_t poll_while_reading_counter(Session& s, int rounds) {
  std::atomic<bool> done{false};
  size_t readings = 0;
  std::thread sampler([&] {
    std::vector<Reading> r;
    for (int i = 0; i < rounds; ++i) {
      r.clear();
      EXPECT_TRUE(s.poll(r).ok);
      readings += r.size();
    }
    done = true;
  });
  int reads = 0;
  while (!done || reads < 10) {
    EXPECT_TRUE(s.energy_counter_j(0).has_value());
    ++reads;
  }
  sampler.join();
  return readings;
}

TEST(PowerConcurrency, RaplPollAndEnergyCounterShareTheAccumulatorSafely) {
  testing::TempDir dir;
  std::filesystem::copy(std::string(DOOLY_SOURCE_DIR) + "/tests/power/fixtures/powercap_root", dir.path(),
                        std::filesystem::copy_options::recursive);
  Options o;
  o.root = dir.path();
  auto s = make_rapl_provider()->open(o);
  poll_while_reading_counter(*s, 200);
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(0), 0.0);  // the fixture did not move
}

TEST(PowerConcurrency, NvmlPollAndEnergyCounter) {
  testing::TempDir dir;
  testing::write_file(dir.file("script"), "device 0000:1B:00.0 NVIDIA H200\nhistory_ms 100\nsample_period_ms 1\n");
  testing::ScopedEnv script("DOOLY_STUB_NVML_SCRIPT", dir.file("script").c_str());
  testing::ScopedEnv cuda("DOOLY_LIBCUDA", DOOLY_STUB_CUDA_PATH);
  testing::ScopedEnv cvd("CUDA_VISIBLE_DEVICES", nullptr);
  Options o;
  o.library = DOOLY_STUB_NVML_PATH;
  auto s = make_nvml_provider()->open(o);
  EXPECT_GE(poll_while_reading_counter(*s, 50), 100u);  // the ring buffer (100 samples), then more
}

}  // namespace
}  // namespace dooly::power
