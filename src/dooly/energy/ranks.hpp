#pragma once
// MPI ranks without MPI: which rank of how many this process is, read from the launcher's environment (Open MPI,
// MPICH / Intel MPI, MVAPICH2, Slurm's srun, PMIx), and what names a measured device across ranks. Nothing here
// links an MPI library: the ranks meet through files in a shared folder (rank_outputs.hpp; docs/mpi.md).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dooly/power/power_source.hpp"

namespace dooly::energy {

struct RankInfo {
  int rank = 0;
  int size = 1;          // ranks in the job; 0: the launcher does not say (PMIx alone)
  int local_rank = -1;   // rank among those on this host; -1: not given
  std::string launcher;  // "Open MPI", "MPICH/Intel MPI", "MVAPICH2", "Slurm", "PMIx"
  std::string job;       // the launcher's id of this job; empty: not given (rank files are then told apart by time)
  std::string host;
  std::string cuda_visible_devices;  // as this rank had it: maps its CUDA ordinals onto the host's GPUs
  int64_t start_unix_ns = 0;         // wall clock when the rank was detected (the run's start)
};

// An environment variable's value, or nullptr (tests pass a map).
using EnvLookup = std::function<const char*(const char*)>;

// This process's rank, or nullopt when no launcher started it as one of several ranks (a single process, or a
// job of one rank: nothing changes then). The first launcher whose variables are set wins, in the order above;
// Slurm counts only inside a job step (srun), not in the batch script. Throws InputError when the variables are
// malformed (a rank outside [0, size)), naming them and saying how to turn rank detection off.
std::optional<RankInfo> detect_rank(const EnvLookup& env, std::string host, int64_t now_unix_ns);
// The same from the process environment, gethostname and the wall clock.
std::optional<RankInfo> detect_rank();

// <prefix>.rank<N>.json: each rank's report, with its RankInfo and device ids.
std::string rank_file_path(const std::string& prefix, int rank);
// A file name for one rank, from one given to all ranks: "run.recording" -> "run.rank3.recording", "trace" ->
// "trace.rank3" (DOOLY_RECORD and DOOLY_TRACE under ranks, so the ranks do not write over each other).
std::string per_rank_path(const std::string& path, int rank);
// The output prefix when DOOLY_OUTPUT is not given: dooly-energy-<host>-<pid> for a single process; under
// ranks one name for all of them (they must meet on it): dooly-energy-<job>, or dooly-energy-ranks.
std::string default_output_prefix(const std::optional<RankInfo>& ranks);

// What names the device a channel measures, across ranks: the same physical device gets the same id on every
// rank that measured it, two devices different ids.
//   "<host>/pci:0000:01:00.0"  a GPU whose PCI bus id the backend gave (NVML, and recordings of it)
//   "<host>/gpu:<n>"           else a GPU's CUDA ordinal mapped through the rank's CUDA_VISIBLE_DEVICES
//                              (entry n when they are numbers; "<host>/GPU-..." when they are UUIDs or MIG names)
//   "<host>/cpu:<socket>", "<host>/dram:<socket>", "<host>/node"   RAPL domains and whole-node meters
//   "<host>/<channel name>"    anything else
std::string device_id(const power::Channel& channel, std::string_view host, std::string_view cuda_visible_devices);

}  // namespace dooly::energy
