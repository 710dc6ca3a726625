// The Connector driven hook by hook over the real Profiler, sampler thread and attributor, with a fake power
// session of constant power per channel: every energy is P(channel) x time, exactly.
#include "dooly/kokkos/connector.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/common/clock.hpp"
#include "dooly/common/log.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/common/settings.hpp"
#include "dooly/power/registry.hpp"
#include "support/fake_session.hpp"

namespace dooly::kokkos {
namespace {

namespace fs = std::filesystem;
using energy::Kind;

constexpr double kGpu0W = 150.0;
constexpr double kGpu1W = 400.0;

// devID as Kokkos builds it: top 8 bits device type, next 7 device id, low 17 instance.
uint32_t dev_id(DeviceType type, uint32_t device, uint32_t instance = 0) {
  return (static_cast<uint32_t>(type) << 24) | (device << 17) | instance;
}

// Every DOOLY_* variable the connector reads: cleared before each test and restored after, so tests (and
// parse_args, which writes them) do not leak settings into each other.
const char* const kVars[] = {"DOOLY_POWER_SOURCE", "DOOLY_REPLAY_FILE", "DOOLY_REPLAY_REALTIME", "DOOLY_PERIOD_MS",
                             "DOOLY_BASELINE_MS",  "DOOLY_BASELINE_W",  "DOOLY_SENSOR_WINDOW_MS",
                             "DOOLY_SENSOR_DELAY_MS", "DOOLY_MODEL",     "DOOLY_MODE",
                             "DOOLY_RECORD",       "DOOLY_MAX_EVENTS",  "DOOLY_GPUS",
                             "DOOLY_OUTPUT",       "DOOLY_TABLE",       "DOOLY_FENCES",
                             "DOOLY_TABLE_FILE",   "DOOLY_NVML_MODE",  "DOOLY_FIT",
                             "DOOLY_LOG",          "DOOLY_TRACE"};

int count_dooly_lines(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("dooly:", 0) == 0) ++n;
  return n;
}

std::vector<std::string> dooly_lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("dooly:", 0) == 0) lines.push_back(line);
  return lines;
}

void call_parse_args(Connector& c, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  c.parse_args(static_cast<int>(words.size()), argv.data());
}

// The tool's start-up as Kokkos 4.6 calls it (core/src/impl/Kokkos_Profiling.cpp, initialize_tools_subsystem,
// then Kokkos_Core.cpp, initialize_profiling): init_library, request_tool_settings, parse_args, and parse_args
// once more with the same words. Without --kokkos-tools-args or KOKKOS_TOOLS_ARGS the words are the program's
// name alone; with --kokkos-tools-args="a=1 b=2" they are the program's name, a=1, b=2; with KOKKOS_TOOLS_ARGS
// they are that variable's words only. (Kokkos 3.4 calls parse_args once, after init.)
void kokkos_init(Connector& c, const std::vector<std::string>& words = {"./kokkos_app"}) {
  c.init(0, 20211015);
  Kokkos_Tools_ToolSettings settings{};
  c.request_tool_settings(1, &settings);
  call_parse_args(c, words);
  call_parse_args(c, words);
}

class ConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
    setenv("DOOLY_PERIOD_MS", "2", 1);
    setenv("DOOLY_OUTPUT", "none", 1);
    setenv("DOOLY_TABLE", "0", 1);
    dir_ = fs::path(DOOLY_BINARY_DIR) / "tests" / "kokkos" /
           ("connector_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    fs::remove_all(dir_);
  }

  // A factory that builds the real Profiler over two constant-power GPUs and counts its calls.
  Connector::ProfilerFactory factory() {
    return [this](const energy::ProfilerOptions& o) {
      ++factory_calls_;
      last_options_ = o;
      return std::make_unique<energy::Profiler>(
          o, std::make_unique<dooly::testing::FakeSession>(std::vector<double>{kGpu0W, kGpu1W}), "fake");
    };
  }

  static void window_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  std::map<std::string, std::string> saved_;
  fs::path dir_;
  int factory_calls_ = 0;
  std::optional<energy::ProfilerOptions> last_options_;
};

const energy::ChannelReport& channel(const energy::Report& r, const std::string& name) {
  for (const auto& c : r.channels)
    if (c.channel.name == name) return c;
  throw std::runtime_error("no channel " + name);
}

const energy::RegionRow* find_row(const energy::ChannelReport& c, const std::string& name) {
  for (const auto& r : c.rows)
    if (r.name == name) return &r;
  return nullptr;
}

const energy::RegionRow& row(const energy::ChannelReport& c, const std::string& name) {
  const energy::RegionRow* r = find_row(c, name);
  if (!r) throw std::runtime_error("no row " + name + " on " + c.channel.name);
  return *r;
}

std::optional<std::string> meta(const energy::Report& r, const std::string& key) {
  for (const auto& [k, v] : r.meta)
    if (k == key) return v;
  return std::nullopt;
}

// A row that was charged nothing on a channel: absent, or present with no calls and no energy.
void expect_not_charged(const energy::ChannelReport& c, const std::string& name) {
  const energy::RegionRow* r = find_row(c, name);
  if (!r) return;
  EXPECT_EQ(r->calls, 0u) << name << " on " << c.channel.name;
  EXPECT_EQ(r->energy_j, 0.0) << name << " on " << c.channel.name;
}

void expect_p_times_t(const energy::RegionRow& r, double watts) {
  EXPECT_GT(r.time_s, 0.0) << r.name;
  EXPECT_NEAR(r.energy_j, watts * r.time_s, 1e-9 * watts * r.time_s + 1e-12) << r.name;
}

