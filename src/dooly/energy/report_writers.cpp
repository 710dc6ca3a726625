#include "dooly/energy/report_writers.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <cmath>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::energy {

void apply_sensor_overrides(power::Channel& ch, std::optional<int64_t> window_ns, std::optional<int64_t> delay_ns) {
  if (!window_ns && !delay_ns) return;
  if (window_ns) ch.sensor.window_ns = *window_ns;
  if (delay_ns) ch.sensor.delay_ns = *delay_ns;
  ch.sensor.description += fmt::format(" [sensor window {:g} ms, lag {:g} ms given]",
                                       static_cast<double>(ch.sensor.window_ns) / 1e6,
                                       static_cast<double>(ch.sensor.delay_ns) / 1e6);
}

std::string_view to_string(Mode mode) noexcept { return mode == Mode::model ? "model" : "trapezoid"; }

Mode mode_from_string(std::string_view word) {
  if (word == "trapezoid") return Mode::trapezoid;
  if (word == "model") return Mode::model;
  DOOLY_THROW(InputError, "set DOOLY_MODE to trapezoid or model", "unknown attribution mode '{}'", word);
}

namespace {

std::string shorten(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  const size_t head = (width - 3) / 2, tail = width - 3 - head;
  return name.substr(0, head) + "..." + name.substr(name.size() - tail);
}


// Significant digits that stay readable from microjoules to kilojoules.
std::string compact(double v) {
  const double a = std::fabs(v);
  if (a < 1e-12) return "0";  // rounding residue of a subtraction, not a figure
  if (a >= 100) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.3f}", v);
  return fmt::format("{:.3g}", v);
}

std::string flags_of(const RegionRow& r) {
  std::string f;
  if (r.mostly_short()) f += '*';
  if (r.model_inseparable) f += '!';
  if (r.model_too_little_data) f += '?';
  if (r.extrapolated_windows) f += '~';
  return f;
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + '"';
}

std::string num(double v) { return fmt::format("{:.17g}", v); }
std::string num(std::optional<double> v) { return v ? num(*v) : std::string(); }

}  // namespace

std::string format_table(const Report& report) {
  std::string out;
  for (const ChannelReport& ch : report.channels) {
    const bool model_lead = report.mode == Mode::model && ch.fit.fitted;
    const double model_floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
    size_t width = 16;
    for (const auto& r : ch.rows) width = std::max(width, std::min<size_t>(r.name.size(), 48));
    const std::string other_col = model_lead ? "J/call(trap)" : "J/call(model)";
    const std::string header = fmt::format("{:<{}}  {:>9}  {:>10}  {:>11}  {:>10}  {:>7}  {:>13}  {}", "region", width,
                                           "calls", "time(s)", "energy(J)", "J/call", "avg(W)", other_col, "flags");
    const std::string rule(header.size() - 5, '-');
    out += fmt::format("dooly: {} [{}] {} -- {} mode\n", ch.channel.name, to_string(ch.channel.domain),
                       ch.channel.sensor.description, to_string(model_lead ? Mode::model : Mode::trapezoid));
    out += header + "\n" + rule + "\n";
    std::vector<const RegionRow*> rows;
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
      out += fmt::format("{:<{}}  {:>9}  {:>10.4f}  {:>11}  {:>10}  {:>7.0f}  {:>13}  {}\n", shorten(r->name, width),
                         width, r->calls, r->time_s, compact(energy), compact(jpc), avg,
                         other ? compact(*other) : std::string("-"), flags_of(*r));
    }
    out += rule + "\n";
    if (model_lead)
      out += fmt::format("model floor {:.1f} W (fitted intercept; subtracted for the J/call column); device idle baseline ~ {:.0f} W ({})\n",
                         model_floor, ch.baseline_w, ch.baseline_method);
    else
      out += fmt::format("device idle baseline ~ {:.0f} W  (subtracted for the J/call column; {})\n", ch.baseline_w,
                         ch.baseline_method);
    const Conservation& cs = ch.conservation;
    out += fmt::format("run {:.3f} s, {} J = attributed {} + unattributed {}", ch.run_time_s,
                       compact(cs.run_energy_j), compact(cs.attributed_j), compact(cs.unattributed_j));
    if (cs.counter_delta_j)
      out += fmt::format("; energy counter {} J (ratio {:.3f})", compact(*cs.counter_delta_j), cs.ratio().value_or(0));
    out += "\n";
    if (ch.fit.fitted)
      out += fmt::format("model fit: {} readings, {} regions, floor {:.1f} W{}, residual {:.1f} W rms, R^2 {:.3f}\n",
                         ch.fit.samples, ch.fit.columns, ch.fit.intercept_w, ch.fit.intercept_fixed ? " (given)" : "",
                         ch.fit.residual_rms_w, ch.fit.r_squared);
    else
      out += fmt::format("model fit: not fitted ({})\n", ch.fit.why_not);
    bool any_short = false, any_insep = false, any_little = false, any_ex = false;
    for (const auto& r : ch.rows) {
      any_short |= r.mostly_short();
      any_insep |= r.model_inseparable;
      any_little |= r.model_too_little_data;
      any_ex |= r.extrapolated_windows > 0;
    }
    if (any_short)
      out += fmt::format("* most windows shorter than the sensor's update period ({:.0f} ms): a statistical aggregate over calls\n",
                         static_cast<double>(ch.channel.sensor.update_ns) / 1e6);
    if (any_insep) out += "! the run never varied this region apart from others: the model cannot separate it\n";
    if (any_little) out += "? too little data for the model\n";
    if (any_ex) out += "~ some windows lie outside the power readings (power held constant there)\n";
    out += "\n";
  }
  if (report.events_dropped)
    out += fmt::format("dooly: {} windows dropped (event buffer full; raise DOOLY_MAX_EVENTS)\n", report.events_dropped);
  return out;
}

