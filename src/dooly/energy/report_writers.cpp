#include "dooly/energy/report_writers.hpp"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/energy/rank_outputs.hpp"
#include "dooly/energy/table_text.hpp"

namespace dooly::energy {

void apply_sensor_overrides(power::Channel& ch, std::optional<int64_t> window_ns, std::optional<int64_t> delay_ns) {
  if (!window_ns && !delay_ns) return;
  if (window_ns) ch.sensor.window_ns = *window_ns;
  if (delay_ns) ch.sensor.delay_ns = *delay_ns;
  ch.sensor.description +=
      fmt::format(" [sensor window {:g} ms, lag {:g} ms given]", static_cast<double>(ch.sensor.window_ns) / 1e6,
                  static_cast<double>(ch.sensor.delay_ns) / 1e6);
}

std::string_view to_string(Mode mode) noexcept { return mode == Mode::model ? "model" : "trapezoid"; }

Mode mode_from_string(std::string_view word) {
  if (word == "trapezoid") return Mode::trapezoid;
  if (word == "model") return Mode::model;
  DOOLY_THROW(InputError, "set DOOLY_MODE to trapezoid or model", "unknown attribution mode '{}'", word);
}

namespace {

using table_text::compact;
using table_text::csv_quote;
using table_text::num;
using table_text::shorten;

// A half-width: "inf" when the run does not determine the figure.
std::string interval(std::optional<double> hw) {
  if (!hw) return "-";
  if (!std::isfinite(*hw) || *hw > 1e15) return "inf";
  return compact(*hw);
}

std::string ms(int64_t ns) { return fmt::format("{:g} ms", static_cast<double>(ns) / 1e6); }

std::string sensor_check_line(const SensorCheck& s) {
  if (!s.done) return {};
  std::string out = fmt::format("sensor model: given window {}, lag {} (residual {:.2f} W rms); ",
                                ms(s.given.window_ns), ms(s.given.delay_ns), s.given.residual_rms_w);
  if (s.preferred < 0) {
    out += "no neighbouring setting fits better";
  } else {
    const SensorSettingFit& b = s.best();
    out += fmt::format("the data prefer window {}, lag {} ({:.2f} W rms)", ms(b.window_ns), ms(b.delay_ns),
                       b.residual_rms_w);
  }
  std::string tried;
  for (const auto& n : s.neighbours)
    tried += fmt::format("{}{}/{}", tried.empty() ? "" : ", ", ms(n.window_ns), ms(n.delay_ns));
  out += fmt::format(" [neighbours tried, window/lag: {}]", tried);
  if (s.rows_sensitive)
    out += fmt::format("; for {} region(s) the sensor model's part of the interval exceeds the fit's own (^)",
                       s.rows_sensitive);
  return out + "\n";
}

std::string flags_of(const RegionRow& r) {
  std::string f;
  if (r.mostly_short()) f += '*';
  if (r.model_unresolved()) f += '!';
  if (r.model_too_little_data) f += '?';
  if (r.model_sensor_sensitive) f += '^';
  if (r.extrapolated_windows) f += '~';
  if (r.model_never_alone) f += '=';
  return f;
}

}  // namespace

namespace {

// The channel's rows: the leading mode's energy, J/call and interval, the other mode's J/call, the flags.
std::string table_rows(const ChannelReport& ch, bool model_lead) {
  const double model_floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
  size_t width = 16;
  for (const auto& r : ch.rows) width = std::max(width, std::min<size_t>(r.label().size(), 48));
  const std::string header = fmt::format("{:<{}}  {:>9}  {:>10}  {:>11}  {:>10}  {:>9}  {:>7}  {:>13}  {}", "region",
                                         width, "calls", "time(s)", "energy(J)", "J/call", "+-(95%)", "avg(W)",
                                         model_lead ? "J/call(trap)" : "J/call(model)", "flags");
  const std::string rule(header.size() - 5, '-');
  std::string out = header + "\n" + rule + "\n";
  std::vector<const RegionRow*> rows;
  rows.reserve(ch.rows.size());
  for (const auto& r : ch.rows) rows.push_back(&r);
  if (model_lead)
    std::stable_sort(rows.begin(), rows.end(), [](const RegionRow* a, const RegionRow* b) {
      return a->model_energy_j.value_or(0) > b->model_energy_j.value_or(0);
    });
  for (const RegionRow* r : rows) {
    const double energy = model_lead ? r->model_energy_j.value_or(0) : r->energy_j;
    const double jpc = model_lead ? r->model_j_per_call(model_floor).value_or(0) : r->j_per_call(ch.baseline_w);
    const std::optional<double> other =
        model_lead ? std::optional<double>(r->j_per_call(ch.baseline_w)) : r->model_j_per_call(model_floor);
    const double avg = r->time_s > 0 ? energy / r->time_s : 0;
    out += fmt::format("{:<{}}  {:>9}  {:>10.4f}  {:>11}  {:>10}  {:>9}  {:>7.0f}  {:>13}  {}\n",
                       shorten(r->label(), width), width, r->calls, r->time_s, compact(energy), compact(jpc),
                       model_lead ? interval(r->model_j_per_call_hw_j) : std::string("-"), avg,
                       other ? compact(*other) : std::string("-"), flags_of(*r));
  }
  return out + rule + "\n";
}

// The split of readings with concurrent kernels, and each overlapped kernel's J/call there and alone.
std::string concurrency_lines(const ChannelReport& ch) {
  const ModelFit& f = ch.fit;
  if (!f.concurrent_readings && !f.concurrent_unsplit) return "";
  std::string out = fmt::format(
      "concurrent kernels: {} readings held kernels overlapping on different streams; their energy above the floor is "
      "split among the kernels of their window and the {:g} ms before it in proportion to calls x J/call alone{}\n",
      f.concurrent_readings, f.split_span_ms,
      f.concurrent_unsplit
          ? fmt::format(" ({} more were fitted as usual: the split's pool was full)", f.concurrent_unsplit)
          : "");
  for (const RegionRow& r : ch.rows) {
    if (!r.model_overlap_calls || *r.model_overlap_calls < 0.5) continue;
    const double over = *r.model_overlap_energy_j / *r.model_overlap_calls;
    out += fmt::format("  {}: {} J/call overlapped ({:.0f} of {} calls, {:.0f} % of its time)", shorten(r.label(), 48),
                       compact(over), *r.model_overlap_calls, r.calls,
                       r.time_s > 0 ? 100.0 * r.model_overlap_time_s.value_or(0) / r.time_s : 0.0);
    const double alone_calls = static_cast<double>(r.calls) - *r.model_overlap_calls;
    if (r.model_power_w && !r.model_never_alone && alone_calls >= 0.5 && r.time_s > *r.model_overlap_time_s)
      out += fmt::format(", {} J/call alone",
                         compact(*r.model_power_w * (r.time_s - *r.model_overlap_time_s) / alone_calls));
    out +=
        r.model_never_alone ? " (=: never seen alone: its J/call alone was fitted on the overlapped readings)\n" : "\n";
  }
  return out;
}

// Baseline, conservation, the fit and the sensor check.
std::string table_summary(const ChannelReport& ch, bool model_lead) {
  std::string out;
  if (model_lead)
    out += fmt::format(
        "model floor {:.1f} W (fitted intercept; subtracted for the J/call column); device idle baseline ~ {:.0f} W "
        "({})\n",
        ch.fit.intercept_w, ch.baseline_w, ch.baseline_method);
  else
    out += fmt::format("device idle baseline ~ {:.0f} W  (subtracted for the J/call column; {})\n", ch.baseline_w,
                       ch.baseline_method);
  const Conservation& cs = ch.conservation;
  out += fmt::format("run {:.3f} s, {} J = attributed {} + unattributed {}", ch.run_time_s, compact(cs.run_energy_j),
                     compact(cs.attributed_j), compact(cs.unattributed_j));
  if (cs.counter_delta_j && *cs.counter_delta_j > 0)
    out += fmt::format("; energy counter {} J (ratio {:.3f})", compact(*cs.counter_delta_j), cs.ratio().value_or(0));
  else if (cs.counter_delta_j)
    out += "; the energy counter did not advance over the run (too short for it, or it is not updated): no check";
  out += "\n";
  if (ch.fit.fitted) {
    out += fmt::format("model fit: {} readings, {} regions, floor {:.1f} W{}, residual {:.1f} W rms, R^2 {:.3f}\n",
                       ch.fit.samples, ch.fit.columns, ch.fit.intercept_w, ch.fit.intercept_fixed ? " (given)" : "",
                       ch.fit.residual_rms_w, ch.fit.r_squared);
    out += fmt::format("intervals: {}\n", ch.fit.interval_method);
    out += concurrency_lines(ch);
  } else {
    out += fmt::format("model fit: not fitted ({}){}\n", ch.fit.why_not,
                       ch.fit.nnls_converged ? "" : "; the table shows the trapezoid's figures");
  }
  return out + sensor_check_line(ch.sensor_check);
}

// One line per flag that some row carries.
std::string table_legend(const ChannelReport& ch) {
  bool any_short = false, any_unresolved = false, any_little = false, any_ex = false, any_sensor = false;
  for (const auto& r : ch.rows) {
    any_short |= r.mostly_short();
    any_unresolved |= r.model_unresolved();
    any_little |= r.model_too_little_data;
    any_ex |= r.extrapolated_windows > 0;
    any_sensor |= r.model_sensor_sensitive;
  }
  std::string out;
  if (any_short)
    out += fmt::format(
        "* most windows shorter than the sensor's update period ({:.0f} ms): a statistical aggregate over calls\n",
        static_cast<double>(ch.channel.sensor.update_ns) / 1e6);
  if (any_unresolved)
    out +=
        "! the model cannot pin this region down: its J/call interval is wider than 5 % of it (the run varied it "
        "too little apart from the others)\n";
  if (any_little) out += "? too little data for the model\n";
  if (any_sensor)
    out +=
        "^ most of its interval is the sensor model's: its J/call moves more at a neighbouring sensor setting than the "
        "fit's own error\n";
  if (any_ex) out += "~ some windows lie outside the power readings (power held constant there)\n";
  return out;
}

}  // namespace

std::string format_table(const Report& report) {
  std::string out;
  for (const ChannelReport& ch : report.channels) {
    const bool model_lead = report.mode == Mode::model && ch.fit.fitted;
    out += fmt::format("dooly: {} [{}] {} -- {} mode\n", ch.channel.name, to_string(ch.channel.domain),
                       ch.channel.sensor.description, to_string(model_lead ? Mode::model : Mode::trapezoid));
    out += table_rows(ch, model_lead) + table_summary(ch, model_lead) + table_legend(ch) + "\n";
  }
  if (report.events_dropped) {
    // Which bound dropped them (the hooks' rings, CUPTI's buffers, the staging of GPU records) is in the meta and
    // was said on stderr; the rings are the only one the Kokkos connector has.
    const bool staged =
        std::any_of(report.meta.begin(), report.meta.end(), [](const auto& m) { return m.first == "event_delay_ms"; });
    out += fmt::format("dooly: {} window edges dropped ({}): calls are undercounted\n", report.events_dropped,
                       staged ? "a bounded buffer was full or records came late; the meta and stderr say which"
                              : "event buffer full; raise DOOLY_MAX_EVENTS");
  }
  return out;
}

std::string to_csv(const Report& report) {
  std::string out = std::string(kCsvHeader) + "\n";
  // What every row shares: windows lost before attribution, and repaired ones.
  out += fmt::format("# events_dropped={} unmatched_events={}\n", report.events_dropped, report.unmatched_events);
  out +=
      "channel,domain,device,region,kind,calls,time_s,energy_j,j_per_call,avg_power_w,excl_time_s,excl_energy_j,"
      "short_windows,extrapolated_windows,baseline_w,model_floor_w,model_power_w,model_power_hw_w,model_energy_j,"
      "model_energy_hw_j,model_j_per_call,model_j_per_call_hw_j,model_j_per_call_sensor_j,model_inseparable,"
      "model_imprecise,model_too_little_data,model_sensor_sensitive,model_overlap_time_s,model_overlap_calls,"
      "model_overlap_energy_j,model_never_alone\n";
  for (const ChannelReport& ch : report.channels) {
    const double floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
    for (const RegionRow& r : ch.rows) {
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},", csv_quote(ch.channel.name),
                         to_string(ch.channel.domain), ch.channel.device, csv_quote(r.name), to_string(r.kind), r.calls,
                         num(r.time_s), num(r.energy_j), num(r.j_per_call(ch.baseline_w)), num(r.avg_power_w()),
                         num(r.excl_time_s), num(r.excl_energy_j), r.short_windows, r.extrapolated_windows,
                         num(ch.baseline_w), ch.fit.fitted ? num(floor) : std::string());
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},", num(r.model_power_w), num(r.model_power_hw_w),
                         num(r.model_energy_j), num(r.model_energy_hw_j), num(r.model_j_per_call(floor)),
                         num(r.model_j_per_call_hw_j), num(r.model_j_per_call_sensor_j), r.model_inseparable ? 1 : 0,
                         r.model_imprecise ? 1 : 0, r.model_too_little_data ? 1 : 0, r.model_sensor_sensitive ? 1 : 0);
      out += fmt::format("{},{},{},{}\n", num(r.model_overlap_time_s), num(r.model_overlap_calls),
                         num(r.model_overlap_energy_j), r.model_never_alone ? 1 : 0);
    }
  }
  return out;
}

