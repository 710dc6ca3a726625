// Per-hook cost, side by side in one process:
//   Profiler/begin_end          energy::Profiler::begin + end (fake constant-power session, sampler running)
//   Tool/<name>/begin_end       kokkosp_begin_parallel_for + kokkosp_end_parallel_for of a Kokkos Tools library,
//                               dlopen'ed and dlsym'ed as Kokkos does: dooly (libkp_gpu_energy.so over a replayed
//                               power trace), an empty tool, and simple-kernel-timer when it was built.
//   Paced/...                   the same with ~1 us of work between begin and end (a rate real programs reach).
//   Label/compare/{old,bytes,new}/n  the label memo's text comparison (old: word-wise past the NUL, under
//                               no_sanitize_address; bytes: a byte loop; new: strcmp, what the memo uses)
//   Label/find/n                LabelCache::find on a hit
// bench/run_hook_bench.sh prints the ratios (dooly / simple-kernel-timer, each minus the empty tool).
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "dooly/common/clock.hpp"
#include "dooly/energy/attributor.hpp"
#include "dooly/energy/profiler.hpp"
#include "dooly/energy/recording.hpp"
#include "support/fake_session.hpp"

namespace {

constexpr uint32_t kCudaDevice0 = 2u << 24;  // devID: device type Cuda, device 0, instance 0

// Stops the profiler and reports what its sampler thread cost since t0: share of a core and ns per iteration
// (one kernel), plus the events the buffers dropped.
void stop_and_count(benchmark::State& state, dooly::energy::Profiler& p, int64_t t0) {
  const double wall_s = static_cast<double>(dooly::now_ns() - t0) / 1e9;
  const double cpu_s = p.sampler_cpu_s();
  const dooly::energy::Report rep = p.stop();
  state.counters["events_dropped"] = static_cast<double>(rep.events_dropped);
  state.counters["sampler_cpu_pct"] = wall_s > 0 ? 100.0 * cpu_s / wall_s : 0.0;
  state.counters["sampler_ns_per_kernel"] =
      state.iterations() > 0 ? cpu_s * 1e9 / static_cast<double>(state.iterations()) : 0.0;
}

// Profiler::begin + end around `work` (nothing, or the paced fake kernel), with the sampler running.
template <typename Work>
void profiler_loop(benchmark::State& state, Work work) {
  dooly::energy::ProfilerOptions o;  // default period (20 ms), default event buffer
  dooly::energy::Profiler p(o, std::make_unique<dooly::testing::FakeSession>(std::vector<double>{200.0}),
                            "fake");
  const dooly::energy::KeyId k = p.key("kernel", dooly::energy::Kind::kernel_for);
  p.start();
  const int64_t t0 = dooly::now_ns();
  for (auto _ : state) {
    p.begin(k, 0);
    work();
    p.end(k, 0);
  }
  stop_and_count(state, p, t0);
}

void profiler_begin_end(benchmark::State& state) {
  profiler_loop(state, [] {});
}

struct Tool {
  std::string name;
  void* handle = nullptr;
  void (*init)(int, uint64_t, uint32_t, void*) = nullptr;
  void (*finalize)() = nullptr;
  void (*begin)(const char*, uint32_t, uint64_t*) = nullptr;
  void (*end)(uint64_t) = nullptr;
};

std::vector<Tool>& tools() {
  static std::vector<Tool> t;
  return t;
}

bool load(const std::string& name, const std::string& path) {
  if (path.empty()) return false;
  Tool t;
  t.name = name;
  t.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!t.handle) {
    std::fprintf(stderr, "hook_bench: cannot load %s: %s\n", path.c_str(), dlerror());
    return false;
  }
  t.init = reinterpret_cast<decltype(t.init)>(dlsym(t.handle, "kokkosp_init_library"));
  t.finalize = reinterpret_cast<decltype(t.finalize)>(dlsym(t.handle, "kokkosp_finalize_library"));
  t.begin = reinterpret_cast<decltype(t.begin)>(dlsym(t.handle, "kokkosp_begin_parallel_for"));
  t.end = reinterpret_cast<decltype(t.end)>(dlsym(t.handle, "kokkosp_end_parallel_for"));
  if (!t.init || !t.begin || !t.end) {
    std::fprintf(stderr, "hook_bench: %s lacks the kernel hooks\n", path.c_str());
    return false;
  }
  t.init(0, 20211015, 0, nullptr);
  // Then the arguments, as Kokkos passes them after init (dooly starts measuring there).
  if (auto parse_args = reinterpret_cast<void (*)(int, char**)>(dlsym(t.handle, "kokkosp_parse_args"))) {
    char program[] = "hook_bench";
    char* argv[] = {program, nullptr};
    parse_args(1, argv);
  }
  tools().push_back(t);
  return true;
}

