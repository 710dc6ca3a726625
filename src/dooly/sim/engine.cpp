#include "dooly/sim/engine.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"
#include "dooly/sim/hf_engine.hpp"
#include "dooly/sim/vllm_engine.hpp"

namespace dooly::sim {
namespace {

std::map<std::string, EngineFactory>& registry() {
  // The built-in engines are registered here, where the lookup lives, so a static library cannot drop them.
  static std::map<std::string, EngineFactory> r = {{"hf", &make_hf_engine}, {"vllm", &make_vllm_engine}};
  return r;
}

}  // namespace

void register_engine(const std::string& name, EngineFactory factory) {
  if (!registry().emplace(name, factory).second)
    DOOLY_THROW(DuplicateError, "give the engine model another name", "engine '{}' is already registered", name);
}

std::vector<std::string> engine_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<Engine> make_engine(const std::string& name, const EngineContext& ctx) {
  const auto it = registry().find(name);
  if (it == registry().end())
    DOOLY_THROW(InputError, fmt::format("use --engine {}", fmt::join(engine_names(), " or ")), "unknown engine '{}'",
                utf8::echo(name));
  return it->second(ctx);
}

int64_t pad_to_interval(int64_t size, int64_t interval, int64_t max_value) {
  if (interval <= 0) return max_value;
  const int64_t padded = size > 0 ? (size + interval - 1) / interval * interval : interval;
  return std::min(padded, max_value);
}

int64_t pad_to_pow2(int64_t value, int64_t max_value, int64_t min_value) {
  value = std::max(value, std::max<int64_t>(1, min_value));
  int64_t padded = 1;
  while (padded < value) padded *= 2;
  return std::min(padded, max_value);
}

void combine(StepPlan& s, double idle_power_w) {
  s.duration_s = step_duration(s.cost, s.shape.path);
  s.energy_j = s.cost.energy_j + idle_power_w * std::max(0.0, s.duration_s - s.cost.device_s);
}

}  // namespace dooly::sim
