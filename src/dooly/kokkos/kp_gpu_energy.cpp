// libkp_gpu_energy.so: the Kokkos Tools entry points. Each forwards to the tested C++ Connector; nothing
// here throws (every Connector method is noexcept).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "dooly/kokkos/connector.hpp"

namespace {
using dooly::energy::Kind;
using dooly::kokkos::Connector;

// The connector, constructed on first use (init or parse_args); at exit it is finalized (report written, power
// source closed) but never destroyed: Kokkos may still call hooks after this library's exit-time destructors
// (Kokkos::finalize registered with atexit before Kokkos::initialize, a global View released at exit), and
// those must find a connector that measures nothing, not freed memory. What it still holds then is a few
// settings and counters, left to the process's end.
// Its storage follows the pointer that says it is ready, in one aligned block: a kernel hook's check and the
// connector's first fields (all the hook reads of it) share one cache line.
struct alignas(64) ConnectorSlot {
  std::atomic<Connector*> ready{nullptr};
  alignas(alignof(Connector)) unsigned char storage[sizeof(Connector)] = {};
};
constinit ConnectorSlot slot;

[[gnu::noinline, gnu::cold]] Connector& construct_connector() {
  static std::once_flag once;
  std::call_once(once, [] {
    Connector* c = new (slot.storage) Connector;
    // Finalized in the order a function-local static would be destroyed: after everything constructed later.
    static struct Finalizer {
      ~Finalizer() { slot.ready.load(std::memory_order_acquire)->finalize(); }
    } finalizer;
    slot.ready.store(c, std::memory_order_release);
  });
  return *slot.ready.load(std::memory_order_acquire);
}
inline Connector& connector() {
  if (Connector* c = slot.ready.load(std::memory_order_acquire)) [[likely]]
    return *c;
  return construct_connector();
}
}  // namespace

extern "C" {

#define DOOLY_EXPORT __attribute__((visibility("default")))

DOOLY_EXPORT void kokkosp_parse_args(int argc, char** argv) { connector().parse_args(argc, argv); }
DOOLY_EXPORT void kokkosp_print_help(char*) { connector().print_help(); }
DOOLY_EXPORT void kokkosp_init_library(const int load_seq, const uint64_t interface_ver, const uint32_t,
                                       Kokkos_Profiling_KokkosPDeviceInfo*) {
  connector().init(load_seq, interface_ver);
}
DOOLY_EXPORT void kokkosp_finalize_library() { connector().finalize(); }
DOOLY_EXPORT void kokkosp_request_tool_settings(const uint32_t n, Kokkos_Tools_ToolSettings* s) {
  connector().request_tool_settings(n, s);
}

DOOLY_EXPORT void kokkosp_begin_parallel_for(const char* name, const uint32_t dev, uint64_t* kid) {
  connector().begin_kernel(Kind::kernel_for, name, dev, kid);
}
DOOLY_EXPORT void kokkosp_end_parallel_for(const uint64_t kid) { connector().end_kernel(kid); }
DOOLY_EXPORT void kokkosp_begin_parallel_reduce(const char* name, const uint32_t dev, uint64_t* kid) {
  connector().begin_kernel(Kind::kernel_reduce, name, dev, kid);
}
DOOLY_EXPORT void kokkosp_end_parallel_reduce(const uint64_t kid) { connector().end_kernel(kid); }
DOOLY_EXPORT void kokkosp_begin_parallel_scan(const char* name, const uint32_t dev, uint64_t* kid) {
  connector().begin_kernel(Kind::kernel_scan, name, dev, kid);
}
DOOLY_EXPORT void kokkosp_end_parallel_scan(const uint64_t kid) { connector().end_kernel(kid); }

DOOLY_EXPORT void kokkosp_push_profile_region(const char* name) { connector().push_region(name); }
DOOLY_EXPORT void kokkosp_pop_profile_region() { connector().pop_region(); }

DOOLY_EXPORT void kokkosp_create_profile_section(const char* name, uint32_t* id) {
  connector().create_section(name, id);
}
DOOLY_EXPORT void kokkosp_start_profile_section(const uint32_t id) { connector().start_section(id); }
DOOLY_EXPORT void kokkosp_stop_profile_section(const uint32_t id) { connector().stop_section(id); }
DOOLY_EXPORT void kokkosp_destroy_profile_section(const uint32_t id) { connector().destroy_section(id); }

DOOLY_EXPORT void kokkosp_profile_event(const char* name) { connector().profile_event(name); }
DOOLY_EXPORT void kokkosp_declare_metadata(const char* key, const char* value) {
  connector().declare_metadata(key, value);
}

DOOLY_EXPORT void kokkosp_begin_fence(const char* name, const uint32_t dev, uint64_t* handle) {
  connector().begin_fence(name, dev, handle);
}
DOOLY_EXPORT void kokkosp_end_fence(const uint64_t handle) { connector().end_fence(handle); }

DOOLY_EXPORT void kokkosp_allocate_data(const Kokkos_Profiling_SpaceHandle space, const char* label, const void*,
                                        const uint64_t size) {
  connector().allocate(space, label, size);
}
DOOLY_EXPORT void kokkosp_deallocate_data(const Kokkos_Profiling_SpaceHandle space, const char* label, const void*,
                                          const uint64_t size) {
  connector().deallocate(space, label, size);
}
DOOLY_EXPORT void kokkosp_begin_deep_copy(Kokkos_Profiling_SpaceHandle dst, const char* dst_label, const void*,
                                          Kokkos_Profiling_SpaceHandle src, const char* src_label, const void*,
                                          uint64_t size) {
  connector().begin_deep_copy(dst, dst_label, src, src_label, size);
}
DOOLY_EXPORT void kokkosp_end_deep_copy() { connector().end_deep_copy(); }

}  // extern "C"
