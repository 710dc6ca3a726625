#include "dooly/energy/timeline.hpp"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dooly::energy {
namespace {

const std::string kGolden = std::string(DOOLY_SOURCE_DIR) + "/tests/energy/golden/";

std::vector<power::Channel> one_gpu() {
  power::Channel ch;
  ch.name = "gpu0";
  ch.domain = power::Domain::gpu;
  ch.device = 0;
  ch.sensor.update_ns = 1'000'000;
  return {ch};
}

// Two streams of GPU 0 with overlapping kernels, a host range around them, and a constant 100 W then 300 W.
std::string sample_trace(KeyTable& keys) {
  Timeline t(one_gpu());
  const KeyId a = keys.intern("gemm", Kind::kernel);
  const KeyId b = keys.intern("stream \"copy\"", Kind::kernel);
  const KeyId r = keys.intern("forward", Kind::region);
  t.name_track(100, "stream 7", 0);
  t.name_track(101, "stream 13", 0);
  t.name_track(0, "host thread 0", -1);
  t.begin_run(1'000'000'000);
  t.add_reading({0, 1'000'000'000, 100.0});
  t.add_event({1'001'000'000, r, 0, -1, true, 0});
  t.add_event({1'002'000'000, a, 100, 0, true, flags::nested});
  t.add_event({1'003'000'000, b, 101, 0, true, flags::nested});
  t.add_reading({0, 1'004'000'000, 300.0});
  t.add_event({1'004'000'000, a, 100, 0, false, flags::nested});
  t.add_event({1'006'000'000, b, 101, 0, false, flags::nested});
  t.add_event({1'006'500'000, r, 0, -1, false, 0});
  t.add_reading({0, 1'010'000'000, 300.0});
  return t.to_json_text(keys);
}

// The golden holds {{T}} where a time may differ (none do here, but a writer change that moves times should
// not need every energy re-read); everything else must match byte for byte.
void expect_matches_golden(const std::string& actual, const std::string& file) {
  if (std::getenv("DOOLY_UPDATE_GOLDEN")) {  // times become placeholders; the rest is the output as it is
    std::ofstream(kGolden + file) << std::regex_replace(actual, std::regex(R"j("(ts|dur)":-?[0-9]+\.[0-9]{3})j"),
                                                        "\"$1\":{{T}}");
    GTEST_SKIP() << "wrote " << kGolden + file;
  }
  std::ifstream in(kGolden + file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string pattern;
  const std::string expected = ss.str();
  ASSERT_FALSE(expected.empty()) << "missing golden " << file;
  const std::string special = R"(\^$.|?*+()[]{})";
  for (size_t i = 0; i < expected.size();) {
    if (expected.compare(i, 5, "{{T}}") == 0) {
      pattern += "-?[0-9]+\\.[0-9]{3}";
      i += 5;
      continue;
    }
    if (special.find(expected[i]) != std::string::npos) pattern += '\\';
    pattern += expected[i++];
  }
  EXPECT_TRUE(std::regex_match(actual, std::regex(pattern))) << "trace differs from golden " << file << ":\n" << actual;
}

TEST(Timeline, Golden) {
  KeyTable keys;
  expect_matches_golden(sample_trace(keys), "trace.json");
}

TEST(Timeline, IsValidJsonWithEnergiesPerWindow) {
  KeyTable keys;
  const auto j = nlohmann::json::parse(sample_trace(keys));
  double gemm_j = -1, copy_j = -1, forward_j = -1;
  int counters = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "C") ++counters;
    if (e.at("ph") != "X") continue;
    const double energy = e.at("args").at("energy_j_gpu0").get<double>();
    if (e.at("name") == "gemm") gemm_j = energy;
    if (e.at("name") == "stream \"copy\"") copy_j = energy;
    if (e.at("name") == "forward") forward_j = energy;
  }
  EXPECT_EQ(counters, 3);
  // Power 100 W at 1.000 s rising linearly to 300 W at 1.004 s, then 300 W: the trapezoid over each window.
  EXPECT_NEAR(gemm_j, (200 + 300) / 2.0 * 2e-3, 1e-9);               // 1.002..1.004: 200 -> 300 W
  EXPECT_NEAR(copy_j, (250 + 300) / 2.0 * 1e-3 + 300 * 2e-3, 1e-9);  // 1.003..1.006
  EXPECT_NEAR(forward_j, (150 + 300) / 2.0 * 3e-3 + 300 * 2.5e-3, 1e-9);
  EXPECT_EQ(j.at("otherData").at("dooly_trace_version"), kTraceVersion);
  EXPECT_FALSE(j.at("otherData").contains("aggregated"));
}

TEST(Timeline, KeepsTheFirstWindowsWholeAndAggregatesTheRestPerName) {
  KeyTable keys;
  const KeyId a = keys.intern("a", Kind::kernel);
  const KeyId b = keys.intern("b", Kind::kernel);
  Timeline t(one_gpu(), TimelineOptions{10, 4});
  t.begin_run(0);
  for (int i = 0; i < 1000; ++i) {
    const KeyId k = i % 4 == 0 ? b : a;
    t.add_event({i * 10, k, 1, 0, true, flags::nested});
    t.add_event({i * 10 + 5, k, 1, 0, false, flags::nested});
  }
  for (int i = 0; i < 10; ++i) t.add_reading({0, i * 1000, 100.0});
  EXPECT_EQ(t.windows_kept(), 10u);
  EXPECT_EQ(t.windows_seen(), 1000u);
  EXPECT_EQ(t.windows_aggregated(), 990u);
  EXPECT_EQ(t.readings_dropped(), 6u);
  const auto j = nlohmann::json::parse(t.to_json_text(keys));
  int slices = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X") ++slices;
  EXPECT_EQ(slices, 10);
  const auto& od = j.at("otherData");
  EXPECT_EQ(od.at("windows_seen"), 1000);
  EXPECT_EQ(od.at("windows_kept"), 10);
  EXPECT_EQ(od.at("readings_dropped"), 6);
  ASSERT_TRUE(od.contains("truncated"));
  ASSERT_EQ(od.at("aggregated").size(), 2u);
  // Of the first 10 windows, 3 were b's (0, 4, 8): 247 of its 250 calls and 743 of a's 750 are aggregated.
  EXPECT_EQ(od.at("aggregated")[0].at("name"), "a");
  EXPECT_EQ(od.at("aggregated")[0].at("calls"), 743);
  EXPECT_EQ(od.at("aggregated")[1].at("calls"), 247);
  EXPECT_DOUBLE_EQ(od.at("aggregated")[1].at("time_s").get<double>(), 247 * 5e-9);
}

TEST(Timeline, AnEndClosesWhatWasLeftOpenInsideIt) {
  KeyTable keys;
  const KeyId outer = keys.intern("outer", Kind::region);
  const KeyId inner = keys.intern("inner", Kind::region);
  Timeline t(one_gpu());
  t.begin_run(0);
  t.add_event({0, outer, 0, -1, true, flags::nested});
  t.add_event({10, inner, 0, -1, true, flags::nested});
  t.add_event({20, outer, 0, -1, false, flags::nested});
  EXPECT_EQ(t.windows_seen(), 2u);
}

}  // namespace
}  // namespace dooly::energy
