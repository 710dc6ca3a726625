#pragma once
// What `dooly plot` reads: a recorded run (DOOLY_RECORD, "# dooly-recording v1") or a JSON report (version 2,
// DOOLY_OUTPUT's .json or `dooly analyze --json`), told apart by their first bytes.
#include <optional>
#include <string>
#include <vector>

#include "dooly/energy/recording.hpp"
#include "dooly/energy/report.hpp"

namespace dooly::plot {

struct RunInput {
  std::optional<energy::Recording> recording;  // exactly one of the two is set
  std::optional<energy::Report> report;
};

// Reads and checks the file (each reader checks its version). Anything else is an InputError naming the file,
// what it is not, and what to pass instead.
RunInput read_run_input(const std::string& path);

// The indices of the channels to draw: all of them, or the one named `wanted`. An unknown name is an InputError
// that lists the channels there are.
std::vector<size_t> chosen_channels(const std::vector<std::string>& names, const std::optional<std::string>& wanted,
                                    const std::string& source);

}  // namespace dooly::plot
