#include "dooly/predict/fitter.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "dooly/common/error.hpp"
#include "dooly/store/store.hpp"

namespace dooly::predict {
namespace {

nlohmann::json tally_json(const ErrorTally& t) {
  const auto m = t.mape();
  return nlohmann::json::array({m ? nlohmann::json(std::round(*m * 1e6) / 1e6) : nlohmann::json(nullptr), t.n});
}

// The held-out errors in detail: the basis compared, the chosen candidate's interior and extrapolated errors, its
// interior errors by point kind, the points by kind, and every candidate's error on the basis (null: not
// applicable).
std::string evaluation_json(const Selection& s, std::span<const PointKind> kinds) {
  const CandidateScore& chosen = s.scores[s.chosen];
  nlohmann::json by_kind = nlohmann::json::object();
  for (size_t k = 0; k < point_kind_count; ++k) {
    const ErrorTally& t = s.interior_basis ? chosen.interior_by_kind[k] : chosen.all_by_kind[k];
    if (t.n > 0) by_kind[std::string(to_string(static_cast<PointKind>(k)))] = tally_json(t);
  }
  nlohmann::json points = nlohmann::json::object();
  for (const PointKind k : kinds) {
    auto& n = points[std::string(to_string(k))];
    n = n.is_null() ? 1 : n.get<size_t>() + 1;
  }
  nlohmann::json candidates = nlohmann::json::object();
  for (const CandidateScore& c : s.scores) {
    ErrorTally t = c.interior;
    if (!s.interior_basis) t.add(c.extrapolated);
    const auto m = c.applicable ? t.mape() : std::nullopt;
    candidates[c.name] = m ? nlohmann::json(std::round(*m * 1e6) / 1e6) : nlohmann::json(nullptr);
  }
  return nlohmann::json{{"basis", s.interior_basis ? "interior" : "all"},
                        {"interior", tally_json(chosen.interior)},
                        {"extrapolated", tally_json(chosen.extrapolated)},
                        {"by_kind", by_kind},
                        {"points_by_kind", points},
                        {"candidates", candidates}}
      .dump();
}

using Key = std::pair<int64_t, store::PredictorTarget>;

}  // namespace

std::optional<FitResult> fit_target(const SignatureData& data, store::PredictorTarget target,
                                    const CandidateRegistry& registry, const CrossValidation& cv) {
  const TargetPoints points = target_points(data, target);
  if (points.rows() == 0) return std::nullopt;
  Domain domain = Domain::of_points(data.quantities, points.x, points.rows());
  Samples samples;
  samples.dims = domain.free_dims();
  double free[max_quantities];
  const size_t dims = data.quantities.size();
  for (size_t i = 0; i < points.rows(); ++i) {
    domain.reduce(std::span<const double>(points.x.data() + i * dims, dims), std::span<double>(free, max_quantities));
    samples.add(std::span<const double>(free, samples.dims), points.y[i]);
  }
  Selection selection = select_model(samples, points.kinds, registry, cv);
  store::PredictorRecord r;
  r.signature_id = data.signature_id;
  r.provenance_id = data.provenance_id;
  r.target = target;
  r.model = std::string(selection.model->name());
  r.params_json = nlohmann::json{{"domain", domain.to_json()}, {"model", selection.model->params()}}.dump();
  r.held_out_mape = selection.held_out_mape;
  r.points = static_cast<int64_t>(points.rows());
  r.data_sha256 = data_sha256(data, points, target);
  r.grid_sha256 = grid_sha256(points);
  r.code_version = std::string(predictor_code_version);
  r.evaluation_json = evaluation_json(selection, points.kinds);
  return FitResult{std::move(r), Predictor(std::move(domain), std::move(selection.model))};
}

std::vector<int64_t> measured_provenances(store::Store& store) {
  store::Statement s = store.database().prepare(
      "SELECT DISTINCT provenance_id FROM measurements WHERE status = 'ok' AND point_key <> '' ORDER BY 1");
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.column_int64(0));
  return out;
}

namespace {

// Fits what changed under one provenance (inside the caller's transaction).
void fit_provenance(store::Store& store, int64_t prov, const FitOptions& options, FitReport& report) {
  std::map<Key, store::PredictorRecord> existing;
  for (store::PredictorRecord& r : store.predictors(prov))
    existing.emplace(Key{r.signature_id, r.target}, std::move(r));
  for (const SignatureData& data : load_measured(store, prov)) {
    ++report.signatures;
    for (const auto target : {store::PredictorTarget::latency_s, store::PredictorTarget::energy_j}) {
      const TargetPoints points = target_points(data, target);
      if (points.rows() == 0) continue;  // a predictor stored for it stays in `existing`: removed below
      const auto found = existing.find({data.signature_id, target});
      const bool same = found != existing.end() && found->second.data_sha256 == data_sha256(data, points, target) &&
                        found->second.code_version == predictor_code_version;
      if (found != existing.end()) existing.erase(found);
      if (same && !options.force) {
        ++report.unchanged;
        continue;
      }
      if (auto fitted = fit_target(data, target, default_candidates(), options.cv)) {
        store.upsert_predictor(fitted->record);
        ++report.fitted;
      }
    }
  }
  for (const auto& [key, record] : existing) {  // points gone (energy never measured, rows removed)
    store.delete_predictor(key.first, prov, key.second);
    ++report.removed;
  }
}

}  // namespace

FitReport fit_store(store::Store& store, const FitOptions& options) {
  FitReport report;
  const std::vector<int64_t> measured = measured_provenances(store);
  if (options.provenance_id) {
    if (std::find(measured.begin(), measured.end(), *options.provenance_id) == measured.end())
      DOOLY_THROW(InputError,
                  "pick a provenance that holds measurements (`dooly store info`), or measure under it first "
                  "(`dooly profile`)",
                  "store {} holds no measurements under provenance {}", store.path(), *options.provenance_id);
    report.provenances = {*options.provenance_id};
  } else {
    report.provenances = measured;
  }
  auto tx = store.transaction();
  for (const int64_t prov : report.provenances) fit_provenance(store, prov, options, report);
  tx.commit();
  return report;
}

}  // namespace dooly::predict
