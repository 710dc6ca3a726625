#include "dooly/predict/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/plan/value_expr.hpp"
#include "dooly/predict/fitter.hpp"
#include "dooly/store/store.hpp"

namespace dooly::predict {
namespace {

constexpr size_t kMaxSlots = 32;
constexpr size_t kRealTokensSlot = kMaxSlots - 1;  // the step's tokens less the padding (StepModel::bind)
constexpr int64_t kMaxTable = int64_t{1} << 16;

std::optional<int64_t> quantity_value(const plan::Composition& c, const std::string& name) {
  return QuantityBinder::value(c, name);
}

// "paged|sdpa[efficient]" -> "paged|sdpa": the backend without the forced kernel.
std::string family(std::string_view backend) { return std::string(backend.substr(0, backend.find('['))); }

// phases_ is indexed by StepKind: prefill, decode, mixed.
size_t phase_index(store::Phase p) noexcept {
  return p == store::Phase::prefill ? 0 : p == store::Phase::decode ? 1 : 2;
}
StepKind kind_of_phase(store::Phase p) noexcept {
  return p == store::Phase::prefill  ? StepKind::prefill
         : p == store::Phase::decode ? StepKind::decode
                                     : StepKind::mixed;
}

OpClass class_in_step(OpClass c, StepKind kind) noexcept {
  if (!is_attention(c)) return c;
  return kind == StepKind::prefill  ? OpClass::attention_prefill
         : kind == StepKind::decode ? OpClass::attention_decode
                                    : OpClass::attention_mixed;
}

std::string first_attempt_error(const std::string& attempts_json) {
  const nlohmann::json a = nlohmann::json::parse(attempts_json, nullptr, false);
  if (a.is_array() && !a.empty() && a[0].is_object() && a[0].contains("error") && a[0]["error"].is_string())
    return a[0]["error"].get<std::string>();
  return "no level of it runs alone";
}

// The power a unit drew over its measured points with energy, routing points included (joules / seconds per call):
// lowest and highest; (0, infinity), which holds nothing, without such points.
std::pair<double, double> power_range(const SignatureData& data) {
  double lo = INFINITY, hi = 0;
  auto add = [&](double seconds, const std::optional<double>& joules) {
    if (!joules || !(seconds > 0) || !(*joules > 0)) return;
    lo = std::min(lo, *joules / seconds);
    hi = std::max(hi, *joules / seconds);
  };
  for (const MeasuredPoint& p : data.points) add(p.latency_s, p.energy_j);
  for (const RoutedPoint& p : data.routed) add(p.latency_s, p.energy_j);
  return hi > 0 ? std::make_pair(lo, hi) : std::make_pair(0.0, std::numeric_limits<double>::infinity());
}

}  // namespace

std::string_view to_string(StepKind kind) noexcept {
  return kind == StepKind::prefill ? "prefill" : kind == StepKind::decode ? "decode" : "mixed";
}

StepKind step_kind(const plan::Composition& c) noexcept {
  bool any_context = false, all_decode = !c.requests.empty();
  for (const plan::RequestSlice& r : c.requests) {
    if (r.context > 0) any_context = true;
    if (r.new_tokens != 1 || r.context == 0) all_decode = false;
  }
  if (!any_context) return StepKind::prefill;
  return all_decode ? StepKind::decode : StepKind::mixed;
}

// ------------------------------------------------------------------------------------------------------ loading

class StepModelLoader {
 public:
  StepModelLoader(store::Store& store, const StepModelOptions& options) : store_(store), options_(options) {}

