#include "dooly/common/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "dooly/common/log_text.hpp"

namespace dooly::log {

namespace {
std::atomic<int> forced{-1};
}  // namespace

void set_threshold(Level level) noexcept { forced.store(static_cast<int>(level), std::memory_order_relaxed); }

Level threshold() noexcept {
  if (const int f = forced.load(std::memory_order_relaxed); f >= 0) return static_cast<Level>(f);
  static const Level level = [] {
    const char* v = std::getenv("DOOLY_LOG");
    return v ? level_from_word(v) : Level::warn;
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
