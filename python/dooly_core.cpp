// The Python binding: one thin file over the taint session (label ids, integer arithmetic, op propagation),
// the combination table, the signature side (SHA-256, signatures of a trace, collapsed call trees), and what the
// profiler's worker needs (the plan, the store's writes, the energy engine).
// Structured values cross as JSON text; the core never imports Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>

#include "dooly/common/error.hpp"
#include "dooly/energy/profiler.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/plan/grid.hpp"
#include "dooly/plan/plan.hpp"
#include "dooly/plan/profile_store.hpp"
#include "dooly/plan/value_expr.hpp"
#include "dooly/power/registry.hpp"
#include "dooly/signature/canonical.hpp"
#include "dooly/signature/sha256.hpp"
#include "dooly/signature/sign.hpp"
#include "dooly/store/ingest.hpp"
#include "dooly/taint/session.hpp"
#include "dooly/trace/call_tree.hpp"
#include "dooly/trace/layout.hpp"
#include "dooly/trace/model_config.hpp"
#include "dooly/trace/trace.hpp"

namespace py = pybind11;
using nlohmann::json;
using namespace dooly;

namespace {

std::string units_of_trace(const std::string& trace_json) {
  const trace::Trace t = trace::parse_trace(json::parse(trace_json), "trace");
  json out = json::array();
  for (const auto& u : signature::count_units(t))
    out.push_back(json{{"hash", u.sig.hash},
                       {"name", u.sig.name},
                       {"kind", u.sig.is_op ? "op" : "module"},
                       {"phase", u.phase},
                       {"count", u.count},
                       {"canonical", u.sig.canonical},
                       {"metadata", u.sig.metadata}});
  return out.dump();
}

std::string collapsed_tree(const std::string& trace_json, size_t step_index, int max_depth) {
  const trace::Trace t = trace::parse_trace(json::parse(trace_json), "trace");
  if (step_index >= t.steps.size())
    DOOLY_THROW(InputError, "pick a step index below the trace's step count", "trace has {} steps, asked for {}",
                t.steps.size(), step_index);
  const trace::CallTree tree = trace::build_call_tree(t, t.steps[step_index]);
  const auto sigs = signature::sign_tree(tree);
  std::vector<std::string> keys;
  for (const auto& s : sigs) keys.push_back(s.hash);
  return trace::render(
      tree, keys,
      [&](size_t i) {
        const auto& n = tree.nodes[i];
        return n.type == trace::Node::Type::op ? n.name + " [" + sigs[i].hash.substr(0, 8) + "]"
                                               : n.name + " (" + n.path + ") [" + sigs[i].hash.substr(0, 8) + "]";
      },
      max_depth);
}

std::string profile_plan(const std::string& db, const std::vector<std::string>& trace_paths,
                         const std::string& grid_path, int64_t provenance_id, const std::string& shard,
                         bool retry_failed, bool require_energy) {
  const plan::Grid grid = plan::read_grid(grid_path);
  plan::PlanOptions options = plan::parse_shard(shard);
  options.retry_failed = retry_failed;
  options.require_energy = require_energy;
  std::vector<trace::Trace> traces;
  for (const std::string& p : trace_paths) traces.push_back(trace::read_trace(p));
  store::Store s = store::Store::open(db);
  return plan::to_json(plan::build_plan(s, trace_paths, traces, grid, provenance_id, options)).dump();
}

// The store's writes the worker makes, one atomic write each (dooly::plan::profile_store.hpp).
class ProfileStore {
 public:
  explicit ProfileStore(const std::string& path) : store_(store::Store::open(path)) {}
  int64_t measurement_context(const std::string& j) { return plan::upsert_measurement_context(store_, json::parse(j)); }
  int64_t commit_point(const std::string& j) { return plan::commit_point(store_, json::parse(j)); }
  void commit_resolution(const std::string& j) { plan::commit_resolution(store_, json::parse(j)); }
  std::string engine_signature(const std::string& j) { return plan::upsert_engine_signature(store_, json::parse(j)); }
  void ingest(const std::vector<std::string>& traces) { store::ingest_traces(store_, traces); }

