#pragma once
// What one engine step of a model costs: the device time and energy of the op signatures the step runs, each
// predicted at the step's quantities and multiplied by its count per step, plus the serving engine's own host time.
//
//   store::Store db = store::Store::open("data/profile/h200.sqlite", store::Store::Mode::read_only);
//   StepModelOptions o;
//   o.model = "llama-3.1-8b";
//   o.attention = "paged|sdpa";                       // the trace's backend, or its family
//   StepModel m = StepModel::load(db, o);
//   StepCost c = m.predict(plan::Composition{{{256, 0}, {1, 1024}, {1, 1024}}});   // c.device_s, c.energy_j, ...
//
// Which signatures: the model's occurrences (model_signatures) under the trace provenance of that attention backend,
// ops only (a module is a collapsed subtree whose ops are counted themselves). The phase a step takes them from:
// `prefill` when no request of the step has cached context (the traced prefill step had no cache reads), `decode`
// when every request decodes and such a phase was traced, else `mixed` (the traced step that batched decodes with a
// chunk: its signatures read the cache). Quantities are bound by plan::Composition::value_of (PREFILL_TOKS and
// DECODE_REQS of engine costs by prefill_tokens() and decode_requests()); engine limits stay as traced, since they
// are not swept.
//
// Each signature's predictor is the stored one when its points are unchanged, else fitted at load (counted in
// fitted_at_load(); `dooly predict fit` stores them). A signature without a unit (unrunnable), absorbed by a module
// that was not measured, or not measured at all is listed in missing() with the reason, and adds nothing: never
// dropped silently. predict() is the simulator's path: no allocation; terms that share one quantity are summed in
// a table over its integer values, built at load.
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dooly/plan/composition.hpp"
#include "dooly/predict/moe_routing.hpp"
#include "dooly/predict/op_class.hpp"
#include "dooly/predict/predictor.hpp"
#include "dooly/predict/quantity_binder.hpp"

namespace dooly::store {
class Store;
}

namespace dooly::predict {

enum class StepKind : uint8_t { prefill, decode, mixed };
std::string_view to_string(StepKind kind) noexcept;
// prefill: no request has cached context; decode: every request adds one token to cached context; else mixed.
StepKind step_kind(const plan::Composition& c) noexcept;

struct StepModelOptions {
  std::string model;                                 // models.name
  std::string attention;                             // the trace's backend: exact, or its family ("paged|sdpa")
  std::optional<int64_t> trace_provenance_id;        // instead of `attention`
  std::optional<int64_t> measurement_provenance_id;  // device work; default: the one measuring most signatures
  std::optional<int64_t> engine_provenance_id;       // host cost; default: wherever it was measured
  std::optional<bool> cuda_graphs;                   // host cost with CUDA graphs on or off; default: on if measured
  std::optional<MoeRouting> moe_routing;             // MoE models: scale the grouped GEMMs by their routing points
                                                     // (moe_routing.hpp); none: uniform, as fitted
};

struct StepCost {
  double device_s = 0;         // sum of count x seconds per call over the step's signatures
  double energy_j = 0;         // sum of count x joules per call (terms without energy add nothing)
  double host_s = 0;           // the engine's host time for the step; 0 when has_host_cost() is false
  int extrapolated_terms = 0;  // terms predicted outside their measured region (the host cost included)
  StepKind kind = StepKind::prefill;
};

struct ClassCost {
  double device_s = 0;
  double energy_j = 0;
  int terms = 0;
  int extrapolated = 0;
};

struct TermCost {
  int64_t signature_id = 0;
  std::string name;
  OpClass op_class = OpClass::other;
  double count = 0;
  double device_s = 0;  // count x per call
  double energy_j = 0;
  bool outside = false;
  std::string model;  // the latency predictor's candidate
};

struct StepBreakdown {
  StepCost total;
  std::array<ClassCost, op_class_count> by_class{};  // engine: host time (in device_s's column)
  std::vector<TermCost> terms;
};

struct MissingTerm {
  int64_t signature_id = 0;
  std::string name;
  StepKind phase = StepKind::prefill;
  int64_t count = 0;
  std::string reason;
};

class StepModel {
 public:
  // Throws InputError (one line, naming the thing and the fix): an unknown model, no trace of it with that backend,
  // a measurement provenance without measurements, no measured signature of the model at all.
  static StepModel load(store::Store& store, const StepModelOptions& options);

  // padding_tokens: of c's tokens, those the engine padded a CUDA graph's replay with (all alike: they route to the
  // same experts; random MoE routing reads it, nothing else does).
  StepCost predict(const plan::Composition& c, int64_t padding_tokens = 0) const noexcept;
  // The same with the cost of every term and per class (allocates: for reports, not for the simulator).
  StepBreakdown explain(const plan::Composition& c, int64_t padding_tokens = 0) const;

