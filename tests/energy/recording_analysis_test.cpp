// A run written as a recording and re-analysed must give what the live attributor gave.
#include "dooly/energy/recording_analysis.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "dooly/power/replay/recording.hpp"

namespace dooly::energy {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(RecordingAnalysis, ReanalysisMatchesClosedForm) {
  power::Recording rec;
  power::Channel ch;
  ch.name = "gpu0";
  ch.domain = power::Domain::gpu;
  ch.device = 0;
  ch.sensor.update_ns = 20 * kMs;
  ch.sensor.description = "recorded";
  rec.channels.push_back(ch);
  rec.keys.push_back({0, "for", "axpy"});
  rec.keys.push_back({1, "region", "solve, step"});  // a comma in a name must survive
  rec.meta = {{"backend", "nvml"}, {"run_start_ns", "0"}, {"run_end_ns", "1000000000"}};
  for (int64_t t = 0; t <= 1000 * kMs; t += 20 * kMs)
    rec.samples.push_back({0, t, 100.0 + 100.0 * static_cast<double>(t) / 1e9});  // 100 -> 200 W ramp
  rec.events = {{100 * kMs, 1, 0, -1, true, flags::nested},
                {200 * kMs, 0, 0, 0, true, flags::nested},
                {300 * kMs, 0, 0, 0, false, flags::nested},
                {900 * kMs, 1, 0, -1, false, flags::nested}};
  rec.counters = {{0, 0, 5000.0}, {0, 1000 * kMs, 5150.0}};

  const auto path = (std::filesystem::temp_directory_path() / "dooly-recording-test.csv").string();
  power::write_recording(path, rec);
  const power::Recording back = power::read_recording(path);
  std::filesystem::remove(path);

  Report rep = analyze_recording(back, {});
  ASSERT_EQ(rep.channels.size(), 1u);
  EXPECT_EQ(rep.backend, "nvml");
  const auto& c = rep.channels[0];
  auto energy = [](double a, double b) { return 100 * (b - a) + 50 * (b * b - a * a); };
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].name, "solve, step");
  EXPECT_NEAR(c.rows[0].energy_j, energy(0.1, 0.9), 1e-9);
  EXPECT_NEAR(c.rows[1].energy_j, energy(0.2, 0.3), 1e-9);
  EXPECT_NEAR(c.rows[0].excl_energy_j, energy(0.1, 0.9) - energy(0.2, 0.3), 1e-9);
  EXPECT_NEAR(c.conservation.run_energy_j, 150.0, 1e-9);
  EXPECT_NEAR(*c.conservation.ratio(), 1.0, 1e-12);
}

}  // namespace
}  // namespace dooly::energy
