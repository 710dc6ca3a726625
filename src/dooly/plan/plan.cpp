#include "dooly/plan/plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/plan/profile_store.hpp"
#include "dooly/plan/value_expr.hpp"
#include "dooly/signature/sign.hpp"
#include "dooly/trace/call_tree.hpp"
#include "dooly/trace/layout.hpp"

namespace dooly::plan {
namespace {

using nlohmann::json;

bool request_side(taint::Kind k) {
  return k != taint::Kind::none && k != taint::Kind::model_config && k != taint::Kind::unknown;
}

using trace::dtype_bytes;

// The request-side value forms an op's dimensions and labelled ints carry.
void forms_of(const trace::OpRecord& op, std::vector<const trace::DimLabel*>& out) {
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list)
      for (const auto& d : t.shape)
        if (request_side(d.kind)) out.push_back(&d);
  for (const auto& s : op.scalars)
    if (s.label && request_side(s.label->kind)) out.push_back(&*s.label);
}

// Bytes an op reads and writes at a point (inputs and outputs; a view's output is counted too: an estimate).
double bytes_at(const trace::OpRecord& op, const Resolver& resolve) {
  double bytes = 0;
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list) {
      double n = 1;
      for (const auto& d : t.shape)
        n *= static_cast<double>(request_side(d.kind) ? evaluate(d.value_form, resolve) : d.value);
      bytes += n * static_cast<double>(dtype_bytes(t.dtype));
    }
  return bytes;
}

struct NodeRef {
  size_t trace = 0, step = 0, node = 0;
};

// What the planner knows of one distinct signature: where it first occurs and what it depends on.
struct Sig {
  std::string hash, name;
  bool is_op = true;
  std::string op_class;
  NodeRef where;
  int64_t call = -1;                        // a module's call id in its step
  std::vector<const trace::OpRecord*> ops;  // the representative's ops (itself for an op, its subtree for a module)
  std::vector<Ancestor> ancestors;
  std::set<std::string> swept;
  std::map<std::string, int64_t> fixed;
  std::map<std::string, int64_t> traced;  // a swept quantity's value where the representative was traced
  int64_t occurrences = 0;                // op occurrences (ops: nodes with this hash; modules: not counted)
  bool gpu_traced = false;                // an op seen in a GPU trace (its kernels were collected there)
  bool launches = false;                  // an op that launched a kernel in some occurrence of a GPU trace
  // An op seen on a GPU that launched no kernel there (a view, a transpose, an expand): its cost is the host's
  // and does not depend on the point, so one point (the largest) measures it.
  bool no_kernel() const { return is_op && gpu_traced && !launches; }
};

// A guess for the dry run: HBM-bound at ~2.5 TB/s plus a launch; the point runs at least min_time_s, and a long one
// settles first (points_of takes the settle off a point that carries over its unit's previous one).
void estimate(const MeasureSettings& m, double bytes, PointPlan& p) {
  const double latency_s = bytes / 2.5e12 + 8e-6;
  p.settle_s = latency_s >= m.settle_min_latency_s ? m.settle_s : 0.0;
  p.estimated_s = m.warmup_s + p.settle_s + std::max(m.min_time_s, static_cast<double>(m.min_reps) * latency_s) + 0.03;
}

// The compositions a unit is swept over, by the step quantities it depends on.
std::vector<Composition> compositions_of(const Sig& s, const Grid& grid, std::string& point_class) {
  std::vector<Composition> comps;
  if (s.swept.empty()) {
    point_class = "fixed";
    comps.push_back({{{1, 0}}});
  } else if (s.swept == std::set<std::string>{"NUM_TOKS"}) {
    point_class = "tokens";
    for (int64_t t : grid.tokens_for(s.op_class))
      if (t <= grid.max_tokens) comps.push_back({{{t, 0}}});
  } else if (s.swept == std::set<std::string>{"NUM_REQS"}) {
    point_class = "requests";
    for (int64_t r : grid.requests) comps.push_back({std::vector<RequestSlice>(static_cast<size_t>(r), {1, 1})});
  } else {
    point_class = "compositions";
    comps = grid.compositions_for(s.op_class);
  }
  return comps;
}

// Quantities equal where the unit was traced stay equal: in a step without cache reads KV_TOKS is NUM_TOKS, and an op
// traced there (its mask labelled by the one, its keys by the other) cannot run where they differ.
std::vector<std::pair<std::string, std::string>> traced_equalities(const Sig& s) {
  std::vector<std::pair<std::string, std::string>> equal;
  for (auto a = s.traced.begin(); a != s.traced.end(); ++a)
    for (auto b = std::next(a); b != s.traced.end(); ++b)
      if (a->second == b->second && s.swept.count(a->first) && s.swept.count(b->first))
        equal.emplace_back(a->first, b->first);
  return equal;
}

