#pragma once
// What `dooly profile` writes to the store, from the JSON the Python worker sends through the binding
// (docs/profile.md, "Worker protocol"). Each call is one atomic write, so a killed run loses at most the point
// in flight.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dooly/store/store.hpp"

namespace dooly::plan {

// The measurement context: {"gpu_name", "driver_version", "cuda_version", "engine", "engine_version",
// "extra": {...}} -> its provenance id. Attention backend, dtypes and block size stay empty: they are in the
// signatures (and in the traced provenance), so one measurement serves every backend and model that shares the
// work. "extra" gets "context":"measure".
int64_t upsert_measurement_context(store::Store& store, const nlohmann::json& context);

// The measurement context with the most measurements (ties: the newest), for --dry-run and --report.
std::optional<int64_t> latest_measurement_context(store::Store& store);

// {"signature": hash, "provenance_id", "point": <a plan point>, "status": "ok"|"failed"|"oom"|"timeout",
//  "reason", "repetitions", "latency_s": {"mean","median","min","max","std"},
//  "energy": null | {"j", "hw_j", "std_j", "avg_power_w"}, "extra": {...}} -> the measurement's id.
int64_t commit_point(store::Store& store, const nlohmann::json& result);

// A row's time on the device (its extra's "point_s", the worker's wall time inside the point: inputs, warm-up,
// settle, the timed window, energy), when it recorded a positive one; `extra` is the row's extra_json, parsed.
std::optional<double> point_seconds(const nlohmann::json& extra);

// The signature of a serving engine's own cost per step (kind 'engine', schema v4): {"name": "hf-continuous-batching",
// "model": name, "config_hash", "attention", "cuda_graphs": [varlen, decode], "block_size", "max_batch_tokens",
// "dtype", optional "loop": "engine-thread" | "caller", where the engine's loop ran while it was timed} -> its hash
// (SHA-256 of the canonical form {"attrs": {...}, "kind": "engine", "name", "v": 1}), stored if new. The engine's steps
// are then committed with commit_point under that hash. The model is part of it: how many ops an eager step launches is
// the model's.
std::string upsert_engine_signature(store::Store& store, const nlohmann::json& engine);

// {"signature": hash, "provenance_id", "unit": hash | null, "level", "status": "runs"|"absorbed"|"unrunnable",
//  "attempts": [{"unit", "level", "error"}]}.
void commit_resolution(store::Store& store, const nlohmann::json& resolution);

}  // namespace dooly::plan