TEST_F(ConnectorTest, KernelsOfEveryKindAreRoutedByDeviceAndChargedPowerTimesTime) {
  Connector c(factory());
  kokkos_init(c);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(factory_calls_, 1);
  ASSERT_TRUE(last_options_.has_value());
  EXPECT_EQ(last_options_->period_ns, 2'000'000);

  uint64_t kid = 99;
  for (int i = 0; i < 3; ++i) {  // CUDA device 1, instance 5: charged on gpu1 only
    c.begin_kernel(Kind::kernel_for, "axpy", dev_id(DeviceType::cuda, 1, 5), &kid);
    EXPECT_NE(kid, 0u);
    window_ms(3);
    c.end_kernel(kid);
  }
  c.begin_kernel(Kind::kernel_reduce, "dot", dev_id(DeviceType::cuda, 0), &kid);  // gpu0 only
  window_ms(4);
  c.end_kernel(kid);
  for (int i = 0; i < 2; ++i) {  // Serial: host work, charged on every channel
    c.begin_kernel(Kind::kernel_scan, "prefix", dev_id(DeviceType::serial, 0), &kid);
    window_ms(2);
    c.end_kernel(kid);
  }
  c.end_kernel(0);  // the id a disabled hook hands out: ignored
  c.finalize();
  EXPECT_FALSE(c.active());

  const energy::Report& rep = c.last_report();
  ASSERT_EQ(rep.channels.size(), 2u);
  EXPECT_EQ(rep.backend, "fake");
  EXPECT_EQ(rep.unmatched_events, 0u);
  const auto& g0 = channel(rep, "gpu0");
  const auto& g1 = channel(rep, "gpu1");

  EXPECT_EQ(row(g1, "axpy").calls, 3u);
  EXPECT_EQ(row(g1, "axpy").kind, Kind::kernel_for);
  EXPECT_GE(row(g1, "axpy").time_s, 0.009);
  expect_p_times_t(row(g1, "axpy"), kGpu1W);
  expect_not_charged(g0, "axpy");

  EXPECT_EQ(row(g0, "dot").calls, 1u);
  EXPECT_EQ(row(g0, "dot").kind, Kind::kernel_reduce);
  EXPECT_GE(row(g0, "dot").time_s, 0.004);
  expect_p_times_t(row(g0, "dot"), kGpu0W);
  expect_not_charged(g1, "dot");

  for (const auto* ch : {&g0, &g1}) {
    const auto& r = row(*ch, "prefix");
    EXPECT_EQ(r.calls, 2u);
    EXPECT_EQ(r.kind, Kind::kernel_scan);
    EXPECT_GE(r.time_s, 0.004);
    expect_p_times_t(r, ch == &g0 ? kGpu0W : kGpu1W);
  }
  // The same windows on both channels: equal times, energies in the ratio of the powers.
  EXPECT_DOUBLE_EQ(row(g0, "prefix").time_s, row(g1, "prefix").time_s);
}

// DOOLY_TRACE hangs off the profiler: the connector's runs get the Perfetto trace too, each kernel on its thread's
// track with its energy on the channel it was charged to.
TEST_F(ConnectorTest, TheTraceHasEveryKernelAndRegionWithItsEnergy) {
  const std::string path = (dir_ / "run.trace.json").string();
  setenv("DOOLY_TRACE", path.c_str(), 1);
  Connector c(factory());
  kokkos_init(c);
  ASSERT_TRUE(c.active());
  uint64_t kid = 0;
  c.push_region("outer");
  c.begin_kernel(Kind::kernel_for, "axpy", dev_id(DeviceType::cuda, 1), &kid);
  window_ms(3);
  c.end_kernel(kid);
  c.pop_region();
  c.finalize();
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const auto j = nlohmann::json::parse(in);
  int slices = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++slices;
    const double dur_s = e.at("dur").get<double>() * 1e-6;
    if (e.at("name") == "axpy") {
      EXPECT_EQ(e.at("pid"), 2);  // GPU 1
      EXPECT_NEAR(e.at("args").at("energy_j_gpu1").get<double>(), kGpu1W * dur_s, 1e-6 * kGpu1W);
      EXPECT_FALSE(e.at("args").contains("energy_j_gpu0"));
    } else {
      EXPECT_EQ(e.at("name"), "outer");
      EXPECT_TRUE(e.at("args").contains("energy_j_gpu0"));  // a host region: every channel
    }
  }
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(meta(c.last_report(), "trace"), path);
}

TEST_F(ConnectorTest, ALabelBufferReusedForOtherLabelsGetsEachItsOwnRow) {
  // Kokkos hands over a label as a std::string's c_str(): one stack buffer can hold a different label at every
  // launch. The per-thread label cache is keyed by the pointer; it must still tell the texts apart: one longer,
  // one shorter, one differing in the last byte, one long enough for the library compare, and back.
  Connector c(factory());
  kokkos_init(c);
  ASSERT_TRUE(c.active());
  const std::vector<std::string> labels = {"alpha", "alphb", "alph", "alphabet", "alpha",
                                           "a_label_well_over_thirty_two_characters_long", "a_label_well_over_thirty_two_characters_lonG",
                                           "alpha"};
  char buffer[64];
  uint64_t kid = 0;
  for (const std::string& label : labels) {
    std::snprintf(buffer, sizeof buffer, "%s", label.c_str());
    c.begin_kernel(Kind::kernel_for, buffer, dev_id(DeviceType::cuda, 0), &kid);
    c.end_kernel(kid);
  }
  c.finalize();
  const auto& g0 = channel(c.last_report(), "gpu0");
  EXPECT_EQ(row(g0, "alpha").calls, 3u);
  for (const char* once : {"alphb", "alph", "alphabet", "a_label_well_over_thirty_two_characters_long",
                           "a_label_well_over_thirty_two_characters_lonG"})
    EXPECT_EQ(row(g0, once).calls, 1u) << once;
}

