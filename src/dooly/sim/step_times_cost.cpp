#include "dooly/sim/step_times_cost.hpp"

#include <algorithm>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/line_reader.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::sim {

std::vector<double> StepTimesCost::read(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    DOOLY_THROW(InputError,
                "give the file of a live run's step durations (scripts/analysis/compare_live.py writes one)",
                "--step-times {}: cannot open it", utf8::echo(path, 300));
  return parse(in, path);
}

std::vector<double> StepTimesCost::parse(std::istream& in, const std::string& name) {
  constexpr double kMaxStepS = 86'400;  // a day: anything longer is not a step
  std::vector<double> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    std::string_view text(line);
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || text[first] == '#') continue;
    text = text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
    out.push_back(LineReader(name, n).real(text, "the step duration (seconds)", 0, kMaxStepS));
  }
  if (out.empty())
    DOOLY_THROW(InputError, "write one step duration in seconds a line", "--step-times {}: no durations in it",
                utf8::echo(name, 300));
  return out;
}

StepTimesCost::StepTimesCost(std::unique_ptr<CostModel> inner, std::vector<double> durations_s, std::string source)
    : inner_(std::move(inner)), durations_s_(std::move(durations_s)), source_(std::move(source)) {}

StepCost StepTimesCost::step(const plan::Composition& c, const StepShape& shape) const {
  StepCost out = inner_->step(c, shape);
  if (next_ >= durations_s_.size()) {
    ++next_;
    return out;  // past the live run: the wrapped model's price
  }
  out.model_duration_s = step_duration(out, shape.path);
  // The live duration d, split as the path combines its parts (step_duration): the device work as priced (scaled
  // down where the path alone would outlast d), no launch cost, the rest serial host time.
  const double d = durations_s_[next_++];
  StepCost device_only;
  device_only.device_s = out.device_s;
  const double device_span = step_duration(device_only, shape.path);  // linear in device_s
  if (device_span > d) out.device_s *= d / device_span;
  out.host_serial_s = std::max(0.0, d - device_span);
  out.host_launch_s = 0;
  return out;
}

std::string StepTimesCost::describe() const {
  const std::string beyond =
      next_ > durations_s_.size()
          ? fmt::format(", {} steps past its end priced by the cost model", next_ - durations_s_.size())
          : std::string();
  return fmt::format("step durations from {} ({} steps{}); energy: {}", source_, durations_s_.size(), beyond,
                     inner_->describe());
}

}  // namespace dooly::sim
