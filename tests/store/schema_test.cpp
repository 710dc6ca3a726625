// Schema versions: a new file, migration from v1 and v2, files from the future, foreign and broken files.
#include <sqlite3.h>

#include <fstream>

#include <gtest/gtest.h>

#include "dooly/store/schema.hpp"
#include "dooly/store/store.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using testing::TempDir;
using namespace std::chrono_literals;

// The v1 layout exactly as dooly released it, frozen here on purpose: the migration under test must upgrade
// files written by that release, whatever happens to the code later.
constexpr std::string_view frozen_v1_ddl = R"sql(
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
PRAGMA user_version = 1;
)sql";

// Rows a v1 release would have written (ids chosen non-contiguous so that a migration renumbering them fails).
constexpr std::string_view v1_rows = R"sql(
INSERT INTO signatures VALUES (7, 'aa11', 'aten::mm', 'op', '{"op":"aten::mm"}', '{"kernels":["k1"]}', 1700000000);
INSERT INTO signatures VALUES (9, 'bb22', 'LlamaAttention', 'module', '{"module":"attn"}', '{}', 1700000001);
INSERT INTO models VALUES (3, 'llama-3.1-8b', 'llama', 'LlamaForCausalLM', 'cfg1');
INSERT INTO provenance VALUES (5, 'NVIDIA H200', '580.159.04', '13.0', 'hf-transformers', 'paged|sdpa',
                               'bfloat16', 1, '{}');
INSERT INTO provenance VALUES (6, 'cpu', '', '', 'hf-transformers', 'paged|eager', 'float32', 1, '{}');
INSERT INTO model_signatures VALUES (3, 5, 7, 'prefill', 224), (3, 5, 9, 'decode', 32), (3, 6, 7, 'mixed', 224);
INSERT INTO measurements VALUES (11, 7, 5, 512, 1, 0, 0, 0, 1, 10, 0.002, 0.0019, 0.0018, 0.0025, 0.0001,
                                 1.25, 0.01, 625.0, 1700000100, '{}');
)sql";

// The v2 migration exactly as dooly released it (frozen like the v1 DDL): v1 + this = a file written by the v2
// release.
constexpr std::string_view frozen_v2_script = R"sql(
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
PRAGMA user_version = 2;
)sql";

// Rows a v2 release would have written (again non-contiguous ids, and two measurements with and without energy).
constexpr std::string_view v2_rows = R"sql(
INSERT INTO signatures VALUES (4, 'cc33', 'aten::linear', 'op', '{"op":"aten::linear"}', '{}', 1710000000);
INSERT INTO signatures VALUES (8, 'dd44', 'LlamaMLP', 'module', '{"module":"mlp"}', '{"kernels":[]}', 1710000001);
INSERT INTO models VALUES (2, 'qwen2.5-7b', 'qwen2', 'Qwen2ForCausalLM', 'cfg2');
INSERT INTO provenance VALUES (12, 'NVIDIA H200', '580.159.04', '13.0', 'hf-transformers', '5.17.0', 'paged|sdpa',
                               'bfloat16', 'bfloat16', 256, 1, '{"sdpa_kernel":"flash"}');
INSERT INTO model_signatures VALUES (2, 12, 4, 'prefill', 196), (2, 12, 8, 'decode', 28);
INSERT INTO measurements VALUES (21, 4, 12, 64, 1, 0, 1024, 1, 1, 20, 0.0005, 0.0005, 0.0004, 0.0007, 0.00002,
                                 0.35, 0.004, 700.0, 1710000100, '{"graph":true}');
INSERT INTO measurements VALUES (23, 8, 12, 1, 1, 0, 4096, 8, 0, 5, 0.001, 0.001, 0.0009, 0.0012, 0.0001,
                                 NULL, NULL, NULL, 1710000200, '{}');
)sql";

// The v3 migration exactly as dooly released it (frozen like the others): v1 + v2 + this = a file written by the v3
// release (data/profile/h200.sqlite of 2026-12-02 was one).
constexpr std::string_view frozen_v3_script = R"sql(
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
PRAGMA user_version = 3;
)sql";

// Rows a v3 release would have written on top of the v2 ones: a measured point with its key and a resolution.
constexpr std::string_view v3_rows = R"sql(
INSERT INTO measurements VALUES (31, 4, 12, '{"NUM_TOKS":64}', 'ok', '', 64, 1, 0, 0, 0, 1, 30, 0.0005, 0.0005, 0.0004,
                                 0.0007, 0.00002, 0.35, 0.01, 0.004, 700.0, 1710000300, '{"cuda_graph":true}');