void tool_begin_end(benchmark::State& state, const Tool* t) {
  uint64_t kid = 0;
  for (auto _ : state) {
    t->begin("kernel", kCudaDevice0, &kid);
    t->end(kid);
  }
}

// A stand-in for a short kernel between begin and end (~1 us of register work on one core), so the hooks run
// at a rate a real program can reach and dooly's sampler keeps up with the windows (the tight loop above
// produces windows faster than any program and overflows the bounded event buffer: see events_dropped).
// Own cost = paced(tool) - paced(empty).
[[gnu::noinline]] void fake_kernel() {
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 400; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  benchmark::DoNotOptimize(x);
}

void tool_begin_end_paced(benchmark::State& state, const Tool* t) {
  uint64_t kid = 0;
  for (auto _ : state) {
    t->begin("kernel", kCudaDevice0, &kid);
    fake_kernel();
    t->end(kid);
  }
}

void profiler_begin_end_paced(benchmark::State& state) { profiler_loop(state, fake_kernel); }

// An H200's GPU channel as NVML's sample buffer shows it: a reading every 20 ms over a 25 ms window, 4 ms late.
dooly::power::Channel nvml_like_channel() {
  dooly::power::Channel ch;
  ch.name = "gpu0";
  ch.domain = dooly::power::Domain::gpu;
  ch.device = 0;
  ch.sensor = {25'000'000, 4'000'000, 20'000'000, "buffered 20 ms samples (hook_bench)"};
  return ch;
}

// That channel's readings handed over as the backlog since the last poll. The sampler's work per reading (the
// model's occupancy over the window) then grows with the kernel rate as it does on the GPU.
class BufferedPowerSession final : public dooly::power::Session {
 public:
  const std::vector<dooly::power::Channel>& channels() const noexcept override { return channels_; }
  dooly::power::PollStatus poll(std::vector<dooly::power::Reading>& out) noexcept override {
    const int64_t now = dooly::now_ns();
    if (next_ == 0) next_ = now;
    for (; next_ <= now; next_ += 20'000'000) out.push_back({0, next_, 200.0 + static_cast<double>(next_ % 7)});
    return {};
  }

 private:
  std::vector<dooly::power::Channel> channels_{nvml_like_channel()};
  int64_t next_ = 0;
};

// The sampler's CPU share at a given kernel rate (state.range(0) kernels per second; the GPU overhead bench
// runs ~70,000 fenced kernels/s on an H200): begin, wait out the kernel's share of the period, end. The sampler
// polls every 100 ms (NVML's period when this case was written; dooly now polls it every 500 ms): the figures in
// docs/results/ were taken this way.
void profiler_at_rate(benchmark::State& state) {
  const int64_t period_ns = 1'000'000'000 / state.range(0);
  dooly::energy::ProfilerOptions o;
  o.period_ns = 100'000'000;
  o.period_given = true;
  dooly::energy::Profiler p(o, std::make_unique<BufferedPowerSession>(), "fake");
  const dooly::energy::KeyId k = p.key("kernel", dooly::energy::Kind::kernel_for);
  p.start();
  const int64_t t0 = dooly::now_ns();
  int64_t next = t0;
  for (auto _ : state) {
    next += period_ns;
    p.begin(k, 0);
    while (dooly::now_ns() < next) {
    }
    p.end(k, 0);
  }
  stop_and_count(state, p, t0);
}

// The stream's events (its setup, outside the timed loop; not inlined, so that bench/compare_attributor.sh can
// take its instructions out of the stream's).
[[gnu::noinline]] std::vector<dooly::energy::Event> stream_events(int depth, const dooly::energy::KeyId (&kernels)[2],
                                                                 dooly::energy::KeyId region, int64_t second,
                                                                 int64_t kernel) {
  std::vector<dooly::energy::Event> events;
  if (depth > 1) events.push_back({0, region, 0, -1, true});
  for (int64_t t = 1000, i = 0; t + kernel < second; t += kernel, ++i) {
    events.push_back({t, kernels[(i / 64) % 2], 0, 0, true});
    events.push_back({t + kernel * 3 / 4, kernels[(i / 64) % 2], 0, 0, false});
  }
  if (depth > 1) events.push_back({second - 1, region, 0, -1, false});
  return events;
}

