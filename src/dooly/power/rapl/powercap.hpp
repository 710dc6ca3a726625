#pragma once
// RAPL zones as the Linux powercap framework exposes them, read under an injectable root so tests can use a
// fixture tree: <root>/sys/class/powercap/{intel,amd}-rapl:N[:M]/{name,energy_uj,max_energy_range_uj}.
#include <cstdint>
#include <string>
#include <vector>

#include "dooly/power/power_source.hpp"

namespace dooly::power::rapl {

struct Zone {
  std::string dir;      // absolute path of the zone's folder
  std::string id;       // "intel-rapl:0:1"
  std::string kind;     // contents of `name`: "package-0", "dram", "core", "uncore", "psys", ...
  std::string channel;  // "cpu0", "dram0", "core0", "node"
  Domain domain = Domain::other;
  int socket = -1;
  uint64_t max_energy_range_uj = 0;
  uint64_t modulus_uj = 0;  // what one wrap of energy_uj is worth (see counter_modulus_uj)
};

// The kernel reports max_energy_range_uj as the largest value energy_uj takes (the 32-bit hardware counter at
// 0xFFFFFFFF, in uJ), so one wrap is worth that plus one hardware energy unit, which is
// max / (2^32 - 1) uJ (about 61 uJ on Intel). When that is below 1 uJ (not a 32-bit counter), +1 uJ.
uint64_t counter_modulus_uj(uint64_t max_energy_range_uj) noexcept;

// Energy between two reads of a counter that counts modulo `modulus_uj` (at most one wrap in between).
inline uint64_t counter_delta_uj(uint64_t previous, uint64_t current, uint64_t modulus_uj) noexcept {
  return current >= previous ? current - previous : current + modulus_uj - previous;
}

// The zones under <root>/sys/class/powercap, sorted by id (intel-rapl-mmio duplicates are skipped). Throws
// SourceError with the fix when the folder is missing, empty or a zone is malformed.
std::vector<Zone> discover_zones(const std::string& root);

// Reads a zone's energy_uj. Returns 0 on success, else the errno (EACCES, ENOENT, EINVAL for bad contents).
int read_energy_uj(const Zone& zone, uint64_t& value_uj) noexcept;

// The fix for a read failure of `path` with `err` (EACCES explains the root-only rule of Linux >= 5.10).
std::string read_failure_fix(int err);

}  // namespace dooly::power::rapl
