// dooly sweep --grid 'model=A,B;scheduler=fifo,prefill_first;max-batch-tokens=512,2048;rate=2,4' [simulate's flags]
//             --out table.csv [--jobs N]
// Every combination of the grid's values over the base configuration the other flags give, checked first, then
// simulated on all cores; one table (CSV to --out, a line per point on stdout). docs/simulate.md: "Sweeps".
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/cli/sim_flags.hpp"
#include "dooly/common/error.hpp"
#include "dooly/sim/result_writer.hpp"
#include "dooly/sim/sweep.hpp"

namespace {

using namespace dooly;

struct SweepArgs {
  cli::SimFlags flags;
  std::string grid;
  std::string out;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

void run_sweep_command(const SweepArgs& a) {
  if (!a.out.empty()) sim::check_writable(a.out);
  const sim::SimConfig base = a.flags.config();
  const std::vector<sim::GridAxis> grid = sim::parse_grid(a.grid);
  const std::vector<sim::SweepPoint> points = sim::expand_grid(base, grid);
  std::string models = base.model;
  for (const sim::SweepPoint& p : points)
    models = p.config.model.find('/') == std::string::npos ? p.config.model : models;
  const std::vector<sim::Summary> rows = sim::run_sweep(points, cli::models_dir(models), a.jobs);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << sim::sweep_csv(grid, points, rows);
    if (!f) DOOLY_THROW(Error, "check the folder and the disk", "cannot write {}", a.out);
  }
  std::fputs(sim::sweep_table(grid, points, rows).c_str(), stdout);
}

void setup_sweep(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "Simulate a grid of configurations on all cores; one result table");
  cmd->add_option("--grid", a->grid, "key=v1,v2;key2=... over simulate's settings, and rate")->required();
  cmd->add_option("--out", a->out, "the table as CSV");
  cmd->add_option("--jobs", a->jobs, "simulations at once (default: all cores)")->check(CLI::Range(1, 1024));
  a->flags.add_to(*cmd, /*for_sweep=*/true);
  cmd->callback([a] { run_sweep_command(*a); });
}

const bool registered = dooly::cli::add_command("sweep", &setup_sweep);

}  // namespace
