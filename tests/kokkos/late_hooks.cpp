// Kokkos may call a tool's hooks after the tool library's exit-time destructors have run: a program that
// registers Kokkos::finalize with atexit before Kokkos::initialize, or releases a global View at exit. This
// loader does that to libkp_gpu_energy.so (argv[1]): an atexit handler registered before the connector exists
// (so it runs after the library's own exit-time code) calls finalize, a kernel begin/end and a deallocation.
// Passing = exit status 0 and the last line printed.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "dooly/kokkos/kokkos_abi.hpp"

namespace {
using Begin = void (*)(const char*, uint32_t, uint64_t*);
using End = void (*)(uint64_t);
using Finalize = void (*)();
using Init = void (*)(int, uint64_t, uint32_t, Kokkos_Profiling_KokkosPDeviceInfo*);
using Dealloc = void (*)(Kokkos_Profiling_SpaceHandle, const char*, const void*, uint64_t);
Begin begin_for;
End end_for;
Finalize finalize_library;
Dealloc deallocate;

void late() {
  finalize_library();
  uint64_t kid = 0;
  begin_for("after_exit", 0, &kid);
  end_for(kid);
  Kokkos_Profiling_SpaceHandle host{};
  deallocate(host, "global_view", nullptr, 64);
  std::puts("late hooks returned");
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  begin_for = reinterpret_cast<Begin>(dlsym(lib, "kokkosp_begin_parallel_for"));
  end_for = reinterpret_cast<End>(dlsym(lib, "kokkosp_end_parallel_for"));
  finalize_library = reinterpret_cast<Finalize>(dlsym(lib, "kokkosp_finalize_library"));
  deallocate = reinterpret_cast<Dealloc>(dlsym(lib, "kokkosp_deallocate_data"));
  auto init = reinterpret_cast<Init>(dlsym(lib, "kokkosp_init_library"));
  if (!begin_for || !end_for || !finalize_library || !deallocate || !init) return 2;
  std::atexit(late);  // before the connector exists: runs after the library's exit-time code
  init(0, 20211015, 0, nullptr);
  uint64_t kid = 0;
  begin_for("before_exit", 0, &kid);
  end_for(kid);
  return 0;
}
