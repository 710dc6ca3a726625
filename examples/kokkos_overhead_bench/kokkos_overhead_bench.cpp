// Per-kernel cost of a Kokkos Tools library: many tiny kernel launches timed around the loop. Run it with no
// tool, an empty tool, simple-kernel-timer and dooly (KOKKOS_TOOLS_LIBS / KOKKOS_PROFILE_LIBRARY) and compare
// ns_per_kernel; a tool's own cost is its figure minus the empty tool's (Kokkos's global fences cost the same
// for every tool). The loop fences after each kernel itself, so "no tool" pays the same fence too.
//   kokkos_overhead_bench [--kernels 200000] [--n 1] [--warmup 1000] [--no-fence]
#include <Kokkos_Core.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace overhead {

struct Options {
  long kernels = 200000;
  long n = 1;
  long warmup = 1000;
  bool fence = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kokkos_overhead_bench: missing value after %s\n", a.c_str());
        std::exit(2);
      }
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || v < 0) {
        std::fprintf(stderr, "kokkos_overhead_bench: bad value for %s\n", a.c_str());
        std::exit(2);
      }
      return v;
    };
    if (a == "--kernels") o.kernels = value();
    else if (a == "--n") o.n = value();
    else if (a == "--warmup") o.warmup = value();
    else if (a == "--no-fence") o.fence = false;
    else {
      std::fprintf(stderr,
                   "kokkos_overhead_bench: unknown argument %s\nusage: kokkos_overhead_bench [--kernels N] [--n N] "
                   "[--warmup N] [--no-fence]\n",
                   a.c_str());
      std::exit(2);
    }
  }
  if (o.n < 1) o.n = 1;
  return o;
}

void launch(Kokkos::View<int*> v, bool fence) {
  Kokkos::parallel_for("tiny", v.extent(0), KOKKOS_LAMBDA(const long i) { v(i) += 1; });
  if (fence) Kokkos::fence();
}

}  // namespace overhead

int main(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  int status = 0;
  {
    const overhead::Options o = overhead::parse(argc, argv);
    Kokkos::View<int*> v("v", o.n);
    for (long i = 0; i < o.warmup; ++i) overhead::launch(v, o.fence);
    Kokkos::fence();
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < o.kernels; ++i) overhead::launch(v, o.fence);
    Kokkos::fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    if (host(0) != static_cast<int>(o.warmup + o.kernels)) status = 1;
    std::printf("kernels=%ld n=%ld fence=%d seconds=%.6f ns_per_kernel=%.1f check=%s\n", o.kernels, o.n,
                o.fence ? 1 : 0, s, o.kernels ? s * 1e9 / static_cast<double>(o.kernels) : 0.0,
                status == 0 ? "ok" : "WRONG");
    std::fflush(stdout);
  }
  Kokkos::finalize();
  return status;
}
