#pragma once
// The store's schema history. The file's version lives in `PRAGMA user_version`; a dooly store is marked by
// `PRAGMA application_id`. A migration is applied once, in order, inside one write transaction, and is never
// edited after release: change the schema by appending a migration (docs/store.md lists them).
#include <cstdint>
#include <span>
#include <string_view>

namespace dooly::store {

class Database;

// "dool" in ASCII, so `sqlite3 FILE 'PRAGMA application_id'` identifies a dooly store.
inline constexpr int64_t application_id = 0x646f6f6c;

struct Migration {
  int to_version;            // the file's user_version once the script has run
  std::string_view summary;  // one line for logs and docs
  std::string_view script;   // DDL only; runs with foreign keys off, checked with foreign_key_check after
};

// Every migration, oldest first; migrations()[i].to_version == i + 1.
std::span<const Migration> migrations() noexcept;
int current_schema_version() noexcept;

// Read-write: checks the file is empty or a dooly store no newer than this code, and applies the missing
// migrations. Read-only: checks it is a dooly store at exactly the current version. Leaves foreign keys on.
// Returns the version the file had before (0 for a new file; taken under the write lock when migrating). Throws
// StoreError naming versions and the fix.
int bring_schema_up_to_date(Database& db);

}  // namespace dooly::store
