#pragma once
// CPU package, DRAM, core/uncore and platform (psys) power from the Linux powercap RAPL energy counters, read
// under Options.root. A reading is the average power since the previous one (Reading.window_ns says how long).
#include <memory>

#include "dooly/power/power_source.hpp"

namespace dooly::power {

std::unique_ptr<Provider> make_rapl_provider();

}  // namespace dooly::power
