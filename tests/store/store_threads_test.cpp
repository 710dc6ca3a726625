// Concurrency: WAL readers on their own connections while one writer commits; two writers; racing creators.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dooly/store/store.hpp"
#include "store_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using testing::TempDir;

constexpr int per_transaction = 10;  // measurements written with each signature, in one transaction

using testing::hex;

Measurement point(int64_t signature_id, int64_t provenance_id, int64_t tokens) {
  Measurement m;
  m.signature_id = signature_id;
  m.provenance_id = provenance_id;
  m.num_tokens = tokens;
  m.repetitions = 10;
  m.latency_mean_s = m.latency_median_s = m.latency_min_s = m.latency_max_s = 1e-3;
  m.energy_j = 0.5;
  return m;
}

// One transaction: a new signature, its occurrence and `per_transaction` measurements of it.
void write_batch(Store& store, int64_t model, int64_t provenance, int n) {
  auto tx = store.transaction();
  const auto sig =
      store.upsert_signature(hex(n), fmt::format("op{}", n), SignatureKind::op, fmt::format("{{\"n\":{}}}", n));
  store.add_occurrences(model, provenance, sig.id, Phase::prefill, 1);
  for (int i = 0; i < per_transaction; ++i) store.insert_measurement(point(sig.id, provenance, i + 1));
  tx.commit();
}

TEST(StoreThreads, ReadersNeverSeeAPartialTransaction) {
  TempDir dir;
  const std::string path = dir.file("shared.sqlite");
  Store writer = Store::open(path);
  const int64_t model = writer.upsert_model({0, "m", "llama", "LlamaForCausalLM", "c"});
  Provenance p;
  p.gpu_name = "test";
  const int64_t provenance = writer.upsert_provenance(p);

  constexpr int batches = 150;
  constexpr int reader_count = 3;
  std::atomic<bool> done{false};
  std::atomic<int> readers_ready{0};
  std::vector<std::string> failures(reader_count);
  std::vector<int64_t> reads(reader_count, 0);
  std::atomic<int64_t> overlapping{0};  // reads that saw some but not all batches

  std::vector<std::thread> readers;
  for (int r = 0; r < reader_count; ++r) {
    readers.emplace_back([&, r] {
      try {
        Store reader = Store::open(path, Store::Mode::read_only);
        readers_ready.fetch_add(1);
        Summary last;
        bool finished = false;
        while (!finished) {
          finished = done.load();  // one more full read after the writer is done
          const Summary s = reader.summary();
          ++reads[r];
          if (s.measurements != per_transaction * s.signatures || s.occurrence_rows != s.signatures ||
              s.occurrences != s.signatures)
            failures[r] = fmt::format("partial transaction seen: {} signatures, {} occurrences, {} measurements",
                                      s.signatures, s.occurrence_rows, s.measurements);
          if (s.signatures < last.signatures || s.measurements < last.measurements)
            failures[r] = fmt::format("counts went back: {} -> {} signatures", last.signatures, s.signatures);
          if (s.signatures > 0 && s.signatures < batches) overlapping.fetch_add(1);
          if (s.signatures > 0) {  // the newest signature always has all its measurements
            const auto sig = reader.find_signature(hex(static_cast<int>(s.signatures)));
            if (!sig || reader.measurements_for(sig->id, provenance).size() != per_transaction)
              failures[r] = fmt::format("signature {} incomplete", s.signatures);
          }
          if (!failures[r].empty()) return;
          last = s;
        }
        if (last.signatures != batches) failures[r] = fmt::format("final read saw {} signatures", last.signatures);
      } catch (const std::exception& e) {
        failures[r] = e.what();
        readers_ready.fetch_add(1);
      }
    });
  }
  while (readers_ready.load() < reader_count) std::this_thread::yield();
  for (int n = 1; n <= batches; ++n) {
    write_batch(writer, model, provenance, n);
    if (n == batches / 2) {  // make sure reads really overlap the writes, however the threads are scheduled
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (overlapping.load() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }
  }
  done.store(true);
  for (auto& t : readers) t.join();

  for (int r = 0; r < reader_count; ++r) {
    EXPECT_EQ(failures[r], "") << "reader " << r;
    EXPECT_GT(reads[r], 1) << "reader " << r;
  }
  EXPECT_GT(overlapping.load(), 0) << "no reader ran while the writer was writing; the test proved nothing";
  const Summary final = writer.summary();
  EXPECT_EQ(final.signatures, batches);
  EXPECT_EQ(final.measurements, batches * per_transaction);
}

TEST(StoreThreads, TwoWritersTakeTurnsThroughTheBusyTimeout) {
  TempDir dir;
  const std::string path = dir.file("two.sqlite");
  int64_t model = 0, provenance = 0;
  {
    Store setup = Store::open(path);
    model = setup.upsert_model({0, "m", "llama", "LlamaForCausalLM", "c"});
    provenance = setup.upsert_provenance(Provenance{});
  }
  constexpr int per_writer = 60;
  std::vector<std::string> failures(2);
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      try {
        Store store = Store::open(path);
        for (int i = 0; i < per_writer; ++i) write_batch(store, model, provenance, 1 + w * per_writer + i);
      } catch (const std::exception& e) {
        failures[w] = e.what();
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  const Summary s = Store::open(path, Store::Mode::read_only).summary();
  EXPECT_EQ(s.signatures, 2 * per_writer);
  EXPECT_EQ(s.measurements, 2 * per_writer * per_transaction);
}

TEST(StoreThreads, ConcurrentFirstOpensMigrateOnce) {
  TempDir dir;
  const std::string path = dir.file("race.sqlite");
  constexpr int openers = 4;
  std::vector<std::string> failures(openers);
  std::vector<int> found(openers, -1);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < openers; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      try {
        found[i] = Store::open(path).schema_version_at_open();
      } catch (const std::exception& e) {
        failures[i] = e.what();
      }
    });
  }
  go.store(true);
  for (auto& t : threads) t.join();
  for (int i = 0; i < openers; ++i) EXPECT_EQ(failures[i], "") << "opener " << i;
  EXPECT_EQ(std::count(found.begin(), found.end(), 0), 1) << "exactly one opener creates the schema";
  EXPECT_EQ(std::count(found.begin(), found.end(), 5), openers - 1);
  Store store = Store::open(path, Store::Mode::read_only);
  EXPECT_EQ(store.database().query_int64("PRAGMA user_version"), 5);
  EXPECT_EQ(store.database().query_int64("SELECT count(*) FROM sqlite_schema WHERE type = 'table'"), 7);
}

}  // namespace
}  // namespace dooly::store
