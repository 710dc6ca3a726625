// prune_contexts and vacuum: superseded measurement contexts leave a store whole, with what was measured,
// resolved and fitted under them; trace contexts and unknown ids are refused before anything is removed.
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/store/prune.hpp"
#include "dooly/store/store.hpp"
#include "store_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace dooly::store {
namespace {

using testing::h200_provenance;
using testing::hex;
using testing::point;
using testing::TempDir;

struct Fixture {
  TempDir dir;
  std::string path = dir.file("s.sqlite");
  int64_t trace = 0, old_ctx = 0, new_ctx = 0, sig = 0;

  Fixture() {
    Store s = Store::open(path);
    const int64_t llama = s.upsert_model({0, "llama", "llama", "LlamaForCausalLM", "c1"});
    trace = s.upsert_provenance(h200_provenance(R"({"trace_format":3})"));
    old_ctx = s.upsert_provenance(h200_provenance(R"({"context":"measure","inputs":"cycled"})"));
    new_ctx = s.upsert_provenance(h200_provenance(R"({"context":"measure","inputs":"warm"})"));
    sig = s.upsert_signature(hex(1), "op1", SignatureKind::op, R"({"op":1})", "{}").id;
    s.add_occurrences(llama, trace, sig, Phase::prefill, 7);
    for (int64_t ctx : {old_ctx, new_ctx}) {
      for (int tokens = 1; tokens <= 200; ++tokens) {
        Measurement m = point(sig, ctx, tokens, 1'790'000'000 + tokens);
        m.extra_json = fmt::format(R"({{"padding":"{}"}})", std::string(400, 'x'));
        s.insert_measurement(m);
      }
      s.set_resolution({sig, ctx, sig, 0, ResolutionStatus::runs, "[]", 1'790'000'010});
      PredictorRecord p;
      p.signature_id = sig;
      p.provenance_id = ctx;
      p.model = "constant";
      p.params_json = R"({"domain":{},"model":{"value":1e-5}})";
      p.points = 200;
      p.data_sha256 = std::string(64, 'd');
      p.code_version = "dooly-predict v1";
      s.upsert_predictor(p);
    }
  }
};

TEST(Prune, ASupersededContextLeavesWithItsRowsAndTheFileShrinks) {
  Fixture f;
  Store s = Store::open(f.path);
  const std::vector<ProvenanceUse> uses = s.provenance_uses();  // what store info shows, and prune checks
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].provenance.id, f.trace);
  EXPECT_EQ(uses[0].occurrence_rows, 1);
  EXPECT_EQ(uses[0].measurements, 0);
  EXPECT_EQ(uses[1].occurrence_rows, 0);
  EXPECT_EQ(uses[1].measurements, 200);
  const std::vector<int64_t> ids = {f.old_ctx};
  const PruneSummary p = prune_contexts(s, ids);
  EXPECT_EQ(p.contexts, 1);
  EXPECT_EQ(p.measurements, 200);
  EXPECT_EQ(p.resolutions, 1);
  EXPECT_EQ(p.predictors, 1);
  EXPECT_GT(vacuum(s), 200 * 400);  // the padded rows' pages went back
  const Summary sum = s.summary();
  EXPECT_EQ(sum.measurements, 200);
  EXPECT_EQ(sum.provenances, 2);
  EXPECT_EQ(s.measurements_for(f.sig, f.new_ctx).size(), 200u);
  EXPECT_TRUE(s.resolution_of(f.sig, f.new_ctx).has_value());
  EXPECT_EQ(s.predictors(f.new_ctx).size(), 1u);
  EXPECT_EQ(s.signatures_of_model(s.models()[0].id, f.trace).size(), 1u);  // the trace is untouched
  EXPECT_EQ(s.database().query_text("PRAGMA integrity_check"), "ok");
}

TEST(Prune, TraceContextsAndUnknownIdsAreRefusedBeforeAnythingIsRemoved) {
  Fixture f;
  Store s = Store::open(f.path);
  for (const std::vector<int64_t>& ids : {std::vector<int64_t>{f.old_ctx, f.trace}, {f.old_ctx, 99}}) {
    try {
      prune_contexts(s, ids);
      ADD_FAILURE() << "pruning " << ids[1] << " was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(ids[1] == 99 ? "has no provenance 99" : "is a trace context"), std::string::npos) << what;
    }
    EXPECT_EQ(s.summary().measurements, 400);  // the valid id was not pruned either
  }
}

}  // namespace
}  // namespace dooly::store
