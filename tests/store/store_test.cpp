// Round trips of every table and the queries part 2 and the CLI rely on.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include "dooly/common/clock.hpp"
#include "dooly/store/store.hpp"
#include "store_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using testing::h200_provenance;
using testing::hex;
using testing::TempDir;

Provenance h200() { return h200_provenance(R"({"sdpa_kernel": "flash", "allow_tf32": false})"); }

Measurement point(int64_t signature_id, int64_t provenance_id, int64_t tokens) {
  Measurement m;
  m.signature_id = signature_id;
  m.provenance_id = provenance_id;
  m.num_tokens = tokens;
  m.num_requests = 2;
  m.prefill_chunk = 128;
  m.kv_length = 4096;
  m.batch = 3;
  m.is_prefill = true;
  m.repetitions = 10;
  m.latency_mean_s = 2.5e-4;
  m.latency_median_s = 2.4e-4;
  m.latency_min_s = 2.0e-4;
  m.latency_max_s = 3.5e-4;
  m.latency_std_s = 1.0e-5;
  m.energy_j = 0.175;
  m.energy_std_j = 0.002;
  m.avg_power_w = 700.0;
  m.measured_at_unix_s = 1'790'000'000;
  m.extra_json = R"({"graph": true})";
  return m;
}

template <typename F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : store(Store::open(dir.file("dooly.sqlite"))) {}
  TempDir dir;
  Store store;
};

// ------------------------------------------------------------------------------------------------ signatures

TEST_F(StoreTest, SignatureRoundTrip) {
  const int64_t before = wall_now_us() / 1'000'000;
  const SignatureUpsert up =
      store.upsert_signature(hex(1), "aten::linear", SignatureKind::op, R"({"op":"aten::linear","w":[4096,4096]})",
                             R"({"kernels":["sm90_gemm"]})");
  EXPECT_TRUE(up.inserted);
  EXPECT_GT(up.id, 0);
  const auto s = store.find_signature(hex(1));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->id, up.id);
  EXPECT_EQ(s->hash, hex(1));
  EXPECT_EQ(s->name, "aten::linear");
  EXPECT_EQ(s->kind, SignatureKind::op);
  EXPECT_EQ(s->canonical_json, R"({"op":"aten::linear","w":[4096,4096]})");  // byte for byte
  EXPECT_EQ(s->metadata_json, R"({"kernels":["sm90_gemm"]})");
  EXPECT_GE(s->created_at_unix_s, before);
  EXPECT_LE(s->created_at_unix_s, wall_now_us() / 1'000'000);
  EXPECT_FALSE(store.find_signature(hex(2)));

  const auto module = store.upsert_signature(hex(2), "LlamaDecoderLayer", SignatureKind::module, "{}");
  EXPECT_EQ(store.find_signature(hex(2))->kind, SignatureKind::module);
  EXPECT_EQ(store.find_signature(hex(2))->metadata_json, "{}");
  EXPECT_NE(module.id, up.id);
}

TEST_F(StoreTest, DuplicateHashIsNotInsertedAndKeepsFirstMetadata) {
  const auto first =
      store.upsert_signature(hex(1), "aten::mm", SignatureKind::op, R"({"a":1})", R"({"kernels":["k_128"]})");
  const auto again =
      store.upsert_signature(hex(1), "aten::mm", SignatureKind::op, R"({"a":1})", R"({"kernels":["k_256"]})");
  EXPECT_FALSE(again.inserted);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(store.find_signature(hex(1))->metadata_json, R"({"kernels":["k_128"]})");
  EXPECT_EQ(store.summary().signatures, 1);
}

TEST_F(StoreTest, SameHashDifferentCanonicalFormIsACollision) {
  store.upsert_signature(hex(1), "aten::mm", SignatureKind::op, R"({"a":1})");
  try {
    store.upsert_signature(hex(1), "aten::mm", SignatureKind::op, R"({"a":2})");
    FAIL() << "a collision must throw";
  } catch (const ConflictError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fmt::format("signature {} (aten::mm) is already stored with a different canonical form: "
                                    "stored '{{\"a\":1}}', new '{{\"a\":2}}'",
                                    hex(1))),
              std::string::npos)
        << what;
    EXPECT_NE(e.fix().find("serializer"), std::string::npos);
  }
  EXPECT_EQ(store.find_signature(hex(1))->canonical_json, R"({"a":1})");
}

TEST_F(StoreTest, SameHashUnderAnotherNameOrKindIsAConflict) {
  store.upsert_signature(hex(1), "aten::mm", SignatureKind::op, R"({"a":1})");
  EXPECT_EQ(error_text([&] { store.upsert_signature(hex(1), "aten::bmm", SignatureKind::op, R"({"a":1})"); }),
            fmt::format("store {}: signature {} is stored as op 'aten::mm', now given as op 'aten::bmm' — the name and "
                        "kind are part of what is hashed: the caller passed another signature's hash",
                        dir.file("dooly.sqlite"), hex(1)));
  EXPECT_THROW(store.upsert_signature(hex(1), "aten::mm", SignatureKind::module, R"({"a":1})"), ConflictError);
  EXPECT_EQ(store.summary().signatures, 1);
}

