#include "dooly/power/rapl/powercap.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::power::rapl {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNoRaplFix =
    "load the RAPL powercap driver (`modprobe intel_rapl_msr`; it serves AMD Zen CPUs too), pass the right root "
    "folder, or choose another power source with DOOLY_POWER_SOURCE";

// Reads a small sysfs file with one open/read/close (sysfs regenerates the value on each open).
int read_small_file(const std::string& path, std::string& out) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[128];
  ssize_t n;
  do n = ::read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  const int err = n < 0 ? errno : 0;
  ::close(fd);
  if (err) return err;
  try {
    out.assign(buf, static_cast<size_t>(n));
  } catch (...) {
    return ENOMEM;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ' || out.back() == '\r')) out.pop_back();
  return 0;
}

bool parse_u64(const std::string& s, uint64_t& v) noexcept {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

std::string read_required(const fs::path& file) {
  std::string s;
  if (int err = read_small_file(file.string(), s); err)
    throw SourceError("rapl", err, fmt::format("cannot read {}: {}", file.string(), std::strerror(err)),
                      read_failure_fix(err));
  return s;
}

// Leading decimal digits of `s` from `pos` as a number; advances pos. nullopt if there are none.
std::optional<int> digits(std::string_view s, size_t& pos) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), v);
  if (ec != std::errc() || v < 0) return std::nullopt;
  pos = static_cast<size_t>(p - s.data());
  return v;
}

// "package-3" -> 3, "package-1-die-0" -> 1 (and die 0).
std::optional<int> package_number(std::string_view kind, int* die = nullptr) {
  constexpr std::string_view prefix = "package-", die_infix = "-die-";
  if (kind.substr(0, prefix.size()) != prefix) return std::nullopt;
  size_t pos = prefix.size();
  auto pkg = digits(kind, pos);
  if (!pkg) return std::nullopt;
  int d = -1;
  if (pos != kind.size()) {
    if (kind.substr(pos, die_infix.size()) != die_infix) return std::nullopt;
    pos += die_infix.size();
    auto dn = digits(kind, pos);
    if (!dn || pos != kind.size()) return std::nullopt;
    d = *dn;
  }
  if (die) *die = d;
  return pkg;
}

struct ZoneId {
  std::string prefix;  // "intel-rapl" or "amd-rapl"
  int n = 0, m = -1;   // intel-rapl:N[:M]
};

// Parses a powercap zone folder name; intel-rapl-mmio:*, dtpm and the control-type folders are not RAPL zones.
std::optional<ZoneId> parse_zone_id(std::string_view name) {
  ZoneId id;
  for (std::string_view prefix : {"intel-rapl:", "amd-rapl:"})
    if (name.substr(0, prefix.size()) == prefix) id.prefix = std::string(prefix.substr(0, prefix.size() - 1));
  if (id.prefix.empty()) return std::nullopt;
  size_t pos = id.prefix.size() + 1;
  auto n = digits(name, pos);
  if (!n) return std::nullopt;
  id.n = *n;
  if (pos == name.size()) return id;
  if (name[pos] != ':') return std::nullopt;
  ++pos;
  auto m = digits(name, pos);
  if (!m || pos != name.size()) return std::nullopt;
  id.m = *m;
  return id;
}

}  // namespace

uint64_t counter_modulus_uj(uint64_t max_energy_range_uj) noexcept {
  const double unit_uj = static_cast<double>(max_energy_range_uj) / 4294967295.0;
  if (unit_uj < 1.0) return max_energy_range_uj + 1;
  return max_energy_range_uj + static_cast<uint64_t>(std::llround(unit_uj));
}

std::string read_failure_fix(int err) {
  if (err == EACCES || err == EPERM)
    return "energy_uj is root-only on Linux >= 5.10 (CVE-2020-8694): run as root, or grant read "
           "access, e.g. `sudo chmod o+r /sys/class/powercap/*-rapl:*/energy_uj` (lasts until reboot; a udev rule "
           "makes it permanent), or choose another power source with DOOLY_POWER_SOURCE";
  if (err == ENOENT) return "the RAPL zone disappeared (driver unloaded or CPU offline): reload intel_rapl_msr";
  return "check the powercap files (`cat /sys/class/powercap/intel-rapl:0/energy_uj`) and dmesg";
}