 private:
  store::Store store_;
};

// The energy engine over one window at a time: start, begin, (work), end, stop -> the report as JSON text.
// Settings come from DOOLY_* as for the connector (DOOLY_POWER_SOURCE, DOOLY_REPLAY_FILE, ...).
class EnergyMeter {
 public:
  EnergyMeter(std::optional<double> baseline_w, int64_t baseline_measure_ms)
      : registry_(power::make_default_registry()) {
    energy::ProfilerOptions o = energy::ProfilerOptions::from_env();
    if (baseline_w) o.attribution.baseline_w = baseline_w;
    o.baseline_measure_ns = baseline_measure_ms * 1'000'000;
    profiler_ = energy::Profiler::open(std::move(o), registry_);
  }
  std::string backend() const { return profiler_->backend(); }
  void start() { profiler_->start(); }
  void begin(const std::string& name, int32_t device) {
    profiler_->begin(profiler_->key(name, energy::Kind::region), device);
  }
  void end(const std::string& name, int32_t device) {
    profiler_->end(profiler_->key(name, energy::Kind::region), device);
  }
  std::string stop() { return energy::to_json_text(profiler_->stop()); }

 private:
  power::Registry registry_;
  std::unique_ptr<energy::Profiler> profiler_;
};

}  // namespace

