#pragma once
// libcupti, loaded late (dlopen) so that libdooly_cupti.so loads on machines without it and says so in one
// line. CUPTI status codes are translated here, once, into SourceError("cupti", code, what, fix).
#include <string>
#include <vector>

#include "dooly/common/error.hpp"
#include "dooly/cupti/cupti_abi.hpp"
#include "dooly/power/dynamic_library.hpp"

namespace dooly::cupti {

// Where libcupti is looked for, in order: the setting (DOOLY_CUPTI_LIB) alone when given; else a libcupti the
// process has loaded already (PyTorch's), the toolkit's folders under $CUDA_HOME and /usr/local/cuda, then the
// loader's own path (libcupti.so, .so.13, .so.12). candidate_files lists all but the already loaded one.
std::vector<std::string> candidate_files(const std::string& setting, const std::string& cuda_home);

class Library {
 public:
  // Loads the first candidate that opens and has every function; throws SourceError naming what was tried.
  explicit Library(const std::string& setting);
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const abi::Api& api() const noexcept { return api_; }
  const std::string& file() const noexcept { return lib_.file(); }
  // Throws SourceError for a failed call (set-up code only); `call` names the function.
  void check(abi::Result rc, const char* call) const;
  // The vendor's words for a code, with its number ("CUPTI_ERROR_... (code N)").
  std::string describe(abi::Result rc) const;

 private:
  power::DynamicLibrary lib_;
  abi::Api api_;
};

// The sentence that says what to do about a failed call.
std::string fix_for(abi::Result rc);

}  // namespace dooly::cupti
