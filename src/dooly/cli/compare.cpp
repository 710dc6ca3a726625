// dooly compare LIVE.json SIM.json [--json OUT] [--plot PREFIX]: a simulation against a live run of the same
// workload (docs/simulate.md, "Comparing with a live run"): per-request MAPE and the error of the median and p90 of
// TTFT, TPOT, E2E and energy, throughput, J per output token, and the steps' compositions. Both files are read and
// checked before anything is written.
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"
#include "dooly/sim/compare.hpp"
#include "dooly/sim/result_writer.hpp"

namespace {

using namespace dooly;

struct CompareArgs {
  std::string live, sim, json_out, plot;
};

void run_compare(const CompareArgs& a) {
  if (!a.json_out.empty()) sim::check_writable(a.json_out);
  if (!a.plot.empty()) sim::check_writable(a.plot + "-cdf.png");
  const nlohmann::json live = sim::read_result(a.live);
  const nlohmann::json simulated = sim::read_result(a.sim);
  const sim::Comparison c = sim::compare_results(live, simulated);
  fmt::print("{}", sim::render_comparison(c));
  if (!a.json_out.empty()) {
    std::ofstream out(a.json_out);
    out << sim::comparison_json(c).dump(1) << "\n";
    if (!out) DOOLY_THROW(InputError, "check the disk and the folder's permissions", "cannot write {}", a.json_out);
  }
  if (!a.plot.empty()) sim::write_comparison_plot(a.plot, c);
}

void setup_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd =
      app.add_subcommand("compare", "Compare a simulation with a live run of the same workload (result files)");
  cmd->add_option("live", args->live, "the live run's result file (dooly live --out)")->required();
  cmd->add_option("sim", args->sim, "the simulation's result file (dooly simulate --out)")->required();
  cmd->add_option("--json", args->json_out, "also write the comparison as JSON (version 1)");
  cmd->add_option("--plot", args->plot, "write PREFIX-cdf.png: TTFT, TPOT and E2E CDFs, live and simulated");
  cmd->callback([args] { run_compare(*args); });
}

const bool registered = dooly::cli::add_command("compare", &setup_compare);

}  // namespace
