#pragma once
// Two tallies of nanoseconds per key.
//
// KeyTally: nanoseconds per key in a short list, with the entry last added kept at hand: the keys under one window (a
// reading's, or an open region's) are few, and runs of one key are long. Beyond kInline keys the rest go to a
// map, so a window holding hundreds of names costs no long scan per add. Small while empty: every open window
// has one.
//
// DenseTally: indexed by key id, with the keys in the order first added. For the occupancy model's per-reading
// scratch (two of them per run), where a window's keys alternate (kernels, and their region between them) and
// every add must be a few instructions; its memory is one slot per key id seen.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dooly/energy/key_table.hpp"

namespace dooly::energy {

class KeyTally {
 public:
  static constexpr size_t kInline = 16;

  bool empty() const noexcept { return items_.empty() && more_.empty(); }
  void clear() noexcept {
    items_.clear();
    if (!more_.empty()) more_.clear();
    last_ = 0;
  }
  // Inlined into its callers: it runs once per segment a reading's window holds, and once per kernel under an
  // open region.
  [[gnu::always_inline]] void add(KeyId key, int64_t ns) {
    if (last_ < items_.size() && items_[last_].first == key) [[likely]] {
      items_[last_].second += ns;
      return;
    }
    add_slow(key, ns);
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [key, ns] : items_) f(key, ns);
    for (const auto& [key, ns] : more_) f(key, ns);
  }
  // Adds every entry of `other` (a closed child window's time goes to its parent).
  void merge(const KeyTally& other) {
    other.for_each([this](KeyId key, int64_t ns) { add(key, ns); });
  }

 private:
  void add_slow(KeyId key, int64_t ns) {
    for (size_t i = 0; i < items_.size(); ++i)
      if (items_[i].first == key) {
        items_[i].second += ns;
        last_ = i;
        return;
      }
    if (items_.size() < kInline) {
      last_ = items_.size();
      items_.emplace_back(key, ns);
      return;
    }
    more_[key] += ns;
  }

  std::vector<std::pair<KeyId, int64_t>> items_;
  std::unordered_map<KeyId, int64_t> more_;
  size_t last_ = 0;
};

class DenseTally {
 public:
  bool empty() const noexcept { return keys_.empty(); }
  void clear() noexcept {
    for (KeyId k : keys_) slots_[k] = Slot{};
    keys_.clear();
  }
  [[gnu::always_inline]] void add(KeyId key, int64_t ns) {
    if (key >= slots_.size()) [[unlikely]]
      slots_.resize(static_cast<size_t>(key) + 1);
    Slot& s = slots_[key];
    if (!s.used) {
      s.used = true;
      keys_.push_back(key);
    }
    s.ns += ns;
  }
  template <typename F>
  void for_each(F&& f) const {
    for (KeyId k : keys_) f(k, slots_[k].ns);
  }
  void merge(const DenseTally& other) {
    other.for_each([this](KeyId key, int64_t ns) { add(key, ns); });
  }

 private:
  struct Slot {
    int64_t ns = 0;
    bool used = false;
  };
  std::vector<Slot> slots_;
  std::vector<KeyId> keys_;  // in the order first added
};

}  // namespace dooly::energy
