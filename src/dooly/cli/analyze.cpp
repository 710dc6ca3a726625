// dooly analyze RECORDING: re-attributes a recorded run (readings + windows) offline and prints the table;
// optionally writes CSV and JSON. The same engine as the live connector.
#include <cstdio>

#include "dooly/cli/command_registry.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/energy/recording_analysis.hpp"
#include "dooly/energy/report_writers.hpp"

namespace {

struct AnalyzeArgs {
  std::string recording;
  std::string mode = "model";
  std::optional<double> baseline_w;
  std::optional<double> window_ms, delay_ms;
  std::string csv, json;
  bool no_model = false;
  bool no_split = false;
  std::optional<double> span_ms;
};

void run_analyze(const AnalyzeArgs& a) {
  using namespace dooly;
  energy::AnalysisOptions o;
  o.mode = energy::mode_from_string(a.mode);
  o.attribution.baseline_w = a.baseline_w;
  o.attribution.model = !a.no_model;
  o.attribution.split_overlaps = !a.no_split;
  if (a.span_ms) o.attribution.split_span_ns = static_cast<int64_t>(*a.span_ms * 1e6);
  if (a.window_ms) o.sensor_window_ns = static_cast<int64_t>(*a.window_ms * 1e6);
  if (a.delay_ms) o.sensor_delay_ns = static_cast<int64_t>(*a.delay_ms * 1e6);
  // Output paths are checked before the work, so a bad one is one line up front, not after the table.
  if (!a.csv.empty()) energy::check_writable(a.csv);
  if (!a.json.empty()) energy::check_writable(a.json);
  const energy::Recording rec = energy::read_recording(a.recording);
  const energy::Report report = energy::analyze_recording(rec, o);
  const std::string table = energy::format_table(report);
  if (!a.csv.empty()) energy::write_file_atomic(a.csv, energy::to_csv(report));
  if (!a.json.empty()) energy::write_file_atomic(a.json, energy::to_json_text(report));
  std::fputs(table.c_str(), stdout);
}

void setup_analyze(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  CLI::App* cmd = app.add_subcommand("analyze", "Re-attribute energy from a recorded run (DOOLY_RECORD) offline");
  cmd->add_option("recording", args->recording, "a dooly recording (# dooly-recording v1)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--mode", args->mode, "which attribution the table leads with")
      ->check(CLI::IsMember({"trapezoid", "model"}));
  cmd->add_option("--baseline-w", args->baseline_w, "idle power to subtract (default: measured from quiet readings)")
      ->check(CLI::Range(0.0, 1e5));
  // Bounded as the recording format bounds a channel's sensor times (60 s).
  cmd->add_option("--sensor-window-ms", args->window_ms, "the sensor's averaging window (model mode)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--sensor-delay-ms", args->delay_ms, "the sensor's lag (model mode)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--csv", args->csv, "also write the report as CSV here");
  cmd->add_option("--json", args->json, "also write the report as JSON here");
  cmd->add_flag("--no-model", args->no_model, "skip the model fit");
  cmd->add_flag("--no-overlap-split", args->no_split,
                "fit readings with concurrent kernels like the others (power taken as additive) instead of splitting "
                "them by J/call alone");
  cmd->add_option("--overlap-span-ms", args->span_ms,
                  "how far back of an overlapped reading's window the split counts calls (default 100)")
      ->check(CLI::Range(0.0, 10000.0));
  cmd->callback([args] { run_analyze(*args); });
}

const bool registered = dooly::cli::add_command("analyze", &setup_analyze);

}  // namespace