TEST_F(ConnectorTest, TheFirstKernelOnAHostBackEndGetsAHandleAndClosesItsWindow) {
  // Regression: key 0 on a host device once encoded to handle 0 ("no window"), so its end was dropped.
  Connector c(factory());
  kokkos_init(c);
  uint64_t kid = 0;
  c.begin_kernel(Kind::kernel_for, "Kokkos::View::initialization [x]", dev_id(DeviceType::serial, 0), &kid);
  EXPECT_NE(kid, 0u);
  window_ms(2);
  c.end_kernel(kid);
  c.finalize();
  EXPECT_EQ(c.last_report().unmatched_events, 0u);
  const auto& r = row(channel(c.last_report(), "gpu0"), "Kokkos::View::initialization [x]");
  EXPECT_EQ(r.calls, 1u);
  EXPECT_GE(r.time_s, 0.002);
  expect_p_times_t(r, kGpu0W);
}

TEST_F(ConnectorTest, RegionsNestAndAPopWithoutAPushIsIgnored) {
  Connector c(factory());
  kokkos_init(c);
  c.pop_region();  // nothing open: ignored
  c.push_region("outer");
  window_ms(2);
  c.push_region("inner");
  window_ms(3);
  c.pop_region();
  window_ms(2);
  c.pop_region();
  c.pop_region();  // one too many: ignored
  c.push_region(nullptr);  // no name: ignored
  c.finalize();

  const energy::Report& rep = c.last_report();
  EXPECT_EQ(rep.unmatched_events, 0u);
  for (const auto& ch : rep.channels) {
    const double w = ch.channel.name == "gpu0" ? kGpu0W : kGpu1W;
    const auto& outer = row(ch, "outer");
    const auto& inner = row(ch, "inner");
    EXPECT_EQ(outer.calls, 1u);
    EXPECT_EQ(inner.calls, 1u);
    EXPECT_EQ(outer.kind, Kind::region);
    expect_p_times_t(outer, w);
    expect_p_times_t(inner, w);
    EXPECT_GT(outer.time_s, inner.time_s);  // inclusive
    EXPECT_NEAR(outer.excl_time_s, outer.time_s - inner.time_s, 1e-12);
    EXPECT_GE(inner.time_s, 0.003);
  }
}

TEST_F(ConnectorTest, SectionsMayOverlapAndBadIdsAreIgnored) {
  Connector c(factory());
  kokkos_init(c);
  uint32_t a = 7, b = 7, none = 7;
  c.create_section("sec_a", &a);
  c.create_section("sec_b", &b);
  c.create_section(nullptr, &none);
  EXPECT_NE(a, b);
  EXPECT_EQ(none, UINT32_MAX);
  c.create_section("ignored", nullptr);  // no out-pointer: nothing to do, no crash

  c.start_section(a);
  window_ms(2);
  c.start_section(b);
  window_ms(3);
  c.stop_section(a);  // stops before b: sections are free windows, not a stack
  window_ms(2);
  c.stop_section(b);
  c.start_section(12345);  // unknown ids
  c.stop_section(12345);
  c.destroy_section(b);
  c.start_section(b);  // destroyed: ignored
  window_ms(1);
  c.stop_section(b);
  c.finalize();

  const energy::Report& rep = c.last_report();
  EXPECT_EQ(rep.unmatched_events, 0u);
  const auto& g0 = channel(rep, "gpu0");
  EXPECT_EQ(row(g0, "sec_a").calls, 1u);
  EXPECT_EQ(row(g0, "sec_b").calls, 1u);
  EXPECT_EQ(row(g0, "sec_a").kind, Kind::section);
  EXPECT_GE(row(g0, "sec_a").time_s, 0.005);
  EXPECT_GE(row(g0, "sec_b").time_s, 0.005);
  expect_p_times_t(row(g0, "sec_a"), kGpu0W);
  expect_p_times_t(row(channel(rep, "gpu1"), "sec_b"), kGpu1W);
  EXPECT_EQ(find_row(g0, "ignored"), nullptr);
}

TEST_F(ConnectorTest, FenceHooksAreRemovedUnlessFencesGetRows) {
  // Kokkos 4 fences ~6 times per kernel. Unless fences are to get rows, the connector asks the runtime at init,
  // once, to stop calling its fence hooks; where the runtime cannot, the hooks do nothing (no row, no handle).
  // The meta says which.
  int removals = 0;
  auto remover = [&removals] {
    ++removals;
    return true;
  };
  auto cannot_remove = [] { return false; };
  {
    Connector c(factory(), remover);
    kokkos_init(c);
    EXPECT_EQ(removals, 1);
    c.finalize();
    EXPECT_EQ(meta(c.last_report(), "kokkos.fence_hooks"), "removed at init");
  }
  {
    Connector c(factory(), cannot_remove);
    kokkos_init(c);
    for (int i = 0; i < 3; ++i) {
      uint64_t h = 99;
      c.begin_fence("Kokkos::fence: Unnamed Instance Fence", dev_id(DeviceType::cuda, 0), &h);
      EXPECT_EQ(h, 0u);  // no row wanted: no handle
      c.end_fence(h);
    }
    c.finalize();
    EXPECT_NE(meta(c.last_report(), "kokkos.fence_hooks")->find("called and ignored"), std::string::npos);
    EXPECT_EQ(find_row(channel(c.last_report(), "gpu0"), "Kokkos::fence: Unnamed Instance Fence"), nullptr);
  }
  setenv("DOOLY_FENCES", "1", 1);
  {
    Connector c(factory(), remover);
    kokkos_init(c);
    EXPECT_EQ(removals, 1);  // not asked: the hooks are wanted
    for (int i = 0; i < 2; ++i) {
      uint64_t h = 0;
      c.begin_fence("my fence", dev_id(DeviceType::cuda, 1), &h);
      EXPECT_NE(h, 0u);
      window_ms(2);
      c.end_fence(h);
    }
    c.finalize();
    EXPECT_EQ(meta(c.last_report(), "kokkos.fence_hooks"), "rows (DOOLY_FENCES=1)");
    const auto& r = row(channel(c.last_report(), "gpu1"), "my fence");
    EXPECT_EQ(r.calls, 2u);
    EXPECT_EQ(r.kind, Kind::fence);
    expect_p_times_t(r, kGpu1W);
    expect_not_charged(channel(c.last_report(), "gpu0"), "my fence");
  }
}

