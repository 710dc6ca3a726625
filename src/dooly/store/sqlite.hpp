#pragma once
// A small RAII layer over the sqlite3 C API: a connection, a prepared statement, a transaction.
// Every SQLite failure becomes a StoreError here (the sqlite message, the file, a fix sentence); nothing
// above this file sees a raw result code. Values are only ever bound, never formatted into SQL.
//
// A Database (and every Statement made from it) belongs to one thread at a time; concurrency comes from
// separate connections to the same file (WAL: many readers, one writer).
#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "dooly/store/store_error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace dooly::store {

enum class OpenMode { read_write, read_only };

// Throws the StoreError for result code `rc` (extended), naming what was being done.
[[noreturn]] void throw_sqlite_error(sqlite3* db, const std::string& path, int rc, std::string_view doing);

// The fix sentence for a result code (exposed for tests).
std::string_view sqlite_fix(int rc) noexcept;

// True when the error is SQLITE_BUSY (another connection held a lock past the busy timeout, or a lock change
// SQLite refuses to wait for, such as switching the journal mode while another connection does the same).
bool is_busy(const StoreError& error) noexcept;

class Statement;

template <typename T>
inline constexpr bool is_optional = false;
template <typename T>
inline constexpr bool is_optional<std::optional<T>> = true;

class Database {
 public:
  // read_write creates the file if missing. busy_timeout bounds how long a writer waits for another.
  Database(const std::string& path, OpenMode mode, std::chrono::milliseconds busy_timeout);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs every statement of a script (DDL, pragmas) in turn; rows they return are ignored.
  void execute(std::string_view script);
  Statement prepare(std::string_view sql);
  // The first column of the first row of a statement without parameters (PRAGMA user_version, count(*)).
  int64_t query_int64(std::string_view sql);
  std::string query_text(std::string_view sql);

  int64_t last_insert_rowid() const noexcept;
  int64_t changes() const noexcept;
  bool in_transaction() const noexcept;
  OpenMode mode() const noexcept { return mode_; }
  const std::string& path() const noexcept { return path_; }
  sqlite3* handle() const noexcept { return db_; }

 private:
  friend class Transaction;
  sqlite3* db_ = nullptr;
  std::string path_;
  OpenMode mode_;
};

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based (SQLite's convention) or named (":name" as written in the SQL).
  template <typename T>
  Statement& bind(int index, const T& value) {
    using V = std::remove_cvref_t<T>;
    if constexpr (std::is_same_v<V, std::nullptr_t> || std::is_same_v<V, std::nullopt_t>) {
      bind_null(index);
    } else if constexpr (is_optional<V>) {
      if (value.has_value())
        bind(index, *value);
      else
        bind_null(index);
    } else if constexpr (std::is_integral_v<V>) {
      bind_int64(index, static_cast<int64_t>(value));
    } else if constexpr (std::is_floating_point_v<V>) {
      bind_double(index, static_cast<double>(value));
    } else {
      static_assert(std::is_convertible_v<const T&, std::string_view>, "bind: unsupported type");
      bind_text(index, std::string_view(value));
    }
    return *this;
  }
  template <typename T>
  Statement& bind(std::string_view name, const T& value) {
    return bind(parameter_index(name), value);
  }

  // true: a row is ready; false: the statement is done. Throws StoreError on failure.
  bool step();
  // Steps a statement that returns no rows (INSERT/UPDATE/DELETE/DDL); throws if it returns one.
  void run();
  // Ready to run again with new values: resets and clears every binding.
  void reset() noexcept;

  bool column_is_null(int index) const noexcept;  // 0-based, like sqlite3_column_*
  int64_t column_int64(int index) const noexcept;
  double column_double(int index) const noexcept;
  std::string column_text(int index) const;
  std::optional<double> column_optional_double(int index) const noexcept;
  int column_count() const noexcept;
  const std::string& sql() const noexcept { return sql_; }

 private:
  int parameter_index(std::string_view name) const;
  void bind_null(int index);
  void bind_int64(int index, int64_t value);
  void bind_double(int index, double value);
  void bind_text(int index, std::string_view value);
  void check_bind(int rc, int index);

  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE at the outermost level (takes the write lock up front, so the busy timeout applies and a
// read never has to be upgraded under contention), a SAVEPOINT when nested. Not committed -> rolled back.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();
  bool nested() const noexcept { return nested_; }

 private:
  Database& db_;
  bool nested_;
  bool done_ = false;
};

}  // namespace dooly::store
