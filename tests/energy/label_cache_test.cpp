// The per-thread label memo: hits only for the same pointer, kind and text; never reads past a label's NUL
// (nor so past a page that ends right after it); labels of any length; its reads are AddressSanitizer's to check.
#include "dooly/energy/label_cache.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dooly::energy {
namespace {

TEST(LabelCache, HitsOnlyForTheSamePointerKindAndText) {
  LabelCache cache;
  char buffer[128];
  std::strcpy(buffer, "axpy");
  EXPECT_EQ(cache.find(buffer, Kind::kernel_for), kNoKey);
  cache.store(buffer, Kind::kernel_for, 7);
  EXPECT_EQ(cache.find(buffer, Kind::kernel_for), 7u);
  EXPECT_EQ(cache.find(buffer, Kind::kernel_reduce), kNoKey);  // a reduce of the same name is another row
  const std::string same_text = "axpy";
  EXPECT_EQ(cache.find(same_text.c_str(), Kind::kernel_for), kNoKey);  // another pointer: the caller interns it
  // The buffer reused for other labels (Kokkos passes a std::string's c_str(), often one stack buffer).
  for (const char* other : {"axp", "axpy2", "axpz", "bxpy", "", "axpy_and_a_label_long_enough_for_several_words"}) {
    std::strcpy(buffer, other);
    EXPECT_EQ(cache.find(buffer, Kind::kernel_for), kNoKey) << other;
  }
  std::strcpy(buffer, "axpy");
  EXPECT_EQ(cache.find(buffer, Kind::kernel_for), 7u);
}

TEST(LabelCache, EveryLengthAndAlignmentAndTheFirstDifferingByteAnywhere) {
  // Labels of 0..130 characters (inline up to 47, heap copies beyond) at every alignment of the caller's
  // buffer: equal texts hit; one changed byte at any position, one byte more or one fewer, all miss.
  for (size_t len = 0; len <= 130; ++len) {
    std::string label;
    for (size_t i = 0; i < len; ++i) label += static_cast<char>('a' + (i * 7 + len) % 26);
    for (size_t align = 0; align < 8; ++align) {
      alignas(8) char buffer[160 + 8];
      char* p = buffer + align;
      std::memcpy(p, label.c_str(), len + 1);
      LabelCache cache;
      cache.store(p, Kind::region, 42);
      ASSERT_EQ(cache.find(p, Kind::region), 42u) << "len " << len << " align " << align;
      for (size_t i = 0; i < len; ++i) {
        p[i] ^= 0x20;
        ASSERT_EQ(cache.find(p, Kind::region), kNoKey) << "len " << len << " changed at " << i;
        p[i] ^= 0x20;
      }
      p[len] = 'x';  // one byte longer
      p[len + 1] = '\0';
      ASSERT_EQ(cache.find(p, Kind::region), kNoKey) << "len " << len << " longer";
      p[len] = '\0';
      if (len > 0) {
        p[len - 1] = '\0';  // one byte shorter
        ASSERT_EQ(cache.find(p, Kind::region), kNoKey) << "len " << len << " shorter";
        p[len - 1] = label[len - 1];
      }
      ASSERT_EQ(cache.find(p, Kind::region), 42u);
    }
  }
}

TEST(LabelCache, ALabelEndingAtTheEndOfAPageIsReadNoFurther) {
  // A label whose NUL is the last byte of a page followed by an inaccessible one, looked up against the same
  // text and against a longer text remembered for the same pointer (the compare runs into the label's NUL with
  // the remembered text still going). Touching the second page would kill the test with SIGSEGV.
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GE(page, 4096);
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  char* base = static_cast<char*>(mem);
  const std::string text = "parallel_for_with_a_label_of_some_length_and_then_many_more_characters_than_that";
  for (size_t len = 0; len <= 20; ++len) {
    char* p = base + page - static_cast<long>(len) - 1;  // p[len] is the first page's last byte
    ASSERT_EQ(mprotect(base + page, page, PROT_READ | PROT_WRITE), 0);
    std::memcpy(p, text.c_str(), text.size() + 1);  // the longer text, across the page boundary
    LabelCache longer;
    longer.store(p, Kind::kernel_for, 9);
    LabelCache same;
    p[len] = '\0';
    same.store(p, Kind::kernel_for, 3);
    ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);
    EXPECT_EQ(same.find(p, Kind::kernel_for), 3u) << len;
    EXPECT_EQ(longer.find(p, Kind::kernel_for), kNoKey) << len;
  }
  munmap(mem, 2 * page);
}

#if defined(__SANITIZE_ADDRESS__)
TEST(LabelCacheDeathTest, ItsReadsOfTheCallersLabelAreCheckedByAddressSanitizer) {
  // The comparison once read 8 bytes at a time past a label's NUL under no_sanitize_address: undefined
  // behaviour, and ASan blind exactly where a host program's pointers come in. Now its reads are checked like
  // any other: a "label" of 4 bytes without its NUL, compared with a longer text, is a heap overflow ASan
  // reports (the old comparison read on silently).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char text[16] = "abcdefgh";
  EXPECT_DEATH(
      {
        char* s = new char[4];
        std::memcpy(s, "abcd", 4);
        const bool same = detail::same_label(s, text, 9);
        delete[] s;
        std::printf("%d\n", same);
      },
      "heap-buffer-overflow");
}
#endif

}  // namespace
}  // namespace dooly::energy
