// The RAII layer over sqlite3: binding, stepping, columns, transactions and error translation.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include "dooly/store/sqlite.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using testing::TempDir;
using namespace std::chrono_literals;

class SqliteTest : public ::testing::Test {
 protected:
  SqliteTest() : db(dir.file("t.sqlite"), OpenMode::read_write, 1000ms) {
    db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, n INTEGER) STRICT; CREATE TABLE u (k INTEGER PRIMARY KEY)");
  }
  int64_t count(std::string_view table) { return db.query_int64(fmt::format("SELECT count(*) FROM {}", table)); }
  TempDir dir;
  Database db;
};

TEST_F(SqliteTest, BindsAndReadsEveryType) {
  Statement insert = db.prepare("INSERT INTO t (i, r, s, n) VALUES (?, ?, ?, ?)");
  insert.bind(1, int64_t{-9007199254740993}).bind(2, 0.125).bind(3, std::string("a'b\"c;")).bind(4, nullptr).run();
  insert.reset();
  insert.bind(1, true).bind(2, std::optional<double>{}).bind(3, "x").bind(4, std::optional<int>{7}).run();

  Statement select = db.prepare("SELECT i, r, s, n FROM t ORDER BY rowid");
  ASSERT_TRUE(select.step());
  EXPECT_EQ(select.column_count(), 4);
  EXPECT_EQ(select.column_int64(0), -9007199254740993);
  EXPECT_EQ(select.column_double(1), 0.125);
  EXPECT_EQ(select.column_text(2), "a'b\"c;");  // bound, never spliced into SQL
  EXPECT_TRUE(select.column_is_null(3));
  ASSERT_TRUE(select.step());
  EXPECT_EQ(select.column_int64(0), 1);
  EXPECT_EQ(select.column_optional_double(1), std::nullopt);
  EXPECT_EQ(select.column_text(2), "x");
  EXPECT_EQ(select.column_int64(3), 7);
  EXPECT_FALSE(select.step());
}

TEST_F(SqliteTest, NamedParameters) {
  Statement insert = db.prepare("INSERT INTO t (i, s) VALUES (:i, :s)");
  insert.bind(":s", "named").bind(":i", 42).run();
  EXPECT_EQ(db.query_text("SELECT s FROM t WHERE i = 42"), "named");
  try {
    insert.bind(":missing", 1);
    FAIL() << "an unknown parameter name must throw";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_RANGE);
    EXPECT_NE(std::string(e.what()).find("no parameter `:missing`"), std::string::npos) << e.what();
  }
}

TEST_F(SqliteTest, SyntaxErrorCarriesMessageFileAndFix) {
  try {
    db.prepare("SELEC 1");
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_ERROR);
    EXPECT_EQ(e.path(), dir.file("t.sqlite"));
    const std::string what = e.what();
    EXPECT_NE(what.find("syntax error"), std::string::npos) << what;
    EXPECT_NE(what.find(dir.file("t.sqlite")), std::string::npos) << what;
    EXPECT_NE(e.fix().find("report it"), std::string::npos) << e.fix();
  }
}

TEST_F(SqliteTest, OneStatementPerPrepare) {
  EXPECT_THROW(db.prepare("SELECT 1; SELECT 2"), StoreError);
  EXPECT_NO_THROW(db.prepare("SELECT 1;  "));
}

TEST_F(SqliteTest, RunRejectsARowReturningStatement) {
  Statement select = db.prepare("SELECT 1");
  EXPECT_THROW(select.run(), StoreError);
}

TEST_F(SqliteTest, ConstraintViolationIsTranslated) {
  db.execute("INSERT INTO u (k) VALUES (1)");
  Statement insert = db.prepare("INSERT INTO u (k) VALUES (1)");
  try {
    insert.run();
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_CONSTRAINT_PRIMARYKEY);
    EXPECT_NE(std::string(e.what()).find("UNIQUE constraint failed: u.k"), std::string::npos) << e.what();
  }
}

TEST_F(SqliteTest, UncommittedTransactionRollsBack) {
  {
    Transaction tx(db);
    EXPECT_FALSE(tx.nested());
    EXPECT_TRUE(db.in_transaction());
    db.execute("INSERT INTO u (k) VALUES (1)");
  }
  EXPECT_FALSE(db.in_transaction());
  EXPECT_EQ(count("u"), 0);
  {
    Transaction tx(db);
    db.execute("INSERT INTO u (k) VALUES (2)");
    tx.commit();
  }
  EXPECT_EQ(count("u"), 1);
}

TEST_F(SqliteTest, NestedTransactionIsASavepoint) {
  Transaction outer(db);
  db.execute("INSERT INTO u (k) VALUES (1)");
  {
    Transaction inner(db);
    EXPECT_TRUE(inner.nested());
    db.execute("INSERT INTO u (k) VALUES (2)");
  }  // inner rolled back only
  EXPECT_EQ(count("u"), 1);
  {
    Transaction inner(db);
    db.execute("INSERT INTO u (k) VALUES (3)");
    inner.commit();
  }
  EXPECT_TRUE(db.in_transaction());
  outer.commit();
  EXPECT_EQ(db.query_int64("SELECT sum(k) FROM u"), 4);
}

TEST_F(SqliteTest, ExceptionInsideTransactionLeavesNothing) {
  try {
    Transaction tx(db);
    db.execute("INSERT INTO u (k) VALUES (5)");
    db.execute("INSERT INTO u (k) VALUES (5)");
    tx.commit();
  } catch (const StoreError&) {
  }
  EXPECT_FALSE(db.in_transaction());
  EXPECT_EQ(count("u"), 0);
}

TEST(SqliteFix, EveryCommonFailureHasItsOwnSentence) {
  EXPECT_NE(sqlite_fix(SQLITE_CANTOPEN).find("directory exists"), std::string_view::npos);
  EXPECT_NE(sqlite_fix(SQLITE_NOTADB).find("not a SQLite database"), std::string_view::npos);
  EXPECT_NE(sqlite_fix(SQLITE_CORRUPT).find(".recover"), std::string_view::npos);
  EXPECT_NE(sqlite_fix(SQLITE_BUSY_SNAPSHOT).find("one writer"), std::string_view::npos);  // extended -> primary
  EXPECT_NE(sqlite_fix(SQLITE_READONLY).find("read-write"), std::string_view::npos);
}

}  // namespace
}  // namespace dooly::store
