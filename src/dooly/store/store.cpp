#include "dooly/store/store.hpp"

#include <cmath>
#include <set>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "dooly/common/clock.hpp"
#include "dooly/common/log.hpp"
#include "dooly/store/schema.hpp"

namespace dooly::store {
namespace {

// ---- argument checks: bad values are the caller's, so they are InputErrors naming the field and value

std::string_view shorten(std::string_view text, size_t max = 120) {
  return text.size() <= max ? text : text.substr(0, max);
}

void check_hash(std::string_view hash) {
  const bool hex = !hash.empty() && hash.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!hex)
    DOOLY_THROW(InputError, "pass the signature's digest as lowercase hexadecimal",
                "signature hash '{}' is not lowercase hex", shorten(hash));
}

// Parses a JSON field; returns it normalized (keys sorted, compact).
std::string checked_json(std::string_view text, std::string_view field, bool must_be_object) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    DOOLY_THROW(InputError, "pass valid JSON text", "{} is not valid JSON ({}): '{}'", field, e.what(), shorten(text));
  }
  if (must_be_object && !value.is_object())
    DOOLY_THROW(InputError, "pass a JSON object such as {}", "{} must be a JSON object, got '{}'", field,
                shorten(text));
  return value.dump();
}

void check_id(int64_t id, std::string_view field) {
  if (id <= 0)
    DOOLY_THROW(InputError, "use the id returned by the store's upsert/insert functions", "{} {} is not a row id",
                field, id);
}

void check_non_negative(int64_t value, std::string_view field) {
  if (value < 0)
    DOOLY_THROW(InputError, "sizes are counts: pass 0 when not part of the sweep point", "{} is {}", field, value);
}

void check_seconds(double value, std::string_view field) {
  if (!std::isfinite(value) || value < 0)
    DOOLY_THROW(InputError, "latencies are finite, non-negative seconds", "{} is {}", field, value);
}

void check_optional(const std::optional<double>& value, std::string_view field) {
  if (value && (!std::isfinite(*value) || *value < 0))
    DOOLY_THROW(InputError, "leave it empty when no power source was available", "{} is {}", field, *value);
}

void check_one_line(std::string_view text, std::string_view field) {
  if (text.find_first_of("\r\n") != std::string_view::npos)
    DOOLY_THROW(InputError, "keep the exception type and the last line of its message", "{} spans lines: '{}'", field,
                shorten(text));
}

void check_point_key(std::string_view key) {
  if (key.empty()) return;  // no key: the row matches no point (as rows from schema v2)
  const std::string canonical = canonical_point_key(key);
  if (canonical != key)
    DOOLY_THROW(InputError, "build the key with canonical_point_key (keys sorted, no whitespace)",
                "point_key '{}' is not canonical (canonical: '{}')", shorten(key), shorten(canonical));
}

void check_measurement(const Measurement& m) {
  check_id(m.signature_id, "signature_id");
  check_id(m.provenance_id, "provenance_id");
  check_point_key(m.point_key);
  check_one_line(m.reason, "measurement reason");
  check_non_negative(m.num_tokens, "num_tokens");
  check_non_negative(m.num_requests, "num_requests");
  check_non_negative(m.prefill_chunk, "prefill_chunk");
  check_non_negative(m.kv_length, "kv_length");
  check_non_negative(m.batch, "batch");
  const bool ok = m.status == MeasurementStatus::ok;
  if (!ok && m.reason.empty())
    DOOLY_THROW(InputError, "say why in one line: the exception type and the last line of its message",
                "measurement with status {} has no reason", to_string(m.status));
  if (m.repetitions < (ok ? 1 : 0))
    DOOLY_THROW(InputError,
                ok ? "repetitions is the number of timed calls the statistics are over (>= 1)"
                   : "repetitions is the number of timed calls that completed (>= 0)",
                "repetitions is {}", m.repetitions);
  check_seconds(m.latency_mean_s, "latency_mean_s");
  check_seconds(m.latency_median_s, "latency_median_s");
  check_seconds(m.latency_min_s, "latency_min_s");
  check_seconds(m.latency_max_s, "latency_max_s");
  check_seconds(m.latency_std_s, "latency_std_s");
  if (m.repetitions == 0) {
    const bool zero = m.latency_mean_s == 0 && m.latency_median_s == 0 && m.latency_min_s == 0 &&
                      m.latency_max_s == 0 && m.latency_std_s == 0;
    if (!zero)
      DOOLY_THROW(InputError, "a point without a completed call has no statistics: leave the latencies 0",
                  "measurement with 0 repetitions has latencies: min {} mean {} median {} max {} std {}",
                  m.latency_min_s, m.latency_mean_s, m.latency_median_s, m.latency_max_s, m.latency_std_s);
  } else {
    const bool ordered = m.latency_min_s <= m.latency_mean_s && m.latency_mean_s <= m.latency_max_s &&
                         m.latency_min_s <= m.latency_median_s && m.latency_median_s <= m.latency_max_s;
    if (!ordered)
      DOOLY_THROW(InputError, "min <= mean, median <= max must hold: check which statistic went where",
                  "latency statistics out of order: min {} mean {} median {} max {}", m.latency_min_s, m.latency_mean_s,
                  m.latency_median_s, m.latency_max_s);
  }
  check_optional(m.energy_j, "energy_j");
  check_optional(m.energy_hw_j, "energy_hw_j");
  check_optional(m.energy_std_j, "energy_std_j");
  check_optional(m.avg_power_w, "avg_power_w");
}