TEST_F(StoreTest, SignatureArgumentsAreChecked) {
  EXPECT_EQ(error_text([&] { store.upsert_signature("ABCD", "x", SignatureKind::op, "{}"); }),
            "signature hash 'ABCD' is not lowercase hex — pass the signature's digest as lowercase hexadecimal");
  EXPECT_THROW(store.upsert_signature("", "x", SignatureKind::op, "{}"), InputError);
  EXPECT_THROW(store.upsert_signature(hex(1), "", SignatureKind::op, "{}"), InputError);
  EXPECT_THROW(store.upsert_signature(hex(1), "x", SignatureKind::op, "{not json"), InputError);
  EXPECT_THROW(store.upsert_signature(hex(1), "x", SignatureKind::op, "{}", "[1,"), InputError);
  EXPECT_EQ(store.summary().signatures, 0);
}

// ------------------------------------------------------------------------------------------ models, provenance

TEST_F(StoreTest, ModelRoundTripAndIdentity) {
  const int64_t id = store.upsert_model({0, "llama-3.1-8b", "llama", "LlamaForCausalLM", "cfg-a"});
  EXPECT_EQ(store.upsert_model({0, "llama-3.1-8b", "llama", "LlamaForCausalLM", "cfg-a"}), id);
  const int64_t changed_config = store.upsert_model({0, "llama-3.1-8b", "llama", "LlamaForCausalLM", "cfg-b"});
  EXPECT_NE(changed_config, id);
  const auto found = store.find_model("llama-3.1-8b", "cfg-a");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->family, "llama");
  EXPECT_EQ(found->architecture, "LlamaForCausalLM");
  EXPECT_EQ(found->config_hash, "cfg-a");
  EXPECT_FALSE(store.find_model("llama-3.1-8b", "cfg-c"));
  ASSERT_EQ(store.models().size(), 2u);
  EXPECT_EQ(store.models()[1].config_hash, "cfg-b");

  EXPECT_THROW(store.upsert_model({0, "llama-3.1-8b", "mistral", "LlamaForCausalLM", "cfg-a"}), ConflictError);
  EXPECT_THROW(store.upsert_model({0, "", "llama", "", "cfg"}), InputError);
  EXPECT_THROW(store.upsert_model({0, "m", "llama", "", ""}), InputError);
  EXPECT_EQ(store.summary().models, 2);
}

TEST_F(StoreTest, ProvenanceRoundTripAndIdentity) {
  const int64_t id = store.upsert_provenance(h200());
  const auto all = store.provenances();
  ASSERT_EQ(all.size(), 1u);
  Provenance expected = h200();
  const Provenance& p = all[0];
  EXPECT_EQ(p.id, id);
  EXPECT_EQ(p.gpu_name, expected.gpu_name);
  EXPECT_EQ(p.driver_version, expected.driver_version);
  EXPECT_EQ(p.cuda_version, expected.cuda_version);
  EXPECT_EQ(p.engine, expected.engine);
  EXPECT_EQ(p.engine_version, expected.engine_version);
  EXPECT_EQ(p.attention_backend, expected.attention_backend);
  EXPECT_EQ(p.dtype, expected.dtype);
  EXPECT_EQ(p.kv_cache_dtype, expected.kv_cache_dtype);
  EXPECT_EQ(p.block_size, 256);
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.extra_json, R"({"allow_tf32":false,"sdpa_kernel":"flash"})");  // normalized

  // The same context written differently is the same row; any identifying field makes a new one.
  expected.extra_json = R"({ "allow_tf32" : false, "sdpa_kernel" : "flash" })";
  EXPECT_EQ(store.upsert_provenance(expected), id);
  for (auto change : std::vector<void (*)(Provenance&)>{
           [](Provenance& q) { q.kv_cache_dtype = "float8_e4m3fn"; },
           [](Provenance& q) { q.block_size = 128; },
           [](Provenance& q) { q.engine_version = "5.18.0"; },
           [](Provenance& q) { q.tp = 2; },
           [](Provenance& q) { q.extra_json = R"({"sdpa_kernel":"cudnn"})"; },
       }) {
    Provenance q = h200();
    change(q);
    EXPECT_NE(store.upsert_provenance(q), id);
  }
  EXPECT_EQ(store.summary().provenances, 6);

  Provenance bad = h200();
  bad.tp = 0;
  EXPECT_THROW(store.upsert_provenance(bad), InputError);
  bad = h200();
  bad.extra_json = "[1]";
  EXPECT_EQ(error_text([&] { store.upsert_provenance(bad); }),
            "provenance extra_json must be a JSON object, got '[1]' — pass a JSON object such as {}");
}

