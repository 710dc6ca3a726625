#pragma once
// The ranks' rendezvous, through files in the output prefix's folder (which every rank must see: a shared file
// system across nodes): each rank writes <prefix>.rank<N>.json; rank 0 waits for the others' files (bounded),
// reduces them and writes <prefix>.json, <prefix>.csv and the table. `dooly ranks PREFIX` does the same reduction
// later from the files alone. docs/mpi.md.
#include <optional>
#include <string>
#include <vector>

#include "dooly/energy/rank_reduce.hpp"
#include "dooly/energy/report_writers.hpp"

namespace dooly::energy {

// write_outputs under ranks (settings.ranks set, prefix not "none"). Never throws; failures are logged. Returns
// the table printed: the reduced one on rank 0, the rank's own (written only with rank_tables) elsewhere.
std::string write_rank_outputs(const Report& report, const OutputSettings& settings) noexcept;

// The reduced report's table (to stdout, or to settings.table_path; only with settings.table) and
// <prefix>.csv and <prefix>.json. Throws InputError when a file cannot be written.
std::string write_reduced_outputs(const RanksReport& reduced, const OutputSettings& settings);

// This process's rank file: the report, its rank and each channel's device id.
RankFile make_rank_file(const Report& report, const RankInfo& rank, int64_t written_unix_ns);

// Whether a rank file found on disk belongs to the run of `own`: the same job where both name one, else written
// after `own` started (a file of an earlier run under the same prefix is older). The reason when it does not.
std::optional<std::string> foreign_reason(const RankFile& candidate, const RankInfo& own);

// Rank 0's wait: reads <prefix>.rank<N>.json for every other rank of own.size until all are there and belong to
// this run, or wait_s has passed. Files of another run are ignored (and kept waiting on); unreadable ones too.
struct Gathered {
  std::vector<RankFile> files;  // the others' (not own)
  std::vector<IgnoredRankFile> ignored;
  double waited_s = 0;
};
Gathered gather_rank_files(const std::string& prefix, const RankInfo& own, double wait_s);

// `dooly ranks`: every <prefix>.rank<N>.json there is, of one job (`job`, else the job of the file written last;
// files of other jobs and unreadable ones are listed as ignored). Throws InputError when there is none.
struct FoundRankFiles {
  std::vector<RankFile> files;
  std::vector<IgnoredRankFile> ignored;
  int size = 0;  // the largest the files give (0: none gives one)
};
FoundRankFiles find_rank_files(const std::string& prefix, const std::optional<std::string>& job);
// find_rank_files, reduced.
RanksReport merge_rank_files(const std::string& prefix, const std::optional<std::string>& job);

}  // namespace dooly::energy