// attempts_json: an array of {"unit": hash, "level": n, "error": text} (more keys allowed); returned normalized.
std::string checked_attempts(std::string_view text) {
  std::string normalized = checked_json(text, "resolution attempts_json", false);
  const nlohmann::json value = nlohmann::json::parse(normalized);
  if (!value.is_array())
    DOOLY_THROW(InputError, R"(pass a JSON array such as [{"unit":"<hash>","level":0,"error":"<Type>: <line>"}])",
                "resolution attempts_json must be a JSON array, got '{}'", shorten(text));
  for (const nlohmann::json& a : value) {
    const bool shaped = a.is_object() && a.contains("unit") && a["unit"].is_string() && a.contains("level") &&
                        a["level"].is_number_integer() && a["level"].get<int64_t>() >= 0 && a.contains("error") &&
                        a["error"].is_string();
    if (!shaped)
      DOOLY_THROW(InputError, R"(each attempt is {"unit":"<hash>","level":<n >= 0>,"error":"<Type>: <last line>"})",
                  "resolution attempt '{}' lacks unit, level or error", shorten(a.dump()));
  }
  return normalized;
}

void check_resolution(const Resolution& r) {
  check_id(r.signature_id, "resolution signature_id");
  check_id(r.provenance_id, "resolution provenance_id");
  if (r.unit_signature_id) check_id(*r.unit_signature_id, "resolution unit_signature_id");
  if (r.level < 0)
    DOOLY_THROW(InputError, "level counts steps up the module tree: 0 is the signature itself",
                "resolution level is {}", r.level);
  const bool unrunnable = r.status == ResolutionStatus::unrunnable;
  if (unrunnable == r.unit_signature_id.has_value())
    DOOLY_THROW(InputError, "name the unit that runs exactly when one does (status unrunnable: none)",
                "resolution of signature {} has status {} and {}", r.signature_id, to_string(r.status),
                r.unit_signature_id ? fmt::format("unit {}", *r.unit_signature_id) : std::string("no unit"));
}

void check_predictor(const PredictorRecord& p) {
  check_id(p.signature_id, "predictor signature_id");
  check_id(p.provenance_id, "predictor provenance_id");
  if (p.model.empty())
    DOOLY_THROW(InputError, "name the candidate model that was chosen", "predictor of signature {} has no model",
                p.signature_id);
  if (p.points < 1)
    DOOLY_THROW(InputError, "a predictor is fitted to at least one measured point", "predictor points is {}", p.points);
  if (p.held_out_mape && (!std::isfinite(*p.held_out_mape) || *p.held_out_mape < 0))
    DOOLY_THROW(InputError, "a held-out error is a finite fraction >= 0 (empty when nothing was held out)",
                "predictor held_out_mape is {}", *p.held_out_mape);
  const bool digest =
      p.data_sha256.size() == 64 && p.data_sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!digest)
    DOOLY_THROW(InputError, "pass the SHA-256 of the fitted points as 64 lowercase hex digits",
                "predictor data_sha256 '{}' is not a SHA-256 digest", shorten(p.data_sha256));
  if (p.code_version.empty())
    DOOLY_THROW(InputError, "say which code fitted it (a new version refits)", "predictor has no code_version");
}

