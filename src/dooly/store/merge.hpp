#pragma once
// Merging stores: shards written by separate profiling runs (one per GPU, one per host) become one file.
//
//   Store into = Store::open("dooly.sqlite");
//   const MergeSummary s = merge_store(into, "shard-gpu1.sqlite");   // one transaction: all of it or nothing
#include <cstdint>
#include <string>

#include "dooly/store/store.hpp"

namespace dooly::store {

struct MergeCounts {
  int64_t added = 0;     // rows new to `into`
  int64_t skipped = 0;   // rows `into` already held (same identity and content)
  int64_t replaced = 0;  // resolutions only: rows of `into` replaced by a newer one
};

struct MergeSummary {
  std::string from_path;
  MergeCounts signatures;   // by hash; `into`'s metadata_json is kept
  MergeCounts models;       // by (name, config_hash)
  MergeCounts provenances;  // by every identifying field
  MergeCounts occurrences;  // by (model, provenance, signature, phase)
  MergeCounts measurements;
  MergeCounts resolutions;  // by (signature, provenance); the later resolved_at_unix_s wins
};

// Copies everything `from_path` holds into `into`, in one transaction (nested as a savepoint when `into` has one
// open), remapping row ids by identity. A measurement equal to one `into` held before the merge in (signature hash,
// provenance, point_key, status, measured_at_unix_s, latency_mean_s) is skipped, so merging a shard twice adds
// nothing. `from_path` is opened read-only and must be a dooly store at the current schema version.
// Throws ConflictError (nothing written) when one identity carries different content in the two files: a
// signature hash with another canonical form, name or kind; a model with another family or architecture; an
// occurrence with another count. Merging a file into itself is an InputError. Other failures: StoreError.
MergeSummary merge_store(Store& into, const std::string& from_path);

}  // namespace dooly::store
