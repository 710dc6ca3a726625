#include "dooly/store/sqlite.hpp"

#include <sqlite3.h>

#include "dooly/common/log.hpp"

namespace dooly::store {

std::string_view sqlite_fix(int rc) noexcept {
  switch (rc & 0xff) {
    case SQLITE_CANTOPEN:
      return "check that the directory exists and is writable by this user, and for a read-only open that the "
             "file exists (read-only never creates it)";
    case SQLITE_NOTADB:
      return "the file is not a SQLite database: point --db at another path or move this file away";
    case SQLITE_CORRUPT:
      return "the database file is damaged: restore it from a copy, or salvage it with `sqlite3 FILE .recover`";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "another connection held the write lock longer than the busy timeout: only one writer per file "
             "at a time; let the other process finish and retry";
    case SQLITE_READONLY:
      return "open the store read-write, and check that the file and its directory are writable (WAL mode "
             "needs to create FILE-wal and FILE-shm next to it)";
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return "check the file's permissions";
    case SQLITE_FULL:
      return "the disk is full: free space and retry";
    case SQLITE_IOERR:
      return "check the disk and the filesystem (network filesystems do not support WAL's shared memory; "
             "keep the database on a local disk)";
    case SQLITE_CONSTRAINT:
      return "a value broke a rule of the schema; this is a bug in the caller: report it with this message";
    case SQLITE_NOMEM:
      return "the process ran out of memory";
    default:
      return "this is a dooly bug or an unexpected SQLite state: report it with this message and the file";
  }
}

bool is_busy(const StoreError& error) noexcept { return (error.sqlite_code() & 0xff) == SQLITE_BUSY; }

void throw_sqlite_error(sqlite3* db, const std::string& path, int rc, std::string_view doing) {
  // sqlite3_errmsg describes the most recent failure on this connection; without a handle, the code's text.
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw StoreError(path, rc, fmt::format("{}: {} (sqlite code {}: {})", doing, message, rc, sqlite3_errstr(rc)),
                   std::string(sqlite_fix(rc)));
}

// ---------------------------------------------------------------------------------------------------- Database

Database::Database(const std::string& path, OpenMode mode, std::chrono::milliseconds busy_timeout)
    : path_(path), mode_(mode) {
  const int flags = (mode == OpenMode::read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_EXRESCODE;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw StoreError(path, rc,
                     fmt::format("cannot open ({}): {} (sqlite code {})",
                                 mode == OpenMode::read_only ? "read-only" : "read-write", message, rc),
                     std::string(sqlite_fix(rc)));
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, static_cast<int>(busy_timeout.count()));
}

Database::~Database() {
  // close_v2 defers the close until every statement is finalized; statements never outlive us in practice.
  if (db_ != nullptr && sqlite3_close_v2(db_) != SQLITE_OK)
    log::warn("store {}: close failed: {}", path_, sqlite3_errmsg(db_));
}

void Database::execute(std::string_view script) {
  const char* tail = script.data();
  const char* const end = script.data() + script.size();
  while (tail < end) {
    sqlite3_stmt* stmt = nullptr;
    const char* next = nullptr;
    const int rc = sqlite3_prepare_v2(db_, tail, static_cast<int>(end - tail), &stmt, &next);
    if (rc != SQLITE_OK)
      throw_sqlite_error(db_, path_, rc, fmt::format("preparing `{}`", std::string_view(tail, end - tail)));
    if (stmt == nullptr) break;  // only whitespace or comments were left
    int step_rc;
    while ((step_rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
    if (step_rc != SQLITE_DONE) {
      const std::string sql = sqlite3_sql(stmt);
      // Keep the step's message: errmsg is read before finalize can overwrite it.
      try {
        throw_sqlite_error(db_, path_, step_rc, fmt::format("running `{}`", sql));
      } catch (...) {
        sqlite3_finalize(stmt);
        throw;
      }
    }
    sqlite3_finalize(stmt);
    tail = next;
  }
}

Statement Database::prepare(std::string_view sql) { return Statement(*this, sql); }

int64_t Database::query_int64(std::string_view sql) {
  Statement stmt(*this, sql);
  if (!stmt.step()) throw StoreError(path_, 0, fmt::format("`{}` returned no row", sql), std::string(sqlite_fix(0)));
  return stmt.column_int64(0);
}

std::string Database::query_text(std::string_view sql) {
  Statement stmt(*this, sql);
  if (!stmt.step()) throw StoreError(path_, 0, fmt::format("`{}` returned no row", sql), std::string(sqlite_fix(0)));
  return stmt.column_text(0);
}

int64_t Database::last_insert_rowid() const noexcept { return sqlite3_last_insert_rowid(db_); }
int64_t Database::changes() const noexcept { return sqlite3_changes64(db_); }
bool Database::in_transaction() const noexcept { return sqlite3_get_autocommit(db_) == 0; }

// --------------------------------------------------------------------------------------------------- Statement

Statement::Statement(Database& db, std::string_view sql) : db_(&db), sql_(sql) {
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db.handle(), sql_.data(), static_cast<int>(sql_.size()), &stmt_, &tail);
  if (rc != SQLITE_OK) throw_sqlite_error(db.handle(), db.path(), rc, fmt::format("preparing `{}`", sql_));
  if (stmt_ == nullptr ||
      (tail != nullptr && std::string_view(tail).find_first_not_of(" \t\r\n;") != std::string_view::npos)) {
    sqlite3_finalize(stmt_);
    throw StoreError(db.path(), SQLITE_MISUSE, fmt::format("`{}` must be exactly one SQL statement", sql_),
                     std::string(sqlite_fix(SQLITE_MISUSE)));
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}

int Statement::parameter_index(std::string_view name) const {
  const int index = sqlite3_bind_parameter_index(stmt_, std::string(name).c_str());
  if (index == 0)
    throw StoreError(db_->path(), SQLITE_RANGE, fmt::format("no parameter `{}` in `{}`", name, sql_),
                     std::string(sqlite_fix(SQLITE_RANGE)));
  return index;
}

void Statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK)
    throw_sqlite_error(db_->handle(), db_->path(), rc, fmt::format("binding parameter {} of `{}`", index, sql_));
}

void Statement::bind_null(int index) { check_bind(sqlite3_bind_null(stmt_, index), index); }
void Statement::bind_int64(int index, int64_t value) { check_bind(sqlite3_bind_int64(stmt_, index, value), index); }
void Statement::bind_double(int index, double value) { check_bind(sqlite3_bind_double(stmt_, index, value), index); }
void Statement::bind_text(int index, std::string_view value) {
  check_bind(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8), index);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  try {
    throw_sqlite_error(db_->handle(), db_->path(), rc, fmt::format("running `{}`", sql_));
  } catch (...) {
    sqlite3_reset(stmt_);  // a failed statement must not keep its read snapshot open
    throw;
  }
}

