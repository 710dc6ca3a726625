#pragma once
// Ingesting labelled traces into the store: sign every traced step's call tree, store the signatures, the
// model, its provenance and the occurrence counts, and say how many of each model's op signatures are new.
// This is `dooly signatures`; the CLI only parses its arguments and prints the summary.
//
//   Store db = Store::open("dooly.sqlite");
//   const IngestSummary s = ingest_traces(db, {"traces/a.json", "traces/b.json"});
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dooly/store/records.hpp"
#include "dooly/store/store.hpp"
#include "dooly/trace/trace.hpp"

namespace dooly::store {

// One trace's share of an ingest. Op counts are occurrences per step summed over the traced steps.
struct IngestedTrace {
  std::string path;
  std::string model;
  std::string backend;  // trace::Trace::backend()
  int64_t model_id = 0;
  int64_t provenance_id = 0;
  int64_t ops = 0;         // op occurrences
  int64_t unique_ops = 0;  // distinct op signatures of this trace
  int64_t new_ops = 0;     // of those, not in the store before (earlier traces of the same ingest included)
  int64_t shared_ops() const noexcept { return unique_ops - new_ops; }
};

struct IngestSummary {
  std::vector<IngestedTrace> traces;  // in the order given
  int64_t total_ops = 0;              // op occurrences over all traces
  int64_t unique_ops = 0;             // distinct op signatures over all traces
  int64_t unique_modules = 0;         // distinct module representatives over all traces
  int64_t new_modules = 0;            // of those, not in the store before
};

// The profiling context a trace was taken under. `extra_json` holds the torch version and the trace format
// ({"torch":..., "trace_format":N}), so traces of two formats never share a provenance row.
Provenance provenance_of(const trace::Trace& trace);

// Reads and checks every trace first (a bad one is an InputError naming it, before anything is written), then
// writes them all in one transaction: either every trace is stored or none. A re-ingested model replaces its
// occurrence rows under that provenance. Refuses (ConflictError, nothing written) a trace whose context the
// store already holds traces of another trace format for: their signatures hash differently and would be
// profiled twice.
IngestSummary ingest_traces(Store& store, std::span<const std::string> trace_paths);
// The same into the store at `db_path`, which is opened (created if missing) only once every trace has been read
// and checked: a bad trace leaves no new file behind.
IngestSummary ingest_traces(const std::string& db_path, std::span<const std::string> trace_paths);

}  // namespace dooly::store
