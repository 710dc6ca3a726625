// Kernels that overlap, for validating how dooly splits a power reading among concurrent kernels (issue 13,
// section 2). Three kernels of different power:
//   fma_burn      compute-bound: a chain of FMAs per thread, no memory traffic;
//   stream_triad  memory-bound: a = b + s * c over arrays far larger than L2;
//   wmma_gemm     tensor cores: 16x16x16 half-precision tiles through nvcuda::wmma.
// (A WMMA kernel rather than cuBLAS: the alone and concurrent launches must be distinct kernels, so that each
// gets its own row, and a template tag does that; cuBLAS's kernel names cannot be tagged.)
// Each is sized to a fraction of the SMs so that, launched on separate streams, they really run at once.
//
// Phases, each an NVTX range, with an idle gap between them:
//   alone <kernel>        one kernel, instance <0>, on one stream, for --phase-s seconds;
//   concurrent all        the three kernels' instances <1> on three streams, each launch delayed by a random
//                         0..--max-spin-ms so that the overlaps vary: by the host (--delay host, the default: it
//                         sleeps before the launch, so nothing else runs on the device) or by a one-warp `spin`
//                         kernel queued before it on its stream (--delay device; on the H200 that kernel, present
//                         whenever the others run, took half their energy in the fit: docs/results/
//                         2026-12-04-h200-issue13-overlap-overhead.md);
//   concurrent <a>+<b>    each pair, instances <1>, the same way.
// Run it under the library: CUDA_INJECTION64_PATH=.../libdooly_cupti.so ./cuda_overlap; then
// scripts/gpu/summarize_overlap.py compares each kernel's J/call concurrent (<1>) with alone (<0>).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

template <int Tag>
__global__ void fma_burn(float* out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0f - threadIdx.x * 1e-6f, c = 0.5f, d = 0.25f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 0.9999f, 1e-6f);
    b = fmaf(b, 1.0001f, -1e-6f);
    c = fmaf(c, a, b);
    d = fmaf(d, b, a);
  }
  if (a + b + c + d == -1.0f) out[0] = a;  // never true: keeps the work
}

template <int Tag>
__global__ void stream_triad(float* a, const float* b, const float* c, size_t n, int reps) {
  for (int r = 0; r < reps; ++r)
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
      a[i] = b[i] + 1.5f * c[i];
}

// C (n x n, float) += A (n x n, half, row-major) * B (n x n, half, column-major), one 16x16 tile per warp, tiles
// spread over the grid; `reps` passes.
template <int Tag>
__global__ void wmma_gemm(const half* A, const half* B, float* C, int n, int reps) {
  using namespace nvcuda;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int warps = gridDim.x * blockDim.x / 32;
  const int tiles = (n / 16) * (n / 16);
  for (int r = 0; r < reps; ++r)
    for (int t = warp; t < tiles; t += warps) {
      const int row = (t / (n / 16)) * 16, col = (t % (n / 16)) * 16;
      wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int k = 0; k < n; k += 16) {
        wmma::load_matrix_sync(fa, A + row * n + k, n);
        wmma::load_matrix_sync(fb, B + col * n + k, n);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(C + row * n + col, acc, n, wmma::mem_row_major);
    }
}

// A short wait on the device (one warp): shifts the next launch on its stream.
__global__ void spin(long long ns) {
  for (long long waited = 0; waited < ns; waited += 1000) __nanosleep(1000);
}

struct Options {
  double phase_s = 4.0;
  double gap_s = 0.5;
  double target_ms = 3.0;
  double max_spin_ms = 2.0;
  bool device_delay = false;  // --delay device: a spin kernel before each launch; host: the host sleeps
};

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_overlap: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

struct Work {
  int sms = 0;
  float* out = nullptr;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  size_t n_stream = size_t{1} << 26;  // 256 MiB per array
  half *ga = nullptr, *gb = nullptr;
  float* gc = nullptr;
  int n_gemm = 2048;
  int fma_iters = 1 << 16, triad_reps = 1, gemm_reps = 1;

  // Launches kernel k (0 fma, 1 triad, 2 gemm), instance Tag, on stream s.
  template <int Tag>
  void launch(int k, cudaStream_t s) const {
    if (k == 0) fma_burn<Tag><<<sms, 256, 0, s>>>(out, fma_iters);
    if (k == 1) stream_triad<Tag><<<sms * 2, 256, 0, s>>>(a, b, c, n_stream, triad_reps);
    if (k == 2) wmma_gemm<Tag><<<sms, 128, 0, s>>>(ga, gb, gc, n_gemm, gemm_reps);
  }
};

const char* kNames[3] = {"fma", "triad", "gemm"};

double time_one_ms(const Work& w, int k, cudaStream_t s) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  w.launch<0>(k, s);  // warm
  cudaEventRecord(e0, s);
  w.launch<0>(k, s);
  cudaEventRecord(e1, s);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms;
}

