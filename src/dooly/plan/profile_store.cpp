#include "dooly/plan/profile_store.hpp"

#include <string>

#include "dooly/common/error.hpp"
#include "dooly/signature/sha256.hpp"
#include "dooly/trace/layout.hpp"

namespace dooly::plan {
namespace {

using nlohmann::json;

constexpr const char* kFix = "the worker and the core disagree on the protocol: rebuild dooly_core (scripts/build.sh)";

const json& need(const json& j, const char* key, const char* what) {
  if (!j.is_object() || !j.contains(key)) DOOLY_THROW(InputError, kFix, "{}: missing field '{}'", what, key);
  return j.at(key);
}

int64_t signature_id(store::Store& store, const json& j, const char* key, const char* what) {
  const std::string hash = need(j, key, what).get<std::string>();
  const auto sig = store.find_signature(hash);
  if (!sig)
    DOOLY_THROW(InputError, "ingest the traces first (dooly profile does, before it plans)",
                "{}: signature {} is not in store {}", what, hash, store.path());
  return sig->id;
}

}  // namespace

std::optional<double> point_seconds(const json& extra) {
  const auto it = extra.is_object() ? extra.find("point_s") : extra.end();
  if (it == extra.end() || !it->is_number() || !(it->get<double>() > 0)) return std::nullopt;
  return it->get<double>();
}

int64_t upsert_measurement_context(store::Store& store, const json& context) {
  store::Provenance p;
  p.gpu_name = need(context, "gpu_name", "measurement context").get<std::string>();
  p.driver_version = context.value("driver_version", "");
  p.cuda_version = context.value("cuda_version", "");
  p.engine = context.value("engine", "");
  p.engine_version = context.value("engine_version", "");
  json extra = context.value("extra", json::object());
  extra["context"] = "measure";
  p.extra_json = extra.dump();
  return store.upsert_provenance(p);
}

std::optional<int64_t> latest_measurement_context(store::Store& store) {
  std::optional<int64_t> best;
  for (const store::Provenance& p : store.provenances()) {
    const json extra = json::parse(p.extra_json, nullptr, false);
    if (extra.is_object() && extra.value("context", "") == "measure") best = p.id;  // ordered by id: newest last
  }
  return best;
}

int64_t commit_point(store::Store& store, const json& r) {
  const char* what = "measured point";
  store::Measurement m;
  m.signature_id = signature_id(store, r, "signature", what);
  m.provenance_id = need(r, "provenance_id", what).get<int64_t>();
  const json& point = need(r, "point", what);
  m.point_key = store::canonical_point_key(need(point, "key", what).get<std::string>());
  const std::string status = need(r, "status", what).get<std::string>();
  const auto st = store::parse_measurement_status(status);
  if (!st) DOOLY_THROW(InputError, kFix, "{}: unknown status '{}'", what, status);
  m.status = *st;
  m.reason = r.value("reason", "");
  m.num_tokens = point.value("num_tokens", int64_t{0});
  m.num_requests = point.value("num_requests", int64_t{0});
  m.prefill_chunk = point.value("prefill_tokens", int64_t{0});
  m.kv_length = point.value("kv_tokens", int64_t{0});
  m.batch = point.value("decode_requests", int64_t{0});
  m.is_prefill = m.batch == 0;
  m.repetitions = r.value("repetitions", int64_t{0});
  if (r.contains("latency_s") && r.at("latency_s").is_object()) {
    const json& l = r.at("latency_s");
    m.latency_mean_s = l.value("mean", 0.0);
    m.latency_median_s = l.value("median", 0.0);
    m.latency_min_s = l.value("min", 0.0);
    m.latency_max_s = l.value("max", 0.0);
    m.latency_std_s = l.value("std", 0.0);
  }
  if (r.contains("energy") && r.at("energy").is_object()) {
    const json& e = r.at("energy");
    auto opt = [&](const char* k) -> std::optional<double> {
      if (e.contains(k) && e.at(k).is_number()) return e.at(k).get<double>();
      return std::nullopt;
    };
    m.energy_j = opt("j");
    m.energy_hw_j = opt("hw_j");
    m.energy_std_j = opt("std_j");
    m.avg_power_w = opt("avg_power_w");
  }
  json extra = r.value("extra", json::object());
  if (!extra.contains("layout_rule")) extra["layout_rule"] = trace::kLayoutRule;  // the rule this binding builds by
  extra["bindings"] = point.value("bindings", json::object());
  extra["requests"] = point.value("requests", json::array());
  m.extra_json = extra.dump();
  return store.insert_measurement(m);
}

std::string upsert_engine_signature(store::Store& store, const json& engine) {
  const char* what = "engine signature";
  json attrs = json::object();
  for (const char* k : {"model", "config_hash", "attention", "dtype"}) {
    const json& v = need(engine, k, what);
    if (!v.is_string() || v.get<std::string>().empty())
      DOOLY_THROW(InputError, kFix, "{}: '{}' must be a non-empty string", what, k);
    attrs[k] = v;
  }
  for (const char* k : {"block_size", "max_batch_tokens"}) {
    const json& v = need(engine, k, what);
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      DOOLY_THROW(InputError, kFix, "{}: '{}' must be a positive integer", what, k);
    attrs[k] = v;
  }
  const json& graphs = need(engine, "cuda_graphs", what);
  if (!graphs.is_array() || graphs.size() != 2 || !graphs[0].is_boolean() || !graphs[1].is_boolean())
    DOOLY_THROW(InputError, kFix, "{}: 'cuda_graphs' must be [varlen, decode] booleans", what);
  attrs["cuda_graphs"] = graphs;
  if (engine.contains("loop")) {  // where the engine's loop ran while timed; absent in stores before 2026-12-04
    const json& v = engine.at("loop");
    if (!v.is_string() || v.get<std::string>().empty())
      DOOLY_THROW(InputError, kFix, "{}: 'loop' must be a non-empty string (engine-thread or caller)", what);
    attrs["loop"] = v;
  }
  const json& n = need(engine, "name", what);
  if (!n.is_string() || n.get<std::string>().empty())
    DOOLY_THROW(InputError, kFix, "{}: 'name' must be a non-empty string", what);
  const std::string name = n.get<std::string>();
  const std::string canonical = json{{"attrs", attrs}, {"kind", "engine"}, {"name", name}, {"v", 1}}.dump();
  std::string hash = signature::sha256_hex(canonical);
  store.upsert_signature(hash, name, store::SignatureKind::engine, canonical);
  return hash;
}

void commit_resolution(store::Store& store, const json& r) {
  const char* what = "resolution";
  store::Resolution res;
  res.signature_id = signature_id(store, r, "signature", what);
  res.provenance_id = need(r, "provenance_id", what).get<int64_t>();
  const std::string status = need(r, "status", what).get<std::string>();
  const auto st = store::parse_resolution_status(status);
  if (!st) DOOLY_THROW(InputError, kFix, "{}: unknown status '{}'", what, status);
  res.status = *st;
  if (r.contains("unit") && r.at("unit").is_string()) res.unit_signature_id = signature_id(store, r, "unit", what);
  res.level = r.value("level", int64_t{0});
  res.attempts_json = r.value("attempts", json::array()).dump();
  store.set_resolution(res);
}

}  // namespace dooly::plan