TEST_F(ConnectorTest, DeepCopiesAreNamedAfterBothEnds) {
  Connector c(factory());
  kokkos_init(c);
  Kokkos_Profiling_SpaceHandle dst{}, src{};
  std::snprintf(dst.name, sizeof(dst.name), "Cuda");
  std::snprintf(src.name, sizeof(src.name), "Host");
  for (int i = 0; i < 2; ++i) {
    c.begin_deep_copy(dst, "x_dev", src, "x_host", 1 << 20);
    window_ms(2);
    c.end_deep_copy();
  }
  c.end_deep_copy();  // without a begin: ignored
  c.finalize();
  const auto& r = row(channel(c.last_report(), "gpu0"), "deep_copy Cuda:x_dev <- Host:x_host");
  EXPECT_EQ(r.calls, 2u);
  EXPECT_EQ(r.kind, Kind::copy);
  expect_p_times_t(r, kGpu0W);
  EXPECT_EQ(c.last_report().unmatched_events, 0u);
}

TEST_F(ConnectorTest, MetadataEventsAndPeakBytesLandInTheReportMeta) {
  Connector c(factory());
  kokkos_init(c);
  c.declare_metadata("dooly_test_key", "some value, with a comma");
  c.declare_metadata(nullptr, "x");  // ignored
  c.profile_event("checkpoint");
  c.profile_event("checkpoint");
  c.profile_event(nullptr);  // ignored
  Kokkos_Profiling_SpaceHandle host{}, cuda{};
  std::snprintf(host.name, sizeof(host.name), "Host");
  std::snprintf(cuda.name, sizeof(cuda.name), "Cuda");
  c.allocate(host, "a", 100);
  c.allocate(host, "b", 50);  // 150 live: the peak
  c.deallocate(host, "a", 100);
  c.allocate(host, "c", 20);  // 70 live
  c.allocate(cuda, "d", 4096);
  c.deallocate(cuda, "d", 4096);
  c.finalize();
  const energy::Report& rep = c.last_report();
  EXPECT_EQ(meta(rep, "kokkos.dooly_test_key"), "some value, with a comma");
  EXPECT_EQ(meta(rep, "kokkos.event.checkpoint"), "2");
  EXPECT_EQ(meta(rep, "kokkos.peak_bytes.Host"), "150");
  EXPECT_EQ(meta(rep, "kokkos.peak_bytes.Cuda"), "4096");
  EXPECT_TRUE(meta(rep, "kokkos.fence_hooks").has_value());
  EXPECT_TRUE(meta(rep, "sampler_cpu_s").has_value());
}

TEST_F(ConnectorTest, RequestToolSettingsTurnsGlobalFencingOn) {
  Connector c(factory());
  Kokkos_Tools_ToolSettings s{};
  s.requires_global_fencing = false;
  c.request_tool_settings(1, &s);
  EXPECT_TRUE(s.requires_global_fencing);
  Kokkos_Tools_ToolSettings untouched{};
  untouched.requires_global_fencing = false;
  c.request_tool_settings(0, &untouched);  // an older Kokkos passing no settings: leave the struct alone
  EXPECT_FALSE(untouched.requires_global_fencing);
  c.request_tool_settings(1, nullptr);  // no crash
}

// Kokkos calls init first and parse_args after it (twice in 4.x): every setting an argument gives must take
// effect, including the ones the profiler needs at its start (they were ignored when it started in init).
TEST_F(ConnectorTest, ToolArgumentsInKokkosOrderTakeEffect) {
  Connector c(factory());
  ::testing::internal::CaptureStderr();
  c.init(0, 20211015);
  EXPECT_FALSE(c.active());  // waits for the arguments
  EXPECT_EQ(factory_calls_, 0);
  kokkos_init(c, {"./kokkos_app", "period_ms=5", "FENCES=1", "mode=trapezoid", "baseline_w=100"});
  EXPECT_EQ(count_dooly_lines(::testing::internal::GetCapturedStderr()), 0);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(factory_calls_, 1);  // the second parse_args starts nothing again
  ASSERT_TRUE(last_options_.has_value());
  EXPECT_EQ(last_options_->period_ns, 5'000'000);
  EXPECT_EQ(last_options_->mode, energy::Mode::trapezoid);
  EXPECT_EQ(last_options_->attribution.baseline_w, 100.0);
  uint64_t h = 0;
  c.begin_fence("f", dev_id(DeviceType::serial, 0), &h);
  EXPECT_NE(h, 0u);  // fences=1 took effect
  c.end_fence(h);
  c.finalize();
  EXPECT_EQ(c.last_report().mode, energy::Mode::trapezoid);
}

TEST_F(ConnectorTest, KokkosToolsArgsWordsWithoutAProgramNameTakeEffect) {
  // KOKKOS_TOOLS_ARGS="period_ms=7 mode=trapezoid": Kokkos 4 passes that variable's words alone.
  Connector c(factory());
  kokkos_init(c, {"period_ms=7", "mode=trapezoid"});
  ASSERT_TRUE(c.active());
  EXPECT_EQ(last_options_->period_ns, 7'000'000);
  EXPECT_EQ(last_options_->mode, energy::Mode::trapezoid);
  c.finalize();
}

