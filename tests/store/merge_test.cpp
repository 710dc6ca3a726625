// merge_store: shards of separate runs become one store; identities are matched, ids remapped, repeats skipped.
#include <filesystem>

#include <gtest/gtest.h>

#include "dooly/store/merge.hpp"
#include "dooly/store/schema.hpp"
#include "dooly/store/store.hpp"
#include "store_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using testing::h200_provenance;
using testing::hex;
using testing::point;
using testing::TempDir;

Provenance h200(std::string kernel = "flash") {
  return h200_provenance(fmt::format(R"({{"sdpa_kernel":"{}"}})", kernel));
}

int64_t add_signature(Store& s, int n, std::string_view metadata = "{}") {
  return s
      .upsert_signature(hex(n), fmt::format("op{}", n), SignatureKind::op, fmt::format(R"({{"op":{}}})", n), metadata)
      .id;
}

// Shard A (GPU 0): llama with signatures 1, 2, 3 (3 a module absorbing 2); two points of 1, an OOM of 2.
std::string shard_a(const TempDir& dir) {
  std::string path = dir.file("a.sqlite");
  Store s = Store::open(path);
  const int64_t llama = s.upsert_model({0, "llama", "llama", "LlamaForCausalLM", "c1"});
  const int64_t gpu = s.upsert_provenance(h200());
  const int64_t s1 = add_signature(s, 1, R"({"kernels":["from-a"]})");
  const int64_t s2 = add_signature(s, 2);
  const int64_t s3 = s.upsert_signature(hex(3), "LlamaMLP", SignatureKind::module, R"({"module":3})").id;
  s.add_occurrences(llama, gpu, s1, Phase::prefill, 7);
  s.add_occurrences(llama, gpu, s2, Phase::decode, 3);
  s.add_occurrences(llama, gpu, s3, Phase::decode, 1);
  s.insert_measurement(point(s1, gpu, 64, 1'790'000'001));
  s.insert_measurement(point(s1, gpu, 128, 1'790'000'002));
  Measurement oom = point(s2, gpu, 4096, 1'790'000'003);
  oom.status = MeasurementStatus::oom;
  oom.reason = "OutOfMemoryError: CUDA out of memory";
  oom.repetitions = 0;
  oom.latency_mean_s = oom.latency_median_s = oom.latency_min_s = oom.latency_max_s = oom.latency_std_s = 0;
  oom.energy_j.reset();
  oom.energy_hw_j.reset();
  s.insert_measurement(oom);
  s.set_resolution({s1, gpu, s1, 0, ResolutionStatus::runs, "[]", 1'790'000'010});
  s.set_resolution({s2, gpu, s3, 1, ResolutionStatus::absorbed,
                    fmt::format(R"([{{"unit":"{}","level":0,"error":"RuntimeError: no KV cache"}}])", hex(2)),
                    1'790'000'010});
  return path;
}

// Shard B (GPU 1): signatures in another order (ids differ from A's), llama again plus qwen, the same context
// and a second one; one of A's points measured again, a newer resolution of signature 2.
std::string shard_b(const TempDir& dir) {
  std::string path = dir.file("b.sqlite");
  Store s = Store::open(path);
  const int64_t other = s.upsert_provenance(h200("math"));
  const int64_t gpu = s.upsert_provenance(h200());
  const int64_t s4 = add_signature(s, 4);
  const int64_t s2 = add_signature(s, 2);
  const int64_t s1 = add_signature(s, 1, R"({"kernels":["from-b"]})");
  const int64_t qwen = s.upsert_model({0, "qwen", "qwen2", "Qwen2ForCausalLM", "c2"});
  const int64_t llama = s.upsert_model({0, "llama", "llama", "LlamaForCausalLM", "c1"});
  s.add_occurrences(llama, gpu, s1, Phase::prefill, 7);  // as in A
  s.add_occurrences(qwen, gpu, s1, Phase::prefill, 5);
  s.add_occurrences(qwen, gpu, s4, Phase::mixed, 2);
  s.add_occurrences(qwen, other, s4, Phase::mixed, 2);
  s.insert_measurement(point(s1, gpu, 256, 1'790'000'020));
  s.insert_measurement(point(s4, other, 64, 1'790'000'021));
  s.set_resolution({s2, gpu, s2, 0, ResolutionStatus::runs, "[]", 1'790'000'030});                  // newer than A's
  s.set_resolution({s1, gpu, std::nullopt, 0, ResolutionStatus::unrunnable, "[]", 1'790'000'005});  // older
  return path;
}

void expect_counts(const MergeCounts& c, int64_t added, int64_t skipped, int64_t replaced = 0) {
  EXPECT_EQ(c.added, added);
  EXPECT_EQ(c.skipped, skipped);
  EXPECT_EQ(c.replaced, replaced);
}

class MergeTest : public ::testing::Test {
 protected:
  MergeTest() : into(Store::open(dir.file("into.sqlite"))) {}
  TempDir dir;
  Store into;
};

TEST_F(MergeTest, TwoShardsWithOverlapBecomeOne) {
  const std::string a = shard_a(dir), b = shard_b(dir);
  const MergeSummary first = merge_store(into, a);
  EXPECT_EQ(first.from_path, a);
  expect_counts(first.signatures, 3, 0);
  expect_counts(first.models, 1, 0);
  expect_counts(first.provenances, 1, 0);
  expect_counts(first.occurrences, 3, 0);
  expect_counts(first.measurements, 3, 0);
  expect_counts(first.resolutions, 2, 0);

  const MergeSummary second = merge_store(into, b);
  expect_counts(second.signatures, 1, 2);  // 4 is new; 1 and 2 were there
  expect_counts(second.models, 1, 1);
  expect_counts(second.provenances, 1, 1);
  expect_counts(second.occurrences, 3, 1);
  expect_counts(second.measurements, 2, 0);
  expect_counts(second.resolutions, 0, 1, 1);

  const Summary s = into.summary();
  EXPECT_EQ(s.signatures, 4);
  EXPECT_EQ(s.models, 2);
  EXPECT_EQ(s.provenances, 2);
  EXPECT_EQ(s.occurrence_rows, 6);
  EXPECT_EQ(s.occurrences, 7 + 3 + 1 + 5 + 2 + 2);
  EXPECT_EQ(s.measurements, 5);
  EXPECT_EQ(s.measurements_by_status[static_cast<size_t>(MeasurementStatus::oom)], 1);
  EXPECT_EQ(s.resolutions, 2);

  // Rows carry over whole, under `into`'s ids.
  const auto sig1 = into.find_signature(hex(1));
  const auto sig2 = into.find_signature(hex(2));
  const auto sig3 = into.find_signature(hex(3));
  const auto sig4 = into.find_signature(hex(4));
  ASSERT_TRUE(sig1 && sig2 && sig3 && sig4);
  EXPECT_EQ(sig1->metadata_json, R"({"kernels":["from-a"]})");  // the first stored is kept
  EXPECT_EQ(sig3->kind, SignatureKind::module);
  EXPECT_EQ(sig3->name, "LlamaMLP");
  const std::vector<Provenance> contexts = into.provenances();
  ASSERT_EQ(contexts.size(), 2u);
  const int64_t gpu = contexts[0].id;
  EXPECT_EQ(contexts[0].extra_json, R"({"sdpa_kernel":"flash"})");
  EXPECT_EQ(contexts[1].extra_json, R"({"sdpa_kernel":"math"})");
  const auto qwen = into.find_model("qwen", "c2");
  ASSERT_TRUE(qwen);
  EXPECT_EQ(qwen->architecture, "Qwen2ForCausalLM");
  const auto qwen_uses = into.signatures_of_model(qwen->id, gpu);
  ASSERT_EQ(qwen_uses.size(), 2u);
  EXPECT_EQ(qwen_uses[0].signature.hash, hex(1));
  EXPECT_EQ(qwen_uses[0].count, 5);
  EXPECT_EQ(qwen_uses[1].signature.hash, hex(4));
  EXPECT_EQ(qwen_uses[1].phase, Phase::mixed);
  EXPECT_EQ(into.signatures_of_model(into.find_model("llama", "c1")->id, gpu).size(), 3u);

  const auto points = into.measurements_for(sig1->id, gpu);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].point_key, R"({"NUM_TOKS":64})");
  EXPECT_EQ(points[0].latency_mean_s, 1e-4 * 64);
  EXPECT_EQ(points[0].energy_hw_j, 0.001);
  EXPECT_EQ(points[0].measured_at_unix_s, 1'790'000'001);
  EXPECT_EQ(points[2].num_tokens, 256);
  EXPECT_EQ(into.point_keys(sig1->id, gpu, false),
            (std::vector<std::string>{R"({"NUM_TOKS":128})", R"({"NUM_TOKS":256})", R"({"NUM_TOKS":64})"}));
  const auto oom = into.measurements_for(sig2->id, gpu);
  ASSERT_EQ(oom.size(), 1u);
  EXPECT_EQ(oom[0].status, MeasurementStatus::oom);
  EXPECT_EQ(oom[0].reason, "OutOfMemoryError: CUDA out of memory");
  EXPECT_FALSE(oom[0].energy_j);
  EXPECT_EQ(into.measurements_for(sig4->id, contexts[1].id).size(), 1u);

  // The newer resolution wins, with its unit remapped; the older one from B is ignored.
  const auto r2 = into.resolution_of(sig2->id, gpu);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, ResolutionStatus::runs);
  EXPECT_EQ(r2->unit_signature_id, sig2->id);
  EXPECT_EQ(r2->resolved_at_unix_s, 1'790'000'030);
  const auto r1 = into.resolution_of(sig1->id, gpu);
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->status, ResolutionStatus::runs);
  EXPECT_EQ(r1->unit_signature_id, sig1->id);

  // The shards are untouched.
  EXPECT_EQ(Store::open(a, Store::Mode::read_only).summary().signatures, 3);
  EXPECT_EQ(Store::open(b, Store::Mode::read_only).summary().measurements, 2);
}

TEST_F(MergeTest, AbsorbedResolutionKeepsItsUnitAndAttempts) {
  merge_store(into, shard_a(dir));
  const int64_t gpu = into.provenances().at(0).id;
  const auto r = into.resolution_of(into.find_signature(hex(2))->id, gpu);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, ResolutionStatus::absorbed);
  EXPECT_EQ(r->level, 1);
  EXPECT_EQ(r->unit_signature_id, into.find_signature(hex(3))->id);
  EXPECT_EQ(r->attempts_json,
            fmt::format(R"([{{"error":"RuntimeError: no KV cache","level":0,"unit":"{}"}}])", hex(2)));
}

TEST_F(MergeTest, MergingTheSameShardTwiceAddsNothing) {
  const std::string a = shard_a(dir), b = shard_b(dir);
  merge_store(into, a);
  merge_store(into, b);
  const Summary before = into.summary();
  for (const std::string& shard : {a, b}) {
    const MergeSummary again = merge_store(into, shard);
    for (const MergeCounts* c : {&again.signatures, &again.models, &again.provenances, &again.occurrences,
                                 &again.measurements, &again.resolutions}) {
      EXPECT_EQ(c->added, 0) << shard;
      EXPECT_EQ(c->replaced, 0) << shard;
    }
    EXPECT_EQ(again.measurements.skipped, shard == a ? 3 : 2);
  }
  const Summary after = into.summary();
  EXPECT_EQ(after.signatures, before.signatures);
  EXPECT_EQ(after.occurrence_rows, before.occurrence_rows);
  EXPECT_EQ(after.measurements, before.measurements);
  EXPECT_EQ(after.resolutions, before.resolutions);
}

// Predictors are derived from the measurements (keyed by the hash of their points): a merge leaves them behind,
// and the next fit of INTO fits what the merged points need.
TEST_F(MergeTest, PredictorsAreNotMerged) {
  const std::string a = shard_a(dir);
  {
    Store shard = Store::open(a);
    PredictorRecord p;
    p.signature_id = shard.find_signature(hex(1))->id;
    p.provenance_id = shard.provenances()[0].id;
    p.model = "constant";
    p.params_json = R"({"domain":{},"model":{"value":1e-5}})";
    p.points = 2;
    p.data_sha256 = std::string(64, 'd');
    p.code_version = "dooly-predict v1";
    shard.upsert_predictor(p);
  }
  merge_store(into, a);
  EXPECT_EQ(into.summary().measurements, 3);
  EXPECT_EQ(into.summary().predictors, 0);
}

TEST_F(MergeTest, RepeatedRowsWithinOneShardAreAllKept) {
  // Two rows of one shard that agree in the duplicate key are two measurements: only rows `into` held before the
  // merge count as already present.
  const std::string path = dir.file("twice.sqlite");
  {
    Store s = Store::open(path);
    const int64_t gpu = s.upsert_provenance(h200());
    const int64_t s1 = add_signature(s, 1);
    s.insert_measurement(point(s1, gpu, 64, 1'790'000'001));
    s.insert_measurement(point(s1, gpu, 64, 1'790'000'001));
  }
  expect_counts(merge_store(into, path).measurements, 2, 0);
  expect_counts(merge_store(into, path).measurements, 0, 2);
  EXPECT_EQ(into.summary().measurements, 2);
}

TEST_F(MergeTest, AnotherCanonicalFormForAHashWritesNothing) {
  const std::string a = shard_a(dir);
  {
    // into already holds signature 2 serialized differently.
    into.upsert_signature(hex(2), "op2", SignatureKind::op, R"({"op":2,"format":"old"})");
  }
  const Summary before = into.summary();
  try {
    merge_store(into, a);
    FAIL() << "expected a ConflictError";
  } catch (const ConflictError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(hex(2)), std::string::npos) << what;
    EXPECT_NE(what.find("different canonical form"), std::string::npos) << what;
    EXPECT_NE(what.find(a), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  const Summary after = into.summary();
  EXPECT_EQ(after.signatures, before.signatures);
  EXPECT_EQ(after.models, 0);
  EXPECT_EQ(after.provenances, 0);
  EXPECT_EQ(after.measurements, 0);
  EXPECT_FALSE(into.find_signature(hex(1)));  // inserted before the conflict, rolled back with it
}

TEST_F(MergeTest, AnotherNameOrFamilyOrCountIsAConflict) {
  const std::string a = shard_a(dir);
  {
    TempDir other;
    Store renamed = Store::open(other.file("x.sqlite"));
    renamed.upsert_signature(hex(1), "aten::other", SignatureKind::op, R"({"op":1})");
    EXPECT_THROW(merge_store(renamed, a), ConflictError);
    Store family = Store::open(other.file("y.sqlite"));
    family.upsert_model({0, "llama", "llama3", "LlamaForCausalLM", "c1"});
    EXPECT_THROW(merge_store(family, a), ConflictError);
    EXPECT_EQ(family.summary().signatures, 0);
  }
  // Same model, context and signature, another count per step.
  merge_store(into, a);
  const std::string c = dir.file("c.sqlite");
  {
    Store s = Store::open(c);
    const int64_t llama = s.upsert_model({0, "llama", "llama", "LlamaForCausalLM", "c1"});
    const int64_t gpu = s.upsert_provenance(h200());
    s.add_occurrences(llama, gpu, add_signature(s, 1), Phase::prefill, 8);  // A says 7
    add_signature(s, 9);
  }
  try {
    merge_store(into, c);
    FAIL() << "expected a ConflictError";
  } catch (const ConflictError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model 'llama' uses signature " + hex(1) + " 8 times per prefill step there and 7 times"),
              std::string::npos)
        << what;
  }
  EXPECT_FALSE(into.find_signature(hex(9)));
}

TEST_F(MergeTest, MergingAStoreIntoItselfIsRefused) {
  into.upsert_signature(hex(1), "op1", SignatureKind::op, "{}");
  for (const std::string& self : {dir.file("into.sqlite"), dir.path() + "/./into.sqlite"}) {
    try {
      merge_store(into, self);
      FAIL() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("cannot merge store {} into itself — name the store to merge into and the other stores "
                            "to merge from",
                            self));
    }
  }
  EXPECT_EQ(into.summary().signatures, 1);
}

TEST_F(MergeTest, ShardsMustBeDoolyStoresAtThisSchema) {
  const std::string old = dir.file("old.sqlite");
  {
    Store s = Store::open(old);
    s.database().execute("PRAGMA user_version = 2");
  }
  try {
    merge_store(into, old);
    FAIL() << "expected a StoreError";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 2 is older"), std::string::npos) << e.what();
    EXPECT_NE(e.fix().find("open it once read-write to migrate it"), std::string::npos) << e.fix();
  }
  EXPECT_THROW(merge_store(into, dir.file("absent.sqlite")), StoreError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("absent.sqlite")));
  testing::write_file(dir.file("text.sqlite"), std::string(4096, 'x'));
  EXPECT_THROW(merge_store(into, dir.file("text.sqlite")), StoreError);
}

TEST_F(MergeTest, AMergeInsideATransactionGoesWithIt) {
  const std::string a = shard_a(dir);
  {
    auto tx = into.transaction();
    merge_store(into, a);
    EXPECT_EQ(into.summary().signatures, 3);
  }  // not committed
  EXPECT_EQ(into.summary().signatures, 0);
  {
    auto tx = into.transaction();
    merge_store(into, a);
    tx.commit();
  }
  EXPECT_EQ(into.summary().measurements, 3);
}

}  // namespace
}  // namespace dooly::store
