#pragma once
// Interns the names that receive energy (kernels, regions, sections, ...) into small integer ids, so the
// begin/end hooks pass integers and the attribution never compares strings. Thread-safe.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dooly::energy {

using KeyId = uint32_t;

// kernel: a GPU kernel seen by its own device timestamps (CUPTI); stream: a GPU stream's kernels taken together.
// New kinds go at the end (a key's kind number is part of the key table's map).
enum class Kind : uint8_t {
  kernel_for,
  kernel_reduce,
  kernel_scan,
  region,
  section,
  fence,
  copy,
  idle,
  other,
  kernel,
  stream
};
std::string_view to_string(Kind kind) noexcept;
Kind kind_from_string(std::string_view word);  // throws InputError for an unknown word

struct KeyInfo {
  std::string name;
  Kind kind = Kind::other;
};

class KeyTable {
 public:
  KeyId intern(std::string_view name, Kind kind);
  // Registers a key under a given id (re-analysis of a recording); throws DuplicateError on a clash and
  // InputError for an id above kMaxInsertedId (the table is dense: memory grows with the largest id).
  void insert(KeyId id, std::string_view name, Kind kind);
  static constexpr KeyId kMaxInsertedId = (KeyId{1} << 24) - 1;
  KeyInfo info(KeyId id) const;
  size_t size() const;
  std::vector<KeyInfo> snapshot() const;

 private:
  mutable std::mutex mu_;
  // (kind, name) -> id: a region and a kernel that share a name stay distinct rows.
  std::unordered_map<std::string, KeyId> ids_;
  std::vector<KeyInfo> infos_;
};

}  // namespace dooly::energy
