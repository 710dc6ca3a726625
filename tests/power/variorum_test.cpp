// The variorum backend through the real dlopen path, against the stub libvariorum built by the tests
// (stub_variorum/stub_variorum.cpp serves the scripted JSON answers in order).
#include <dlfcn.h>

#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/variorum/variorum_json.hpp"
#include "dooly/power/variorum/variorum_provider.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

constexpr int64_t kMs = 1'000'000;

class VariorumTest : public ::testing::Test {
 protected:
  VariorumTest() : env_("DOOLY_STUB_VARIORUM_SCRIPT", nullptr), lib_env_("DOOLY_VARIORUM_LIBRARY", nullptr) {
    options_.library = DOOLY_STUB_VARIORUM_PATH;
  }
  // Each script gets its own file name: the stub restarts its sequence when the name changes.
  void script(const std::string& text) {
    const std::string path = dir_.file(fmt::format("script{}.txt", ++scripts_));
    testing::write_file(path, text);
    setenv("DOOLY_STUB_VARIORUM_SCRIPT", path.c_str(), 1);
  }

  TempDir dir_;
  ScopedEnv env_, lib_env_;
  Options options_;
  int scripts_ = 0;
  std::unique_ptr<Provider> provider_ = make_variorum_provider();
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string node_json(int64_t ts_us, const std::string& node_w, const std::string& cpu0_w, const std::string& gpu1_w) {
  return fmt::format(
      R"({{"lassen12": {{"timestamp": {}, "power_node_watts": {}, "num_gpus_per_socket": 2,)"
      R"( "socket_0": {{"power_cpu_watts": {}, "power_mem_watts": 30.0, "power_gpu_watts": {{"GPU_0": 250.5, "GPU_1": {}}}}},)"
      R"( "socket_1": {{"power_cpu_watts": 110.0, "power_mem_watts": -1.0, "power_gpu_watts": {{"GPU_2": 240.0, "GPU_3": 230.25}}}}}}}})",
      ts_us, node_w, cpu0_w, gpu1_w);
}

TEST_F(VariorumTest, ParsesDomainsConvertsStampsAndSkipsUnmeasurableAndStaleValues) {
  const int64_t t0 = wall_now_us() - 50'000;
  script("json " + node_json(t0, "350.5", "120.25", "-1.0") + "\n" +  // at open
         "json " + node_json(t0, "999", "999", "999") + "\n" +        // same stamp: stale, dropped
         "json " + node_json(t0 + 20'000, "-1", "121.5", "260") + "\n" +
         "json {\"lassen12\": {\"timestamp\": \n" +  // malformed
         "error -1\n");
  auto s = provider_->open(options_);
  const auto& ch = s->channels();
  std::vector<std::string> names;
  for (const auto& c : ch) names.push_back(c.name);
  // GPU_1 and socket_1's memory were -1 at open: no channel.
  EXPECT_EQ(names, (std::vector<std::string>{"node", "cpu0", "dram0", "cpu1", "gpu0", "gpu2", "gpu3"}));
  EXPECT_EQ(ch[0].domain, Domain::node);
  EXPECT_EQ(ch[0].device, -1);
  EXPECT_EQ(ch[1].domain, Domain::cpu);
  EXPECT_EQ(ch[1].device, 0);
  EXPECT_EQ(ch[2].domain, Domain::dram);
  EXPECT_EQ(ch[3].device, 1);
  EXPECT_EQ(ch[4].domain, Domain::gpu);
  EXPECT_EQ(ch[4].device, -1);
  EXPECT_EQ(ch[4].sensor.window_ns, 1000 * kMs);  // Variorum's GPU power is NVML's 1-second average
  EXPECT_NE(ch[4].sensor.description.find("1-second"), std::string::npos);
  EXPECT_EQ(ch[1].sensor.window_ns, 0);

  std::vector<Reading> r;
  PollStatus st = s->poll(r);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_EQ(r.size(), 7u);  // the snapshot taken at open; the second answer repeats its stamp
  const std::vector<double> expect = {350.5, 120.25, 30.0, 110.0, 250.5, 240.0, 230.25};
  const WallToSteady clock;
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].channel, i);
    EXPECT_DOUBLE_EQ(r[i].power_w, expect[i]);
    EXPECT_EQ(r[i].t_ns, r[0].t_ns);
  }
  EXPECT_NEAR(static_cast<double>(r[0].t_ns), static_cast<double>(clock.steady_ns(t0)), 2.0 * kMs);

  std::vector<Reading> r2;
  st = s->poll(r2);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_EQ(r2.size(), 6u);  // node is -1 this time; GPU_1 has no channel
  EXPECT_EQ(r2[0].channel, 1u);
  EXPECT_DOUBLE_EQ(r2[0].power_w, 121.5);
  for (const auto& x : r2) EXPECT_EQ(x.t_ns - r[0].t_ns, 20 * kMs);

  std::vector<Reading> r3;
  st = s->poll(r3);
  EXPECT_FALSE(st.ok);
  EXPECT_FALSE(st.fatal);
  EXPECT_NE(st.message.find("malformed JSON"), std::string::npos) << st.message;
  EXPECT_TRUE(r3.empty());

  st = s->poll(r3);
  EXPECT_FALSE(st.ok);
  EXPECT_FALSE(st.fatal);
  EXPECT_NE(st.message.find("variorum_get_power_json returned -1"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("VARIORUM_LOG=1"), std::string::npos) << st.message;
  EXPECT_TRUE(r3.empty());
}

