#include "dooly/store/schema.hpp"

#include <array>

#include "dooly/common/log.hpp"
#include "dooly/store/sqlite.hpp"

namespace dooly::store {
namespace {

// v1: the first released layout. Its provenance lacked the KV-cache dtype, the block size and the engine
// version (the reference implementation's own to-do list).
constexpr std::string_view v1_script = R"sql(
PRAGMA application_id = 1685024620;

CREATE TABLE signatures (
  id                INTEGER PRIMARY KEY,
  hash              TEXT    NOT NULL UNIQUE,
  name              TEXT    NOT NULL,
  kind              TEXT    NOT NULL CHECK (kind IN ('op', 'module')),
  canonical_json    TEXT    NOT NULL,
  metadata_json     TEXT    NOT NULL DEFAULT '{}',
  created_at_unix_s INTEGER NOT NULL
) STRICT;

CREATE TABLE models (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL,
  family       TEXT NOT NULL DEFAULT '',
  architecture TEXT NOT NULL DEFAULT '',
  config_hash  TEXT NOT NULL,
  UNIQUE (name, config_hash)
) STRICT;

CREATE TABLE provenance (
  id                INTEGER PRIMARY KEY,
  gpu_name          TEXT    NOT NULL,
  driver_version    TEXT    NOT NULL,
  cuda_version      TEXT    NOT NULL,
  engine            TEXT    NOT NULL,
  attention_backend TEXT    NOT NULL,
  dtype             TEXT    NOT NULL,
  tp                INTEGER NOT NULL CHECK (tp >= 1),
  extra_json        TEXT    NOT NULL DEFAULT '{}',
  UNIQUE (gpu_name, driver_version, cuda_version, engine, attention_backend, dtype, tp, extra_json)
) STRICT;

CREATE TABLE model_signatures (
  model_id      INTEGER NOT NULL REFERENCES models (id),
  provenance_id INTEGER NOT NULL REFERENCES provenance (id),
  signature_id  INTEGER NOT NULL REFERENCES signatures (id),
  phase         TEXT    NOT NULL CHECK (phase IN ('prefill', 'decode', 'mixed')),
  count         INTEGER NOT NULL CHECK (count >= 1),
  PRIMARY KEY (model_id, provenance_id, signature_id, phase)
) STRICT, WITHOUT ROWID;
CREATE INDEX model_signatures_by_signature ON model_signatures (signature_id, provenance_id);

CREATE TABLE measurements (
  id                 INTEGER PRIMARY KEY,
  signature_id       INTEGER NOT NULL REFERENCES signatures (id),
  provenance_id      INTEGER NOT NULL REFERENCES provenance (id),
  num_tokens         INTEGER NOT NULL CHECK (num_tokens >= 0),
  num_requests       INTEGER NOT NULL CHECK (num_requests >= 0),
  prefill_chunk      INTEGER NOT NULL CHECK (prefill_chunk >= 0),
  kv_length          INTEGER NOT NULL CHECK (kv_length >= 0),
  batch              INTEGER NOT NULL CHECK (batch >= 0),
  is_prefill         INTEGER NOT NULL CHECK (is_prefill IN (0, 1)),
  repetitions        INTEGER NOT NULL CHECK (repetitions >= 1),
  latency_mean_s     REAL    NOT NULL,
  latency_median_s   REAL    NOT NULL,
  latency_min_s      REAL    NOT NULL,
  latency_max_s      REAL    NOT NULL,
  latency_std_s      REAL    NOT NULL,
  energy_j           REAL,
  energy_std_j       REAL,
  avg_power_w        REAL,
  measured_at_unix_s INTEGER NOT NULL,
  extra_json         TEXT    NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX measurements_by_signature ON measurements (signature_id, provenance_id);
)sql";

// v2: provenance gains engine_version, kv_cache_dtype and block_size, and they join its identity. SQLite cannot
// change a UNIQUE constraint in place, so the table is rebuilt (ids kept, so every reference stays valid).
// Rows from v1 get '' / '' / 0: "not recorded".
constexpr std::string_view v2_script = R"sql(
CREATE TABLE provenance_v2 (
  id                INTEGER PRIMARY KEY,
  gpu_name          TEXT    NOT NULL,
  driver_version    TEXT    NOT NULL,
  cuda_version      TEXT    NOT NULL,
  engine            TEXT    NOT NULL,
  engine_version    TEXT    NOT NULL,
  attention_backend TEXT    NOT NULL,
  dtype             TEXT    NOT NULL,
  kv_cache_dtype    TEXT    NOT NULL,
  block_size        INTEGER NOT NULL CHECK (block_size >= 0),
  tp                INTEGER NOT NULL CHECK (tp >= 1),
  extra_json        TEXT    NOT NULL DEFAULT '{}',
  UNIQUE (gpu_name, driver_version, cuda_version, engine, engine_version, attention_backend, dtype,
          kv_cache_dtype, block_size, tp, extra_json)
) STRICT;
INSERT INTO provenance_v2 (id, gpu_name, driver_version, cuda_version, engine, engine_version, attention_backend,
                           dtype, kv_cache_dtype, block_size, tp, extra_json)
  SELECT id, gpu_name, driver_version, cuda_version, engine, '', attention_backend, dtype, '', 0, tp, extra_json
  FROM provenance;
DROP TABLE provenance;
ALTER TABLE provenance_v2 RENAME TO provenance;
)sql";

// v3: part 2's isolated profiling. measurements gains the sweep point's identity (point_key), an outcome
// (status, reason: a point that failed, ran out of memory or timed out is recorded so it is not retried blindly)
// and the 95 % half-width of energy_j; repetitions may be 0 (a point that never completed). SQLite cannot change
// a CHECK in place, so the table is rebuilt (ids kept). Rows from v2 get point_key '' (legacy: matches no point),
// status 'ok', reason '', energy_hw_j NULL. New table resolutions: which unit measures a signature under a
// measurement context (the signature itself, or the module `level` steps up that absorbs it, or none).
constexpr std::string_view v3_script = R"sql(
CREATE TABLE measurements_v3 (
  id                 INTEGER PRIMARY KEY,
  signature_id       INTEGER NOT NULL REFERENCES signatures (id),
  provenance_id      INTEGER NOT NULL REFERENCES provenance (id),
  point_key          TEXT    NOT NULL DEFAULT '',
  status             TEXT    NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'failed', 'oom', 'timeout')),
  reason             TEXT    NOT NULL DEFAULT '',
  num_tokens         INTEGER NOT NULL CHECK (num_tokens >= 0),
  num_requests       INTEGER NOT NULL CHECK (num_requests >= 0),
  prefill_chunk      INTEGER NOT NULL CHECK (prefill_chunk >= 0),
  kv_length          INTEGER NOT NULL CHECK (kv_length >= 0),
  batch              INTEGER NOT NULL CHECK (batch >= 0),
  is_prefill         INTEGER NOT NULL CHECK (is_prefill IN (0, 1)),
  repetitions        INTEGER NOT NULL CHECK (repetitions >= 0),
  latency_mean_s     REAL    NOT NULL,
  latency_median_s   REAL    NOT NULL,
  latency_min_s      REAL    NOT NULL,
  latency_max_s      REAL    NOT NULL,
  latency_std_s      REAL    NOT NULL,
  energy_j           REAL,
  energy_hw_j        REAL,
  energy_std_j       REAL,
  avg_power_w        REAL,
  measured_at_unix_s INTEGER NOT NULL,
  extra_json         TEXT    NOT NULL DEFAULT '{}',
  CHECK (status <> 'ok' OR repetitions >= 1),
  CHECK (status = 'ok' OR reason <> '')
) STRICT;
INSERT INTO measurements_v3 (id, signature_id, provenance_id, num_tokens, num_requests, prefill_chunk, kv_length,
                             batch, is_prefill, repetitions, latency_mean_s, latency_median_s, latency_min_s,
                             latency_max_s, latency_std_s, energy_j, energy_std_j, avg_power_w, measured_at_unix_s,
                             extra_json)
  SELECT id, signature_id, provenance_id, num_tokens, num_requests, prefill_chunk, kv_length, batch, is_prefill,
         repetitions, latency_mean_s, latency_median_s, latency_min_s, latency_max_s, latency_std_s, energy_j,
         energy_std_j, avg_power_w, measured_at_unix_s, extra_json
  FROM measurements;