// Switching to WAL takes an exclusive lock and SQLite does not wait for it through the busy handler: when
// several processes create the same store at once, all but one get SQLITE_BUSY. Retry within the timeout.
std::string enable_wal(Database& db, std::chrono::milliseconds busy_timeout) {
  const auto deadline = std::chrono::steady_clock::now() + busy_timeout;
  for (;;) {
    try {
      return db.query_text("PRAGMA journal_mode = WAL");
    } catch (const StoreError& e) {
      if (!is_busy(e) || std::chrono::steady_clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int64_t unix_now_s() { return wall_now_us() / 1'000'000; }

// ---- row readers (column order fixed by the *_columns strings next to them)

constexpr std::string_view signature_columns =
    "s.id, s.hash, s.name, s.kind, s.canonical_json, s.metadata_json, s.created_at_unix_s";

SignatureKind read_kind(const Database& db, const std::string& text) {
  if (auto kind = parse_signature_kind(text)) return *kind;
  throw StoreError(db.path(), 0, fmt::format("unknown signature kind '{}'", text), "the file was edited outside dooly");
}

Phase read_phase(const Database& db, const std::string& text) {
  if (auto phase = parse_phase(text)) return *phase;
  throw StoreError(db.path(), 0, fmt::format("unknown phase '{}'", text), "the file was edited outside dooly");
}

Signature read_signature(const Database& db, const Statement& row, int first) {
  Signature s;
  s.id = row.column_int64(first);
  s.hash = row.column_text(first + 1);
  s.name = row.column_text(first + 2);
  s.kind = read_kind(db, row.column_text(first + 3));
  s.canonical_json = row.column_text(first + 4);
  s.metadata_json = row.column_text(first + 5);
  s.created_at_unix_s = row.column_int64(first + 6);
  return s;
}

constexpr std::string_view model_columns = "m.id, m.name, m.family, m.architecture, m.config_hash";

Model read_model(const Statement& row, int first) {
  return Model{row.column_int64(first), row.column_text(first + 1), row.column_text(first + 2),
               row.column_text(first + 3), row.column_text(first + 4)};
}

constexpr std::string_view provenance_columns =
    "id, gpu_name, driver_version, cuda_version, engine, engine_version, attention_backend, dtype, kv_cache_dtype, "
    "block_size, tp, extra_json";

Provenance read_provenance(const Statement& row) {
  Provenance p;
  p.id = row.column_int64(0);
  p.gpu_name = row.column_text(1);
  p.driver_version = row.column_text(2);
  p.cuda_version = row.column_text(3);
  p.engine = row.column_text(4);
  p.engine_version = row.column_text(5);
  p.attention_backend = row.column_text(6);
  p.dtype = row.column_text(7);
  p.kv_cache_dtype = row.column_text(8);
  p.block_size = row.column_int64(9);
  p.tp = row.column_int64(10);
  p.extra_json = row.column_text(11);
  return p;
}

constexpr std::string_view measurement_columns =
    "id, signature_id, provenance_id, num_tokens, num_requests, prefill_chunk, kv_length, batch, is_prefill, "
    "repetitions, latency_mean_s, latency_median_s, latency_min_s, latency_max_s, latency_std_s, energy_j, "
    "energy_std_j, avg_power_w, measured_at_unix_s, extra_json, point_key, status, reason, energy_hw_j";

MeasurementStatus read_measurement_status(const Database& db, const std::string& text) {
  if (auto status = parse_measurement_status(text)) return *status;
  throw StoreError(db.path(), 0, fmt::format("unknown measurement status '{}'", text),
                   "the file was edited outside dooly");
}

Measurement read_measurement(const Database& db, const Statement& row) {
  Measurement m;
  m.id = row.column_int64(0);
  m.signature_id = row.column_int64(1);
  m.provenance_id = row.column_int64(2);
  m.num_tokens = row.column_int64(3);
  m.num_requests = row.column_int64(4);
  m.prefill_chunk = row.column_int64(5);
  m.kv_length = row.column_int64(6);
  m.batch = row.column_int64(7);
  m.is_prefill = row.column_int64(8) != 0;
  m.repetitions = row.column_int64(9);
  m.latency_mean_s = row.column_double(10);
  m.latency_median_s = row.column_double(11);
  m.latency_min_s = row.column_double(12);
  m.latency_max_s = row.column_double(13);
  m.latency_std_s = row.column_double(14);
  m.energy_j = row.column_optional_double(15);
  m.energy_std_j = row.column_optional_double(16);
  m.avg_power_w = row.column_optional_double(17);
  m.measured_at_unix_s = row.column_int64(18);
  m.extra_json = row.column_text(19);
  m.point_key = row.column_text(20);
  m.status = read_measurement_status(db, row.column_text(21));
  m.reason = row.column_text(22);
  m.energy_hw_j = row.column_optional_double(23);
  return m;
}

constexpr std::string_view resolution_columns =
    "signature_id, provenance_id, unit_signature_id, level, status, attempts_json, resolved_at_unix_s";

Resolution read_resolution(const Database& db, const Statement& row) {
  Resolution r;
  r.signature_id = row.column_int64(0);
  r.provenance_id = row.column_int64(1);
  if (!row.column_is_null(2)) r.unit_signature_id = row.column_int64(2);
  r.level = row.column_int64(3);
  const std::string status = row.column_text(4);
  if (auto parsed = parse_resolution_status(status))
    r.status = *parsed;
  else
    throw StoreError(db.path(), 0, fmt::format("unknown resolution status '{}'", status),
                     "the file was edited outside dooly");
  r.attempts_json = row.column_text(5);
  r.resolved_at_unix_s = row.column_int64(6);
  return r;
}

constexpr std::string_view predictor_columns =
    "signature_id, provenance_id, target, model, params_json, held_out_mape, points, data_sha256, grid_sha256, "
    "code_version, evaluation_json, fitted_at_unix_s";

PredictorRecord read_predictor(const Database& db, const Statement& row) {
  PredictorRecord p;
  p.signature_id = row.column_int64(0);
  p.provenance_id = row.column_int64(1);
  const std::string target = row.column_text(2);
  if (auto parsed = parse_predictor_target(target))
    p.target = *parsed;
  else
    throw StoreError(db.path(), 0, fmt::format("unknown predictor target '{}'", target),
                     "the file was edited outside dooly");
  p.model = row.column_text(3);
  p.params_json = row.column_text(4);
  p.held_out_mape = row.column_optional_double(5);
  p.points = row.column_int64(6);
  p.data_sha256 = row.column_text(7);
  p.grid_sha256 = row.column_text(8);
  p.code_version = row.column_text(9);
  p.evaluation_json = row.column_text(10);
  p.fitted_at_unix_s = row.column_int64(11);
  return p;
}

}  // namespace

std::string canonical_point_key(std::string_view json_object) { return checked_json(json_object, "point_key", true); }

// ------------------------------------------------------------------------------------------------------- open

Store::Store(std::unique_ptr<Database> db, int version_at_open)
    : db_(std::move(db)), version_at_open_(version_at_open) {}
Store::~Store() = default;

Store Store::open(const std::string& path, Mode mode, std::chrono::milliseconds busy_timeout) {
  auto db = std::make_unique<Database>(path, mode, busy_timeout);
  if (mode == Mode::read_write) {
    // WAL: readers never block the writer nor see half a transaction. It is a property of the file, so
    // read-only connections inherit it. NORMAL sync is durable across crashes of the process (not of the OS).
    const std::string journal = enable_wal(*db, busy_timeout);
    if (journal != "wal" && path != ":memory:")
      log::warn("store {}: journal mode is '{}', not 'wal'; concurrent readers will block the writer", path, journal);
    db->execute("PRAGMA synchronous = NORMAL");
  }
  const int version = bring_schema_up_to_date(*db);
  return Store(std::move(db), version);
}

// ------------------------------------------------------------------------------------------------------ writes

int64_t Store::upsert_model(const Model& model) {
  if (model.name.empty()) DOOLY_THROW(InputError, "name the model (e.g. after its config file)", "model name is empty");
  if (model.config_hash.empty())
    DOOLY_THROW(InputError, "pass the hash of the model's config file", "model '{}' has no config_hash", model.name);
  Transaction tx(*db_);
  Statement insert = db_->prepare(
      "INSERT INTO models (name, family, architecture, config_hash) VALUES (:name, :family, :architecture, "
      ":config_hash) "
      "ON CONFLICT (name, config_hash) DO NOTHING");
  insert.bind(":name", model.name).bind(":family", model.family).bind(":architecture", model.architecture);
  insert.bind(":config_hash", model.config_hash).run();
  Statement select =
      db_->prepare(fmt::format("SELECT {} FROM models m WHERE m.name = ? AND m.config_hash = ?", model_columns));
  select.bind(1, model.name).bind(2, model.config_hash);
  select.step();
  const Model stored = read_model(select, 0);
  if (stored.family != model.family || stored.architecture != model.architecture)
    throw ConflictError(
        db_->path(), 0,
        fmt::format("model '{}' (config {}) is stored as {}/{}, now given as {}/{}", model.name, model.config_hash,
                    stored.family, stored.architecture, model.family, model.architecture),
        "one config must always map to one family and architecture: fix the model loader");
  tx.commit();
  return stored.id;
}

int64_t Store::upsert_provenance(const Provenance& p) {
  if (p.tp < 1) DOOLY_THROW(InputError, "tp is the tensor-parallel degree: 1 for one GPU", "provenance tp is {}", p.tp);
  check_non_negative(p.block_size, "provenance block_size");
  const std::string extra = checked_json(p.extra_json, "provenance extra_json", true);
  constexpr std::string_view identity =
      "gpu_name = :gpu_name AND driver_version = :driver_version AND cuda_version = :cuda_version AND "
      "engine = :engine AND engine_version = :engine_version AND attention_backend = :attention_backend AND "
      "dtype = :dtype AND kv_cache_dtype = :kv_cache_dtype AND block_size = :block_size AND tp = :tp AND "
      "extra_json = :extra_json";
  auto bind_all = [&](Statement& s) {
    s.bind(":gpu_name", p.gpu_name).bind(":driver_version", p.driver_version).bind(":cuda_version", p.cuda_version);
    s.bind(":engine", p.engine).bind(":engine_version", p.engine_version);
    s.bind(":attention_backend", p.attention_backend).bind(":dtype", p.dtype).bind(":kv_cache_dtype", p.kv_cache_dtype);
    s.bind(":block_size", p.block_size).bind(":tp", p.tp).bind(":extra_json", extra);
  };
  Transaction tx(*db_);
  Statement select = db_->prepare(fmt::format("SELECT id FROM provenance WHERE {}", identity));
  bind_all(select);
  int64_t id = 0;
  if (select.step()) {
    id = select.column_int64(0);
  } else {
    Statement insert = db_->prepare(
        "INSERT INTO provenance (gpu_name, driver_version, cuda_version, engine, engine_version, attention_backend, "
        "dtype, kv_cache_dtype, block_size, tp, extra_json) VALUES (:gpu_name, :driver_version, :cuda_version, "
        ":engine, :engine_version, :attention_backend, :dtype, :kv_cache_dtype, :block_size, :tp, :extra_json)");
    bind_all(insert);
    insert.run();
    id = db_->last_insert_rowid();
  }
  tx.commit();
  return id;
}

SignatureUpsert Store::upsert_signature(std::string_view hash, std::string_view name, SignatureKind kind,
                                        std::string_view canonical_json, std::string_view metadata_json) {
  check_hash(hash);
  if (name.empty()) DOOLY_THROW(InputError, "pass the op or module name", "signature {} has an empty name", hash);
  checked_json(canonical_json, fmt::format("canonical_json of signature {}", hash), false);
  checked_json(metadata_json, fmt::format("metadata_json of signature {}", hash), false);

  Transaction tx(*db_);
  Statement select = db_->prepare("SELECT id, canonical_json, name, kind FROM signatures WHERE hash = ?");
  select.bind(1, hash);
  if (select.step()) {
    const std::string stored = select.column_text(1);
    const std::string stored_name = select.column_text(2);
    const std::string stored_kind = select.column_text(3);
    if (stored_name != name || stored_kind != to_string(kind))
      throw ConflictError(db_->path(), 0,
                          fmt::format("signature {} is stored as {} '{}', now given as {} '{}'", hash, stored_kind,
                                      stored_name, to_string(kind), name),
                          "the name and kind are part of what is hashed: the caller passed another signature's hash");
    if (stored != canonical_json)
      throw ConflictError(db_->path(), 0,
                          fmt::format("signature {} ({}) is already stored with a different canonical form: stored "
                                      "'{}', new '{}'",
                                      hash, name, shorten(stored), shorten(canonical_json)),
                          "a SHA-256 collision is practically impossible, so the serializer is not deterministic or "
                          "changed its format: fix it (and bump its version) or write to a new store file");
    const SignatureUpsert existing{select.column_int64(0), false};
    tx.commit();
    return existing;
  }
  Statement insert = db_->prepare(
      "INSERT INTO signatures (hash, name, kind, canonical_json, metadata_json, created_at_unix_s) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  insert.bind(1, hash).bind(2, name).bind(3, to_string(kind)).bind(4, canonical_json).bind(5, metadata_json);
  insert.bind(6, unix_now_s()).run();
  const SignatureUpsert added{db_->last_insert_rowid(), true};
  tx.commit();
  return added;
}

void Store::add_occurrences(int64_t model_id, int64_t provenance_id, int64_t signature_id, Phase phase, int64_t count) {
  check_id(model_id, "model_id");
  check_id(provenance_id, "provenance_id");
  check_id(signature_id, "signature_id");
  if (count < 1)
    DOOLY_THROW(InputError, "count how often the signature occurs per step (>= 1)", "occurrence count is {}", count);
  Statement upsert = db_->prepare(
      "INSERT INTO model_signatures (model_id, provenance_id, signature_id, phase, count) VALUES (?, ?, ?, ?, ?) "
      "ON CONFLICT (model_id, provenance_id, signature_id, phase) DO UPDATE SET count = excluded.count");
  upsert.bind(1, model_id).bind(2, provenance_id).bind(3, signature_id).bind(4, to_string(phase)).bind(5, count).run();
}

void Store::replace_occurrences(int64_t model_id, int64_t provenance_id, std::span<const Occurrence> occurrences) {
  std::set<std::pair<int64_t, Phase>> seen;
  for (const Occurrence& o : occurrences)
    if (!seen.emplace(o.signature_id, o.phase).second)
      DOOLY_THROW(InputError, "merge the counts of one signature and phase before storing them",
                  "signature id {} is listed twice for phase {}", o.signature_id, to_string(o.phase));
  Transaction tx(*db_);
  Statement clear = db_->prepare("DELETE FROM model_signatures WHERE model_id = ? AND provenance_id = ?");
  clear.bind(1, model_id).bind(2, provenance_id).run();
  for (const Occurrence& o : occurrences) add_occurrences(model_id, provenance_id, o.signature_id, o.phase, o.count);
  tx.commit();
}

int64_t Store::insert_measurement(const Measurement& m) {
  check_measurement(m);
  const std::string extra = checked_json(m.extra_json, "measurement extra_json", true);
  Statement insert = db_->prepare(
      "INSERT INTO measurements (signature_id, provenance_id, point_key, status, reason, num_tokens, num_requests, "
      "prefill_chunk, kv_length, batch, is_prefill, repetitions, latency_mean_s, latency_median_s, latency_min_s, "
      "latency_max_s, latency_std_s, energy_j, energy_hw_j, energy_std_j, avg_power_w, measured_at_unix_s, "
      "extra_json) VALUES (:signature_id, :provenance_id, :point_key, :status, :reason, :num_tokens, :num_requests, "
      ":prefill_chunk, :kv_length, :batch, :is_prefill, :repetitions, :latency_mean_s, :latency_median_s, "
      ":latency_min_s, :latency_max_s, :latency_std_s, :energy_j, :energy_hw_j, :energy_std_j, :avg_power_w, "
      ":measured_at_unix_s, :extra_json)");
  insert.bind(":signature_id", m.signature_id).bind(":provenance_id", m.provenance_id);
  insert.bind(":point_key", m.point_key).bind(":status", to_string(m.status)).bind(":reason", m.reason);
  insert.bind(":num_tokens", m.num_tokens).bind(":num_requests", m.num_requests);
  insert.bind(":prefill_chunk", m.prefill_chunk).bind(":kv_length", m.kv_length).bind(":batch", m.batch);
  insert.bind(":is_prefill", m.is_prefill).bind(":repetitions", m.repetitions);
  insert.bind(":latency_mean_s", m.latency_mean_s).bind(":latency_median_s", m.latency_median_s);
  insert.bind(":latency_min_s", m.latency_min_s).bind(":latency_max_s", m.latency_max_s);
  insert.bind(":latency_std_s", m.latency_std_s);
  insert.bind(":energy_j", m.energy_j).bind(":energy_hw_j", m.energy_hw_j).bind(":energy_std_j", m.energy_std_j);
  insert.bind(":avg_power_w", m.avg_power_w);
  insert.bind(":measured_at_unix_s", m.measured_at_unix_s != 0 ? m.measured_at_unix_s : unix_now_s());
  insert.bind(":extra_json", extra).run();
  return db_->last_insert_rowid();
}

void Store::set_resolution(const Resolution& r) {
  check_resolution(r);
  const std::string attempts = checked_attempts(r.attempts_json);
  Statement upsert = db_->prepare(
      "INSERT INTO resolutions (signature_id, provenance_id, unit_signature_id, level, status, attempts_json, "
      "resolved_at_unix_s) VALUES (:signature_id, :provenance_id, :unit, :level, :status, :attempts, :at) "
      "ON CONFLICT (signature_id, provenance_id) DO UPDATE SET unit_signature_id = excluded.unit_signature_id, "
      "level = excluded.level, status = excluded.status, attempts_json = excluded.attempts_json, "
      "resolved_at_unix_s = excluded.resolved_at_unix_s");
  upsert.bind(":signature_id", r.signature_id).bind(":provenance_id", r.provenance_id);
  upsert.bind(":unit", r.unit_signature_id).bind(":level", r.level).bind(":status", to_string(r.status));
  upsert.bind(":attempts", attempts).bind(":at", r.resolved_at_unix_s != 0 ? r.resolved_at_unix_s : unix_now_s());
  upsert.run();
}

// ----------------------------------------------------------------------------------------------------- queries

void Store::upsert_predictor(const PredictorRecord& p) {
  check_predictor(p);
  const std::string params = checked_json(p.params_json, "predictor params_json", true);
  const std::string evaluation = checked_json(p.evaluation_json, "predictor evaluation_json", true);
  Statement upsert = db_->prepare(
      "INSERT INTO predictors (signature_id, provenance_id, target, model, params_json, held_out_mape, points, "
      "data_sha256, grid_sha256, code_version, evaluation_json, fitted_at_unix_s) VALUES (:sig, :prov, :target, "
      ":model, :params, :mape, :points, :data, :grid, :code, :evaluation, :at) "
      "ON CONFLICT (signature_id, provenance_id, target) DO UPDATE SET model = excluded.model, "
      "params_json = excluded.params_json, held_out_mape = excluded.held_out_mape, points = excluded.points, "
      "data_sha256 = excluded.data_sha256, grid_sha256 = excluded.grid_sha256, code_version = excluded.code_version, "
      "evaluation_json = excluded.evaluation_json, fitted_at_unix_s = excluded.fitted_at_unix_s");
  upsert.bind(":sig", p.signature_id).bind(":prov", p.provenance_id).bind(":target", to_string(p.target));
  upsert.bind(":model", p.model).bind(":params", params).bind(":mape", p.held_out_mape).bind(":points", p.points);
  upsert.bind(":data", p.data_sha256).bind(":grid", p.grid_sha256).bind(":code", p.code_version);
  upsert.bind(":evaluation", evaluation).bind(":at", p.fitted_at_unix_s != 0 ? p.fitted_at_unix_s : unix_now_s());
  upsert.run();
}

void Store::delete_predictor(int64_t signature_id, int64_t provenance_id, PredictorTarget target) {
  Statement remove = db_->prepare("DELETE FROM predictors WHERE signature_id = ? AND provenance_id = ? AND target = ?");
  remove.bind(1, signature_id).bind(2, provenance_id).bind(3, to_string(target));
  remove.run();
}

std::optional<Signature> Store::find_signature(std::string_view hash) const {
  Statement select = db_->prepare(fmt::format("SELECT {} FROM signatures s WHERE s.hash = ?", signature_columns));
  select.bind(1, hash);
  if (!select.step()) return std::nullopt;
  return read_signature(*db_, select, 0);
}

std::optional<Model> Store::find_model(std::string_view name, std::string_view config_hash) const {
  Statement select =
      db_->prepare(fmt::format("SELECT {} FROM models m WHERE m.name = ? AND m.config_hash = ?", model_columns));
  select.bind(1, name).bind(2, config_hash);
  if (!select.step()) return std::nullopt;
  return read_model(select, 0);
}

std::vector<Model> Store::models() const {
  Statement select = db_->prepare(fmt::format("SELECT {} FROM models m ORDER BY m.id", model_columns));
  std::vector<Model> out;
  while (select.step()) out.push_back(read_model(select, 0));
  return out;
}

std::vector<Provenance> Store::provenances() const {
  Statement select = db_->prepare(fmt::format("SELECT {} FROM provenance ORDER BY id", provenance_columns));
  std::vector<Provenance> out;
  while (select.step()) out.push_back(read_provenance(select));
  return out;
}

std::vector<ProvenanceUse> Store::provenance_uses() const {
  Statement select = db_->prepare(fmt::format(
      "SELECT {}, (SELECT count(*) FROM model_signatures m WHERE m.provenance_id = provenance.id), "
      "(SELECT count(*) FROM measurements m WHERE m.provenance_id = provenance.id) FROM provenance ORDER BY id",
      provenance_columns));
  const int n = select.column_count() - 2;
  std::vector<ProvenanceUse> out;
  while (select.step()) out.push_back({read_provenance(select), select.column_int64(n), select.column_int64(n + 1)});
  return out;
}

std::vector<SignatureUse> Store::signatures_of_model(int64_t model_id, int64_t provenance_id) const {
  Statement select = db_->prepare(
      fmt::format("SELECT {}, ms.phase, ms.count FROM model_signatures ms JOIN signatures s ON s.id = ms.signature_id "
                  "WHERE ms.model_id = ? AND ms.provenance_id = ? ORDER BY s.id, ms.phase",
                  signature_columns));
  select.bind(1, model_id).bind(2, provenance_id);
  std::vector<SignatureUse> out;
  while (select.step())
    out.push_back({read_signature(*db_, select, 0), read_phase(*db_, select.column_text(7)), select.column_int64(8)});
  return out;
}

std::vector<ModelUse> Store::models_using(int64_t signature_id) const {
  Statement select = db_->prepare(fmt::format(
      "SELECT {}, ms.provenance_id, ms.phase, ms.count FROM model_signatures ms JOIN models m ON m.id = ms.model_id "
      "WHERE ms.signature_id = ? ORDER BY m.id, ms.provenance_id, ms.phase",
      model_columns));
  select.bind(1, signature_id);
  std::vector<ModelUse> out;
  while (select.step())
    out.push_back({read_model(select, 0), select.column_int64(5), read_phase(*db_, select.column_text(6)),
                   select.column_int64(7)});
  return out;
}

std::vector<Measurement> Store::measurements_for(int64_t signature_id, int64_t provenance_id) const {
  Statement select = db_->prepare(fmt::format(
      "SELECT {} FROM measurements WHERE signature_id = ? AND provenance_id = ? ORDER BY id", measurement_columns));
  select.bind(1, signature_id).bind(2, provenance_id);
  std::vector<Measurement> out;
  while (select.step()) out.push_back(read_measurement(*db_, select));
  return out;
}

std::vector<std::string> Store::point_keys(int64_t signature_id, int64_t provenance_id, bool include_failed) const {
  Statement select = db_->prepare(
      "SELECT DISTINCT point_key FROM measurements WHERE signature_id = ? AND provenance_id = ? AND point_key <> '' "
      "AND (status = 'ok' OR ?) ORDER BY point_key");
  select.bind(1, signature_id).bind(2, provenance_id).bind(3, include_failed);
  std::vector<std::string> out;
  while (select.step()) out.push_back(select.column_text(0));
  return out;
}

std::optional<Resolution> Store::resolution_of(int64_t signature_id, int64_t provenance_id) const {
  Statement select = db_->prepare(
      fmt::format("SELECT {} FROM resolutions WHERE signature_id = ? AND provenance_id = ?", resolution_columns));
  select.bind(1, signature_id).bind(2, provenance_id);
  if (!select.step()) return std::nullopt;
  return read_resolution(*db_, select);
}

std::vector<Resolution> Store::resolutions(int64_t provenance_id) const {
  Statement select = db_->prepare(
      fmt::format("SELECT {} FROM resolutions WHERE provenance_id = ? ORDER BY signature_id", resolution_columns));
  select.bind(1, provenance_id);
  std::vector<Resolution> out;
  while (select.step()) out.push_back(read_resolution(*db_, select));
  return out;
}

std::vector<int64_t> Store::provenances_with_occurrences() const {
  Statement select = db_->prepare("SELECT DISTINCT provenance_id FROM model_signatures ORDER BY provenance_id");
  std::vector<int64_t> out;
  while (select.step()) out.push_back(select.column_int64(0));
  return out;
}

std::vector<Signature> Store::missing_signatures(int64_t provenance_id) const {
  return missing_signatures(provenance_id, provenance_id);
}

std::vector<Signature> Store::missing_signatures(int64_t measured_provenance_id, int64_t traced_provenance_id) const {
  Statement select = db_->prepare(fmt::format(
      "SELECT {} FROM signatures s WHERE EXISTS (SELECT 1 FROM model_signatures ms WHERE ms.signature_id = s.id AND "
      "ms.provenance_id = :traced) AND NOT EXISTS (SELECT 1 FROM measurements x WHERE x.signature_id = s.id AND "
      "x.provenance_id = :measured) ORDER BY s.id",
      signature_columns));
  select.bind(":traced", traced_provenance_id).bind(":measured", measured_provenance_id);
  std::vector<Signature> out;
  while (select.step()) out.push_back(read_signature(*db_, select, 0));
  return out;
}

std::optional<PredictorRecord> Store::predictor(int64_t signature_id, int64_t provenance_id,
                                                PredictorTarget target) const {
  Statement select = db_->prepare(fmt::format(
      "SELECT {} FROM predictors WHERE signature_id = ? AND provenance_id = ? AND target = ?", predictor_columns));
  select.bind(1, signature_id).bind(2, provenance_id).bind(3, to_string(target));
  if (!select.step()) return std::nullopt;
  return read_predictor(*db_, select);
}

std::vector<PredictorRecord> Store::predictors(int64_t provenance_id) const {
  Statement select = db_->prepare(fmt::format(
      "SELECT {} FROM predictors WHERE provenance_id = ? ORDER BY signature_id, target", predictor_columns));
  select.bind(1, provenance_id);
  std::vector<PredictorRecord> out;
  while (select.step()) out.push_back(read_predictor(*db_, select));
  return out;
}

Summary Store::summary() const {
  // One statement reads one snapshot, so the counts agree with each other even while a writer commits.
  Statement select = db_->prepare(
      "SELECT (SELECT count(*) FROM signatures), (SELECT count(*) FROM models), (SELECT count(*) FROM provenance), "
      "(SELECT count(*) FROM model_signatures), (SELECT coalesce(sum(count), 0) FROM model_signatures), "
      "(SELECT count(*) FROM measurements), (SELECT count(*) FROM resolutions), "
      "(SELECT count(*) FROM measurements WHERE status = 'ok'), (SELECT count(*) FROM measurements WHERE status = "
      "'failed'), (SELECT count(*) FROM measurements WHERE status = 'oom'), "
      "(SELECT count(*) FROM measurements WHERE status = 'timeout'), (SELECT count(*) FROM predictors)");
  select.step();
  Summary s;
  s.schema_version = current_schema_version();
  s.signatures = select.column_int64(0);
  s.models = select.column_int64(1);
  s.provenances = select.column_int64(2);
  s.occurrence_rows = select.column_int64(3);
  s.occurrences = select.column_int64(4);
  s.measurements = select.column_int64(5);
  s.resolutions = select.column_int64(6);
  for (MeasurementStatus status :
       {MeasurementStatus::ok, MeasurementStatus::failed, MeasurementStatus::oom, MeasurementStatus::timeout})
    s.measurements_by_status[static_cast<size_t>(status)] = select.column_int64(7 + static_cast<int>(status));
  s.predictors = select.column_int64(11);
  return s;
}

}  // namespace dooly::store