TEST_F(VariorumTest, ErrorAtOpenIsASourceErrorWithTheFix) {
  script("error -1\n");
  try {
    provider_->open(options_);
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_EQ(e.vendor_code(), -1);
    EXPECT_NE(std::string(e.what()).find("variorum: variorum_get_power_json returned -1"), std::string::npos)
        << e.what();
    EXPECT_NE(e.fix().find("VARIORUM_LOG=1"), std::string::npos);
  }
  const Probe p = provider_->probe(options_);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.reason.find("returned -1"), std::string::npos) << p.reason;

  script("json [1, 2\n");
  try {
    provider_->open(options_);
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed JSON: '[1, 2'"), std::string::npos) << e.what();
  }

  script(R"(json {"h": {"timestamp": 1, "power_node_watts": -1.0, "socket_0": {"power_cpu_watts": -1.0}}})"
         "\n");
  try {
    provider_->open(options_);
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("not measurable"), std::string::npos) << e.what();
  }
}

TEST_F(VariorumTest, MissingLibraryIsExplained) {
  options_.library = dir_.file("none/libvariorum.so");
  const Probe p = provider_->probe(options_);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.reason.find("cannot load " + options_.library), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("DOOLY_VARIORUM_LIBRARY"), std::string::npos) << p.reason;

  // The environment variable names the file when the option does not.
  script(R"(json {"h": {"timestamp": 1, "power_node_watts": 80}})"
         "\n");
  options_.library.clear();
  ScopedEnv lib("DOOLY_VARIORUM_LIBRARY", DOOLY_STUB_VARIORUM_PATH);
  const Probe ok = provider_->probe(options_);
  EXPECT_TRUE(ok.available) << ok.reason;
  EXPECT_EQ(ok.reason, "Variorum measures node");
}

