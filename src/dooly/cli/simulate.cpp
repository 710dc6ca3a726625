// dooly simulate --model llama-3.1-8b --engine hf|vllm --workload SPEC --out result.json [--csv F] [--plot PREFIX]
// The flags are the simulator's settings (sim/config.hpp): one name each, generated from that table. Everything is
// checked first (model, workload, engine configuration, every request against the cache, output folders), so bad
// input is one line before any simulated step; then the event loop runs and the files are written.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/cli/python_exec.hpp"
#include "dooly/cli/sim_flags.hpp"
#include "dooly/common/error.hpp"
#include "dooly/sim/result_writer.hpp"
#include "dooly/sim/simulator.hpp"

namespace {

using namespace dooly;

void print_summary(const sim::Simulation& s, const sim::SimResult& r, double wall_s) {
  const sim::Summary& m = r.summary;
  std::string out = fmt::format("cost model: {}\n", s.cost->describe());
  out += fmt::format("{} requests ({} completed) in {:.1f} s simulated, {} steps ({:.2f} s wall)\n", m.requests,
                     m.completed, m.duration_s, m.steps, wall_s);
  out += fmt::format("throughput {:.3f} req/s, {:.1f} output tok/s, {:.1f} total tok/s\n", m.request_throughput,
                     m.output_throughput, m.total_token_throughput);
  for (const auto& [name, st] :
       {std::pair{"TTFT", m.ttft_ms}, {"TPOT", m.tpot_ms}, {"ITL", m.itl_ms}, {"E2E", m.e2e_ms}})
    out += fmt::format("{:<5} ms  mean {:>10.2f}  median {:>10.2f}  p90 {:>10.2f}  p99 {:>10.2f}\n", name, st.mean,
                       st.median, st.p90, st.p99);
  out += fmt::format("energy {:.1f} J: {:.3f} J/output token, {:.1f} J/request, {:.1f} W average\n", m.energy_j,
                     m.j_per_output_token, m.j_per_request, m.average_power_w);
  if (m.slo) out += fmt::format("goodput {} requests, {:.3f} req/s\n", m.good_requests, m.request_goodput);
  if (m.preemptions) out += fmt::format("preemptions {}\n", m.preemptions);
  std::fputs(out.c_str(), stdout);
}

void run_simulate(const cli::SimFlags& flags) {
  const auto t0 = std::chrono::steady_clock::now();
  const sim::SimConfig config = flags.config();
  if (config.out.empty()) DOOLY_THROW(InputError, "give --out result.json", "no --out");
  for (const std::string* path : {&config.out, &config.csv})
    if (!path->empty()) sim::check_writable(*path);
  if (!config.plot.empty()) sim::check_writable(config.plot + "-latency.png");
  const std::unique_ptr<sim::Simulation> s = sim::prepare(config, cli::models_dir(config.model));
  for (const std::string& c : s->engine->cautions()) std::fprintf(stderr, "dooly simulate: caution: %s\n", c.c_str());
  sim::ResultWriter out(config.out, *s);  // the steps are streamed into it as they happen
  const sim::SimResult r = sim::run(*s, &out, /*keep_steps=*/!config.plot.empty());
  out.finish(*s, r);
  if (!config.csv.empty()) sim::write_requests_csv(config.csv, *s);
  if (!config.plot.empty()) sim::write_plots(config.plot, *s, r);
  print_summary(*s, r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void setup_simulate(CLI::App& app) {
  auto flags = std::make_shared<cli::SimFlags>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Simulate LLM serving: TTFT, TPOT, ITL, E2E, throughput, energy per token (docs/simulate.md)");
  flags->add_to(*cmd, /*for_sweep=*/false);
  cmd->callback([flags] { run_simulate(*flags); });
}

const bool registered = dooly::cli::add_command("simulate", &setup_simulate);

}  // namespace
