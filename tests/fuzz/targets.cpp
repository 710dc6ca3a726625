#include "targets.hpp"

#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/energy/recording_analysis.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/plan/grid.hpp"
#include "dooly/plan/value_expr.hpp"
#include "dooly/power/replay/recorded_readings.hpp"
#include "dooly/power/variorum/variorum_json.hpp"
#include "dooly/sim/compare.hpp"
#include "dooly/sim/step_times_cost.hpp"
#include "dooly/sim/workload.hpp"
#include "dooly/trace/model_config.hpp"
#include "dooly/trace/trace.hpp"

namespace dooly::fuzz {

namespace {
std::string bytes(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// Readers must report bad input as an InputError whose message is one line.
void check_one_line(const Error& e) {
  if (e.problem().find('\n') != std::string::npos) __builtin_trap();
}
}  // namespace

int recording(const uint8_t* data, size_t size) {
  std::istringstream in(bytes(data, size));
  try {
    (void)energy::read_recording(in, "fuzz.recording");
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int readings(const uint8_t* data, size_t size) {
  std::istringstream in(bytes(data, size));
  try {
    (void)power::read_recorded_readings(in, "fuzz.recording");
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int analyze(const uint8_t* data, size_t size) {
  std::istringstream in(bytes(data, size));
  try {
    const energy::Recording rec = energy::read_recording(in, "fuzz.recording");
    for (bool model : {false, true}) {
      energy::AnalysisOptions o;
      o.attribution.model = model;
      o.mode = model ? energy::Mode::model : energy::Mode::trapezoid;
      const energy::Report report = energy::analyze_recording(rec, o);
      (void)energy::format_table(report);
      (void)energy::to_csv(report);
      (void)energy::to_json_text(report);
    }
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int variorum_json(const uint8_t* data, size_t size) {
  std::string error;
  const auto snap = power::variorum::parse_power_json(bytes(data, size), error);
  if (!snap && error.empty()) __builtin_trap();  // a refusal always says why
  return 0;
}

int trace_json(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(bytes(data, size), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // read_trace turns that into an InputError before parse_trace
  try {
    (void)trace::parse_trace(j, "fuzz.json");
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int model_config(const uint8_t* data, size_t size) {
  try {
    (void)trace::check_model_config(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int grid(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json j = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
    const plan::Grid g = plan::parse_grid(j, "grid.json");
    for (const plan::Composition& c : g.compositions()) (void)c.value_of("KV_TOKS_SLIDING(48)");
  } catch (const nlohmann::json::exception&) {
    // not JSON: read_grid turns this into one InputError line; the grid's own checks are what is fuzzed here
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int value_form(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)plan::variables_of(text);
    (void)plan::evaluate(text, [](const std::string& name) -> std::optional<int64_t> {
      if (name.size() % 3 == 0) return std::nullopt;  // some names unbound
      return static_cast<int64_t>(name.size()) - 2;   // zero and negatives too
    });
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int result_json(const uint8_t* data, size_t size) {
  // Not JSON: read_result turns that into one InputError line; what follows the parse is what is fuzzed, and no
  // JSON exception may come out of it.
  const nlohmann::json j =
      nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    sim::check_result(j, "result.json");
    const sim::Comparison c = sim::compare_results(j, j);  // a file against itself: every field read, twice
    (void)sim::render_comparison(c);
    (void)sim::comparison_json(c).dump();
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

int workload(const uint8_t* data, size_t size) {
  const std::string text = bytes(data, size);
  const std::string spec = text.substr(0, text.find('\n'));
  try {
    // Not the kinds that read a file (a spec names any path: /dev/zero would never end), and no generation
    // (a valid n asks for up to 10^7 requests): the grammar and its checks are what is fuzzed here.
    if (spec.find("empirical:") == std::string::npos && spec.rfind("trace:", 0) != 0) (void)sim::parse_workload(spec);
  } catch (const InputError& e) {
    check_one_line(e);
  }
  std::istringstream in(text);
  try {
    (void)sim::parse_trace(in, "fuzz.jsonl");
  } catch (const InputError& e) {
    check_one_line(e);
  }
  std::istringstream times(text);
  try {
    (void)sim::StepTimesCost::parse(times, "fuzz.txt");
  } catch (const InputError& e) {
    check_one_line(e);
  }
  return 0;
}

}  // namespace dooly::fuzz
