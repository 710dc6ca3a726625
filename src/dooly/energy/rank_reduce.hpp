#pragma once
// The ranks' reports reduced to one: per channel name (gpu0, package-0, ... as each rank names its own), per
// region (name and kind), the sum over ranks of calls, time and energy, their least, mean and largest per rank
// and the rank with the largest, and per physical device its run energy counted once however many ranks
// measured it. docs/mpi.md says what a shared device's rows mean.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dooly/energy/ranks.hpp"
#include "dooly/energy/report.hpp"

namespace dooly::energy {

// 1: the first reduced report.
inline constexpr int kRanksReportVersion = 1;

// One rank's report as <prefix>.rank<N>.json holds it: the report (version kReportVersion, readable alone) and a
// "rank" object with who wrote it and the id of each channel's device (ranks.hpp's device_id).
struct RankFile {
  RankInfo rank;
  std::vector<std::string> device_ids;  // per report.channels
  int64_t written_unix_ns = 0;
  std::string path;  // where it was read from (empty: this process's own)
  Report report;
};

// One figure over the ranks that have the channel (a rank without the row counts 0).
struct RankStat {
  double sum = 0, min = 0, mean = 0, max = 0;
  int max_rank = -1;  // the rank with the largest (the lowest such rank on a tie)
};

struct RankFigures {
  int rank = 0;
  uint64_t calls = 0;
  double time_s = 0, energy_j = 0;
  std::optional<double> model_energy_j;
};

struct ReducedRow {
  std::string name;
  Kind kind = Kind::other;
  int ranks_with_row = 0;
  RankStat calls, time_s, energy_j;
  std::optional<RankStat> model_energy_j;  // when every rank that has the row has a model figure for it
  double net_energy_j = 0;                 // sum over ranks of (energy - baseline * time): the J/call numerator
  std::optional<double> model_net_energy_j;
  // Measured on a device that other ranks measured too: each rank's attribution saw only its own windows, unless
  // the device was attributed jointly from the ranks' recordings (rank_reattribute.hpp).
  bool shared_device = false;
  bool joint = false;
  std::vector<RankFigures> per_rank;  // in rank order, ranks that have the row
  // Kernels that overlapped others (the model's split of concurrent kernels), summed over the ranks that split
  // some of its calls: those calls and their energy above the floor.
  std::optional<double> overlap_calls, overlap_energy_j;

  double j_per_call() const noexcept { return calls.sum > 0 ? net_energy_j / calls.sum : 0.0; }
  std::optional<double> overlap_j_per_call() const noexcept {
    if (!overlap_calls || !overlap_energy_j || *overlap_calls <= 0) return std::nullopt;
    return *overlap_energy_j / *overlap_calls;
  }
  std::optional<double> model_j_per_call() const noexcept {
    if (!model_net_energy_j || calls.sum <= 0) return std::nullopt;
    return *model_net_energy_j / calls.sum;
  }
};

// A physical device (ranks.hpp's device_id) and the ranks that measured it.
struct ReducedDevice {
  std::string id;
  std::string channel;  // the channel name the first rank gave it
  power::Domain domain = power::Domain::other;
  std::vector<int> ranks;
  // Counted once: the figures of the rank that measured it longest (its run covers the others' most).
  int counted_rank = -1;
  double run_time_s = 0, run_energy_j = 0;
  std::optional<double> counter_delta_j;
  double attributed_j_sum = 0;  // the sharing ranks' attributed energy, summed (may exceed run_energy_j)
  bool joint = false;           // attributed once with every sharing rank's windows (rank_reattribute.hpp)
  bool shared() const noexcept { return ranks.size() > 1; }
};

struct ReducedChannel {
  std::string name;
  power::Domain domain = power::Domain::other;
  std::vector<int> ranks;                 // that have this channel
  std::vector<std::string> devices;       // ids, each once
  bool model_lead = false;                // every rank's channel has a model fit and the mode is model
  double run_energy_j = 0;                // over its devices, each once
  double attributed_j = 0;                // summed over ranks
  std::optional<double> counter_delta_j;  // over its devices, each once, when all have a counter
  std::vector<ReducedRow> rows;           // by the leading mode's summed energy, descending

  double unattributed_j() const noexcept { return net_of(run_energy_j, attributed_j); }
};

// The node view: a host, its ranks and the devices measured there, each device's run energy once.
struct ReducedHost {
  std::string host;
  std::vector<int> ranks;
  std::vector<std::string> devices;
  double run_energy_j = 0;
};

struct IgnoredRankFile {
  std::string path;
  std::string why;
};

struct RanksReport {
  int version = kRanksReportVersion;
  std::string launcher, job;
  int size = 0;  // ranks in the job (0: not known)
  Mode mode = Mode::model;
  std::string backend;  // the ranks' (joined with ',' when they differ)
  std::vector<int> present, missing;
  std::vector<IgnoredRankFile> ignored;               // files of another job or an older run, unreadable ones
  std::vector<std::string> joint_skipped;             // shared devices not attributed jointly when asked: "<id>: why"
  double waited_s = 0;                                // how long rank 0 waited for the others
  uint64_t events_dropped = 0, unmatched_events = 0;  // summed
  std::vector<ReducedDevice> devices;
  std::vector<ReducedHost> hosts;  // in order of their first rank
  std::vector<ReducedChannel> channels;
};

// Reduces the ranks' files (one per rank; any order) for a job of `size` ranks (0: the largest rank + 1).
// Ranks below size without a file are `missing`; `joint` lists the devices whose rows were attributed jointly.
// Throws InputError for two files of one rank.
RanksReport reduce_ranks(const std::vector<RankFile>& files, int size, const std::vector<std::string>& joint = {});

}  // namespace dooly::energy
