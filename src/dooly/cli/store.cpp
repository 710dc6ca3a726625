// dooly store merge INTO FROM...   dooly store info FILE   dooly store prune FILE --contexts ID,...
// merge: checks every FROM (a dooly store at this build's schema, not INTO itself), then copies them into INTO
// (created if missing) in one transaction, all of them or none, and prints per file what it added.
// info: what one store holds (schema version, rows per table, measurements by status, each provenance).
// prune: removes superseded measurement contexts with their rows, in one transaction, then vacuums the file.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"
#include "dooly/store/merge.hpp"
#include "dooly/store/prune.hpp"
#include "dooly/store/store.hpp"

namespace {

using namespace dooly;

void print(const std::string& text) { std::fputs(text.c_str(), stdout); }

int64_t by_status(const store::Summary& s, store::MeasurementStatus status) {
  return s.measurements_by_status[static_cast<size_t>(status)];
}

struct MergeArgs {
  std::string into;
  std::vector<std::string> from;
};

void run_merge(const MergeArgs& a) {
  // Check every input before the first write: a bad file is one line and INTO is not even created.
  for (const std::string& from : a.from) {
    std::error_code ec;
    if (std::filesystem::equivalent(a.into, from, ec))
      DOOLY_THROW(InputError, "list the stores to merge from after the one to merge into, not the same file",
                  "cannot merge store {} into itself", from);
    (void)store::Store::open(from, store::Store::Mode::read_only);  // a dooly store at this schema version
  }
  store::Store into = store::Store::open(a.into);
  std::vector<store::MergeSummary> merged;
  {
    auto tx = into.transaction();
    for (const std::string& from : a.from) merged.push_back(store::merge_store(into, from));
    tx.commit();
  }
  for (const store::MergeSummary& m : merged) {
    print(fmt::format(
        "{}: +{} signatures ({} already there), +{} models ({}), +{} provenance ({}), +{} occurrences ({}), +{} "
        "measurements ({}), +{} resolutions ({}), {} replaced by newer\n",
        m.from_path, m.signatures.added, m.signatures.skipped, m.models.added, m.models.skipped, m.provenances.added,
        m.provenances.skipped, m.occurrences.added, m.occurrences.skipped, m.measurements.added, m.measurements.skipped,
        m.resolutions.added, m.resolutions.skipped, m.resolutions.replaced));
  }
  const store::Summary s = into.summary();
  print(fmt::format(
      "{} now holds {} signatures, {} models, {} provenance, {} occurrence rows, {} measurements, {} resolutions\n",
      a.into, s.signatures, s.models, s.provenances, s.occurrence_rows, s.measurements, s.resolutions));
}

void run_info(const std::string& path) {
  using store::MeasurementStatus;
  const store::Store db = store::Store::open(path, store::Store::Mode::read_only);
  const store::Summary s = db.summary();
  print(fmt::format("store {}: schema version {}\n", path, s.schema_version));
  print(fmt::format("{:<16} {:>9}\n", "signatures", s.signatures));
  print(fmt::format("{:<16} {:>9}\n", "models", s.models));
  print(fmt::format("{:<16} {:>9}\n", "provenance", s.provenances));
  print(fmt::format("{:<16} {:>9}  (occurrences {})\n", "occurrence rows", s.occurrence_rows, s.occurrences));
  print(fmt::format("{:<16} {:>9}  (ok {}, failed {}, oom {}, timeout {})\n", "measurements", s.measurements,
                    by_status(s, MeasurementStatus::ok), by_status(s, MeasurementStatus::failed),
                    by_status(s, MeasurementStatus::oom), by_status(s, MeasurementStatus::timeout)));
  print(fmt::format("{:<16} {:>9}\n", "resolutions", s.resolutions));
  print(fmt::format("{:<16} {:>9}\n", "predictors", s.predictors));
  // Each provenance: a trace context holds occurrences of traced models, a measurement context measurements.
  print("provenance  occurrence rows  measurements  attention  extra\n");
  for (const store::ProvenanceUse& u : db.provenance_uses())
    print(fmt::format("{:>10}  {:>15}  {:>12}  {:<9}  {}\n", u.provenance.id, u.occurrence_rows, u.measurements,
                      u.provenance.attention_backend, u.provenance.extra_json));
}

struct PruneArgs {
  std::string file;
  std::vector<int64_t> contexts;
  bool vacuum = true;
};

void run_prune(const PruneArgs& a) {
  store::Store db = store::Store::open(a.file);
  const store::PruneSummary p = store::prune_contexts(db, a.contexts);
  print(fmt::format("{}: removed {} contexts: {} measurements, {} resolutions, {} predictors\n", a.file, p.contexts,
                    p.measurements, p.resolutions, p.predictors));
  if (a.vacuum) print(fmt::format("{}: vacuumed, {:.1f} MB smaller\n", a.file, store::vacuum(db) / 1e6));
}

void setup_store(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("store", "Merge stores (shards of separate runs) and show what a store holds");
  cmd->require_subcommand(1);

  auto m = std::make_shared<MergeArgs>();
  CLI::App* merge = cmd->add_subcommand("merge", "Copy the stores FROM... into INTO (created if missing), atomically");
  merge->add_option("into", m->into, "the store to merge into")->required();
  merge->add_option("from", m->from, "dooly stores to merge from (opened read-only)")
      ->required()
      ->check(CLI::ExistingFile);
  merge->callback([m] { run_merge(*m); });

  auto file = std::make_shared<std::string>();
  CLI::App* info = cmd->add_subcommand("info", "Show a store's schema version, rows per table, measurements by status");
  info->add_option("file", *file, "a dooly store")->required()->check(CLI::ExistingFile);
  info->callback([file] { run_info(*file); });

  auto pr = std::make_shared<PruneArgs>();
  CLI::App* prune = cmd->add_subcommand(
      "prune", "Remove superseded measurement contexts with their measurements, resolutions and predictors");
  prune->add_option("file", pr->file, "a dooly store")->required()->check(CLI::ExistingFile);
  prune->add_option("--contexts", pr->contexts, "provenance ids to remove (see dooly store info)")
      ->required()
      ->delimiter(',');
  prune->add_flag("!--no-vacuum", pr->vacuum, "leave the freed pages in the file");
  prune->callback([pr] { run_prune(*pr); });
}

const bool registered = dooly::cli::add_command("store", &setup_store);

}  // namespace