namespace {

nlohmann::json region_json(const RegionRow& r, double baseline_w, double floor_w) {
  using nlohmann::json;
  auto opt = [](std::optional<double> v) { return v ? json(*v) : json(nullptr); };
  // JSON has no infinity: an unbounded interval is the string "inf".
  auto hw = [](std::optional<double> v) { return !v ? json(nullptr) : std::isfinite(*v) ? json(*v) : json("inf"); };
  json row = {{"name", r.name},
              {"kind", std::string(to_string(r.kind))},
              {"calls", r.calls},
              {"time_s", r.time_s},
              {"energy_j", r.energy_j},
              {"j_per_call", r.j_per_call(baseline_w)},
              {"avg_power_w", r.avg_power_w()},
              {"excl_time_s", r.excl_time_s},
              {"excl_energy_j", r.excl_energy_j},
              {"short_windows", r.short_windows},
              {"extrapolated_windows", r.extrapolated_windows},
              {"model_power_w", opt(r.model_power_w)},
              {"model_energy_j", opt(r.model_energy_j)},
              {"model_excl_energy_j", opt(r.model_excl_energy_j)},
              {"model_j_per_call", opt(r.model_j_per_call(floor_w))},
              {"model_inseparable", r.model_inseparable},
              {"model_too_little_data", r.model_too_little_data},
              {"model_power_hw_w", hw(r.model_power_hw_w)},
              {"model_energy_hw_j", hw(r.model_energy_hw_j)},
              {"model_j_per_call_hw_j", hw(r.model_j_per_call_hw_j)},
              {"model_j_per_call_sensor_j", hw(r.model_j_per_call_sensor_j)},
              {"model_imprecise", r.model_imprecise},
              {"model_sensor_sensitive", r.model_sensor_sensitive}};
  if (r.model_overlap_calls) {
    row["model_overlap_time_s"] = opt(r.model_overlap_time_s);
    row["model_overlap_calls"] = opt(r.model_overlap_calls);
    row["model_overlap_energy_j"] = opt(r.model_overlap_energy_j);
    row["model_never_alone"] = r.model_never_alone;
  }
  if (!r.short_name.empty()) row["short_name"] = r.short_name;
  return row;
}

nlohmann::json channel_json(const ChannelReport& ch) {
  using nlohmann::json;
  json c;
  c["name"] = ch.channel.name;
  c["domain"] = std::string(to_string(ch.channel.domain));
  c["device"] = ch.channel.device;
  c["sensor"] = {{"description", ch.channel.sensor.description},
                 {"window_ns", ch.channel.sensor.window_ns},
                 {"delay_ns", ch.channel.sensor.delay_ns},
                 {"update_ns", ch.channel.sensor.update_ns}};
  c["baseline_w"] = ch.baseline_w;
  c["baseline_method"] = ch.baseline_method;
  c["run_time_s"] = ch.run_time_s;
  c["samples"] = ch.samples;
  c["samples_dropped"] = ch.samples_dropped;
  const Conservation& cs = ch.conservation;
  c["conservation"] = {{"run_energy_j", cs.run_energy_j},
                       {"attributed_j", cs.attributed_j},
                       {"unattributed_j", cs.unattributed_j},
                       {"counter_delta_j", cs.counter_delta_j ? json(*cs.counter_delta_j) : json(nullptr)},
                       {"ratio", cs.ratio() ? json(*cs.ratio()) : json(nullptr)}};
  c["model_fit"] = {{"fitted", ch.fit.fitted},
                    {"why_not", ch.fit.why_not},
                    {"samples", ch.fit.samples},
                    {"intercept_w", ch.fit.intercept_w},
                    {"intercept_fixed", ch.fit.intercept_fixed},
                    {"residual_rms_w", ch.fit.residual_rms_w},
                    {"r_squared", ch.fit.r_squared},
                    {"columns", ch.fit.columns},
                    {"keys_over_cap", ch.fit.keys_over_cap},
                    {"nnls_converged", ch.fit.nnls_converged},
                    {"nnls_iterations", ch.fit.nnls_iterations},
                    {"interval_method", ch.fit.interval_method},
                    {"interval_blocks", ch.fit.interval_blocks},
                    {"concurrent_readings", ch.fit.concurrent_readings},
                    {"concurrent_unsplit", ch.fit.concurrent_unsplit},
                    {"split_span_ms", ch.fit.split_span_ms},
                    {"never_alone_keys", ch.fit.never_alone_keys}};
  auto setting = [](const SensorSettingFit& f) {
    return json{{"window_ns", f.window_ns},
                {"delay_ns", f.delay_ns},
                {"fitted", f.fitted},
                {"residual_rms_w", f.residual_rms_w},
                {"rows_moved", f.rows_moved}};
  };
  json neighbours = json::array();
  for (const auto& n : ch.sensor_check.neighbours) neighbours.push_back(setting(n));
  c["sensor_check"] = {{"done", ch.sensor_check.done},
                       {"why_not", ch.sensor_check.why_not},
                       {"given", setting(ch.sensor_check.given)},
                       {"neighbours", neighbours},
                       {"preferred", ch.sensor_check.preferred},
                       {"rows_sensitive", ch.sensor_check.rows_sensitive}};
  const double floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
  c["regions"] = json::array();
  for (const RegionRow& r : ch.rows) c["regions"].push_back(region_json(r, ch.baseline_w, floor));
  return c;
}

}  // namespace

