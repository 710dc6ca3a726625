#pragma once
// The rows of the store as plain structs. Units are in the field names; ids are the tables' row ids.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dooly::store {

enum class SignatureKind { op, module, engine };  // engine: the serving engine's own cost per step (schema v4)
// Which kind of engine step a signature was traced in (a mixed step batches decodes with a prefill chunk).
enum class Phase { prefill, decode, mixed };

// How a sweep point's measurement ended. Only `ok` rows carry statistics; the others record why the point
// gave none (a Python exception, CUDA out of memory, the per-point time limit), so a planner does not retry
// them blindly.
enum class MeasurementStatus { ok, failed, oom, timeout };
inline constexpr size_t measurement_status_count = 4;
// Which unit measures a signature under a measurement context: `runs` (the signature itself, level 0),
// `absorbed` (a module `level` steps up runs and its measurement covers this signature), `unrunnable` (no level
// could be run: no unit).
enum class ResolutionStatus { runs, absorbed, unrunnable };
// What a predictor predicts per call of its signature (schema v5): seconds of latency or joules of energy.
enum class PredictorTarget { latency_s, energy_j };

std::string_view to_string(SignatureKind kind) noexcept;
std::string_view to_string(Phase phase) noexcept;
std::string_view to_string(MeasurementStatus status) noexcept;
std::string_view to_string(ResolutionStatus status) noexcept;
std::string_view to_string(PredictorTarget target) noexcept;
std::optional<SignatureKind> parse_signature_kind(std::string_view text) noexcept;
std::optional<Phase> parse_phase(std::string_view text) noexcept;
std::optional<MeasurementStatus> parse_measurement_status(std::string_view text) noexcept;
std::optional<ResolutionStatus> parse_resolution_status(std::string_view text) noexcept;
std::optional<PredictorTarget> parse_predictor_target(std::string_view text) noexcept;

struct Signature {
  int64_t id = 0;
  std::string hash;  // lowercase hex (SHA-256 of canonical_json, computed by dooly::signature)
  std::string name;  // op or module name
  SignatureKind kind = SignatureKind::op;
  std::string canonical_json;  // the exact bytes that were hashed
  std::string metadata_json;   // not hashed: kernel symbols etc., as first stored
  int64_t created_at_unix_s = 0;
};

struct SignatureUpsert {
  int64_t id = 0;
  bool inserted = false;  // false: the hash was already stored (with the same canonical_json)
};

struct Model {
  int64_t id = 0;
  std::string name;          // e.g. "llama-3.1-8b"
  std::string family;        // e.g. "llama"
  std::string architecture;  // e.g. "LlamaForCausalLM"
  std::string config_hash;   // hash of the model config file; a changed config is a new model row
};

// A profiling context: where and how signatures were traced or measured. Every field is part of its identity
// (extra_json after normalization: keys sorted, no whitespace). Empty text / 0 means "not recorded".
struct Provenance {
  int64_t id = 0;
  std::string gpu_name;           // "NVIDIA H200", or "cpu" for a trace taken on a CPU
  std::string driver_version;     // "580.159.04"
  std::string cuda_version;       // "13.0"
  std::string engine;             // "hf-transformers"
  std::string engine_version;     // "5.17.0"
  std::string attention_backend;  // "paged|sdpa"
  std::string dtype;              // "bfloat16"
  std::string kv_cache_dtype;     // "bfloat16"
  int64_t block_size = 0;         // KV-cache block size in tokens
  int64_t tp = 1;                 // tensor-parallel degree
  std::string extra_json = "{}";  // a JSON object, e.g. {"sdpa_kernel":"flash"}
};

// One model's use of one signature under one provenance: `count` occurrences per engine step of `phase`.
struct Occurrence {
  int64_t signature_id = 0;
  Phase phase = Phase::prefill;
  int64_t count = 0;
};

struct SignatureUse {
  Signature signature;
  Phase phase = Phase::prefill;
  int64_t count = 0;
};

struct ModelUse {
  Model model;
  int64_t provenance_id = 0;
  Phase phase = Phase::prefill;
  int64_t count = 0;
};