namespace {

struct FoundZone {
  std::string prefix;
  int n, m;
  fs::path path;
};

// Sorted by (prefix, N, M) so that every top-level zone comes before its sub-zones: naming a sub-zone needs the
// socket of its parent.
std::vector<FoundZone> list_zone_folders(const fs::path& dir) {
  std::error_code ec;
  std::vector<FoundZone> found;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    auto id = parse_zone_id(it->path().filename().string());
    if (!id) continue;
    found.push_back({id->prefix, id->n, id->m, it->path()});
  }
  if (ec)
    throw SourceError("rapl", ec.value(), fmt::format("cannot list {}: {}", dir.string(), ec.message()), kNoRaplFix);
  if (found.empty()) throw SourceError("rapl", 0, fmt::format("no RAPL zone under {}", dir.string()), kNoRaplFix);
  std::sort(found.begin(), found.end(), [](const FoundZone& a, const FoundZone& b) {
    return std::tie(a.prefix, a.n, a.m) < std::tie(b.prefix, b.n, b.m);
  });
  return found;
}

Zone read_zone_files(const FoundZone& f) {
  Zone z;
  z.dir = f.path.string();
  z.id = f.path.filename().string();
  z.kind = read_required(f.path / "name");
  const std::string max_text = read_required(f.path / "max_energy_range_uj");
  if (!parse_u64(max_text, z.max_energy_range_uj) || z.max_energy_range_uj == 0)
    throw SourceError("rapl", EINVAL,
                      fmt::format("{}/max_energy_range_uj holds '{}', not a positive whole number", z.dir, max_text),
                      "check the powercap driver (dmesg), or choose another power source with DOOLY_POWER_SOURCE");
  z.modulus_uj = counter_modulus_uj(z.max_energy_range_uj);
  return z;
}

// Socket of each top-level zone (from "package-N"), for naming its sub-zones.
using SocketMap = std::map<std::pair<std::string, int>, int>;

// Sets z.socket; returns the die number of a "package-N-die-M" top-level zone, else -1.
int assign_socket(const FoundZone& f, Zone& z, SocketMap& socket_of) {
  int die = -1;
  if (f.m < 0) {
    if (auto pkg = package_number(z.kind, &die)) {
      z.socket = *pkg;
      socket_of[{f.prefix, f.n}] = *pkg;
    }
  } else {
    auto it = socket_of.find({f.prefix, f.n});
    z.socket = it != socket_of.end() ? it->second : f.n;
  }
  return die;
}

// Sets z.domain; returns the channel name before de-duplication.
std::string classify_zone(Zone& z, int die) {
  if (package_number(z.kind)) {
    z.domain = Domain::cpu;
    return die >= 0 ? fmt::format("cpu{}die{}", z.socket, die) : fmt::format("cpu{}", z.socket);
  }
  if (z.kind == "dram") {
    z.domain = Domain::dram;
    return z.socket >= 0 ? fmt::format("dram{}", z.socket) : "dram";
  }
  if (z.kind == "psys") {
    z.domain = Domain::node;
    return "node";
  }
  // core, uncore, and whatever a future CPU adds
  z.domain = Domain::other;
  std::string clean;
  for (char c : z.kind) clean += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return z.socket >= 0 ? fmt::format("{}{}", clean, z.socket) : clean;
}

}  // namespace

std::vector<Zone> discover_zones(const std::string& root) {
  const fs::path dir = fs::path(root) / "sys/class/powercap";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw SourceError("rapl", ENOENT, fmt::format("no powercap folder {}", dir.string()), kNoRaplFix);

  const std::vector<FoundZone> found = list_zone_folders(dir);
  SocketMap socket_of;
  std::vector<Zone> zones;
  std::set<std::string> names;
  for (const FoundZone& f : found) {
    Zone z = read_zone_files(f);
    const int die = assign_socket(f, z, socket_of);
    const std::string base = classify_zone(z, die);
    z.channel = base;
    for (int k = 2; names.count(z.channel); ++k) z.channel = fmt::format("{}_{}", base, k);
    names.insert(z.channel);
    zones.push_back(std::move(z));
  }
  return zones;
}

int read_energy_uj(const Zone& zone, uint64_t& value_uj) noexcept {
  std::string s;
  std::string path;
  try {
    path = zone.dir + "/energy_uj";
  } catch (...) {
    return ENOMEM;
  }
  if (int err = read_small_file(path, s); err) return err;
  return parse_u64(s, value_uj) ? 0 : EINVAL;
}

}  // namespace dooly::power::rapl
