#pragma once
// A grid of simulations (`dooly sweep`): every combination of the values given per setting, run on all cores, one
// row per point. Grid keys are the settings' own names (config.hpp: model, scheduler, max-batch-tokens, ...) plus
// `rate`, which sets the request rate of a poisson, gamma or constant workload. Every point is prepared (checked)
// before any is run, so a bad value is one line naming its point.
//   --grid 'model=llama-3.1-8b,qwen3-8b;scheduler=fifo,prefill_first;max-batch-tokens=512,2048;rate=2,4,6.45'
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dooly/sim/config.hpp"
#include "dooly/sim/metrics.hpp"

namespace dooly::sim {

struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

// "key=v1,v2;key2=v3": InputError for an unknown key, an output setting, an empty value list, a key given twice.
std::vector<GridAxis> parse_grid(const std::string& spec);

struct SweepPoint {
  std::vector<std::string> values;  // one per axis, in axis order
  SimConfig config;
};

// Every combination, the last axis varying fastest. Each value is applied with the setting's own parser.
std::vector<SweepPoint> expand_grid(const SimConfig& base, const std::vector<GridAxis>& grid);

// The workload spec with its rate replaced ("poisson:rate=2,n=..." -> rate=R); InputError for a trace or closed loop.
std::string with_rate(const std::string& workload, const std::string& rate);

// Prepares every point (each one InputError prefixed with the point), then runs them on `jobs` threads.
// Summaries come back in point order.
std::vector<Summary> run_sweep(const std::vector<SweepPoint>& points, const std::string& models_dir, int jobs);

// One CSV (version header line, then the grid's keys and the summary's columns), and the same as an aligned table.
std::string sweep_csv(const std::vector<GridAxis>& grid, const std::vector<SweepPoint>& points,
                      const std::vector<Summary>& rows);
std::string sweep_table(const std::vector<GridAxis>& grid, const std::vector<SweepPoint>& points,
                        const std::vector<Summary>& rows);

}  // namespace dooly::sim