// One sweep point of one signature under one provenance. Size fields that are not part of the point are 0.
struct Measurement {
  int64_t id = 0;  // set by the store
  int64_t signature_id = 0;
  int64_t provenance_id = 0;
  // The point's identity: its variable bindings as a canonical JSON object (keys sorted, compact), e.g.
  // {"KV_TOKS":1024,"NUM_TOKS":64}; canonical_point_key() makes one. '' = no key (rows from schema v2): such a
  // row matches no point.
  std::string point_key;
  MeasurementStatus status = MeasurementStatus::ok;
  std::string reason;  // non-ok rows: one line, "<ExceptionType>: <last line of its message>"
  int64_t num_tokens = 0;
  int64_t num_requests = 0;
  int64_t prefill_chunk = 0;
  int64_t kv_length = 0;
  int64_t batch = 0;
  bool is_prefill = false;
  int64_t repetitions = 1;  // calls the statistics are over (>= 1 when ok; a point that never completed: 0)
  double latency_mean_s = 0;
  double latency_median_s = 0;
  double latency_min_s = 0;
  double latency_max_s = 0;
  double latency_std_s = 0;
  std::optional<double> energy_j;     // per call; absent when no power source was available
  std::optional<double> energy_hw_j;  // half-width of the 95 % interval of energy_j; absent when not known
  std::optional<double> energy_std_j;
  std::optional<double> avg_power_w;
  int64_t measured_at_unix_s = 0;  // 0 on insert: now
  std::string extra_json = "{}";   // a JSON object
};

// Which unit measures `signature_id` under the measurement context `provenance_id` (one row per pair).
struct Resolution {
  int64_t signature_id = 0;
  int64_t provenance_id = 0;
  // The signature that runs: itself (status runs, level 0) or the module that absorbs it (status absorbed,
  // level >= 1). Absent exactly when status is unrunnable (the one rule set_resolution checks between them).
  std::optional<int64_t> unit_signature_id;
  int64_t level = 0;  // 0 = the signature itself, 1 = its parent module, ...
  ResolutionStatus status = ResolutionStatus::runs;
  // One entry per lower level that failed: [{"error":"<Type>: <last line>","level":0,"unit":"<hash>"}, ...]
  // (a JSON array of objects with at least those keys; stored normalized: keys sorted, compact).
  std::string attempts_json = "[]";
  int64_t resolved_at_unix_s = 0;  // 0 on set_resolution: now
};

// A fitted predictor of one signature under one measurement context (schema v5; dooly::predict writes them). What
// the JSON fields hold is dooly::predict's business; the store checks that they are JSON objects.
struct PredictorRecord {
  int64_t signature_id = 0;
  int64_t provenance_id = 0;
  PredictorTarget target = PredictorTarget::latency_s;
  std::string model;                    // the chosen candidate, e.g. "interp_loglog"
  std::string params_json = "{}";       // its parameters (a JSON object)
  std::optional<double> held_out_mape;  // absent when there was nothing to hold out (a single point)
  int64_t points = 0;                   // measured points it was fitted to (>= 1)
  std::string data_sha256;              // SHA-256 of those points (lowercase hex): unchanged -> no refit
  std::string grid_sha256;              // the grid file(s) the points came from, '' when not recorded
  std::string code_version;             // what produced it (a new version refits)
  std::string evaluation_json = "{}";   // held-out errors in detail (a JSON object)
  int64_t fitted_at_unix_s = 0;         // 0 on upsert: now
};

// One provenance and what uses it: occurrence rows of traced models (a trace context) or measurements (a
// measurement context).
struct ProvenanceUse {
  Provenance provenance;
  int64_t occurrence_rows = 0;
  int64_t measurements = 0;
};

// Row counts, all taken from one snapshot of the file.
struct Summary {
  int schema_version = 0;
  int64_t signatures = 0;
  int64_t models = 0;
  int64_t provenances = 0;
  int64_t occurrence_rows = 0;  // rows of model_signatures
  int64_t occurrences = 0;      // sum of their counts
  int64_t measurements = 0;     // all statuses
  // measurements_by_status[static_cast<size_t>(MeasurementStatus::oom)], ...; they sum to measurements.
  std::array<int64_t, measurement_status_count> measurements_by_status{};
  int64_t resolutions = 0;
  int64_t predictors = 0;
};

}  // namespace dooly::store
