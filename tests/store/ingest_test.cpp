// ingest_traces: the library call behind `dooly signatures`.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "dooly/common/error.hpp"
#include "dooly/signature/sign.hpp"
#include "dooly/store/ingest.hpp"
#include "support/small_trace.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using nlohmann::json;
using testing::TempDir;

std::string write_json(const TempDir& dir, const std::string& name, const json& j) {
  const std::string path = dir.file(name);
  std::ofstream(path) << j.dump();
  return path;
}

json toy(const std::string& model, const std::string& dtype = "float32") {
  json j = testing::small_trace();
  j["model"] = model;
  j["dtype"] = dtype;
  j["device"] = "cpu";
  j["engine_info"] = {{"engine", "hf-transformers"}, {"transformers_version", "5.17.0"}, {"torch_version", "2.11.0"},
                      {"kv_dtype", dtype}, {"block_size", 256}};
  return j;
}

TEST(Ingest, CountsNewAndSharedOpSignatures) {
  TempDir dir;
  Store db = Store::open(dir.file("d.sqlite"));
  const std::vector<std::string> paths = {write_json(dir, "a.json", toy("toy-a")), write_json(dir, "b.json", toy("toy-b"))};
  int64_t op_sigs = 0, module_sigs = 0;
  for (const auto& u : signature::count_units(trace::read_trace(paths[0]))) ++(u.sig.is_op ? op_sigs : module_sigs);
  ASSERT_GE(op_sigs, 3);  // mul, add, neg at least
  const IngestSummary s = ingest_traces(db, paths);
  ASSERT_EQ(s.traces.size(), 2u);
  // 7 ops: mul and add in each of three layers, neg in the root. How many distinct op signatures they make is
  // dooly::signature's rule (counted here from count_units); the second model has the same ops and shares all.
  EXPECT_EQ(s.traces[0].model, "toy-a");
  EXPECT_EQ(s.traces[0].backend, "paged|sdpa");
  EXPECT_EQ(s.traces[0].path, paths[0]);
  EXPECT_EQ(s.traces[0].ops, 7);
  EXPECT_EQ(s.traces[0].unique_ops, op_sigs);
  EXPECT_EQ(s.traces[0].new_ops, op_sigs);
  EXPECT_EQ(s.traces[1].new_ops, 0);
  EXPECT_EQ(s.traces[1].shared_ops(), op_sigs);
  EXPECT_EQ(s.total_ops, 14);
  EXPECT_EQ(s.unique_ops, op_sigs);
  EXPECT_EQ(s.unique_modules, module_sigs);
  EXPECT_EQ(s.new_modules, s.unique_modules);
  EXPECT_GT(s.unique_modules, 0);
  EXPECT_EQ(s.traces[0].provenance_id, s.traces[1].provenance_id);
  const Summary stored = db.summary();
  EXPECT_EQ(stored.models, 2);
  EXPECT_EQ(stored.provenances, 1);
  EXPECT_EQ(stored.signatures, op_sigs + module_sigs);
  const Provenance p = db.provenances().at(0);
  EXPECT_EQ(p.gpu_name, "cpu");
  EXPECT_EQ(p.engine_version, "5.17.0");
  EXPECT_EQ(p.block_size, 256);
  EXPECT_EQ(json::parse(p.extra_json).at("trace_format"), trace::kTraceFormatVersion);

  // Again: nothing new, the occurrence rows replaced rather than added.
  const IngestSummary again = ingest_traces(db, std::vector<std::string>{paths[0]});
  EXPECT_EQ(again.traces[0].new_ops, 0);
  EXPECT_EQ(again.traces[0].shared_ops(), op_sigs);
  EXPECT_EQ(again.new_modules, 0);
  EXPECT_EQ(db.summary().occurrence_rows, stored.occurrence_rows);
  EXPECT_EQ(db.summary().occurrences, stored.occurrences);
}

