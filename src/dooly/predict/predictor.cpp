#include "dooly/predict/predictor.hpp"

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

}  // namespace dooly::predict