TEST_F(ConnectorTest, KokkosPlaceholderForNoArgumentsStartsWithTheEnvironment) {
  // Kokkos 4.6 initialised without argv skips the first parse_args (no words) and passes its placeholder for an
  // unset option to the second: one word, no '='. The environment's settings apply, with no error line.
  Connector c(factory());
  ::testing::internal::CaptureStderr();
  c.init(0, 20211015);
  call_parse_args(c, {"kokkos_tools_impl_unset_option"});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(c.active());
  EXPECT_EQ(last_options_->period_ns, 2'000'000);  // the fixture's DOOLY_PERIOD_MS
  c.finalize();
}

TEST_F(ConnectorTest, ArgumentsBeforeInitTakeEffectToo) {
  Connector c(factory());
  call_parse_args(c, {"libkp_gpu_energy.so", "period_ms=4"});
  EXPECT_FALSE(c.active());
  c.init(0, 0);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(last_options_->period_ns, 4'000'000);
  c.finalize();
}

TEST_F(ConnectorTest, ToolArgumentsLeaveTheEnvironmentAlone) {
  // Settings travel as values: nothing the program or its children read (getenv) changes, and no setenv runs
  // inside a Kokkos callback while other threads may call getenv.
  Connector c(factory());
  kokkos_init(c, {"./app", "mode=trapezoid", "period_ms=3", "output=none", "table=0"});
  ASSERT_TRUE(c.active());
  EXPECT_EQ(std::getenv("DOOLY_MODE"), nullptr);
  EXPECT_STREQ(std::getenv("DOOLY_PERIOD_MS"), "2");  // the fixture's, not the argument's
  EXPECT_EQ(last_options_->period_ns, 3'000'000);
  c.finalize();
}

TEST_F(ConnectorTest, LogArgumentSetsTheLevel) {
  Connector c(factory());
  ::testing::internal::CaptureStderr();
  kokkos_init(c, {"./app", "log=info"});
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(c.active());
  EXPECT_EQ(log::threshold(), log::Level::info);
  EXPECT_NE(err.find("dooly: measuring gpu0, gpu1 through fake every 2 ms"), std::string::npos) << err;
  c.finalize();
  log::set_threshold(log::Level::warn);
}

TEST_F(ConnectorTest, WithoutParseArgsTheFirstHookStartsMeasurement) {
  // Kokkos 3.4 initialised without argv (Kokkos::initialize(InitArguments)) never calls parse_args.
  Connector c(factory());
  c.init(0, 0);
  EXPECT_FALSE(c.active());
  uint64_t kid = 0;
  c.begin_kernel(Kind::kernel_for, "first", dev_id(DeviceType::cuda, 0), &kid);
  EXPECT_NE(kid, 0u);
  ASSERT_TRUE(c.active());
  window_ms(3);
  c.end_kernel(kid);
  c.push_region("r");
  c.pop_region();
  c.finalize();
  EXPECT_EQ(row(channel(c.last_report(), "gpu0"), "first").calls, 1u);
  EXPECT_EQ(factory_calls_, 1);
  // Nothing starts again after finalize.
  c.begin_kernel(Kind::kernel_for, "late", dev_id(DeviceType::cuda, 0), &kid);
  c.push_region("late region");
  EXPECT_EQ(kid, 0u);
  EXPECT_FALSE(c.active());
  EXPECT_EQ(factory_calls_, 1);
}

TEST_F(ConnectorTest, HelpPrintsTheSettingsAndStartsNothing) {
  // --kokkos-tools-help: Kokkos calls init, then print_help instead of parse_args, then finalize (3.4 and 4.6).
  int calls = 0;
  Connector c([&](const energy::ProfilerOptions&) -> std::unique_ptr<energy::Profiler> {
    ++calls;
    throw SourceError("power", 0, "no power source could be opened:\n  nvml: not found", "install a driver");
  });
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  c.init(0, 20211015);
  c.print_help();
  Kokkos_Profiling_SpaceHandle sp{};
  c.deallocate(sp, "x", 8);  // what Kokkos::finalize may still report
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(err, "");
  EXPECT_EQ(out, Connector::help());
  EXPECT_EQ(out.rfind("dooly (libkp_gpu_energy.so): energy per Kokkos kernel and region.\n", 0), 0u) << out;
  EXPECT_EQ(calls, 0);
}

// A bad argument turns measurement off with one line; every hook is then a no-op and nothing throws.
void expect_disabled_after(const std::vector<std::string>& args, const std::string& expected_text,
                           const Connector::ProfilerFactory& factory, const int& factory_calls) {
  Connector c(factory);
  ::testing::internal::CaptureStderr();
  kokkos_init(c, args);  // parse_args twice, as Kokkos 4 calls it: still one line
  uint64_t kid = 77;
  c.begin_kernel(Kind::kernel_for, "k", 0, &kid);
  EXPECT_EQ(kid, 0u);
  c.end_kernel(kid);
  c.push_region("r");
  c.pop_region();
  uint32_t sec = 7;
  c.create_section("s", &sec);
  EXPECT_EQ(sec, UINT32_MAX);
  c.start_section(sec);
  c.stop_section(sec);
  c.destroy_section(sec);
  c.profile_event("e");
  c.declare_metadata("k", "v");
  uint64_t fh = 7;
  c.begin_fence("f", 0, &fh);
  EXPECT_EQ(fh, 0u);
  c.end_fence(fh);
  Kokkos_Profiling_SpaceHandle sp{};
  c.allocate(sp, "a", 1);
  c.deallocate(sp, "a", 1);
  c.begin_deep_copy(sp, "a", sp, "b", 1);
  c.end_deep_copy();
  c.finalize();
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(c.active());
  EXPECT_EQ(factory_calls, 0);
  EXPECT_EQ(count_dooly_lines(err), 1) << err;
  EXPECT_NE(err.find(expected_text), std::string::npos) << err;
  EXPECT_NE(err.find("energy measurement is off"), std::string::npos) << err;
  EXPECT_TRUE(c.last_report().channels.empty());
}

