#pragma once
// NVIDIA GPUs through NVML, loaded with dlopen (no link-time dependency). See nvml_session.hpp for the modes.
#include <memory>

#include "dooly/power/power_source.hpp"

namespace dooly::power {

std::unique_ptr<Provider> make_nvml_provider();

}  // namespace dooly::power
