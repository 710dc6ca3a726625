#pragma once
// One-line diagnostics to stderr, prefixed "dooly:". Used by code that must degrade instead of throwing
// (callbacks inside a host program). Thread-safe; never throws.
#include <string_view>

#include <fmt/format.h>

namespace dooly::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

// Level from DOOLY_LOG (error|warn|info|debug); default warn; set_threshold overrides it (a front end's own
// setting, e.g. the Kokkos connector's log=... tool argument).
Level threshold() noexcept;
void set_threshold(Level level) noexcept;
void write(Level level, std::string_view message) noexcept;

template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    if (threshold() >= Level::info) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    write(Level::error, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    if (threshold() >= Level::debug) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}

}  // namespace dooly::log
