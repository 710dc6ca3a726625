// Two Kokkos kernels whose rankings by time and by energy differ on an NVIDIA H200:
//   stream_triad  a(i) = b(i) + s*c(i) over arrays of a few GiB: memory-bound, ~410 W
//   fma_chain     FP32 FMA chains in registers, almost no memory traffic: ~330 W   (idle ~124 W)
// Phases, each a Kokkos region, separated by idle gaps (with --labels phase the alone phases' kernels are
// labelled stream_triad@alone and fma_chain@alone):
//   alone:stream   the triad alone for seconds
//   alone:fma      the FMA kernel alone for seconds
//   interleaved    one triad, one FMA, one triad, ... (a few ms per kernel), the FMA kernel tuned (from a
//                  calibration) to run --time-ratio times as long as the triad: it takes more time in total
//                  yet, drawing less power, less energy -- the inversion a time-only profiler misses.
// For checking the attribution, the program reads the GPU's own energy counter at the phase edges through
// dooly's NVML backend and prints one line per phase:
//   reference phase=<name> kernel=<k> calls=<n> time_s=<t> kernel_time_s=<t> counter_j=<E>
// (idle gaps too, in two lines: <gap>:head, which still holds the tail of the previous phase as the counter
// lags, and <gap>, whose counter_j / time_s is the idle power). Without an NVIDIA GPU it says the reference
// is unavailable and runs on (Serial builds: a CPU smoke test).
//   kokkos_energy_demo [--stream-mib 2048] [--alone-s 3] [--interleaved-s 6] [--idle-s 1] [--time-ratio 0=auto]
//                      [--fma-n 16384] [--fma-iters 0 (calibrate)] [--device 0] [--labels same|phase]
//                      [--no-reference] [--no-bracket]
// --time-ratio auto: with the energy counter, a 1 s probe of each kernel measures both powers and the ratio is
// the geometric middle of the interval where the inversion holds; without it, 1.12.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dooly/power/nvml/nvml_provider.hpp"
#include "dooly/power/power_source.hpp"

// A named namespace: nvcc's extended lambdas may not sit in a class of an unnamed one.
namespace demo {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  double stream_mib = 2048;  // per array (three arrays)
  double alone_s = 3.0;
  double interleaved_s = 6.0;
  double idle_s = 1.0;
  double time_ratio = 0;     // FMA call time / triad call time while interleaved; 0 = auto (see main)
  long fma_n = 16384;        // FMA threads: part of the GPU only, so the FMA kernel draws clearly less than the triad
  bool phase_labels = false; // --labels phase: kernels in the alone phases get "@alone" (own rows)
  bool bracket = true;        // --no-bracket: no second pair of alone phases after the interleaved one
  long fma_iters = 0;        // 0: calibrate against the triad
  int device = 0;
  bool reference = true;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "kokkos_energy_demo: %s\nusage: kokkos_energy_demo [--stream-mib MiB] [--alone-s S] [--interleaved-s S] "
               "[--idle-s S] [--time-ratio R|0=auto] [--fma-n N] [--fma-iters I] [--device D] [--labels same|phase] "
               "[--no-reference] [--no-bracket]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> double {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      char* end = nullptr;
      const double v = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || v < 0) usage(("bad value for " + a).c_str());
      return v;
    };
    if (a == "--stream-mib") o.stream_mib = value();
    else if (a == "--alone-s") o.alone_s = value();
    else if (a == "--interleaved-s") o.interleaved_s = value();
    else if (a == "--idle-s") o.idle_s = value();
    else if (a == "--time-ratio") o.time_ratio = value();
    else if (a == "--fma-n") o.fma_n = static_cast<long>(value());
    else if (a == "--fma-iters") o.fma_iters = static_cast<long>(value());
    else if (a == "--device") o.device = static_cast<int>(value());
    else if (a == "--no-reference") o.reference = false;
    else if (a == "--no-bracket") o.bracket = false;
    else if (a == "--labels") {
      const std::string v = i + 1 < argc ? argv[++i] : "";
      if (v != "same" && v != "phase") usage("--labels takes same or phase");
      o.phase_labels = v == "phase";
    }
    else usage(("unknown argument " + a).c_str());
  }
  if (o.fma_n < 1 || o.stream_mib <= 0) usage("sizes must be positive");
  return o;
}

