// The nvml backend through the real dlopen path, against the stub libnvidia-ml.so.1 / libcuda.so.1 built by
// the tests (stub_nvml/stub_script.hpp describes what the stub returns, so every value here is exact).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/nvml/nvml_provider.hpp"
#include "dooly/power/nvml/nvml_session.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

constexpr int64_t kMs = 1'000'000;
// Steady <-> wall offsets are calibrated separately by the session and by the test; they agree to a few us.
constexpr int64_t kClockToleranceNs = 2 * kMs;

class NvmlTest : public ::testing::Test {
 protected:
  NvmlTest()
      : cuda_(("DOOLY_LIBCUDA"), DOOLY_STUB_CUDA_PATH),
        cvd_("CUDA_VISIBLE_DEVICES", nullptr),
        mode_("DOOLY_NVML_MODE", nullptr),
        lib_env_("DOOLY_NVML_LIBRARY", nullptr),
        script_env_("DOOLY_STUB_NVML_SCRIPT", nullptr) {
    options_.library = DOOLY_STUB_NVML_PATH;
  }

  void script(const std::string& text) {
    testing::write_file(dir_.file("script.txt"), text);
    setenv("DOOLY_STUB_NVML_SCRIPT", dir_.file("script.txt").c_str(), 1);
  }

  std::unique_ptr<Session> open() { return provider_->open(options_); }

  TempDir dir_;
  ScopedEnv cuda_, cvd_, mode_, lib_env_, script_env_;
  Options options_;
  std::unique_ptr<Provider> provider_ = make_nvml_provider();
};

TEST_F(NvmlTest, SamplesModeReturnsTheBacklogOnTheSteadyClockWithoutDuplicates) {
  script(
      "device 0000:1B:00.0 NVIDIA H200\n"
      "history_ms 200\n"
      "power 0 -200 100\n"
      "power 0 0 300\n");
  const int64_t before = now_ns();
  auto s = open();
  const int64_t after = now_ns();
  ASSERT_EQ(s->channels().size(), 1u);
  const Channel& ch = s->channels()[0];
  EXPECT_EQ(ch.name, "gpu0");
  EXPECT_EQ(ch.domain, Domain::gpu);
  EXPECT_EQ(ch.device, 0);
  EXPECT_EQ(ch.sensor.window_ns, 25 * kMs);  // the effective window fitted on an H200
  EXPECT_EQ(ch.sensor.delay_ns, 4 * kMs);
  EXPECT_EQ(ch.sensor.update_ns, 20 * kMs);
  EXPECT_NE(ch.sensor.description.find("NVIDIA H200"), std::string::npos) << ch.sensor.description;
  EXPECT_NE(ch.sensor.description.find("0000:1B:00.0"), std::string::npos) << ch.sensor.description;
  EXPECT_NE(ch.sensor.description.find("nvmlDeviceGetSamples"), std::string::npos) << ch.sensor.description;
  EXPECT_EQ(static_cast<nvml::NvmlSession&>(*s).mode(0), nvml::Mode::samples);

  std::vector<Reading> r;
  PollStatus st = s->poll(r);
  ASSERT_TRUE(st.ok) << st.message;
  // Samples at -200, -180, ..., 0 ms: a ramp from 100 W to 300 W (later ones, if the machine was slow: 300 W).
  ASSERT_GE(r.size(), 11u);
  for (size_t k = 0; k < r.size(); ++k) {
    EXPECT_EQ(r[k].channel, 0u);
    EXPECT_EQ(r[k].window_ns, -1);
    EXPECT_DOUBLE_EQ(r[k].power_w, k <= 10 ? 100.0 + 20.0 * static_cast<double>(k) : 300.0) << k;
    if (k > 0) {
      EXPECT_EQ(r[k].t_ns - r[k - 1].t_ns, 20 * kMs) << k;
    }
  }
  // Sample 10 was taken at nvmlInit, which happened inside open().
  EXPECT_GE(r[10].t_ns, before - kClockToleranceNs);
  EXPECT_LE(r[10].t_ns, after + kClockToleranceNs);

  std::this_thread::sleep_for(std::chrono::milliseconds(45));
  std::vector<Reading> r2;
  st = s->poll(r2);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_GE(r2.size(), 2u);  // 45 ms at 20 ms spacing
  EXPECT_EQ(r2[0].t_ns - r.back().t_ns, 20 * kMs);
  for (size_t k = 0; k < r2.size(); ++k) {
    EXPECT_DOUBLE_EQ(r2[k].power_w, 300.0);
    if (k > 0) {
      EXPECT_EQ(r2[k].t_ns - r2[k - 1].t_ns, 20 * kMs);
    }
  }
  std::vector<Reading> r3;
  ASSERT_TRUE(s->poll(r3).ok);
  for (const auto& x : r3) EXPECT_GT(x.t_ns, r2.back().t_ns);
}

