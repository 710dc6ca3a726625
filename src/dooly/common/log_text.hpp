#pragma once
// Text for the one-line diagnostics (log.hpp): a level from its word (DOOLY_LOG, a front end's log setting), and
// a message that spans lines (the power source's list of backends tried) as the one line it is promised to be.
#include <algorithm>
#include <string>
#include <string_view>

#include "dooly/common/log.hpp"

namespace dooly::log {

// error|warn|info|debug; anything else is warn.
inline Level level_from_word(std::string_view w) noexcept {
  if (w == "error") return Level::error;
  if (w == "info") return Level::info;
  if (w == "debug") return Level::debug;
  return Level::warn;
}

inline std::string one_line(std::string text) {
  for (size_t at = text.find(":\n  "); at != std::string::npos; at = text.find(":\n  ", at)) text.replace(at, 4, ": ");
  for (size_t at = text.find("\n  "); at != std::string::npos; at = text.find("\n  ", at)) text.replace(at, 3, "; ");
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace dooly::log
