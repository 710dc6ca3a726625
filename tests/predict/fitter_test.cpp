// Fitting a store: what is stored, that it round-trips, that unchanged points are not refitted, that changed,
// gone and forced ones are; and that predictions flag what lies outside the measured region.
#include "dooly/predict/fitter.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "dooly/store/store.hpp"
#include "predict/tiny_store.hpp"
#include "support/temp_dir.hpp"

namespace dooly::predict {
namespace {

using store::PredictorTarget;
using testing::TinyStore;

class FitterTest : public ::testing::Test {
 protected:
  FitterTest() : db(store::Store::open(dir.file("tiny.sqlite"))), t(testing::build_tiny_store(db)) {}
  testing::TempDir dir;
  store::Store db;
  TinyStore t;
};

// Predictors with points: linear, the two sdpa, index_select (latency and energy each), mean (latency only, no
// energy), the engine (latency only).
constexpr size_t kPredictors = 4 * 2 + 1 + 1;

TEST_F(FitterTest, FitsEveryTargetWithPointsAndStoresWhatItChose) {
  const FitReport r = fit_store(db);
  EXPECT_EQ(r.provenances, std::vector<int64_t>{t.measured});
  EXPECT_EQ(r.signatures, 6u);
  EXPECT_EQ(r.fitted, kPredictors);
  EXPECT_EQ(db.summary().predictors, static_cast<int64_t>(kPredictors));
  const auto linear = db.predictor(t.linear, t.measured, PredictorTarget::latency_s);
  ASSERT_TRUE(linear);
  EXPECT_EQ(linear->points, 13);
  EXPECT_EQ(linear->grid_sha256, "g");
  EXPECT_EQ(linear->code_version, predictor_code_version);
  ASSERT_TRUE(linear->held_out_mape);
  EXPECT_LT(*linear->held_out_mape, 1e-6);  // an affine cost: recovered exactly
  const auto mean = db.predictor(t.mean, t.measured, PredictorTarget::latency_s);
  ASSERT_TRUE(mean);
  EXPECT_EQ(mean->model, "constant");
  EXPECT_FALSE(mean->held_out_mape);  // one point: nothing held out
  EXPECT_FALSE(db.predictor(t.mean, t.measured, PredictorTarget::energy_j));
  const nlohmann::json eval =
      nlohmann::json::parse(db.predictor(t.sdpa_cache, t.measured, PredictorTarget::latency_s)->evaluation_json);
  EXPECT_EQ(eval["basis"], "interior");
  EXPECT_EQ(eval["candidates"].size(), default_candidates().all().size());
}

TEST_F(FitterTest, StoredPredictorsPredictAsTheFittedOnes) {
  fit_store(db);
  for (const int64_t sig : {t.linear, t.sdpa_prefill, t.sdpa_cache, t.index_select}) {
    const SignatureData data = load_measured(db, sig, t.measured);
    for (const auto target : {PredictorTarget::latency_s, PredictorTarget::energy_j}) {
      const Predictor stored = Predictor::from_record(*db.predictor(sig, t.measured, target));
      const auto fitted = fit_target(data, target);
      ASSERT_TRUE(fitted);
      for (double tok : {1.0, 3.0, 100.0, 700.0, 4096.0, 9000.0}) {
        std::vector<double> x(data.quantities.size(), tok);
        if (x.size() == 2) x[0] = 4 * tok;  // KV_TOKS, NUM_TOKS
        const Prediction a = stored.predict(x), b = fitted->predictor.predict(x);
        EXPECT_DOUBLE_EQ(a.value, b.value) << sig << " " << tok;
        EXPECT_EQ(a.outside, b.outside);
      }
    }
  }
}

// A regression chosen for its error between the points may miss a measured point; anchored, the predictor returns
// the measurement there, and the model everywhere else.
TEST(Predictor, AnchorsReturnTheMeasuredValueAtAMeasuredPoint) {
  SignatureData data;
  data.quantities = {"KV_TOKS", "NUM_TOKS"};
  Samples samples;
  samples.dims = 2;
  std::vector<double> x, y, hw;
  for (double kv : {1024.0, 4096.0, 16384.0})
    for (double t : {1.0, 16.0, 64.0}) {
      // A product law, except one irregular point (cuDNN at a padded shape).
      const double v = kv == 16384.0 && t == 16.0 ? 9e-4 : 1e-8 * kv * t;
      x.insert(x.end(), {kv, t});
      y.push_back(v);
      hw.push_back(0.01 * v);  // timed to 1 %
    }
  Domain domain = Domain::of_points(data.quantities, x, y.size());
  // c0 + c1 KV + c2 T + c3 KV T, with only the product term.
  Predictor p(domain, load_model(default_candidates(), "ls_product",
                                 nlohmann::json::parse(R"({"dims": 2, "coef": [0, 0, 0, 1e-8]})")));
  EXPECT_NEAR(p.predict(std::vector<double>{16384.0, 16.0}).value, 1e-8 * 16384 * 16, 1e-12);
  p.anchor(x, y, hw);
  EXPECT_EQ(p.anchors(), 1u);  // the one point the model misses; the others agree with it within their 1 %
  const Prediction at = p.predict(std::vector<double>{16384.0, 16.0});
  EXPECT_DOUBLE_EQ(at.value, 9e-4);
  EXPECT_FALSE(at.outside);
  EXPECT_NEAR(p.predict(std::vector<double>{16384.0, 17.0}).value, 1e-8 * 16384 * 17, 1e-12);  // not measured
  EXPECT_NEAR(p.predict(std::vector<double>{1024.0, 1.0}).value, 1e-8 * 1024, 1e-15);          // measured = model there
  const Predictor copy = p;  // step models copy predictors: the anchors come along
  EXPECT_DOUBLE_EQ(copy.predict(std::vector<double>{16384.0, 16.0}).value, 9e-4);
  // An interpolating model passes through its points already: no anchors kept.
  samples.x = x;
  samples.y = y;
  Predictor interp(domain, default_candidates().find("interp_linear")->fit(samples));
  interp.anchor(x, y, hw);
  EXPECT_EQ(interp.anchors(), 0u);
  EXPECT_NEAR(interp.predict(std::vector<double>{16384.0, 16.0}).value, 9e-4, 1e-15);
  // A noisy point (the engine's host time: a wide spread over steps) within its spread of the model is not anchored.
  Predictor noisy(domain, load_model(default_candidates(), "ls_product",
                                     nlohmann::json::parse(R"({"dims": 2, "coef": [0, 0, 0, 1e-8]})")));
  std::vector<double> wide = hw;
  wide[7] = 2e-3;  // the irregular point's interval covers the model's 2.6e-3
  noisy.anchor(x, y, wide);
  EXPECT_EQ(noisy.anchors(), 0u);
}

TEST_F(FitterTest, UnchangedPointsAreNotRefitted) {
  fit_store(db);
  db.database().execute("UPDATE predictors SET fitted_at_unix_s = 1");
  const FitReport again = fit_store(db);
  EXPECT_EQ(again.fitted, 0u);
  EXPECT_EQ(again.unchanged, kPredictors);
  EXPECT_EQ(again.removed, 0u);
  EXPECT_EQ(db.database().query_int64("SELECT count(*) FROM predictors WHERE fitted_at_unix_s <> 1"), 0);
}

TEST_F(FitterTest, ChangedGoneAndForcedPointsAreRefitted) {
  fit_store(db);
  db.database().execute("UPDATE predictors SET fitted_at_unix_s = 1");
  // A new point of linear: both of its targets change, nothing else.
  db.insert_measurement(testing::tiny_point(t.linear, t.measured, R"({"NUM_TOKS":8192})", TinyStore::linear_s(8192)));
  FitReport r = fit_store(db);
  EXPECT_EQ(r.fitted, 2u);
  EXPECT_EQ(r.unchanged, kPredictors - 2);
  EXPECT_EQ(db.predictor(t.linear, t.measured, PredictorTarget::latency_s)->points, 14);
  // A point measured again (a newer row under the same key) replaces the older one.
  db.insert_measurement(
      testing::tiny_point(t.linear, t.measured, R"({"NUM_TOKS":8192})", 2 * TinyStore::linear_s(8192)));
  EXPECT_EQ(fit_store(db).fitted, 2u);
  EXPECT_EQ(db.predictor(t.linear, t.measured, PredictorTarget::latency_s)->points, 14);
  // Energy gone from every point of index_select: its energy predictor is removed.
  db.database().execute(fmt::format("UPDATE measurements SET energy_j = NULL WHERE signature_id = {}", t.index_select));
  r = fit_store(db);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.fitted, 0u);
  EXPECT_FALSE(db.predictor(t.index_select, t.measured, PredictorTarget::energy_j));
  FitOptions force;
  force.force = true;
  EXPECT_EQ(fit_store(db, force).fitted, kPredictors - 1);
}

TEST_F(FitterTest, AProvenanceWithoutMeasurementsIsRefusedInOneLine) {
  FitOptions o;
  o.provenance_id = t.traced;
  try {
    fit_store(db, o);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("store {} holds no measurements under provenance {} — pick a provenance that holds "
                          "measurements (`dooly store info`), or measure under it first (`dooly profile`)",
                          db.path(), t.traced));
  }
  EXPECT_EQ(db.summary().predictors, 0);
}

