// dooly signatures traces/*.json --db dooly.sqlite
// Parses the arguments, calls dooly::store::ingest_traces and prints its summary: per model, how many of its
// op signatures are new and how many it shares with what the store already held (earlier models of this run
// included).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/store/ingest.hpp"

namespace {

struct SignaturesArgs {
  std::vector<std::string> traces;
  std::string db = "dooly.sqlite";
};

void run_signatures(const SignaturesArgs& a) {
  using namespace dooly;
  const store::IngestSummary s = store::ingest_traces(a.db, a.traces);
  const auto line = [](const auto& model, const auto& backend, const auto& ops, const auto& unique, const auto& fresh,
                       const auto& shared) {
    std::fputs(
        fmt::format("{:<24} {:<21} {:>7} {:>7} {:>5} {:>20}\n", model, backend, ops, unique, fresh, shared).c_str(),
        stdout);
  };
  line("model", "backend", "ops", "unique", "new", "shared-with-earlier");
  for (const auto& t : s.traces) line(t.model, t.backend, t.ops, t.unique_ops, t.new_ops, t.shared_ops());
  std::fputs(fmt::format("total occurrences {} -> unique signatures {}\n", s.total_ops, s.unique_ops).c_str(), stdout);
  std::fputs(
      fmt::format("module representatives: {} unique ({} new in {})\n", s.unique_modules, s.new_modules, a.db).c_str(),
      stdout);
}

void setup_signatures(CLI::App& app) {
  auto a = std::make_shared<SignaturesArgs>();
  CLI::App* cmd = app.add_subcommand("signatures", "Sign traced ops and modules and store them with occurrence counts");
  cmd->add_option("traces", a->traces, "trace files written by `dooly trace` (format 2)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--db", a->db, "the SQLite store (created if missing)")->capture_default_str();
  cmd->callback([a] { run_signatures(*a); });
}

const bool registered = dooly::cli::add_command("signatures", &setup_signatures);

}  // namespace
