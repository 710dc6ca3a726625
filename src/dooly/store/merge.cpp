#include "dooly/store/merge.hpp"

#include <array>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::store {
namespace {

// Row ids of `from` -> row ids of `into`.
using IdMap = std::unordered_map<int64_t, int64_t>;

std::string shorten(const std::string& text, size_t max = 120) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

// The merge proper: `from` is read through its own connection (one snapshot), `into` is written row by row with
// statements prepared once. Every method throws; the caller's transaction undoes what was written.
class Merger {
 public:
  Merger(Database& into, Database& from, MergeSummary& summary) : into_(into), from_(from), s_(summary) {}

  void run() {
    signatures();
    models();
    provenances();
    occurrences();
    measurements();
    resolutions();
  }

 private:
  [[noreturn]] void conflict(const std::string& what, const std::string& fix) const {
    throw ConflictError(into_.path(), 0, fmt::format("merging {}: {}", from_.path(), what), fix);
  }

  int64_t mapped(const IdMap& map, int64_t id, std::string_view table) const {
    const auto it = map.find(id);
    if (it == map.end())
      throw StoreError(from_.path(), 0,
                       fmt::format("a row refers to {} id {}, which the file does not hold", table, id),
                       "the file was changed outside dooly; check it with `sqlite3 FILE 'PRAGMA foreign_key_check'`");
    return it->second;
  }

  void signatures() {
    Statement read = from_.prepare(
        "SELECT id, hash, name, kind, canonical_json, metadata_json, created_at_unix_s FROM signatures ORDER BY id");
    Statement find = into_.prepare("SELECT id, name, kind, canonical_json FROM signatures WHERE hash = ?");
    Statement insert = into_.prepare(
        "INSERT INTO signatures (hash, name, kind, canonical_json, metadata_json, created_at_unix_s) "
        "VALUES (?, ?, ?, ?, ?, ?)");
    while (read.step()) {
      const std::string hash = read.column_text(1), name = read.column_text(2), kind = read.column_text(3);
      const std::string canonical = read.column_text(4);
      find.reset();
      find.bind(1, hash);
      if (find.step()) {
        if (find.column_text(1) != name || find.column_text(2) != kind)
          conflict(fmt::format("signature {} is {} '{}' there and {} '{}' here", hash, kind, name, find.column_text(2),
                               find.column_text(1)),
                   "the two files hash the same work differently: merge only stores written by one dooly release");
        if (find.column_text(3) != canonical)
          conflict(fmt::format("signature {} ({}) has a different canonical form there ('{}') than here ('{}')", hash,
                               name, shorten(canonical), shorten(find.column_text(3))),
                   "the files come from signers that serialize differently (a changed format or a bug): merge only "
                   "stores written by one dooly release, or re-trace into one store");
        ids_[read.column_int64(0)] = find.column_int64(0);
        ++s_.signatures.skipped;
        continue;
      }
      insert.reset();
      insert.bind(1, hash).bind(2, name).bind(3, kind).bind(4, canonical).bind(5, read.column_text(5));
      insert.bind(6, read.column_int64(6)).run();
      ids_[read.column_int64(0)] = into_.last_insert_rowid();
      ++s_.signatures.added;
    }
  }

  void models() {
    Statement read = from_.prepare("SELECT id, name, family, architecture, config_hash FROM models ORDER BY id");
    Statement find = into_.prepare("SELECT id, family, architecture FROM models WHERE name = ? AND config_hash = ?");
    Statement insert =
        into_.prepare("INSERT INTO models (name, family, architecture, config_hash) VALUES (?, ?, ?, ?)");
    while (read.step()) {
      const std::string name = read.column_text(1), family = read.column_text(2);
      const std::string architecture = read.column_text(3), config_hash = read.column_text(4);
      find.reset();
      find.bind(1, name).bind(2, config_hash);
      if (find.step()) {
        if (find.column_text(1) != family || find.column_text(2) != architecture)
          conflict(fmt::format("model '{}' (config {}) is {}/{} there and {}/{} here", name, config_hash, family,
                               architecture, find.column_text(1), find.column_text(2)),
                   "one config must always map to one family and architecture: fix the model loader that wrote one "
                   "of the files");
        models_[read.column_int64(0)] = find.column_int64(0);
        ++s_.models.skipped;
        continue;
      }
      insert.reset();
      insert.bind(1, name).bind(2, family).bind(3, architecture).bind(4, config_hash).run();
      models_[read.column_int64(0)] = into_.last_insert_rowid();
      ++s_.models.added;
    }
  }