DROP TABLE measurements;
ALTER TABLE measurements_v3 RENAME TO measurements;
CREATE INDEX measurements_by_point ON measurements (signature_id, provenance_id, point_key);

CREATE TABLE resolutions (
  signature_id       INTEGER NOT NULL REFERENCES signatures (id),
  provenance_id      INTEGER NOT NULL REFERENCES provenance (id),
  unit_signature_id  INTEGER REFERENCES signatures (id),
  level              INTEGER NOT NULL CHECK (level >= 0),
  status             TEXT    NOT NULL CHECK (status IN ('runs', 'absorbed', 'unrunnable')),
  attempts_json      TEXT    NOT NULL DEFAULT '[]',
  resolved_at_unix_s INTEGER NOT NULL,
  PRIMARY KEY (signature_id, provenance_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX resolutions_by_provenance ON resolutions (provenance_id);
)sql";

// v4: a third signature kind, 'engine': the serving engine's own cost per step (scheduling, batch preparation,
// launches, sampling, bookkeeping) as a function of the step's composition, measured on the real engine
// (python/dooly/profile/engine_cost.py) and stored as measurements of its own signature. The CHECK changes, so the
// table is rebuilt (ids kept; the tables that reference it keep their rows and their foreign keys by name).
constexpr std::string_view v4_script = R"sql(
CREATE TABLE signatures_v4 (
  id                INTEGER PRIMARY KEY,
  hash              TEXT    NOT NULL UNIQUE,
  name              TEXT    NOT NULL,
  kind              TEXT    NOT NULL CHECK (kind IN ('op', 'module', 'engine')),
  canonical_json    TEXT    NOT NULL,
  metadata_json     TEXT    NOT NULL DEFAULT '{}',
  created_at_unix_s INTEGER NOT NULL
) STRICT;
INSERT INTO signatures_v4 (id, hash, name, kind, canonical_json, metadata_json, created_at_unix_s)
  SELECT id, hash, name, kind, canonical_json, metadata_json, created_at_unix_s FROM signatures;
DROP TABLE signatures;
ALTER TABLE signatures_v4 RENAME TO signatures;
)sql";

