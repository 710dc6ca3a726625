#pragma once
// Integers read from JSON without nlohmann's unchecked casts. get<int>() of 1.9e48, or get<int64_t>() of 2^64-1
// (which nlohmann stores unsigned), is a static_cast out of range: undefined behaviour (found by fuzzing the
// trace reader). json_integer<T> accepts only a JSON integer that fits T; a float, even an integral one, is
// not an integer in any file dooly writes.
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace dooly {

template <typename T>
std::optional<T> json_integer(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T> && std::is_signed_v<T>, "signed integers only");
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(u);
  }
  if (!v.is_number_integer()) return std::nullopt;
  const auto s = v.get<int64_t>();
  if (s < std::numeric_limits<T>::min() || s > std::numeric_limits<T>::max()) return std::nullopt;
  return static_cast<T>(s);
}

}  // namespace dooly
