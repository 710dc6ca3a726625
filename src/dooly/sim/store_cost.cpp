#include "dooly/sim/store_cost.hpp"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/store/sqlite.hpp"
#include "dooly/store/store.hpp"

namespace dooly::sim {

namespace {

// The median idle baseline the measurement context's points were taken with (extra_json.energy.idle_w), if any.
std::optional<double> measured_idle_w(store::Store& db, int64_t provenance_id) {
  store::Statement s = db.database().prepare(
      "SELECT json_extract(extra_json, '$.energy.idle_w') FROM measurements WHERE provenance_id = ? AND "
      "status = 'ok' AND json_extract(extra_json, '$.energy.idle_w') IS NOT NULL LIMIT 2001");
  s.bind(1, provenance_id);
  std::vector<double> w;
  while (s.step()) w.push_back(s.column_double(0));
  if (w.empty()) return std::nullopt;
  std::nth_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2), w.end());
  return w[w.size() / 2];
}

predict::StepModelOptions options_for(const CostSpec& spec, bool cuda_graphs) {
  predict::StepModelOptions o;
  o.model = spec.model.name;
  o.attention = spec.attention;
  o.cuda_graphs = cuda_graphs;
  o.moe_routing = predict::parse_moe_routing(spec.moe_routing);
  return o;
}

// A model whose steps hold op signatures the store has not measured would be priced low: one line listing them and
// the command that measures them, unless the user asks to price without them (--allow-missing, flagged).
void refuse_missing(const predict::StepModel& m, const CostSpec& spec) {
  if (m.missing().empty() || spec.allow_missing) return;
  std::set<std::string> names;
  std::set<int64_t> ids;
  for (const predict::MissingTerm& t : m.missing())
    if (ids.insert(t.signature_id).second) names.insert(fmt::format("{} ({})", t.name, t.reason));
  std::string list;
  size_t shown = 0;
  for (const std::string& n : names) {
    if (shown++ == 6) {
      list += fmt::format(", and {} more names", names.size() - 6);
      break;
    }
    list += (list.empty() ? "" : ", ") + n;
  }
  DOOLY_THROW(InputError,
              fmt::format("measure them with `dooly profile <the traces of {}> --db {}` (then `dooly predict fit --db "
                          "{}`), or pass --allow-missing on to price the steps without them",
                          spec.model.name, spec.db, spec.db),
              "store {}: {} op signatures of {} under {} have no measured unit: {}", spec.db, ids.size(),
              spec.model.name, m.attention_backend(), list);
}

}  // namespace

plan::Composition padded(const plan::Composition& c, const StepShape& shape) {
  int64_t context = 0;
  for (const plan::RequestSlice& r : c.requests) context += r.context;
  const int64_t extra_tokens = shape.tokens - c.num_tokens();
  const int64_t extra_context = std::max<int64_t>(0, shape.kv_read_tokens - context);
  if (extra_tokens <= 0 && extra_context <= 0) return c;
  plan::Composition out = c;
  out.requests.push_back({std::max<int64_t>(extra_tokens, 1), extra_context});
  return out;
}

std::unique_ptr<StoreCost> StoreCost::load(const CostSpec& spec) {
  if (spec.model.name.empty())
    DOOLY_THROW(InputError, "name a model of the store with --model", "the store-backed cost model needs a model");
  store::Store db = store::Store::open(spec.db, store::Store::Mode::read_only);
  predict::StepModel device = predict::StepModel::load(db, options_for(spec, spec.cuda_graphs));
  refuse_missing(device, spec);
  std::unique_ptr<StoreCost> cost(new StoreCost(std::move(device), AnalyticCost::for_spec(spec)));
  cost->store_path_ = spec.db;
  cost->cuda_graphs_ = spec.cuda_graphs;
  if (spec.cuda_graphs) {  // a capture repeats the eager launch: the eager host cost where it was measured
    predict::StepModel eager = predict::StepModel::load(db, options_for(spec, false));
    if (eager.has_host_cost()) cost->host_eager_ = std::move(eager);
  }
  cost->idle_w_ = measured_idle_w(db, cost->device_.measurement_provenance_id()).value_or(spec.gpu.idle_power_w);
  return cost;
}

StepCost StoreCost::step(const plan::Composition& c, const StepShape& shape) const {
  StepCost out;
  const bool eager = shape.path == ForwardPath::eager;
  // Graphs: the device runs the padded shape; its padding tokens are all alike (random MoE routing reads that).
  predict::StepCost d;
  if (eager) {
    d = device_.predict(c);
  } else {
    const plan::Composition p = padded(c, shape);  // its padding tokens: what it adds to c (a KV-only pad adds 1)
    d = device_.predict(p, p.num_tokens() - c.num_tokens());
  }
  out.device_s = d.device_s;
  out.energy_j = d.energy_j;
  out.extrapolated = d.extrapolated_terms;
  if (!device_.has_host_cost()) {  // the analytic model's host terms (H200 medians of the models measured)
    const StepCost a = analytic_.step(c, shape);
    out.host_serial_s = a.host_serial_s;
    out.host_launch_s = a.host_launch_s;
    return out;
  }
  // The host cost is the engine's for the requests it scheduled, not for the padding.
  const double host_s = eager ? d.host_s : device_.predict(c).host_s;
  if (eager) {
    out.host_launch_s = host_s;  // launch-bound: the device runs behind the launches
    return out;
  }
  out.host_serial_s = host_s;
  if (shape.path == ForwardPath::graph_capture)
    out.host_launch_s = host_eager_ ? host_eager_->predict(c).host_s : analytic_.step(c, shape).host_launch_s;
  return out;
}

std::string StoreCost::describe() const {
  std::set<int64_t> missing;
  for (const predict::MissingTerm& m : device_.missing()) missing.insert(m.signature_id);
  const std::string host =
      device_.has_host_cost()
          ? fmt::format("host cost measured for {} with CUDA graphs {}", device_.model_name(),
                        cuda_graphs_ ? "on" : "off")
          : fmt::format(
                "host cost analytic (H200 medians of other models; the store has no engine cost of {} "
                "with CUDA graphs {})",
                device_.model_name(), cuda_graphs_ ? "on" : "off");
  return fmt::format(
      "store {} (measurement context {}, {} under {}; {} op signatures without a measured unit add nothing); {}; "
      "idle {:.1f} W{}",
      store_path_, device_.measurement_provenance_id(), device_.model_name(), device_.attention_backend(),
      missing.size(), host, idle_w_, device_.routes_moe() ? "; " + device_.routing_summary() : std::string());
}

}  // namespace dooly::sim
