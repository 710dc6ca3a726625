// A stand-in for a CUDA program run with CUDA_INJECTION64_PATH: loads libdooly_cupti.so the way the driver does
// (dlopen, then InitializeInjection), has the stub libcupti deliver a few kernels, and exits normally, so the
// report is written by the library's exit handler. Usage: injection_app LIBDOOLY_CUPTI STUB_CUPTI
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* tool = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!tool) {
    std::fprintf(stderr, "app: %s\n", dlerror());
    return 3;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(tool, "InitializeInjection"));
  if (!init || init() != 1) return 4;
  void* stub = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);  // the copy the tool loaded (same path)
  if (!stub) return 0;                                  // the tool could not load it: nothing to deliver
  auto now = reinterpret_cast<uint64_t (*)(uint64_t*)>(dlsym(stub, "cuptiGetTimestamp"));
  auto kernel = reinterpret_cast<void (*)(const char*, uint64_t, uint64_t, uint32_t, uint32_t, uint32_t)>(
      dlsym(stub, "stub_cupti_kernel"));
  auto deliver = reinterpret_cast<int (*)()>(dlsym(stub, "stub_cupti_deliver"));
  uint64_t g = 0;
  now(&g);
  for (int i = 0; i < 10; ++i) kernel("_Z7stencilPfi", g + i * 2'000'000, g + i * 2'000'000 + 1'000'000, 0, 1, 7);
  deliver();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::puts("app: done");
  return 0;  // the report is written at exit
}