PointPlan point_at(const Sig& s, Composition c, const MeasureSettings& measure) {
  PointPlan p;
  json key = json::object();
  for (const std::string& v : s.swept) {
    const int64_t value = *c.value_of(v);  // swept holds step quantities only (classify_variables)
    key[v] = value;
    p.bindings[v] = value;
  }
  for (const auto& [k, v] : s.fixed) p.bindings[k] = v;
  p.key = key.dump();
  const Resolver resolve = [&](const std::string& name) -> std::optional<int64_t> {
    auto it = p.bindings.find(name);
    return it != p.bindings.end() ? std::optional<int64_t>(it->second) : c.value_of(name);
  };
  double bytes = 0;
  for (const trace::OpRecord* op : s.ops) bytes += bytes_at(*op, resolve);
  estimate(measure, bytes, p);
  p.composition = std::move(c);
  return p;
}

// A MoE's grouped GEMM op (`_grouped_mm(rows, expert weights, offsets)`): the experts (the offsets' one fixed dim)
// and the routed rows' value form, or nullopt for any other unit. A module holding one routes with its own router.
struct GroupedGemm {
  int64_t experts = 0;
  const trace::DimLabel* rows = nullptr;
};
std::optional<GroupedGemm> grouped_gemm(const Sig& s) {
  if (!s.is_op || s.ops.size() != 1) return std::nullopt;
  const trace::OpRecord& op = *s.ops.front();
  if ((op.op != "_grouped_mm" && op.op != "grouped_mm") || op.inputs.size() < 3) return std::nullopt;
  const trace::TensorInfo& offs = op.inputs[2];
  const trace::TensorInfo& rows = op.inputs[0];
  if (offs.shape.size() != 1 || request_side(offs.shape[0].kind) || offs.shape[0].value < 2 || rows.shape.empty() ||
      !request_side(rows.shape[0].kind))
    return std::nullopt;
  return GroupedGemm{offs.shape[0].value, &rows.shape[0]};
}

// The routing points of a grouped GEMM (Grid::moe): at each of the section's token counts, the rows forced onto
// each listed number of experts that the uniform spread does not reach anyway, and skewed over every expert.
void add_routing_points(const Sig& s, const Grid& grid, std::set<std::string>& keys, std::vector<PointPlan>& points) {
  const auto g = grouped_gemm(s);
  if (!g || grid.moe.empty() || s.swept != std::set<std::string>{"NUM_TOKS"}) return;
  for (const int64_t t : grid.moe.tokens) {
    if (t > grid.max_tokens) continue;
    const Composition c{{{t, 0}}};
    const int64_t rows = evaluate(g->rows->value_form, [&](const std::string& name) { return c.value_of(name); });
    const int64_t reached = std::min(rows, g->experts);  // a uniform spread's experts
    auto add = [&](int64_t experts, int64_t skew) {
      PointPlan p = point_at(s, c, grid.measure);
      json key = json::parse(p.key);
      key["MOE_EXPERTS"] = p.bindings["MOE_EXPERTS"] = experts;
      key["MOE_SKEW"] = p.bindings["MOE_SKEW"] = skew;
      p.key = key.dump();
      if (keys.insert(p.key).second) points.push_back(std::move(p));  // a grid listing a value twice: once
    };
    for (const int64_t k : grid.moe.experts)
      if (k < reached) add(k, 0);
    if (reached >= 2)
      for (const int64_t pct : grid.moe.skew_percent) add(g->experts, pct);
  }
}

