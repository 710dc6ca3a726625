// What an NVTX range costs the thread that opens it, through libdooly_cupti.so's NVTX injection (the tracer over
// the stub libcupti of tests/cupti, a fake constant-power session, its sampler and buffers running), side by side
// with the slots NVTX leaves when no tool is injected (an empty function behind the same pointer):
//   Nvtx/none/push_pop            nvtxRangePushA + nvtxRangePop into empty slots (the program alone)
//   Nvtx/dooly/push_pop           the same into dooly's entries, one name from one pointer (a C/C++ literal)
//   Nvtx/dooly/push_pop_fresh     a name from a fresh buffer each time (Python's torch.cuda.nvtx passes a new one)
//   Nvtx/dooly/start_end          nvtxRangeStartEx + nvtxRangeEnd (ranges that may end on another thread)
// The per-range figure in the terms: a PyTorch loop with one range a pass of 0.8 ms pays it once a pass.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "cupti/fake_nvtx.hpp"
#include "dooly/cupti/tracer.hpp"
#include "dooly/energy/profiler.hpp"
#include "support/fake_session.hpp"
#include "support/scoped_env.hpp"

namespace {

using dooly::cupti::Tracer;
using dooly::testing::FakeNvtx;
using dooly::testing::ScopedEnv;

struct Env {
  ScopedEnv lib{"DOOLY_CUPTI_LIB", DOOLY_STUB_CUPTI_PATH};
  ScopedEnv out{"DOOLY_OUTPUT", "none"};
  ScopedEnv table{"DOOLY_TABLE", "0"};
  ScopedEnv nvtx{"NVTX_INJECTION64_PATH", nullptr};
  // Edges wait this long for their GPU records; at millions of ranges a second the default 1 s would hold more
  // than the pending cap and the loop would time the drop path.
  ScopedEnv delay{"DOOLY_CUPTI_DELAY_MS", "10"};
};

Tracer::ProfilerFactory constant_power() {
  return [](const dooly::energy::ProfilerOptions& o) {
    return std::make_unique<dooly::energy::Profiler>(
        o, std::make_unique<dooly::testing::FakeSession>(std::vector<double>{200.0}), "fake");
  };
}

int empty_push(const char*) { return 0; }
int empty_pop() { return 0; }

void none_push_pop(benchmark::State& state) {
  // What nvtx3 leaves without a tool: its slots point at functions that return at once.
  auto* volatile push = &empty_push;
  auto* volatile pop = &empty_pop;
  for (auto _ : state) {
    benchmark::DoNotOptimize(push("forward"));
    benchmark::DoNotOptimize(pop());
  }
}

// The tracer started over the stub, NVTX injected; `body` runs the timed loop.
template <typename Body>
void with_tracer(benchmark::State& state, Body body) {
  Env env;
  Tracer tracer(constant_power());
  if (!tracer.start() || FakeNvtx::get().inject() != 1) {
    state.SkipWithError("the tracer did not start over the stub CUPTI");
    return;
  }
  body(FakeNvtx::get());
  tracer.finish();
}

void dooly_push_pop(benchmark::State& state) {
  with_tracer(state, [&](FakeNvtx& nvtx) {
    for (auto _ : state) {
      benchmark::DoNotOptimize(nvtx.push("forward"));
      benchmark::DoNotOptimize(nvtx.pop());
    }
  });
}

void dooly_push_pop_fresh(benchmark::State& state) {
  with_tracer(state, [&](FakeNvtx& nvtx) {
    for (auto _ : state) {
      std::string name = "forward";  // a new buffer each time, as a binding's temporary
      benchmark::DoNotOptimize(nvtx.push(name.c_str()));
      benchmark::DoNotOptimize(nvtx.pop());
    }
  });
}

void dooly_start_end(benchmark::State& state) {
  with_tracer(state, [&](FakeNvtx& nvtx) {
    dooly::cupti::abi::NvtxEventAttributes a{};
    a.version = 3;
    a.size = sizeof(a);
    a.message_type = dooly::cupti::abi::kNvtxMessageAscii;
    a.message = "step";
    for (auto _ : state) nvtx.end(nvtx.start_ex(&a));
  });
}

}  // namespace

BENCHMARK(none_push_pop)->Name("Nvtx/none/push_pop");
BENCHMARK(dooly_push_pop)->Name("Nvtx/dooly/push_pop");
BENCHMARK(dooly_push_pop_fresh)->Name("Nvtx/dooly/push_pop_fresh");
BENCHMARK(dooly_start_end)->Name("Nvtx/dooly/start_end");
BENCHMARK_MAIN();