INSERT INTO resolutions VALUES (4, 12, 4, 0, 'runs', '[]', 1710000301);
)sql";

// The v4 migration exactly as dooly released it: v1 + v2 + v3 + this = a file written by the v4 release
// (data/profile/h200.sqlite of 2026-12-03 was one).
constexpr std::string_view frozen_v4_script = R"sql(
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
PRAGMA user_version = 4;
)sql";

// Rows a v4 release would have written on top of the v3 ones: an engine signature and one of its steps.
constexpr std::string_view v4_rows = R"sql(
INSERT INTO signatures VALUES (9, 'ee55', 'hf-continuous-batching', 'engine', '{"kind":"engine"}', '{}', 1710000400);
INSERT INTO measurements VALUES (41, 9, 12, '{"DECODE_REQS":0,"NUM_REQS":1,"NUM_TOKS":16,"PREFILL_TOKS":16}', 'ok', '',
                                 16, 1, 16, 0, 0, 1, 2, 0.025, 0.025, 0.024, 0.026, 0.001, NULL, NULL, NULL, NULL,
                                 1710000401, '{"kind":"prefill"}');
)sql";

std::string create_v2_file(const TempDir& dir) {
  const std::string path = dir.file("v2.sqlite");
  Database db(path, OpenMode::read_write, 1000ms);
  db.execute("PRAGMA journal_mode = WAL");
  db.execute(frozen_v1_ddl);
  db.execute(frozen_v2_script);
  db.execute(v2_rows);
  return path;
}

std::string create_v3_file(const TempDir& dir) {
  const std::string path = dir.file("v3.sqlite");
  Database db(path, OpenMode::read_write, 1000ms);
  db.execute("PRAGMA journal_mode = WAL");
  db.execute(frozen_v1_ddl);
  db.execute(frozen_v2_script);
  db.execute(v2_rows);
  db.execute(frozen_v3_script);
  db.execute(v3_rows);
  return path;
}

std::string create_v4_file(const TempDir& dir) {
  const std::string path = dir.file("v4.sqlite");
  Database db(path, OpenMode::read_write, 1000ms);
  db.execute("PRAGMA journal_mode = WAL");
  db.execute(frozen_v1_ddl);
  db.execute(frozen_v2_script);
  db.execute(v2_rows);
  db.execute(frozen_v3_script);
  db.execute(v3_rows);
  db.execute(frozen_v4_script);
  db.execute(v4_rows);
  return path;
}

std::string create_v1_file(const TempDir& dir) {
  const std::string path = dir.file("v1.sqlite");
  Database db(path, OpenMode::read_write, 1000ms);
  db.execute("PRAGMA journal_mode = WAL");
  db.execute(frozen_v1_ddl);
  db.execute(v1_rows);
  return path;
}

std::vector<std::string> schema_sql(const std::string& path) {
  Database db(path, OpenMode::read_only, 1000ms);
  Statement s = db.prepare("SELECT type || ' ' || name || ': ' || sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.column_text(0));
  return out;
}

std::vector<std::string> columns(Database& db, std::string_view table) {
  Statement s = db.prepare(fmt::format("SELECT name FROM pragma_table_info('{}') ORDER BY cid", table));
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.column_text(0));
  return out;
}

void set_user_version(const std::string& path, int version) {
  Database db(path, OpenMode::read_write, 1000ms);
  db.execute(fmt::format("PRAGMA user_version = {}", version));
}

template <typename F>
StoreError expect_store_error(F&& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a StoreError";
  return StoreError("", -1, "", "");
}

TEST(Schema, MigrationsAreNumberedInOrder) {
  const auto all = migrations();
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].to_version, static_cast<int>(i + 1));
  EXPECT_EQ(current_schema_version(), 5);
}

