// A small real Kokkos program for the connector's integration test: kernels of every kind, nested regions,
// a section, an event, metadata, explicit fences and a deep copy. The call counts are fixed so the checker
// can assert them exactly: per iteration one "axpy" (for), one "dot" (reduce), one "prefix" (scan), inside
// the regions "solve" (once) > "iteration" (per iteration).
//   kokkos_app [iterations=8] [n=200000]
// Builds against Kokkos 3.4 (Debian's Trilinos) and Kokkos 4.x.
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  int status = 0;
  {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 8;
    const int n = argc > 2 ? std::atoi(argv[2]) : 200000;
    Kokkos::View<double*> x("x", n), y("y", n);
    Kokkos::View<long*> counts("counts", n);

    Kokkos::parallel_for("fill", n, KOKKOS_LAMBDA(const int i) {
      x(i) = 1.0;
      y(i) = 2.0;
      counts(i) = i % 3;
    });
    Kokkos::Tools::declareMetadata("problem_size", std::to_string(n));

    uint32_t section = 0;
    Kokkos::Profiling::createProfileSection("checkpoint_section", &section);

    double dot = 0.0;
    long total = 0;
    Kokkos::Profiling::pushRegion("solve");
    for (int it = 0; it < iterations; ++it) {
      Kokkos::Profiling::pushRegion("iteration");
      Kokkos::parallel_for("axpy", n, KOKKOS_LAMBDA(const int i) { y(i) = 0.5 * y(i) + x(i); });
      double d = 0.0;
      Kokkos::parallel_reduce("dot", n, KOKKOS_LAMBDA(const int i, double& acc) { acc += x(i) * y(i); }, d);
      dot += d;
      long last = 0;
      Kokkos::parallel_scan(
          "prefix", n, KOKKOS_LAMBDA(const int i, long& acc, const bool) { acc += counts(i); }, last);
      total += last;
      Kokkos::fence();
      Kokkos::Profiling::popRegion();
    }
    Kokkos::Profiling::popRegion();

    Kokkos::Profiling::startSection(section);
    auto host = Kokkos::create_mirror(y);  // a separate allocation, so deep_copy really copies
    Kokkos::deep_copy(host, y);
    Kokkos::Profiling::markEvent("checkpoint");
    Kokkos::Profiling::stopSection(section);
    Kokkos::Profiling::destroyProfileSection(section);

    const double y0 = host(0);
    // y converges to 2 (y = y/2 + 1 from y = 2 stays 2).
    if (y0 != 2.0) status = 1;
    std::printf("kokkos_app: iterations=%d n=%d dot=%.1f scan_total=%ld y0=%.1f %s\n", iterations, n, dot, total, y0,
                status == 0 ? "ok" : "WRONG");
    std::fflush(stdout);
  }
  Kokkos::finalize();
  return status;
}
