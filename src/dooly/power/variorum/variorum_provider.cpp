#include "dooly/power/variorum/variorum_provider.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dooly/common/clock.hpp"
#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/dynamic_library.hpp"
#include "dooly/power/variorum/variorum_json.hpp"

namespace dooly::power {

namespace {

using GetPowerJson = int (*)(char**);
constexpr int64_t kMs = 1'000'000;

constexpr const char* kInstallFix =
    "install Variorum (0.8 or newer) and add its lib folder to LD_LIBRARY_PATH, or set DOOLY_VARIORUM_LIBRARY to "
    "libvariorum.so; or choose another power source with DOOLY_POWER_SOURCE";
constexpr const char* kCallFix =
    "run Variorum's own example (variorum-print-power-example) with VARIORUM_LOG=1 to see why; check that the "
    "modules it needs (msr-safe, NVML, ...) are loaded and readable by this user";

// Options.library, DOOLY_VARIORUM_LIBRARY, then libvariorum.so and libvariorum.so.0.
struct Loaded {
  DynamicLibrary lib;
  GetPowerJson fn = nullptr;
};

Loaded load(const Options& options) {
  std::vector<std::string> candidates;
  if (!options.library.empty())
    candidates.push_back(options.library);
  else if (auto v = env::get("DOOLY_VARIORUM_LIBRARY"))
    candidates.push_back(*v);
  else
    candidates = {"libvariorum.so", "libvariorum.so.0"};
  std::string errors;
  for (const auto& file : candidates) {
    DynamicLibrary lib(file);
    if (!lib.loaded()) {
      errors += (errors.empty() ? "" : "; ") + lib.error();
      continue;
    }
    Loaded out;
    out.fn = lib.symbol<GetPowerJson>("variorum_get_power_json");
    if (!out.fn) {
      const bool old = lib.symbol<void*>("variorum_get_node_power_json") != nullptr;
      throw SourceError("variorum", 0,
                        old ? fmt::format("{} is an older Variorum: it lacks variorum_get_power_json (its "
                                          "variorum_get_node_power_json has another JSON layout)",
                                          file)
                            : fmt::format("{} lacks variorum_get_power_json", file),
                        kInstallFix);
    }
    out.lib = std::move(lib);
    return out;
  }
  throw SourceError("variorum", 0, fmt::format("cannot load {}: {}", fmt::join(candidates, " or "), errors),
                    kInstallFix);
}

// One call of variorum_get_power_json, parsed. Never throws; on failure returns nullopt and sets `error`
// (and `code` to the library's return value, 0 when the JSON was at fault).
std::optional<variorum::Snapshot> fetch(GetPowerJson fn, std::string& error, int& code) noexcept {
  try {
    char* raw = nullptr;
    code = fn(&raw);
    const bool have_text = raw != nullptr;
    std::string text = have_text ? raw : "";
    std::free(raw);  // Variorum allocates the string with malloc; the caller frees it
    if (code != 0) {
      error = fmt::format("variorum_get_power_json returned {}", code);
      return std::nullopt;
    }
    if (!have_text) {
      error = "variorum_get_power_json returned no JSON";
      return std::nullopt;
    }
    std::string why;
    auto snap = variorum::parse_power_json(text, why);
    if (!snap) {
      error = fmt::format("variorum_get_power_json gave {}: '{}{}'", why, std::string_view(text).substr(0, 120),
                          text.size() > 120 ? "..." : "");
    }
    return snap;
  } catch (...) {
    error = "out of memory while reading Variorum's JSON";
    return std::nullopt;
  }
}

SensorModel model_for(const variorum::Value& v) {
  SensorModel s;
  switch (v.domain) {
    case Domain::gpu:
      // Variorum's NVIDIA backend calls nvmlDeviceGetPowerUsage: a 1-second moving average on Ampere and newer.
      s.window_ns = 1000 * kMs;
      s.update_ns = 100 * kMs;
      s.description = "Variorum power_gpu_watts (NVML 1-second average)";
      break;
    case Domain::cpu:
      s.description = "Variorum power_cpu_watts";
      break;
    case Domain::dram:
      s.description = "Variorum power_mem_watts";
      break;
    case Domain::node:
      s.description = "Variorum power_node_watts";
      break;
    case Domain::other:
      s.description = "Variorum";
      break;
  }
  return s;
}

// Variorum's NVIDIA port brackets every call with nvmlInit and nvmlShutdown: 14.65 ms a call on an H200 (median
// of 50, 2026-12-04), 0.01 ms while the process holds NVML open, since NVML only counts references then. A
// session with a GPU channel holds one reference while it lives (DOOLY_NVML_LIBRARY, else libnvidia-ml.so.1;
// nothing is held where NVML cannot be loaded or initialised).
class NvmlReference {
 public:
  NvmlReference() : lib_(env::get("DOOLY_NVML_LIBRARY").value_or("libnvidia-ml.so.1")) {
    if (!lib_.loaded()) return;
    auto init = lib_.symbol<int (*)()>("nvmlInit_v2");
    shutdown_ = lib_.symbol<int (*)()>("nvmlShutdown");
    held_ = init && shutdown_ && init() == 0;
  }
  ~NvmlReference() {
    if (held_) shutdown_();
  }
  NvmlReference(const NvmlReference&) = delete;
  NvmlReference& operator=(const NvmlReference&) = delete;

