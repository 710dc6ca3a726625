// GPU validation of the nvml backend against the real driver (not a unit test; needs an NVIDIA GPU):
//   build/<dir>/tests/power/power_nvml_live
// Prints, for each read mode, the channel, the first readings, the cost of a poll and the energy counter
// over the same second, then what the driver's nvmlDeviceGetSamples does with a null buffer, an empty
// backlog and a short buffer (the behaviour the stub in tests/power/stub_nvml mimics).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/dynamic_library.hpp"
#include "dooly/power/nvml/nvml_abi.hpp"
#include "dooly/power/nvml/nvml_provider.hpp"

using namespace dooly;
using namespace dooly::power;

namespace {

void check_mode(const char* mode) {
  if (mode)
    setenv("DOOLY_NVML_MODE", mode, 1);
  else
    unsetenv("DOOLY_NVML_MODE");
  std::printf("=== DOOLY_NVML_MODE=%s\n", mode ? mode : "(unset)");
  try {
    auto s = make_nvml_provider()->open(Options{});
    const int64_t t_open = now_ns();
    for (const auto& c : s->channels())
      std::printf("%s (device %d, window %lld ns, update %lld ns): %s\n", c.name.c_str(), c.device,
                  static_cast<long long>(c.sensor.window_ns), static_cast<long long>(c.sensor.update_ns),
                  c.sensor.description.c_str());
    const auto e0 = s->energy_counter_j(0);
    const int64_t te0 = now_ns();
    std::vector<Reading> all;
    int64_t cost_ns = 0;
    const int polls = 25;
    for (int i = 0; i < polls; ++i) {
      std::vector<Reading> r;
      const int64_t t0 = now_ns();
      const PollStatus st = s->poll(r);
      const int64_t t1 = now_ns();
      if (!st.ok) std::printf("poll %d: %s\n", i, st.message.c_str());
      if (i > 0) cost_ns += t1 - t0;
      all.insert(all.end(), r.begin(), r.end());
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    }
    const auto e1 = s->energy_counter_j(0);
    const int64_t te1 = now_ns();
    int stale = 0;
    double sum_w = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      sum_w += all[i].power_w;
      if (i && all[i].channel == all[i - 1].channel && all[i].t_ns <= all[i - 1].t_ns) ++stale;
    }
    std::printf("%zu readings in %d polls, first stamped %.1f ms after open, mean %.2f W, non-increasing %d\n",
                all.size(), polls, all.empty() ? 0.0 : (all.front().t_ns - t_open) / 1e6,
                all.empty() ? 0.0 : sum_w / all.size(), stale);
    std::printf("poll cost (polls 1..%d, 40 ms apart): %.1f us each\n", polls - 1, cost_ns / (polls - 1) / 1e3);
    if (e0 && e1)
      std::printf("energy counter: %.3f J over %.3f s = %.2f W\n", *e1 - *e0, (te1 - te0) / 1e9,
                  (*e1 - *e0) / ((te1 - te0) / 1e9));
  } catch (const Error& e) {
    std::printf("error: %s\n", e.what());
  }
}

void check_get_samples_semantics() {
  using namespace nvml;
  std::printf("=== nvmlDeviceGetSamples semantics\n");
  DynamicLibrary lib("libnvidia-ml.so.1");
  if (!lib.loaded()) {
    std::printf("%s\n", lib.error().c_str());
    return;
  }
  auto init = lib.symbol<Return (*)()>("nvmlInit_v2");
  auto shutdown = lib.symbol<Return (*)()>("nvmlShutdown");
  auto handle = lib.symbol<Return (*)(unsigned, Device*)>("nvmlDeviceGetHandleByIndex_v2");
  auto samples = lib.symbol<Return (*)(Device, int, unsigned long long, int*, unsigned*, Sample*)>("nvmlDeviceGetSamples");
  Device d = nullptr;
  if (init() != kSuccess || handle(0, &d) != kSuccess) return;
  for (long long back_us : {0LL, 100000LL, 1LL}) {
    const unsigned long long last = back_us ? static_cast<unsigned long long>(wall_now_us() - back_us) : 0;
    int type = -1;
    unsigned count = 0;
    Return rc = samples(d, kTotalPowerSamples, last, &type, &count, nullptr);
    std::printf("lastSeen = %s: null buffer -> rc %d, count %u, value type %d", back_us ? "recent" : "0", rc, count, type);
    std::vector<Sample> buf(256);
    unsigned n = 256;
    const int64_t t0 = now_ns();
    rc = samples(d, kTotalPowerSamples, last, &type, &n, buf.data());
    const int64_t t1 = now_ns();
    std::printf("; 256-entry buffer -> rc %d, %u samples (%.1f us)", rc, rc == kSuccess ? n : 0, (t1 - t0) / 1e3);
    n = 2;
    rc = samples(d, kTotalPowerSamples, last, &type, &n, buf.data());
    std::printf("; 2-entry buffer -> rc %d, %u samples\n", rc, rc == kSuccess ? n : 0);
  }
  shutdown();
}

}  // namespace

int main() {
  for (const char* mode : {static_cast<const char*>(nullptr), "samples", "instant", "average"}) check_mode(mode);
  check_get_samples_semantics();
  return 0;
}