std::vector<PointPlan> points_of(const Sig& s, const Grid& grid, std::string& point_class) {
  const auto equal = traced_equalities(s);
  std::vector<PointPlan> points;
  std::set<std::string> keys;
  for (Composition& c : compositions_of(s, grid, point_class)) {
    const bool keep = std::all_of(equal.begin(), equal.end(),
                                  [&](const auto& xy) { return c.value_of(xy.first) == c.value_of(xy.second); });
    if (!keep) continue;
    PointPlan p = point_at(s, std::move(c), grid.measure);
    if (keys.insert(p.key).second) points.push_back(std::move(p));
  }
  const size_t uniform = points.size();
  add_routing_points(s, grid, keys, points);
  if (points.size() > uniform) point_class = "moe";
  if (s.no_kernel() && points.size() > 1) point_class = "no_kernel";
  // Largest first: an out-of-memory point then trims what lies beyond it before time is spent there. A routing
  // point is as large as the uniform point of its tokens (MOE_EXPERTS and MOE_SKEW are no sizes).
  auto size_of = [](const PointPlan& p) {
    double v = 0;
    for (const auto& [k, x] : p.bindings)
      if (k.rfind("MOE_", 0) != 0) v += std::log(static_cast<double>(std::max<int64_t>(x, 1)));
    return v;
  };
  std::stable_sort(points.begin(), points.end(),
                   [&](const PointPlan& a, const PointPlan& b) { return size_of(a) > size_of(b); });
  if (point_class == "no_kernel") points.resize(1);
  if (grid.measure.settle_carry_gap_s > 0) {  // back to back, largest first: the unit's first long point settles
    bool settled = false;
    for (PointPlan& p : points) {
      if (settled && p.settle_s > 0) p.estimated_s -= std::exchange(p.settle_s, 0.0);
      settled = settled || p.settle_s > 0;
    }
  }
  return points;
}

void add_totals(PlanTotals& t, const std::string& cls, const std::vector<PointPlan>& points) {
  t.units += 1;
  t.points += static_cast<int64_t>(points.size());
  for (const PointPlan& p : points) {
    t.estimated_s += p.estimated_s;
    t.estimated_s_by_class[cls] += p.estimated_s;
  }
  t.points_by_class[cls] += static_cast<int64_t>(points.size());
}

uint64_t shard_of(const std::string& hash, int shards) {
  return std::stoull(hash.substr(0, 12), nullptr, 16) % static_cast<uint64_t>(shards);
}

json totals_json(const PlanTotals& t) {
  return {{"units", t.units},
          {"points", t.points},
          {"estimated_s", t.estimated_s},
          {"estimated_s_by_class", t.estimated_s_by_class},
          {"points_by_class", t.points_by_class}};
}

}  // namespace

Limits limits_of(const trace::Trace& trace) {
  Limits l;
  const json& j = trace.limits;
  auto get = [&](const char* k) { return j.contains(k) && j.at(k).is_number_integer() ? j.at(k).get<int64_t>() : 0; };
  if (get("max_batch_tokens")) l["MAX_NUM_TOKS"] = get("max_batch_tokens");
  if (get("max_batch_requests")) l["MAX_NUM_REQS"] = get("max_batch_requests");
  if (get("num_blocks") && get("block_size")) l["CACHE_SLOTS"] = get("num_blocks") * get("block_size");
  return l;
}

void classify_variables(const std::string& value_form, std::vector<std::string>& swept,
                        std::map<std::string, int64_t>& fixed, const Limits& limits) {
  for (const std::string& v : variables_of(value_form)) {
    if (is_step_quantity(v)) {
      if (std::find(swept.begin(), swept.end(), v) == swept.end()) swept.push_back(v);
    } else if (is_limit(v) && limits.count(v)) {
      fixed[v] = limits.at(v);
    } else {
      DOOLY_THROW(InputError,
                  "the planner knows the step quantities and engine limits of docs/dooly-tracing.md; re-trace with "
                  "this build, or report the label",
                  "dimension '{}' depends on '{}', which is neither a step quantity nor a limit the trace records",
                  value_form, v);
    }
  }
}

PlanOptions parse_shard(const std::string& text, PlanOptions options) {
  const size_t slash = text.find('/');
  int i = -1, n = 0;
  try {
    if (slash != std::string::npos) {
      size_t a = 0, b = 0;
      i = std::stoi(text.substr(0, slash), &a);
      n = std::stoi(text.substr(slash + 1), &b);
      if (a != slash || b != text.size() - slash - 1) n = 0;
    }
  } catch (const std::exception&) {
    n = 0;
  }
  if (n < 1 || i < 0 || i >= n || n > 100000)
    DOOLY_THROW(InputError, "give --shard i/N with 0 <= i < N, e.g. --shard 0/4 for the first of four",
                "--shard '{}' is not of the form i/N", text);
  options.shard = i;
  options.shards = n;
  return options;
}