nlohmann::json to_json(const Report& report) {
  using nlohmann::json;
  json j;
  j["version"] = report.version;
  j["tool"] = "dooly";
  j["backend"] = report.backend;
  j["mode"] = std::string(to_string(report.mode));
  json meta = json::object();
  for (const auto& [k, v] : report.meta) meta[k] = v;
  j["meta"] = meta;
  j["events_dropped"] = report.events_dropped;
  j["unmatched_events"] = report.unmatched_events;
  j["channels"] = json::array();
  for (const ChannelReport& ch : report.channels) j["channels"].push_back(channel_json(ch));
  return j;
}

std::string to_json_text(const Report& report) {
  return to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

using nlohmann::json;

std::optional<double> optional_number(const json& x, const char* key) {
  const json& v = x.at(key);
  return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
}
// An interval's half-width: a number, null, or "inf" (JSON has no infinity).
std::optional<double> half_width(const json& x, const char* key) {
  const json& v = x.at(key);
  if (v.is_null()) return std::nullopt;
  if (v.is_string() && v.get<std::string>() == "inf") return std::numeric_limits<double>::infinity();
  return v.get<double>();
}

RegionRow row_from_json(const json& x) {
  RegionRow row;
  row.name = x.at("name").get<std::string>();
  if (x.contains("short_name")) row.short_name = x.at("short_name").get<std::string>();
  row.kind = kind_from_string(x.at("kind").get<std::string>());
  row.calls = x.at("calls").get<uint64_t>();
  row.time_s = x.at("time_s").get<double>();
  row.energy_j = x.at("energy_j").get<double>();
  row.excl_time_s = x.at("excl_time_s").get<double>();
  row.excl_energy_j = x.at("excl_energy_j").get<double>();
  row.short_windows = x.at("short_windows").get<uint64_t>();
  row.extrapolated_windows = x.at("extrapolated_windows").get<uint64_t>();
  row.model_power_w = optional_number(x, "model_power_w");
  row.model_energy_j = optional_number(x, "model_energy_j");
  row.model_excl_energy_j = optional_number(x, "model_excl_energy_j");
  row.model_inseparable = x.at("model_inseparable").get<bool>();
  row.model_too_little_data = x.at("model_too_little_data").get<bool>();
  row.model_power_hw_w = half_width(x, "model_power_hw_w");
  row.model_energy_hw_j = half_width(x, "model_energy_hw_j");
  row.model_j_per_call_hw_j = half_width(x, "model_j_per_call_hw_j");
  row.model_j_per_call_sensor_j = half_width(x, "model_j_per_call_sensor_j");
  row.model_imprecise = x.at("model_imprecise").get<bool>();
  row.model_sensor_sensitive = x.at("model_sensor_sensitive").get<bool>();
  if (x.contains("model_overlap_calls")) {  // only where the split gave the row energy (and from version 2 on)
    row.model_overlap_time_s = optional_number(x, "model_overlap_time_s");
    row.model_overlap_calls = optional_number(x, "model_overlap_calls");
    row.model_overlap_energy_j = optional_number(x, "model_overlap_energy_j");
    row.model_never_alone = x.at("model_never_alone").get<bool>();
  }
  return row;
}

ModelFit fit_from_json(const json& f) {
  ModelFit fit;
  fit.fitted = f.at("fitted").get<bool>();
  fit.why_not = f.at("why_not").get<std::string>();
  fit.samples = f.at("samples").get<uint64_t>();
  fit.intercept_w = f.at("intercept_w").get<double>();
  fit.intercept_fixed = f.at("intercept_fixed").get<bool>();
  fit.residual_rms_w = f.at("residual_rms_w").get<double>();
  fit.r_squared = f.at("r_squared").get<double>();
  fit.columns = f.at("columns").get<int>();
  fit.keys_over_cap = f.at("keys_over_cap").get<uint64_t>();
  fit.nnls_converged = f.at("nnls_converged").get<bool>();
  fit.nnls_iterations = f.at("nnls_iterations").get<int>();
  fit.interval_method = f.at("interval_method").get<std::string>();
  fit.interval_blocks = f.at("interval_blocks").get<uint64_t>();
  if (f.contains("concurrent_readings")) {  // reports written before the split have none
    fit.concurrent_readings = f.at("concurrent_readings").get<uint64_t>();
    fit.concurrent_unsplit = f.at("concurrent_unsplit").get<uint64_t>();
    fit.split_span_ms = f.at("split_span_ms").get<double>();
    fit.never_alone_keys = f.at("never_alone_keys").get<uint64_t>();
  }
  return fit;
}

SensorCheck sensor_check_from_json(const json& sc) {
  auto setting = [](const json& x) {
    return SensorSettingFit{x.at("window_ns").get<int64_t>(), x.at("delay_ns").get<int64_t>(),
                            x.at("fitted").get<bool>(), x.at("residual_rms_w").get<double>(),
                            x.at("rows_moved").get<uint64_t>()};
  };
  SensorCheck check;
  check.done = sc.at("done").get<bool>();
  check.why_not = sc.at("why_not").get<std::string>();
  check.given = setting(sc.at("given"));
  for (const auto& n : sc.at("neighbours")) check.neighbours.push_back(setting(n));
  check.preferred = sc.at("preferred").get<int>();
  if (check.preferred < -1 || check.preferred >= static_cast<int>(check.neighbours.size()))
    DOOLY_THROW(InputError, "pass a report written by dooly, unedited",
                "malformed dooly report: sensor_check.preferred is {}", check.preferred);
  check.rows_sensitive = sc.at("rows_sensitive").get<uint64_t>();
  return check;
}

ChannelReport channel_from_json(const json& c) {
  ChannelReport ch;
  ch.channel.name = c.at("name").get<std::string>();
  const std::string dom = c.at("domain").get<std::string>();
  for (auto d : {power::Domain::gpu, power::Domain::cpu, power::Domain::dram, power::Domain::node})
    if (to_string(d) == dom) ch.channel.domain = d;
  ch.channel.device = c.at("device").get<int>();
  const json& sensor = c.at("sensor");
  ch.channel.sensor.description = sensor.at("description").get<std::string>();
  ch.channel.sensor.window_ns = sensor.at("window_ns").get<int64_t>();
  ch.channel.sensor.delay_ns = sensor.at("delay_ns").get<int64_t>();
  ch.channel.sensor.update_ns = sensor.at("update_ns").get<int64_t>();
  ch.baseline_w = c.at("baseline_w").get<double>();
  ch.baseline_method = c.at("baseline_method").get<std::string>();
  ch.run_time_s = c.at("run_time_s").get<double>();
  ch.samples = c.at("samples").get<uint64_t>();
  ch.samples_dropped = c.at("samples_dropped").get<uint64_t>();
  const json& cs = c.at("conservation");
  ch.conservation.run_energy_j = cs.at("run_energy_j").get<double>();
  ch.conservation.attributed_j = cs.at("attributed_j").get<double>();
  ch.conservation.unattributed_j = cs.at("unattributed_j").get<double>();
  ch.conservation.counter_delta_j = optional_number(cs, "counter_delta_j");
  ch.fit = fit_from_json(c.at("model_fit"));
  ch.sensor_check = sensor_check_from_json(c.at("sensor_check"));
  for (const auto& x : c.at("regions")) ch.rows.push_back(row_from_json(x));
  return ch;
}

}  // namespace

