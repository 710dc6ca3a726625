#include "dooly/predict/predictor.hpp"

#include <map>

#include "dooly/common/error.hpp"

namespace dooly::predict {

Predictor::Predictor(Domain domain, std::unique_ptr<Model> model)
    : domain_(std::move(domain)), model_(std::move(model)) {}

Predictor Predictor::from_record(const store::PredictorRecord& record, const CandidateRegistry& registry) {
  const nlohmann::json params = nlohmann::json::parse(record.params_json, nullptr, false);
  if (!params.is_object() || !params.contains("domain") || !params.contains("model"))
    DOOLY_THROW(InputError, "refit the store's predictors (`dooly predict fit --db FILE`)",
                "predictor of signature {} ({}) lacks its domain or model parameters", record.signature_id,
                store::to_string(record.target));
  return Predictor(Domain::from_json(params["domain"]), load_model(registry, record.model, params["model"]));
}

void Predictor::anchor(std::span<const double> x, std::span<const double> y) {
  const std::string_view name = model_->name();
  if (name == "interp_linear" || name == "interp_loglog" || y.empty()) return;  // through the points already
  const size_t dims = domain_.dims(), free_dims = domain_.free_dims();
  if (x.size() != y.size() * dims)
    DOOLY_THROW(InputError, "this is a dooly bug: report it", "{} anchor values for {} points of {} quantities",
                x.size(), y.size(), dims);
  std::map<std::vector<double>, std::pair<double, int>> points;  // free coordinates -> (sum, count)
  double free[max_quantities];
  for (size_t i = 0; i < y.size(); ++i) {
    if (!domain_.reduce(x.subspan(i * dims, dims), std::span<double>(free, max_quantities))) continue;
    auto& [sum, n] = points[std::vector<double>(free, free + free_dims)];
    sum += y[i];
    ++n;
  }
  auto a = std::make_shared<Anchors>();
  a->dims = free_dims;
  for (const auto& [at, sum_n] : points) {  // std::map: lexicographic order
    a->x.insert(a->x.end(), at.begin(), at.end());
    a->y.push_back(sum_n.first / sum_n.second);
  }
  anchors_ = std::move(a);
}

}  // namespace dooly::predict