TEST(Schema, NewFileIsCurrentWalAndMarked) {
  TempDir dir;
  const std::string path = dir.file("new.sqlite");
  {
    Store store = Store::open(path);
    EXPECT_EQ(store.schema_version_at_open(), 0);
    Database& db = store.database();
    EXPECT_EQ(db.query_int64("PRAGMA user_version"), 5);
    EXPECT_EQ(db.query_int64("PRAGMA application_id"), application_id);
    EXPECT_EQ(db.query_text("PRAGMA journal_mode"), "wal");
    EXPECT_EQ(db.query_int64("PRAGMA foreign_keys"), 1);
    EXPECT_EQ(columns(db, "provenance"),
              (std::vector<std::string>{"id", "gpu_name", "driver_version", "cuda_version", "engine", "engine_version",
                                        "attention_backend", "dtype", "kv_cache_dtype", "block_size", "tp",
                                        "extra_json"}));
    std::string measurement_columns;
    for (const std::string& c : columns(db, "measurements")) measurement_columns += c + " ";
    EXPECT_EQ(measurement_columns,
              "id signature_id provenance_id point_key status reason num_tokens num_requests prefill_chunk kv_length "
              "batch is_prefill repetitions latency_mean_s latency_median_s latency_min_s latency_max_s latency_std_s "
              "energy_j energy_hw_j energy_std_j avg_power_w measured_at_unix_s extra_json ");
    EXPECT_EQ(columns(db, "resolutions"),
              (std::vector<std::string>{"signature_id", "provenance_id", "unit_signature_id", "level", "status",
                                        "attempts_json", "resolved_at_unix_s"}));
    EXPECT_EQ(columns(db, "predictors"),
              (std::vector<std::string>{"id", "signature_id", "provenance_id", "target", "model", "params_json",
                                        "held_out_mape", "points", "data_sha256", "grid_sha256", "code_version",
                                        "evaluation_json", "fitted_at_unix_s"}));
  }
  Store again = Store::open(path);  // reopening a current file changes nothing
  EXPECT_EQ(again.schema_version_at_open(), 5);
}

TEST(Schema, MigratesV1KeepingEveryRow) {
  TempDir dir;
  const std::string path = create_v1_file(dir);
  {
    Store store = Store::open(path);
    EXPECT_EQ(store.schema_version_at_open(), 1);
    Database& db = store.database();
    EXPECT_EQ(db.query_int64("PRAGMA user_version"), 5);
    EXPECT_EQ(db.query_int64("PRAGMA foreign_keys"), 1);
    EXPECT_EQ(db.query_int64("SELECT count(*) FROM pragma_foreign_key_check"), 0);

    // Old rows, same ids, the new provenance columns "not recorded".
    const auto provenances = store.provenances();
    ASSERT_EQ(provenances.size(), 2u);
    EXPECT_EQ(provenances[0].id, 5);
    EXPECT_EQ(provenances[0].gpu_name, "NVIDIA H200");
    EXPECT_EQ(provenances[0].driver_version, "580.159.04");
    EXPECT_EQ(provenances[0].attention_backend, "paged|sdpa");
    EXPECT_EQ(provenances[0].engine_version, "");
    EXPECT_EQ(provenances[0].kv_cache_dtype, "");
    EXPECT_EQ(provenances[0].block_size, 0);
    EXPECT_EQ(provenances[1].id, 6);
    EXPECT_EQ(provenances[1].dtype, "float32");

    const auto sig = store.find_signature("aa11");
    ASSERT_TRUE(sig);
    EXPECT_EQ(sig->id, 7);
    EXPECT_EQ(sig->metadata_json, R"({"kernels":["k1"]})");
    EXPECT_EQ(sig->created_at_unix_s, 1700000000);

    const auto uses = store.signatures_of_model(3, 5);
    ASSERT_EQ(uses.size(), 2u);
    EXPECT_EQ(uses[0].signature.hash, "aa11");
    EXPECT_EQ(uses[0].phase, Phase::prefill);
    EXPECT_EQ(uses[0].count, 224);
    EXPECT_EQ(uses[1].signature.kind, SignatureKind::module);
    EXPECT_EQ(uses[1].count, 32);
    EXPECT_EQ(store.models_using(7).size(), 2u);  // under both provenances

    const auto measured = store.measurements_for(7, 5);
    ASSERT_EQ(measured.size(), 1u);
    EXPECT_EQ(measured[0].id, 11);
    EXPECT_EQ(measured[0].num_tokens, 512);
    EXPECT_EQ(measured[0].energy_j, 1.25);
    EXPECT_EQ(measured[0].avg_power_w, 625.0);
    EXPECT_EQ(measured[0].point_key, "");  // v3's columns: legacy defaults
    EXPECT_EQ(measured[0].status, MeasurementStatus::ok);

    // The v2 identity: same old fields, now told apart by the KV-cache dtype.
    Provenance p = provenances[0];
    p.id = 0;
    EXPECT_EQ(store.upsert_provenance(p), 5);
    p.kv_cache_dtype = "float8_e4m3fn";
    p.block_size = 256;
    p.engine_version = "5.17.0";
    const int64_t fp8 = store.upsert_provenance(p);
    EXPECT_NE(fp8, 5);
    EXPECT_EQ(store.provenances().back().kv_cache_dtype, "float8_e4m3fn");

    // Foreign keys still point at the rebuilt table.
    EXPECT_THROW(store.add_occurrences(3, 99, 7, Phase::decode, 1), StoreError);
    store.add_occurrences(3, fp8, 7, Phase::decode, 1);
  }
  // A migrated file and a new one have the same schema.
  Store::open(dir.file("fresh.sqlite"));
  EXPECT_EQ(schema_sql(path), schema_sql(dir.file("fresh.sqlite")));
}