// ------------------------------------------------------------------------------------------------ occurrences

class OccurrenceTest : public StoreTest {
 protected:
  OccurrenceTest() {
    llama = store.upsert_model({0, "llama", "llama", "LlamaForCausalLM", "c1"});
    qwen = store.upsert_model({0, "qwen", "qwen2", "Qwen2ForCausalLM", "c2"});
    gpu = store.upsert_provenance(h200());
    Provenance cpu_trace;
    cpu_trace.gpu_name = "cpu";
    cpu_trace.engine = "hf-transformers";
    cpu = store.upsert_provenance(cpu_trace);
    for (int i = 1; i <= 4; ++i)
      sig.push_back(store.upsert_signature(hex(i), fmt::format("op{}", i), SignatureKind::op, "{}").id);
  }
  int64_t llama = 0, qwen = 0, gpu = 0, cpu = 0;
  std::vector<int64_t> sig;
};

TEST_F(OccurrenceTest, RoundTripBothDirections) {
  store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 224);
  store.add_occurrences(llama, gpu, sig[0], Phase::decode, 224);
  store.add_occurrences(llama, gpu, sig[1], Phase::mixed, 32);
  store.add_occurrences(qwen, gpu, sig[0], Phase::prefill, 196);

  const auto uses = store.signatures_of_model(llama, gpu);
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].signature.id, sig[0]);
  EXPECT_EQ(uses[0].phase, Phase::decode);  // ordered by signature, then phase text
  EXPECT_EQ(uses[0].count, 224);
  EXPECT_EQ(uses[1].phase, Phase::prefill);
  EXPECT_EQ(uses[2].signature.name, "op2");
  EXPECT_EQ(uses[2].phase, Phase::mixed);
  EXPECT_EQ(uses[2].count, 32);
  EXPECT_TRUE(store.signatures_of_model(llama, cpu).empty());

  const auto users = store.models_using(sig[0]);
  ASSERT_EQ(users.size(), 3u);
  EXPECT_EQ(users[0].model.name, "llama");
  EXPECT_EQ(users[0].provenance_id, gpu);
  EXPECT_EQ(users[2].model.name, "qwen");
  EXPECT_EQ(users[2].model.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(users[2].count, 196);
  EXPECT_TRUE(store.models_using(sig[3]).empty());

  const Summary s = store.summary();
  EXPECT_EQ(s.occurrence_rows, 4);
  EXPECT_EQ(s.occurrences, 224 + 224 + 32 + 196);
}

TEST_F(OccurrenceTest, AddReplacesTheCountOfARerun) {
  store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 224);
  store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 100);
  const auto uses = store.signatures_of_model(llama, gpu);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].count, 100);
}

TEST_F(OccurrenceTest, ReplaceDropsWhatARerunNoLongerSees) {
  store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 1);
  store.add_occurrences(llama, gpu, sig[1], Phase::prefill, 2);
  store.add_occurrences(qwen, gpu, sig[1], Phase::prefill, 5);
  const std::vector<Occurrence> rerun{{sig[1], Phase::prefill, 3}, {sig[2], Phase::decode, 4}};
  store.replace_occurrences(llama, gpu, rerun);
  const auto uses = store.signatures_of_model(llama, gpu);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].signature.id, sig[1]);
  EXPECT_EQ(uses[0].count, 3);
  EXPECT_EQ(uses[1].signature.id, sig[2]);
  EXPECT_EQ(uses[1].count, 4);
  EXPECT_EQ(store.signatures_of_model(qwen, gpu).at(0).count, 5);  // other models untouched

  const std::vector<Occurrence> twice{{sig[0], Phase::prefill, 1}, {sig[0], Phase::prefill, 2}};
  EXPECT_THROW(store.replace_occurrences(llama, gpu, twice), InputError);
  const std::vector<Occurrence> dangling{{sig[0], Phase::prefill, 1}, {9999, Phase::prefill, 2}};
  EXPECT_THROW(store.replace_occurrences(llama, gpu, dangling), StoreError);
  EXPECT_EQ(store.signatures_of_model(llama, gpu).size(), 2u);  // a failed replace changes nothing
}

TEST_F(OccurrenceTest, ReferencesAndCountsAreChecked) {
  try {
    store.add_occurrences(llama, gpu, 9999, Phase::prefill, 1);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_CONSTRAINT_FOREIGNKEY) << e.what();
  }
  EXPECT_THROW(store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 0), InputError);
  EXPECT_THROW(store.add_occurrences(0, gpu, sig[0], Phase::prefill, 1), InputError);
}

// ----------------------------------------------------------------------------------------------- measurements