  StepModel load() {
    const store::Model model = find_model();
    m_.model_name_ = model.name;
    m_.trace_provenance_ = find_trace_provenance(model);
    const std::vector<store::SignatureUse> uses = store_.signatures_of_model(model.id, m_.trace_provenance_);
    m_.measurement_provenance_ = find_measurement_provenance(model.id);
    for (const store::SignatureUse& use : uses)
      if (use.signature.kind == store::SignatureKind::op) add_use(use);
    if (options_.moe_routing && !options_.moe_routing->if_measured && m_.routings_.empty())
      DOOLY_THROW(InputError, "leave MoE routing at uniform for a dense model",
                  "MoE routing {} asked for, but the steps of {} hold no measured grouped GEMM (a MoE's experts)",
                  format_moe_routing(options_.moe_routing), m_.model_name_);
    add_host(model);
    m_.binder_ = QuantityBinder(m_.quantities_);
    m_.build_groups();
    return std::move(m_);
  }

 private:
  store::Model find_model() {
    std::optional<store::Model> found;
    std::vector<std::string> names;
    for (store::Model& m : store_.models()) {
      names.push_back(m.name);
      if (m.name == options_.model) found = std::move(m);  // the newest config of that name (ids ascend)
    }
    if (!found)
      DOOLY_THROW(InputError, "pick a model the store holds, or trace it first (`dooly trace`, `dooly signatures`)",
                  "model '{}' is not in store {} (it holds: {})", options_.model, store_.path(),
                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
    return *found;
  }

  int64_t find_trace_provenance(const store::Model& model) {
    std::map<int64_t, std::string> backends;  // the provenances this model was traced under
    for (const store::Provenance& p : store_.provenances())
      if (!store_.signatures_of_model(model.id, p.id).empty()) backends[p.id] = p.attention_backend;
    std::optional<int64_t> exact, by_family;
    for (const auto& [id, backend] : backends) {
      if (options_.trace_provenance_id ? id == *options_.trace_provenance_id : backend == options_.attention)
        exact = id;
      if (!options_.trace_provenance_id && family(backend) == family(options_.attention)) by_family = id;
    }
    const std::optional<int64_t> chosen = exact ? exact : by_family;
    if (!chosen) {
      std::vector<std::string> listed;
      listed.reserve(backends.size());
      for (const auto& [id, backend] : backends) listed.push_back(fmt::format("{} (provenance {})", backend, id));
      DOOLY_THROW(InputError, "pass one of the backends it was traced with as --attention",
                  "model '{}' has no trace {} in store {} (traced: {})", model.name,
                  options_.trace_provenance_id ? fmt::format("under provenance {}", *options_.trace_provenance_id)
                                               : fmt::format("with attention backend '{}'", options_.attention),
                  store_.path(), listed.empty() ? std::string("none") : fmt::format("{}", fmt::join(listed, ", ")));
    }
    m_.backend_ = backends.at(*chosen);
    return *chosen;
  }

  int64_t find_measurement_provenance(int64_t model_id) {
    if (options_.measurement_provenance_id) {
      const std::vector<int64_t> measured = measured_provenances(store_);
      if (std::find(measured.begin(), measured.end(), *options_.measurement_provenance_id) == measured.end())
        DOOLY_THROW(InputError, "pick a provenance that holds measurements (`dooly store info`), or measure first",
                    "store {} holds no measurements under provenance {}", store_.path(),
                    *options_.measurement_provenance_id);
      return *options_.measurement_provenance_id;
    }
    // The measurement context that covers most of the model's signatures (the newest of equals).
    store::Statement s = store_.database().prepare(
        "SELECT provenance_id FROM measurements WHERE status = 'ok' AND point_key <> '' AND signature_id IN "
        "(SELECT signature_id FROM model_signatures WHERE model_id = ? AND provenance_id = ?) "
        "GROUP BY provenance_id ORDER BY count(DISTINCT signature_id) DESC, provenance_id DESC LIMIT 1");
    s.bind(1, model_id).bind(2, m_.trace_provenance_);
    if (!s.step())
      DOOLY_THROW(InputError, "measure it first (`dooly profile TRACES --db FILE`)",
                  "store {} holds no measurements of the signatures of model '{}'", store_.path(), m_.model_name_);
    return s.column_int64(0);
  }

  // The signature's predictor of `target` under `provenance`: stored when its points are unchanged, else fitted
  // now. nullopt without points.
  std::optional<size_t> predictor_of(int64_t signature_id, int64_t provenance, store::PredictorTarget target) {
    const auto key = std::make_tuple(signature_id, provenance, target);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    auto [data_it, fresh] = data_.try_emplace({signature_id, provenance});
    if (fresh) data_it->second = load_measured(store_, signature_id, provenance);
    const SignatureData& data = data_it->second;
    const TargetPoints points = target_points(data, target);
    std::optional<size_t> index;
    if (points.rows() > 0) {
      const std::optional<store::PredictorRecord> stored = store_.predictor(signature_id, provenance, target);
      std::optional<Predictor> p;
      if (stored && stored->code_version == predictor_code_version &&
          stored->data_sha256 == data_sha256(data, points, target))
        p = Predictor::from_record(*stored);
      if (!p) {
        p = fit_target(data, target)->predictor;
        ++m_.fitted_at_load_;
      }
      // A step at a measured point (a CUDA graph's padded shape is a grid point) gets the measurement there.
      p->anchor(points.x, points.y, points.hw);
      index = m_.predictors_.size();
      m_.predictors_.push_back(std::move(*p));
    }
    cache_[key] = index;
    return index;
  }

  uint8_t slot_of(const std::string& quantity) {
    const auto it = std::find(m_.quantities_.begin(), m_.quantities_.end(), quantity);
    if (it != m_.quantities_.end()) return static_cast<uint8_t>(it - m_.quantities_.begin());
    if (m_.quantities_.size() >= kRealTokensSlot)
      DOOLY_THROW(InputError, "this is a dooly limit: report it with the store", "more than {} step quantities",
                  kRealTokensSlot);
    m_.quantities_.push_back(quantity);
    return static_cast<uint8_t>(m_.quantities_.size() - 1);
  }

  std::string name_of(int64_t signature_id) {
    store::Statement s = store_.database().prepare("SELECT name FROM signatures WHERE id = ?");
    s.bind(1, signature_id);
    return s.step() ? s.column_text(0) : fmt::format("signature {}", signature_id);
  }

  void miss(std::vector<MissingTerm>& list, const store::SignatureUse& use, std::string reason) {
    list.push_back({use.signature.id, use.signature.name, kind_of_phase(use.phase), use.count, std::move(reason)});
  }

  // The unit that measures the signature (itself or the module that absorbs it), or a reason there is none.
  std::pair<int64_t, std::string> unit_of(const store::SignatureUse& use) {
    const std::optional<store::Resolution> r = store_.resolution_of(use.signature.id, m_.measurement_provenance_);
    if (r && r->status == store::ResolutionStatus::unrunnable)
      return {0, "unrunnable: " + first_attempt_error(r->attempts_json)};
    if (r && r->status == store::ResolutionStatus::absorbed) return {*r->unit_signature_id, ""};
    return {use.signature.id, ""};
  }

  void add_use(const store::SignatureUse& use) {
    const auto [unit, unrunnable] = unit_of(use);
    if (unit == 0) return miss(m_.missing_, use, unrunnable);
    const auto latency = predictor_of(unit, m_.measurement_provenance_, store::PredictorTarget::latency_s);
    if (!latency)
      return miss(m_.missing_, use,
                  unit == use.signature.id ? fmt::format("not measured under provenance {}", m_.measurement_provenance_)
                                           : fmt::format("absorbed by {}, not measured under provenance {}",
                                                         name_of(unit), m_.measurement_provenance_));
    // A copy: predictor_of below may grow predictors_.
    const std::vector<std::string> quantities = m_.predictors_[*latency].domain().quantities();
    const plan::Composition sample{{{2, 3}, {1, 5}}};
    for (const std::string& q : quantities)
      if (!quantity_value(sample, q))
        return miss(m_.missing_, use, fmt::format("sweeps {}, which a step's composition does not bind", q));
    StepModel::Term t;
    t.signature_id = use.signature.id;
    t.name = use.signature.name;
    t.op_class = classify(use.signature.kind, use.signature.name, use.signature.metadata_json, quantities);
    t.count = static_cast<double>(use.count);
    t.latency = *latency;
    t.energy = predictor_of(unit, m_.measurement_provenance_, store::PredictorTarget::energy_j);
    if (!t.energy) miss(m_.missing_energy_, use, "no point with energy");
    std::tie(t.power_lo_w, t.power_hi_w) = power_range(data_.at({unit, m_.measurement_provenance_}));
    for (size_t i = 0; i < quantities.size(); ++i) t.slot[i] = slot_of(quantities[i]);
    const bool grouped_gemm = use.signature.name == "_grouped_mm" || use.signature.name == "grouped_mm";
    const bool routed = options_.moe_routing && grouped_gemm &&
                        (!options_.moe_routing->if_measured || has_routing_points(use.signature.id, unit));
    if (routed && unit != use.signature.id)
      DOOLY_THROW(InputError, "leave MoE routing at uniform for this model (the module's own measurement)",
                  "MoE routing {} asked for, but {}'s grouped GEMM (signature {}) was measured inside a module unit "
                  "({}), which routes with its own router",
                  format_moe_routing(options_.moe_routing), m_.model_name_, use.signature.id, name_of(unit));
    if (routed) t.routing = routing_scale(use, quantities, t.latency);
    StepModel::PhaseTerms& phase = m_.phases_[phase_index(use.phase)];
    phase.traced = true;
    phase.terms.push_back(std::move(t));
  }

  // MoE routing "auto" prices a grouped GEMM at random only where it was measured as its own unit and has the
  // forced points random routing reads; elsewhere (inside a module, no routing points, skewed ones only) it stays
  // uniform, as fitted.
  bool has_routing_points(int64_t signature_id, int64_t unit) const {
    const auto it = data_.find({signature_id, m_.measurement_provenance_});
    return unit == signature_id && it != data_.end() &&
           std::any_of(it->second.routed.begin(), it->second.routed.end(),
                       [](const RoutedPoint& p) { return p.skew_percent == 0; });
  }

  // The grouped GEMM's routing scale (moe_routing.hpp) from its routing points under the measurement provenance;
  // InputError when it has none for the asked routing.
  size_t routing_scale(const store::SignatureUse& use, const std::vector<std::string>& quantities, size_t latency) {
    const std::string what =
        fmt::format("{} of {} (signature {})", use.signature.name, m_.model_name_, use.signature.id);
    if (quantities != std::vector<std::string>{"NUM_TOKS"})
      DOOLY_THROW(InputError, "re-trace the model with this build",
                  "{} is swept over {}, not NUM_TOKS alone: no routing scale", what, fmt::join(quantities, ", "));
    store::Statement q = store_.database().prepare("SELECT canonical_json FROM signatures WHERE id = ?");
    q.bind(1, use.signature.id);
    const auto shape =
        grouped_gemm_shape(q.step() ? nlohmann::json::parse(q.column_text(0), nullptr, false) : nlohmann::json());
    if (!shape)
      DOOLY_THROW(InputError, "re-trace the model with this build",
                  "{}: its routed rows and experts are not readable from its signature", what);
    const auto energy = predictor_of(use.signature.id, m_.measurement_provenance_, store::PredictorTarget::energy_j);
    auto at = [&](std::optional<size_t> p) {
      return [this, p](double tokens) {
        return p ? m_.predictors_[*p].predict(std::span<const double>(&tokens, 1)).value : 0.0;
      };
    };
    m_.routing_ = options_.moe_routing;
    m_.routings_.push_back(RoutingScale::build(*shape, *options_.moe_routing,
                                               data_.at({use.signature.id, m_.measurement_provenance_}).routed,
                                               at(latency), at(energy), what));
    return m_.routings_.size() - 1;
  }

  // The engine signature of this model and backend family (kind 'engine'), with the CUDA-graph mode asked for. Of
  // several, one timed with the engine's loop in its own thread ("loop": "engine-thread", as it serves; an eager
  // step takes ~2.6x as long there as in the caller's thread on the H200), then the newest.
  std::optional<std::pair<int64_t, bool>> engine_signature(const store::Model& model) {
    store::Statement s = store_.database().prepare("SELECT id, canonical_json FROM signatures WHERE kind = 'engine'");
    std::map<bool, std::pair<bool, int64_t>> by_graphs;  // graphs -> (timed in the engine's thread, id), the best
    while (s.step()) {
      const nlohmann::json c = nlohmann::json::parse(s.column_text(1), nullptr, false);
      const nlohmann::json attrs = c.is_object() ? c.value("attrs", nlohmann::json::object()) : nlohmann::json();
      if (!attrs.is_object() || attrs.value("model", "") != model.name ||
          attrs.value("config_hash", "") != model.config_hash ||
          family(attrs.value("attention", "")) != family(m_.backend_))
        continue;
      bool graphs = attrs.contains("cuda_graphs") && attrs["cuda_graphs"].is_array() && !attrs["cuda_graphs"].empty();
      if (graphs)
        for (const auto& g : attrs["cuda_graphs"]) graphs = graphs && g.is_boolean() && g.get<bool>();
      const std::pair<bool, int64_t> rank{attrs.value("loop", "") == "engine-thread", s.column_int64(0)};
      auto [it, added] = by_graphs.try_emplace(graphs, rank);
      if (!added && rank > it->second) it->second = rank;
    }
    const bool want = options_.cuda_graphs.value_or(true);
    if (by_graphs.count(want)) return std::make_pair(by_graphs.at(want).second, want);
    if (!options_.cuda_graphs && !by_graphs.empty())
      return std::make_pair(by_graphs.begin()->second.second, by_graphs.begin()->first);
    return std::nullopt;
  }

  void add_host(const store::Model& model) {
    const auto engine = engine_signature(model);
    if (!engine) return;
    const int64_t* sig = &engine->first;
    int64_t prov = options_.engine_provenance_id.value_or(0);
    if (prov == 0) {
      store::Statement s = store_.database().prepare(
          "SELECT provenance_id FROM measurements WHERE signature_id = ? AND status = 'ok' GROUP BY 1 "
          "ORDER BY count(*) DESC, 1 DESC LIMIT 1");
      s.bind(1, *sig);
      if (!s.step()) return;
      prov = s.column_int64(0);
    }
    const auto index = predictor_of(*sig, prov, store::PredictorTarget::latency_s);
    if (!index) return;
    const Domain& domain = m_.predictors_[*index].domain();
    for (size_t i = 0; i < domain.dims(); ++i) m_.host_slot_[i] = slot_of(domain.quantities()[i]);
    m_.host_ = m_.predictors_[*index];
    m_.host_provenance_ = prov;
    m_.host_graphs_ = engine->second;
  }

  store::Store& store_;
  const StepModelOptions& options_;
  StepModel m_;
  std::map<std::tuple<int64_t, int64_t, store::PredictorTarget>, std::optional<size_t>> cache_;
  std::map<std::pair<int64_t, int64_t>, SignatureData> data_;
};

StepModel StepModel::load(store::Store& store, const StepModelOptions& options) {
  return StepModelLoader(store, options).load();
}

// The terms of each phase grouped by the step quantities they read; a group over one quantity (or none) gets a
// table of its sums over that quantity's integer values (up to twice the largest measured, at most 65536 entries).
// Terms that read the real tokens besides (random MoE routing under padding) form groups of their own, not tabled.
void StepModel::build_groups() {
  for (PhaseTerms& phase : phases_) {
    std::map<std::pair<std::vector<uint8_t>, bool>, size_t> index;
    for (size_t t = 0; t < phase.terms.size(); ++t) {
      const Term& term = phase.terms[t];
      const auto dims = static_cast<std::ptrdiff_t>(predictors_[term.latency].domain().dims());
      std::vector<uint8_t> slots(term.slot.begin(), term.slot.begin() + dims);
      const bool direct = term.routing && routings_[*term.routing].reads_real_tokens();
      auto [it, added] = index.try_emplace({slots, direct}, phase.groups.size());
      if (added) phase.groups.push_back({slots, direct, {}, {}, {}, {}});
      phase.groups[it->second].terms.push_back(t);
    }
    for (Group& g : phase.groups)
      if (g.slots.size() <= 1 && !g.direct) fill_table(phase, g);
  }
}

void StepModel::fill_table(const PhaseTerms& phase, Group& g) const {
  int64_t size = 1;
  for (size_t t : g.terms)
    if (!g.slots.empty())
      size = std::max(size, 2 * static_cast<int64_t>(predictors_[phase.terms[t].latency].domain().hi(0)) + 2);
  size = std::min(size, kMaxTable);
  const auto n = static_cast<size_t>(size);
  g.table_s.assign(n, 0.0);
  g.table_j.assign(n, 0.0);
  g.table_outside.assign(n, 0);
  int64_t values[kMaxSlots] = {};
  for (size_t v = 0; v < n; ++v) {
    if (!g.slots.empty()) values[g.slots[0]] = static_cast<int64_t>(v);
    for (size_t t : g.terms) {
      const Term& term = phase.terms[t];
      const TermValue c = term_cost(term, values);
      g.table_s[v] += term.count * c.seconds;
      g.table_j[v] += term.count * c.joules;
      if (c.outside) ++g.table_outside[v];
    }
  }
}

// ----------------------------------------------------------------------------------------------------- predicting

std::string StepModel::routing_summary() const {
  if (!routes_moe() || !routing_) return {};
  return fmt::format("MoE grouped GEMMs routed {} (their routing points)",
                     routing_->mode == MoeRouting::Mode::random ? "at random" : format_moe_routing(routing_));
}

StepKind StepModel::phase_taken(StepKind kind) const noexcept {
  const bool prefill = phases_[0].traced, decode = phases_[1].traced, mixed = phases_[2].traced;
  if (kind == StepKind::prefill) return prefill || !mixed ? StepKind::prefill : StepKind::mixed;
  if (kind == StepKind::decode && decode) return StepKind::decode;
  return mixed || !prefill ? StepKind::mixed : StepKind::prefill;
}

void StepModel::bind(const plan::Composition& c, int64_t padding_tokens, int64_t* values) const noexcept {
  (void)binder_.bind(c, values);
  values[kRealTokensSlot] = c.num_tokens() - padding_tokens;
}

Prediction StepModel::evaluate(const Predictor& p, const std::array<uint8_t, max_quantities>& slot,
                               const int64_t* values) const noexcept {
  double x[max_quantities];
  const size_t dims = p.domain().dims();
  for (size_t i = 0; i < dims; ++i) x[i] = static_cast<double>(values[slot[i]]);
  return p.predict(std::span<const double>(x, dims));
}

Prediction StepModel::term_value(const Term& t, bool of_energy, const int64_t* values) const noexcept {
  Prediction p = evaluate(predictors_[of_energy ? *t.energy : t.latency], t.slot, values);
  if (t.routing)
    p.value *= routings_[*t.routing].ratio(static_cast<double>(values[t.slot[0]]),
                                           static_cast<double>(values[kRealTokensSlot]), of_energy);
  return p;
}

// Latency and energy are fitted apart, and beyond the measured region their extensions need not agree: a decode
// batch of 423 requests at 1,200 cached tokens a request (KV 2.6x the largest measured) had its attention priced at
// 1,049 W on a 700 W board. Inside the region too, two models chosen apart on scattered points (attention's) can
// imply less power than the unit ever drew. A unit's power stays within what it drew over its points, so the energy
// is held to that range at the predicted latency (against the live runs, energy per request came closer wherever
// the hold moved it: docs/predict.md).
StepModel::TermValue StepModel::term_cost(const Term& t, const int64_t* values) const noexcept {
  const Prediction s = term_value(t, false, values);
  TermValue out{s.value, 0.0, s.outside};
  if (t.energy && s.value > 0)
    out.joules = std::clamp(term_value(t, true, values).value, t.power_lo_w * s.value, t.power_hi_w * s.value);
  return out;
}

// A group's sum at the step's values: from its table when the value is in it, else term by term.
void StepModel::add_group(const PhaseTerms& phase, const Group& g, const int64_t* values,
                          StepCost& out) const noexcept {
  if (!g.table_s.empty()) {
    const int64_t v = g.slots.empty() ? 0 : values[g.slots[0]];
    if (v >= 0 && v < static_cast<int64_t>(g.table_s.size())) {
      out.device_s += g.table_s[static_cast<size_t>(v)];
      out.energy_j += g.table_j[static_cast<size_t>(v)];
      out.extrapolated_terms += g.table_outside[static_cast<size_t>(v)];
      return;
    }
  }
  for (size_t t : g.terms) {
    const Term& term = phase.terms[t];
    const TermValue c = term_cost(term, values);
    out.device_s += term.count * c.seconds;
    out.energy_j += term.count * c.joules;
    out.extrapolated_terms += c.outside ? 1 : 0;
  }
}

StepCost StepModel::predict(const plan::Composition& c, int64_t padding_tokens) const noexcept {
  StepCost out;
  if (c.requests.empty()) return out;
  int64_t values[kMaxSlots];
  const QuantityBinder::Shape shape = binder_.bind(c, values);  // one pass: quantities and the step's kind
  if (!routings_.empty()) values[kRealTokensSlot] = c.num_tokens() - padding_tokens;
  out.kind = !shape.any_context ? StepKind::prefill : shape.all_decode ? StepKind::decode : StepKind::mixed;
  const PhaseTerms& phase = phase_for(out.kind);
  const StepKind taken = phase_taken(out.kind);
  const bool fallback = taken != out.kind && !(out.kind == StepKind::decode && taken == StepKind::mixed);
  for (const Group& g : phase.groups) add_group(phase, g, values, out);
  if (fallback) out.extrapolated_terms = static_cast<int>(phase.terms.size());
  if (host_) {
    const Prediction h = evaluate(*host_, host_slot_, values);
    out.host_s = h.value;
    out.extrapolated_terms += h.outside ? 1 : 0;
  }
  return out;
}

StepBreakdown StepModel::explain(const plan::Composition& c, int64_t padding_tokens) const {
  StepBreakdown out;
  out.total.kind = step_kind(c);
  if (c.requests.empty()) return out;
  const PhaseTerms& phase = phase_for(out.total.kind);
  const StepKind taken = phase_taken(out.total.kind);
  const bool fallback = taken != out.total.kind && !(out.total.kind == StepKind::decode && taken == StepKind::mixed);
  int64_t values[kMaxSlots];
  bind(c, padding_tokens, values);
  for (const Term& term : phase.terms) {
    const TermValue cost = term_cost(term, values);
    TermCost tc{term.signature_id,
                term.name,
                class_in_step(term.op_class, out.total.kind),
                term.count,
                term.count * cost.seconds,
                term.count * cost.joules,
                cost.outside || fallback,
                std::string(predictors_[term.latency].model().name())};
    ClassCost& cc = out.by_class[static_cast<size_t>(tc.op_class)];
    cc.device_s += tc.device_s;
    cc.energy_j += tc.energy_j;
    ++cc.terms;
    cc.extrapolated += tc.outside ? 1 : 0;
    out.terms.push_back(std::move(tc));
  }
  const StepCost fast = predict(c, padding_tokens);
  out.total = fast;
  if (host_) {
    ClassCost& engine = out.by_class[static_cast<size_t>(OpClass::engine)];
    engine.device_s = fast.host_s;
    engine.terms = 1;
    engine.extrapolated = evaluate(*host_, host_slot_, values).outside ? 1 : 0;
  }
  return out;
}

}  // namespace dooly::predict
