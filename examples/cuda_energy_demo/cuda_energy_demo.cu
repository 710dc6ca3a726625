// A CUDA program that drives the connector exactly as a Kokkos runtime does (dlopen the library named by
// KOKKOS_TOOLS_LIBS, call kokkosp_init_library, begin/end hooks around fenced kernels, finalize), so a machine
// with a GPU but without a CUDA build of Kokkos can see live attribution. Two kernels whose rankings by time
// and by energy differ on an H200: a streaming triad (memory-bound, high power) and an FP32 FMA chain
// (compute-bound, lower power), run alone and interleaved.
//   cuda_energy_demo [seconds_per_phase=2] [interleave_ms=3]
//   cuda_energy_demo square [seconds=6] [on_ms=25]: FMA on for on_ms, idle for on_ms, repeated — a square
//   wave of power for characterising the sensor (its averaging window and lag; see docs/energy-attribution.md)
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "cuda_energy_demo: %s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void triad(float* a, const float* b, const float* c, float s, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) a[i] = b[i] + s * c[i];
}

__global__ void fma_chain(float* out, int iters) {
  float x = threadIdx.x * 1e-3f, y = 1.0001f, z = 0.9999f, w = blockIdx.x * 1e-4f;
  for (int i = 0; i < iters; ++i) {
    x = fmaf(x, y, z);
    w = fmaf(w, z, y);
    y = fmaf(y, x, -w);
    z = fmaf(z, w, x) * 0.5f;
  }
  if (x + y + z + w == 12345.678f) out[0] = x;  // keeps the chain alive
}

struct Tool {
  using BeginFn = void (*)(const char*, uint32_t, uint64_t*);
  using EndFn = void (*)(uint64_t);
  using RegionFn = void (*)(const char*);
  using PopFn = void (*)();
  using InitFn = void (*)(int, uint64_t, uint32_t, void*);
  using FinFn = void (*)();
  BeginFn begin = nullptr;
  EndFn end = nullptr;
  RegionFn push = nullptr;
  PopFn pop = nullptr;
  InitFn init = nullptr;
  FinFn fin = nullptr;
  void load() {
    const char* lib = std::getenv("KOKKOS_TOOLS_LIBS");
    if (!lib || !*lib) return;
    void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      std::fprintf(stderr, "cuda_energy_demo: cannot load %s: %s\n", lib, dlerror());
      return;
    }
    begin = reinterpret_cast<BeginFn>(dlsym(h, "kokkosp_begin_parallel_for"));
    end = reinterpret_cast<EndFn>(dlsym(h, "kokkosp_end_parallel_for"));
    push = reinterpret_cast<RegionFn>(dlsym(h, "kokkosp_push_profile_region"));
    pop = reinterpret_cast<PopFn>(dlsym(h, "kokkosp_pop_profile_region"));
    init = reinterpret_cast<InitFn>(dlsym(h, "kokkosp_init_library"));
    fin = reinterpret_cast<FinFn>(dlsym(h, "kokkosp_finalize_library"));
    if (init) init(0, 20211015, 0, nullptr);
  }
};

int main(int argc, char** argv) {
  const bool square = argc > 1 && std::string(argv[1]) == "square";
  if (square) {
    --argc;
    ++argv;
  }
  const double phase_s = argc > 1 ? std::atof(argv[1]) : (square ? 6.0 : 2.0);
  const double step_ms = argc > 2 ? std::atof(argv[2]) : (square ? 25.0 : 3.0);
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  const uint32_t dev_id = (2u << 24) | (static_cast<uint32_t>(dev) << 17);  // Kokkos devID: Cuda, this ordinal

  const size_t n = size_t(1) << 28;  // 1 GiB per array
  float *a, *b, *c, *out;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  CHECK(cudaMalloc(&c, n * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemset(b, 0, n * sizeof(float)));
  CHECK(cudaMemset(c, 0, n * sizeof(float)));

  Tool tool;
  tool.load();
  auto run = [&](const char* name, auto launch) {
    uint64_t kid = 0;
    if (tool.begin) tool.begin(name, dev_id, &kid);
    launch();
    CHECK(cudaDeviceSynchronize());  // the global fence Kokkos issues for tools
    if (tool.end) tool.end(kid);
  };
  // Calibrate each kernel's size to ~step_ms.
  auto time_ms = [&](auto launch) {
    launch();
    CHECK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) launch();
    CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 5;
  };
  size_t tn = n;
  while (tn > (1u << 20) && time_ms([&] { triad<<<1024, 256>>>(a, b, c, 1.5f, tn); }) > step_ms) tn /= 2;
  int iters = 1 << 12;
  // FMA on 16 384 threads (part of the GPU): on an H200 the whole-GPU FMA kernel drew ~420 W, more than the
  // triad; on part of the GPU it drew ~260 W (Kokkos demo), so it can take longer yet cost less.
  constexpr int kFmaBlocks = 64;
  while (time_ms([&] { fma_chain<<<kFmaBlocks, 256>>>(out, iters); }) < step_ms * 1.3) iters *= 2;
  auto stream = [&] { triad<<<1024, 256>>>(a, b, c, 1.5f, tn); };
  auto fma = [&] { fma_chain<<<kFmaBlocks, 256>>>(out, iters); };

  auto phase = [&](const char* region, auto body) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // quiet gap: the baseline comes from here
    if (tool.push) tool.push(region);
    const auto t_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(phase_s);
    while (std::chrono::steady_clock::now() < t_end) body();
    if (tool.pop) tool.pop();
  };
  if (square) {
    // One kernel launch of ~step_ms, then the same time idle.
    phase("square", [&] {
      run("fma_on", fma);
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms));
    });
    if (tool.fin) tool.fin();
    std::printf("cuda_energy_demo: square wave, fma chain of %d iterations\n", iters);
    return 0;
  }
  phase("alone:stream", [&] { run("stream_triad", stream); });
  phase("alone:fma", [&] { run("fma_chain", fma); });
  phase("interleaved", [&] {
    run("stream_triad", stream);
    run("fma_chain", fma);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (tool.fin) tool.fin();
  std::printf("cuda_energy_demo: triad over %zu floats, fma chain of %d iterations\n", tn, iters);
  return 0;
}