Report report_from_json(const nlohmann::json& j) {
  if (j.is_object() && j.contains("kind") && j["kind"] == "ranks")
    DOOLY_THROW(InputError, "pass one rank's report, <prefix>.rank<N>.json",
                "this is the ranks' reduced report (kind 'ranks'), not one run's");
  if (!j.is_object() || !j.contains("version") || !j["version"].is_number_integer())
    DOOLY_THROW(InputError, "pass a JSON report written by dooly", "not a dooly report: no integer 'version' key");
  if (j["version"].get<int>() != kReportVersion)
    DOOLY_THROW(InputError, "re-create the report with this dooly version or use the dooly that wrote it",
                "report version {} is not supported (this dooly reads version {})", j["version"].get<int>(),
                kReportVersion);
  Report r;
  try {
    r.backend = j.at("backend").get<std::string>();
    r.mode = mode_from_string(j.at("mode").get<std::string>());
    for (const auto& [k, v] : j.at("meta").items()) r.meta.emplace_back(k, v.get<std::string>());
    r.events_dropped = j.at("events_dropped").get<uint64_t>();
    r.unmatched_events = j.at("unmatched_events").get<uint64_t>();
    for (const auto& c : j.at("channels")) r.channels.push_back(channel_from_json(c));
  } catch (const nlohmann::json::exception& e) {
    DOOLY_THROW(InputError, "pass a report written by dooly, unedited", "malformed dooly report: {}", e.what());
  }
  return r;
}