  void provenances() {
    constexpr std::string_view fields =
        "gpu_name, driver_version, cuda_version, engine, engine_version, attention_backend, dtype, kv_cache_dtype, "
        "block_size, tp, extra_json";
    Statement read = from_.prepare(fmt::format("SELECT id, {} FROM provenance ORDER BY id", fields));
    Statement find = into_.prepare(
        "SELECT id FROM provenance WHERE gpu_name = ?1 AND driver_version = ?2 AND cuda_version = ?3 AND engine = ?4 "
        "AND engine_version = ?5 AND attention_backend = ?6 AND dtype = ?7 AND kv_cache_dtype = ?8 AND "
        "block_size = ?9 AND tp = ?10 AND extra_json = ?11");
    Statement insert = into_.prepare(
        fmt::format("INSERT INTO provenance ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", fields));
    auto bind_identity = [&](Statement& s) {
      for (int i = 1; i <= 11; ++i) {
        if (i == 9 || i == 10)
          s.bind(i, read.column_int64(i));
        else
          s.bind(i, read.column_text(i));
      }
    };
    while (read.step()) {
      find.reset();
      bind_identity(find);
      if (find.step()) {
        provenances_[read.column_int64(0)] = find.column_int64(0);
        ++s_.provenances.skipped;
        continue;
      }
      insert.reset();
      bind_identity(insert);
      insert.run();
      provenances_[read.column_int64(0)] = into_.last_insert_rowid();
      ++s_.provenances.added;
    }
  }

  void occurrences() {
    Statement read = from_.prepare(
        "SELECT ms.model_id, ms.provenance_id, ms.signature_id, ms.phase, ms.count, m.name, s.hash "
        "FROM model_signatures ms LEFT JOIN models m ON m.id = ms.model_id "
        "LEFT JOIN signatures s ON s.id = ms.signature_id ORDER BY 1, 2, 3, 4");
    Statement find = into_.prepare(
        "SELECT count FROM model_signatures WHERE model_id = ? AND provenance_id = ? AND signature_id = ? AND "
        "phase = ?");
    Statement insert = into_.prepare(
        "INSERT INTO model_signatures (model_id, provenance_id, signature_id, phase, count) VALUES (?, ?, ?, ?, ?)");
    while (read.step()) {
      const int64_t model = mapped(models_, read.column_int64(0), "models");
      const int64_t provenance = mapped(provenances_, read.column_int64(1), "provenance");
      const int64_t signature = mapped(ids_, read.column_int64(2), "signatures");
      const std::string phase = read.column_text(3);
      const int64_t count = read.column_int64(4);
      find.reset();
      find.bind(1, model).bind(2, provenance).bind(3, signature).bind(4, phase);
      if (find.step()) {
        if (find.column_int64(0) != count)
          conflict(fmt::format("model '{}' uses signature {} {} times per {} step there and {} times here",
                               read.column_text(5), read.column_text(6), count, phase, find.column_int64(0)),
                   "the two files traced the same model under the same context differently: re-trace it into one "
                   "store, or leave one of the files out");
        ++s_.occurrences.skipped;
        continue;
      }
      insert.reset();
      insert.bind(1, model).bind(2, provenance).bind(3, signature).bind(4, phase).bind(5, count).run();
      ++s_.occurrences.added;
    }
  }