// v3 -> v4 rebuilds signatures for the kind 'engine': every row keeps its id, the tables that refer to it keep their
// rows and foreign keys, and an engine signature can be stored.
TEST(Schema, MigratesV3KeepingEveryRowAndTakesEngineSignatures) {
  TempDir dir;
  const std::string path = create_v3_file(dir);
  {
    Store store = Store::open(path);
    EXPECT_EQ(store.schema_version_at_open(), 3);
    Database& db = store.database();
    EXPECT_EQ(db.query_int64("PRAGMA user_version"), 5);
    EXPECT_EQ(db.query_int64("PRAGMA foreign_keys"), 1);
    EXPECT_EQ(db.query_int64("SELECT count(*) FROM pragma_foreign_key_check"), 0);
    const auto linear = store.find_signature("cc33");
    ASSERT_TRUE(linear);
    EXPECT_EQ(linear->id, 4);
    EXPECT_EQ(linear->created_at_unix_s, 1710000000);
    EXPECT_EQ(store.find_signature("dd44")->kind, SignatureKind::module);
    const auto measured = store.measurements_for(4, 12);
    ASSERT_EQ(measured.size(), 2u);
    EXPECT_EQ(measured[1].point_key, R"({"NUM_TOKS":64})");
    EXPECT_EQ(measured[1].energy_hw_j, 0.01);
    ASSERT_TRUE(store.resolution_of(4, 12));
    EXPECT_EQ(store.signatures_of_model(2, 12).size(), 2u);
    const auto engine = store.upsert_signature("ee55", "hf-continuous-batching", SignatureKind::engine, "{}");
    EXPECT_TRUE(engine.inserted);
    EXPECT_EQ(store.find_signature("ee55")->kind, SignatureKind::engine);
    EXPECT_THROW(store.add_occurrences(2, 12, 999, Phase::decode, 1), StoreError);  // foreign keys still hold
  }
  Store::open(dir.file("fresh.sqlite"));
  EXPECT_EQ(schema_sql(path), schema_sql(dir.file("fresh.sqlite")));
}

// v4 -> v5 adds the predictors table: every earlier row stays as it was, a predictor can be stored and read back,
// and its table checks its references and values.
TEST(Schema, MigratesV4KeepingEveryRowAndTakesPredictors) {
  TempDir dir;
  const std::string path = create_v4_file(dir);
  {
    Store store = Store::open(path);
    EXPECT_EQ(store.schema_version_at_open(), 4);
    Database& db = store.database();
    EXPECT_EQ(db.query_int64("PRAGMA user_version"), 5);
    EXPECT_EQ(db.query_int64("PRAGMA foreign_keys"), 1);
    EXPECT_EQ(db.query_int64("SELECT count(*) FROM pragma_foreign_key_check"), 0);
    const Summary summary = store.summary();
    EXPECT_EQ(summary.signatures, 3);
    EXPECT_EQ(summary.measurements, 4);
    EXPECT_EQ(summary.resolutions, 1);
    EXPECT_EQ(summary.predictors, 0);
    EXPECT_EQ(store.find_signature("ee55")->kind, SignatureKind::engine);
    const auto steps = store.measurements_for(9, 12);
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(steps[0].id, 41);
    EXPECT_EQ(steps[0].latency_mean_s, 0.025);
    EXPECT_EQ(store.measurements_for(4, 12).size(), 2u);

    PredictorRecord p;
    p.signature_id = 9;
    p.provenance_id = 12;
    p.target = PredictorTarget::latency_s;
    p.model = "constant";
    p.params_json = R"({"value": 0.025})";
    p.points = 1;
    p.data_sha256 = std::string(64, 'a');
    p.code_version = "test";
    store.upsert_predictor(p);
    const auto back = store.predictor(9, 12, PredictorTarget::latency_s);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->params_json, R"({"value":0.025})");
    EXPECT_FALSE(back->held_out_mape);
    EXPECT_GT(back->fitted_at_unix_s, 0);
    EXPECT_FALSE(store.predictor(9, 12, PredictorTarget::energy_j));
    EXPECT_EQ(store.summary().predictors, 1);
    p.signature_id = 99;  // no such signature
    EXPECT_THROW(store.upsert_predictor(p), StoreError);
    EXPECT_THROW(db.execute("UPDATE predictors SET points = 0"), StoreError);
    EXPECT_THROW(db.execute("UPDATE predictors SET target = 'power_w'"), StoreError);
  }
  Store::open(dir.file("fresh.sqlite"));
  EXPECT_EQ(schema_sql(path), schema_sql(dir.file("fresh.sqlite")));
}

