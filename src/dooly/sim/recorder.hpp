#pragma once
// What a simulation records as it runs: every step (when, what it carried, what it cost), the gaps between a
// request's successive tokens, and the energy. metrics.hpp turns it, with the requests' own times, into the summary.
#include <cstdint>
#include <utility>
#include <vector>

#include "dooly/sim/engine.hpp"

namespace dooly::sim {

struct StepRecord {
  double t_s = 0;  // start
  double duration_s = 0;
  double device_s = 0;
  double host_s = 0;  // host_serial + host_launch
  double energy_j = 0;
  double model_duration_s = -1;  // the cost model's own duration where duration_s is the live run's (--step-times)
  int32_t requests = 0;
  int32_t tokens = 0;
  int32_t prefill_tokens = 0;
  int32_t decode_requests = 0;
  int32_t padded_tokens = 0;  // what the device computed (= tokens when eager)
  int32_t waiting = 0;
  int32_t free_blocks = 0;
  int32_t preempted = 0;
  int32_t extrapolated = 0;
  ForwardPath path = ForwardPath::eager;
};

// Inter-token gaps as (gap, count) runs: every request decoding in consecutive steps has the same gap, so a step
// usually adds one run. Percentiles over the runs equal those over the gaps themselves.
class GapRuns {
 public:
  void add(double gap_s) {
    if (!runs_.empty() && runs_.back().first == gap_s) {
      ++runs_.back().second;
    } else {
      runs_.emplace_back(gap_s, 1);
    }
  }
  std::vector<std::pair<double, int64_t>>& runs() { return runs_; }
  const std::vector<std::pair<double, int64_t>>& runs() const { return runs_; }

 private:
  std::vector<std::pair<double, int64_t>> runs_;
};

// Sees every step as it is recorded (result_writer.hpp streams them into result.json).
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void on_step(int64_t index, const StepRecord& step) = 0;
};

struct Recorder {
  bool keep_steps = false;           // keep every StepRecord (plots, tests); totals are always kept
  StepObserver* observer = nullptr;  // sees every step, kept or not
  std::vector<StepRecord> steps;
  GapRuns itl;
  int64_t step_count = 0;
  int64_t preemptions = 0;
  int64_t extrapolated_steps = 0;
  int64_t batch_requests = 0;  // summed over steps
  int64_t batch_tokens = 0;
  double step_energy_j = 0;
  double busy_s = 0;         // time inside steps
  double idle_energy_j = 0;  // the engine with nothing to do, between steps
  double last_busy_end_s = 0;

  void step(double t_s, const StepPlan& p);
};

}  // namespace dooly::sim