// The sampler thread's per-kernel work alone, single-threaded and deterministic (no clock, no thread): one
// simulated second at 70,000 kernels/s (state.range(0) = nesting depth: 1 = kernels at top level, 2 = inside
// one region) over NVML-like readings (every 20 ms, 25 ms window, 4 ms late), handed to the Attributor in
// 100 ms batches as the sampler's ticks do. state.range(1) = 1: a kernel's begin and end charged in one step
// (the default), 0: one event at a time. Reports ns of attribution work per kernel.
void attributor_stream(benchmark::State& state) {
  namespace en = dooly::energy;
  const int depth = static_cast<int>(state.range(0));
  en::AttributorOptions options;
  options.pair_windows = state.range(1) != 0;
  constexpr int64_t kSecond = 1'000'000'000, kKernel = kSecond / 70'000, kTick = 100'000'000;
  const dooly::power::Channel ch = nvml_like_channel();
  en::KeyTable keys;
  const en::KeyId kernels[2] = {keys.intern("triad", en::Kind::kernel_for), keys.intern("fma", en::Kind::kernel_for)};
  const en::KeyId region = keys.intern("step", en::Kind::region);
  const std::vector<en::Event> events = stream_events(depth, kernels, region, kSecond, kKernel);
  const size_t kernel_count = (events.size() - (depth > 1 ? 2 : 0)) / 2;
  for (auto _ : state) {
    en::Attributor a({ch}, keys, options);
    a.begin_run(0);
    size_t next_event = 0;
    int64_t next_reading = 0;
    for (int64_t tick = kTick; tick <= kSecond + kTick; tick += kTick) {
      for (; next_reading <= tick - 4'000'000; next_reading += 20'000'000)
        a.add_reading({0, next_reading, 200.0 + static_cast<double>((next_reading / 20'000'000) % 7)});
      a.expect_events(tick);
      for (; next_event < events.size() && events[next_event].t_ns <= tick; ++next_event) a.add_event(events[next_event]);
      a.advance(tick);
    }
    benchmark::DoNotOptimize(a.finish(kSecond + kTick));
  }
  state.counters["ns_per_kernel"] = benchmark::Counter(static_cast<double>(kernel_count) * static_cast<double>(state.iterations()),
                                                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The label memo's text comparison, old and new side by side (state.range(0) = label length): the old one read
// 8 bytes at a time past a shorter label's NUL (within its page) under no_sanitize_address; the new one reads
// the label only up to its first difference or NUL. A hit compares every byte, the case timed here; labels
// are copied into a buffer as the hooks get them (a heap string), the cached text is zero padded.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"
[[gnu::noinline, gnu::cold]] bool old_same_label_bytes(const char* s, const char* text, size_t n) noexcept {
  for (size_t k = 0; k < n; ++k)
    if (s[k] != text[k]) return false;
  return true;
}
[[gnu::no_sanitize_address]] inline bool old_same_label(const char* s, const char* text, size_t n) noexcept {
  const size_t whole = n & ~size_t{7};
  const size_t tail = n & 7;
  if ((reinterpret_cast<uintptr_t>(s) & 4095u) + whole + (tail ? 8 : 0) > 4096u) [[unlikely]]
    return old_same_label_bytes(s, text, n);
  uint64_t diff = 0;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, s + i, 8);
    std::memcpy(&b, text + i, 8);
    diff |= a ^ b;
    asm("" : "+r"(diff));
  }
  if (tail) {
    uint64_t a, b;
    std::memcpy(&a, s + whole, 8);
    std::memcpy(&b, text + whole, 8);
    const uint64_t keep = (uint64_t{1} << (8 * tail)) - 1;
    diff |= (a ^ b) & keep;
  }
  return diff == 0;
}
#pragma GCC diagnostic pop

// The first defined candidate, a byte loop (rejected: slower on a hit).
inline bool bytes_same_label(const char* s, const char* text, size_t n) noexcept {
  for (size_t k = 0; k < n; ++k)
    if (s[k] != text[k]) return false;
  return true;
}

