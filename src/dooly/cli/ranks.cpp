// dooly ranks PREFIX: reduces the ranks' reports (<prefix>.rank<N>.json, written under an MPI launcher) to one,
// as rank 0 does at the end of a run: for when rank 0 stopped waiting, or the ranks ran where it could not wait.
#include <optional>
#include <string>

#include "dooly/cli/command_registry.hpp"
#include "dooly/energy/rank_outputs.hpp"
#include "dooly/energy/rank_reattribute.hpp"

namespace {

struct RanksArgs {
  std::string prefix;
  std::string out;
  std::optional<std::string> job;
  bool joint = false;
  std::string mode = "model";
};

void run_ranks(const RanksArgs& a) {
  using namespace dooly;
  energy::OutputSettings o;
  o.prefix = a.out.empty() ? a.prefix : a.out;
  energy::check_writable(o.prefix + ".json");
  energy::FoundRankFiles found = energy::find_rank_files(a.prefix, a.job);
  energy::Reattribution joint;
  if (a.joint) {
    energy::AnalysisOptions analysis;
    analysis.mode = energy::mode_from_string(a.mode);
    joint = energy::reattribute_shared_devices(found.files, analysis);
  }
  energy::RanksReport reduced = energy::reduce_ranks(found.files, found.size, joint.devices);
  reduced.ignored = std::move(found.ignored);
  reduced.joint_skipped = std::move(joint.skipped);
  energy::write_reduced_outputs(reduced, o);
}

void setup_ranks(CLI::App& app) {
  auto args = std::make_shared<RanksArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ranks", "Reduce the MPI ranks' reports (<prefix>.rank<N>.json) to one table, <prefix>.csv and <prefix>.json");
  cmd->add_option("prefix", args->prefix, "the output prefix the ranks wrote with (DOOLY_OUTPUT)")->required();
  cmd->add_option("--job", args->job, "the launcher's job id to reduce (default: the job of the newest rank file)");
  cmd->add_option("--out", args->out, "write <out>.csv and <out>.json instead of <prefix>.csv and <prefix>.json");
  cmd->add_flag("--joint", args->joint,
                "attribute a GPU that several ranks shared once, from their recordings (DOOLY_RECORD on every rank)");
  cmd->add_option("--mode", args->mode, "with --joint: which attribution leads")
      ->check(CLI::IsMember({"trapezoid", "model"}));
  cmd->callback([args] { run_ranks(*args); });
}

const bool registered = dooly::cli::add_command("ranks", &setup_ranks);

}  // namespace
