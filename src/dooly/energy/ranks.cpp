#include "dooly/energy/ranks.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::energy {

namespace {

// The variables one launcher sets in every rank's environment.
struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* size;  // nullptr: the launcher does not say
  const char* local_rank;
  std::vector<const char*> job;  // joined with '.' (Slurm: job and step)
};

// In this order: the first whose rank (and size, where it has one) is set wins. Open MPI also sets PMIx's
// variables, and any of them may run inside a Slurm step, so the MPI library's own come first.
const std::vector<LauncherVars>& launchers() {
  static const std::vector<LauncherVars> all = {
      {"Open MPI",
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK",
       {"OMPI_MCA_ess_base_jobid"}},
      {"MPICH/Intel MPI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", {}},
      {"MVAPICH2", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK", {}},
      // SLURM_STEP_NUM_TASKS is set by srun only: a batch script has SLURM_PROCID=0 and SLURM_NTASKS=N too, but it
      // is one process, not rank 0 of N.
      {"Slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", {"SLURM_JOB_ID", "SLURM_STEP_ID"}},
      {"PMIx", "PMIX_RANK", nullptr, nullptr, {"PMIX_NAMESPACE"}},
  };
  return all;
}

std::optional<int> parse_count(const char* text) {
  if (!text || !*text) return std::nullopt;
  int v = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [p, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || p != end || v < 0) return std::nullopt;
  return v;
}

constexpr const char* kOffFix = "set DOOLY_RANKS=off to have each process report alone";

int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string this_host() {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  return host;
}

// Characters a file name can carry as they are; anything else becomes '_'.
std::string file_safe(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// NVML's "00000000:01:00.0" and CUDA's "0000:01:00.0" name the same bus address: the domain as 4 hex digits.
std::string normal_bus_id(std::string id) {
  id = lower(std::move(id));
  const size_t colon = id.find(':');
  if (colon == std::string::npos || id.find(':', colon + 1) == std::string::npos) return id;  // no domain part
  std::string domain = id.substr(0, colon);
  domain.erase(0, std::min(domain.find_first_not_of('0'), domain.size()));
  if (domain.size() < 4) domain.insert(0, 4 - domain.size(), '0');
  return domain + id.substr(colon);
}

// The PCI bus id that the NVML session writes into a channel's description ("NVIDIA H200 [PCI 0000:00:06.0]:
// ..."), which recordings keep; empty when there is none.
std::string bus_id_of(std::string_view description) {
  const size_t at = description.find("[PCI ");
  if (at == std::string_view::npos) return {};
  const size_t end = description.find(']', at);
  if (end == std::string_view::npos) return {};
  const std::string_view id = description.substr(at + 5, end - at - 5);
  if (id.empty() || id == "?") return {};
  return normal_bus_id(std::string(id));
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    std::string item(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

namespace {

// The launcher's rank and number of ranks, checked (one InputError naming the variables otherwise).
void read_rank_and_size(const LauncherVars& l, const char* rank_text, const char* size_text, RankInfo& info) {
  const auto rank = parse_count(rank_text);
  if (!rank)
    DOOLY_THROW(InputError, kOffFix, "{}='{}' (set by {}) is not a rank, a whole number from 0", l.rank, rank_text,
                l.launcher);
  info.rank = *rank;
  info.size = 0;
  if (!l.size) return;
  const auto size = parse_count(size_text);
  if (!size || *size < 1 || *rank >= *size)
    DOOLY_THROW(InputError, kOffFix, "{}='{}' and {}='{}' (set by {}) are not a rank and a number of ranks", l.rank,
                rank_text, l.size, size_text, l.launcher);
  info.size = *size;
}

// The job id from its parts; empty when a part is missing (a job id with a part missing would match another step's).
std::string job_id(const LauncherVars& l, const EnvLookup& env) {
  std::string job;
  for (const char* var : l.job) {
    const char* part = env(var);
    if (!part || !*part) return {};
    job += (job.empty() ? "" : ".") + std::string(part);
  }
  return job;
}

}  // namespace

std::optional<RankInfo> detect_rank(const EnvLookup& env, std::string host, int64_t now_unix_ns) {
  for (const LauncherVars& l : launchers()) {
    const char* rank_text = env(l.rank);
    if (!rank_text || !*rank_text) continue;
    const char* size_text = l.size ? env(l.size) : nullptr;
    if (l.size && (!size_text || !*size_text)) continue;  // Slurm outside a step; a partial environment
    RankInfo info;
    info.launcher = l.launcher;
    read_rank_and_size(l, rank_text, size_text, info);
    if (info.size == 1) return std::nullopt;  // a job of one rank is a single process
    if (l.local_rank) info.local_rank = parse_count(env(l.local_rank)).value_or(-1);
    info.job = job_id(l, env);
    info.host = std::move(host);
    if (const char* cvd = env("CUDA_VISIBLE_DEVICES")) info.cuda_visible_devices = cvd;
    info.start_unix_ns = now_unix_ns;
    return info;
  }
  return std::nullopt;
}

std::optional<RankInfo> detect_rank() {
  return detect_rank([](const char* name) -> const char* { return std::getenv(name); }, this_host(), wall_now_ns());
}

std::string rank_file_path(const std::string& prefix, int rank) { return fmt::format("{}.rank{}.json", prefix, rank); }

std::string per_rank_path(const std::string& path, int rank) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  if (dot == std::string::npos || dot <= name_start) return fmt::format("{}.rank{}", path, rank);  // no extension
  return fmt::format("{}.rank{}{}", path.substr(0, dot), rank, path.substr(dot));
}

std::string default_output_prefix(const std::optional<RankInfo>& ranks) {
  if (ranks) return ranks->job.empty() ? "dooly-energy-ranks" : "dooly-energy-" + file_safe(ranks->job);
  return fmt::format("dooly-energy-{}-{}", this_host(), static_cast<long>(getpid()));
}

std::string device_id(const power::Channel& ch, std::string_view host, std::string_view cuda_visible_devices) {
  const std::string h(host);
  switch (ch.domain) {
    case power::Domain::gpu: {
      if (std::string bus = bus_id_of(ch.sensor.description); !bus.empty()) return h + "/pci:" + bus;
      if (ch.device < 0) break;
      if (!cuda_visible_devices.empty()) {
        const std::vector<std::string> visible = split_commas(cuda_visible_devices);
        if (static_cast<size_t>(ch.device) < visible.size()) {
          const std::string& entry = visible[static_cast<size_t>(ch.device)];
          if (parse_count(entry.c_str())) return fmt::format("{}/gpu:{}", h, entry);
          if (!entry.empty()) return h + "/" + entry;  // GPU-<uuid>, MIG-<uuid>
        }
      }
      return fmt::format("{}/gpu:{}", h, ch.device);
    }
    case power::Domain::cpu:
    case power::Domain::dram:
      return fmt::format("{}/{}:{}", h, power::to_string(ch.domain), std::max(ch.device, 0));
    case power::Domain::node:
      return h + "/node";
    case power::Domain::other:
      break;
  }
  return h + "/" + ch.name;
}

}  // namespace dooly::energy