enum class Compare { old, bytes, now };
template <Compare Which>
void label_compare(benchmark::State& state) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::string label;
  for (size_t i = 0; i < len; ++i) label.push_back(static_cast<char>('a' + i % 26));
  std::vector<char> text((len + 1 + 7) / 8 * 8, '\0');
  std::memcpy(text.data(), label.data(), len);
  const char* s = label.c_str();
  for (auto _ : state) {
    benchmark::DoNotOptimize(s);
    const bool same = Which == Compare::old     ? old_same_label(s, text.data(), len + 1)
                      : Which == Compare::bytes ? bytes_same_label(s, text.data(), len + 1)
                                                : dooly::energy::detail::same_label(s, text.data(), len + 1);
    benchmark::DoNotOptimize(same);
  }
}

// LabelCache::find on a hit (the kernel hook's path): the memo's slot, its pointer check and the comparison.
void label_cache_find(benchmark::State& state) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::string label;
  for (size_t i = 0; i < len; ++i) label.push_back(static_cast<char>('a' + i % 26));
  dooly::energy::LabelCache cache;
  cache.store(label.c_str(), dooly::energy::Kind::kernel_for, 7);
  const char* s = label.c_str();
  for (auto _ : state) {
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(cache.find(s, dooly::energy::Kind::kernel_for));
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // simple-kernel-timer writes <host>-<pid>.dat into the working folder at finalize: keep it out of the way.
  char dir[] = "/tmp/dooly-hook-bench-XXXXXX";
  if (mkdtemp(dir) && chdir(dir) != 0) std::perror("hook_bench: chdir");
  // dooly's connector over a replayed trace: no GPU needed, no report files written.
  setenv("DOOLY_POWER_SOURCE", "replay", 1);
  // A constant 200 W trace long enough for any benchmark run (the checked-in test trace lasts 30 s).
  {
    dooly::energy::RecordingWriter w(std::string(dir) + "/bench.recording");
    dooly::power::Channel ch;
    ch.name = "gpu0";
    ch.domain = dooly::power::Domain::gpu;
    ch.device = 0;
    ch.sensor.update_ns = 20'000'000;
    ch.sensor.description = "constant 200 W (hook_bench)";
    w.write_channel(ch);
    for (int64_t i = 0; i <= 30'000; ++i) w.write_sample(dooly::power::Reading{0, i * 20'000'000, 200.0});
    w.flush();
  }
  setenv("DOOLY_REPLAY_FILE", (std::string(dir) + "/bench.recording").c_str(), 1);
  setenv("DOOLY_OUTPUT", "none", 1);
  setenv("DOOLY_TABLE", "0", 1);

  benchmark::RegisterBenchmark("Profiler/begin_end", profiler_begin_end);
  for (const int len : {4, 12, 31, 47, 90}) {
    benchmark::RegisterBenchmark("Label/compare/old", label_compare<Compare::old>)->Arg(len);
    benchmark::RegisterBenchmark("Label/compare/bytes", label_compare<Compare::bytes>)->Arg(len);
    benchmark::RegisterBenchmark("Label/compare/new", label_compare<Compare::now>)->Arg(len);
    benchmark::RegisterBenchmark("Label/find", label_cache_find)->Arg(len);
  }
  load("empty", KP_EMPTY_TOOL);
  load("dooly", KP_GPU_ENERGY);
  load("simple-kernel-timer", KP_KERNEL_TIMER);
  for (const Tool& t : tools())
    benchmark::RegisterBenchmark(("Tool/" + t.name + "/begin_end").c_str(), tool_begin_end, &t);
  benchmark::RegisterBenchmark("Paced/fake_kernel_only", [](benchmark::State& state) {
    for (auto _ : state) fake_kernel();
  });
  benchmark::RegisterBenchmark("Paced/Profiler/begin_end", profiler_begin_end_paced);
  benchmark::RegisterBenchmark("Attributor/stream", attributor_stream)
      ->ArgNames({"depth", "pairs"})
      ->Args({1, 1})
      ->Args({1, 0})
      ->Args({2, 1})
      ->Args({2, 0});
  benchmark::RegisterBenchmark("Rate/Profiler/sampler", profiler_at_rate)->Arg(70'000)->MinTime(3.0)->UseRealTime();
  for (const Tool& t : tools())
    benchmark::RegisterBenchmark(("Paced/Tool/" + t.name + "/begin_end").c_str(), tool_begin_end_paced, &t);

  benchmark::RunSpecifiedBenchmarks();
  for (const Tool& t : tools())
    if (t.finalize) t.finalize();
  benchmark::Shutdown();
  std::fflush(stdout);
  if (chdir("/") == 0) std::filesystem::remove_all(dir);
  return 0;
}