namespace {

// Every distinct signature of a set of traces, with where it first occurs and what it depends on.
struct Collected {
  std::unordered_map<std::string, size_t> index;  // hash -> sigs
  std::vector<Sig> sigs;
  std::vector<std::vector<std::string>> trace_ops;  // distinct op hashes per trace, first-seen order
  int64_t op_occurrences = 0;
};

Sig make_sig(const trace::CallTree& tree, const std::vector<signature::Signed>& signed_nodes,
             std::vector<const trace::OpRecord*> ops, const Limits& limits, NodeRef where) {
  const trace::Node& node = tree.nodes[where.node];
  Sig s;
  s.hash = signed_nodes[where.node].hash;
  s.name = signed_nodes[where.node].name;
  s.is_op = node.type == trace::Node::Type::op;
  s.op_class = !s.is_op ? "module" : node.op->op == "scaled_dot_product_attention" ? "attention" : node.op->rule;
  s.where = where;
  s.call = node.call;
  s.ops = std::move(ops);
  for (size_t p = node.parent; p != SIZE_MAX && p > 0; p = tree.nodes[p].parent)
    s.ancestors.push_back({signed_nodes[p].hash, signed_nodes[p].name, tree.nodes[p].call});
  std::vector<std::string> swept;
  std::map<std::string, int64_t> traced_limits;
  for (const trace::OpRecord* op : s.ops) {
    std::vector<const trace::DimLabel*> forms;
    forms_of(*op, forms);
    for (const trace::DimLabel* d : forms) {
      classify_variables(d->value_form, swept, s.fixed, limits);
      if (is_step_quantity(d->value_form)) s.traced[d->value_form] = d->value;
      if (is_limit(d->value_form)) traced_limits[d->value_form] = d->value;
    }
  }
  // A limit a dim shows bare keeps the value it had there, the engine's own: the golden traces' caches have
  // 333 blocks (85248 slots) where their limits record the 331 asked for. limits_of() serves limits that only
  // occur inside larger forms.
  for (const auto& [k, v] : traced_limits) s.fixed[k] = v;
  s.swept.insert(swept.begin(), swept.end());
  return s;
}

void collect_step(const trace::Trace& tr, size_t ti, size_t si, const Limits& limits, Collected& c,
                  std::set<std::string>& seen_here) {
  const trace::CallTree tree = trace::build_call_tree(tr, tr.steps[si]);
  const std::vector<signature::Signed> signed_nodes = signature::sign_tree(tree);
  // Subtree ops per node (children have larger indices than parents: walk backwards).
  std::vector<std::vector<const trace::OpRecord*>> subtree(tree.nodes.size());
  for (size_t n = tree.nodes.size(); n-- > 1;) {
    const trace::Node& node = tree.nodes[n];
    if (node.op) subtree[n].push_back(node.op);
    if (node.parent != SIZE_MAX && node.parent > 0)
      subtree[node.parent].insert(subtree[node.parent].end(), subtree[n].begin(), subtree[n].end());
  }
  for (size_t n = 1; n < tree.nodes.size(); ++n) {
    auto [it, fresh] = c.index.emplace(signed_nodes[n].hash, c.sigs.size());
    if (fresh) c.sigs.push_back(make_sig(tree, signed_nodes, subtree[n], limits, {ti, si, n}));
    Sig& s = c.sigs[it->second];
    if (!s.is_op) continue;
    if (tr.device.rfind("cuda", 0) == 0) {
      s.gpu_traced = true;
      s.launches = s.launches || !tree.nodes[n].op->kernels.empty();
    }
    ++s.occurrences;
    ++c.op_occurrences;
    if (seen_here.insert(s.hash).second) c.trace_ops[ti].push_back(s.hash);
  }
}

Collected collect(const std::vector<trace::Trace>& traces) {
  Collected c;
  c.trace_ops.resize(traces.size());
  for (size_t ti = 0; ti < traces.size(); ++ti) {
    const Limits limits = limits_of(traces[ti]);
    std::set<std::string> seen_here;
    for (size_t si = 0; si < traces[ti].steps.size(); ++si) collect_step(traces[ti], ti, si, limits, c, seen_here);
  }
  return c;
}

// Which unit measures op signature `s` under the context: itself, or the module a stored resolution says absorbs
// it; nullopt when it is stored as unrunnable (then it goes to `uncovered`), unless `retry_failed`: then it is
// resolved again, as a failed point is measured again (a hole is never permanent: a fix in the worker, or a trace of
// a later format, can make it run).
struct UnitChoice {
  std::string unit_hash;
  std::string resolution = "unresolved";
  int64_t signature_id = 0;
};
std::optional<UnitChoice> unit_for(store::Store& store, const Sig& s, int64_t provenance_id, bool retry_failed,
                                   std::vector<Uncovered>& uncovered) {
  UnitChoice c{s.hash};
  const auto stored = store.find_signature(s.hash);
  if (!stored) return c;
  c.signature_id = stored->id;
  if (provenance_id <= 0) return c;
  const auto r = store.resolution_of(stored->id, provenance_id);
  if (!r) return c;
  if (r->status == store::ResolutionStatus::unrunnable && retry_failed) return c;
  if (r->status == store::ResolutionStatus::unrunnable) {
    uncovered.push_back({s.hash, s.name, r->attempts_json, s.occurrences});
    return std::nullopt;
  }
  c.resolution = r->status == store::ResolutionStatus::absorbed ? "absorbed" : "runs";
  if (r->unit_signature_id && *r->unit_signature_id != stored->id)
    for (const Ancestor& a : s.ancestors)
      if (auto u = store.find_signature(a.hash); u && u->id == *r->unit_signature_id) c.unit_hash = a.hash;
  return c;
}

UnitPlan make_unit(store::Store& store, const Sig& u, const Sig& first_op, const UnitChoice& choice) {
  UnitPlan p;
  p.hash = u.hash;
  p.name = u.name;
  p.is_op = u.is_op;
  p.op_class = u.is_op ? u.op_class : first_op.op_class;
  p.signature_id = u.is_op ? choice.signature_id : 0;
  if (!u.is_op)
    if (auto stored = store.find_signature(u.hash)) p.signature_id = stored->id;
  p.trace = u.where.trace;
  p.step = u.where.step;
  p.seq = u.is_op ? u.ops.front()->seq : -1;
  p.call = u.is_op ? -1 : u.call;
  p.ancestors = u.ancestors;
  p.swept.assign(u.swept.begin(), u.swept.end());
  p.fixed = u.fixed;
  p.resolution = u.is_op ? choice.resolution : "absorbed";
  p.occurrences = first_op.occurrences;
  return p;
}

// Whether an ok row's energy was measured without the settle period its latency asks for: a long row from before
// the settle period existed (no settle_s recorded), or one settled shorter than the grid asks. A recorded 0 is the
// worker's own judgement (one replay was shorter than settle_min_latency_s a call) and stands.
bool unsettled(const store::Measurement& m, const json& extra, const MeasureSettings& s) {
  if (s.settle_s <= 0 || m.latency_mean_s < s.settle_min_latency_s || !m.energy_j) return false;
  const auto it = extra.is_object() ? extra.find("settle_s") : extra.end();
  if (it == extra.end() || !it->is_number()) return true;
  const double settled = it->get<double>();
  return settled > 0 && settled < 0.95 * s.settle_s;  // 5 % slack: the worker stops at its first check past it
}

// Whether an ok row holds no energy because the engine found its windows below the resolution floor (no more
// energy than idle over them; extra_json.energy.below_floor, written by the worker with its note): measured, with
// nothing to resolve; measuring it again would only add rows.
bool below_floor(const store::Measurement& m, const json& extra) {
  if (m.energy_j) return false;
  if (!extra.is_object() || !extra.contains("energy") || !extra["energy"].is_object()) return false;
  const auto it = extra["energy"].find("below_floor");
  return it != extra["energy"].end() && it->is_boolean() && it->get<bool>();
}

// Whether a unit's inputs hold a layout whose rebuilt strides kLayoutRule 2 changed (a static buffer's rows): then
// its rows measured under an older rule are measured again.
bool has_buffer_rows(const Sig& u) {
  for (const trace::OpRecord* op : u.ops)
    for (const trace::TensorInfo& t : op->inputs) {
      if (!t.layout) continue;
      std::vector<int64_t> sizes;
      std::vector<bool> swept;
      for (const trace::DimLabel& d : t.shape) {
        sizes.push_back(d.value);
        swept.push_back(request_side(d.kind));  // as the profiler's units read the labels
      }
      if (trace::has_buffer_rows(sizes, *t.layout, swept)) return true;
    }
  return false;
}

// The layout rule a row's unit was built under (extra_json "layout_rule"; rows from before it was recorded: 1).
int layout_rule(const json& extra) {
  const auto it = extra.is_object() ? extra.find("layout_rule") : extra.end();
  return it != extra.end() && it->is_number_integer() ? it->get<int>() : 1;
}

// What an ok row says of its point: measured again under a newer layout rule (`relaid`, a unit with a static
// buffer's rows only) or the settle period (`unsettled`), committed, or nothing (no energy where one is asked).
enum class RowVerdict { relaid, unsettled, committed, nothing };

RowVerdict judge(const store::Measurement& m, const json& extra, const PlanOptions& options,
                 const MeasureSettings& measure, bool buffer_rows) {
  if (buffer_rows && layout_rule(extra) < trace::kLayoutRule) return RowVerdict::relaid;
  if (options.require_energy && unsettled(m, extra, measure)) return RowVerdict::unsettled;
  if (m.energy_j || !options.require_energy || below_floor(m, extra)) return RowVerdict::committed;
  return RowVerdict::nothing;
}

// Splits a unit's grid into committed (skipped), failed (skipped unless retried) and to measure, from the unit's
// rows under the context (one query). With require_energy an ok row counts only with its energy, or with the
// engine's word that it was below the resolution floor; an ok row without either is neither committed nor failed:
// measured again, as is an unsettled one (its energy predates the settle period) and, for a unit with a static
// buffer's rows (`buffer_rows`), one measured under an older layout rule. A committed row takes precedence over an
// older row of the same point that is not.
void split_points(store::Store& store, UnitPlan& p, std::vector<PointPlan> all, int64_t provenance_id,
                  const PlanOptions& options, const MeasureSettings& measure, Pace& pace, bool buffer_rows) {
  std::set<std::string> committed, ok, tried, stale, relaid;
  std::map<std::string, double> took;  // committed points' point_s
  if (provenance_id > 0 && p.signature_id > 0)
    for (const store::Measurement& m : store.measurements_for(p.signature_id, provenance_id)) {
      if (m.point_key.empty()) continue;  // rows from schema v2 match no point
      tried.insert(m.point_key);
      if (m.status != store::MeasurementStatus::ok) continue;
      ok.insert(m.point_key);
      const json extra = json::parse(m.extra_json, nullptr, false);  // once: every question reads it
      switch (judge(m, extra, options, measure, buffer_rows)) {
        case RowVerdict::relaid:
          relaid.insert(m.point_key);
          break;
        case RowVerdict::unsettled:
          stale.insert(m.point_key);
          break;
        case RowVerdict::committed:
          committed.insert(m.point_key);
          if (auto t = point_seconds(extra)) took[m.point_key] = *t;
          break;
        case RowVerdict::nothing:
          break;
      }
    }
  for (PointPlan& pt : all) {
    if (committed.count(pt.key)) {
      ++p.points_committed;
      if (auto t = took.find(pt.key); t != took.end()) {
        ++pace.points;
        pace.measured_s += t->second;
        pace.estimated_s += pt.estimated_s;
      }
    } else if (relaid.count(pt.key)) {
      ++p.points_relaid;
      p.points.push_back(std::move(pt));
    } else if (stale.count(pt.key)) {
      ++p.points_unsettled;
      p.points.push_back(std::move(pt));
    } else if (tried.count(pt.key) && !ok.count(pt.key) && !options.retry_failed) {
      ++p.points_failed;
    } else {
      p.points.push_back(std::move(pt));
    }
  }
}

}  // namespace