TEST_F(ConnectorTest, ArgumentWithoutEqualsDisablesTheConnectorWithOneLine) {
  expect_disabled_after({"libkp_gpu_energy.so", "verbose"}, "'verbose' is not key=value", factory(), factory_calls_);
}

TEST_F(ConnectorTest, UnknownArgumentDisablesTheConnectorWithOneLine) {
  expect_disabled_after({"libkp_gpu_energy.so", "colour=blue"}, "unknown tool argument 'colour'", factory(),
                        factory_calls_);
}

TEST_F(ConnectorTest, MalformedArgumentValueDisablesTheConnectorWithOneLine) {
  expect_disabled_after({"libkp_gpu_energy.so", "period_ms=fast"},
                        "period_ms='fast' is not a number in [1, 10000] — give period_ms a number between 1 and 10000",
                        factory(), factory_calls_);
}

TEST_F(ConnectorTest, OutOfRangeArgumentNamesTheSettingAndItsRange) {
  expect_disabled_after({"./app", "max_events=10"}, "max_events='10' is not a whole number in [1024, 67108864]",
                        factory(), factory_calls_);
}

TEST_F(ConnectorTest, EnvironmentOnlySettingAsAnArgumentSaysToExportIt) {
  expect_disabled_after({"./app", "tsc=0"}, "tool argument 'tsc' cannot be given here: it is read from the "
                        "environment only — export DOOLY_TSC=0 before the program starts", factory(), factory_calls_);
}

TEST_F(ConnectorTest, MalformedEnvironmentDisablesTheConnectorWithOneLine) {
  setenv("DOOLY_PERIOD_MS", "-3", 1);
  ::testing::internal::CaptureStderr();
  Connector c(factory());
  kokkos_init(c);
  uint64_t kid = 5;
  c.begin_kernel(Kind::kernel_for, "k", 0, &kid);
  c.end_kernel(kid);
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(kid, 0u);
  EXPECT_FALSE(c.active());
  EXPECT_EQ(factory_calls_, 0);
  EXPECT_EQ(count_dooly_lines(err), 1) << err;
  EXPECT_NE(err.find("DOOLY_PERIOD_MS='-3'"), std::string::npos) << err;
}

TEST_F(ConnectorTest, FailingPowerSourcePrintsOneLineAndTheHooksDoNothing) {
  int calls = 0;
  Connector c([&](const energy::ProfilerOptions&) -> std::unique_ptr<energy::Profiler> {
    ++calls;
    throw SourceError("nvml", 9, "libnvidia-ml.so.1 not found", "install the NVIDIA driver");
  });
  ::testing::internal::CaptureStderr();
  kokkos_init(c);
  uint64_t kid = 5;
  c.begin_kernel(Kind::kernel_for, "k", dev_id(DeviceType::cuda, 0), &kid);
  c.end_kernel(kid);
  c.push_region("r");
  c.pop_region();
  kokkos_init(c);  // Kokkos initialises once; a second init starts nothing
  c.finalize();
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(kid, 0u);
  EXPECT_FALSE(c.active());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(dooly_lines(err),
            std::vector<std::string>{"dooly: nvml: libnvidia-ml.so.1 not found — install the NVIDIA driver -- the "
                                     "program runs on without energy measurement"})
      << err;
  EXPECT_TRUE(c.last_report().channels.empty());
}

// A backend that auto-detection finds missing, as on a machine without a GPU driver.
class MissingProvider final : public power::Provider {
 public:
  MissingProvider(std::string name, std::string reason) : name_(std::move(name)), reason_(std::move(reason)) {}
  std::string_view name() const noexcept override { return name_; }
  std::string_view description() const noexcept override { return "missing (test)"; }
  power::Probe probe(const power::Options&) const override { return {false, reason_}; }
  std::unique_ptr<power::Session> open(const power::Options&) const override {
    throw SourceError(name_, 0, reason_, "");
  }

 private:
  std::string name_, reason_;
};

TEST_F(ConnectorTest, NoPowerSourceIsExactlyOneLine) {
  // Through the real selection, which lists every backend it tried (on lines of their own, once).
  power::Registry registry;
  registry.add(std::make_unique<MissingProvider>("nvml", "libnvidia-ml.so.1 not found"));
  registry.add(std::make_unique<MissingProvider>("variorum", "libvariorum.so not found"));
  registry.add(std::make_unique<MissingProvider>("rapl", "/sys/class/powercap is not readable"));
  Connector c([&registry](const energy::ProfilerOptions& o) { return energy::Profiler::open(o, registry); });
  ::testing::internal::CaptureStderr();
  kokkos_init(c);
  uint64_t kid = 0;
  c.begin_kernel(Kind::kernel_for, "k", dev_id(DeviceType::cuda, 0), &kid);
  c.end_kernel(kid);
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "dooly: power: no power source could be opened: nvml: libnvidia-ml.so.1 not found; variorum: "
            "libvariorum.so not found; rapl: /sys/class/powercap is not readable — install the NVIDIA driver (NVML) "
            "or Variorum, make /sys/class/powercap readable, or set DOOLY_POWER_SOURCE=replay with "
            "DOOLY_REPLAY_FILE -- the program runs on without energy measurement\n");
  EXPECT_FALSE(c.active());
}

