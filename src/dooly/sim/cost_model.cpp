#include "dooly/sim/cost_model.hpp"

#include <algorithm>
#include <optional>

#include "dooly/common/error.hpp"
#include "dooly/predict/moe_routing.hpp"
#include "dooly/sim/analytic_cost.hpp"
#include "dooly/sim/store_cost.hpp"

namespace dooly::sim {

const char* to_string(ForwardPath p) {
  switch (p) {
    case ForwardPath::eager:
      return "eager";
    case ForwardPath::graph_replay:
      return "graph";
    case ForwardPath::graph_capture:
      return "capture";
  }
  return "eager";
}

double step_duration(const StepCost& c, ForwardPath path) {
  switch (path) {
    case ForwardPath::eager:  // the device runs behind the launches
      return c.host_serial_s + std::max(c.host_launch_s, c.device_s);
    case ForwardPath::graph_replay:  // one replay call, then the host waits for the device
      return c.host_serial_s + c.host_launch_s + c.device_s;
    case ForwardPath::graph_capture:  // a warm-up forward, then the capture: about one more device pass
      return c.host_serial_s + std::max(c.host_launch_s, c.device_s) + c.device_s;
  }
  return c.host_serial_s + std::max(c.host_launch_s, c.device_s);
}

std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec) {
  const std::string kind = spec.kind == "auto" ? (spec.db.empty() ? "analytic" : "store") : spec.kind;
  const std::optional<predict::MoeRouting> routing = predict::parse_moe_routing(spec.moe_routing);
  if (kind == "analytic" && routing && !routing->if_measured)
    DOOLY_THROW(InputError, "give the profiling store with --db FILE (its routing points), or leave --moe-routing out",
                "--moe-routing {}: the analytic cost model routes uniformly", spec.moe_routing);
  if (kind == "analytic") return std::make_unique<AnalyticCost>(AnalyticCost::for_spec(spec));
  if (kind == "store") {
    if (spec.db.empty())
      DOOLY_THROW(InputError, "give the profiling store with --db FILE, or use --cost analytic",
                  "--cost store needs a store");
    return StoreCost::load(spec);
  }
  DOOLY_THROW(InputError, "use --cost analytic, store or auto", "unknown --cost '{}'", spec.kind);
}

}  // namespace dooly::sim
