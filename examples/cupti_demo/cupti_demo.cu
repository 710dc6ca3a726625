// A small CUDA program for libdooly_cupti.so: two kernels of different cost on two streams, a copy each way and a
// memset, inside NVTX ranges. It knows nothing of dooly; run it with
//   CUDA_INJECTION64_PATH=<build>/src/dooly/cupti/libdooly_cupti.so ./cupti_demo [seconds]
// Without a GPU it says so and exits with 77 (CTest's "skipped").
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

__global__ void saxpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + y[i];
}

__global__ void fma_chain(float* out, int iters) {
  float v = threadIdx.x * 1e-3f, w = 1.0001f;
  for (int i = 0; i < iters; ++i) v = fmaf(v, w, 1e-7f);
  if (v == -1.0f) out[0] = v;  // never true: keeps the loop
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cupti_demo: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("cupti_demo: no CUDA device (%s): skipped\n", cudaGetErrorString(status));
    return 77;
  }
  const int n = 1 << 24;
  float *x = nullptr, *y = nullptr, *out = nullptr;
  if (!ok(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc") || !ok(cudaMalloc(&y, n * sizeof(float)), "cudaMalloc") ||
      !ok(cudaMalloc(&out, sizeof(float)), "cudaMalloc"))
    return 1;
  float* host = nullptr;
  if (!ok(cudaMallocHost(&host, n * sizeof(float)), "cudaMallocHost")) return 1;
  for (int i = 0; i < n; ++i) host[i] = 1.0f;
  cudaStream_t s1, s2;
  cudaStreamCreate(&s1);
  cudaStreamCreate(&s2);

  nvtxRangePushA("setup");
  cudaMemcpyAsync(x, host, n * sizeof(float), cudaMemcpyHostToDevice, s1);
  cudaMemsetAsync(y, 0, n * sizeof(float), s1);
  cudaStreamSynchronize(s1);
  nvtxRangePop();

  long steps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    nvtxRangePushA("step");
    saxpy<<<1024, 256, 0, s1>>>(y, x, 1.5f, n);
    fma_chain<<<528, 256, 0, s2>>>(out, 20000);
    cudaStreamSynchronize(s1);
    cudaStreamSynchronize(s2);
    nvtxRangePop();
    ++steps;
  }
  nvtxRangePushA("teardown");
  cudaMemcpyAsync(host, y, n * sizeof(float), cudaMemcpyDeviceToHost, s1);
  cudaStreamSynchronize(s1);
  nvtxRangePop();
  if (!ok(cudaGetLastError(), "kernels")) return 1;
  std::printf("cupti_demo: steps=%ld y[0]=%g\n", steps, host[0]);
  cudaFreeHost(host);
  cudaFree(x);
  cudaFree(y);
  cudaFree(out);
  return 0;
}