TEST_F(OccurrenceTest, MeasurementRoundTrip) {
  const Measurement in = point(sig[0], gpu, 512);
  const int64_t id = store.insert_measurement(in);
  Measurement no_energy = point(sig[0], gpu, 1024);
  no_energy.energy_j.reset();
  no_energy.energy_std_j.reset();
  no_energy.avg_power_w.reset();
  no_energy.measured_at_unix_s = 0;
  no_energy.is_prefill = false;
  const int64_t before = wall_now_us() / 1'000'000;
  store.insert_measurement(no_energy);
  store.insert_measurement(point(sig[0], cpu, 512));
  store.insert_measurement(point(sig[1], gpu, 512));

  const auto rows = store.measurements_for(sig[0], gpu);
  ASSERT_EQ(rows.size(), 2u);
  const Measurement& m = rows[0];
  EXPECT_EQ(m.id, id);
  EXPECT_EQ(m.signature_id, sig[0]);
  EXPECT_EQ(m.provenance_id, gpu);
  EXPECT_EQ(m.num_tokens, 512);
  EXPECT_EQ(m.num_requests, 2);
  EXPECT_EQ(m.prefill_chunk, 128);
  EXPECT_EQ(m.kv_length, 4096);
  EXPECT_EQ(m.batch, 3);
  EXPECT_TRUE(m.is_prefill);
  EXPECT_EQ(m.repetitions, 10);
  EXPECT_EQ(m.latency_mean_s, 2.5e-4);  // REAL columns keep doubles exactly
  EXPECT_EQ(m.latency_median_s, 2.4e-4);
  EXPECT_EQ(m.latency_min_s, 2.0e-4);
  EXPECT_EQ(m.latency_max_s, 3.5e-4);
  EXPECT_EQ(m.latency_std_s, 1.0e-5);
  EXPECT_EQ(m.energy_j, 0.175);
  EXPECT_EQ(m.energy_std_j, 0.002);
  EXPECT_EQ(m.avg_power_w, 700.0);
  EXPECT_EQ(m.measured_at_unix_s, 1'790'000'000);
  EXPECT_EQ(m.extra_json, R"({"graph":true})");

  const Measurement& n = rows[1];
  EXPECT_EQ(n.num_tokens, 1024);
  EXPECT_FALSE(n.is_prefill);
  EXPECT_FALSE(n.energy_j);
  EXPECT_FALSE(n.energy_std_j);
  EXPECT_FALSE(n.avg_power_w);
  EXPECT_GE(n.measured_at_unix_s, before);
  EXPECT_LE(n.measured_at_unix_s, wall_now_us() / 1'000'000);

  EXPECT_EQ(store.measurements_for(sig[0], cpu).size(), 1u);
  EXPECT_TRUE(store.measurements_for(sig[2], gpu).empty());
  EXPECT_EQ(store.summary().measurements, 4);
}

TEST_F(OccurrenceTest, MeasurementArgumentsAreChecked) {
  Measurement m = point(sig[0], gpu, 1);
  m.latency_min_s = 1.0;  // above the mean
  EXPECT_EQ(error_text([&] { store.insert_measurement(m); }),
            "latency statistics out of order: min 1 mean 0.00025 median 0.00024 max 0.00035 — min <= mean, median <= "
            "max must hold: check which statistic went where");
  m = point(sig[0], gpu, 1);
  m.latency_std_s = std::nan("");
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(sig[0], gpu, 1);
  m.energy_j = -1;
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(sig[0], gpu, 1);
  m.repetitions = 0;
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(sig[0], gpu, -1);
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(sig[0], gpu, 1);
  m.extra_json = "nope";
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(9999, gpu, 1);
  EXPECT_THROW(store.insert_measurement(m), StoreError);
  EXPECT_EQ(store.summary().measurements, 0);
}

// ------------------------------------------------------------------------------- sweep points and their outcome

Measurement failure(int64_t signature_id, int64_t provenance_id, std::string key, MeasurementStatus status) {
  Measurement m;
  m.signature_id = signature_id;
  m.provenance_id = provenance_id;
  m.point_key = std::move(key);
  m.status = status;
  m.reason = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
  m.repetitions = 0;
  return m;
}

TEST_F(OccurrenceTest, PointKeysOfCommittedPointsWithAndWithoutFailures) {
  Measurement a = point(sig[0], gpu, 64);
  a.point_key = R"({"KV_TOKS":1024,"NUM_TOKS":64})";
  a.energy_hw_j = 0.0125;
  store.insert_measurement(a);
  store.insert_measurement(a);  // measured twice: one key
  Measurement b = point(sig[0], gpu, 128);
  b.point_key = R"({"KV_TOKS":1024,"NUM_TOKS":128})";
  store.insert_measurement(b);
  store.insert_measurement(point(sig[0], gpu, 256));  // no key: matches no point
  store.insert_measurement(failure(sig[0], gpu, R"({"KV_TOKS":8192,"NUM_TOKS":4096})", MeasurementStatus::oom));
  Measurement slow = failure(sig[0], gpu, R"({"KV_TOKS":1024,"NUM_TOKS":64})", MeasurementStatus::timeout);
  slow.reason = "TimeoutError: point took more than 60 s";
  store.insert_measurement(slow);  // the same point as an ok row: listed once
  store.insert_measurement(failure(sig[1], gpu, R"({"NUM_TOKS":1})", MeasurementStatus::failed));
  Measurement elsewhere = point(sig[0], cpu, 64);
  elsewhere.point_key = R"({"NUM_TOKS":7})";
  store.insert_measurement(elsewhere);

  EXPECT_EQ(store.point_keys(sig[0], gpu, false),
            (std::vector<std::string>{R"({"KV_TOKS":1024,"NUM_TOKS":128})", R"({"KV_TOKS":1024,"NUM_TOKS":64})"}));
  EXPECT_EQ(store.point_keys(sig[0], gpu, true),
            (std::vector<std::string>{R"({"KV_TOKS":1024,"NUM_TOKS":128})", R"({"KV_TOKS":1024,"NUM_TOKS":64})",
                                      R"({"KV_TOKS":8192,"NUM_TOKS":4096})"}));
  EXPECT_TRUE(store.point_keys(sig[1], gpu, false).empty());
  EXPECT_EQ(store.point_keys(sig[1], gpu, true), std::vector<std::string>{R"({"NUM_TOKS":1})"});
  EXPECT_EQ(store.point_keys(sig[0], cpu, false), std::vector<std::string>{R"({"NUM_TOKS":7})"});
  EXPECT_TRUE(store.point_keys(sig[2], gpu, true).empty());

  const auto rows = store.measurements_for(sig[0], gpu);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].point_key, R"({"KV_TOKS":1024,"NUM_TOKS":64})");
  EXPECT_EQ(rows[0].status, MeasurementStatus::ok);
  EXPECT_EQ(rows[0].energy_hw_j, 0.0125);
  EXPECT_FALSE(rows[2].energy_hw_j);
  EXPECT_EQ(rows[4].status, MeasurementStatus::oom);
  EXPECT_EQ(rows[4].reason, "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_EQ(rows[4].repetitions, 0);
  EXPECT_EQ(rows[4].latency_mean_s, 0);
  EXPECT_FALSE(rows[4].energy_j);
  EXPECT_EQ(rows[5].status, MeasurementStatus::timeout);

  const Summary s = store.summary();
  EXPECT_EQ(s.measurements, 8);
  EXPECT_EQ(s.measurements_by_status, (std::array<int64_t, 4>{5, 1, 1, 1}));  // ok, failed, oom, timeout
  // A failed point is still a measurement: the signature is no longer "missing" (the planner reads its keys).
  store.add_occurrences(llama, gpu, sig[1], Phase::prefill, 1);
  EXPECT_TRUE(store.missing_signatures(gpu).empty());
}