 private:
  DynamicLibrary lib_;
  int (*shutdown_)() = nullptr;
  bool held_ = false;
};

class VariorumSession final : public Session {
 public:
  explicit VariorumSession(const Options& options) {
    Loaded l = load(options);
    lib_ = std::move(l.lib);
    fn_ = l.fn;
    std::string error;
    int code = 0;
    auto snap = fetch(fn_, error, code);
    if (!snap) throw SourceError("variorum", code, error, kCallFix);
    for (const auto& v : snap->values) {
      if (v.power_w < 0) continue;  // -1: not measurable on this machine
      Channel ch;
      ch.name = v.channel;
      ch.domain = v.domain;
      ch.device = (v.domain == Domain::cpu || v.domain == Domain::dram) ? v.socket : -1;
      ch.sensor = model_for(v);
      index_[ch.name] = static_cast<uint32_t>(channels_.size());
      channels_.push_back(std::move(ch));
    }
    if (channels_.empty() && snap->values.empty()) {
      // Variorum 0.8 gives each socket num_gpus / num_sockets GPUs (integer division): fewer GPUs than sockets
      // means none is reported.
      const bool gpus_lost = snap->gpus_per_socket == 0 && snap->sockets > 1;
      throw SourceError("variorum", 0,
                        gpus_lost ? fmt::format("Variorum's JSON holds no power value: it reports 0 GPUs per socket "
                                                "on {} sockets (Variorum 0.8 splits the GPUs evenly over the "
                                                "sockets, so fewer GPUs than sockets shows none)",
                                                snap->sockets)
                                  : std::string("Variorum's JSON holds no power value (a build without a port for "
                                                "this machine's CPU or GPU?)"),
                        "use DOOLY_POWER_SOURCE=nvml for GPU power, or a Variorum built with this machine's ports");
    }
    if (channels_.empty())
      throw SourceError("variorum", 0, "Variorum reports every power domain as not measurable (-1)",
                        "check Variorum's support for this CPU/GPU, or choose another power source with "
                        "DOOLY_POWER_SOURCE");
    last_t_ns_.assign(channels_.size(), INT64_MIN);
    take(*snap, pending_);
    if (std::any_of(channels_.begin(), channels_.end(), [](const Channel& c) { return c.domain == Domain::gpu; }))
      nvml_ = std::make_unique<NvmlReference>();
  }

  const std::vector<Channel>& channels() const noexcept override { return channels_; }

  PollStatus poll(std::vector<Reading>& out) noexcept override {
    PollStatus status;
    try {
      if (!pending_.empty()) {  // the readings of the call made at open
        out.insert(out.end(), pending_.begin(), pending_.end());
        pending_.clear();
      }
      std::string error;
      int code = 0;
      auto snap = fetch(fn_, error, code);
      if (!snap) {
        status.ok = false;
        status.message = fmt::format("variorum: {} — {}", error, kCallFix);
        return status;
      }
      take(*snap, out);
    } catch (...) {
      status.ok = false;
      status.message = "variorum: out of memory while reading power";
    }
    return status;
  }

 private:
  void take(const variorum::Snapshot& snap, std::vector<Reading>& out) {
    const int64_t t_ns = clock_.steady_ns(snap.timestamp_us);
    for (const auto& v : snap.values) {
      if (v.power_w < 0) continue;  // not measurable this time
      auto it = index_.find(v.channel);
      if (it == index_.end()) continue;              // a domain that was not measurable at open
      if (t_ns <= last_t_ns_[it->second]) continue;  // duplicate or stale
      last_t_ns_[it->second] = t_ns;
      Reading r;
      r.channel = it->second;
      r.t_ns = t_ns;
      r.power_w = v.power_w;
      out.push_back(r);
    }
  }

  std::unique_ptr<NvmlReference> nvml_;  // declared before lib_: released after Variorum's last call
  DynamicLibrary lib_;
  GetPowerJson fn_ = nullptr;
  std::vector<Channel> channels_;
  std::map<std::string, uint32_t> index_;
  std::vector<int64_t> last_t_ns_;
  std::vector<Reading> pending_;
  WallToSteady clock_;
};

class VariorumProvider final : public Provider {
 public:
  std::string_view name() const noexcept override { return "variorum"; }
  std::string_view description() const noexcept override {
    return "LLNL Variorum (libvariorum.so): node, CPU socket, memory and GPU power";
  }
  Probe probe(const Options& options) const override {
    try {
      VariorumSession s(options);
      std::string names;
      for (const auto& c : s.channels()) names += (names.empty() ? "" : ", ") + c.name;
      return {true, fmt::format("Variorum measures {}", names)};
    } catch (const Error& e) {
      return {false, e.what()};
    }
  }
  std::unique_ptr<Session> open(const Options& options) const override {
    return std::make_unique<VariorumSession>(options);
  }
};

}  // namespace

std::unique_ptr<Provider> make_variorum_provider() { return std::make_unique<VariorumProvider>(); }

}  // namespace dooly::power
