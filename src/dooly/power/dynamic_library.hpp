#pragma once
// RAII over dlopen/dlclose. Vendor libraries are loaded late (docs/design.md) so one binary runs on machines
// without them; a failed load leaves an empty object whose error() says why, in the loader's own words.
#include <dlfcn.h>

#include <string>
#include <utility>

namespace dooly::power {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  // `file` is a soname searched on the library path ("libnvidia-ml.so.1") or a path. keep_loaded: never
  // dlclose (for libraries such as libcuda that must not be unloaded once initialised).
  explicit DynamicLibrary(std::string file, bool keep_loaded = false) : file_(std::move(file)), keep_(keep_loaded) {
    handle_ = dlopen(file_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* e = dlerror();
      error_ = e ? e : "dlopen failed";
    }
  }
  ~DynamicLibrary() { reset(); }
  DynamicLibrary(DynamicLibrary&& o) noexcept { *this = std::move(o); }
  DynamicLibrary& operator=(DynamicLibrary&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, nullptr);
      file_ = std::move(o.file_);
      error_ = std::move(o.error_);
      keep_ = o.keep_;
    }
    return *this;
  }
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool loaded() const noexcept { return handle_ != nullptr; }
  const std::string& file() const noexcept { return file_; }
  const std::string& error() const noexcept { return error_; }

  // nullptr when absent (or when nothing is loaded).
  template <typename Fn>
  Fn symbol(const char* name) const noexcept {
    return handle_ ? reinterpret_cast<Fn>(dlsym(handle_, name)) : nullptr;
  }

 private:
  void reset() noexcept {
    if (handle_ && !keep_) dlclose(handle_);
    handle_ = nullptr;
  }

  void* handle_ = nullptr;
  std::string file_;
  std::string error_;
  bool keep_ = false;
};

}  // namespace dooly::power
