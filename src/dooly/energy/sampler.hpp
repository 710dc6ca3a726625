#pragma once
// A background thread that calls `tick` on a fixed cadence of absolute deadlines (start + k * period), so
// the cadence does not drift with the tick's own duration. A tick that overruns skips to the next deadline
// on the grid and is counted. stop() wakes the thread at once and runs one last tick.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace dooly::energy {

class Sampler {
 public:
  using Tick = std::function<void(int64_t now_ns)>;
  Sampler(int64_t period_ns, Tick tick);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  void start();
  void stop();

  uint64_t ticks() const noexcept { return ticks_.load(); }
  uint64_t missed_deadlines() const noexcept { return missed_.load(); }
  double thread_cpu_s() const noexcept { return cpu_ns_.load() * 1e-9; }  // CPU time the thread used
  uint64_t page_faults() const noexcept { return faults_.load(); }        // minor + major, the thread's own
  int64_t period_ns() const noexcept { return period_ns_; }

 private:
  void run();
  const int64_t period_ns_;
  Tick tick_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  std::atomic<uint64_t> ticks_{0}, missed_{0};
  std::atomic<int64_t> cpu_ns_{0};
  std::atomic<uint64_t> faults_{0};
  void account() noexcept;  // the thread's CPU time and page faults so far
};

}  // namespace dooly::energy
