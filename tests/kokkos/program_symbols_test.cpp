#include "dooly/kokkos/program_symbols.hpp"

#include <gtest/gtest.h>

// A function of this executable that is not exported (test executables are not linked with -rdynamic), as
// Kokkos's Tools API is in a program linked with a static Kokkos.
extern "C" __attribute__((used, noinline)) int dooly_program_symbols_probe(int x) { return 3 * x + 1; }

namespace dooly::kokkos {
namespace {

TEST(ProgramSymbols, FindsAnExportedFunction) {
  using Strlen = unsigned long (*)(const char*);
  auto f = reinterpret_cast<Strlen>(find_program_function("strlen"));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f("dooly"), 5u);
}

TEST(ProgramSymbols, FindsAFunctionOnlyTheExecutablesSymbolTableHas) {
  using Probe = int (*)(int);
  auto f = reinterpret_cast<Probe>(find_program_function("dooly_program_symbols_probe"));
  ASSERT_NE(f, nullptr) << "not found in /proc/self/exe's .symtab";
  EXPECT_EQ(f, &dooly_program_symbols_probe);
  EXPECT_EQ(f(4), 13);
}

TEST(ProgramSymbols, AnUnknownNameIsNull) {
  EXPECT_EQ(find_program_function("dooly_no_such_function_anywhere"), nullptr);
  EXPECT_EQ(find_program_function("dooly_program_symbols_prob"), nullptr);  // a prefix is not a match
}

}  // namespace
}  // namespace dooly::kokkos
