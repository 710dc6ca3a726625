#include "dooly/store/ingest.hpp"

#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/signature/sign.hpp"

namespace dooly::store {
namespace {

using nlohmann::json;

std::string text_of(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return "";
  return j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump();
}

Phase phase_of(const std::string& kind, const std::string& path) {
  auto p = parse_phase(kind);
  if (!p) DOOLY_THROW(InputError, "re-create the trace with `dooly trace`", "{}: unknown step kind '{}'", path, kind);
  return *p;
}

// A trace read, checked and signed: everything ingest needs, before anything is written.
struct Prepared {
  std::string path;
  Model model;
  Provenance provenance;
  std::string backend;
  int trace_format = 0;
  std::vector<signature::UnitCount> units;
  std::vector<Phase> phases;  // one per unit
};

Prepared prepare(const std::string& path) {
  const trace::Trace t = trace::read_trace(path);
  Prepared p{path,
             {0, t.model, t.family, t.architecture, t.config_hash},
             provenance_of(t),
             t.backend(),
             t.version,
             signature::count_units(t),
             {}};
  p.phases.reserve(p.units.size());
  for (const auto& u : p.units) p.phases.push_back(phase_of(u.phase, path));
  return p;
}

// The context without the trace format: two provenances that agree here are one context traced twice.
json context_without_format(const Provenance& p) {
  json extra = json::parse(p.extra_json, nullptr, false);
  if (!extra.is_object()) extra = json::object();
  extra.erase("trace_format");
  return json::array({p.gpu_name, p.driver_version, p.cuda_version, p.engine, p.engine_version, p.attention_backend,
                      p.dtype, p.kv_cache_dtype, p.block_size, p.tp, extra});
}

// Two trace formats sign the same work alike when both are at least trace::kFirstCompatibleTraceFormat: a later
// format only tells apart work the earlier one merged (format 3: strided inputs), so every signature the earlier
// one gave still names the same work, and its measurements stay valid.
bool compatible_formats(int64_t a, int64_t b) {
  return a == b || (a >= trace::kFirstCompatibleTraceFormat && b >= trace::kFirstCompatibleTraceFormat);
}

// Refuses a trace whose context already holds traces of an incompatible format (a store written by an older
// build); returns the provenances of the same context in an older compatible format, which this trace supersedes.
std::vector<int64_t> check_formats_of_context(const Store& store, const Prepared& p) {
  const json mine = context_without_format(p.provenance);
  std::vector<int64_t> superseded;
  for (const Provenance& stored : store.provenances()) {
    const json extra = json::parse(stored.extra_json, nullptr, false);
    if (!extra.is_object() || !extra.contains("trace_format") || !extra.at("trace_format").is_number_integer() ||
        extra.at("trace_format") == p.trace_format)
      continue;
    if (context_without_format(stored) != mine) continue;
    const int64_t format = extra.at("trace_format").get<int64_t>();
    if (compatible_formats(format, p.trace_format)) {
      if (format < p.trace_format) superseded.push_back(stored.id);
      continue;
    }
    throw ConflictError(store.path(), 0,
                        fmt::format("{} is trace format {}, but provenance {} ({} {}, {}, {}) holds traces of "
                                    "trace format {}",
                                    p.path, p.trace_format, stored.id, stored.engine, stored.engine_version,
                                    stored.attention_backend, stored.dtype, format),
                        "signatures of two trace formats do not match: ingest into a new store (--db NEW.sqlite), "
                        "or re-trace everything this store holds with this build");
  }
  return superseded;
}

}  // namespace

Provenance provenance_of(const trace::Trace& t) {
  const json& e = t.engine_info;
  const bool cuda = t.device.rfind("cuda", 0) == 0;
  Provenance p;
  p.gpu_name = cuda ? text_of(e, "device_name") : "cpu";
  p.cuda_version = cuda ? text_of(e, "cuda_version") : "";
  p.engine = e.is_object() ? e.value("engine", "hf-transformers") : "hf-transformers";
  p.engine_version = text_of(e, "transformers_version");
  p.attention_backend = t.backend();
  p.dtype = t.dtype;
  p.kv_cache_dtype = text_of(e, "kv_dtype");
  if (e.is_object() && e.contains("block_size") && e.at("block_size").is_number_integer())
    p.block_size = e.at("block_size").get<int64_t>();
  p.extra_json = json{{"torch", text_of(e, "torch_version")}, {"trace_format", t.version}}.dump();
  return p;
}

namespace {

std::vector<Prepared> prepare_all(std::span<const std::string> trace_paths) {
  if (trace_paths.empty())
    DOOLY_THROW(InputError, "pass the trace files written by `dooly trace`", "no trace files given");
  std::vector<Prepared> prepared;
  prepared.reserve(trace_paths.size());
  for (const std::string& path : trace_paths) prepared.push_back(prepare(path));
  return prepared;
}

IngestSummary ingest_prepared(Store& store, const std::vector<Prepared>& prepared) {
  IngestSummary summary;
  std::set<std::string> all_ops, all_modules;
  auto tx = store.transaction();
  for (const Prepared& p : prepared) {
    const std::vector<int64_t> superseded = check_formats_of_context(store, p);
    IngestedTrace row{p.path, p.model.name, p.backend, store.upsert_model(p.model),
                      store.upsert_provenance(p.provenance)};
    // The model's occurrences under an older compatible format of this context give way to this trace's: the
    // same model is not counted twice.
    for (int64_t old : superseded) store.replace_occurrences(row.model_id, old, {});
    std::map<std::string, SignatureUpsert> stored;  // hash -> (id, inserted by this ingest)
    std::vector<Occurrence> occurrences;
    std::set<std::string> trace_ops;
    for (size_t i = 0; i < p.units.size(); ++i) {
      const signature::UnitCount& u = p.units[i];
      auto it = stored.find(u.sig.hash);
      if (it == stored.end()) {
        const SignatureKind kind = u.sig.is_op ? SignatureKind::op : SignatureKind::module;
        it = stored
                 .emplace(u.sig.hash,
                          store.upsert_signature(u.sig.hash, u.sig.name, kind, u.sig.canonical, u.sig.metadata.dump()))
                 .first;
      }
      occurrences.push_back({it->second.id, p.phases[i], u.count});
      if (u.sig.is_op) {
        row.ops += u.count;
        trace_ops.insert(u.sig.hash);
        all_ops.insert(u.sig.hash);
      } else if (all_modules.insert(u.sig.hash).second) {
        summary.new_modules += it->second.inserted;
      }
    }
    store.replace_occurrences(row.model_id, row.provenance_id, occurrences);
    row.unique_ops = static_cast<int64_t>(trace_ops.size());
    for (const auto& h : trace_ops) row.new_ops += stored.at(h).inserted;
    summary.total_ops += row.ops;
    summary.traces.push_back(std::move(row));
  }
  tx.commit();
  summary.unique_ops = static_cast<int64_t>(all_ops.size());
  summary.unique_modules = static_cast<int64_t>(all_modules.size());
  return summary;
}

}  // namespace

IngestSummary ingest_traces(Store& store, std::span<const std::string> trace_paths) {
  return ingest_prepared(store, prepare_all(trace_paths));
}

IngestSummary ingest_traces(const std::string& db_path, std::span<const std::string> trace_paths) {
  const std::vector<Prepared> prepared = prepare_all(trace_paths);
  Store store = Store::open(db_path);
  return ingest_prepared(store, prepared);
}

}  // namespace dooly::store