PYBIND11_MODULE(dooly_core, m) {
  m.doc() = "dooly's C++ core: taint labels and rules, trace call trees, signatures";
  m.attr("TRACE_FORMAT_VERSION") = trace::kTraceFormatVersion;
  m.attr("SIGNATURE_VERSION") = signature::kSignatureVersion;
  m.attr("VERSION") = DOOLY_VERSION;  // the project's version (CMakeLists.txt), recorded with every measured point

  // pybind11 tries translators newest first: the base class goes first so the derived ones win.
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<InputError>(m, "InputError", PyExc_ValueError);
  py::register_exception<DuplicateError>(m, "DuplicateError", PyExc_ValueError);

  m.def(
      "combine",
      [](const std::string& a, const std::string& b) {
        return std::string(taint::to_string(taint::combine(taint::kind_from_string(a), taint::kind_from_string(b))));
      },
      "The combination table: kind of a value computed from values of kinds a and b.");
  m.def("sha256_hex", [](py::bytes b) { return signature::sha256_hex(std::string(b)); });
  m.def("units_of_trace", &units_of_trace,
        "Distinct op/module signatures of every step of a trace (JSON text in, JSON text out).");
  m.def("collapsed_tree", &collapsed_tree, py::arg("trace_json"), py::arg("step_index") = 0, py::arg("max_depth") = 64);

  m.def(
      "check_model_config",
      [](const std::string& json_text, const std::string& source) {
        const trace::ModelConfigCheck c = trace::check_model_config(json_text, source);
        py::dict d;
        d["model_type"] = c.model_type;
        d["prefix"] = c.prefix;
        d["hidden_size"] = c.hidden_size;
        d["vocab_size"] = c.vocab_size;
        d["num_hidden_layers"] = c.num_hidden_layers;
        d["num_attention_heads"] = c.num_attention_heads;
        d["num_key_value_heads"] = c.num_key_value_heads;
        d["head_dim"] = c.head_dim;
        d["intermediate_size"] = c.intermediate_size;
        d["sliding_window"] = c.sliding_window ? py::cast(*c.sliding_window) : py::none();
        return d;
      },
      py::arg("json_text"), py::arg("source"),
      "Checks a config.json's text (dooly::trace::check_model_config); raises InputError naming the field.");

  m.def(
      "eval_dim",
      [](const std::string& value_form, const std::map<std::string, int64_t>& bindings) {
        return plan::evaluate(value_form, [&](const std::string& name) -> std::optional<int64_t> {
          auto it = bindings.find(name);
          return it == bindings.end() ? std::nullopt : std::optional<int64_t>(it->second);
        });
      },
      py::arg("value_form"), py::arg("bindings"), "A dimension's value form evaluated at a sweep point's bindings.");
  m.def(
      "strides_at",
      [](const std::vector<int64_t>& traced_sizes, const std::vector<int64_t>& strides, int64_t offset,
         const std::vector<int64_t>& sizes) {
        const trace::StridesAt a = trace::strides_at(traced_sizes, trace::Layout{strides, offset}, sizes);
        return py::make_tuple(a.strides, a.offset, a.storage_elements);
      },
      py::arg("traced_sizes"), py::arg("strides"), py::arg("offset"), py::arg("sizes"),
      "(strides, offset, storage elements) of a traced layout carried to new sizes (dooly::trace::strides_at).");
  m.def(
      "grid_measure",
      [](const std::string& grid_path) { return plan::measure_json(plan::read_grid(grid_path).measure).dump(); },
      py::arg("grid"), "A grid file's measure settings, checked, as JSON text (the worker's measurement context).");
  m.def("profile_plan", &profile_plan, py::arg("db"), py::arg("traces"), py::arg("grid"), py::arg("provenance_id"),
        py::arg("shard") = "0/1", py::arg("retry_failed") = false, py::arg("require_energy") = true,
        "The profiling plan (docs/profile.md) as JSON text: units, points the store lacks, estimates.");
  py::class_<ProfileStore>(m, "ProfileStore")
      .def(py::init<const std::string&>())
      .def("measurement_context", &ProfileStore::measurement_context)
      .def("commit_point", &ProfileStore::commit_point)
      .def("commit_resolution", &ProfileStore::commit_resolution)
      .def("engine_signature", &ProfileStore::engine_signature)
      .def("ingest", &ProfileStore::ingest);
  py::class_<EnergyMeter>(m, "EnergyMeter")
      .def(py::init<std::optional<double>, int64_t>(), py::arg("baseline_w") = py::none(),
           py::arg("baseline_measure_ms") = 0)
      .def_property_readonly("backend", &EnergyMeter::backend)
      .def("start", &EnergyMeter::start)
      .def("begin", &EnergyMeter::begin, py::arg("name"), py::arg("device") = -1)
      .def("end", &EnergyMeter::end, py::arg("name"), py::arg("device") = -1)
      .def("stop", &EnergyMeter::stop, py::call_guard<py::gil_scoped_release>());

  py::class_<taint::Session>(m, "Session")
      .def(py::init<>())
      .def("sym", [](taint::Session& s, const std::string& name, const std::string& kind,
                     int64_t value) { return s.sym(name, taint::kind_from_string(kind), value); })
      .def("constant", &taint::Session::constant)
      .def(
          "derived",
          [](taint::Session& s, const std::string& name, const std::string& kind, int64_t value,
             const std::vector<int64_t>& args) { return s.derived(name, taint::kind_from_string(kind), value, args); },
          py::arg("name"), py::arg("kind"), py::arg("value"), py::arg("args"),
          "A labelled quantity name(args...) of the given kind and value (e.g. a sliding window's KV reads)")
      .def("unknown", &taint::Session::unknown)
      .def("binary", &taint::Session::binary)
      .def("unary", &taint::Session::unary)
      .def(
          "describe",
          [](const taint::Session& s, int64_t id) {
            const json d = s.describe(id);
            return py::make_tuple(d["v"].get<int64_t>(), d["k"].get<std::string>(), d["e"].get<std::string>(),
                                  d["f"].get<std::string>());
          },
          "(value, kind, expr, value_form) of a label id")
      .def("propagate", &taint::Session::propagate_text, "JSON call in, JSON result out (docs/dooly-tracing.md)")
      .def("counters",
           [](const taint::Session& s) {
             const auto& c = s.counters();
             return py::dict(py::arg("ops") = c.ops, py::arg("fallback_ops") = c.fallback_ops,
                             py::arg("unknown_dims") = c.unknown_dims,
                             py::arg("unlabelled_inputs") = c.unlabelled_inputs, py::arg("ambiguous") = c.ambiguous,
                             py::arg("conflicts") = c.conflicts);
           })
      .def("rule_ops", [](const taint::Session& s) { return s.rules().ops(); })
      .def("__len__", &taint::Session::size);
}
