// libdooly_cupti.so: energy per kernel for any CUDA program, loaded by the CUDA driver through
// CUDA_INJECTION64_PATH (no recompile). The driver calls InitializeInjection at cuInit, NVTX calls
// InitializeInjectionNvtx2; the report is written at exit. Everything forwards to the tested Tracer; nothing here
// throws.
#include <cstdlib>
#include <mutex>
#include <new>

#include "dooly/cupti/tracer.hpp"

namespace {

// Constructed on first use and never destroyed: CUPTI's threads may still deliver a buffer while the process's
// static destructors run. What it holds then is freed with the process.
dooly::cupti::Tracer* tracer() {
  alignas(dooly::cupti::Tracer) static unsigned char storage[sizeof(dooly::cupti::Tracer)];
  static dooly::cupti::Tracer* t = new (storage) dooly::cupti::Tracer;
  return t;
}

void finish_at_exit() { tracer()->finish(); }

}  // namespace

extern "C" {

#define DOOLY_EXPORT __attribute__((visibility("default")))

// 1: initialised (measuring or, when it could not start, said so in one line and running on unmeasured).
DOOLY_EXPORT int InitializeInjection(void) {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      // Registered after the CUDA runtime's own exit handlers, so it runs before them: CUPTI is flushed while
      // the contexts still exist.
      if (tracer()->start()) std::atexit(finish_at_exit);
    } catch (...) {
    }
  });
  return 1;
}

// NVTX's injection entry: NVTX_INJECTION64_PATH names this library (the tracer sets it at start), so each module
// that uses NVTX calls this before its first range. 1: dooly's range functions are in that module's tables.
DOOLY_EXPORT int InitializeInjectionNvtx2(dooly::cupti::abi::NvtxGetExportTable get) {
  return dooly::cupti::Tracer::install_nvtx(get);
}

}  // extern "C"
