#pragma once
// Errors from the SQLite store. SQLite result codes are translated once, in sqlite.cpp, into these;
// each keeps the extended result code, the database file and a sentence that says what to do.
#include <string>
#include <utility>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::store {

class StoreError : public Error {
 public:
  // sqlite_code is the extended result code (0 when the problem is dooly's own, e.g. a schema version).
  StoreError(std::string path, int sqlite_code, std::string what, std::string fix)
      : Error(fmt::format("store {}: {}", path, what), std::move(fix)),
        path_(std::move(path)),
        sqlite_code_(sqlite_code) {}
  const std::string& path() const noexcept { return path_; }
  int sqlite_code() const noexcept { return sqlite_code_; }

 private:
  std::string path_;
  int sqlite_code_;
};

// One identity (a signature hash, a model name + config hash) arrived with different content than the row
// already stored under it: a hash collision or a serialization bug upstream. Never resolved silently.
class ConflictError : public StoreError {
 public:
  using StoreError::StoreError;
};

}  // namespace dooly::store
