#pragma once
// The profiling plan (`dooly profile`, docs/profile.md): which unit measures each signature of the traced models,
// at which sweep points, and what the store already holds. Only what the store lacks is planned; the same work
// seen in several models or attention backends is one unit.
//
//   Store db = Store::open("dooly.sqlite");
//   const Plan plan = build_plan(db, traces, read_grid("data/grids/default.json"), measured_provenance_id, {});
//   // plan.units[i].points: what to measure; to_json(plan) is what the Python worker runs
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/plan/composition.hpp"
#include "dooly/plan/grid.hpp"
#include "dooly/store/store.hpp"
#include "dooly/trace/trace.hpp"

namespace dooly::plan {

struct PointPlan {
  std::string key;                          // compact JSON of the swept bindings, keys sorted
  std::map<std::string, int64_t> bindings;  // swept quantities and the fixed limits
  Composition composition;                  // the step the point stands for
  double estimated_s = 0;                   // GPU time the measurement is expected to take
  double settle_s = 0;                      // of it, the settle period's (a long point; 0 when carried over)
};

struct Ancestor {
  std::string hash, name;
  int64_t call = -1;  // module call id in the unit's step
};

struct UnitPlan {
  std::string hash, name;
  bool is_op = true;
  std::string op_class;              // the trace's rule class for ops ("matmul", "attention", ...), "module" otherwise
  int64_t signature_id = 0;          // in the store (0 when the store does not hold it)
  size_t trace = 0, step = 0;        // where its representative is: plan.traces[trace], its steps[step]
  int64_t seq = -1;                  // an op's record seq in that step
  int64_t call = -1;                 // a module's call id in that step
  std::vector<Ancestor> ancestors;   // enclosing modules, innermost first (the finder's fallbacks)
  std::vector<std::string> absorbs;  // a module unit: the op signatures whose ops could not run alone
  std::vector<std::string> swept;    // step quantities its dimensions depend on
  std::map<std::string, int64_t> fixed;  // engine limits its dimensions depend on, at the trace's values
  // "fixed" | "tokens" | "requests" | "compositions" | "no_kernel" (an op that launched no kernel in any GPU
  // trace holding it: measured at the largest point of its grid only) | "moe" (a grouped GEMM: its token grid
  // routed uniformly, plus the grid's routing points, which bind MOE_EXPERTS and MOE_SKEW)
  std::string point_class;
  std::string resolution = "unresolved";  // "unresolved" (not tried yet) | "runs" | "absorbed" (module units)
  std::vector<PointPlan> points;          // to measure, largest first
  int64_t points_total = 0;               // on the grid
  int64_t points_committed = 0;           // already in the store (skipped)
  int64_t points_failed = 0;              // stored as failed (retried with retry_failed only)
  int64_t points_unsettled = 0;           // of `points`: stored ok, but without the settle period (measured again)
  int64_t points_relaid = 0;              // of `points`: stored ok, buffer rows of an older layout rule (again)
  int64_t occurrences = 0;                // op occurrences it stands for, over every traced step of every trace
};

// A signature with no unit that runs: listed with its reason in every report.
struct Uncovered {
  std::string hash, name, reason;
  int64_t occurrences = 0;
};

struct PlanTotals {
  int64_t units = 0, points = 0;
  double estimated_s = 0;
  std::map<std::string, double> estimated_s_by_class;
  std::map<std::string, int64_t> points_by_class;
};

// How long the context's committed points took against what the plan's model says of the same points: each point's
// `point_s` (the worker's wall time inside it: warm-up, settle, timed calls, energy) over the model's estimate. The
// model is a guess from bytes and the grid's settings; once a context has points, their pace is the better one.
struct Pace {
  int64_t points = 0;      // committed points of this plan's units that recorded point_s
  double measured_s = 0;   // their point_s, summed
  double estimated_s = 0;  // the model's estimate of the same points, summed
  double ratio() const { return estimated_s > 0 ? measured_s / estimated_s : 0.0; }
};

struct PlanOptions {
  int shard = 0, shards = 1;  // run units whose hash falls in this slice (deterministic)
  bool retry_failed = false;  // plan points stored as failed again
  // A point counts as committed only with its energy (an ok row without it is measured again): what a run with a
  // power source wants. The worker turns it off when it has none, so a CPU without RAPL does not loop.
  bool require_energy = true;
};

struct Plan {
  std::vector<std::string> traces;  // paths, as given
  std::string grid_file, grid_sha256;
  MeasureSettings measure;
  int64_t provenance_id = 0;  // the measurement context (0: none yet, nothing is measured)
  PlanOptions options;
  int64_t op_occurrences = 0;   // over every traced step of every trace
  int64_t op_signatures = 0;    // distinct
  std::vector<UnitPlan> units;  // this shard's, sorted by hash
  std::vector<Uncovered> uncovered;
  PlanTotals todo;   // what this plan measures
  PlanTotals aware;  // every point of every unit, measured once (the store ignored)
  PlanTotals naive;  // every (model, backend) trace measured on its own, same grids
  Pace pace;         // the committed points of every unit (all shards), measured against the model
  int64_t unresolved_units = 0;
};

// Throws InputError for a trace whose labels name a quantity the planner does not know.
Plan build_plan(store::Store& store, const std::vector<std::string>& trace_paths,
                const std::vector<trace::Trace>& traces, const Grid& grid, int64_t provenance_id,
                const PlanOptions& options);

nlohmann::json to_json(const Plan& plan);
// The --dry-run table: signatures, units, points to measure and skipped, estimated GPU time, the naive plan.
std::string render_plan(const Plan& plan);

// The swept and fixed quantities of one value form, split (throws InputError for an unknown one).
void classify_variables(const std::string& value_form, std::vector<std::string>& swept,
                        std::map<std::string, int64_t>& fixed, const Limits& limits);
Limits limits_of(const trace::Trace& trace);

// Parses "i/N" (0 <= i < N); InputError otherwise.
PlanOptions parse_shard(const std::string& text, PlanOptions options = {});

}  // namespace dooly::plan
