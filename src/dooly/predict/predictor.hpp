#pragma once
// A fitted predictor of one target of one signature: the measured region (Domain) and the chosen model. Every
// prediction says whether it lies outside the measured region; outside, the value is the model's own extension
// (docs/predict.md), to be counted, not trusted.
#include <memory>
#include <span>

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
    return {model_->evaluate(std::span<const double>(free, domain_.free_dims())), !inside};
  }

  const Domain& domain() const noexcept { return domain_; }
  const Model& model() const noexcept { return *model_; }

 private:
  Domain domain_;
  std::shared_ptr<const Model> model_;  // shared: copies of a predictor (step models) share one model
};

}  // namespace dooly::predict
