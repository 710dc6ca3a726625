#pragma once
// The rank file (<prefix>.rank<N>.json: a report with a "rank" object) both ways, and the reduced report's three
// faces: the table, CSV ("# dooly-ranks-csv v1") and JSON ("kind": "ranks", its own version).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/energy/rank_reduce.hpp"

namespace dooly::energy {

inline constexpr const char* kRanksCsvHeader = "# dooly-ranks-csv v1";

// The report as to_json writes it, with "rank": who wrote it, when, and each channel's device id.
nlohmann::json rank_file_json(const RankFile& file);
// Reads what rank_file_json wrote; throws InputError naming `path` when it is not a rank file of this version.
RankFile rank_file_from_json(const nlohmann::json& j, const std::string& path);
RankFile read_rank_file(const std::string& path);

// "0,1,3"
std::string format_rank_list(const std::vector<int>& ranks);

std::string format_ranks_table(const RanksReport& report);
std::string ranks_to_csv(const RanksReport& report);
nlohmann::json ranks_to_json(const RanksReport& report);
std::string ranks_to_json_text(const RanksReport& report);

}  // namespace dooly::energy
