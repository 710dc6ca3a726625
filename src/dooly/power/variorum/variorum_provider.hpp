#pragma once
// Node, CPU, memory and GPU power through LLNL Variorum (>= 0.8: variorum_get_power_json), dlopen'ed.
#include <memory>

#include "dooly/power/power_source.hpp"

namespace dooly::power {

std::unique_ptr<Provider> make_variorum_provider();

}  // namespace dooly::power
