#pragma once
// Fitting predictors: per (signature, measurement provenance, target) the candidate chosen by held-out error
// (selection.hpp) on the measured region's free quantities (domain.hpp), written to the store's `predictors` table
// with the hash of the points it was fitted to. A fit on unchanged points writes nothing.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "dooly/predict/dataset.hpp"
#include "dooly/predict/predictor.hpp"
#include "dooly/predict/selection.hpp"
#include "dooly/store/records.hpp"

namespace dooly::store {
class Store;
}

namespace dooly::predict {

// What produced a stored predictor. Change it when a candidate, the selection or the stored parameters change:
// every predictor is then refitted once. v2: interpolation extends outside its points by clamp-and-scale.
inline constexpr std::string_view predictor_code_version = "dooly-predict v2";

struct FitResult {
  store::PredictorRecord record;
  Predictor predictor;
};

// Fits one target of one signature's points; nullopt when it has none (no energy was measured, say).
std::optional<FitResult> fit_target(const SignatureData& data, store::PredictorTarget target,
                                    const CandidateRegistry& registry = default_candidates(),
                                    const CrossValidation& cv = {});

struct FitOptions {
  std::optional<int64_t> provenance_id;  // default: every provenance holding ok, keyed measurements
  bool force = false;                    // refit even where the points are unchanged
  CrossValidation cv;
};

struct FitReport {
  std::vector<int64_t> provenances;
  size_t signatures = 0;  // with measured points
  size_t fitted = 0;      // predictors written (new or changed points, or a new code version)
  size_t unchanged = 0;   // left as they were
  size_t removed = 0;     // whose points are gone
};

// The provenances holding ok measurements with point keys, by id.
std::vector<int64_t> measured_provenances(store::Store& store);

// Fits what changed, in one transaction. Throws InputError when `provenance_id` holds no measurements.
FitReport fit_store(store::Store& store, const FitOptions& options = {});

}  // namespace dooly::predict
