#pragma once
// The scheduler check's timing (`dooly simulate --step-times FILE`): the k-th step takes the k-th duration of a
// live run, whatever it computes, so the simulated scheduler meets every arrival at the moment the live engine did,
// and its decisions can be compared step by step with the live engine's (`dooly compare`: the share of steps with
// the same composition). Time is the live run's; energy stays the wrapped cost model's device energy (at most the
// step's duration) plus idle power for the rest. Steps past the file's end are priced by the wrapped model and
// counted in describe().
#include <cstddef>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "dooly/sim/cost_model.hpp"

namespace dooly::sim {

class StepTimesCost final : public CostModel {
 public:
  // The durations file: one number of seconds a line, in [0, a day] (blank lines and lines starting with '#'
  // skipped); an InputError naming FILE:LINE for anything else (common/line_reader.hpp), or for a file with none.
  static std::vector<double> read(const std::string& path);
  static std::vector<double> parse(std::istream& in, const std::string& name);  // read's text; `name` in messages

  StepTimesCost(std::unique_ptr<CostModel> inner, std::vector<double> durations_s, std::string source);
  // One call per simulated step, in order (the engine models price each step once, when it starts).
  StepCost step(const plan::Composition& c, const StepShape& shape) const override;
  double idle_power_w() const override { return inner_->idle_power_w(); }
  std::string describe() const override;

 private:
  std::unique_ptr<CostModel> inner_;
  std::vector<double> durations_s_;
  std::string source_;
  mutable size_t next_ = 0;  // the step being priced: the cost side's only state, reset by nothing (one run)
};

}  // namespace dooly::sim