TEST_F(NvmlTest, FallsBackToTheInstantFieldWhenSamplesAreNotSupported) {
  script(
      "device 0000:1B:00.0 NVIDIA A100\n"
      "samples_not_supported\n"
      "field_period_ms 100\n"
      "power 0 -1000 250\n"
      "power 0 1000 350\n");
  const int64_t before = now_ns();
  auto s = open();
  const int64_t after = now_ns();
  EXPECT_EQ(static_cast<nvml::NvmlSession&>(*s).mode(0), nvml::Mode::instant);
  const Channel& ch = s->channels()[0];
  EXPECT_NE(ch.sensor.description.find("field 186"), std::string::npos) << ch.sensor.description;
  EXPECT_EQ(ch.sensor.update_ns, 100 * kMs);
  EXPECT_EQ(ch.sensor.window_ns, 25 * kMs);

  std::vector<Reading> r;
  ASSERT_TRUE(s->poll(r).ok);
  ASSERT_EQ(r.size(), 1u);
  // The field's own stamp is the refresh boundary k * 100 ms after init; the value is the trace there.
  const int64_t k = std::llround(static_cast<double>(r[0].t_ns - before) / (100.0 * kMs));
  EXPECT_NEAR(static_cast<double>(r[0].t_ns), static_cast<double>(before + k * 100 * kMs),
              static_cast<double>(kClockToleranceNs + (after - before)));
  EXPECT_DOUBLE_EQ(r[0].power_w, 300.0 + 0.05 * 100.0 * static_cast<double>(k));

  // An unchanged field (same stamp) is dropped; a refreshed one is exactly 100 ms later.
  std::vector<Reading> r2;
  ASSERT_TRUE(s->poll(r2).ok);
  ASSERT_LE(r2.size(), 1u);
  if (!r2.empty()) {
    EXPECT_EQ(r2[0].t_ns - r[0].t_ns, 100 * kMs);
  }
}

TEST_F(NvmlTest, FallsBackToTheOneSecondAverage) {
  script(
      "device 0000:1B:00.0 Tesla V100\n"
      "samples_not_supported\n"
      "field_not_supported\n"
      "field_period_ms 1000\n"
      "power 0 -1000 100\n"
      "power 0 0 300\n");
  auto s = open();
  EXPECT_EQ(static_cast<nvml::NvmlSession&>(*s).mode(0), nvml::Mode::average);
  const Channel& ch = s->channels()[0];
  EXPECT_EQ(ch.sensor.window_ns, 1000 * kMs);
  EXPECT_NE(ch.sensor.description.find("1-second average"), std::string::npos) << ch.sensor.description;

  const int64_t before = now_ns();
  std::vector<Reading> r;
  ASSERT_TRUE(s->poll(r).ok);
  const int64_t after = now_ns();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_DOUBLE_EQ(r[0].power_w, 200.0);  // the mean of the 100 -> 300 W ramp over [-1 s, 0]
  EXPECT_GE(r[0].t_ns, before);           // stamped at read time
  EXPECT_LE(r[0].t_ns, after);
}

TEST_F(NvmlTest, NoPowerReadingAtAllIsASourceError) {
  script(
      "device 0000:1B:00.0 Old GPU\n"
      "samples_not_supported\nfield_not_supported\npower_usage_not_supported\n");
  try {
    open();
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu0: no power reading is supported"), std::string::npos) << e.what();
    EXPECT_NE(e.fix().find("DOOLY_POWER_SOURCE"), std::string::npos) << e.fix();
  }
}

TEST_F(NvmlTest, ModeCanBeForcedAndBadValuesAreRejected) {
  script("device 0000:1B:00.0 NVIDIA H200\n");
  {
    ScopedEnv m("DOOLY_NVML_MODE", "average");
    auto s = open();
    EXPECT_EQ(static_cast<nvml::NvmlSession&>(*s).mode(0), nvml::Mode::average);
  }
  {
    ScopedEnv m("DOOLY_NVML_MODE", "fastest");
    EXPECT_THROW(open(), InputError);
  }
  script("device 0000:1B:00.0 NVIDIA H200\nsamples_not_supported\n");
  {
    ScopedEnv m("DOOLY_NVML_MODE", "samples");
    try {
      open();
      FAIL() << "open should throw";
    } catch (const SourceError& e) {
      EXPECT_NE(std::string(e.what()).find("DOOLY_NVML_MODE=samples is not supported"), std::string::npos) << e.what();
      EXPECT_NE(e.fix().find("unset DOOLY_NVML_MODE"), std::string::npos);
    }
  }
}

