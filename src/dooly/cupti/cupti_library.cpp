#include "dooly/cupti/cupti_library.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "dooly/common/env.hpp"

namespace dooly::cupti {

std::vector<std::string> candidate_files(const std::string& setting, const std::string& cuda_home) {
  if (!setting.empty()) return {setting};
  std::vector<std::string> out;
  for (const std::string& root : {cuda_home, std::string("/usr/local/cuda")}) {
    if (root.empty()) continue;
    for (const char* sub : {"/extras/CUPTI/lib64/libcupti.so", "/lib64/libcupti.so", "/lib/libcupti.so",
                            "/targets/x86_64-linux/lib/libcupti.so", "/targets/sbsa-linux/lib/libcupti.so"})
      out.push_back(root + sub);
  }
  for (const char* soname : {"libcupti.so", "libcupti.so.13", "libcupti.so.12"}) out.emplace_back(soname);
  return out;
}

namespace {

template <typename Fn>
bool resolve(const power::DynamicLibrary& lib, Fn& slot, const char* name, std::string& missing) {
  slot = lib.symbol<Fn>(name);
  if (!slot && missing.empty()) missing = name;
  return slot != nullptr;
}

// Every function or nothing: a libcupti too old for one of them is as good as none.
std::string resolve_all(const power::DynamicLibrary& lib, abi::Api& api) {
  std::string missing;
  resolve(lib, api.cuptiGetResultString, "cuptiGetResultString", missing);
  resolve(lib, api.cuptiActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks", missing);
  resolve(lib, api.cuptiActivityEnable, "cuptiActivityEnable", missing);
  resolve(lib, api.cuptiActivityDisable, "cuptiActivityDisable", missing);
  resolve(lib, api.cuptiActivityFlushAll, "cuptiActivityFlushAll", missing);
  resolve(lib, api.cuptiActivityGetNextRecord, "cuptiActivityGetNextRecord", missing);
  resolve(lib, api.cuptiActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords", missing);
  resolve(lib, api.cuptiGetTimestamp, "cuptiGetTimestamp", missing);
  return missing;
}

}  // namespace

// A libcupti the process has loaded already (PyTorch's, through its profiler library): the one to attach to, since
// two copies of CUPTI in one process would fight over the driver's callbacks.
std::string already_loaded() {
  for (const char* soname : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"})
    if (void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(h);
      return soname;
    }
  return {};
}

Library::Library(const std::string& setting) {
  std::vector<std::string> files = candidate_files(setting, env::get("CUDA_HOME").value_or(""));
  if (setting.empty())
    if (std::string loaded = already_loaded(); !loaded.empty()) files.insert(files.begin(), std::move(loaded));
  std::string tried;
  for (const std::string& f : files) {
    power::DynamicLibrary lib(f, /*keep_loaded=*/true);  // CUPTI must not be unloaded once it is attached
    if (!lib.loaded()) {
      if (!setting.empty()) tried = lib.error();
      continue;
    }
    abi::Api api;
    const std::string missing = resolve_all(lib, api);
    if (!missing.empty()) {
      tried += fmt::format("{}{} lacks {}", tried.empty() ? "" : "; ", f, missing);
      continue;
    }
    lib_ = std::move(lib);
    api_ = api;
    return;
  }
  if (!setting.empty())
    throw SourceError("cupti", 0, fmt::format("cannot use DOOLY_CUPTI_LIB={}: {}", setting, tried),
                      "point DOOLY_CUPTI_LIB at the CUDA toolkit's libcupti.so (extras/CUPTI/lib64), or unset it");
  throw SourceError("cupti", 0,
                    fmt::format("no libcupti found (looked in $CUDA_HOME, /usr/local/cuda and the loader's path{}{})",
                                tried.empty() ? "" : ": ", tried),
                    "install the CUDA toolkit's CUPTI, or set DOOLY_CUPTI_LIB to its libcupti.so");
}

std::string fix_for(abi::Result rc) {
  switch (rc) {
    case abi::kErrorInsufficientPrivileges:
      return "allow profiling by non-admin users (NVreg_RestrictProfilingToAdminUsers=0) or run as root";
    case abi::kErrorMultipleSubscribers:
      return "another CUPTI client (Nsight Systems, the PyTorch profiler, a second injection) is attached: run "
             "without it";
    case abi::kErrorNotInitialized:
      return "CUPTI could not attach to the driver: check that the driver and CUPTI versions match";
    default:
      return "check that libcupti matches the driver (DOOLY_CUPTI_LIB picks another)";
  }
}

std::string Library::describe(abi::Result rc) const {
  const char* text = nullptr;
  if (api_.cuptiGetResultString) api_.cuptiGetResultString(rc, &text);
  return fmt::format("{} (code {})", text ? text : "unknown CUPTI error", rc);
}

void Library::check(abi::Result rc, const char* call) const {
  if (rc == abi::kSuccess) return;
  throw SourceError("cupti", rc, fmt::format("{} failed: {}", call, describe(rc)), fix_for(rc));
}

}  // namespace dooly::cupti
