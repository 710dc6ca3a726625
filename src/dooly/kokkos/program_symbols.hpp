#pragma once
// Finds a function of the running program by its (mangled) name: first among the exported symbols (a Kokkos
// built as a shared library), then in the executable's own symbol table (.symtab), which holds the functions of
// static libraries linked into it (Kokkos's CMake default) as long as the executable is not stripped.
// Returns nullptr when neither has it. Used to reach Kokkos's C++ Tools API from the connector.
namespace dooly::kokkos {

void* find_program_function(const char* name) noexcept;

}  // namespace dooly::kokkos