// The GPU's energy counter through dooly's NVML backend (opened once; read only at phase edges: ~4 ms a read).
class Reference {
 public:
  Reference(bool wanted, int device) {
    if (!wanted) {
      why_ = "disabled (--no-reference)";
      return;
    }
    try {
      auto provider = dooly::power::make_nvml_provider();
      dooly::power::Options o;
      o.cuda_devices = {device};
      const dooly::power::Probe p = provider->probe(o);
      if (!p.available) {
        why_ = p.reason;
        return;
      }
      session_ = provider->open(o);
      if (!session_->supports_energy_counter()) {
        why_ = "this GPU has no total-energy counter";
        session_.reset();
      }
    } catch (const std::exception& e) {
      why_ = e.what();
      session_.reset();
    }
  }
  bool available() const { return session_ != nullptr; }
  const std::string& why() const { return why_; }
  std::optional<double> read_j() { return session_ ? session_->energy_counter_j(0) : std::nullopt; }

 private:
  std::unique_ptr<dooly::power::Session> session_;
  std::string why_;
};

using Vec = Kokkos::View<float*>;

struct Kernels {
  Vec a, b, c, fma_out;
  long fma_iters = 1;
  double stream_s = 0, fma_s = 0;  // kernel time, summed (each call fenced)
  long stream_calls = 0, fma_calls = 0;
  // Label suffix: "@calibrate" while calibrating; "@alone" in the alone phases with --labels phase (then the
  // report gives each phase's kernels their own rows: the trapezoid's interleaved J/call stands alone). With
  // the same labels in every phase (default) the model mode fits one power per kernel over the whole run.
  std::string tag;

  void triad() {
    const auto t0 = Clock::now();
    Vec a_ = a, b_ = b, c_ = c;
    Kokkos::parallel_for("stream_triad" + tag, a.extent(0), KOKKOS_LAMBDA(const long i) { a_(i) = b_(i) + 3.0f * c_(i); });
    Kokkos::fence();
    stream_s += seconds_since(t0);
    ++stream_calls;
  }
  void fma() {
    const auto t0 = Clock::now();
    Vec out = fma_out;
    const long iters = fma_iters;
    Kokkos::parallel_for("fma_chain" + tag, out.extent(0), KOKKOS_LAMBDA(const long i) {
      // Eight independent chains keep the FMA pipes full; the constants keep values bounded.
      float x0 = i * 1e-7f, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
      for (long k = 0; k < iters; ++k) {
        x0 = x0 * 0.9999f + 0.0001f; x1 = x1 * 0.9999f + 0.0001f; x2 = x2 * 0.9999f + 0.0001f;
        x3 = x3 * 0.9999f + 0.0001f; x4 = x4 * 0.9999f + 0.0001f; x5 = x5 * 0.9999f + 0.0001f;
        x6 = x6 * 0.9999f + 0.0001f; x7 = x7 * 0.9999f + 0.0001f;
      }
      out(i) = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
    });
    Kokkos::fence();
    fma_s += seconds_since(t0);
    ++fma_calls;
  }
  void reset_counts() { stream_s = fma_s = 0; stream_calls = fma_calls = 0; }
};

struct Phase {
  Reference& ref;
  const char* name;
  Clock::time_point t0;
  std::optional<double> e0;
  Phase(Reference& r, const char* n) : ref(r), name(n) {
    Kokkos::fence();
    e0 = ref.read_j();
    t0 = Clock::now();
    Kokkos::Profiling::pushRegion(name);
  }
  // Prints the phase's line; returns the counter's joules over the phase (when there is a counter).
  std::optional<double> end(const char* kernel, const std::string& calls, double kernel_time_s) {
    Kokkos::fence();
    Kokkos::Profiling::popRegion();
    const double t = seconds_since(t0);
    const std::optional<double> e1 = ref.read_j();
    if (e0 && e1)
      std::printf("reference phase=%s kernel=%s calls=%s time_s=%.6f kernel_time_s=%.6f counter_j=%.6f\n", name, kernel,
                  calls.c_str(), t, kernel_time_s, *e1 - *e0);
    else
      std::printf("phase %s kernel=%s calls=%s time_s=%.6f kernel_time_s=%.6f\n", name, kernel, calls.c_str(), t,
                  kernel_time_s);
    std::fflush(stdout);
    if (e0 && e1) return *e1 - *e0;
    return std::nullopt;
  }
  double seconds() const { return seconds_since(t0); }
};