TEST_F(OccurrenceTest, PointOutcomesAreChecked) {
  Measurement m = failure(sig[0], gpu, R"({"NUM_TOKS":1})", MeasurementStatus::failed);
  m.reason = "";
  EXPECT_EQ(error_text([&] { store.insert_measurement(m); }),
            "measurement with status failed has no reason — say why in one line: the exception type and the last line "
            "of its message");
  m.reason = "RuntimeError: first line\nsecond line";
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = failure(sig[0], gpu, R"({"NUM_TOKS":1})", MeasurementStatus::timeout);
  m.latency_mean_s = 1;  // no completed call, but a latency
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = failure(sig[0], gpu, R"({"NUM_TOKS":1})", MeasurementStatus::failed);
  m.repetitions = -1;
  EXPECT_THROW(store.insert_measurement(m), InputError);
  // A timeout after some calls keeps their statistics.
  m = point(sig[0], gpu, 1);
  m.status = MeasurementStatus::timeout;
  m.reason = "TimeoutError: 3 of 10 calls in 60 s";
  m.repetitions = 3;
  store.insert_measurement(m);
  m.latency_min_s = 1.0;  // ordered statistics still required once there are calls
  EXPECT_THROW(store.insert_measurement(m), InputError);

  m = point(sig[0], gpu, 1);
  m.repetitions = 0;  // ok needs calls
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(sig[0], gpu, 1);
  m.energy_hw_j = -0.1;
  EXPECT_THROW(store.insert_measurement(m), InputError);
  m = point(sig[0], gpu, 1);
  m.point_key = R"({"NUM_TOKS": 64, "KV_TOKS": 1024})";  // not canonical
  EXPECT_EQ(error_text([&] { store.insert_measurement(m); }),
            R"(point_key '{"NUM_TOKS": 64, "KV_TOKS": 1024}' is not canonical (canonical: '{"KV_TOKS":1024,)"
            R"("NUM_TOKS":64}') — build the key with canonical_point_key (keys sorted, no whitespace))");
  m.point_key = "[64]";
  EXPECT_THROW(store.insert_measurement(m), InputError);
  EXPECT_EQ(store.summary().measurements, 1);
}

