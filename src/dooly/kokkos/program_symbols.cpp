#include "dooly/kokkos/program_symbols.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace dooly::kokkos {

namespace {

// The load address of the main program (0 for a non-PIE executable): the first object dl_iterate_phdr lists.
uintptr_t main_program_base() noexcept {
  uintptr_t base = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) -> int {
        *static_cast<uintptr_t*>(out) = static_cast<uintptr_t>(info->dlpi_addr);
        return 1;  // the first entry is the executable
      },
      &base);
  return base;
}

// A read-only mapping of a file, unmapped on scope exit.
struct Mapped {
  const unsigned char* data = nullptr;
  size_t size = 0;
  explicit Mapped(const char* path) noexcept {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data = static_cast<const unsigned char*>(p);
        size = static_cast<size_t>(st.st_size);
      }
    }
    close(fd);
  }
  ~Mapped() {
    if (data) munmap(const_cast<unsigned char*>(data), size);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  bool holds(uint64_t offset, uint64_t length) const noexcept { return offset <= size && length <= size - offset; }
};

// st_value of a defined function named `name` in the executable's .symtab, or 0. (An executable with more
// than 65,279 sections, which ELF numbers through an extension, is not searched: 0.)
uint64_t symtab_value(const Mapped& elf, const char* name) noexcept {
  if (!elf.data || !elf.holds(0, sizeof(Elf64_Ehdr))) return 0;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(elf.data);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return 0;
  if (eh->e_shentsize != sizeof(Elf64_Shdr) || !elf.holds(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr)))
    return 0;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(elf.data + eh->e_shoff);
  const size_t name_len = std::strlen(name);
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strtab = sh[sh[i].sh_link];
    if (!elf.holds(sh[i].sh_offset, sh[i].sh_size) || !elf.holds(strtab.sh_offset, strtab.sh_size)) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(elf.data + sh[i].sh_offset);
    const char* strs = reinterpret_cast<const char*>(elf.data + strtab.sh_offset);
    const size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < count; ++k) {
      const Elf64_Sym& s = syms[k];
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE ||
          s.st_value == 0)
        continue;
      if (s.st_name >= strtab.sh_size || strtab.sh_size - s.st_name <= name_len) continue;
      if (std::memcmp(strs + s.st_name, name, name_len + 1) == 0) return s.st_value;
    }
  }
  return 0;
}

}  // namespace

void* find_program_function(const char* name) noexcept {
  if (void* f = dlsym(RTLD_DEFAULT, name)) return f;
  const Mapped exe("/proc/self/exe");
  const uint64_t value = symtab_value(exe, name);
  if (value == 0) return nullptr;
  // The symbol lives at load base + st_value, an address computed from the ELF file, not from a pointer.
  return reinterpret_cast<void*>(main_program_base() + value);  // NOLINT(performance-no-int-to-ptr)
}

}  // namespace dooly::kokkos
