#include "dooly/predict/constant.hpp"

#include <algorithm>
#include <string>

#include "dooly/predict/json_numbers.hpp"

namespace dooly::predict {
namespace {

class Constant final : public Model {
 public:
  explicit Constant(double value) : value_(compact(value)) {}
  std::string_view name() const noexcept override { return "constant"; }
  double evaluate(std::span<const double>) const noexcept override { return value_; }
  nlohmann::json params() const override { return {{"value", value_}}; }

 private:
  double value_;
};

std::unique_ptr<Model> fit(const Samples& s) {
  if (s.rows() == 0) return nullptr;
  std::vector<double> y = s.y;
  std::sort(y.begin(), y.end());
  const size_t n = y.size();
  return std::make_unique<Constant>(n % 2 == 1 ? y[n / 2] : (y[n / 2 - 1] + y[n / 2]) / 2);
}

std::unique_ptr<Model> load(const nlohmann::json& params) {
  if (!params.is_object() || !params.contains("value") || !params["value"].is_number())
    DOOLY_THROW(InputError, "refit the store's predictors (`dooly predict fit --db FILE`)",
                "constant parameters lack a value: '{}'", params.dump().substr(0, 80));
  return std::make_unique<Constant>(params["value"].get<double>());
}

}  // namespace

Candidate constant_candidate() { return {"constant", fit, load}; }

}  // namespace dooly::predict