TEST(PointKey, CanonicalFormSortsKeysAndDropsWhitespace) {
  EXPECT_EQ(canonical_point_key(R"({ "NUM_TOKS": 64, "KV_TOKS": 1024 })"), R"({"KV_TOKS":1024,"NUM_TOKS":64})");
  EXPECT_EQ(canonical_point_key(R"({"B":"x","A":-1})"), R"({"A":-1,"B":"x"})");
  EXPECT_EQ(canonical_point_key("{}"), "{}");
  EXPECT_THROW(canonical_point_key("[1]"), InputError);
  EXPECT_THROW(canonical_point_key("NUM_TOKS=64"), InputError);
}

// --------------------------------------------------------------------------------------------------- resolutions

TEST_F(OccurrenceTest, ResolutionRoundTripAndReplace) {
  EXPECT_FALSE(store.resolution_of(sig[0], gpu));
  Resolution r;
  r.signature_id = sig[0];
  r.provenance_id = gpu;
  r.unit_signature_id = sig[2];
  r.level = 1;
  r.status = ResolutionStatus::absorbed;
  r.attempts_json = fmt::format(R"([{{"unit": "{}", "level": 0, "error": "RuntimeError: needs a KV cache"}}])", hex(1));
  r.resolved_at_unix_s = 1'790'000'000;
  store.set_resolution(r);
  auto got = store.resolution_of(sig[0], gpu);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->signature_id, sig[0]);
  EXPECT_EQ(got->provenance_id, gpu);
  EXPECT_EQ(got->unit_signature_id, sig[2]);
  EXPECT_EQ(got->level, 1);
  EXPECT_EQ(got->status, ResolutionStatus::absorbed);
  EXPECT_EQ(got->attempts_json,
            fmt::format(R"([{{"error":"RuntimeError: needs a KV cache","level":0,"unit":"{}"}}])", hex(1)));
  EXPECT_EQ(got->resolved_at_unix_s, 1'790'000'000);
  EXPECT_FALSE(store.resolution_of(sig[0], cpu));

  // Replaced, not added: a later resolution of the same pair.
  Resolution again;
  again.signature_id = sig[0];
  again.provenance_id = gpu;
  again.unit_signature_id = sig[0];
  const int64_t before = wall_now_us() / 1'000'000;
  store.set_resolution(again);
  got = store.resolution_of(sig[0], gpu);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->unit_signature_id, sig[0]);
  EXPECT_EQ(got->level, 0);
  EXPECT_EQ(got->status, ResolutionStatus::runs);
  EXPECT_EQ(got->attempts_json, "[]");
  EXPECT_GE(got->resolved_at_unix_s, before);  // 0: now

  Resolution none;
  none.signature_id = sig[1];
  none.provenance_id = gpu;
  none.status = ResolutionStatus::unrunnable;
  none.level = 2;
  store.set_resolution(none);
  Resolution on_cpu = again;
  on_cpu.provenance_id = cpu;
  store.set_resolution(on_cpu);

  const auto under_gpu = store.resolutions(gpu);
  ASSERT_EQ(under_gpu.size(), 2u);
  EXPECT_EQ(under_gpu[0].signature_id, sig[0]);
  EXPECT_EQ(under_gpu[1].signature_id, sig[1]);
  EXPECT_FALSE(under_gpu[1].unit_signature_id);
  EXPECT_EQ(under_gpu[1].status, ResolutionStatus::unrunnable);
  EXPECT_EQ(store.resolutions(cpu).size(), 1u);
  EXPECT_EQ(store.summary().resolutions, 3);
}

TEST_F(OccurrenceTest, ResolutionArgumentsAreChecked) {
  Resolution r;
  r.signature_id = sig[0];
  r.provenance_id = gpu;
  r.status = ResolutionStatus::runs;  // but no unit
  EXPECT_EQ(error_text([&] { store.set_resolution(r); }),
            fmt::format("resolution of signature {} has status runs and no unit — name the unit that runs exactly "
                        "when one does (status unrunnable: none)",
                        sig[0]));
  r.status = ResolutionStatus::unrunnable;
  r.unit_signature_id = sig[1];  // but a unit
  EXPECT_THROW(store.set_resolution(r), InputError);
  r.status = ResolutionStatus::runs;
  r.level = -1;
  EXPECT_THROW(store.set_resolution(r), InputError);
  r.level = 0;
  for (const char* attempts :
       {"{}", "[1]", R"([{"unit":"aa","level":0}])", R"([{"unit":"aa","level":-1,"error":"x"}])", "not json"})
    EXPECT_THROW(
        {
          r.attempts_json = attempts;
          store.set_resolution(r);
        },
        InputError)
        << attempts;
  r.attempts_json = "[]";
  r.unit_signature_id = 9999;  // not a signature
  EXPECT_THROW(store.set_resolution(r), StoreError);
  r.unit_signature_id = sig[0];
  r.provenance_id = 9999;
  EXPECT_THROW(store.set_resolution(r), StoreError);
  EXPECT_EQ(store.summary().resolutions, 0);
}

