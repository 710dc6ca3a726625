#pragma once
// The report's three faces: the terminal table, CSV and JSON (both versioned), and an atomic file write so a
// failed write never leaves half a file.
#include <string>

#include <nlohmann/json.hpp>

#include "dooly/common/settings.hpp"
#include "dooly/energy/ranks.hpp"
#include "dooly/energy/report.hpp"

namespace dooly::energy {

inline constexpr const char* kCsvHeader = "# dooly-energy-csv v3";

std::string format_table(const Report& report);
std::string to_csv(const Report& report);
nlohmann::json to_json(const Report& report);
// to_json as text; bytes of names that are not UTF-8 become U+FFFD (a kernel name is whatever the program gave).
std::string to_json_text(const Report& report);
// Reads what to_json wrote; throws InputError when the version is missing or not ours.
Report report_from_json(const nlohmann::json& j);

// What a front end does with its report at the end (the Kokkos connector and the CUPTI tracer alike): the table
// to stdout or to table_path, and <prefix>.csv and <prefix>.json unless the prefix is "none". Under an MPI
// launcher (ranks set) each rank writes <prefix>.rank<N>.json instead and rank 0 the ranks' reduced report
// (rank_outputs.hpp). Failures are logged, one line each, never thrown (this runs inside the measured program).
// Returns the table.
struct OutputSettings {
  std::string prefix;        // DOOLY_OUTPUT
  bool table = true;         // DOOLY_TABLE
  std::string table_path;    // DOOLY_TABLE_FILE; empty: stdout
  bool detect_ranks = true;  // DOOLY_RANKS=auto
  // This process's rank under an MPI launcher (detected when detect_ranks, ranks.hpp); nullopt: a single process.
  std::optional<RankInfo> ranks;
  double ranks_wait_s = 120.0;  // DOOLY_RANKS_WAIT_S: how long rank 0 waits for the other ranks' files
  bool keep_rank_files = true;  // DOOLY_RANKS_KEEP: keep <prefix>.rank<N>.json once reduced
  bool rank_tables = false;     // DOOLY_RANKS_TABLES: each rank also writes <prefix>.rank<N>.csv and .txt

  // From checked values (common/settings.hpp), the rank detected from the environment unless DOOLY_RANKS=off;
  // the default prefix is one name for all ranks under a launcher. Throws InputError.
  static OutputSettings from_settings(const SettingValues& values);
};
std::string write_outputs(const Report& report, const OutputSettings& settings) noexcept;

// Writes to path.tmp then renames; throws InputError naming the path and the fix.
void write_file_atomic(const std::string& path, const std::string& content);
// Checks now that path can be created, so a bad output path is reported before the run, not after it.
void check_writable(const std::string& path);

}  // namespace dooly::energy
