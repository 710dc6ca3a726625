#pragma once
// Parses the JSON of variorum_get_power_json (docs/power-sources.md, variorum), as Variorum 0.8.0 writes it
// (json_dumps with JSON_INDENT(4): several lines; tests/power/fixtures/variorum/ holds real output):
//   {"<host>": {"timestamp": <us since epoch>, "power_node_watts": W, "num_gpus_per_socket": n,
//               "socket_<s>": {"power_cpu_watts": W, "power_mem_watts": W, "power_gpu_watts": {"GPU_<k>": W}}}}
// Every key but "timestamp" is optional (an NVIDIA-only build writes no node, CPU or memory). GPU numbers are
// node-wide in Variorum 0.8 (socket s holds GPU_<s*n> .. GPU_<s*n+n-1>); "power_gpu_watts" may also be a bare
// number, the socket's one GPU (the ARM Juno r2 port). -1 (any negative value) means "not measurable".
// Refused: a timestamp outside [0, 2^52] us, a power above 1e5 W; socket and GPU numbers above 4095 are not
// taken as sockets or GPUs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dooly/power/power_source.hpp"

namespace dooly::power::variorum {

struct Value {
  std::string channel;  // "node", "cpu0", "dram0", "gpu3"
  Domain domain = Domain::other;
  int socket = -1;
  double power_w = -1.0;  // negative: not measurable
};

struct Snapshot {
  int64_t timestamp_us = 0;
  std::vector<Value> values;  // node, then per socket (ascending) cpu, dram, then GPUs (ascending index)
  int sockets = 0;            // socket_<s> objects in the JSON
  int gpus_per_socket = -1;   // "num_gpus_per_socket" as written; -1 when absent or out of range
};

// Returns nullopt and sets `error` when the text is not the expected JSON.
std::optional<Snapshot> parse_power_json(const std::string& text, std::string& error);

}  // namespace dooly::power::variorum
