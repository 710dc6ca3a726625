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
#include <regex>
#include <set>
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

// "package-3" -> 3, "package-1-die-0" -> 1 (and die 0).
std::optional<int> package_number(const std::string& kind, int* die = nullptr) {
  static const std::regex re(R"(package-(\d+)(?:-die-(\d+))?)");
  std::smatch m;
  if (!std::regex_match(kind, m, re)) return std::nullopt;
  if (die) *die = m[2].matched ? std::stoi(m[2]) : -1;
  return std::stoi(m[1]);
}

}  // namespace

uint64_t counter_modulus_uj(uint64_t max_energy_range_uj) noexcept {
  const double unit_uj = static_cast<double>(max_energy_range_uj) / 4294967295.0;
  if (unit_uj < 1.0) return max_energy_range_uj + 1;
  return max_energy_range_uj + static_cast<uint64_t>(std::llround(unit_uj));
}

std::string read_failure_fix(int err) {
  if (err == EACCES || err == EPERM)
    return "energy_uj is readable by root only on Linux >= 5.10 (CVE-2020-8694): run as root, or grant read "
           "access, e.g. `sudo chmod o+r /sys/class/powercap/*-rapl:*/energy_uj` (lasts until reboot; a udev rule "
           "makes it permanent), or choose another power source with DOOLY_POWER_SOURCE";
  if (err == ENOENT) return "the RAPL zone disappeared (driver unloaded or CPU offline): reload intel_rapl_msr";
  return "check the powercap files (`cat /sys/class/powercap/intel-rapl:0/energy_uj`) and dmesg";
}

std::vector<Zone> discover_zones(const std::string& root) {
  const fs::path dir = fs::path(root) / "sys/class/powercap";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw SourceError("rapl", ENOENT, fmt::format("no powercap folder {}", dir.string()), kNoRaplFix);

  static const std::regex id_re(R"((intel-rapl|amd-rapl):(\d+)(?::(\d+))?)");
  struct Found {
    std::string prefix;
    int n, m;
    fs::path path;
  };
  std::vector<Found> found;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string id = it->path().filename().string();
    std::smatch m;
    if (!std::regex_match(id, m, id_re)) continue;  // intel-rapl-mmio:*, dtpm, control types
    found.push_back({m[1], std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : -1, it->path()});
  }
  if (ec) throw SourceError("rapl", ec.value(), fmt::format("cannot list {}: {}", dir.string(), ec.message()), kNoRaplFix);
  if (found.empty()) throw SourceError("rapl", 0, fmt::format("no RAPL zone under {}", dir.string()), kNoRaplFix);
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.prefix, a.n, a.m) < std::tie(b.prefix, b.n, b.m);
  });

  // Socket of each top-level zone (from "package-N"), for naming its sub-zones.
  std::map<std::pair<std::string, int>, int> socket_of;
  std::vector<Zone> zones;
  std::set<std::string> names;
  for (const Found& f : found) {
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

    std::string base;
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
    if (package_number(z.kind)) {
      z.domain = Domain::cpu;
      base = die >= 0 ? fmt::format("cpu{}die{}", z.socket, die) : fmt::format("cpu{}", z.socket);
    } else if (z.kind == "dram") {
      z.domain = Domain::dram;
      base = z.socket >= 0 ? fmt::format("dram{}", z.socket) : "dram";
    } else if (z.kind == "psys") {
      z.domain = Domain::node;
      base = "node";
    } else {  // core, uncore, and whatever a future CPU adds
      z.domain = Domain::other;
      std::string clean;
      for (char c : z.kind) clean += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
      base = z.socket >= 0 ? fmt::format("{}{}", clean, z.socket) : clean;
    }
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
