#pragma once
// Numbers in stored parameters: rounded to 10 significant digits when a model is fitted (measurements carry three
// or four), so a model evaluates the same before and after a round trip through the store, and rows stay small.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"

namespace dooly::predict {

inline double compact(double v) noexcept {
  if (!std::isfinite(v) || v == 0) return v;
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", v);
  return std::strtod(text, nullptr);
}

// The array `field` of a model's parameters; throws InputError naming the model when it is missing or not numbers.
inline std::vector<double> param_numbers(const nlohmann::json& params, const char* field, std::string_view model) {
  const char* fix = "refit the store's predictors (`dooly predict fit --db FILE`)";
  if (!params.is_object() || !params.contains(field) || !params[field].is_array())
    DOOLY_THROW(InputError, fix, "{} parameters lack the array '{}'", model, field);
  std::vector<double> out;
  for (const auto& v : params[field]) {
    if (!v.is_number()) DOOLY_THROW(InputError, fix, "{} parameter '{}' holds '{}'", model, field, v.dump());
    out.push_back(v.get<double>());
  }
  return out;
}

}  // namespace dooly::predict
