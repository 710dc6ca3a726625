#pragma once
// A fitted predictor of one target of one signature: the measured region (Domain) and the chosen model. Every
// prediction says whether it lies outside the measured region; outside, the value is the model's own extension
// (docs/predict.md), to be counted, not trusted. With anchors (the measured points themselves, anchor()), a
// prediction at a measured point is that point's measured value, whatever the model: a regression chosen for its
// held-out error between the points may miss an irregular surface at the points (cuDNN's attention at a CUDA
// graph's padded shape: 187 µs from the model, 427 µs measured).
#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "dooly/predict/domain.hpp"
#include "dooly/predict/model.hpp"
#include "dooly/store/records.hpp"

namespace dooly::predict {

struct Prediction {
  double value = 0;      // seconds or joules per call
  bool outside = false;  // beyond the measured range of a quantity, off an alias, or outside the hull
};

class Predictor {
 public:
  Predictor(Domain domain, std::unique_ptr<Model> model);
  // Rebuilds a stored predictor (params_json = {"domain": ..., "model": ...}); throws InputError when malformed.
  static Predictor from_record(const store::PredictorRecord& record,
                               const CandidateRegistry& registry = default_candidates());

  // x: the values of domain().quantities(), in that order. No allocation.
  Prediction predict(std::span<const double> x) const noexcept {
    double free[max_quantities];
    const bool inside = domain_.reduce(x, std::span<double>(free, max_quantities));
    const std::span<const double> at(free, domain_.free_dims());
    if (anchors_ && inside)
      if (const double* measured = anchors_->find(at)) return {*measured, false};
    return {model_->evaluate(at), !inside};
  }

  // Anchors the predictor at the measured points the model misses by more than their own precision: x row-major
  // over domain().quantities() (as predict takes them), y the measured values, hw their 95 % half-widths (0: exact;
  // points at the same free coordinates are averaged). A precise point the model misses (a unit timed to 1 %) is
  // anchored; a noisy one within its spread of the model (the engine's host time per step) is not, nor any point of
  // a model that interpolates (it passes through its points). Call before sharing copies.
  void anchor(std::span<const double> x, std::span<const double> y, std::span<const double> hw);
  size_t anchors() const noexcept { return anchors_ ? anchors_->y.size() : 0; }

  const Domain& domain() const noexcept { return domain_; }
  const Model& model() const noexcept { return *model_; }

 private:
  struct Anchors {
    size_t dims = 0;
    std::vector<double> x;  // free coordinates, rows sorted lexicographically
    std::vector<double> y;
    const double* find(std::span<const double> at) const noexcept {
      size_t lo = 0, hi = y.size();
      while (lo < hi) {  // the first row not below `at`
        const size_t mid = (lo + hi) / 2;
        const double* r = x.data() + mid * dims;
        if (std::lexicographical_compare(r, r + dims, at.begin(), at.end()))
          lo = mid + 1;
        else
          hi = mid;
      }
      return lo < y.size() && std::equal(at.begin(), at.end(), x.data() + lo * dims) ? &y[lo] : nullptr;
    }
  };

  Domain domain_;
  std::shared_ptr<const Model> model_;      // shared: copies of a predictor (step models) share one model
  std::shared_ptr<const Anchors> anchors_;  // null: none
};

}  // namespace dooly::predict