std::string to_csv(const Report& report) {
  std::string out = std::string(kCsvHeader) + "\n";
  out += "channel,domain,device,region,kind,calls,time_s,energy_j,j_per_call,avg_power_w,excl_time_s,excl_energy_j,"
         "short_windows,extrapolated_windows,baseline_w,model_floor_w,model_power_w,model_energy_j,model_j_per_call,"
         "model_inseparable\n";
  for (const ChannelReport& ch : report.channels) {
    const double floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
    for (const RegionRow& r : ch.rows) {
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_quote(ch.channel.name),
                         to_string(ch.channel.domain), ch.channel.device, csv_quote(r.name), to_string(r.kind), r.calls,
                         num(r.time_s), num(r.energy_j), num(r.j_per_call(ch.baseline_w)), num(r.avg_power_w()),
                         num(r.excl_time_s), num(r.excl_energy_j), r.short_windows, r.extrapolated_windows,
                         num(ch.baseline_w), ch.fit.fitted ? num(floor) : std::string(), num(r.model_power_w),
                         num(r.model_energy_j), num(r.model_j_per_call(floor)), r.model_inseparable ? 1 : 0);
    }
  }
  return out;
}

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
  for (const ChannelReport& ch : report.channels) {
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
    c["model_fit"] = {{"fitted", ch.fit.fitted},         {"why_not", ch.fit.why_not},
                      {"samples", ch.fit.samples},       {"intercept_w", ch.fit.intercept_w},
                      {"intercept_fixed", ch.fit.intercept_fixed}, {"residual_rms_w", ch.fit.residual_rms_w},
                      {"r_squared", ch.fit.r_squared},   {"columns", ch.fit.columns},
                      {"keys_over_cap", ch.fit.keys_over_cap}};
    const double floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
    c["regions"] = json::array();
    for (const RegionRow& r : ch.rows) {
      auto opt = [](std::optional<double> v) { return v ? json(*v) : json(nullptr); };
      c["regions"].push_back({{"name", r.name},
                              {"kind", std::string(to_string(r.kind))},
                              {"calls", r.calls},
                              {"time_s", r.time_s},
                              {"energy_j", r.energy_j},
                              {"j_per_call", r.j_per_call(ch.baseline_w)},
                              {"avg_power_w", r.avg_power_w()},
                              {"excl_time_s", r.excl_time_s},
                              {"excl_energy_j", r.excl_energy_j},
                              {"short_windows", r.short_windows},
                              {"extrapolated_windows", r.extrapolated_windows},
                              {"model_power_w", opt(r.model_power_w)},
                              {"model_energy_j", opt(r.model_energy_j)},
                              {"model_excl_energy_j", opt(r.model_excl_energy_j)},
                              {"model_j_per_call", opt(r.model_j_per_call(floor))},
                              {"model_inseparable", r.model_inseparable},
                              {"model_too_little_data", r.model_too_little_data}});
    }
    j["channels"].push_back(c);
  }
  return j;
}

