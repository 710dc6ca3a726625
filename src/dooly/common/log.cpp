#include "dooly/common/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dooly::log {

Level threshold() noexcept {
  static const Level level = [] {
    const char* v = std::getenv("DOOLY_LOG");
    if (!v) return Level::warn;
    if (!std::strcmp(v, "error")) return Level::error;
    if (!std::strcmp(v, "info")) return Level::info;
    if (!std::strcmp(v, "debug")) return Level::debug;
    return Level::warn;
  }();
  return level;
}

void write(Level level, std::string_view message) noexcept {
  if (level > threshold()) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "dooly: %.*s\n", static_cast<int>(message.size()), message.data());
}

}  // namespace dooly::log