// An idle gap, read in two parts. The energy counter lags the GPU (it is updated about every 100 ms; on the
// H200 a busy phase's tail showed up in the next gap's first tens of ms), so the gap's head (<name>:head,
// the first third, at most 0.5 s) still holds some of the previous phase's energy and only the rest
// (<name>) gives the idle power. A lag-robust reference for a busy phase is then
// counter(phase) + counter(next head) - next head's time x idle power (summarize_kokkos.py).
void idle(Reference& ref, const char* name, double s) {
  const double head_s = std::min(0.5, s / 3);
  const std::string head = std::string(name) + ":head";
  {
    Phase h(ref, head.c_str());
    std::this_thread::sleep_for(std::chrono::duration<double>(head_s));
    h.end("none", "0", 0.0);
  }
  Phase p(ref, name);
  std::this_thread::sleep_for(std::chrono::duration<double>(s - head_s));
  p.end("none", "0", 0.0);
}

}  // namespace demo

int main(int argc, char* argv[]) {
  using namespace demo;
  Kokkos::initialize(argc, argv);
  bool ok = false;
  {
    const Options opt = parse(argc, argv);
    Reference ref(opt.reference, opt.device);
    if (ref.available())
      std::printf("demo: reference = GPU %d energy counter (nvmlDeviceGetTotalEnergyConsumption) at phase edges\n",
                  opt.device);
    else
      std::printf("demo: reference unavailable: %s\n", ref.why().c_str());

    Kernels k;
    const long n = static_cast<long>(opt.stream_mib * 1024 * 1024 / sizeof(float));
    k.a = Vec("a", n);
    k.b = Vec("b", n);
    k.c = Vec("c", n);
    k.fma_out = Vec("fma_out", opt.fma_n);
    Kokkos::deep_copy(k.b, 1.0f);
    Kokkos::deep_copy(k.c, 2.0f);
    std::printf("demo: %s, triad over 3 x %.0f MiB, fma over %ld threads\n",
                Kokkos::DefaultExecutionSpace::name(), opt.stream_mib, opt.fma_n);

    // Calibration: the FMA inner loop count that makes one FMA call last `ratio` triad calls.
    auto fma_time = [&k](long iters, int reps) {
      k.fma_iters = iters;
      k.reset_counts();
      for (int i = 0; i < reps; ++i) k.fma();
      return k.fma_s / reps;
    };
    double t_triad = 0;
    auto tune_fma = [&](double ratio) {
      Kokkos::Profiling::pushRegion("calibrate");
      k.tag = "@calibrate";
      const double target = ratio * t_triad;
      long iters = k.fma_iters;
      for (int round = 0; round < 2; ++round) {
        const double t = fma_time(iters, 3);
        iters = std::max<long>(1, static_cast<long>(static_cast<double>(iters) * target / t));
      }
      const double t_fma = fma_time(iters, 3);
      Kokkos::Profiling::popRegion();
      std::printf("demo: fma tuned to %.3f ms/call = %.3f x triad (%ld iterations x 8 chains)\n", t_fma * 1e3,
                  t_fma / t_triad, k.fma_iters);
      k.reset_counts();
    };
    {
      Kokkos::Profiling::pushRegion("calibrate");
      k.tag = "@calibrate";
      k.triad();
      k.reset_counts();
      for (int i = 0; i < 5; ++i) k.triad();
      t_triad = k.stream_s / 5;
      if (opt.fma_iters > 0) {
        fma_time(opt.fma_iters, 1);
      } else {
        // Two points remove the launch + fence overhead from the per-iteration cost.
        fma_time(256, 1);  // warm-up
        const double t1 = fma_time(256, 3), t2 = fma_time(2048, 3);
        const double per_iter = std::max(1e-12, (t2 - t1) / (2048 - 256));
        const double fixed_s = std::max(0.0, t1 - 256 * per_iter);
        k.fma_iters = std::max<long>(1, static_cast<long>((1.12 * t_triad - fixed_s) / per_iter));
      }
      Kokkos::Profiling::popRegion();
      std::printf("demo: triad %.3f ms/call\n", t_triad * 1e3);
      k.reset_counts();
      if (opt.fma_iters <= 0) tune_fma(opt.time_ratio > 0 ? opt.time_ratio : 1.12);
    }
    // Auto ratio: the inversion needs 1 < T_fma / T_stream < P_stream / P_fma (energy(J) includes idle). With a
    // counter, a short probe of each kernel measures both powers, and the FMA kernel is tuned to the geometric
    // middle of that interval -- before the alone phases, so alone and interleaved run the same kernels.
    if (opt.time_ratio <= 0 && opt.fma_iters <= 0 && ref.available()) {
      auto probe_w = [&](bool stream) -> std::optional<double> {
        Kokkos::Profiling::pushRegion("calibrate");
        k.tag = "@calibrate";
        Kokkos::fence();
        const std::optional<double> e0 = ref.read_j();
        const auto t0 = Clock::now();
        do stream ? k.triad() : k.fma(); while (seconds_since(t0) < 1.0);
        Kokkos::fence();
        const double t = seconds_since(t0);
        const std::optional<double> e1 = ref.read_j();
        Kokkos::Profiling::popRegion();
        k.reset_counts();
        if (!e0 || !e1) return std::nullopt;
        return (*e1 - *e0) / t;
      };
      const std::optional<double> stream_w = probe_w(true), fma_w = probe_w(false);
      if (stream_w && fma_w) {
        const double span = *stream_w / *fma_w;
        const double ratio = span > 1.02 ? std::min(1.3, std::sqrt(span)) : 1.12;
        std::printf("demo: probe: stream %.1f W, fma %.1f W -> interleaved time ratio %.3f%s\n", *stream_w, *fma_w,
                    ratio, span > 1.02 ? "" : " (the FMA kernel draws as much as the triad: no inversion possible)");
        tune_fma(ratio);
      }
    }

    idle(ref, "idle:start", opt.idle_s);

    auto alone_stream = [&](const char* name) {
      Phase p(ref, name);
      k.tag = opt.phase_labels ? "@alone" : "";
      const auto t0 = Clock::now();
      do k.triad(); while (seconds_since(t0) < opt.alone_s);
      p.end(opt.phase_labels ? "stream_triad@alone" : "stream_triad", std::to_string(k.stream_calls), k.stream_s);
      k.reset_counts();
    };
    auto alone_fma = [&](const char* name) {
      Phase p(ref, name);
      k.tag = opt.phase_labels ? "@alone" : "";
      const auto t0 = Clock::now();
      do k.fma(); while (seconds_since(t0) < opt.alone_s);
      p.end(opt.phase_labels ? "fma_chain@alone" : "fma_chain", std::to_string(k.fma_calls), k.fma_s);
      k.reset_counts();
    };
    alone_stream("alone:stream");
    idle(ref, "idle:after_stream", opt.idle_s);
    alone_fma("alone:fma");
    idle(ref, "idle:after_fma", opt.idle_s);
    {
      Phase p(ref, "interleaved");
      k.tag = "";
      const auto t0 = Clock::now();
      do {
        k.triad();
        k.fma();
      } while (seconds_since(t0) < opt.interleaved_s);
      p.end("stream_triad+fma_chain", std::to_string(k.stream_calls) + "+" + std::to_string(k.fma_calls),
            k.stream_s + k.fma_s);
      std::printf("demo: interleaved: stream_triad %ld calls %.6f s, fma_chain %ld calls %.6f s (fma/stream time %.3f)\n",
                  k.stream_calls, k.stream_s, k.fma_calls, k.fma_s, k.stream_s > 0 ? k.fma_s / k.stream_s : 0.0);
      k.reset_counts();
    }
    idle(ref, "idle:end", opt.idle_s);
    if (opt.bracket) {
      // The same alone phases again after the interleaved one: the GPU warms over the run, so the alone
      // reference for the interleaved calls is the mean of before and after (scripts/gpu/summarize_kokkos.py).
      alone_stream("alone:stream:after");
      idle(ref, "idle:after_stream2", opt.idle_s);
      alone_fma("alone:fma:after");
      idle(ref, "idle:end2", opt.idle_s);
    }

    // Read something back so the kernels cannot be optimised away.
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), k.a);
    // a = b + 3c with b = 1, c = 2: anything else means the kernels did not run as written.
    ok = host(0) == 7.0f;
    std::printf("demo: done (a[0] = %.1f%s)\n", static_cast<double>(host(0)), ok ? "" : ", WRONG: expected 7");
    std::fflush(stdout);
  }
  Kokkos::finalize();
  return ok ? 0 : 1;
}