Plan build_plan(store::Store& store, const std::vector<std::string>& trace_paths,
                const std::vector<trace::Trace>& traces, const Grid& grid, int64_t provenance_id,
                const PlanOptions& options) {
  Plan plan;
  plan.traces = trace_paths;
  plan.grid_file = grid.origin;
  plan.grid_sha256 = grid.sha256;
  plan.measure = grid.measure;
  plan.provenance_id = provenance_id;
  plan.options = options;
  const Collected c = collect(traces);
  plan.op_occurrences = c.op_occurrences;

  // A signature's points on the grid, computed once: the aware plan and the naive one count the same points.
  std::unordered_map<std::string, std::pair<std::string, std::vector<PointPlan>>> grid_points;
  auto points_for = [&](const Sig& s) -> const std::pair<std::string, std::vector<PointPlan>>& {
    auto [it, fresh] = grid_points.try_emplace(s.hash);
    if (fresh) it->second.second = points_of(s, grid, it->second.first);
    return it->second;
  };
  std::map<std::string, UnitPlan> units;  // by unit hash
  std::map<std::string, std::vector<std::string>> absorbed_by;
  for (const Sig& s : c.sigs) {
    if (!s.is_op) continue;
    ++plan.op_signatures;
    const std::optional<UnitChoice> choice = unit_for(store, s, provenance_id, options.retry_failed, plan.uncovered);
    if (!choice) continue;
    if (choice->unit_hash != s.hash) absorbed_by[choice->unit_hash].push_back(s.hash);
    if (auto it = units.find(choice->unit_hash); it != units.end()) {
      it->second.occurrences += s.occurrences;
      continue;
    }
    const Sig& u = c.sigs[c.index.at(choice->unit_hash)];
    UnitPlan p = make_unit(store, u, s, *choice);
    const auto& [point_class, all] = points_for(u);
    p.point_class = point_class;
    p.points_total = static_cast<int64_t>(all.size());
    add_totals(plan.aware, p.op_class, all);
    split_points(store, p, all, provenance_id, options, grid.measure, plan.pace, has_buffer_rows(u));
    units.emplace(choice->unit_hash, std::move(p));
  }
  for (auto& [h, list] : absorbed_by) units.at(h).absorbs = list;

  // The naive plan: every trace (a model under one attention backend) measures its own op signatures.
  for (const auto& hashes : c.trace_ops)
    for (const std::string& h : hashes) {
      const Sig& s = c.sigs[c.index.at(h)];
      add_totals(plan.naive, s.op_class, points_for(s).second);
    }

  for (auto& [h, u] : units) {
    if (options.shards > 1 && shard_of(h, options.shards) != static_cast<uint64_t>(options.shard)) continue;
    if (u.resolution == "unresolved") ++plan.unresolved_units;
    add_totals(plan.todo, u.op_class, u.points);
    plan.units.push_back(std::move(u));
  }
  return plan;
}