// Schema v5: one predictor per (signature, provenance, target), replaced in place, its fields checked.
TEST_F(OccurrenceTest, PredictorRoundTripReplaceAndChecks) {
  PredictorRecord p;
  p.signature_id = sig[0];
  p.provenance_id = gpu;
  p.target = PredictorTarget::energy_j;
  p.model = "interp_loglog";
  p.params_json = R"({"model": {"x": [1, 2], "y": [0.5, 1.0]}, "domain": {}})";
  p.held_out_mape = 0.031;
  p.points = 2;
  p.data_sha256 = std::string(64, 'c');
  p.grid_sha256 = "g1,g2";
  p.code_version = "dooly-predict v1";
  p.evaluation_json = R"({"basis": "all"})";
  p.fitted_at_unix_s = 1'790'000'000;
  store.upsert_predictor(p);
  auto got = store.predictor(sig[0], gpu, PredictorTarget::energy_j);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->model, "interp_loglog");
  EXPECT_EQ(got->params_json, R"({"domain":{},"model":{"x":[1,2],"y":[0.5,1.0]}})");  // normalized
  EXPECT_EQ(got->held_out_mape, 0.031);
  EXPECT_EQ(got->points, 2);
  EXPECT_EQ(got->data_sha256, std::string(64, 'c'));
  EXPECT_EQ(got->grid_sha256, "g1,g2");
  EXPECT_EQ(got->code_version, "dooly-predict v1");
  EXPECT_EQ(got->evaluation_json, R"({"basis":"all"})");
  EXPECT_EQ(got->fitted_at_unix_s, 1'790'000'000);
  EXPECT_FALSE(store.predictor(sig[0], gpu, PredictorTarget::latency_s));
  EXPECT_FALSE(store.predictor(sig[0], cpu, PredictorTarget::energy_j));

  p.model = "constant";
  p.held_out_mape.reset();
  store.upsert_predictor(p);  // replaced
  p.target = PredictorTarget::latency_s;
  store.upsert_predictor(p);
  p.signature_id = sig[1];
  store.upsert_predictor(p);
  const auto all = store.predictors(gpu);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].target, PredictorTarget::energy_j);  // by signature, then target name
  EXPECT_EQ(all[0].model, "constant");
  EXPECT_FALSE(all[0].held_out_mape);
  EXPECT_EQ(all[1].target, PredictorTarget::latency_s);
  EXPECT_EQ(all[2].signature_id, sig[1]);
  EXPECT_EQ(store.summary().predictors, 3);
  store.delete_predictor(sig[1], gpu, PredictorTarget::latency_s);
  EXPECT_EQ(store.summary().predictors, 2);

  for (auto spoil : std::vector<void (*)(PredictorRecord&)>{
           [](PredictorRecord& q) { q.model = ""; },
           [](PredictorRecord& q) { q.points = 0; },
           [](PredictorRecord& q) { q.held_out_mape = -0.1; },
           [](PredictorRecord& q) { q.data_sha256 = "abc"; },
           [](PredictorRecord& q) { q.code_version = ""; },
           [](PredictorRecord& q) { q.params_json = "[1]"; },
           [](PredictorRecord& q) { q.evaluation_json = "not json"; },
           [](PredictorRecord& q) { q.signature_id = 0; },
       }) {
    PredictorRecord q = p;
    spoil(q);
    EXPECT_THROW(store.upsert_predictor(q), InputError);
  }
  PredictorRecord q = p;
  q.signature_id = 9999;  // not a signature
  EXPECT_THROW(store.upsert_predictor(q), StoreError);
  EXPECT_EQ(store.summary().predictors, 2);
}

TEST_F(OccurrenceTest, ProvenancesWithOccurrences) {
  EXPECT_TRUE(store.provenances_with_occurrences().empty());
  store.add_occurrences(llama, cpu, sig[0], Phase::prefill, 1);
  store.add_occurrences(qwen, cpu, sig[1], Phase::prefill, 1);
  EXPECT_EQ(store.provenances_with_occurrences(), std::vector<int64_t>{cpu});
  store.add_occurrences(qwen, gpu, sig[1], Phase::decode, 1);
  EXPECT_EQ(store.provenances_with_occurrences(), (std::vector<int64_t>{gpu, cpu}));
}

// --------------------------------------------------------------------------------------------- planning query

