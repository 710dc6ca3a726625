// dooly profile traces/*.json --db dooly.sqlite [--grid FILE] [--dry-run] [--plan-json FILE] [--shard i/N]
//               [--retry-failed] [--device cpu|cuda] [--report]
// Plans in C++ (dooly::plan) and, unless --dry-run or --report, execs the Python worker that runs each unit on the
// device (python -m dooly.profile); the worker calls back into the same planner and store through the binding.
// Every argument is checked here first, so bad input is one line before torch is imported.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/cli/python_exec.hpp"
#include "dooly/common/error.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/plan/grid.hpp"
#include "dooly/plan/plan.hpp"
#include "dooly/plan/profile_report.hpp"
#include "dooly/plan/profile_store.hpp"
#include "dooly/store/ingest.hpp"  // --dry-run on a store that does not exist yet

namespace {

namespace fs = std::filesystem;
using namespace dooly;

struct ProfileArgs {
  std::vector<std::string> traces;
  std::string db = "dooly.sqlite";
  std::string grid;
  std::string shard = "0/1";
  std::string device = "auto";
  std::string plan_json;
  int64_t provenance = 0;
  bool dry_run = false;
  bool report = false;
  bool retry_failed = false;
};

void run_profile(const ProfileArgs& a) {
  const std::string grid_path =
      a.grid.empty() ? (fs::path(cli::find_source_dir("data/grids/default.json")) / "data/grids/default.json").string()
                     : a.grid;
  const plan::Grid grid = plan::read_grid(grid_path);
  const plan::PlanOptions options = [&] {
    plan::PlanOptions o = plan::parse_shard(a.shard);
    o.retry_failed = a.retry_failed;
    return o;
  }();
  if (a.device != "auto" && a.device != "cpu" && a.device.rfind("cuda", 0) != 0)
    DOOLY_THROW(InputError, "use --device cpu, cuda or cuda:N", "unknown --device '{}'", a.device);
  std::vector<trace::Trace> traces;
  for (const std::string& p : a.traces) traces.push_back(trace::read_trace(p));  // every trace checked first
  if (!a.plan_json.empty()) energy::check_writable(a.plan_json);

  if (a.dry_run || a.report) {
    // Read-only: a store that does not exist yet holds nothing (an empty in-memory one stands in).
    const bool exists = fs::exists(a.db);
    store::Store db = exists ? store::Store::open(a.db, store::Store::Mode::read_only) : store::Store::open(":memory:");
    if (!exists) store::ingest_traces(db, a.traces);
    const int64_t ctx = a.provenance > 0 ? a.provenance : plan::latest_measurement_context(db).value_or(0);
    const plan::Plan plan = plan::build_plan(db, a.traces, traces, grid, ctx, options);
    if (a.report) {
      std::fputs(plan::render_report(db, plan).c_str(), stdout);
    } else {
      std::fputs(render_plan(plan).c_str(), stdout);
    }
    if (!a.plan_json.empty()) energy::write_file_atomic(a.plan_json, plan::to_json(plan).dump(1) + "\n");
    return;
  }
  // The run: the worker puts the traces into the store first (signatures, models, occurrences), then plans and
  // measures through the binding.
  std::vector<std::string> args = {"--db", a.db, "--grid", grid_path, "--shard", a.shard, "--device", a.device};
  if (a.retry_failed) args.emplace_back("--retry-failed");
  if (a.provenance > 0) args.insert(args.end(), {"--provenance", std::to_string(a.provenance)});
  if (!a.plan_json.empty()) args.insert(args.end(), {"--plan-json", a.plan_json});
  args.emplace_back("--");
  args.insert(args.end(), a.traces.begin(), a.traces.end());
  std::fflush(stdout);
  cli::exec_python_module("dooly.profile", args, "python/dooly/profile/__main__.py");
}

void setup_profile(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure every unique unit of the traced models alone over a sweep, time and energy (docs/profile.md)");
  cmd->add_option("traces", a->traces, "trace files written by `dooly trace`")->required()->check(CLI::ExistingFile);
  cmd->add_option("--db", a->db, "the SQLite store (created if missing)")->capture_default_str();
  cmd->add_option("--grid", a->grid, "sweep grids and measurement settings (default data/grids/default.json)");
  cmd->add_flag("--dry-run", a->dry_run, "print the plan and exit: units, points to measure and skip, GPU time");
  cmd->add_flag("--report", a->report, "print what the store holds for these traces and exit");
  cmd->add_option("--plan-json", a->plan_json, "also write the plan as JSON to this file");
  cmd->add_option("--shard", a->shard, "run one deterministic slice i/N of the units (merge: dooly store merge)")
      ->capture_default_str();
  cmd->add_flag("--retry-failed", a->retry_failed, "measure points stored as failed again");
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N (auto: cuda when present)")->capture_default_str();
  cmd->add_option("--provenance", a->provenance, "measurement context id (default: this machine's, or the newest)");
  cmd->callback([a] { run_profile(*a); });
}

const bool registered = dooly::cli::add_command("profile", &setup_profile);

}  // namespace