TEST_F(FitterTest, PredictionsFlagWhatLiesOutsideTheMeasuredRegion) {
  fit_store(db);
  const Predictor prefill =
      Predictor::from_record(*db.predictor(t.sdpa_prefill, t.measured, PredictorTarget::latency_s));
  EXPECT_FALSE(prefill.predict(std::vector<double>{300, 300}).outside);   // KV == T, inside the range
  EXPECT_TRUE(prefill.predict(std::vector<double>{900, 300}).outside);    // off the diagonal it was measured on
  EXPECT_TRUE(prefill.predict(std::vector<double>{8192, 8192}).outside);  // beyond the range
  EXPECT_NEAR(prefill.predict(std::vector<double>{300, 300}).value, TinyStore::sdpa_prefill_s(300), 1e-12);
  const Predictor cache = Predictor::from_record(*db.predictor(t.sdpa_cache, t.measured, PredictorTarget::latency_s));
  EXPECT_FALSE(cache.predict(std::vector<double>{2000, 100}).outside);  // KV_TOKS, NUM_TOKS
  EXPECT_TRUE(cache.predict(std::vector<double>{100000, 100}).outside);
  // Extrapolation is flagged, and still no less than the nearest measured value.
  EXPECT_GE(cache.predict(std::vector<double>{100000, 100}).value, TinyStore::sdpa_cache_s(100, 16384) * 0.999);
}

}  // namespace
}  // namespace dooly::predict
