#include "dooly/predict/model.hpp"

#include <algorithm>
#include <string>

#include "dooly/common/error.hpp"
#include "dooly/predict/boosted_trees.hpp"
#include "dooly/predict/constant.hpp"
#include "dooly/predict/interpolation.hpp"
#include "dooly/predict/least_squares.hpp"

namespace dooly::predict {

void CandidateRegistry::add(Candidate candidate) {
  if (candidate.name.empty() || !candidate.fit || !candidate.load)
    DOOLY_THROW(InputError, "give a candidate a name, a fit and a load function", "candidate '{}' is incomplete",
                candidate.name);
  if (find(candidate.name) != nullptr)
    DOOLY_THROW(DuplicateError, "give the new candidate a name of its own",
                "a predictor candidate named '{}' is already registered", candidate.name);
  candidates_.push_back(std::move(candidate));
}

const Candidate* CandidateRegistry::find(std::string_view name) const noexcept {
  const auto it =
      std::find_if(candidates_.begin(), candidates_.end(), [&](const Candidate& c) { return c.name == name; });
  return it == candidates_.end() ? nullptr : &*it;
}

const CandidateRegistry& default_candidates() {
  static const CandidateRegistry registry = [] {
    CandidateRegistry r;
    r.add(constant_candidate());
    r.add(least_squares_candidate(FeatureSet::linear));
    r.add(least_squares_candidate(FeatureSet::product));
    r.add(interpolation_candidate(InterpolationScale::linear));
    r.add(interpolation_candidate(InterpolationScale::loglog));
    r.add(boosted_trees_candidate());
    return r;
  }();
  return registry;
}

std::unique_ptr<Model> load_model(const CandidateRegistry& registry, std::string_view name,
                                  const nlohmann::json& params) {
  const Candidate* c = registry.find(name);
  if (c == nullptr)
    DOOLY_THROW(InputError, "refit the store's predictors with this dooly (`dooly predict fit --db FILE`)",
                "unknown predictor model '{}' (this dooly knows: constant, ls_linear, ls_product, interp_linear, "
                "interp_loglog, gbt)",
                name);
  return c->load(params);
}

}  // namespace dooly::predict
