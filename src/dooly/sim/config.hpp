#pragma once
// One typed configuration for a simulation, and the table of its settings that generates the command line: each
// setting has one name, used as the flag (`dooly simulate --max-batch-tokens 512`) and as a grid key
// (`dooly sweep --grid 'max-batch-tokens=512,2048'`), and one parser that checks the value. The table rejects a
// duplicate name when it is built.
#include <string>
#include <vector>

#include "dooly/sim/engine_config.hpp"

namespace dooly::sim {

struct SimConfig {
  std::string model;                 // a name in data/models/ or the path of a config.json
  std::string db;                    // a profiling store (the store-backed cost model)
  std::string cost = "auto";         // auto | analytic | store
  bool allow_missing = false;        // the store's unmeasured op signatures add nothing (flagged) instead of refusing
  std::string moe_routing = "auto";  // auto | uniform | random | experts:K | skew:S (predict::parse_moe_routing)
  std::string workload;              // sim/workload.hpp's grammar
  std::string slo;                   // ttft:MS,tpot:MS[,e2e:MS]
  std::string step_times;            // a live run's step durations: the scheduler check's timing (step_times_cost.hpp)
  std::string out;                   // result.json
  std::string csv;                   // per-request CSV
  std::string plot;                  // SVG files' prefix
  EngineConfig engine;
};

struct Option {
  std::string name;        // the flag without its dashes
  std::string value_name;  // "N", "on|off", ...
  std::string help;
  bool output = false;                                  // names a file to write: not a grid key
  bool required = false;                                // dooly simulate needs it
  void (*set)(SimConfig& c, const std::string& value);  // checks the value: InputError naming the flag
};

// The settings, in the order --help lists them.
const std::vector<Option>& sim_options();
// Sets one setting by name; an unknown name is an InputError listing the names.
void set_option(SimConfig& c, const std::string& name, const std::string& value);
const Option* find_option(const std::string& name);

}  // namespace dooly::sim
