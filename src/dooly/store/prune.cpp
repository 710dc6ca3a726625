#include "dooly/store/prune.hpp"

#include <map>
#include <set>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/store/sqlite.hpp"

namespace dooly::store {

namespace {

int64_t remove(Database& db, const char* table, const char* column, int64_t id) {
  auto st = db.prepare(fmt::format("DELETE FROM {} WHERE {} = ?1", table, column));
  st.bind(1, id);
  st.step();
  return db.changes();
}

int64_t file_bytes(Database& db) { return db.query_int64("PRAGMA page_count") * db.query_int64("PRAGMA page_size"); }

}  // namespace

PruneSummary prune_contexts(Store& store, std::span<const int64_t> ids) {
  std::map<int64_t, int64_t> occurrence_rows;  // by provenance id
  for (const ProvenanceUse& u : store.provenance_uses()) occurrence_rows[u.provenance.id] = u.occurrence_rows;
  for (const int64_t id : ids) {
    const auto it = occurrence_rows.find(id);
    if (it == occurrence_rows.end())
      DOOLY_THROW(InputError, "list the measurement contexts `dooly store info` shows", "store {} has no provenance {}",
                  store.path(), id);
    if (it->second > 0)
      DOOLY_THROW(InputError, "prune only measurement contexts (those without traced models)",
                  "provenance {} of store {} is a trace context: {} occurrence rows of traced models use it", id,
                  store.path(), it->second);
  }
  Database& db = store.database();
  PruneSummary s;
  auto tx = store.transaction();
  for (const int64_t id : std::set<int64_t>(ids.begin(), ids.end())) {
    s.measurements += remove(db, "measurements", "provenance_id", id);
    s.resolutions += remove(db, "resolutions", "provenance_id", id);
    s.predictors += remove(db, "predictors", "provenance_id", id);
    s.contexts += remove(db, "provenance", "id", id);
  }
  tx.commit();
  return s;
}

int64_t vacuum(Store& store) {
  Database& db = store.database();
  if (db.in_transaction())
    DOOLY_THROW(InputError, "vacuum after the transaction ends", "cannot vacuum store {} inside a transaction",
                store.path());
  const int64_t before = file_bytes(db);
  db.execute("VACUUM");
  return before - file_bytes(db);
}

}  // namespace dooly::store
