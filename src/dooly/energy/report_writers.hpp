#pragma once
// The report's three faces: the terminal table, CSV and JSON (both versioned), and an atomic file write so a
// failed write never leaves half a file.
#include <string>

#include <nlohmann/json.hpp>

#include "dooly/energy/report.hpp"

namespace dooly::energy {

inline constexpr const char* kCsvHeader = "# dooly-energy-csv v2";

std::string format_table(const Report& report);
std::string to_csv(const Report& report);
nlohmann::json to_json(const Report& report);
// to_json as text; bytes of names that are not UTF-8 become U+FFFD (a kernel name is whatever the program gave).
std::string to_json_text(const Report& report);
// Reads what to_json wrote; throws InputError when the version is missing or not ours.
Report report_from_json(const nlohmann::json& j);

// What a front end does with its report at the end (the Kokkos connector and the CUPTI tracer alike): the table
// to stdout or to table_path, and <prefix>.csv and <prefix>.json unless the prefix is "none". Failures are
// logged, one line each, never thrown (this runs inside the measured program). Returns the table.
struct OutputSettings {
  std::string prefix;      // DOOLY_OUTPUT
  bool table = true;       // DOOLY_TABLE
  std::string table_path;  // DOOLY_TABLE_FILE; empty: stdout
};
std::string write_outputs(const Report& report, const OutputSettings& settings) noexcept;

// Writes to path.tmp then renames; throws InputError naming the path and the fix.
void write_file_atomic(const std::string& path, const std::string& content);
// Checks now that path can be created, so a bad output path is reported before the run, not after it.
void check_writable(const std::string& path);

}  // namespace dooly::energy