TEST_F(ConnectorTest, OutputPrefixGetsCsvAndJsonWithTheRunsFigures) {
  const std::string prefix = (dir_ / "run1").string();
  setenv("DOOLY_OUTPUT", prefix.c_str(), 1);
  const std::string table_path = (dir_ / "table.txt").string();
  setenv("DOOLY_TABLE", "1", 1);
  setenv("DOOLY_TABLE_FILE", table_path.c_str(), 1);
  Connector c(factory());
  kokkos_init(c);
  uint64_t kid = 0;
  c.begin_kernel(Kind::kernel_for, "triad", dev_id(DeviceType::cuda, 0), &kid);
  window_ms(3);
  c.end_kernel(kid);
  c.finalize();

  std::ifstream json_in(prefix + ".json");
  ASSERT_TRUE(json_in.good());
  const nlohmann::json j = nlohmann::json::parse(json_in);
  EXPECT_EQ(j.at("version"), energy::kReportVersion);
  EXPECT_EQ(j.at("backend"), "fake");
  const energy::Report back = energy::report_from_json(j);
  const auto& r = row(channel(back, "gpu0"), "triad");
  EXPECT_EQ(r.calls, 1u);
  EXPECT_DOUBLE_EQ(r.energy_j, row(channel(c.last_report(), "gpu0"), "triad").energy_j);
  expect_p_times_t(r, kGpu0W);

  std::ifstream csv_in(prefix + ".csv");
  std::string header;
  ASSERT_TRUE(std::getline(csv_in, header));
  EXPECT_EQ(header, energy::kCsvHeader);
  std::stringstream csv;
  csv << csv_in.rdbuf();
  EXPECT_NE(csv.str().find("gpu0,gpu,0,triad,for,1,"), std::string::npos) << csv.str();

  std::ifstream table_in(table_path);
  std::stringstream table;
  table << table_in.rdbuf();
  EXPECT_EQ(table.str(), c.last_table());
  EXPECT_NE(table.str().find("triad"), std::string::npos);
}

TEST_F(ConnectorTest, UnwritableOutputPrefixIsReportedAtInitAndTheProgramContinues) {
  setenv("DOOLY_OUTPUT", "/nonexistent-dooly-dir/sub/run", 1);
  Connector c(factory());
  ::testing::internal::CaptureStderr();
  kokkos_init(c);
  const std::string at_init = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  uint64_t kid = 3;
  c.begin_kernel(Kind::kernel_for, "k", 0, &kid);
  c.end_kernel(kid);
  c.finalize();
  const std::string after = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_dooly_lines(at_init), 1) << at_init;
  EXPECT_NE(at_init.find("/nonexistent-dooly-dir/sub/run.json"), std::string::npos) << at_init;
  EXPECT_EQ(after, "");
  EXPECT_FALSE(c.active());
  EXPECT_EQ(factory_calls_, 0);  // checked before any power source is opened
  EXPECT_FALSE(fs::exists("/nonexistent-dooly-dir"));
}

