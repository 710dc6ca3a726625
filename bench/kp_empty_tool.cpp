// An empty Kokkos Tools library: kernel hooks that do nothing. Loaded in place of a real tool it measures
// what Kokkos itself spends on a tool being present (hook dispatch plus the global fences it implies), so a
// tool's own cost = its per-kernel figure - this one's.
#include <cstdint>

#define KP_EMPTY_EXPORT extern "C" __attribute__((visibility("default")))

struct Kokkos_Profiling_KokkosPDeviceInfo;

KP_EMPTY_EXPORT void kokkosp_init_library(int, uint64_t, uint32_t, Kokkos_Profiling_KokkosPDeviceInfo*) {}
KP_EMPTY_EXPORT void kokkosp_finalize_library() {}
KP_EMPTY_EXPORT void kokkosp_begin_parallel_for(const char*, uint32_t, uint64_t* kid) { *kid = 0; }
KP_EMPTY_EXPORT void kokkosp_end_parallel_for(uint64_t) {}
KP_EMPTY_EXPORT void kokkosp_begin_parallel_reduce(const char*, uint32_t, uint64_t* kid) { *kid = 0; }
KP_EMPTY_EXPORT void kokkosp_end_parallel_reduce(uint64_t) {}
KP_EMPTY_EXPORT void kokkosp_begin_parallel_scan(const char*, uint32_t, uint64_t* kid) { *kid = 0; }
KP_EMPTY_EXPORT void kokkosp_end_parallel_scan(uint64_t) {}
