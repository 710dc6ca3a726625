#include "dooly/plan/profile_report.hpp"

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dooly/plan/profile_store.hpp"

namespace dooly::plan {

namespace {

struct ClassRow {
  int64_t units = 0, measured_units = 0, ok = 0, not_ok = 0, occurrences = 0, covered = 0;
  double device_s = 0;
};

// One unit's rows under the context into its class's tally; the first failures are kept for the listing.
void tally_unit(store::Store& store, const Plan& plan, const UnitPlan& u, ClassRow& r,
                std::vector<std::string>& failures) {
  r.units += 1;
  r.occurrences += u.occurrences;
  int64_t ok = 0;
  if (plan.provenance_id > 0 && u.signature_id > 0)
    for (const store::Measurement& m : store.measurements_for(u.signature_id, plan.provenance_id)) {
      // A point's whole time on the device: inputs, warm-up, graph capture, the timed window (or until it failed).
      if (auto t = point_seconds(nlohmann::json::parse(m.extra_json, nullptr, false))) r.device_s += *t;
      if (m.status == store::MeasurementStatus::ok) {
        ++ok;
        continue;
      }
      ++r.not_ok;
      if (failures.size() < 20)
        failures.push_back(fmt::format("  {} {} {} {}: {}", u.hash.substr(0, 12), u.name, m.point_key,
                                       store::to_string(m.status), m.reason));
    }
  r.ok += ok;
  if (ok > 0) {
    r.measured_units += 1;
    r.covered += u.occurrences;
  }
}

}  // namespace

std::string render_report(store::Store& store, const Plan& plan) {
  std::map<std::string, ClassRow> rows;
  ClassRow total;
  std::vector<std::string> failures;
  for (const UnitPlan& u : plan.units) tally_unit(store, plan, u, rows[u.op_class], failures);
  std::string out = fmt::format("store {}: measurement context {}\n", store.path(), plan.provenance_id);
  out += fmt::format("{:<14} {:>6} {:>9} {:>8} {:>8} {:>12} {:>10} {:>9}\n", "class", "units", "measured", "points",
                     "failed", "occurrences", "covered", "GPU s");
  for (const auto& [cls, r] : rows) {
    out +=
        fmt::format("{:<14} {:>6} {:>9} {:>8} {:>8} {:>12} {:>9.1f}% {:>9.1f}\n", cls, r.units, r.measured_units, r.ok,
                    r.not_ok, r.occurrences, r.occurrences ? 100.0 * r.covered / r.occurrences : 0.0, r.device_s);
    total.units += r.units;
    total.measured_units += r.measured_units;
    total.ok += r.ok;
    total.not_ok += r.not_ok;
    total.occurrences += r.occurrences;
    total.covered += r.covered;
    total.device_s += r.device_s;
  }
  int64_t uncovered_occ = 0;
  for (const Uncovered& x : plan.uncovered) uncovered_occ += x.occurrences;
  const int64_t all_occ = total.occurrences + uncovered_occ;
  out += fmt::format(
      "total: {} op occurrences -> {} op signatures -> {} units; {} units measured, {} points ok, {} not;"
      " coverage {:.2f} % of op occurrences; {:.1f} GPU-min measured\n",
      plan.op_occurrences, plan.op_signatures, total.units, total.measured_units, total.ok, total.not_ok,
      all_occ ? 100.0 * total.covered / all_occ : 0.0, total.device_s / 60);
  if (!failures.empty()) out += "points not measured (first 20):\n";
  for (const std::string& f : failures) out += f + "\n";
  if (!plan.uncovered.empty()) {
    out += fmt::format("uncovered: {} signatures ({} op occurrences):\n", plan.uncovered.size(), uncovered_occ);
    for (const Uncovered& x : plan.uncovered)
      out += fmt::format("  {} {} ({} occurrences): {}\n", x.hash.substr(0, 12), x.name, x.occurrences, x.reason);
  }
  return out;
}

}  // namespace dooly::plan
