#include "dooly/common/settings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly {

namespace {

using T = SettingType;

// The one list. Defaults in words are the ones in force (tests compare them with the option structs').
// Every field given (a missing one warns under -Wextra).
constexpr SettingSpec spec(std::string_view name, SettingType type, std::string_view fallback, double min, double max,
                           std::string_view choices, std::string_view doc, bool environment_only = false,
                           std::string_view renamed_to = {}) {
  return SettingSpec{name, type, fallback, min, max, choices, doc, environment_only, renamed_to};
}

constexpr SettingSpec kSpecs[] = {
    spec("POWER_SOURCE", T::choice, "first available of nvml, variorum, rapl", 0, 0, "nvml|variorum|rapl|replay",
         "where power readings come from"),
    spec("GPUS", T::list, "every visible GPU", 0, 0, "",
         "CUDA ordinals to watch, e.g. 0,1 (after CUDA_VISIBLE_DEVICES)"),
    spec("PERIOD_MS", T::number, "500 for NVML's sample buffer (it returns its backlog), else 20", 1, 10'000, "",
         "sampler period"),
    spec("MODE", T::choice, "model", 0, 0, "model|trapezoid",
         "which attribution the table leads with (both are computed; a channel without a model fit shows the "
         "trapezoid)"),
    spec("FIT", T::flag, "1", 0, 0, "", "0 = skip the model fit (the table then shows the trapezoid)"),
    spec("MODEL", T::flag, "1", 0, 0, "", "deprecated name of FIT", false, "FIT"),
    spec("BASELINE_W", T::number, "measured from quiet readings", 0, 1e6, "",
         "idle power to subtract for J/call (also the model's fixed intercept)"),
    spec("BASELINE_MS", T::number, "0", 0, 60'000, "",
         "measure the idle baseline for this long at start, one sensor window after it (the program waits)"),
    spec("OUTPUT", T::text, "dooly-energy-<host>-<pid>; under ranks dooly-energy-<job>", 0, 0, "",
         "file prefix for .csv and .json; none = no files"),
    spec("TABLE", T::flag, "1", 0, 0, "", "print the table at the end"),
    spec("TABLE_FILE", T::text, "stdout", 0, 0, "", "write the table to this file instead of stdout"),
    spec("RANKS", T::choice, "auto", 0, 0, "auto|off",
         "auto = under an MPI launcher or srun each rank writes `<prefix>.rank<N>.json` and rank 0 the ranks' "
         "reduced report (docs/mpi.md); off = each process reports alone"),
    spec("RANKS_WAIT_S", T::number, "120", 0, 86'400, "",
         "how long rank 0 waits at the end for the other ranks' files (the missing ones are named)"),
    spec("RANKS_KEEP", T::flag, "1", 0, 0, "", "0 = remove the ranks' files once rank 0 has reduced them all"),
    spec("RANKS_TABLES", T::flag, "0", 0, 0, "", "1 = each rank also writes its own `<prefix>.rank<N>.csv` and `.txt`"),
    spec("RECORD", T::text, "off", 0, 0, "",
         "write every power reading and window to this file (for `dooly analyze`); under ranks one per rank, "
         "`<name>.rank<N>.<ext>`"),
    spec("FENCES", T::flag, "0", 0, 0, "",
         "1 = fences get their own rows; 0 = no rows, and Kokkos is asked to stop calling the fence hooks"),
    spec("SENSOR_WINDOW_MS", T::number, "the backend's", 0, 10'000, "", "the sensor's averaging window (model mode)"),
    spec("SENSOR_DELAY_MS", T::number, "the backend's", 0, 10'000, "", "the sensor's lag (model mode)"),
    spec("OVERLAP_SPLIT", T::flag, "1", 0, 0, "",
         "1 = readings whose window holds kernels overlapping on different streams are split among them by J/call "
         "alone (model mode); 0 = fitted like the others (power taken as additive)"),
    spec("OVERLAP_SPAN_MS", T::number, "100", 0, 10'000, "",
         "how far back of an overlapped reading's window the split counts its kernels' calls"),
    spec("MAX_EVENTS", T::whole, "262144", 1024, 67'108'864, "",
         "window edges buffered per host thread between two sampler ticks (overflow is dropped and counted)"),
    spec("TRACE", T::text, "off", 0, 0, "",
         "write a Chrome / Perfetto trace of every window and power reading to this file (ui.perfetto.dev); under "
         "ranks one per rank"),
    spec("TRACE_MAX_WINDOWS", T::whole, "1000000", 1, 1e9, "",
         "windows the trace keeps whole; later ones become a count and total time per name"),
    spec("CUPTI_LIB", T::text, "libcupti.so from CUDA_HOME, /usr/local/cuda and the loader's path", 0, 0, "",
         "libdooly_cupti.so: the CUPTI library to load"),
    spec("CUPTI_DELAY_MS", T::number, "1000", 10, 60'000, "",
         "libdooly_cupti.so: how long GPU records may come after their work before they count as late"),
    spec("CUPTI_FLUSH_MS", T::number, "250", 0, 60'000, "",
         "libdooly_cupti.so: how often completed activity buffers are asked for (0 = when CUPTI hands them over)"),
    spec("CUPTI_BUFFER_KB", T::whole, "1024", 16, 65'536, "", "libdooly_cupti.so: size of one activity buffer"),
    spec("CUPTI_MAX_BUFFERS", T::whole, "64", 2, 4096, "",
         "libdooly_cupti.so: activity buffers out at once (beyond: CUPTI drops records, counted)"),
    spec("CUPTI_MAX_PENDING", T::whole, "1048576", 1024, 67'108'864, "",
         "libdooly_cupti.so: window edges waiting for the delay at once (overflow is dropped and counted)"),
    spec("CUPTI_NVTX", T::flag, "1", 0, 0, "", "libdooly_cupti.so: NVTX ranges become rows (0 = kernels only)"),
    spec("CUPTI_DISCARD", T::flag, "0", 0, 0, "",
         "libdooly_cupti.so: 1 = collect CUPTI's records and discard them, no power, no report (CUPTI's own cost)"),
    spec("REPLAY_FILE", T::text, "none", 0, 0, "", "the recording the replay source plays"),
    spec("REPLAY_REALTIME", T::flag, "1", 0, 0, "", "replay the recording in real time (0 = all at once)"),
    spec("LOG", T::choice, "warn", 0, 0, "error|warn|info|debug", "what goes to stderr (lines start with dooly:)"),
    spec("NVML_MODE", T::choice, "the best the GPU supports", 0, 0, "samples|instant|average", "how NVML power is read",
         true),
    spec("NVML_LIBRARY", T::text, "libnvidia-ml.so.1", 0, 0, "", "the NVML library to load", true),
    spec("VARIORUM_LIBRARY", T::text, "libvariorum.so", 0, 0, "", "the Variorum library to load", true),
    spec("TSC", T::flag, "1 where the CPU has an invariant time-stamp counter", 0, 0, "",
         "0 = stamp hooks with steady_clock instead of the CPU's time-stamp counter", true),
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<bool> parse_flag(std::string_view s) {
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}
std::optional<double> parse_number(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}
std::optional<long long> parse_whole(const std::string& s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
bool is_choice(std::string_view choices, std::string_view v) {
  size_t start = 0;
  while (start <= choices.size()) {
    const size_t bar = choices.find('|', start);
    if (choices.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start) == v) return true;
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return false;
}
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// 1e6 as 1000000, 0.5 as 0.5.
std::string num(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

}  // namespace

std::span<const SettingSpec> setting_specs() noexcept { return kSpecs; }

const SettingSpec* find_setting(std::string_view name) noexcept {
  for (const SettingSpec& s : kSpecs)
    if (s.name == name) return &s;
  return nullptr;
}

std::string accepted_values(const SettingSpec& s) {
  switch (s.type) {
    case T::text:
      return "text";
    case T::flag:
      return "1|0";
    case T::number:
      return fmt::format("a number in [{}, {}]", num(s.min), num(s.max));
    case T::whole:
      return fmt::format("a whole number in [{}, {}]", num(s.min), num(s.max));
    case T::choice:
      return std::string(s.choices);
    case T::list:
      return "a comma-separated list";
  }
  return "?";
}

std::string settings_help() {
  std::string h;
  for (const SettingSpec& s : kSpecs) {
    if (!s.renamed_to.empty()) continue;
    h += fmt::format("  {:<17} {} ({}; default: {}){}\n", s.name, s.doc, accepted_values(s), s.fallback,
                     s.environment_only ? " [environment only]" : "");
  }
  return h;
}

std::string settings_markdown() {
  std::string md = "| name | accepts | default | meaning |\n|---|---|---|---|\n";
  for (const SettingSpec& s : kSpecs) {
    std::string meaning(s.doc);
    if (!s.renamed_to.empty()) meaning = fmt::format("deprecated: use `{}` (still read, with a warning)", s.renamed_to);
    if (s.environment_only) meaning += " (environment only: read once per process, not a tool argument)";
    std::string accepts = accepted_values(s);
    // A markdown cell: the choices' bars would split it.
    for (size_t at = accepts.find('|'); at != std::string::npos; at = accepts.find('|', at + 2))
      accepts.replace(at, 1, "\\|");
    std::string fallback(s.fallback);
    for (size_t at = fallback.find('<'); at != std::string::npos; at = fallback.find('<', at))
      fallback.replace(at, 1, "&lt;");
    md += fmt::format("| `{}` | {} | {} | {} |\n", s.name, accepts, fallback, meaning);
  }
  return md;
}

void SettingValues::set(const SettingSpec& spec, std::string value, bool from_args) {
  const std::string given = from_args ? lower(spec.name) : "DOOLY_" + std::string(spec.name);
  const std::string subject = from_args ? "give " + given : "set " + given + " to";
  const std::string unset = from_args ? "" : ", or unset it";
  switch (spec.type) {
    case T::text:
      break;
    case T::flag:
      if (!parse_flag(value))
        DOOLY_THROW(InputError, fmt::format("{} 1 or 0{}", subject, unset), "{}='{}' is not 1 or 0", given, value);
      break;
    case T::number: {
      const auto v = parse_number(value);
      if (!v || *v < spec.min || *v > spec.max)
        DOOLY_THROW(InputError,
                    fmt::format("{} a number between {} and {}{}", subject, num(spec.min), num(spec.max), unset),
                    "{}='{}' is not a number in [{}, {}]", given, value, num(spec.min), num(spec.max));
      break;
    }
    case T::whole: {
      const auto v = parse_whole(value);
      if (!v || static_cast<double>(*v) < spec.min || static_cast<double>(*v) > spec.max)
        DOOLY_THROW(InputError,
                    fmt::format("{} a whole number between {} and {}{}", subject, num(spec.min), num(spec.max), unset),
                    "{}='{}' is not a whole number in [{}, {}]", given, value, num(spec.min), num(spec.max));
      break;
    }
    case T::choice:
      if (!is_choice(spec.choices, value))
        DOOLY_THROW(InputError, fmt::format("{} one of {}{}", subject, spec.choices, unset), "{}='{}' is not one of {}",
                    given, value, spec.choices);
      break;
    case T::list:
      for (const std::string& item : split_list(value))
        if (item.empty())
          DOOLY_THROW(InputError, fmt::format("write {} as a comma-separated list without empty items", given),
                      "{}='{}' has an empty item", given, value);
      break;
  }
  std::string_view name = spec.name;
  if (!spec.renamed_to.empty()) {
    warnings_.push_back(
        fmt::format("{} is deprecated (it is one letter from {}): use {}={}", given, from_args ? "mode" : "DOOLY_MODE",
                    from_args ? lower(spec.renamed_to) : "DOOLY_" + std::string(spec.renamed_to), value));
    name = spec.renamed_to;
  }
  values_[std::string(name)] = std::move(value);
}

SettingValues SettingValues::from_env() {
  SettingValues v;
  // Deprecated names first, so their successors, read later, win when both are set.
  for (int pass = 0; pass < 2; ++pass)
    for (const SettingSpec& s : kSpecs) {
      if (s.renamed_to.empty() != (pass == 1)) continue;
      const std::string var = "DOOLY_" + std::string(s.name);
      const char* e = std::getenv(var.c_str());
      if (e && *e) v.set(s, e, false);
    }
  return v;
}

void SettingValues::apply_args(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const size_t eq = w.find('=');
    if (eq == std::string::npos && i == 0) continue;  // the program's or the tool's name
    if (eq == std::string::npos || eq == 0)
      DOOLY_THROW(InputError, "write tool arguments as key=value, e.g. --kokkos-tools-args=\"mode=model period_ms=10\"",
                  "tool argument '{}' is not key=value", w);
    const std::string key = w.substr(0, eq);
    const SettingSpec* spec = find_setting(upper(key));
    if (!spec)
      DOOLY_THROW(InputError, "see the list of settings with --kokkos-tools-help", "unknown tool argument '{}'", key);
    if (spec->environment_only)
      DOOLY_THROW(InputError, fmt::format("export DOOLY_{}={} before the program starts", spec->name, w.substr(eq + 1)),
                  "tool argument '{}' cannot be given here: it is read from the environment only", key);
    if (eq + 1 == w.size()) {  // key= : unset, as an empty variable is
      values_.erase(std::string(spec->renamed_to.empty() ? spec->name : spec->renamed_to));
      continue;
    }
    set(*spec, w.substr(eq + 1), true);
  }
}

const std::string* SettingValues::raw(std::string_view name, SettingType type) const {
  const SettingSpec* spec = find_setting(name);
  if (!spec || spec->type != type || !spec->renamed_to.empty())
    throw std::logic_error(fmt::format("setting {} is not in the table as that type", name));
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

std::optional<std::string> SettingValues::text(std::string_view name) const {
  const SettingSpec* spec = find_setting(name);
  const std::string* v = raw(name, spec && spec->type == T::choice ? T::choice : T::text);
  return v ? std::optional<std::string>(*v) : std::nullopt;
}
std::optional<bool> SettingValues::flag(std::string_view name) const {
  const std::string* v = raw(name, T::flag);
  return v ? parse_flag(*v) : std::nullopt;
}
std::optional<double> SettingValues::number(std::string_view name) const {
  const std::string* v = raw(name, T::number);
  return v ? parse_number(*v) : std::nullopt;
}
std::optional<long long> SettingValues::whole(std::string_view name) const {
  const std::string* v = raw(name, T::whole);
  return v ? parse_whole(*v) : std::nullopt;
}
std::optional<std::vector<std::string>> SettingValues::list(std::string_view name) const {
  const std::string* v = raw(name, T::list);
  return v ? std::optional<std::vector<std::string>>(split_list(*v)) : std::nullopt;
}

}  // namespace dooly
