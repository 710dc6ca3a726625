#pragma once
// A thread's memo of the labels its hooks were called with: (pointer, kind) -> key. Kernel labels arrive on
// every launch, usually from the same few strings, so a hit spares the key table's lock and hash. The text is
// compared too (a label's storage is often a stack buffer reused for the next label), 8 bytes at a time
// against a copy held in the entry itself: a hit reads one cache line of the memo and the label, nothing else.
// Single-threaded: each thread has its own (EventBuffers::Thread::labels).
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>

#include "dooly/energy/key_table.hpp"

namespace dooly::energy {

inline constexpr KeyId kNoKey = UINT32_MAX;

namespace detail {
// The same comparison byte by byte, never reading past the first difference or NUL (for labels near the end of
// a page).
[[gnu::noinline, gnu::cold]] inline bool same_label_bytes(const char* s, const char* text, size_t n) noexcept {
  for (size_t k = 0; k < n; ++k)
    if (s[k] != text[k]) return false;  // s ends at its NUL: a shorter s differs there, reads stop
  return true;
}

// Whether the NUL-terminated string `s` equals `text`, whose first n bytes are the label and its NUL and which is
// readable (zero padded) up to n rounded up to 8. Compares 8 bytes at a time, all of them (no early exit: a
// hit, the usual case, compares everything anyway), when those words of `s` lie in one page; else byte by
// byte. A shorter `s` is read past its NUL, but only within its page, so every read lands in memory that is
// mapped, and it differs from `text` at its NUL; bytes past n are masked out. Hence the sanitizer exemption:
// AddressSanitizer would call those bytes out of bounds (and so would GCC's bounds warnings where the label is
// a literal of known size).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"
[[gnu::no_sanitize_address]] inline bool same_label(const char* s, const char* text, size_t n) noexcept {
  const size_t whole = n & ~size_t{7};
  const size_t tail = n & 7;
  if ((reinterpret_cast<uintptr_t>(s) & 4095u) + whole + (tail ? 8 : 0) > 4096u) [[unlikely]]
    return same_label_bytes(s, text, n);
  uint64_t diff = 0;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, s + i, 8);
    std::memcpy(&b, text + i, 8);
    diff |= a ^ b;
    asm("" : "+r"(diff));  // a few words at most: keep the loop scalar (vectorised, it is twice the code)
  }
  if (tail) {
    uint64_t a, b;
    std::memcpy(&a, s + whole, 8);
    std::memcpy(&b, text + whole, 8);
    const uint64_t keep = (uint64_t{1} << (8 * tail)) - 1;  // the word's first `tail` bytes
    diff |= (a ^ b) & (std::endian::native == std::endian::little ? keep : ~(~uint64_t{0} >> (8 * tail)));
  }
  return diff == 0;
}
#pragma GCC diagnostic pop
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
