#pragma once
// NVML status codes translated once (docs/design.md): each code gets its symbolic name and a sentence with the fix.
#include <string>
#include <string_view>

#include "dooly/common/error.hpp"
#include "dooly/power/nvml/nvml_abi.hpp"

namespace dooly::power::nvml {

struct ErrorInfo {
  std::string_view name;  // "NVML_ERROR_GPU_IS_LOST"
  std::string_view fix;   // what the user should do
};

ErrorInfo error_info(Return code) noexcept;

// Codes after which the device (or the whole library) produces nothing more: poll reports them as fatal.
bool is_fatal(Return code) noexcept;

// "<vendor string> (NVML_ERROR_X, code N)"; vendor_string may be null (nvmlErrorString unavailable).
std::string describe(Return code, const char* vendor_string);

// The SourceError for `call` failing with `code`; `subject` names what was being done ("gpu0", "init").
SourceError make_error(Return code, const char* vendor_string, std::string_view call, std::string_view subject);

}  // namespace dooly::power::nvml
