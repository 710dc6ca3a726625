#pragma once
// Replays the power readings of a dooly recording (replay/recorded_readings.hpp) as a power source: for tests and for
// re-analysing a run offline. Never auto-detected: select it with DOOLY_POWER_SOURCE=replay.
#include <memory>

#include "dooly/power/power_source.hpp"

namespace dooly::power {

std::unique_ptr<Provider> make_replay_provider();

}  // namespace dooly::power