TEST(Ingest, ChecksEveryTraceBeforeWritingAny) {
  TempDir dir;
  Store db = Store::open(dir.file("d.sqlite"));
  json old = toy("toy-old");
  old["version"] = 1;
  const std::vector<std::string> paths = {write_json(dir, "good.json", toy("toy-a")), write_json(dir, "old.json", old)};
  try {
    ingest_traces(db, paths);
    FAIL() << "a version-1 trace was ingested";
  } catch (const InputError& e) {
    EXPECT_EQ(e.problem(), paths[1] + ": trace format version 1 is not supported (this build reads version 3)");
  }
  EXPECT_EQ(db.summary().models, 0);
  EXPECT_EQ(db.summary().signatures, 0);
  json bad_kind = toy("toy-b");
  bad_kind["steps"][0]["kind"] = "warmup";
  const std::vector<std::string> bad = {write_json(dir, "kind.json", bad_kind)};
  EXPECT_THROW(ingest_traces(db, bad), InputError);
  EXPECT_EQ(db.summary().signatures, 0);
  EXPECT_THROW(ingest_traces(db, std::vector<std::string>{}), InputError);

  // By path: the store is opened only after the traces passed, so a bad one leaves no file behind.
  const std::string fresh = dir.file("fresh.sqlite");
  EXPECT_THROW(ingest_traces(fresh, paths), InputError);
  EXPECT_FALSE(std::filesystem::exists(fresh));
  EXPECT_EQ(ingest_traces(fresh, std::vector<std::string>{paths[0]}).traces.at(0).model, "toy-a");
  EXPECT_EQ(Store::open(fresh, Store::Mode::read_only).summary().models, 1);
}

// Format 3 only tells apart what format 2 merged (strided inputs), so a store of format-2 traces takes format-3
// traces of the same context: its signatures and measurements stay; the model's format-2 occurrences give way.
TEST(Ingest, ALaterCompatibleFormatSupersedesTheModelsOccurrences) {
  TempDir dir;
  Store db = Store::open(dir.file("d.sqlite"));
  json v2 = toy("toy-a");
  v2["version"] = 3;  // written as format 3, then recorded as the format-2 ingest a store of the last build holds
  const std::string path = write_json(dir, "a.json", v2);
  Provenance old = provenance_of(trace::read_trace(path));
  json extra = json::parse(old.extra_json);
  extra["trace_format"] = 2;
  old.extra_json = extra.dump();
  const int64_t old_id = db.upsert_provenance(old);
  const int64_t model_id = db.upsert_model({0, "toy-a", "", "", "abc"});
  const auto sig = db.upsert_signature(std::string(64, 'a'), "mm", SignatureKind::op, "{}");
  db.add_occurrences(model_id, old_id, sig.id, Phase::prefill, 4);
  const IngestSummary s = ingest_traces(db, std::vector<std::string>{path});
  const int64_t new_id = s.traces.at(0).provenance_id;
  EXPECT_NE(new_id, old_id);
  EXPECT_EQ(s.traces.at(0).model_id, model_id);
  EXPECT_TRUE(db.signatures_of_model(model_id, old_id).empty()) << "the format-2 occurrences were superseded";
  EXPECT_FALSE(db.signatures_of_model(model_id, new_id).empty());
  EXPECT_TRUE(db.find_signature(std::string(64, 'a'))) << "signatures (and their measurements) stay";
}

// A store written by a build of trace format 1 holds that context's old signatures: traces of a later format of the
// same context would sit next to them, two hashes for one unit of work, each profiled.
TEST(Ingest, RefusesTwoTraceFormatsUnderOneContext) {
  TempDir dir;
  Store db = Store::open(dir.file("d.sqlite"));
  const std::string path = write_json(dir, "a.json", toy("toy-a"));
  Provenance v1 = provenance_of(trace::read_trace(path));
  json extra = json::parse(v1.extra_json);
  extra["trace_format"] = 1;
  v1.extra_json = extra.dump();
  const int64_t v1_id = db.upsert_provenance(v1);
  try {
    ingest_traces(db, std::vector<std::string>{path});
    FAIL() << "format 3 was mixed with format 1";
  } catch (const ConflictError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path + " is trace format 3, but provenance " + std::to_string(v1_id)), std::string::npos) << what;
    EXPECT_NE(what.find("holds traces of trace format 1"), std::string::npos) << what;
    EXPECT_NE(what.find("ingest into a new store"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_EQ(db.summary().models, 0);
  EXPECT_EQ(db.summary().provenances, 1);

  // Another context (bfloat16) traced at format 1 does not block this one.
  Store other = Store::open(dir.file("e.sqlite"));
  Provenance bf16 = v1;
  bf16.dtype = "bfloat16";
  other.upsert_provenance(bf16);
  const IngestSummary ok = ingest_traces(other, std::vector<std::string>{path});
  EXPECT_GE(ok.traces.at(0).new_ops, 3);
  EXPECT_EQ(ok.traces.at(0).new_ops, ok.traces.at(0).unique_ops);
  EXPECT_EQ(other.summary().provenances, 2);
}

}  // namespace
}  // namespace dooly::store
