#pragma once
// libnvidia-ml loaded with dlopen and initialised; nvmlShutdown and dlclose on destruction.
#include <string>

#include "dooly/power/dynamic_library.hpp"
#include "dooly/power/nvml/nvml_abi.hpp"
#include "dooly/power/nvml/nvml_errors.hpp"

namespace dooly::power::nvml {

// The file to load: `option` if set, else DOOLY_NVML_LIBRARY, else "libnvidia-ml.so.1".
std::string library_file(const std::string& option);

class Library {
 public:
  // Loads, resolves the symbols and calls nvmlInit_v2. Throws SourceError naming the file or the vendor
  // status, with the fix.
  explicit Library(const std::string& option);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const Api& api() const noexcept { return api_; }
  const std::string& file() const noexcept { return lib_.file(); }
  const char* vendor_string(Return code) const noexcept;
  SourceError error(Return code, std::string_view call, std::string_view subject) const {
    return make_error(code, vendor_string(code), call, subject);
  }

 private:
  DynamicLibrary lib_;
  Api api_;
  bool initialised_ = false;
};

}  // namespace dooly::power::nvml
