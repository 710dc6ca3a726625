#include "dooly/predict/predictor.hpp"

#include <algorithm>
#include <cmath>
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

void Predictor::anchor(std::span<const double> x, std::span<const double> y, std::span<const double> hw) {
  if (y.empty()) return;
  const size_t dims = domain_.dims(), free_dims = domain_.free_dims();
  if (x.size() != y.size() * dims || hw.size() != y.size())
    DOOLY_THROW(InputError, "this is a dooly bug: report it",
                "{} anchor values and {} half-widths for {} points of {} quantities", x.size(), hw.size(), y.size(),
                dims);
  struct Point {
    double sum = 0, hw = 0;
    int n = 0;
  };
  std::map<std::vector<double>, Point> points;  // free coordinates -> the values there
  double free[max_quantities];
  for (size_t i = 0; i < y.size(); ++i) {
    if (!domain_.reduce(x.subspan(i * dims, dims), std::span<double>(free, max_quantities))) continue;
    Point& p = points[std::vector<double>(free, free + free_dims)];
    p.sum += y[i];
    p.hw = std::max(p.hw, hw[i]);
    ++p.n;
  }
  auto a = std::make_shared<Anchors>();
  a->dims = free_dims;
  for (const auto& [at, p] : points) {  // std::map: lexicographic order
    const double measured = p.sum / p.n;
    if (std::abs(model_->evaluate(at) - measured) <= p.hw) continue;  // the model is within the point's precision
    a->x.insert(a->x.end(), at.begin(), at.end());
    a->y.push_back(measured);
  }
  if (!a->y.empty()) anchors_ = std::move(a);
}

}  // namespace dooly::predict