Report report_from_json(const nlohmann::json& j) {
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
    for (const auto& c : j.at("channels")) {
      ChannelReport ch;
      ch.channel.name = c.at("name").get<std::string>();
      const std::string dom = c.at("domain").get<std::string>();
      for (auto d : {power::Domain::gpu, power::Domain::cpu, power::Domain::dram, power::Domain::node})
        if (to_string(d) == dom) ch.channel.domain = d;
      ch.channel.device = c.at("device").get<int>();
      ch.channel.sensor.description = c.at("sensor").at("description").get<std::string>();
      ch.channel.sensor.window_ns = c.at("sensor").at("window_ns").get<int64_t>();
      ch.channel.sensor.delay_ns = c.at("sensor").at("delay_ns").get<int64_t>();
      ch.channel.sensor.update_ns = c.at("sensor").at("update_ns").get<int64_t>();
      ch.baseline_w = c.at("baseline_w").get<double>();
      ch.baseline_method = c.at("baseline_method").get<std::string>();
      ch.run_time_s = c.at("run_time_s").get<double>();
      ch.samples = c.at("samples").get<uint64_t>();
      ch.samples_dropped = c.at("samples_dropped").get<uint64_t>();
      const auto& cs = c.at("conservation");
      ch.conservation.run_energy_j = cs.at("run_energy_j").get<double>();
      ch.conservation.attributed_j = cs.at("attributed_j").get<double>();
      ch.conservation.unattributed_j = cs.at("unattributed_j").get<double>();
      if (!cs.at("counter_delta_j").is_null()) ch.conservation.counter_delta_j = cs.at("counter_delta_j").get<double>();
      const auto& f = c.at("model_fit");
      ch.fit.fitted = f.at("fitted").get<bool>();
      ch.fit.why_not = f.at("why_not").get<std::string>();
      ch.fit.samples = f.at("samples").get<uint64_t>();
      ch.fit.intercept_w = f.at("intercept_w").get<double>();
      ch.fit.intercept_fixed = f.at("intercept_fixed").get<bool>();
      ch.fit.residual_rms_w = f.at("residual_rms_w").get<double>();
      ch.fit.r_squared = f.at("r_squared").get<double>();
      ch.fit.columns = f.at("columns").get<int>();
      ch.fit.keys_over_cap = f.at("keys_over_cap").get<uint64_t>();
      for (const auto& x : c.at("regions")) {
        RegionRow row;
        row.name = x.at("name").get<std::string>();
        row.kind = kind_from_string(x.at("kind").get<std::string>());
        row.calls = x.at("calls").get<uint64_t>();
        row.time_s = x.at("time_s").get<double>();
        row.energy_j = x.at("energy_j").get<double>();
        row.excl_time_s = x.at("excl_time_s").get<double>();
        row.excl_energy_j = x.at("excl_energy_j").get<double>();
        row.short_windows = x.at("short_windows").get<uint64_t>();
        row.extrapolated_windows = x.at("extrapolated_windows").get<uint64_t>();
        auto opt = [&](const char* k) -> std::optional<double> {
          return x.at(k).is_null() ? std::nullopt : std::optional<double>(x.at(k).get<double>());
        };
        row.model_power_w = opt("model_power_w");
        row.model_energy_j = opt("model_energy_j");
        row.model_excl_energy_j = opt("model_excl_energy_j");
        row.model_inseparable = x.at("model_inseparable").get<bool>();
        row.model_too_little_data = x.at("model_too_little_data").get<bool>();
        ch.rows.push_back(std::move(row));
      }
      r.channels.push_back(std::move(ch));
    }
  } catch (const nlohmann::json::exception& e) {
    DOOLY_THROW(InputError, "pass a report written by dooly, unedited", "malformed dooly report: {}", e.what());
  }
  return r;
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