TEST(Schema, MigratesV2KeepingEveryRow) {
  TempDir dir;
  const std::string path = create_v2_file(dir);
  {
    Store store = Store::open(path);
    EXPECT_EQ(store.schema_version_at_open(), 2);
    Database& db = store.database();
    EXPECT_EQ(db.query_int64("PRAGMA user_version"), 5);
    EXPECT_EQ(db.query_int64("PRAGMA foreign_keys"), 1);
    EXPECT_EQ(db.query_int64("SELECT count(*) FROM pragma_foreign_key_check"), 0);
    EXPECT_EQ(db.query_int64("SELECT count(*) FROM resolutions"), 0);

    const Summary summary = store.summary();
    EXPECT_EQ(summary.signatures, 2);
    EXPECT_EQ(summary.models, 1);
    EXPECT_EQ(summary.provenances, 1);
    EXPECT_EQ(summary.occurrences, 196 + 28);
    EXPECT_EQ(summary.measurements, 2);
    EXPECT_EQ(summary.measurements_by_status[static_cast<size_t>(MeasurementStatus::ok)], 2);

    const auto provenances = store.provenances();
    ASSERT_EQ(provenances.size(), 1u);
    EXPECT_EQ(provenances[0].id, 12);
    EXPECT_EQ(provenances[0].kv_cache_dtype, "bfloat16");
    EXPECT_EQ(provenances[0].block_size, 256);
    EXPECT_EQ(store.find_signature("dd44")->id, 8);
    EXPECT_EQ(store.find_model("qwen2.5-7b", "cfg2")->id, 2);
    EXPECT_EQ(store.signatures_of_model(2, 12).size(), 2u);

    // Every measurement with its id and values; the new columns "not recorded".
    const auto linear = store.measurements_for(4, 12);
    ASSERT_EQ(linear.size(), 1u);
    const Measurement& m = linear[0];
    EXPECT_EQ(m.id, 21);
    EXPECT_EQ(m.num_tokens, 64);
    EXPECT_EQ(m.num_requests, 1);
    EXPECT_EQ(m.kv_length, 1024);
    EXPECT_EQ(m.batch, 1);
    EXPECT_TRUE(m.is_prefill);
    EXPECT_EQ(m.repetitions, 20);
    EXPECT_EQ(m.latency_mean_s, 0.0005);
    EXPECT_EQ(m.latency_min_s, 0.0004);
    EXPECT_EQ(m.latency_max_s, 0.0007);
    EXPECT_EQ(m.latency_std_s, 0.00002);
    EXPECT_EQ(m.energy_j, 0.35);
    EXPECT_EQ(m.energy_std_j, 0.004);
    EXPECT_EQ(m.avg_power_w, 700.0);
    EXPECT_EQ(m.measured_at_unix_s, 1710000100);
    EXPECT_EQ(m.extra_json, R"({"graph":true})");
    EXPECT_EQ(m.point_key, "");
    EXPECT_EQ(m.status, MeasurementStatus::ok);
    EXPECT_EQ(m.reason, "");
    EXPECT_FALSE(m.energy_hw_j);
    const auto mlp = store.measurements_for(8, 12);
    ASSERT_EQ(mlp.size(), 1u);
    EXPECT_EQ(mlp[0].id, 23);
    EXPECT_FALSE(mlp[0].energy_j);
    EXPECT_FALSE(mlp[0].avg_power_w);
    EXPECT_EQ(mlp[0].batch, 8);

    // Legacy rows match no point: the planner measures those points again.
    EXPECT_TRUE(store.point_keys(4, 12, true).empty());
    // The rebuilt table takes v3 rows and still checks its references.
    Measurement failed;
    failed.signature_id = 4;
    failed.provenance_id = 12;
    failed.point_key = R"({"NUM_TOKS":64})";
    failed.status = MeasurementStatus::oom;
    failed.reason = "OutOfMemoryError: CUDA out of memory";
    failed.repetitions = 0;
    EXPECT_GT(store.insert_measurement(failed), 23);
    EXPECT_EQ(store.point_keys(4, 12, true), std::vector<std::string>{R"({"NUM_TOKS":64})"});
    failed.signature_id = 99;
    EXPECT_THROW(store.insert_measurement(failed), StoreError);
    // The CHECKs of the new layout hold for writers that bypass the API, too.
    EXPECT_THROW(db.execute("UPDATE measurements SET repetitions = 0 WHERE id = 21"), StoreError);
    EXPECT_THROW(db.execute("UPDATE measurements SET status = 'failed' WHERE id = 21"), StoreError);  // no reason
  }
  Store::open(dir.file("fresh.sqlite"));
  EXPECT_EQ(schema_sql(path), schema_sql(dir.file("fresh.sqlite")));
}