json to_json(const Plan& plan) {
  json units = json::array();
  for (const UnitPlan& u : plan.units) {
    json points = json::array();
    for (const PointPlan& p : u.points) {
      json reqs = json::array();
      for (const RequestSlice& r : p.composition.requests) reqs.push_back({r.new_tokens, r.context});
      points.push_back({{"key", p.key},
                        {"bindings", p.bindings},
                        {"requests", reqs},
                        {"num_tokens", p.composition.num_tokens()},
                        {"num_requests", p.composition.num_requests()},
                        {"prefill_tokens", p.composition.prefill_tokens()},
                        {"decode_requests", p.composition.decode_requests()},
                        {"kv_tokens", *p.composition.value_of("KV_TOKS")},
                        {"estimated_s", p.estimated_s}});
    }
    json ancestors = json::array();
    for (const Ancestor& a : u.ancestors) ancestors.push_back({{"hash", a.hash}, {"name", a.name}, {"call", a.call}});
    units.push_back({{"hash", u.hash},
                     {"name", u.name},
                     {"kind", u.is_op ? "op" : "module"},
                     {"op_class", u.op_class},
                     {"signature_id", u.signature_id},
                     {"trace", u.trace},
                     {"step", u.step},
                     {"seq", u.seq},
                     {"call", u.call},
                     {"ancestors", ancestors},
                     {"absorbs", u.absorbs},
                     {"swept", u.swept},
                     {"fixed", u.fixed},
                     {"point_class", u.point_class},
                     {"resolution", u.resolution},
                     {"points", points},
                     {"points_total", u.points_total},
                     {"points_committed", u.points_committed},
                     {"points_failed", u.points_failed},
                     {"points_unsettled", u.points_unsettled},
                     {"points_relaid", u.points_relaid},
                     {"occurrences", u.occurrences}});
  }
  json uncovered = json::array();
  for (const Uncovered& x : plan.uncovered)
    uncovered.push_back({{"hash", x.hash}, {"name", x.name}, {"reason", x.reason}, {"occurrences", x.occurrences}});
  return {{"version", 1},
          {"traces", plan.traces},
          {"grid_file", plan.grid_file},
          {"grid_sha256", plan.grid_sha256},
          {"measure", measure_json(plan.measure)},
          {"provenance_id", plan.provenance_id},
          {"shard", plan.options.shard},
          {"shards", plan.options.shards},
          {"retry_failed", plan.options.retry_failed},
          {"pace",
           {{"points", plan.pace.points},
            {"measured_s", plan.pace.measured_s},
            {"estimated_s", plan.pace.estimated_s},
            {"ratio", plan.pace.ratio()}}},
          {"require_energy", plan.options.require_energy},
          {"op_occurrences", plan.op_occurrences},
          {"op_signatures", plan.op_signatures},
          {"unresolved_units", plan.unresolved_units},
          {"units", units},
          {"uncovered", uncovered},
          {"todo", totals_json(plan.todo)},
          {"aware", totals_json(plan.aware)},
          {"naive", totals_json(plan.naive)}};
}

