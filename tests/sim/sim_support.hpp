#pragma once
// Helpers for the simulator's tests.
#include <string>

#include "dooly/sim/model_spec.hpp"

namespace dooly::sim::testing {

inline std::string models_dir() { return std::string(DOOLY_SOURCE_DIR) + "/data/models"; }
inline ModelSpec tiny(const std::string& name) { return load_model(name, models_dir() + "/tiny"); }

}  // namespace dooly::sim::testing