// Scales each kernel's work so that one launch alone takes about target_ms.
void calibrate(Work& w, double target_ms, cudaStream_t s) {
  for (int round = 0; round < 3; ++round) {
    const double f = time_one_ms(w, 0, s), t = time_one_ms(w, 1, s), g = time_one_ms(w, 2, s);
    w.fma_iters = std::max(1, static_cast<int>(w.fma_iters * target_ms / std::max(f, 1e-3)));
    w.triad_reps = std::max(1, static_cast<int>(w.triad_reps * target_ms / std::max(t, 1e-3) + 0.5));
    w.gemm_reps = std::max(1, static_cast<int>(w.gemm_reps * target_ms / std::max(g, 1e-3) + 0.5));
  }
  std::printf("calibrated: fma %.2f ms (iters %d), triad %.2f ms (reps %d), gemm %.2f ms (reps %d)\n",
              time_one_ms(w, 0, s), w.fma_iters, time_one_ms(w, 1, s), w.triad_reps, time_one_ms(w, 2, s), w.gemm_reps);
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void idle(double s) {
  cudaDeviceSynchronize();
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

void alone(const Work& w, int k, const Options& o, cudaStream_t s) {
  const std::string name = std::string("alone ") + kNames[k];
  nvtxRangePushA(name.c_str());
  long calls = 0;
  const double end = now_s() + o.phase_s;
  while (now_s() < end) {
    for (int i = 0; i < 32; ++i, ++calls) w.launch<0>(k, s);
    cudaStreamSynchronize(s);
  }
  nvtxRangePop();
  std::printf("phase %-22s calls %s=%ld\n", name.c_str(), kNames[k], calls);
}

void concurrent(const Work& w, const std::vector<int>& ks, const Options& o, const cudaStream_t* streams,
                std::mt19937& rng) {
  std::string name = "concurrent ";
  for (size_t i = 0; i < ks.size(); ++i) name += (i ? "+" : "") + std::string(kNames[ks[i]]);
  if (ks.size() == 3) name = "concurrent all";
  std::uniform_real_distribution<double> spin_ms(0.0, o.max_spin_ms);
  nvtxRangePushA(name.c_str());
  std::vector<long> calls(ks.size(), 0);
  const double end = now_s() + o.phase_s;
  while (now_s() < end) {
    for (int i = 0; i < 16; ++i)
      for (size_t j = 0; j < ks.size(); ++j) {
        const double delay_ms = spin_ms(rng);
        if (o.device_delay)
          spin<<<1, 32, 0, streams[j]>>>(static_cast<long long>(delay_ms * 1e6));
        else  // the host waits before it launches: a stream whose queue has run dry starts later
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
        w.launch<1>(ks[j], streams[j]);
        ++calls[j];
      }
    for (size_t j = 0; j < ks.size(); ++j) cudaStreamSynchronize(streams[j]);
  }
  nvtxRangePop();
  std::printf("phase %-22s calls", name.c_str());
  for (size_t j = 0; j < ks.size(); ++j) std::printf(" %s=%ld", kNames[ks[j]], calls[j]);
  std::printf("\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const double v = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--phase-s"))
      o.phase_s = v;
    else if (!std::strcmp(argv[i], "--gap-s"))
      o.gap_s = v;
    else if (!std::strcmp(argv[i], "--target-ms"))
      o.target_ms = v;
    else if (!std::strcmp(argv[i], "--max-spin-ms"))
      o.max_spin_ms = v;
    else if (!std::strcmp(argv[i], "--delay") &&
             (!std::strcmp(argv[i + 1], "host") || !std::strcmp(argv[i + 1], "device")))
      o.device_delay = !std::strcmp(argv[i + 1], "device");
    else
      return false;
  }
  return argc % 2 == 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: cuda_overlap [--phase-s 4] [--gap-s 0.5] [--target-ms 3] [--max-spin-ms 2] "
                 "[--delay host|device]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("cuda_overlap: no CUDA device: skipped");
    return 77;
  }
  Work w;
  cudaDeviceGetAttribute(&w.sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t gemm_elems = static_cast<size_t>(w.n_gemm) * w.n_gemm;
  if (!check(cudaMalloc(&w.out, sizeof(float)), "cudaMalloc") ||
      !check(cudaMalloc(&w.a, w.n_stream * sizeof(float)), "cudaMalloc") ||
      !check(cudaMalloc(&w.b, w.n_stream * sizeof(float)), "cudaMalloc") ||
      !check(cudaMalloc(&w.c, w.n_stream * sizeof(float)), "cudaMalloc") ||
      !check(cudaMalloc(&w.ga, gemm_elems * sizeof(half)), "cudaMalloc") ||
      !check(cudaMalloc(&w.gb, gemm_elems * sizeof(half)), "cudaMalloc") ||
      !check(cudaMalloc(&w.gc, gemm_elems * sizeof(float)), "cudaMalloc"))
    return 1;
  cudaMemset(w.b, 0, w.n_stream * sizeof(float));
  cudaMemset(w.c, 0, w.n_stream * sizeof(float));
  cudaMemset(w.ga, 0, gemm_elems * sizeof(half));
  cudaMemset(w.gb, 0, gemm_elems * sizeof(half));
  cudaStream_t streams[3];
  for (auto& s : streams) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  calibrate(w, o.target_ms, streams[0]);
  std::mt19937 rng(13);

  idle(o.gap_s);
  for (int k = 0; k < 3; ++k) {
    alone(w, k, o, streams[0]);
    idle(o.gap_s);
  }
  concurrent(w, {0, 1, 2}, o, streams, rng);
  idle(o.gap_s);
  for (const auto& pair : std::vector<std::vector<int>>{{0, 1}, {0, 2}, {1, 2}}) {
    concurrent(w, pair, o, streams, rng);
    idle(o.gap_s);
  }
  if (!check(cudaDeviceSynchronize(), "kernels")) return 1;
  std::puts("cuda_overlap: done");
  return 0;
}
