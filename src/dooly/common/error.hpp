#pragma once
// The project's error types. Vendor status codes are translated once, at the boundary, into these;
// each carries the raw code and a sentence that tells the user what to do.
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace dooly {

class Error : public std::runtime_error {
 public:
  Error(std::string what, std::string fix = {})
      : std::runtime_error(fix.empty() ? what : what + " — " + fix), problem_(std::move(what)), fix_(std::move(fix)) {}
  const std::string& problem() const noexcept { return problem_; }
  const std::string& fix() const noexcept { return fix_; }

 private:
  std::string problem_;
  std::string fix_;
};

// Bad input from the user: files, environment variables, flags.
class InputError : public Error {
 public:
  using Error::Error;
};

// A power source (vendor library, sysfs, file) failed; vendor_code keeps the raw status.
class SourceError : public Error {
 public:
  SourceError(std::string backend, int vendor_code, std::string what, std::string fix = {})
      : Error(fmt::format("{}: {}", backend, what), std::move(fix)),
        backend_(std::move(backend)),
        vendor_code_(vendor_code) {}
  const std::string& backend() const noexcept { return backend_; }
  int vendor_code() const noexcept { return vendor_code_; }

 private:
  std::string backend_;
  int vendor_code_;
};

// A registry was asked to hold two entries under one key.
class DuplicateError : public Error {
 public:
  using Error::Error;
};

}  // namespace dooly

// All throws of formatted messages go through this macro: DOOLY_THROW(InputError, "fix", "fmt {}", args).
#define DOOLY_THROW(Type, fix, ...) throw ::dooly::Type(::fmt::format(__VA_ARGS__), fix)