  const std::string& model_name() const noexcept { return model_name_; }
  int64_t trace_provenance_id() const noexcept { return trace_provenance_; }
  int64_t measurement_provenance_id() const noexcept { return measurement_provenance_; }
  const std::string& attention_backend() const noexcept { return backend_; }
  bool has_host_cost() const noexcept { return host_.has_value(); }
  // Some grouped GEMM is priced by its routing points (moe_routing asked for, or "auto" and measured).
  bool routes_moe() const noexcept { return !routings_.empty(); }
  // "MoE grouped GEMMs routed at random (their routing points)" (or "routed experts:K", ...) where routes_moe();
  // "" otherwise.
  std::string routing_summary() const;
  int64_t host_provenance_id() const noexcept { return host_provenance_; }
  bool host_cuda_graphs() const noexcept { return host_graphs_; }
  // The traced phase a step of this kind takes its signatures from: its own, decode -> mixed when no decode step
  // was traced (the rule above), and the other one of prefill and mixed when only one was (then every term of the
  // step counts as extrapolated).
  StepKind phase_taken(StepKind kind) const noexcept;
  // Signatures of the model's steps that add nothing (no latency predictor), and those without energy.
  const std::vector<MissingTerm>& missing() const noexcept { return missing_; }
  const std::vector<MissingTerm>& missing_energy() const noexcept { return missing_energy_; }
  size_t fitted_at_load() const noexcept { return fitted_at_load_; }

 private:
  struct Term {
    int64_t signature_id = 0;
    std::string name;
    OpClass op_class = OpClass::other;  // attention: attention_mixed here, the step decides
    double count = 0;
    size_t latency = 0;  // index into predictors_
    std::optional<size_t> energy;
    std::array<uint8_t, max_quantities> slot{};  // the step quantity of each of the predictor's quantities
    std::optional<size_t> routing;               // index into routings_: a grouped GEMM under moe_routing
    // The power the unit drew over its measured points with energy (joules / seconds per call): a term's energy is
    // held to that range at its predicted latency (term_cost).
    double power_lo_w = 0, power_hi_w = std::numeric_limits<double>::infinity();
  };
  struct TermValue {  // a term's cost per call at a step
    double seconds = 0, joules = 0;
    bool outside = false;  // the latency outside its measured region
  };
  struct Group {  // a phase's terms over one tuple of step quantities
    std::vector<uint8_t> slots;
    bool direct = false;  // terms that read the step's real tokens (random MoE routing): never tabled
    std::vector<size_t> terms;
    std::vector<double> table_s, table_j;  // one quantity: the group's sums at 0, 1, ..., size - 1
    std::vector<uint16_t> table_outside;
  };
  struct PhaseTerms {
    bool traced = false;
    std::vector<Term> terms;
    std::vector<Group> groups;
  };

  StepModel() = default;
  const PhaseTerms& phase_for(StepKind kind) const noexcept { return phases_[static_cast<size_t>(phase_taken(kind))]; }
  // values[real_tokens_slot]: the step's tokens less the padding.
  void bind(const plan::Composition& c, int64_t padding_tokens, int64_t* values) const noexcept;
  Prediction evaluate(const Predictor& p, const std::array<uint8_t, max_quantities>& slot,
                      const int64_t* values) const noexcept;
  // A term's latency (or energy) per call at the step's values, its routing scale applied.
  Prediction term_value(const Term& t, bool of_energy, const int64_t* values) const noexcept;
  // Both, the energy held to the unit's measured power range (no energy without an energy predictor).
  TermValue term_cost(const Term& t, const int64_t* values) const noexcept;
  void build_groups();
  void fill_table(const PhaseTerms& phase, Group& g) const;
  void add_group(const PhaseTerms& phase, const Group& g, const int64_t* values, StepCost& out) const noexcept;

  std::string model_name_;
  std::string backend_;
  int64_t trace_provenance_ = 0;
  int64_t measurement_provenance_ = 0;
  std::vector<std::string> quantities_;  // every step quantity a term reads, by slot
  QuantityBinder binder_;                // binds them, by slot
  std::vector<Predictor> predictors_;
  std::vector<RoutingScale> routings_;
  std::optional<MoeRouting> routing_;  // the routing routings_ apply (set with the first of them)
  std::array<PhaseTerms, 3> phases_;
  std::optional<Predictor> host_;
  std::array<uint8_t, max_quantities> host_slot_{};
  int64_t host_provenance_ = 0;
  bool host_graphs_ = false;
  std::vector<MissingTerm> missing_, missing_energy_;
  size_t fitted_at_load_ = 0;

  friend class StepModelLoader;
};

}  // namespace dooly::predict
