#pragma once
// The Dooly store: signatures, the models that use them, the profiling contexts (provenance) they were seen
// and measured under, and the measurements part 2 fills in. One SQLite file in WAL mode: any number of
// readers and one writer at a time, each with its own Store (a Store belongs to one thread at a time).
//
//   auto store = Store::open("dooly.sqlite");                 // creates / migrates the schema
//   auto tx = store.transaction();                            // optional: batch writes atomically
//   auto sig = store.upsert_signature(hash, "aten::mm", SignatureKind::op, canonical_json, metadata_json);
//   tx.commit();
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dooly/store/records.hpp"
#include "dooly/store/sqlite.hpp"
#include "dooly/store/store_error.hpp"

namespace dooly::store {

inline constexpr std::chrono::milliseconds default_busy_timeout{5000};

// The canonical form of a sweep point's key: the JSON object `json_object` with its keys sorted and no
// whitespace, e.g. R"({"NUM_TOKS": 64, "KV_TOKS": 1024})" -> R"({"KV_TOKS":1024,"NUM_TOKS":64})". Integers and
// ASCII strings come out as Python's json.dumps(v, sort_keys=True, separators=(",", ":")) writes them.
// Throws InputError when the text is not a JSON object.
std::string canonical_point_key(std::string_view json_object);

class Store {
 public:
  using Mode = OpenMode;

  // read_write creates the file if needed, switches it to WAL and migrates it to the current schema.
  // read_only requires a dooly store at exactly the current schema version. Throws StoreError.
  static Store open(const std::string& path, Mode mode = Mode::read_write,
                    std::chrono::milliseconds busy_timeout = default_busy_timeout);

  Store(Store&&) noexcept = default;
  Store& operator=(Store&&) noexcept = default;
  ~Store();

  const std::string& path() const noexcept { return db_->path(); }
  Mode mode() const noexcept { return db_->mode(); }
  // The version the file had when opened (0: it was created now). After open it is current_schema_version().
  int schema_version_at_open() const noexcept { return version_at_open_; }

  // Groups writes into one atomic step (BEGIN IMMEDIATE). Every write below is atomic on its own, too.
  Transaction transaction() { return Transaction(*db_); }

  // ---- writes (each throws StoreError; invalid arguments throw InputError naming the field)
  // Same (name, config_hash) -> the existing id; a different family/architecture there -> ConflictError.
  int64_t upsert_model(const Model& model);
  // Same identifying fields -> the existing id.
  int64_t upsert_provenance(const Provenance& provenance);
  // Same hash -> {existing id, false}, the first metadata kept; same hash with different canonical_json ->
  // ConflictError (a hash collision or a non-deterministic serializer).
  SignatureUpsert upsert_signature(std::string_view hash, std::string_view name, SignatureKind kind,
                                   std::string_view canonical_json, std::string_view metadata_json = "{}");
  // Sets (replaces, never adds to) the count of one (model, provenance, signature, phase).
  void add_occurrences(int64_t model_id, int64_t provenance_id, int64_t signature_id, Phase phase, int64_t count);
  // A re-run of one model under one provenance: its previous occurrence rows are replaced by these.
  // A (signature, phase) listed twice is an InputError.
  void replace_occurrences(int64_t model_id, int64_t provenance_id, std::span<const Occurrence> occurrences);
  // Appends one sweep point (measurements are history: the same point measured twice gives two rows).
  // point_key must be '' or canonical (canonical_point_key(key) == key). ok rows: repetitions >= 1 and
  // min <= mean, median <= max; other statuses: a non-empty reason, and with 0 repetitions every latency 0.
  // reason is one line.
  int64_t insert_measurement(const Measurement& measurement);
  // Inserts or replaces the resolution of (signature_id, provenance_id). unit_signature_id is absent exactly
  // when status is unrunnable; attempts_json is a JSON array of {"unit","level","error"} objects.
  void set_resolution(const Resolution& resolution);
  // Inserts or replaces the predictor of (signature_id, provenance_id, target) (schema v5). params_json and
  // evaluation_json must be JSON objects (stored normalized), data_sha256 a SHA-256 digest, points >= 1.
  void upsert_predictor(const PredictorRecord& predictor);
  // Removes it (no-op when absent): its points are gone, e.g. all of them now lack energy.
  void delete_predictor(int64_t signature_id, int64_t provenance_id, PredictorTarget target);

  // ---- queries
  std::optional<Signature> find_signature(std::string_view hash) const;
  std::optional<Model> find_model(std::string_view name, std::string_view config_hash) const;
  std::vector<Model> models() const;
  std::vector<Provenance> provenances() const;
  // Every provenance (by id) with its occurrence rows and measurements.
  std::vector<ProvenanceUse> provenance_uses() const;
  // Ordered by signature id, then phase.
  std::vector<SignatureUse> signatures_of_model(int64_t model_id, int64_t provenance_id) const;
  // Ordered by model id, provenance id, phase.
  std::vector<ModelUse> models_using(int64_t signature_id) const;
  // Ordered by id (insertion order).
  std::vector<Measurement> measurements_for(int64_t signature_id, int64_t provenance_id) const;
  // The distinct point keys measured for one signature under one provenance, sorted: those of ok rows, plus
  // those of failed/oom/timeout rows when include_failed. Never '' (rows without a key match no point).
  std::vector<std::string> point_keys(int64_t signature_id, int64_t provenance_id, bool include_failed) const;
  std::optional<Resolution> resolution_of(int64_t signature_id, int64_t provenance_id) const;
  // Every resolution under one provenance, ordered by signature id.
  std::vector<Resolution> resolutions(int64_t provenance_id) const;
  // The provenances that some model's occurrences were traced under, ordered by id.
  std::vector<int64_t> provenances_with_occurrences() const;
  std::optional<PredictorRecord> predictor(int64_t signature_id, int64_t provenance_id, PredictorTarget target) const;
  // Every predictor under one provenance, ordered by signature id, then target name (energy_j, latency_s).
  std::vector<PredictorRecord> predictors(int64_t provenance_id) const;
  // Signatures that occur under `provenance_id` but have no measurement (of any status) under it: what still
  // needs profiling. A signature whose points all failed is not missing; point_keys() tells which points are left.
  std::vector<Signature> missing_signatures(int64_t provenance_id) const;
  // The same when traces were taken under one context (e.g. a CPU trace) and measurements under another.
  std::vector<Signature> missing_signatures(int64_t measured_provenance_id, int64_t traced_provenance_id) const;
  Summary summary() const;

  // For queries this API does not have yet (read them through Statement; keep writes in this class).
  Database& database() noexcept { return *db_; }

 private:
  Store(std::unique_ptr<Database> db, int version_at_open);
  std::unique_ptr<Database> db_;
  int version_at_open_ = 0;
};

}  // namespace dooly::store
