// A run written as a recording and re-analysed must give what the live attributor gave.
#include "dooly/energy/recording_analysis.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/energy/recording.hpp"

namespace dooly::energy {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(RecordingAnalysis, ReanalysisMatchesClosedForm) {
  Recording rec;
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
  write_recording(path, rec);
  const Recording back = read_recording(path);
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

TEST(KeyTable, InsertAboveTheLargestIdThrowsInsteadOfWrapping) {
  // resize(id + 1) wrapped to resize(0) for id 2^32-1 and then wrote past the end (SIGSEGV in `dooly analyze`).
  KeyTable keys;
  try {
    keys.insert(4294967295u, "k", Kind::kernel_for);
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.problem()), "key id 4294967295 is above the largest id a key table takes (16777215)");
  }
  EXPECT_THROW(keys.insert(KeyTable::kMaxInsertedId + 1, "k", Kind::kernel_for), InputError);
  EXPECT_EQ(keys.size(), 0u);
  keys.insert(3, "k", Kind::kernel_for);
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys.info(3).name, "k");
}

Recording one_kernel(uint32_t key_id) {
  Recording rec;
  power::Channel ch;
  ch.name = "gpu0";
  ch.domain = power::Domain::gpu;
  ch.device = 0;
  rec.channels.push_back(ch);
  rec.keys = {{key_id, "for", "sparse"}, {5, "region", "low"}};
  for (int64_t t = 0; t <= 100 * kMs; t += 10 * kMs) rec.samples.push_back({0, t, 100.0});
  rec.events = {{10 * kMs, 5, 0, -1, true, flags::nested}, {20 * kMs, key_id, 0, 0, true, flags::nested},
                {30 * kMs, key_id, 0, 0, false, flags::nested}, {90 * kMs, 5, 0, -1, false, flags::nested}};
  return rec;
}

TEST(RecordingAnalysis, SparseKeyIdsCostNoMoreThanDenseOnes) {
  // Key ids index the attributor's tables: the recording's largest id (2^24 - 1) would size them at 16.7 M
  // keys. Analysis numbers the declared keys densely; the figures are those of ids 0 and 1.
  AnalysisOptions o;
  o.attribution.model = false;
  const Report sparse = analyze_recording(one_kernel(recording_limits::max_key_id), o);
  const Report dense = analyze_recording(one_kernel(7), o);
  ASSERT_EQ(sparse.channels.at(0).rows.size(), 2u);
  ASSERT_EQ(dense.channels.at(0).rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(sparse.channels[0].rows[i].name, dense.channels[0].rows[i].name);
    EXPECT_DOUBLE_EQ(sparse.channels[0].rows[i].energy_j, dense.channels[0].rows[i].energy_j);
  }
  EXPECT_EQ(sparse.channels[0].rows[0].name, "low");
  EXPECT_NEAR(sparse.channels[0].rows[0].energy_j, 8.0, 1e-9);  // 100 W for 80 ms
  EXPECT_NEAR(sparse.channels[0].rows[1].energy_j, 1.0, 1e-9);
}

TEST(RecordingAnalysis, RunBoundsObeyTheFormatsTimeLimits) {
  Recording rec = one_kernel(1);
  rec.meta = {{"run_start_ns", "-9223372036854775808"}};
  EXPECT_THROW(analyze_recording(rec, {}), InputError);
  rec.meta = {{"run_end_ns", "9000000000000000000"}};
  EXPECT_THROW(analyze_recording(rec, {}), InputError);
  rec.meta = {{"run_start_ns", "100"}, {"run_end_ns", "50"}};
  try {
    analyze_recording(rec, {});
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.problem()), "recording meta run_end_ns 50 is before run_start_ns 100");
  }
  rec.meta = {{"run_start_ns", "0"}, {"run_end_ns", "100000000"}};
  EXPECT_EQ(analyze_recording(rec, {}).channels.at(0).rows.size(), 2u);
}

}  // namespace
}  // namespace dooly::energy
