// A stand-in for a CUDA program run with CUDA_INJECTION64_PATH: loads libdooly_cupti.so the way the driver does
// (dlopen, then InitializeInjection), has the stub libcupti deliver a few kernels, and exits normally, so the
// report is written by the library's exit handler. Usage: injection_app LIBDOOLY_CUPTI STUB_CUPTI [LIBCUDA]
// With LIBCUDA (the stub libcuda) it plays the driver more closely: InitializeInjection runs "inside cuInit"
// (DOOLY_STUB_CUDA_INSIDE_INIT=1), and the program's own cuInit follows and must succeed.
// Built with the CUDA toolkit's NVTX headers (DOOLY_REAL_NVTX), it also opens an NVTX range around its kernels the
// way an instrumented program does: the real NVTX finds the library through NVTX_INJECTION64_PATH at its first call.
#include <dlfcn.h>
#ifdef DOOLY_REAL_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  void* tool = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!tool) {
    std::fprintf(stderr, "app: %s\n", dlerror());
    return 3;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(tool, "InitializeInjection"));
  if (argc == 4) setenv("DOOLY_STUB_CUDA_INSIDE_INIT", "1", 1);
  if (!init || init() != 1) return 4;
  if (argc == 4) {
    unsetenv("DOOLY_STUB_CUDA_INSIDE_INIT");
    void* cuda = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
    auto cu_init = cuda ? reinterpret_cast<int (*)(unsigned)>(dlsym(cuda, "cuInit")) : nullptr;
    const int rc = cu_init ? cu_init(0) : -1;
    if (rc != 0) {
      std::fprintf(stderr, "app: the program's cuInit failed after the injection (CUDA error %d)\n", rc);
      return 5;
    }
  }
  void* stub = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);  // the copy the tool loaded (same path)
  if (!stub) return 0;                                  // the tool could not load it: nothing to deliver
  auto now = reinterpret_cast<uint64_t (*)(uint64_t*)>(dlsym(stub, "cuptiGetTimestamp"));
  auto kernel = reinterpret_cast<void (*)(const char*, uint64_t, uint64_t, uint32_t, uint32_t, uint32_t)>(
      dlsym(stub, "stub_cupti_kernel"));
  auto deliver = reinterpret_cast<int (*)()>(dlsym(stub, "stub_cupti_deliver"));
#ifdef DOOLY_REAL_NVTX
  const int level = nvtxRangePushA("app step");
  const nvtxRangeId_t id = nvtxRangeStartA("app started range");
#endif
  uint64_t g = 0;
  now(&g);
  for (int i = 0; i < 10; ++i) kernel("_Z7stencilPfi", g + i * 2'000'000, g + i * 2'000'000 + 1'000'000, 0, 1, 7);
  deliver();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
#ifdef DOOLY_REAL_NVTX
  nvtxRangeEnd(id);
  if (const int popped = nvtxRangePop();
      popped != level) {  // 0 and 0 with the tool; without one, NVTX's own code for both
    std::fprintf(stderr, "app: nvtxRangePush returned %d, nvtxRangePop %d\n", level, popped);
    return 6;
  }
#endif
  std::puts("app: done");
  return 0;  // the report is written at exit
}
