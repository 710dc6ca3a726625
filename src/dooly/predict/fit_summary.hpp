#pragma once
// The held-out error of a store's predictors by op class (`dooly predict fit` prints it): per class, the signatures
// and points, and the held-out MAPE of latency and of energy pooled over the held-out points (each point counts
// once; the interior points the selection compared, docs/predict.md). Attention is split by the kind of step each
// point was (prefill chunk, decode batch, mixed step).
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dooly/predict/op_class.hpp"
#include "dooly/predict/selection.hpp"

namespace dooly::store {
class Store;
}

namespace dooly::predict {

struct ClassSummary {
  size_t signatures = 0;  // with a latency predictor in this class
  size_t points = 0;      // measured points of their latency predictors
  ErrorTally latency, energy;
  std::map<std::string, size_t> models;  // how often each candidate was chosen (both targets; an attention
                                         // signature in each class it has points in)
};

struct FitSummary {
  std::array<ClassSummary, op_class_count> by_class;
  ErrorTally latency, energy;  // all classes
  size_t predictors = 0;
};

// Over every predictor stored under the provenance.
FitSummary summarize_predictors(store::Store& store, int64_t provenance_id);

}  // namespace dooly::predict