// Real output of Variorum 0.8.0's NVIDIA port (built by scripts/gpu/build_variorum.sh, run over
// scripts/gpu/fake_nvml_for_variorum.c: 150 W, and 151 W for a second GPU), byte for byte: several lines, GPU
// numbers node-wide, no node, CPU or memory keys, and the float rounding of its mW-to-W conversion.
TEST_F(VariorumTest, RealVariorumNvidiaOutputOpensAndReads) {
  const std::string fixtures = std::string(DOOLY_SOURCE_DIR) + "/tests/power/fixtures/variorum/";
  script("file " + fixtures + "nvidia_2gpu.json\n");
  auto s = provider_->open(options_);
  ASSERT_EQ(s->channels().size(), 2u);
  EXPECT_EQ(s->channels()[0].name, "gpu0");
  EXPECT_EQ(s->channels()[1].name, "gpu1");
  EXPECT_EQ(s->channels()[0].domain, Domain::gpu);
  EXPECT_EQ(s->channels()[0].sensor.window_ns, 1000 * kMs);
  std::vector<Reading> r;
  ASSERT_TRUE(s->poll(r).ok);
  ASSERT_EQ(r.size(), 2u);  // the call made at open; the poll's own call has the same stamp (a file): dropped
  EXPECT_DOUBLE_EQ(r[0].power_w, 150.0000071246177);
  EXPECT_DOUBLE_EQ(r[1].power_w, 151.00000717211515);
  EXPECT_EQ(r[0].t_ns, r[1].t_ns);

  script("file " + fixtures + "nvidia_1gpu.json\n");
  std::string error;
  auto snap = variorum::parse_power_json(read_text(fixtures + "nvidia_1gpu.json"), error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->timestamp_us, 1796323532981185);
  EXPECT_EQ(snap->sockets, 1);
  EXPECT_EQ(snap->gpus_per_socket, 1);
  ASSERT_EQ(snap->values.size(), 1u);
  EXPECT_EQ(snap->values[0].channel, "gpu0");
  EXPECT_EQ(provider_->probe(options_).reason, "Variorum measures gpu0");
}

// A session with a GPU channel holds NVML open (Variorum's NVIDIA port would otherwise initialise and shut NVML
// down on every call: 14.65 ms each on an H200), and lets go when it closes.
TEST_F(VariorumTest, AGpuSessionHoldsNvmlOpenWhileItLives) {
  const std::string fixtures = std::string(DOOLY_SOURCE_DIR) + "/tests/power/fixtures/variorum/";
  testing::write_file(dir_.file("nvml.script"), "device 00000000:00:06.0 NVIDIA H200\n");
  ScopedEnv nvml_lib("DOOLY_NVML_LIBRARY", DOOLY_STUB_NVML_PATH);
  ScopedEnv nvml_script("DOOLY_STUB_NVML_SCRIPT", dir_.file("nvml.script").c_str());
  void* stub = dlopen(DOOLY_STUB_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(stub, nullptr) << dlerror();
  auto init_count = reinterpret_cast<int (*)()>(dlsym(stub, "stub_nvml_init_count"));
  ASSERT_NE(init_count, nullptr);
  const int before = init_count();
  script("file " + fixtures + "nvidia_1gpu.json\n");
  {
    auto s = provider_->open(options_);
    EXPECT_EQ(init_count(), before + 1);
  }
  EXPECT_EQ(init_count(), before);
  dlclose(stub);
}

// Variorum 0.8 gives each socket num_gpus / num_sockets GPUs: one GPU on two sockets is reported as none.
TEST_F(VariorumTest, FewerGpusThanSocketsIsExplained) {
  script(R"(json {"n": {"timestamp": 5, "num_gpus_per_socket": 0, "socket_0": {"power_gpu_watts": {}},)"
         R"( "socket_1": {"power_gpu_watts": {}}}})"
         "\n");
  try {
    provider_->open(options_);
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("0 GPUs per socket on 2 sockets"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("DOOLY_POWER_SOURCE=nvml"), std::string::npos) << e.what();
  }
}

// Variorum 0.8.0's ARM Juno r2 port (ARM/juno_r2_power_features.c, written from its source: no such board here)
// writes "power_gpu_watts" as a bare number, -1 on the socket without a GPU, and "num_gpus_per_socket": -1.
TEST(VariorumJson, JunoGpuPowerAsANumberIsTheSocketsGpu) {
  std::string error;
  auto snap = variorum::parse_power_json(
      R"({"juno": {"timestamp": 9, "socket_0": {"power_cpu_watts": 1.5, "power_gpu_watts": 0.75},
                   "socket_1": {"power_gpu_watts": -1.0, "power_cpu_watts": 0.5},
                   "power_node_watts": 3.25, "num_gpus_per_socket": -1}})",
      error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->gpus_per_socket, -1);
  std::vector<std::string> names;
  for (const auto& v : snap->values) names.push_back(v.channel);
  EXPECT_EQ(names, (std::vector<std::string>{"node", "cpu0", "cpu1", "gpu0", "gpu1"}));
  EXPECT_DOUBLE_EQ(snap->values[3].power_w, 0.75);
  EXPECT_DOUBLE_EQ(snap->values[4].power_w, -1.0);  // not measurable: no channel
  EXPECT_FALSE(variorum::parse_power_json(
      R"({"n": {"timestamp": 1, "socket_0": {"power_gpu_watts": "x"}}})", error));
  EXPECT_EQ(error, "\"power_gpu_watts\" of socket_0 is \"x\", not an object or a number");
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"timestamp": 1, "socket_0": {"power_gpu_watts": 2e5}}})", error));
}

