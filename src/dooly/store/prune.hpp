#pragma once
// Pruning a store: the measurement contexts a later context supersedes (other inputs, another grid) leave the
// shipped store, with everything measured, resolved and fitted under them.
//
//   Store s = Store::open("data/profile/h200.sqlite");
//   const PruneSummary p = prune_contexts(s, {3, 7});   // one transaction: all of it or nothing
//   vacuum(s);                                          // then give the pages back to the file system
#include <cstdint>
#include <span>

#include "dooly/store/store.hpp"

namespace dooly::store {

struct PruneSummary {
  int64_t contexts = 0;  // provenance rows removed
  int64_t measurements = 0;
  int64_t resolutions = 0;
  int64_t predictors = 0;
};

// Removes the provenance rows `ids` and the measurements, resolutions and predictors under them, in one
// transaction (a savepoint when one is open). Checks every id before the first write: an id the store lacks, or
// one that traced models hold occurrences under (a trace context, which the signatures need), is an InputError
// naming it, and nothing is removed.
PruneSummary prune_contexts(Store& store, std::span<const int64_t> ids);

// Rebuilds the file without its free pages (SQLite's VACUUM; not inside a transaction). Returns the bytes saved.
int64_t vacuum(Store& store);

}  // namespace dooly::store
