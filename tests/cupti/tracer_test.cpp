// The CUPTI tracer over the stub libcupti (stub_cupti/): recorded kernel, memcpy and memset records go through
// CUPTI's real callback path (buffer requested, buffer completed, records walked with cuptiActivityGetNextRecord)
// and NVTX ranges through NVTX's injection tables (FakeNvtx, as nvtx3 keeps them) into the real profiler, sampler
// and attributor, over a fake power session of constant power, so every energy is known exactly.
#include "dooly/cupti/tracer.hpp"

#include <dlfcn.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cupti/fake_nvtx.hpp"
#include "dooly/common/clock.hpp"
#include "dooly/cupti/kernel_names.hpp"
#include "dooly/energy/recording.hpp"
#include "support/fake_session.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace dooly::cupti {
namespace {

using dooly::testing::FakeNvtx;
using dooly::testing::FakeSession;
using dooly::testing::ScopedEnv;
using energy::Kind;

// The stub's controls, from the copy the tracer loaded.
struct Stub {
  void* handle = dlopen(DOOLY_STUB_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
  template <typename Fn>
  Fn fn(const char* name) const {
    auto f = reinterpret_cast<Fn>(dlsym(handle, name));
    if (!f) throw std::runtime_error(std::string("stub lacks ") + name);
    return f;
  }
  void reset() const { fn<void (*)()>("stub_cupti_reset")(); }
  int64_t gpu_now() const { return now_ns() + fn<int64_t (*)()>("stub_cupti_clock_offset")(); }
  void kernel(const char* name, int64_t t0, int64_t t1, uint32_t stream, uint32_t device = 0) const {
    fn<void (*)(const char*, uint64_t, uint64_t, uint32_t, uint32_t, uint32_t)>("stub_cupti_kernel")(
        name, static_cast<uint64_t>(t0), static_cast<uint64_t>(t1), device, 1, stream);
  }
  void memcpy(uint8_t kind, int64_t t0, int64_t t1, uint32_t stream) const {
    fn<void (*)(uint8_t, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t)>("stub_cupti_memcpy")(
        kind, 4096, static_cast<uint64_t>(t0), static_cast<uint64_t>(t1), 0, stream);
  }
  void memset(int64_t t0, int64_t t1, uint32_t stream) const {
    fn<void (*)(uint64_t, uint64_t, uint64_t, uint32_t, uint32_t)>("stub_cupti_memset")(
        4096, static_cast<uint64_t>(t0), static_cast<uint64_t>(t1), 0, stream);
  }
  int deliver() const { return fn<int (*)()>("stub_cupti_deliver")(); }
  void drop_next(size_t n) const { fn<void (*)(size_t)>("stub_cupti_drop_next")(n); }
  int enabled(int kind) const { return fn<int (*)(int)>("stub_cupti_enabled")(kind); }
  int queued() const { return fn<int (*)()>("stub_cupti_queued")(); }
  int default_flushes() const { return fn<int (*)()>("stub_cupti_default_flushes")(); }
  int hold(int n) const { return fn<int (*)(int)>("stub_cupti_hold_buffers")(n); }
  void release_held() const { fn<void (*)()>("stub_cupti_release_held")(); }
};

// The environment of a tracer test: the stub library, no files, a short delay and sampler period.
struct Env {
  ScopedEnv lib{"DOOLY_CUPTI_LIB", DOOLY_STUB_CUPTI_PATH};
  ScopedEnv out{"DOOLY_OUTPUT", "none"};
  ScopedEnv table{"DOOLY_TABLE", "0"};
  ScopedEnv delay{"DOOLY_CUPTI_DELAY_MS", "10"};
  ScopedEnv period{"DOOLY_PERIOD_MS", "2"};
  ScopedEnv flush{"DOOLY_CUPTI_FLUSH_MS", "0"};      // the tests deliver buffers themselves (one test flushes)
  ScopedEnv nvtx{"NVTX_INJECTION64_PATH", nullptr};  // the tracer names itself there
};

Tracer::ProfilerFactory constant_power(double watts) {
  return [watts](const energy::ProfilerOptions& o) {
    return std::make_unique<energy::Profiler>(o, std::make_unique<FakeSession>(std::vector<double>{watts}), "fake");
  };
}

const energy::RegionRow& row(const energy::Report& r, const std::string& name) {
  for (const auto& x : r.channels.at(0).rows)
    if (x.name == name) return x;
  throw std::runtime_error("no row " + name);
}
std::string meta(const energy::Report& r, const std::string& key) {
  for (const auto& [k, v] : r.meta)
    if (k == key) return v;
  return "<none>";
}

constexpr int64_t kMs = 1'000'000;
const char* kGemm = "_Z9gemm_tileILi128EEvPfS0_i";  // void gemm_tile<128>(float*, float*, int)

TEST(Tracer, KernelsCopiesAndRangesBecomeRowsWithExactEnergies) {
  Env env;
  Stub stub;
  stub.reset();
  Tracer tracer(constant_power(200.0));
  ASSERT_TRUE(tracer.start());
  EXPECT_EQ(stub.enabled(10), 1);  // CONCURRENT_KERNEL
  EXPECT_EQ(stub.enabled(1), 1);
  EXPECT_EQ(stub.enabled(2), 1);

  // The tracer names its own library for NVTX; NVTX then hands the module's tables to the injection entry.
  const char* injection = std::getenv("NVTX_INJECTION64_PATH");
  ASSERT_NE(injection, nullptr);
  Dl_info self{};
  ASSERT_NE(dladdr(reinterpret_cast<const void*>(&Tracer::install_nvtx), &self), 0);
  EXPECT_STREQ(injection, self.dli_fname);
  FakeNvtx& nvtx = FakeNvtx::get();
  ASSERT_EQ(nvtx.inject(), 1);
  EXPECT_EQ(nvtx.push("forward"), 0);  // nvtxRangePushA: the level of the range opened
  const int64_t g = stub.gpu_now();
  // Two streams, overlapping; records arrive stream 13's first.
  stub.kernel("plain_kernel", g + 2 * kMs, g + 6 * kMs, 13);
  stub.kernel(kGemm, g + 1 * kMs, g + 4 * kMs, 7);
  stub.memcpy(1, g + 5 * kMs, g + 5 * kMs + 500'000, 7);  // HtoD
  stub.memset(g + 7 * kMs, g + 7 * kMs + 100'000, 13);
  stub.kernel("unfinished", g + 8 * kMs, 0, 7);  // end 0: incomplete at the flush
  stub.drop_next(5);
  EXPECT_EQ(stub.deliver(), 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  EXPECT_EQ(nvtx.pop(), 0);   // nvtxRangePop: the level of the range closed
  EXPECT_EQ(nvtx.pop(), -1);  // nothing open
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tracer.finish();
  EXPECT_FALSE(tracer.active());
  EXPECT_EQ(stub.enabled(10), 0);

  const energy::Report& r = tracer.last_report();
  const auto& gemm = row(r, "void gemm_tile<128>(float*, float*, int)");
  EXPECT_EQ(gemm.kind, Kind::kernel);
  EXPECT_EQ(gemm.short_name, "gemm_tile");
  EXPECT_EQ(gemm.calls, 1u);
  EXPECT_NEAR(gemm.time_s, 0.003, 1e-12);  // device time stamps: the duration is exact, whatever the offset
  EXPECT_NEAR(gemm.energy_j, 200.0 * 0.003, 1e-9);
  EXPECT_NEAR(row(r, "plain_kernel").time_s, 0.004, 1e-12);
  EXPECT_EQ(row(r, "plain_kernel").short_name, "");  // not mangled: the name is already short
  EXPECT_NEAR(row(r, "memcpy HtoD").time_s, 0.0005, 1e-12);
  EXPECT_EQ(row(r, "memcpy HtoD").kind, Kind::copy);
  EXPECT_NEAR(row(r, "memset").energy_j, 200.0 * 0.0001, 1e-9);
  // Streams: their windows summed.
  const auto& s7 = row(r, "GPU 0 stream 7");
  EXPECT_EQ(s7.kind, Kind::stream);
  EXPECT_EQ(s7.calls, 2u);
  EXPECT_NEAR(s7.time_s, 0.0035, 1e-12);
  EXPECT_NEAR(s7.energy_j, 200.0 * 0.0035, 1e-9);
  EXPECT_NEAR(row(r, "GPU 0 stream 13").time_s, 0.0041, 1e-12);
  // The NVTX range: host time from push to pop, at least the 3 ms slept.
  const auto& fwd = row(r, "forward");
  EXPECT_EQ(fwd.kind, Kind::region);
  EXPECT_EQ(fwd.calls, 1u);
  EXPECT_GE(fwd.time_s, 0.003);
  EXPECT_NEAR(fwd.energy_j, 200.0 * fwd.time_s, 1e-9);
  // What CUPTI said, counted.
  EXPECT_EQ(meta(r, "cupti.records"), "4");
  EXPECT_EQ(meta(r, "cupti.records_incomplete"), "1");
  EXPECT_EQ(meta(r, "cupti.records_dropped_by_cupti"), "5");
  EXPECT_EQ(meta(r, "cupti.streams"), "2");
  EXPECT_EQ(meta(r, "cupti.nvtx_ranges"), "1");
  EXPECT_EQ(meta(r, "cupti.buffers_walked"), "1");  // the five records fitted one buffer
  EXPECT_EQ(r.events_dropped, 10u);                 // 5 records, two edges each
  EXPECT_EQ(r.unmatched_events, 0u);
  EXPECT_NE(meta(r, "cupti.clock_bracket_ns"), "<none>");
  tracer.finish();  // a second finish does nothing
}

TEST(Tracer, StartEndRangesAcrossThreadsAndRegisteredStrings) {
  Env env;
  Stub stub;
  stub.reset();
  Tracer tracer(constant_power(100.0));
  ASSERT_TRUE(tracer.start());
  FakeNvtx& nvtx = FakeNvtx::get();
  ASSERT_EQ(nvtx.inject(), 1);
  // nvtxDomainRegisterStringA returns a handle; nvtxDomainRangeStartEx names the range by it.
  const void* domain = nvtx.create_domain("trainer");
  ASSERT_NE(domain, nullptr);
  const void* handle = nvtx.register_string(domain, "train step");
  EXPECT_EQ(nvtx.register_string(domain, "train step"), handle);  // the same string, the same handle
  abi::NvtxEventAttributes attr{};
  attr.version = 3;
  attr.size = sizeof(attr);
  attr.message_type = abi::kNvtxMessageRegistered;
  attr.message = handle;
  const uint64_t id = nvtx.domain_start_ex(domain, &attr);  // nvtxDomainRangeStartEx
  EXPECT_NE(id, 0u);
  abi::NvtxEventAttributes ascii = attr;
  ascii.message_type = abi::kNvtxMessageAscii;
  ascii.message = "optimizer";
  const uint64_t other_id = nvtx.start_ex(&ascii);  // nvtxRangeStartEx: a second range, its own id
  EXPECT_NE(other_id, id);
  EXPECT_EQ(nvtx.domain_push_ex(domain, &ascii), 0);
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    nvtx.end(id);  // nvtxRangeEnd, from another thread
    nvtx.end(other_id);
    nvtx.end(12345);  // an id never handed out: ignored
  });
  other.join();
  EXPECT_EQ(nvtx.domain_pop(domain), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tracer.finish();
  EXPECT_EQ(nvtx.push("after"), 0);  // after finish: NVTX still works, nothing is recorded
  EXPECT_EQ(nvtx.pop(), 0);
  const auto& step = row(tracer.last_report(), "train step");
  EXPECT_EQ(step.calls, 1u);
  EXPECT_GE(step.time_s, 0.002);
  EXPECT_EQ(row(tracer.last_report(), "optimizer").calls, 2u);  // the started range and the pushed one
  EXPECT_EQ(meta(tracer.last_report(), "cupti.nvtx_ranges"), "3");
}

TEST(Tracer, WithoutCuptiItSaysSoAndTheProgramRunsOn) {
  Env env;
  ScopedEnv missing("DOOLY_CUPTI_LIB", "/nonexistent/libcupti.so");
  Tracer tracer(constant_power(100.0));
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(tracer.start());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot use DOOLY_CUPTI_LIB=/nonexistent/libcupti.so"), std::string::npos) << err;
  EXPECT_NE(err.find("the program runs on without energy measurement"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  tracer.finish();  // harmless
  // A later tracer can attach: the failed one let go.
  ScopedEnv ok("DOOLY_CUPTI_LIB", DOOLY_STUB_CUPTI_PATH);
  Tracer second(constant_power(100.0));
  EXPECT_TRUE(second.start());
  second.finish();
}

TEST(Tracer, OneTracerAtATime) {
  Env env;
  Tracer a(constant_power(100.0)), b(constant_power(100.0));
  ASSERT_TRUE(a.start());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(b.start());
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("another dooly CUPTI tracer"), std::string::npos);
  a.finish();
}

TEST(Tracer, WithAnotherNvtxInjectionKernelsAreMeasuredWithoutRanges) {
  Env env;
  ScopedEnv nsys("NVTX_INJECTION64_PATH", "/opt/nsight-systems/libToolsInjection64.so");  // another tool's
  Stub stub;
  stub.reset();
  Tracer tracer(constant_power(100.0));
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(tracer.start());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("NVTX ranges are off: NVTX_INJECTION64_PATH names /opt/nsight-systems/libToolsInjection64.so"),
            std::string::npos)
      << err;
  EXPECT_STREQ(std::getenv("NVTX_INJECTION64_PATH"), "/opt/nsight-systems/libToolsInjection64.so");  // left alone
  const int64_t g = stub.gpu_now();
  stub.kernel("k", g + kMs, g + 2 * kMs, 1);
  stub.deliver();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tracer.finish();
  EXPECT_EQ(row(tracer.last_report(), "k").calls, 1u);
}

TEST(Tracer, AnNvtxWithoutItsCallbackTableIsRefused) {
  EXPECT_EQ(Tracer::install_nvtx(nullptr), 0);
  EXPECT_EQ(Tracer::install_nvtx([](uint32_t) -> const void* { return nullptr; }), 0);
  static const abi::NvtxExportTableCallbacks too_small{sizeof(size_t), nullptr};
  EXPECT_EQ(Tracer::install_nvtx([](uint32_t) -> const void* { return &too_small; }), 0);
}

TEST(Tracer, TheBufferPoolIsBoundedAndCuptisDropsAreReported) {
  Env env;
  ScopedEnv buffers("DOOLY_CUPTI_MAX_BUFFERS", "2");
  ScopedEnv size("DOOLY_CUPTI_BUFFER_KB", "16");
  Stub stub;
  stub.reset();
  Tracer tracer(constant_power(100.0));
  ASSERT_TRUE(tracer.start());
  EXPECT_EQ(stub.hold(3), 2);  // two buffers out at once; the third request is refused
  const int64_t g = stub.gpu_now();
  for (int i = 0; i < 10; ++i) stub.kernel("k", g + i * 1000, g + i * 1000 + 500, 1);
  EXPECT_EQ(stub.deliver(), 0);  // no buffer for them: CUPTI drops and counts them
  stub.release_held();
  for (int i = 0; i < 200; ++i) stub.kernel("k", g + 20'000 + i * 1000, g + 20'000 + i * 1000 + 500, 1);
  EXPECT_EQ(stub.deliver(), 200);  // 16 KiB holds 75 kernel records: three buffers, one at a time
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tracer.finish();
  const energy::Report& r = tracer.last_report();
  EXPECT_EQ(row(r, "k").calls, 200u);
  EXPECT_EQ(meta(r, "cupti.records_dropped_by_cupti"), "10");
  EXPECT_EQ(meta(r, "cupti.buffers_refused"), "2");
  EXPECT_EQ(r.events_dropped, 20u);
}

// On an H200, kernels of 3 ms on three streams filled CUPTI's 1 MiB buffers only every ~10 s: most records came
// later than the delay and were dropped. The tracer's own thread now asks for completed buffers (a default flush,
// which leaves a buffer with an unfinished record where it is). The same run could not be recorded either: the
// streams' tracks were above the recording's bound on threads.
TEST(Tracer, CompletedRecordsAreFetchedPeriodicallyAndRecorded) {
  Env env;
  ScopedEnv flush("DOOLY_CUPTI_FLUSH_MS", "5");
  ScopedEnv delay("DOOLY_CUPTI_DELAY_MS", "1000");
  dooly::testing::TempDir dir;
  ScopedEnv record("DOOLY_RECORD", dir.file("run.recording").c_str());
  Stub stub;
  stub.reset();
  Tracer tracer(constant_power(100.0));
  ASSERT_TRUE(tracer.start());
  auto wait_for = [](auto done) {
    for (int i = 0; i < 5000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return done();
  };
  const int64_t g = stub.gpu_now();
  stub.kernel(kGemm, g + kMs, g + 2 * kMs, 7);
  stub.kernel("plain_kernel", g + kMs, g + 3 * kMs, 9);
  EXPECT_TRUE(wait_for([&] { return stub.queued() == 0; })) << "no periodic flush took the completed records";
  stub.kernel("still_running", g + 4 * kMs, 0, 7);
  const int flushes = stub.default_flushes();
  EXPECT_TRUE(wait_for([&] { return stub.default_flushes() >= flushes + 2; }));
  EXPECT_EQ(stub.queued(), 1);  // a default flush leaves an unfinished record to the forced one at the end
  tracer.finish();
  const energy::Report& r = tracer.last_report();
  EXPECT_EQ(row(r, "plain_kernel").calls, 1u);
  EXPECT_EQ(meta(r, "cupti.records"), "2");
  EXPECT_EQ(meta(r, "cupti.records_incomplete"), "1");
  EXPECT_EQ(r.events_dropped, 0u);
  const energy::Recording rec = energy::read_recording(dir.file("run.recording"));
  size_t kernel_edges = 0;
  for (const energy::Event& e : rec.events) kernel_edges += e.thread >= kStreamTrackBase ? 1 : 0;
  EXPECT_EQ(kernel_edges, 4u);  // two kernels, a begin and an end each
}

TEST(Tracer, TraceFileHasStreamTracksAndRanges) {
  Env env;
  dooly::testing::TempDir dir;
  const std::string path = dir.file("run.trace.json");
  ScopedEnv trace("DOOLY_TRACE", path.c_str());
  Stub stub;
  stub.reset();
  Tracer tracer(constant_power(100.0));
  ASSERT_TRUE(tracer.start());
  const int64_t g = stub.gpu_now();
  stub.kernel(kGemm, g + kMs, g + 2 * kMs, 7);
  stub.kernel("plain_kernel", g + kMs, g + 3 * kMs, 9);
  stub.deliver();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tracer.finish();
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  std::map<std::string, int> tracks;
  int kernels = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") tracks[e.at("args").at("name")] = e.at("tid");
    if (e.at("ph") == "X" && e.at("cat") == "kernel") {
      ++kernels;
      EXPECT_EQ(e.at("pid"), 1);  // GPU 0
      EXPECT_NEAR(e.at("args").at("energy_j_gpu0").get<double>(), 100.0 * e.at("dur").get<double>() * 1e-6, 1e-9);
    }
  }
  EXPECT_EQ(kernels, 2);
  EXPECT_EQ(tracks.count("stream 7 (context 1)"), 1u);
  EXPECT_EQ(tracks.count("stream 9 (context 1)"), 1u);
}

TEST(Tracer, DiscardModeCollectsAndThrowsAwayWithoutAPowerSource) {
  Env env;
  ScopedEnv discard("DOOLY_CUPTI_DISCARD", "1");
  Stub stub;
  stub.reset();
  bool opened = false;
  Tracer tracer([&](const energy::ProfilerOptions&) -> std::unique_ptr<energy::Profiler> {
    opened = true;
    return nullptr;
  });
  ASSERT_TRUE(tracer.start());
  EXPECT_EQ(stub.enabled(10), 1);
  const int64_t g = stub.gpu_now();
  stub.kernel("k", g, g + 1000, 1);
  EXPECT_EQ(stub.deliver(), 1);
  tracer.finish();
  EXPECT_FALSE(opened);
  EXPECT_TRUE(tracer.last_report().channels.empty());
  // Detached: another tracer can start.
  ScopedEnv measure("DOOLY_CUPTI_DISCARD", "0");
  Tracer next(constant_power(100.0));
  EXPECT_TRUE(next.start());
  next.finish();
}

TEST(Tracer, EveryCuptiSettingIsRead) {
  const TracerSettings base;
  auto differs = [&](const char* name, const char* value) {
    SettingValues v;
    v.apply_args({"./prog", std::string(name) + "=" + value});
    const TracerSettings s = TracerSettings::from_settings(v);
    return s.cupti_library != base.cupti_library || s.buffer_bytes != base.buffer_bytes ||
           s.max_buffers != base.max_buffers || s.nvtx != base.nvtx || s.discard != base.discard ||
           s.flush_period_ns != base.flush_period_ns || s.profiler.event_delay_ns != 1'000'000'000 ||
           s.profiler.max_staged_events != base.profiler.max_staged_events;
  };
  const std::map<std::string, std::string> value = {
      {"CUPTI_LIB", "x.so"},         {"CUPTI_DELAY_MS", "50"}, {"CUPTI_BUFFER_KB", "64"}, {"CUPTI_MAX_BUFFERS", "8"},
      {"CUPTI_MAX_PENDING", "4096"}, {"CUPTI_NVTX", "0"},      {"CUPTI_DISCARD", "1"},    {"CUPTI_FLUSH_MS", "0"}};
  for (const SettingSpec& spec : setting_specs()) {
    if (!spec.name.starts_with("CUPTI_")) continue;
    ASSERT_TRUE(value.count(std::string(spec.name))) << spec.name << ": add a value to this test";
    EXPECT_TRUE(differs(std::string(spec.name).c_str(), value.at(std::string(spec.name)).c_str())) << spec.name;
  }
  EXPECT_EQ(find_setting("CUPTI_BUFFER_KB")->fallback, std::to_string(base.buffer_bytes / 1024));
  EXPECT_EQ(find_setting("CUPTI_MAX_BUFFERS")->fallback, std::to_string(base.max_buffers));
}

TEST(CuptiLibrary, TheOneTheProcessHasLoadedComesFirst) {
  Stub stub;  // loaded by path; its soname is libcupti.so
  ASSERT_NE(stub.handle, nullptr);
  Library lib("");
  EXPECT_EQ(lib.file(), "libcupti.so");
  uint64_t t = 0;
  ASSERT_EQ(lib.api().cuptiGetTimestamp(&t), abi::kSuccess);
  EXPECT_NEAR(static_cast<double>(static_cast<int64_t>(t) - stub.gpu_now()), 0.0, 1e9);  // the stub's clock
  EXPECT_EQ(candidate_files("/x/libcupti.so", "/opt/cuda"), std::vector<std::string>{"/x/libcupti.so"});
  const auto all = candidate_files("", "/opt/cuda");
  EXPECT_EQ(all.front(), "/opt/cuda/extras/CUPTI/lib64/libcupti.so");
  EXPECT_EQ(all.back(), "libcupti.so.12");
}

TEST(KernelNames, DemangledAndShort) {
  EXPECT_EQ(demangle(kGemm), "void gemm_tile<128>(float*, float*, int)");
  EXPECT_EQ(demangle("ampere_bf16_s16816gemm_bf16_128x128"), "ampere_bf16_s16816gemm_bf16_128x128");
  EXPECT_EQ(demangle("_Znot_really"), "_Znot_really");
  EXPECT_EQ(
      short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                 "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"),
      "vectorized_elementwise_kernel");
  EXPECT_EQ(
      short_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
                 "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > "
                 ">(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
                 "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, "
                 "at::native::gpu_kernel_impl_nocast<>(at::TensorIteratorBase&)::{lambda(int)#1})"),
      "elementwise_kernel");
  EXPECT_EQ(short_name("ampere_bf16_s16816gemm_bf16_128x128"), "ampere_bf16_s16816gemm_bf16_128x128");
  EXPECT_EQ(short_name("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(T1::Params)"),
            "Kernel2");
}

}  // namespace
}  // namespace dooly::cupti
