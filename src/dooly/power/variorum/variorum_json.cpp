#include "dooly/power/variorum/variorum_json.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dooly::power::variorum {

namespace {

using json = nlohmann::json;

// Bounds that keep later arithmetic defined: GPU numbering multiplies sockets by GPUs per socket, and the
// provider turns microseconds into nanoseconds.
constexpr int kMaxIndex = 4095;                         // sockets, GPUs per socket, GPU numbers
constexpr double kMaxTimestampUs = 4503599627370496.0;  // 2^52 us: year 2112
constexpr double kMaxPowerW = 1e5;

// "socket_12" -> 12 for prefix "socket_"; nullopt otherwise (also above kMaxIndex).
std::optional<int> suffix_number(const std::string& key, std::string_view prefix) {
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int v = 0;
  const char* b = key.data() + prefix.size();
  const char* e = key.data() + key.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || v < 0 || v > kMaxIndex) return std::nullopt;
  return v;
}

bool number(const json& obj, const char* key, double& out, std::string& error) {
  auto it = obj.find(key);
  if (it == obj.end()) return false;
  if (!it->is_number()) {
    error = fmt::format("\"{}\" is {}, not a number", key, it->dump());
    return false;
  }
  out = it->get<double>();
  if (out > kMaxPowerW) {
    error = fmt::format("\"{}\" is {}, above {} W", key, it->dump(), kMaxPowerW);
    return false;
  }
  return true;
}

// The first object-valued member: Variorum keys the document by host name, which the caller does not know.
const json* find_host(const json& doc, std::string& error) {
  if (doc.is_discarded()) {
    error = "malformed JSON";
    return nullptr;
  }
  if (!doc.is_object()) {
    error = "the JSON is not an object keyed by host name";
    return nullptr;
  }
  const json* host = nullptr;
  for (const auto& [name, value] : doc.items())
    if (value.is_object()) {
      host = &value;
      break;
    }
  if (!host) error = "the JSON has no host object";
  return host;
}

bool parse_timestamp(const json& host, int64_t& timestamp_us, std::string& error) {
  auto ts = host.find("timestamp");
  if (ts == host.end() || !ts->is_number()) {
    error = "the host object has no numeric \"timestamp\"";
    return false;
  }
  // Checked as a double before any conversion: a float beyond int64 cast to it is undefined.
  const double ts_us = ts->get<double>();
  if (!(ts_us >= 0 && ts_us <= kMaxTimestampUs)) {
    error = fmt::format("\"timestamp\" is {}, not microseconds since the epoch within [0, 2^52]", ts->dump());
    return false;
  }
  timestamp_us = ts->is_number_float() ? static_cast<int64_t>(ts_us) : ts->get<int64_t>();
  return true;
}

struct Gpu {
  int socket, local;
  double power_w;
};

// Reads socket_<s>'s "power_gpu_watts", if any, into gpus: an object {"GPU_<k>": W} (the NVIDIA and AMD GPU
// ports), or a bare number, the socket's one GPU (Variorum's ARM Juno r2 port: -1 on the sockets without one).
bool read_socket_gpus(int s, const json& obj, std::vector<Gpu>& gpus, std::string& error) {
  auto g = obj.find("power_gpu_watts");
  if (g == obj.end()) return true;
  if (g->is_number()) {
    if (g->get<double>() > kMaxPowerW) {
      error = fmt::format("\"power_gpu_watts\" of socket_{} is {}, above {} W", s, g->dump(), kMaxPowerW);
      return false;
    }
    gpus.push_back({s, 0, g->get<double>()});
    return true;
  }
  if (!g->is_object()) {
    error = fmt::format("\"power_gpu_watts\" of socket_{} is {}, not an object or a number", s, g->dump());
    return false;
  }
  for (const auto& [key, value] : g->items()) {
    auto k = suffix_number(key, "GPU_");
    if (!k) continue;
    if (!value.is_number()) {
      error = fmt::format("\"{}\" of socket_{} is {}, not a number", key, s, value.dump());
      return false;
    }
    if (value.get<double>() > kMaxPowerW) {
      error = fmt::format("\"{}\" of socket_{} is {}, above {} W", key, s, value.dump(), kMaxPowerW);
      return false;
    }
    gpus.push_back({s, *k, value.get<double>()});
  }
  return true;
}

// CPU and memory values go straight into snap; GPUs are collected for numbering once all sockets are read.
bool read_socket(int s, const json& obj, Snapshot& snap, std::vector<Gpu>& gpus, std::string& error) {
  double w = -1.0;
  if (number(obj, "power_cpu_watts", w, error)) snap.values.push_back({fmt::format("cpu{}", s), Domain::cpu, s, w});
  if (!error.empty()) return false;
  if (number(obj, "power_mem_watts", w, error)) snap.values.push_back({fmt::format("dram{}", s), Domain::dram, s, w});
  if (!error.empty()) return false;
  return read_socket_gpus(s, obj, gpus, error);
}

// Variorum numbers GPUs per node; if the numbers repeat across sockets they are per socket: make them global.
void append_gpus(const std::vector<Gpu>& gpus, double gpus_per_socket, Snapshot& snap) {
  std::set<int> seen;
  bool repeated = false;
  for (const Gpu& g : gpus) repeated |= !seen.insert(g.local).second;
  int per_socket = static_cast<int>(gpus_per_socket);
  for (const Gpu& g : gpus) per_socket = std::max(per_socket, g.local + 1);
  std::vector<std::pair<int, Value>> numbered;
  for (const Gpu& g : gpus) {
    const int index = repeated ? g.socket * per_socket + g.local : g.local;
    numbered.push_back({index, {fmt::format("gpu{}", index), Domain::gpu, g.socket, g.power_w}});
  }
  std::sort(numbered.begin(), numbered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, v] : numbered) snap.values.push_back(std::move(v));
}

}  // namespace

std::optional<Snapshot> parse_power_json(const std::string& text, std::string& error) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const json* host = find_host(doc, error);
  if (!host) return std::nullopt;
  Snapshot snap;
  if (!parse_timestamp(*host, snap.timestamp_us, error)) return std::nullopt;

  double w = -1.0;
  error.clear();
  if (number(*host, "power_node_watts", w, error)) snap.values.push_back({"node", Domain::node, -1, w});
  if (!error.empty()) return std::nullopt;

  double gpus_per_socket = -1;
  number(*host, "num_gpus_per_socket", gpus_per_socket, error);
  error.clear();
  snap.gpus_per_socket = gpus_per_socket >= 0 && gpus_per_socket <= kMaxIndex ? static_cast<int>(gpus_per_socket) : -1;
  if (!(gpus_per_socket >= 0 && gpus_per_socket <= kMaxIndex))
    gpus_per_socket = 0;  // absent or unusable (Juno r2 writes -1): the GPUs' own numbers decide

  std::map<int, const json*> sockets;
  for (const auto& [name, value] : host->items())
    if (auto s = suffix_number(name, "socket_"); s && value.is_object()) sockets[*s] = &value;

  std::vector<Gpu> gpus;
  snap.sockets = static_cast<int>(sockets.size());
  for (const auto& [s, obj] : sockets)
    if (!read_socket(s, *obj, snap, gpus, error)) return std::nullopt;
  append_gpus(gpus, gpus_per_socket, snap);
  error.clear();
  return snap;
}

}  // namespace dooly::power::variorum
