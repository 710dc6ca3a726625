#include "dooly/energy/sampler.hpp"

#include <sys/resource.h>

#include "dooly/common/clock.hpp"

namespace dooly::energy {

Sampler::Sampler(int64_t period_ns, Tick tick)
    : period_ns_(period_ns > 0 ? period_ns : 1'000'000), tick_(std::move(tick)) {}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void Sampler::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Sampler::run() {
  const int64_t origin = now_ns();
  int64_t k = 0;
  while (true) {
    tick_(now_ns());
    ticks_.fetch_add(1);
    account();
    ++k;
    int64_t deadline = origin + k * period_ns_;
    const int64_t now = now_ns();
    if (now >= deadline) {
      // Overran: skip to the next deadline on the grid rather than bursting to catch up.
      const int64_t behind = (now - deadline) / period_ns_ + 1;
      missed_.fetch_add(static_cast<uint64_t>(behind));
      k += behind;
      deadline = origin + k * period_ns_;
    }
    std::unique_lock<std::mutex> lock(mu_);
    // steady_clock and now_ns() share an epoch: both are std::chrono::steady_clock.
    const auto when = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline));
    if (cv_.wait_until(lock, when, [this] { return stop_requested_; })) break;
  }
  tick_(now_ns());  // the last readings and events before the thread ends
  ticks_.fetch_add(1);
  account();
}

void Sampler::account() noexcept {
  cpu_ns_.store(thread_cpu_ns());
  rusage u{};
  if (getrusage(RUSAGE_THREAD, &u) == 0) faults_.store(static_cast<uint64_t>(u.ru_minflt + u.ru_majflt));
}

}  // namespace dooly::energy
