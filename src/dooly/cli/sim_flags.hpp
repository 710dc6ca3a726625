#pragma once
// The simulator's settings as command-line flags, generated from sim/config.hpp's table (dooly simulate, dooly
// sweep): one flag per setting, its value checked by the setting's own parser after the command line is read.
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "dooly/sim/config.hpp"

namespace dooly::cli {

class SimFlags {
 public:
  // for_sweep: the output-file settings are left out (a sweep writes one table) and none is required (a grid
  // can give it).
  void add_to(CLI::App& cmd, bool for_sweep);
  // The configuration the flags given describe; InputError for a bad value.
  sim::SimConfig config() const;

 private:
  std::map<std::string, std::string> given_;
};

// data/models/ of the repository (or DOOLY_MODELS_DIR); empty when `model` is a path and none is found.
std::string models_dir(const std::string& model);

}  // namespace dooly::cli
