#include "dooly/common/fast_clock.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace dooly {

namespace {
bool detect_tsc() noexcept {
#if defined(__x86_64__)
  try {
    if (const char* v = std::getenv("DOOLY_TSC"); v && (!std::strcmp(v, "0") || !std::strcmp(v, "off"))) return false;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("flags", 0) != 0) continue;
      auto has = [&](const char* f) {
        return (" " + line + " ").find(std::string(" ") + f + " ") != std::string::npos;
      };
      return has("constant_tsc") && has("nonstop_tsc");
    }
  } catch (...) {
  }
#endif
  return false;
}
}  // namespace

bool tsc_ticks() noexcept {
  static const bool tsc = detect_tsc();
  return tsc;
}

std::pair<uint64_t, int64_t> TickConverter::read_pair() noexcept {
  // The tightest of a few reads: the steady read lands between two tick reads.
  uint64_t best_t = 0, best_gap = UINT64_MAX;
  int64_t best_ns = 0;
  for (int i = 0; i < 3; ++i) {
    const uint64_t a = ticks();
    const int64_t ns = now_ns();
    const uint64_t b = ticks();
    if (b - a < best_gap) {
      best_gap = b - a;
      best_t = a + (b - a) / 2;
      best_ns = ns;
    }
  }
  return {best_t, best_ns};
}

void TickConverter::calibrate_initial() noexcept {
  calibrate();
  const int64_t until = now_ns() + 1'000'000;
  while (now_ns() < until) {
  }
  calibrate();
}

void TickConverter::calibrate() noexcept {
  const auto [t, ns] = read_pair();
  if (pairs_ > 0 && t <= t1_) return;
  t0_ = t1_;
  ns0_ = ns1_;
  t1_ = t;
  ns1_ = ns;
  ++pairs_;
  if (pairs_ >= 2) ns_per_tick_ = static_cast<double>(ns1_ - ns0_) / static_cast<double>(t1_ - t0_);
}

}  // namespace dooly