TEST(Schema, ReadOnlyOpenOfAnOlderFileAsksForAReadWriteOpen) {
  TempDir dir;
  const std::string path = create_v1_file(dir);
  const StoreError e = expect_store_error([&] { Store::open(path, Store::Mode::read_only); });
  EXPECT_NE(std::string(e.what()).find("schema version 1 is older than this dooly's schema version 5"),
            std::string::npos)
      << e.what();
  EXPECT_NE(e.fix().find("read-write"), std::string::npos) << e.fix();
  Database db(path, OpenMode::read_only, 1000ms);
  EXPECT_EQ(db.query_int64("PRAGMA user_version"), 1);  // untouched
}

TEST(Schema, FileFromTheFutureIsRefused) {
  TempDir dir;
  const std::string path = dir.file("future.sqlite");
  Store::open(path);
  set_user_version(path, 6);
  for (Store::Mode mode : {Store::Mode::read_write, Store::Mode::read_only}) {
    const StoreError e = expect_store_error([&] { Store::open(path, mode); });
    EXPECT_EQ(
        std::string(e.what()),
        fmt::format("store {}: schema version 6 is newer than this dooly understands (schema version 5) — "
                    "upgrade dooly to a release that writes this schema version; never downgrade a store in place",
                    path));
  }
  Database db(path, OpenMode::read_only, 1000ms);
  EXPECT_EQ(db.query_int64("PRAGMA user_version"), 6);
}

TEST(Schema, ForeignSqliteFileIsRefused) {
  TempDir dir;
  const std::string path = dir.file("other.sqlite");
  {
    Database db(path, OpenMode::read_write, 1000ms);
    db.execute("CREATE TABLE people (name TEXT)");
  }
  const StoreError e = expect_store_error([&] { Store::open(path); });
  EXPECT_NE(std::string(e.what()).find("not a dooly store (application_id 0, user_version 0)"), std::string::npos)
      << e.what();
  EXPECT_NE(e.fix().find("another program"), std::string::npos);
  Database db(path, OpenMode::read_only, 1000ms);
  EXPECT_EQ(db.query_int64("SELECT count(*) FROM sqlite_schema"), 1);  // nothing added to it
}

TEST(Schema, UnwritablePathSaysWhatToCheck) {
  const std::string path = "/nonexistent-dooly-dir/sub/store.sqlite";
  const StoreError e = expect_store_error([&] { Store::open(path); });
  EXPECT_EQ(e.sqlite_code(), SQLITE_CANTOPEN);
  EXPECT_EQ(e.path(), path);
  EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  EXPECT_NE(e.fix().find("directory exists and is writable"), std::string::npos) << e.fix();
}

TEST(Schema, DirectoryInsteadOfFile) {
  TempDir dir;
  const StoreError e = expect_store_error([&] { Store::open(dir.path()); });
  EXPECT_EQ(e.sqlite_code() & 0xff, SQLITE_CANTOPEN) << e.what();
}