// v5: part 3's predictors. One row per (signature, measurement context, target): the model chosen by held-out
// error, its parameters, and the hash of the points it was fitted to, so a fit on unchanged data writes nothing
// (src/dooly/predict/, docs/predict.md). Derived data: a merge does not copy it, a later fit recomputes it. A rowid
// table (not WITHOUT ROWID): a row's parameters can be a few kilobytes.
constexpr std::string_view v5_script = R"sql(
CREATE TABLE predictors (
  id               INTEGER PRIMARY KEY,
  signature_id     INTEGER NOT NULL REFERENCES signatures (id),
  provenance_id    INTEGER NOT NULL REFERENCES provenance (id),
  target           TEXT    NOT NULL CHECK (target IN ('latency_s', 'energy_j')),
  model            TEXT    NOT NULL CHECK (model <> ''),
  params_json      TEXT    NOT NULL,
  held_out_mape    REAL    CHECK (held_out_mape IS NULL OR held_out_mape >= 0),
  points           INTEGER NOT NULL CHECK (points >= 1),
  data_sha256      TEXT    NOT NULL,
  grid_sha256      TEXT    NOT NULL DEFAULT '',
  code_version     TEXT    NOT NULL,
  evaluation_json  TEXT    NOT NULL DEFAULT '{}',
  fitted_at_unix_s INTEGER NOT NULL,
  UNIQUE (signature_id, provenance_id, target)
) STRICT;
CREATE INDEX predictors_by_provenance ON predictors (provenance_id);
)sql";