// DOOLY_RECORD at a high kernel rate: a million kernels at ~0.7 M/s (a fenced Kokkos loop's rate on the H200's
// host; here in bursts of 50,000 every 70 ms) through the connector, into a file system that stalls (a FIFO
// whose reader starts 600 ms late, as a disk's writeback can). The sampler's ticks must not wait for the disk:
// no window dropped, every call counted, every window in the recording. (It once wrote the recording on its
// tick and sat in write() through the stall while the hooks' rings overflowed: 13 ticks in 1.4 s instead of
// ~70, ~29 % of the windows dropped.)
TEST_F(ConnectorTest, RecordingAtAMillionKernelsKeepsUpThroughADiskStall) {
  const std::string rec = (dir_ / "run.recording").string();
  ASSERT_EQ(mkfifo(rec.c_str(), 0600), 0);
  uint64_t begins = 0, ends = 0, bytes = 0;
  std::thread reader([&] {
    const int fd = open(rec.c_str(), O_RDONLY);  // until the recorder opens its end
    if (fd < 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    std::vector<char> buf(1 << 16);
    bool line_start = true;
    char first = 0;
    for (ssize_t n; (n = read(fd, buf.data(), buf.size())) > 0;) {
      bytes += static_cast<uint64_t>(n);
      for (ssize_t i = 0; i < n; ++i) {
        const char ch = buf[static_cast<size_t>(i)];
        if (line_start) {
          first = ch;
          line_start = false;
        } else if (first != 0) {
          if (ch == ',' && first == 'b') ++begins;
          if (ch == ',' && first == 'e') ++ends;
          first = 0;
        }
        if (ch == '\n') line_start = true;
      }
    }
    close(fd);
  });
  setenv("DOOLY_RECORD", rec.c_str(), 1);
  setenv("DOOLY_PERIOD_MS", "20", 1);
#ifdef NDEBUG
  constexpr int kBursts = 20, kPerBurst = 50'000;  // 1 M kernels in 1.4 s
#else
  // Unoptimised (the sanitizer builds): the attributor alone cannot keep up with a million kernels a second (at a
  // tenth of it, unoptimised, on a busy 2-core machine, it fell behind too). A fortieth of the rate, and rings a
  // thirty-second of the default, so that a 600 ms stall (~21,000 edges) still overflows them without the writer
  // thread while a 20 ms tick (~700 edges) never does.
  constexpr int kBursts = 20, kPerBurst = 1'250;
  setenv("DOOLY_MAX_EVENTS", "8192", 1);
#endif
  Connector c(factory());
  kokkos_init(c);
  ASSERT_TRUE(c.active());
  const int64_t t0 = now_ns();
  for (int b = 0; b < kBursts; ++b) {
    for (int i = 0; i < kPerBurst; ++i) {
      uint64_t kid = 0;
      c.begin_kernel(Kind::kernel_for, "tiny", dev_id(DeviceType::cuda, 0), &kid);
      c.end_kernel(kid);
    }
    const int64_t next = t0 + (b + 1) * 70'000'000;
    if (now_ns() < next) std::this_thread::sleep_for(std::chrono::nanoseconds(next - now_ns()));
  }
  const double run_s = static_cast<double>(now_ns() - t0) * 1e-9;
  ::testing::internal::CaptureStderr();
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  reader.join();
  const energy::Report& r = c.last_report();
  std::printf("recording: %s ticks in %.2f s, %llu window edges dropped, %llu bytes, waited %s s for the writer\n",
              meta(r, "sampler_ticks").value_or("?").c_str(), run_s, static_cast<unsigned long long>(r.events_dropped),
              static_cast<unsigned long long>(bytes), meta(r, "recording_wait_s").value_or("?").c_str());
  EXPECT_EQ(r.events_dropped, 0u) << err;
  EXPECT_EQ(row(channel(r, "gpu0"), "tiny").calls, static_cast<uint64_t>(kBursts * kPerBurst));
  EXPECT_EQ(count_dooly_lines(err), 0) << err;
  EXPECT_EQ(begins, static_cast<uint64_t>(kBursts * kPerBurst));
  EXPECT_EQ(ends, static_cast<uint64_t>(kBursts * kPerBurst));
}

TEST_F(ConnectorTest, DroppedWindowsAreReportedOnStderrWithoutTheTable) {
  setenv("DOOLY_MAX_EVENTS", "1024", 1);
  setenv("DOOLY_PERIOD_MS", "1000", 1);  // no drain before the loop is done
  Connector c(factory());
  kokkos_init(c);
  for (int i = 0; i < 5000; ++i) {
    uint64_t kid = 0;
    c.begin_kernel(Kind::kernel_for, "k", dev_id(DeviceType::cuda, 0), &kid);
    c.end_kernel(kid);
  }
  ::testing::internal::CaptureStderr();
  c.finalize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  const uint64_t dropped = c.last_report().events_dropped;
  ASSERT_GT(dropped, 0u);
  EXPECT_EQ(row(channel(c.last_report(), "gpu0"), "k").calls + dropped / 2, 5000u);  // a window: two edges
  EXPECT_EQ(dooly_lines(err),
            std::vector<std::string>{fmt::format(
                "dooly: {} window edges were dropped (the hooks' buffer of 1024 events per thread filled between two "
                "sampler ticks): those windows' calls and energy are missing from every figure; raise "
                "DOOLY_MAX_EVENTS or lower DOOLY_PERIOD_MS",
                dropped)})
      << err;
  EXPECT_EQ(meta(c.last_report(), "events_dropped"), std::to_string(dropped));
}

TEST_F(ConnectorTest, HelpListsEverySettingOfTheTable) {
  const std::string h = Connector::help();
  for (const SettingSpec& spec : setting_specs()) {
    const bool listed = h.find("\n  " + std::string(spec.name) + " ") != std::string::npos;
    EXPECT_EQ(listed, spec.renamed_to.empty()) << spec.name << "\n" << h;  // deprecated names are not offered
  }
  // The defaults it states are the ones in force (the mode's once drifted when the default changed).
  EXPECT_NE(h.find(fmt::format("; default: {})", energy::to_string(energy::ProfilerOptions{}.mode))), std::string::npos) << h;
}

TEST_F(ConnectorTest, HooksFromSeveralThreadsKeepTheirOwnRegionStacks) {
  Connector c(factory());
  kokkos_init(c);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&c] {
      for (int i = 0; i < 50; ++i) {
        c.push_region("worker");
        uint64_t kid = 0;
        c.begin_kernel(Kind::kernel_for, "work", dev_id(DeviceType::openmp, 0), &kid);
        c.end_kernel(kid);
        c.pop_region();
      }
    });
  for (auto& th : threads) th.join();
  c.finalize();
  const auto& g0 = channel(c.last_report(), "gpu0");
  EXPECT_EQ(row(g0, "worker").calls, 200u);
  EXPECT_EQ(row(g0, "work").calls, 200u);
  EXPECT_EQ(c.last_report().unmatched_events, 0u);
}

TEST_F(ConnectorTest, TheInitThreadAndEveryOtherThreadGetTheirKernelsBeforeFinalizeAndNoneAfter) {
  // The thread that runs init is recognised by its thread pointer (its hooks skip the thread-local lookup);
  // after it ends, a new thread may get the same pointer and with it the same ring: its kernels still count.
  Connector c(factory());
  auto launch = [&c](int n) {
    for (int i = 0; i < n; ++i) {
      uint64_t kid = 0;
      c.begin_kernel(Kind::kernel_for, "k", dev_id(DeviceType::cuda, 0), &kid);
      c.end_kernel(kid);
    }
  };
  std::thread([&] {
    kokkos_init(c);
    launch(10);
  }).join();
  ASSERT_TRUE(c.active());
  for (int t = 0; t < 3; ++t) std::thread(launch, 10).join();
  launch(10);
  std::thread concurrent(launch, 10);
  launch(10);
  concurrent.join();
  c.finalize();
  const auto& g0 = channel(c.last_report(), "gpu0");
  EXPECT_EQ(row(g0, "k").calls, 70u);
  EXPECT_EQ(c.last_report().unmatched_events, 0u);
  // After finalize the hooks touch nothing (the rings are gone: AddressSanitizer would catch a read).
  uint64_t kid = 123;
  c.begin_kernel(Kind::kernel_for, "k", dev_id(DeviceType::cuda, 0), &kid);
  EXPECT_EQ(kid, 0u);
  c.end_kernel((uint64_t{1} << 32) | 1);  // a handle as begin_kernel makes them
  std::thread(launch, 5).join();
  EXPECT_EQ(row(channel(c.last_report(), "gpu0"), "k").calls, 70u);
}

}  // namespace
}  // namespace dooly::kokkos
