#include "dooly/energy/key_table.hpp"

#include <array>

#include "dooly/common/error.hpp"

namespace dooly::energy {

namespace {
constexpr std::array<std::pair<Kind, std::string_view>, 11> kKindNames{{
    {Kind::kernel_for, "for"},
    {Kind::kernel_reduce, "reduce"},
    {Kind::kernel_scan, "scan"},
    {Kind::region, "region"},
    {Kind::section, "section"},
    {Kind::fence, "fence"},
    {Kind::copy, "copy"},
    {Kind::idle, "idle"},
    {Kind::other, "other"},
    {Kind::kernel, "kernel"},
    {Kind::stream, "stream"},
}};

std::string map_key(std::string_view name, Kind kind) {
  std::string k;
  k.reserve(name.size() + 2);
  k.push_back(static_cast<char>('0' + static_cast<int>(kind)));
  k.push_back('\x1f');
  k.append(name);
  return k;
}
}  // namespace

std::string_view to_string(Kind kind) noexcept {
  for (const auto& [k, n] : kKindNames)
    if (k == kind) return n;
  return "other";
}

Kind kind_from_string(std::string_view word) {
  for (const auto& [k, n] : kKindNames)
    if (n == word) return k;
  DOOLY_THROW(InputError, "use one of for, reduce, scan, region, section, fence, copy, idle, other, kernel, stream",
              "unknown region kind '{}'", word);
}

KeyId KeyTable::intern(std::string_view name, Kind kind) {
  // Not on the per-launch path: the connector keeps a per-thread cache of the keys it has seen.
  const std::string key = map_key(name, kind);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  const auto id = static_cast<KeyId>(infos_.size());
  infos_.push_back({std::string(name), kind});
  ids_.emplace(key, id);
  return id;
}

void KeyTable::insert(KeyId id, std::string_view name, Kind kind) {
  // Ids index a dense table: an id of 2^32-1 wrapped `id + 1` to 0 and wrote past the end.
  if (id > kMaxInsertedId)
    DOOLY_THROW(InputError, "number keys densely from 0 (a recording's ids are below 2^24)",
                "key id {} is above the largest id a key table takes ({})", id, kMaxInsertedId);
  std::lock_guard<std::mutex> lock(mu_);
  if (id < infos_.size() && !infos_[id].name.empty())
    DOOLY_THROW(DuplicateError, "give each key a distinct id", "key id {} is defined twice", id);
  if (id >= infos_.size()) infos_.resize(static_cast<size_t>(id) + 1);
  infos_[id] = {std::string(name), kind};
  ids_.emplace(map_key(name, kind), id);
}

KeyInfo KeyTable::info(KeyId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < infos_.size() ? infos_[id] : KeyInfo{"<unknown>", Kind::other};
}

size_t KeyTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return infos_.size();
}

std::vector<KeyInfo> KeyTable::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return infos_;
}

}  // namespace dooly::energy