std::string render_plan(const Plan& plan) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  int64_t committed = 0, failed = 0, unsettled = 0, relaid = 0;
  for (const UnitPlan& u : plan.units) {
    committed += u.points_committed;
    failed += u.points_failed;
    unsettled += u.points_unsettled;
    relaid += u.points_relaid;
  }
  line(fmt::format("plan: {} traces, {} op occurrences -> {} op signatures -> {} units{}", plan.traces.size(),
                   plan.op_occurrences, plan.op_signatures, plan.aware.units,
                   plan.options.shards > 1 ? fmt::format(" (shard {}/{}: {} units)", plan.options.shard,
                                                         plan.options.shards, plan.units.size())
                                           : ""));
  line(fmt::format("points: {} to measure, {} already committed (skipped), {} failed before{}", plan.todo.points,
                   committed, failed, failed && !plan.options.retry_failed ? " (not retried: --retry-failed)" : ""));
  if (unsettled)
    line(
        fmt::format("{} of the points to measure were stored without the settle period their latency asks for "
                    "(settle_s {} s from {} ms a call): measured again",
                    unsettled, plan.measure.settle_s, plan.measure.settle_min_latency_s * 1e3));
  if (relaid)
    line(
        fmt::format("{} of the points to measure were measured with a static buffer's rows laid out under an older "
                    "rule (layout rule < {}: docs/dooly-tracing.md, \"Layouts\"): measured again",
                    relaid, trace::kLayoutRule));
  const auto no_kernel = std::count_if(plan.units.begin(), plan.units.end(),
                                       [](const UnitPlan& u) { return u.point_class == "no_kernel"; });
  if (no_kernel)
    line(
        fmt::format("{} units launched no kernel in the GPU traces that hold them (views, transposes, expands): "
                    "one point each, their largest",
                    no_kernel));
  if (plan.unresolved_units)
    line(fmt::format("{} units not tried alone yet (assumed to run alone; the first point decides)",
                     plan.unresolved_units));
  line(fmt::format("{:<14} {:>7} {:>9} {:>12} {:>12} {:>12} {:>8}", "class", "units", "points", "est. GPU s",
                   "naive points", "naive s", "saved"));
  std::set<std::string> classes;
  for (const auto& [c, v] : plan.naive.points_by_class) classes.insert(c);
  for (const auto& [c, v] : plan.aware.points_by_class) classes.insert(c);
  std::map<std::string, int64_t> units_by_class;
  for (const UnitPlan& u : plan.units) ++units_by_class[u.op_class];
  auto get = [](const auto& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? typename std::decay_t<decltype(m)>::mapped_type{} : it->second;
  };
  for (const std::string& c : classes) {
    const double aware_s = get(plan.aware.estimated_s_by_class, c), naive_s = get(plan.naive.estimated_s_by_class, c);
    line(fmt::format("{:<14} {:>7} {:>9} {:>12.1f} {:>12} {:>12.1f} {:>7.1f}%", c, get(units_by_class, c),
                     get(plan.aware.points_by_class, c), aware_s, get(plan.naive.points_by_class, c), naive_s,
                     naive_s > 0 ? 100.0 * (naive_s - aware_s) / naive_s : 0.0));
  }
  const double saved = plan.naive.estimated_s > 0 ? 1.0 - plan.aware.estimated_s / plan.naive.estimated_s : 0.0;
  line(fmt::format(
      "redundancy-aware: {} points, est. {:.1f} GPU-min; naive (each model x backend alone): {} points, "
      "est. {:.1f} GPU-min; saved {:.1f} %",
      plan.aware.points, plan.aware.estimated_s / 60, plan.naive.points, plan.naive.estimated_s / 60, 100 * saved));
  line(
      fmt::format("this run: {} points, est. {:.1f} GPU-min (estimates: {:.2f} s per point at least; the grid's "
                  "measure settings)",
                  plan.todo.points, plan.todo.estimated_s / 60, plan.measure.warmup_s + plan.measure.min_time_s));
  // A handful of points says little of the rest's pace: from kMinPacePoints on, the model scaled by it.
  constexpr int64_t kMinPacePoints = 20;
  if (plan.pace.points >= kMinPacePoints && plan.todo.points > 0)
    line(
        fmt::format("at the pace of the {} points this context holds ({:.3f} s each inside the worker, {:.2f}x the "
                    "model's estimate of them): {:.1f} GPU-min, plus each run's start-up",
                    plan.pace.points, plan.pace.measured_s / static_cast<double>(plan.pace.points), plan.pace.ratio(),
                    plan.todo.estimated_s * plan.pace.ratio() / 60));
  if (!plan.uncovered.empty()) {
    int64_t occ = 0;
    for (const Uncovered& x : plan.uncovered) occ += x.occurrences;
    line(fmt::format("uncovered: {} signatures ({} op occurrences) have no unit that runs:", plan.uncovered.size(),
                     occ));
    for (const Uncovered& x : plan.uncovered)
      line(fmt::format("  {} {} ({} occurrences): {}", x.hash.substr(0, 12), x.name, x.occurrences, x.reason));
  }
  return out;
}

}  // namespace dooly::plan
