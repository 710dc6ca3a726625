#pragma once
// Which candidate predicts a signature's target: the one with the lowest held-out error (MAPE, mean |pred - y| / y)
// under k-fold cross-validation over its measured points.
//
// Folds: leave-one-out up to `loo_up_to` points, else `folds` folds dealt from a fixed-seed shuffle (the same points
// always give the same folds). A held-out point is *interior* when every free quantity lies within the range of
// its fold's training points: there the model interpolates, which is what a prediction inside the measured region
// does. The selection compares candidates on interior held-out points (extrapolation is flagged and counted at
// prediction time, not trusted); only when no held-out point is interior (two points, say) on all of them. A
// candidate that declines a fold's points scores 100 % on that fold's held-out points. Ties go to the candidate
// registered first (the simpler one). One point: the constant, nothing held out.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dooly/predict/dataset.hpp"
#include "dooly/predict/model.hpp"

namespace dooly::predict {

struct ErrorTally {
  double sum = 0;  // of |pred - y| / y
  size_t n = 0;
  void add(double relative_error) noexcept { sum += relative_error, ++n; }
  void add(const ErrorTally& o) noexcept { sum += o.sum, n += o.n; }
  std::optional<double> mape() const noexcept {
    return n == 0 ? std::nullopt : std::optional<double>(sum / static_cast<double>(n));
  }
};

struct CandidateScore {
  std::string name;
  bool applicable = false;  // it fits all the points
  ErrorTally interior, extrapolated;
  std::array<ErrorTally, point_kind_count> interior_by_kind;  // by PointKind
  std::array<ErrorTally, point_kind_count> all_by_kind;
};

struct CrossValidation {
  size_t folds = 5;
  size_t loo_up_to = 10;
  uint64_t seed = 0x5eed5eedULL;
};

// The fold of each of n points.
std::vector<size_t> assign_folds(size_t n, const CrossValidation& cv);

struct Selection {
  std::unique_ptr<Model> model;         // the chosen candidate, fitted on all points
  std::vector<CandidateScore> scores;   // every candidate, in registry order
  size_t chosen = 0;                    // index into scores
  bool interior_basis = true;           // compared on interior held-out points (else on all)
  std::optional<double> held_out_mape;  // the chosen candidate's, on that basis; none with one point
};

// samples: free coordinates; kinds: each row's point kind. Throws InputError when no candidate fits.
Selection select_model(const Samples& samples, std::span<const PointKind> kinds, const CandidateRegistry& registry,
                       const CrossValidation& cv = {});

}  // namespace dooly::predict