TEST_F(NvmlTest, InitFailureCarriesTheVendorStringAndTheFix) {
  script("device 0000:1B:00.0 NVIDIA H200\ninit_fail 9\n");
  try {
    open();
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.vendor_code(), 9);
    EXPECT_NE(what.find("nvmlInit_v2 failed: stub-nvml: Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED, code 9)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("load the NVIDIA kernel driver"), std::string::npos) << what;
  }
  const Probe p = provider_->probe(options_);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.reason.find("stub-nvml: Driver Not Loaded"), std::string::npos) << p.reason;

  script("device 0000:1B:00.0 NVIDIA H200\ninit_fail 18\n");
  try {
    open();
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("stub-nvml: RM has detected an NVML/RM version mismatch"), std::string::npos);
    EXPECT_NE(e.fix().find("reboot"), std::string::npos) << e.fix();
  }
}

TEST_F(NvmlTest, MissingLibraryIsExplainedAndTheEnvironmentCanNameTheFile) {
  options_.library = dir_.file("nowhere/libnvidia-ml.so.1");
  const Probe p = provider_->probe(options_);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.reason.find("cannot load " + options_.library), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("DOOLY_NVML_LIBRARY"), std::string::npos) << p.reason;

  script("device 0000:1B:00.0 NVIDIA H200\n");
  options_.library.clear();
  ScopedEnv lib("DOOLY_NVML_LIBRARY", DOOLY_STUB_NVML_PATH);
  const Probe ok = provider_->probe(options_);
  EXPECT_TRUE(ok.available) << ok.reason;
  EXPECT_NE(ok.reason.find("1 GPU(s)"), std::string::npos) << ok.reason;
  EXPECT_EQ(open()->channels().size(), 1u);
}

TEST_F(NvmlTest, LostGpuIsFatalAndStaysFatal) {
  // open makes 3 reading calls (mode probe, buffer sizing, energy probe), each poll 1: the GPU is lost from the
  // 5th call on, the second poll's.
  script("device 0000:1B:00.0 NVIDIA H200\nhistory_ms 100\nlost_after 4\n");
  auto s = open();
  std::vector<Reading> r;
  PollStatus st = s->poll(r);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_GE(r.size(), 6u);
  st = s->poll(r);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(st.fatal);
  EXPECT_NE(st.message.find("gpu0"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("stub-nvml: GPU is lost (NVML_ERROR_GPU_IS_LOST, code 15)"), std::string::npos)
      << st.message;
  EXPECT_NE(st.message.find("nvidia-smi -r"), std::string::npos) << st.message;
  const std::string first = st.message;
  const size_t count = r.size();
  st = s->poll(r);
  EXPECT_TRUE(st.fatal);
  EXPECT_EQ(st.message, first);
  EXPECT_EQ(r.size(), count);
  EXPECT_FALSE(s->energy_counter_j(0).has_value());
}

TEST_F(NvmlTest, EnergyCounterIsTheVendorIntegralInJoules) {
  script("device 0000:1B:00.0 NVIDIA H200\npower 0 0 200\nenergy_base_mj 5000000\nfield_period_ms 100\n");
  const int64_t before = now_ns();
  auto s = open();
  ASSERT_TRUE(s->supports_energy_counter());
  auto e = s->energy_counter_j(0);
  const int64_t after = now_ns();
  ASSERT_TRUE(e.has_value());
  // 5000 J at init plus 200 W x the refresh boundaries passed since (20 J per 100 ms).
  const double periods = (*e - 5000.0) / 20.0;
  EXPECT_NEAR(periods, std::round(periods), 1e-9) << *e;
  EXPECT_GE(periods, 0.0);
  EXPECT_LE(periods, static_cast<double>(after - before) / (100.0 * kMs) + 1.0);
  EXPECT_FALSE(s->energy_counter_j(1).has_value());

  s.reset();  // NVML is process-wide: the stub reads a new script only once every session has shut it down
  script("device 0000:1B:00.0 NVIDIA H200\nenergy_not_supported\n");
  auto s2 = open();
  EXPECT_FALSE(s2->supports_energy_counter());
  EXPECT_FALSE(s2->energy_counter_j(0).has_value());
}

constexpr const char* kThreeGpus =
    "device 0000:1B:00.0 GPU-A\n"
    "device 0000:2C:00.0 GPU-B\n"
    "device 0000:3D:00.0 GPU-C\n"
    "cuda_order 2 0 1\n"  // CUDA's physical ordinals 0, 1, 2 are NVML indices 2, 0, 1
    "history_ms 40\n"
    "power 0 0 100\n"
    "power 1 0 200\n"
    "power 2 0 300\n";

// The watts of the first reading of each channel (the trace identifies the NVML device).
std::vector<double> first_power_per_channel(Session& s) {
  std::vector<Reading> r;
  EXPECT_TRUE(s.poll(r).ok);
  std::vector<double> w(s.channels().size(), -1.0);
  for (const auto& x : r)
    if (w[x.channel] < 0) w[x.channel] = x.power_w;
  return w;
}

TEST_F(NvmlTest, CudaOrdinalsMapToNvmlByPciBusIdUnderCudaVisibleDevices) {
  script(kThreeGpus);
  ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "2,0");  // CUDA 0 = physical 2 = NVML 1; CUDA 1 = physical 0 = NVML 2
  auto s = open();
  ASSERT_EQ(s->channels().size(), 2u);
  EXPECT_EQ(s->channels()[0].name, "gpu0");
  EXPECT_EQ(s->channels()[0].device, 0);
  EXPECT_NE(s->channels()[0].sensor.description.find("GPU-B [PCI 0000:2C:00.0]"), std::string::npos)
      << s->channels()[0].sensor.description;
  EXPECT_EQ(s->channels()[1].name, "gpu1");
  EXPECT_NE(s->channels()[1].sensor.description.find("GPU-C [PCI 0000:3D:00.0]"), std::string::npos);
  EXPECT_EQ(first_power_per_channel(*s), (std::vector<double>{200.0, 300.0}));

  options_.cuda_devices = {1};
  auto one = open();
  ASSERT_EQ(one->channels().size(), 1u);
  EXPECT_EQ(one->channels()[0].name, "gpu1");
  EXPECT_EQ(one->channels()[0].device, 1);
  EXPECT_EQ(first_power_per_channel(*one), (std::vector<double>{300.0}));

  options_.cuda_devices = {2};
  try {
    open();
    FAIL() << "open should throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device 2 does not exist: 2 GPU(s) are visible to CUDA"),
              std::string::npos)
        << e.what();
  }
  options_.cuda_devices = {0, 0};
  EXPECT_THROW(open(), InputError);
}