constexpr std::array<Migration, 5> all_migrations{{
    {1, "signatures, models, provenance, model_signatures, measurements", v1_script},
    {2, "provenance: add engine_version, kv_cache_dtype, block_size (part of its identity)", v2_script},
    {3, "measurements: add point_key, status, reason, energy_hw_j; new table resolutions", v3_script},
    {4, "signatures: kind 'engine' (the serving engine's own cost per step)", v4_script},
    {5, "new table predictors (per signature, measurement context and target: the chosen model)", v5_script},
}};

struct FileState {
  int64_t version = 0;
  int64_t app_id = 0;
  int64_t tables = 0;
};

// One statement, so one snapshot: another connection may be creating the schema right now.
FileState read_state(Database& db) {
  Statement s = db.prepare(
      "SELECT (SELECT user_version FROM pragma_user_version), (SELECT application_id FROM pragma_application_id), "
      "(SELECT count(*) FROM sqlite_schema WHERE type = 'table')");
  s.step();
  return {s.column_int64(0), s.column_int64(1), s.column_int64(2)};
}

void check_is_dooly_store(Database& db, const FileState& state) {
  const bool foreign = state.app_id != 0 ? state.app_id != application_id : (state.version != 0 || state.tables > 0);
  if (foreign)
    throw StoreError(db.path(), 0,
                     fmt::format("not a dooly store (application_id {}, user_version {})", state.app_id, state.version),
                     "this SQLite file belongs to another program: point --db at a new or existing dooly store");
}

void check_not_newer(Database& db, int64_t version) {
  if (version > current_schema_version())
    throw StoreError(db.path(), 0,
                     fmt::format("schema version {} is newer than this dooly understands (schema version {})", version,
                                 current_schema_version()),
                     "upgrade dooly to a release that writes this schema version; never downgrade a store in place");
}

}  // namespace

std::span<const Migration> migrations() noexcept { return all_migrations; }
int current_schema_version() noexcept { return all_migrations.back().to_version; }

int bring_schema_up_to_date(Database& db) {
  const FileState state = read_state(db);
  int64_t found = state.version;
  check_is_dooly_store(db, state);
  check_not_newer(db, found);
  const int current = current_schema_version();

  if (db.mode() == OpenMode::read_only) {
    if (found == 0)
      throw StoreError(db.path(), 0, "the store is empty (no schema yet)",
                       "create it first by opening it read-write (e.g. `dooly signatures ... --db FILE`)");
    if (found < current)
      throw StoreError(db.path(), 0,
                       fmt::format("schema version {} is older than this dooly's schema version {}", found, current),
                       "open it once read-write to migrate it (back it up first if older dooly releases still "
                       "read it)");
  } else if (found < current) {
    // Foreign keys must be off while a migration rebuilds a referenced table, and the pragma is a no-op
    // inside a transaction: switch it before BEGIN and check every reference before COMMIT.
    db.execute("PRAGMA foreign_keys = OFF");
    Transaction tx(db);
    const FileState locked = read_state(db);  // another writer may have migrated meanwhile
    check_is_dooly_store(db, locked);
    check_not_newer(db, locked.version);
    const int64_t from = found = locked.version;
    for (const Migration& m : migrations()) {
      if (m.to_version <= from) continue;
      db.execute(m.script);
      db.execute(fmt::format("PRAGMA user_version = {}", m.to_version));
      log::info("store {}: schema v{} -> v{}: {}", db.path(), m.to_version - 1, m.to_version, m.summary);
    }
    Statement violations = db.prepare("PRAGMA foreign_key_check");
    if (violations.step())
      throw StoreError(db.path(), 0,
                       fmt::format("migration to schema version {} left a dangling reference in table {}", current,
                                   violations.column_text(0)),
                       "the file was changed outside dooly; restore it from a copy (nothing was changed)");
    tx.commit();
  }
  db.execute("PRAGMA foreign_keys = ON");
  return static_cast<int>(found);
}

}  // namespace dooly::store