TEST_F(OccurrenceTest, MissingSignaturesAreThoseNotYetMeasuredThere) {
  store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 1);
  store.add_occurrences(llama, gpu, sig[1], Phase::prefill, 1);
  store.add_occurrences(qwen, gpu, sig[1], Phase::decode, 1);
  store.add_occurrences(qwen, gpu, sig[2], Phase::decode, 1);
  // sig[3] occurs nowhere: nothing asks for it.
  store.insert_measurement(point(sig[1], gpu, 8));
  store.insert_measurement(point(sig[2], cpu, 8));  // measured, but elsewhere

  auto ids = [](const std::vector<Signature>& v) {
    std::vector<int64_t> out;
    for (const auto& s : v) out.push_back(s.id);
    return out;
  };
  EXPECT_EQ(ids(store.missing_signatures(gpu)), (std::vector<int64_t>{sig[0], sig[2]}));
  EXPECT_TRUE(store.missing_signatures(cpu).empty());  // nothing was traced under cpu

  // Traced on a CPU, measured on the GPU.
  store.add_occurrences(llama, cpu, sig[2], Phase::prefill, 1);
  store.add_occurrences(llama, cpu, sig[3], Phase::prefill, 1);
  EXPECT_EQ(ids(store.missing_signatures(gpu, cpu)), (std::vector<int64_t>{sig[2], sig[3]}));
  EXPECT_EQ(ids(store.missing_signatures(cpu, cpu)), (std::vector<int64_t>{sig[3]}));

  store.insert_measurement(point(sig[0], gpu, 8));
  store.insert_measurement(point(sig[2], gpu, 8));
  EXPECT_TRUE(store.missing_signatures(gpu).empty());
}

// ------------------------------------------------------------------------------------ transactions, reopening

TEST_F(OccurrenceTest, TransactionBatchesWritesAtomically) {
  {
    auto tx = store.transaction();
    store.insert_measurement(point(sig[0], gpu, 1));
    store.upsert_signature(hex(99), "late", SignatureKind::op, "{}");
  }  // not committed
  EXPECT_EQ(store.summary().measurements, 0);
  EXPECT_FALSE(store.find_signature(hex(99)));
  {
    auto tx = store.transaction();
    store.insert_measurement(point(sig[0], gpu, 1));
    const auto up = store.upsert_signature(hex(99), "late", SignatureKind::op, "{}");  // nested: a savepoint
    EXPECT_TRUE(up.inserted);
    tx.commit();
  }
  EXPECT_EQ(store.summary().measurements, 1);
  EXPECT_TRUE(store.find_signature(hex(99)));
}

TEST_F(OccurrenceTest, DataSurvivesReopeningAndReadOnlyCannotWrite) {
  store.add_occurrences(llama, gpu, sig[0], Phase::prefill, 7);
  store.insert_measurement(point(sig[0], gpu, 64));
  const Summary before = store.summary();
  {
    Store moved = std::move(store);  // closing happens with the last owner
  }
  Store reader = Store::open(dir.file("dooly.sqlite"), Store::Mode::read_only);
  EXPECT_EQ(reader.mode(), Store::Mode::read_only);
  const Summary after = reader.summary();
  EXPECT_EQ(after.schema_version, 5);
  EXPECT_EQ(after.signatures, before.signatures);
  EXPECT_EQ(after.models, 2);
  EXPECT_EQ(after.provenances, 2);
  EXPECT_EQ(after.occurrences, 7);
  EXPECT_EQ(after.measurements, 1);
  EXPECT_EQ(reader.measurements_for(sig[0], gpu).at(0).num_tokens, 64);

  try {
    reader.upsert_signature(hex(50), "x", SignatureKind::op, "{}");
    FAIL() << "a read-only store must refuse writes";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.sqlite_code() & 0xff, SQLITE_READONLY) << e.what();
    EXPECT_NE(e.fix().find("open the store read-write"), std::string::npos);
  }
}

TEST(Records, EnumsRoundTripThroughText) {
  for (Phase p : {Phase::prefill, Phase::decode, Phase::mixed}) EXPECT_EQ(parse_phase(to_string(p)), p);
  for (SignatureKind k : {SignatureKind::op, SignatureKind::module}) EXPECT_EQ(parse_signature_kind(to_string(k)), k);
  for (MeasurementStatus s :
       {MeasurementStatus::ok, MeasurementStatus::failed, MeasurementStatus::oom, MeasurementStatus::timeout})
    EXPECT_EQ(parse_measurement_status(to_string(s)), s);
  for (ResolutionStatus s : {ResolutionStatus::runs, ResolutionStatus::absorbed, ResolutionStatus::unrunnable})
    EXPECT_EQ(parse_resolution_status(to_string(s)), s);
  EXPECT_EQ(to_string(MeasurementStatus::oom), "oom");
  EXPECT_EQ(to_string(ResolutionStatus::unrunnable), "unrunnable");
  EXPECT_FALSE(parse_phase("Prefill"));
  EXPECT_FALSE(parse_signature_kind(""));
  EXPECT_FALSE(parse_measurement_status("OK"));
  EXPECT_FALSE(parse_resolution_status(""));
}

}  // namespace
}  // namespace dooly::store