  void measurements() {
    // Rows are history and are appended; one equal to a row `into` held before this merge is the same row
    // merged again. Rows added by this merge are not compared with each other (the shard may hold two).
    const int64_t last_before = into_.query_int64("SELECT coalesce(max(id), 0) FROM measurements");
    constexpr std::string_view copied =
        "point_key, status, reason, num_tokens, num_requests, prefill_chunk, kv_length, batch, is_prefill, "
        "repetitions, latency_mean_s, latency_median_s, latency_min_s, latency_max_s, latency_std_s, energy_j, "
        "energy_hw_j, energy_std_j, avg_power_w, measured_at_unix_s, extra_json";
    using enum Type;
    constexpr std::array<Type, 21> types{
        text, text, text, integer, integer,       integer,       integer,       integer,       integer, integer, real,
        real, real, real, real,    optional_real, optional_real, optional_real, optional_real, integer, text};
    constexpr int n_copied = static_cast<int>(types.size());
    Statement read =
        from_.prepare(fmt::format("SELECT signature_id, provenance_id, {} FROM measurements ORDER BY id", copied));
    Statement find = into_.prepare(
        "SELECT 1 FROM measurements WHERE signature_id = :signature AND provenance_id = :provenance AND "
        "point_key = :point_key AND status = :status AND measured_at_unix_s = :at AND latency_mean_s = :mean AND "
        "id <= :last LIMIT 1");
    std::string values = "?1, ?2";
    for (int i = 0; i < n_copied; ++i) values += fmt::format(", ?{}", i + 3);
    Statement insert = into_.prepare(
        fmt::format("INSERT INTO measurements (signature_id, provenance_id, {}) VALUES ({})", copied, values));
    while (read.step()) {
      const int64_t signature = mapped(ids_, read.column_int64(0), "signatures");
      const int64_t provenance = mapped(provenances_, read.column_int64(1), "provenance");
      find.reset();
      find.bind(":signature", signature).bind(":provenance", provenance);
      find.bind(":point_key", read.column_text(2)).bind(":status", read.column_text(3));
      find.bind(":at", read.column_int64(21)).bind(":mean", read.column_double(12)).bind(":last", last_before);
      if (find.step()) {
        ++s_.measurements.skipped;
        continue;
      }
      insert.reset();
      insert.bind(1, signature).bind(2, provenance);
      for (int i = 0; i < n_copied; ++i) copy_value(read, i + 2, types[static_cast<size_t>(i)], insert, i + 3);
      insert.run();
      ++s_.measurements.added;
    }
  }

  void resolutions() {
    Statement read = from_.prepare(
        "SELECT signature_id, provenance_id, unit_signature_id, level, status, attempts_json, resolved_at_unix_s "
        "FROM resolutions ORDER BY provenance_id, signature_id");
    Statement find =
        into_.prepare("SELECT resolved_at_unix_s FROM resolutions WHERE signature_id = ? AND provenance_id = ?");
    Statement upsert = into_.prepare(
        "INSERT INTO resolutions (signature_id, provenance_id, unit_signature_id, level, status, attempts_json, "
        "resolved_at_unix_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (signature_id, provenance_id) DO UPDATE "
        "SET unit_signature_id = ?3, level = ?4, status = ?5, attempts_json = ?6, resolved_at_unix_s = ?7");
    while (read.step()) {
      const int64_t signature = mapped(ids_, read.column_int64(0), "signatures");
      const int64_t provenance = mapped(provenances_, read.column_int64(1), "provenance");
      std::optional<int64_t> unit;
      if (!read.column_is_null(2)) unit = mapped(ids_, read.column_int64(2), "signatures");
      const int64_t resolved_at = read.column_int64(6);
      find.reset();
      find.bind(1, signature).bind(2, provenance);
      const bool present = find.step();
      if (present && find.column_int64(0) >= resolved_at) {  // a tie keeps what `into` has
        ++s_.resolutions.skipped;
        continue;
      }
      upsert.reset();
      upsert.bind(1, signature).bind(2, provenance).bind(3, unit).bind(4, read.column_int64(3));
      upsert.bind(5, read.column_text(4)).bind(6, read.column_text(5)).bind(7, resolved_at).run();
      ++(present ? s_.resolutions.replaced : s_.resolutions.added);
    }
  }

  // Copies column `column` of `from` into parameter `parameter` of `to` as `type` (the column's declared type).
  enum class Type { integer, real, optional_real, text };
  static void copy_value(const Statement& from, int column, Type type, Statement& to, int parameter) {
    switch (type) {
      case Type::integer:
        to.bind(parameter, from.column_int64(column));
        break;
      case Type::real:
        to.bind(parameter, from.column_double(column));
        break;
      case Type::optional_real:
        to.bind(parameter, from.column_optional_double(column));
        break;
      case Type::text:
        to.bind(parameter, from.column_text(column));
        break;
    }
  }

  Database& into_;
  Database& from_;
  MergeSummary& s_;
  IdMap ids_, models_, provenances_;
};

}  // namespace

MergeSummary merge_store(Store& into, const std::string& from_path) {
  if (same_file(into.path(), from_path) || into.path() == from_path)
    DOOLY_THROW(InputError, "name the store to merge into and the other stores to merge from",
                "cannot merge store {} into itself", from_path);
  // Read-only: the shard is never changed, and an older shard is refused ("open it once read-write").
  Store from = Store::open(from_path, Store::Mode::read_only);
  MergeSummary summary;
  summary.from_path = from_path;
  Database& source = from.database();
  source.execute("BEGIN");  // deferred: one read snapshot of the shard, whatever its writers do meanwhile
  Transaction tx(into.database());
  Merger(into.database(), source, summary).run();
  tx.commit();
  source.execute("COMMIT");
  return summary;
}

}  // namespace dooly::store