TEST(VariorumJson, PerSocketGpuNumbersBecomeNodeWide) {
  std::string error;
  auto snap = variorum::parse_power_json(
      R"({"n": {"timestamp": 7, "num_gpus_per_socket": 2,
                "socket_1": {"power_gpu_watts": {"GPU_0": 3, "GPU_1": 4}},
                "socket_0": {"power_gpu_watts": {"GPU_0": 1, "GPU_1": 2}}}})",
      error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->timestamp_us, 7);
  ASSERT_EQ(snap->values.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(snap->values[k].channel, fmt::format("gpu{}", k));
    EXPECT_DOUBLE_EQ(snap->values[k].power_w, k + 1.0);
  }
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"power_node_watts": 1}})", error));
  EXPECT_EQ(error, "the host object has no numeric \"timestamp\"");
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"timestamp": 1, "power_node_watts": "x"}})", error));
  EXPECT_EQ(error, "\"power_node_watts\" is \"x\", not a number");
}

TEST(VariorumJson, ValuesBeyondTheirRangeAreRefusedNotConverted) {
  // A float timestamp beyond int64 was cast to int64 (undefined; UBSan), and socket * GPUs-per-socket could
  // overflow int; the microsecond stamp times 1000 overflowed in the provider.
  std::string error;
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"timestamp": 1e300, "power_node_watts": 1}})", error));
  EXPECT_EQ(error, "\"timestamp\" is 1e+300, not microseconds since the epoch within [0, 2^52]");
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"timestamp": -5, "power_node_watts": 1}})", error));
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"timestamp": 9223372036854775807, "power_node_watts": 1}})", error));
  EXPECT_FALSE(variorum::parse_power_json(R"({"n": {"timestamp": 1, "power_node_watts": 1e308}})", error));
  EXPECT_EQ(error, "\"power_node_watts\" is 1e+308, above 100000 W");
  EXPECT_FALSE(variorum::parse_power_json(
      R"({"n": {"timestamp": 1, "socket_0": {"power_gpu_watts": {"GPU_0": 2e5}}}})", error));
  auto snap = variorum::parse_power_json(
      R"({"n": {"timestamp": 1, "num_gpus_per_socket": 1e300, "socket_2147483647": {"power_cpu_watts": 5},
                "socket_1": {"power_gpu_watts": {"GPU_2147483647": 1, "GPU_0": 2}},
                "socket_0": {"power_gpu_watts": {"GPU_0": 3}}}})",
      error);
  ASSERT_TRUE(snap) << error;
  ASSERT_EQ(snap->values.size(), 2u);  // the out-of-range socket and GPU numbers are not sockets or GPUs
  EXPECT_EQ(snap->values[0].channel, "gpu0");
  EXPECT_EQ(snap->values[1].channel, "gpu1");
}

}  // namespace
}  // namespace dooly::power