OutputSettings OutputSettings::from_settings(const SettingValues& v) {
  OutputSettings o;
  o.detect_ranks = v.choice("RANKS").value_or("auto") == "auto";
  if (o.detect_ranks) o.ranks = detect_rank();
  o.prefix = v.text("OUTPUT").value_or(default_output_prefix(o.ranks));
  if (auto x = v.flag("TABLE")) o.table = *x;
  if (auto x = v.text("TABLE_FILE")) o.table_path = *x;
  if (auto x = v.number("RANKS_WAIT_S")) o.ranks_wait_s = *x;
  if (auto x = v.flag("RANKS_KEEP")) o.keep_rank_files = *x;
  if (auto x = v.flag("RANKS_TABLES")) o.rank_tables = *x;
  return o;
}

std::string write_outputs(const Report& report, const OutputSettings& o) noexcept {
  if (o.ranks && o.prefix != "none") return write_rank_outputs(report, o);
  std::string table;
  try {
    table = format_table(report);
    if (o.table) {
      if (!o.table_path.empty()) {
        write_file_atomic(o.table_path, table);
      } else {
        std::fputs(table.c_str(), stdout);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    log::error("{}", e.what());
  }
  if (o.prefix == "none") return table;
  try {
    write_file_atomic(o.prefix + ".csv", to_csv(report));
    write_file_atomic(o.prefix + ".json", to_json_text(report));
    log::info("wrote {}.csv and {}.json", o.prefix, o.prefix);
  } catch (const std::exception& e) {
    log::error("{}", e.what());
  }
  return table;
}

void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    DOOLY_THROW(InputError, "create the directory or point DOOLY_OUTPUT elsewhere",
                "cannot write '{}': directory '{}' does not exist", path, dir.string());
  const fs::path probe = dir / fmt::format(".dooly-write-test-{}", static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (!f)
    DOOLY_THROW(InputError, "make the directory writable or point DOOLY_OUTPUT elsewhere", "cannot write in '{}': {}",
                dir.string(), std::strerror(errno));
  std::fclose(f);
  fs::remove(probe, ec);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    DOOLY_THROW(InputError, "make the directory writable or point DOOLY_OUTPUT elsewhere", "cannot write '{}': {}",
                path, std::strerror(errno));
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    DOOLY_THROW(InputError, "free disk space or point DOOLY_OUTPUT elsewhere", "writing '{}' failed: {}", path,
                std::strerror(err));
  }
}

}  // namespace dooly::energy
