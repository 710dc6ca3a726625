#include "dooly/sim/cost_model.hpp"

#include "dooly/common/error.hpp"
#include "dooly/sim/analytic_cost.hpp"

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

std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec) {
  const std::string kind = spec.kind == "auto" ? (spec.db.empty() ? "analytic" : "store") : spec.kind;
  if (kind == "analytic") return std::make_unique<AnalyticCost>(AnalyticCost::for_spec(spec));
  if (kind == "store") {
    if (spec.db.empty())
      DOOLY_THROW(InputError, "give the profiling store with --db FILE, or use --cost analytic",
                  "--cost store needs a store");
    // The predictors fitted on the store (dooly::predict) are not in this build yet.
    DOOLY_THROW(InputError,
                "run with --cost analytic (a roofline estimate, labelled as such) until the predictors are built in",
                "--db {}: pricing steps from a profiling store needs dooly::predict, which this build does not have",
                spec.db);
  }
  DOOLY_THROW(InputError, "use --cost analytic, store or auto", "unknown --cost '{}'", spec.kind);
}

}  // namespace dooly::sim