TEST_F(NvmlTest, WithoutCudaVisibleDevicesEveryCudaGpuInCudaOrder) {
  script(kThreeGpus);
  auto s = open();
  ASSERT_EQ(s->channels().size(), 3u);
  EXPECT_EQ(first_power_per_channel(*s), (std::vector<double>{300.0, 100.0, 200.0}));
}

TEST_F(NvmlTest, WithoutLibcudaCudaVisibleDevicesIndexesNvml) {
  script(kThreeGpus);
  ScopedEnv nocuda("DOOLY_LIBCUDA", dir_.file("missing/libcuda.so.1").c_str());
  {
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "2");
    auto s = open();
    ASSERT_EQ(s->channels().size(), 1u);
    EXPECT_NE(s->channels()[0].sensor.description.find("GPU-C [PCI 0000:3D:00.0]"), std::string::npos)
        << s->channels()[0].sensor.description;
    EXPECT_EQ(first_power_per_channel(*s), (std::vector<double>{300.0}));
  }
  {
    auto s = open();  // unset: every NVML device, identity
    EXPECT_EQ(first_power_per_channel(*s), (std::vector<double>{100.0, 200.0, 300.0}));
  }
  {
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "GPU-8f2c1a00");  // not integers: identity
    auto s = open();
    EXPECT_EQ(s->channels().size(), 3u);
  }
}

TEST_F(NvmlTest, NoGpuVisibleToCudaIsASourceError) {
  script(kThreeGpus);
  ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "");
  try {
    open();
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU is visible to CUDA (CUDA_VISIBLE_DEVICES=''; NVML sees 3 GPU(s))"),
              std::string::npos)
        << e.what();
  }
}

TEST(NvmlErrors, TranslationTableNamesCodesAndFixes) {
  EXPECT_EQ(nvml::error_info(3).name, "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(nvml::error_info(15).name, "NVML_ERROR_GPU_IS_LOST");
  EXPECT_EQ(nvml::error_info(18).name, "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
  EXPECT_EQ(nvml::error_info(999).name, "NVML_ERROR_UNKNOWN");
  EXPECT_TRUE(nvml::is_fatal(15));
  EXPECT_FALSE(nvml::is_fatal(3));
  EXPECT_EQ(nvml::describe(4, nullptr), "NVML_ERROR_NO_PERMISSION (code 4)");
  EXPECT_FALSE(nvml::error_info(12345).fix.empty());
}

}  // namespace
}  // namespace dooly::power
