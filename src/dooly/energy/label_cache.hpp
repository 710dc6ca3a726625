#pragma once
// A thread's memo of the labels its hooks were called with: (pointer, kind) -> key. Kernel labels arrive on
// every launch, usually from the same few strings, so a hit spares the key table's lock and hash. The text is
// compared too (a label's storage is often a stack buffer reused for the next label), against a copy held in
// the entry itself: a hit reads one cache line of the memo and the label, nothing else.
// Single-threaded: each thread has its own (EventBuffers::Thread::labels).
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>

#include "dooly/energy/key_table.hpp"

namespace dooly::energy {

inline constexpr KeyId kNoKey = UINT32_MAX;

namespace detail {
// Whether the NUL-terminated string `s` equals `text`, whose first n bytes are the label and its NUL (so
// text[n - 1] is its only NUL). The C library's strcmp: it stops at the first difference or NUL, so the
// comparison is defined for any string and AddressSanitizer checks its reads (it intercepts strcmp). It replaced
// a comparison of 8 bytes at a time that read a shorter `s` past its NUL (within its page) under
// no_sanitize_address: undefined behaviour, and ASan blind where a host program's pointers come in. On a hit a
// byte loop cost 2-13x the old comparison; strcmp costs ~1.5-2 ns more up to ~31 characters and the same beyond
// (side by side in bench/hook_bench: docs/results/2026-12-01-label-compare.md).
inline bool same_label(const char* s, const char* text, size_t n) noexcept {
  (void)n;
  return std::strcmp(s, text) == 0;
}
}  // namespace detail

class LabelCache {
 public:
  static constexpr size_t kEntries = 64;
  static constexpr size_t kInline = 48;  // labels up to 47 characters live in their entry

  // The key stored for this pointer, kind and text; kNoKey when there is none.
  KeyId find(const char* name, Kind kind) const noexcept {
    const size_t i = slot(name, kind);
    const Entry& e = entries_[i];
    if (e.ptr != name || e.kind != kind || e.key == kNoKey) return kNoKey;
    const char* text = e.len < kInline ? e.text : long_[i].get();
    return detail::same_label(name, text, static_cast<size_t>(e.len) + 1) ? e.key : kNoKey;
  }
  // Remembers name -> key (replacing what shared its slot). Labels of 48 characters or more get a heap copy
  // (may throw std::bad_alloc; the entry is then left empty). Labels of 64 KiB or more are not remembered.
  void store(const char* name, Kind kind, KeyId key) {
    const size_t i = slot(name, kind);
    Entry& e = entries_[i];
    e.key = kNoKey;
    const size_t len = std::strlen(name);
    if (len > UINT16_MAX - 8) return;
    if (len < kInline) {
      std::memset(e.text, 0, kInline);
      std::memcpy(e.text, name, len);
    } else {
      const size_t padded = (len + 1 + 7) / 8 * 8;
      auto copy = std::make_unique<char[]>(padded);  // value-initialised: zero padding
      std::memcpy(copy.get(), name, len);
      long_[i] = std::move(copy);
    }
    e.ptr = name;
    e.kind = kind;
    e.len = static_cast<uint16_t>(len);
    e.key = key;
  }

 private:
  static size_t slot(const char* name, Kind kind) noexcept {
    const auto p = reinterpret_cast<uintptr_t>(name);
    return ((p >> 3) ^ (p >> 9) ^ static_cast<uintptr_t>(kind)) & (kEntries - 1);
  }
  struct alignas(64) Entry {
    const char* ptr = nullptr;
    KeyId key = kNoKey;
    Kind kind = Kind::other;
    uint8_t unused = 0;
    uint16_t len = 0;
    char text[kInline] = {};  // the label and its NUL, zero padded (when len < kInline)
  };
  static_assert(sizeof(Entry) == 64);
  std::array<Entry, kEntries> entries_{};
  std::array<std::unique_ptr<char[]>, kEntries> long_;  // labels of kInline characters or more (read on a hit)
};

}  // namespace dooly::energy