TEST(Schema, ReadOnlyOpenNeverCreatesAFile) {
  TempDir dir;
  const std::string path = dir.file("absent.sqlite");
  const StoreError e = expect_store_error([&] { Store::open(path, Store::Mode::read_only); });
  EXPECT_EQ(e.sqlite_code(), SQLITE_CANTOPEN);
  EXPECT_NE(e.fix().find("read-only never creates it"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Schema, ReadOnlyOpenOfAnEmptyFile) {
  TempDir dir;
  const std::string path = dir.file("empty.sqlite");
  std::ofstream(path).close();
  const StoreError e = expect_store_error([&] { Store::open(path, Store::Mode::read_only); });
  EXPECT_NE(std::string(e.what()).find("the store is empty"), std::string::npos) << e.what();
  EXPECT_NE(e.fix().find("read-write"), std::string::npos);
}

TEST(Schema, CorruptFileIsNotADatabase) {
  TempDir dir;
  const std::string path = dir.file("corrupt.sqlite");
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "this is not sqlite ";
  }
  for (Store::Mode mode : {Store::Mode::read_write, Store::Mode::read_only}) {
    const StoreError e = expect_store_error([&] { Store::open(path, mode); });
    EXPECT_EQ(e.sqlite_code(), SQLITE_NOTADB) << e.what();
    EXPECT_NE(std::string(e.what()).find("file is not a database"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(e.fix().find("move this file away"), std::string::npos);
  }
}

TEST(Schema, DamagedPageIsReportedAsCorrupt) {
  TempDir dir;
  const std::string path = dir.file("damaged.sqlite");
  {
    Store store = Store::open(path);
    store.database().execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
  }
  {
    // Overwrite the header of every page after the first (which holds sqlite_schema): every table and index.
    const auto size = std::filesystem::file_size(path);
    ASSERT_GT(size, 4096u * 4);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const std::string junk(64, '\xEE');
    for (std::uintmax_t page = 4096; page < size; page += 4096) {
      f.seekp(static_cast<std::streamoff>(page));
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
  }
  const StoreError e = expect_store_error([&] {
    Store store = Store::open(path);
    store.summary();
  });
  EXPECT_EQ(e.sqlite_code() & 0xff, SQLITE_CORRUPT) << e.what();
  EXPECT_NE(e.fix().find(".recover"), std::string::npos);
}

// A store cut short (a copy that stopped, a full disk): every reader fails with one StoreError line naming the file
// and a fix, never a crash or a silent short answer.
TEST(Schema, TruncatedFileIsReportedInOneLine) {
  TempDir dir;
  const std::string whole = dir.file("whole.sqlite");
  {
    Store store = Store::open(whole);
    auto tx = store.transaction();
    for (int i = 0; i < 400; ++i)
      store.upsert_signature(fmt::format("{:064x}", i), "aten::mm", SignatureKind::op,
                             fmt::format(R"({{"i":{},"pad":"{}"}})", i, std::string(200, 'x')));
    tx.commit();
    store.database().execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
  }
  const auto size = std::filesystem::file_size(whole);
  ASSERT_GT(size, 4096u * 16);
  // Half the pages, half a page more, and less than the 100-byte header.
  for (const std::uintmax_t keep : {size / 2 / 4096 * 4096, size / 2 / 4096 * 4096 + 2048, std::uintmax_t{50}}) {
    const std::string path = dir.file(fmt::format("cut-{}.sqlite", keep));
    std::filesystem::copy_file(whole, path);
    std::filesystem::resize_file(path, keep);
    for (Store::Mode mode : {Store::Mode::read_write, Store::Mode::read_only}) {
      const StoreError e = expect_store_error([&] {
        Store store = Store::open(path, mode);
        store.summary();
        for (int i = 0; i < 400; ++i) store.find_signature(fmt::format("{:064x}", i));
      });
      const std::string what = e.what();
      EXPECT_TRUE((e.sqlite_code() & 0xff) == SQLITE_CORRUPT || (e.sqlite_code() & 0xff) == SQLITE_NOTADB)
          << keep << " bytes: " << what;
      EXPECT_EQ(what.rfind("store " + path + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_FALSE(e.fix().empty());
    }
  }
}

}  // namespace
}  // namespace dooly::store