void Statement::run() {
  if (step()) {
    sqlite3_reset(stmt_);
    throw StoreError(db_->path(), SQLITE_MISUSE, fmt::format("`{}` returned a row where none was expected", sql_),
                     std::string(sqlite_fix(SQLITE_MISUSE)));
  }
  sqlite3_reset(stmt_);
}

void Statement::reset() noexcept {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::column_is_null(int index) const noexcept { return sqlite3_column_type(stmt_, index) == SQLITE_NULL; }
int64_t Statement::column_int64(int index) const noexcept { return sqlite3_column_int64(stmt_, index); }
double Statement::column_double(int index) const noexcept { return sqlite3_column_double(stmt_, index); }
std::string Statement::column_text(int index) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
}
std::optional<double> Statement::column_optional_double(int index) const noexcept {
  if (column_is_null(index)) return std::nullopt;
  return column_double(index);
}
int Statement::column_count() const noexcept { return sqlite3_column_count(stmt_); }

// ------------------------------------------------------------------------------------------------- Transaction

Transaction::Transaction(Database& db) : db_(db), nested_(db.in_transaction()) {
  db_.execute(nested_ ? "SAVEPOINT dooly_nested" : "BEGIN IMMEDIATE");
}

void Transaction::commit() {
  if (done_) return;
  db_.execute(nested_ ? "RELEASE dooly_nested" : "COMMIT");
  done_ = true;
}

Transaction::~Transaction() {
  if (done_) return;
  // Some errors (SQLITE_FULL, IOERR, BUSY in COMMIT) roll the transaction back on their own; then there is
  // nothing left to undo. Only undo what is still open, and never throw from here.
  if (!nested_ && !db_.in_transaction()) return;
  try {
    db_.execute(nested_ ? "ROLLBACK TO dooly_nested; RELEASE dooly_nested" : "ROLLBACK");
  } catch (const std::exception& e) {
    log::warn("store {}: rollback failed: {}", db_.path(), e.what());
  }
}

}  // namespace dooly::store
