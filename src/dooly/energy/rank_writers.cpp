#include "dooly/energy/rank_writers.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/energy/table_text.hpp"

namespace dooly::energy {

namespace {

using table_text::compact;
using table_text::csv_quote;
using table_text::num;
using table_text::shorten;

using nlohmann::json;

constexpr const char* kRankFileFix = "pass a <prefix>.rank<N>.json that dooly wrote under an MPI launcher";

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

json stat_json(const RankStat& s) {
  return json{{"sum", s.sum}, {"min", s.min}, {"mean", s.mean}, {"max", s.max}, {"max_rank", s.max_rank}};
}

json opt(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

// The leading mode's energy of a row (the model's where the channel leads with it and the row has it).
const RankStat& lead_energy(const ReducedChannel& ch, const ReducedRow& r) {
  return ch.model_lead && r.model_energy_j ? *r.model_energy_j : r.energy_j;
}

// The rank with the least of a row's leading energy: the first whose figure is the minimum (a rank without the
// row counts 0).
int least_rank(const ReducedChannel& ch, const ReducedRow& r, double least) {
  for (int rank : ch.ranks) {
    double v = 0;
    for (const RankFigures& f : r.per_rank)
      if (f.rank == rank) v = ch.model_lead && f.model_energy_j ? *f.model_energy_j : f.energy_j;
    if (v == least) return rank;
  }
  return -1;
}

std::string row_line(const ReducedChannel& ch, const ReducedRow& r, size_t width) {
  const RankStat& e = lead_energy(ch, r);
  const double jpc = ch.model_lead && r.model_j_per_call() ? *r.model_j_per_call() : r.j_per_call();
  const char* flag = r.joint ? "+" : r.shared_device ? "=" : "";
  return fmt::format("{:<{}}  {:>5}  {:>9}  {:>10.4f}  {:>11}  {:>10}  {:>10} {:>4}  {:>10}  {:>10} {:>4}  {}\n",
                     shorten(r.name, width), width, r.ranks_with_row, static_cast<uint64_t>(r.calls.sum), r.time_s.sum,
                     compact(e.sum), compact(jpc), compact(e.min), least_rank(ch, r, e.min), compact(e.mean),
                     compact(e.max), e.max_rank, flag);
}

// Below the rows: the run over the channel's devices, each shared device, and the flags' legend.
std::string channel_footer(const RanksReport& report, const ReducedChannel& ch) {
  std::string out =
      fmt::format("run {} J over {} device(s), each counted once = attributed {} (summed over ranks) + unattributed {}",
                  compact(ch.run_energy_j), ch.devices.size(), compact(ch.attributed_j), compact(ch.unattributed_j()));
  if (ch.counter_delta_j && *ch.counter_delta_j > 0)
    out += fmt::format("; energy counter {} J", compact(*ch.counter_delta_j));
  else if (ch.counter_delta_j)
    out += "; the energy counter did not advance over the run: no check";
  out += "\n";
  for (const ReducedDevice& d : report.devices) {
    if (!d.shared() || std::find(ch.devices.begin(), ch.devices.end(), d.id) == ch.devices.end()) continue;
    out += d.joint
               ? fmt::format(
                     "device {}: shared by ranks {}; attributed once with all their windows against rank {}'s "
                     "readings ({:.3f} s: {} J)\n",
                     d.id, format_rank_list(d.ranks), d.counted_rank, d.run_time_s, compact(d.run_energy_j))
               : fmt::format(
                     "device {}: shared by ranks {}; counted once, from rank {} (the longest run, {:.3f} s: {} J)\n",
                     d.id, format_rank_list(d.ranks), d.counted_rank, d.run_time_s, compact(d.run_energy_j));
  }
  const bool any_shared =
      std::any_of(ch.rows.begin(), ch.rows.end(), [](const ReducedRow& r) { return r.shared_device && !r.joint; });
  const bool any_joint = std::any_of(ch.rows.begin(), ch.rows.end(), [](const ReducedRow& r) { return r.joint; });
  if (any_shared)
    out +=
        "= on a device other ranks measured too: each rank's attribution saw only its own windows, so the sum over "
        "ranks can exceed the device's energy (`dooly ranks --joint` attributes it once from the ranks' recordings; "
        "docs/mpi.md)\n";
  if (any_joint)
    out +=
        "+ on a device other ranks measured too, attributed once from their recordings: every rank's windows "
        "against one rank's readings, each rank's regions apart\n";
  for (const ReducedRow& r : ch.rows)  // kernels that overlapped others (the model's split), over the ranks
    if (const auto jpc = r.overlap_j_per_call(); jpc && *r.overlap_calls >= 0.5)
      out += fmt::format("overlapped: {}: {} J/call over {:.0f} of its {} calls\n", shorten(r.name, 48), compact(*jpc),
                         *r.overlap_calls, static_cast<uint64_t>(r.calls.sum));
  return out;
}

std::string channel_table(const RanksReport& report, const ReducedChannel& ch) {
  std::string out = fmt::format("dooly: {} [{}] over ranks {} -- {} mode\n", ch.name, to_string(ch.domain),
                                format_rank_list(ch.ranks), to_string(ch.model_lead ? Mode::model : Mode::trapezoid));
  size_t width = 16;
  for (const auto& r : ch.rows) width = std::max(width, std::min<size_t>(r.name.size(), 40));
  const std::string header = fmt::format(
      "{:<{}}  {:>5}  {:>9}  {:>10}  {:>11}  {:>10}  {:>10} {:>4}  {:>10}  {:>10} {:>4}  {}", "region", width, "ranks",
      "calls", "time(s)", "energy(J)", "J/call", "min(J)", "@", "mean(J)", "max(J)", "@", "flags");
  const std::string rule(header.size() - 5, '-');
  out += header + "\n" + rule + "\n";
  for (const ReducedRow& r : ch.rows) out += row_line(ch, r, width);
  return out + rule + "\n" + channel_footer(report, ch) + "\n";
}

}  // namespace

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += fmt::format("{}{}", out.empty() ? "" : ",", r);
  return out;
}

json rank_file_json(const RankFile& f) {
  json j = to_json(f.report);
  const RankInfo& r = f.rank;
  j["rank"] = {{"rank", r.rank},
               {"size", r.size},
               {"local_rank", r.local_rank},
               {"launcher", r.launcher},
               {"job", r.job},
               {"host", r.host},
               {"cuda_visible_devices", r.cuda_visible_devices},
               {"start_unix_ns", r.start_unix_ns},
               {"written_unix_ns", f.written_unix_ns},
               {"device_ids", f.device_ids}};
  return j;
}

RankFile rank_file_from_json(const json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("rank") || !j["rank"].is_object())
    DOOLY_THROW(InputError, kRankFileFix, "{}: not a rank file (no 'rank' object)", path);
  RankFile f;
  f.path = path;
  try {
    f.report = report_from_json(j);
  } catch (const InputError& e) {
    DOOLY_THROW(InputError, e.fix(), "{}: {}", path, e.problem());
  }
  try {
    const json& r = j.at("rank");
    f.rank.rank = r.at("rank").get<int>();
    f.rank.size = r.at("size").get<int>();
    f.rank.local_rank = r.at("local_rank").get<int>();
    f.rank.launcher = r.at("launcher").get<std::string>();
    f.rank.job = r.at("job").get<std::string>();
    f.rank.host = r.at("host").get<std::string>();
    f.rank.cuda_visible_devices = r.at("cuda_visible_devices").get<std::string>();
    f.rank.start_unix_ns = r.at("start_unix_ns").get<int64_t>();
    f.written_unix_ns = r.at("written_unix_ns").get<int64_t>();
    f.device_ids = r.at("device_ids").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    DOOLY_THROW(InputError, kRankFileFix, "{}: malformed rank object: {}", path, e.what());
  }
  if (f.rank.rank < 0 || f.rank.size < 0 || (f.rank.size > 0 && f.rank.rank >= f.rank.size))
    DOOLY_THROW(InputError, kRankFileFix, "{}: rank {} of {} is not a rank of the job", path, f.rank.rank, f.rank.size);
  if (f.device_ids.size() != f.report.channels.size())
    DOOLY_THROW(InputError, kRankFileFix, "{}: {} device ids for {} channels", path, f.device_ids.size(),
                f.report.channels.size());
  return f;
}

RankFile read_rank_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) DOOLY_THROW(InputError, "check the path", "cannot read '{}'", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    DOOLY_THROW(InputError, kRankFileFix, "{}: not JSON: {}", path, e.what());
  }
  return rank_file_from_json(j, path);
}

std::string format_ranks_table(const RanksReport& report) {
  std::string out =
      fmt::format("dooly: {} of {} ranks reduced ({}{}{})", report.present.size(), report.size,
                  report.launcher.empty() ? "ranks" : report.launcher, report.job.empty() ? "" : ", job ", report.job);
  out += report.missing.empty()
             ? ": all reported\n"
             : fmt::format(
                   ": rank(s) {} did not report (no fresh file{}); their figures are "
                   "missing from every sum\n",
                   format_rank_list(report.missing),
                   report.waited_s > 0 ? fmt::format(" within {:.3g} s", report.waited_s) : std::string());
  for (const IgnoredRankFile& i : report.ignored) out += fmt::format("dooly: ignored {}: {}\n", i.path, i.why);
  for (const std::string& s : report.joint_skipped) out += fmt::format("dooly: not attributed jointly: {}\n", s);
  for (const ReducedChannel& ch : report.channels) out += channel_table(report, ch);
  for (const ReducedHost& h : report.hosts)
    out += fmt::format("node {}: ranks {}; {} device(s), run {} J, each device once ({})\n", h.host,
                       format_rank_list(h.ranks), h.devices.size(), compact(h.run_energy_j), join(h.devices));
  if (report.events_dropped)
    out += fmt::format(
        "dooly: {} window edges dropped over the ranks: calls are undercounted (the rank files say "
        "where)\n",
        report.events_dropped);
  return out;
}

std::string ranks_to_csv(const RanksReport& report) {
  std::string out = std::string(kRanksCsvHeader) + "\n";
  out += fmt::format("# size={} present={} missing={} job={}\n", report.size, format_rank_list(report.present),
                     format_rank_list(report.missing), csv_quote(report.job));
  out +=
      "channel,domain,region,kind,ranks,calls_sum,calls_min,calls_mean,calls_max,calls_max_rank,time_s_sum,"
      "time_s_min,time_s_mean,time_s_max,time_s_max_rank,energy_j_sum,energy_j_min,energy_j_mean,energy_j_max,"
      "energy_j_max_rank,j_per_call,model_energy_j_sum,model_energy_j_min,model_energy_j_mean,model_energy_j_max,"
      "model_energy_j_max_rank,model_j_per_call,shared_device,joint\n";
  auto stat = [](const RankStat& s) {
    return fmt::format("{},{},{},{},{}", num(s.sum), num(s.min), num(s.mean), num(s.max), s.max_rank);
  };
  for (const ReducedChannel& ch : report.channels)
    for (const ReducedRow& r : ch.rows)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_quote(ch.name), to_string(ch.domain),
                         csv_quote(r.name), to_string(r.kind), r.ranks_with_row, stat(r.calls), stat(r.time_s),
                         stat(r.energy_j), num(r.j_per_call()),
                         r.model_energy_j ? stat(*r.model_energy_j) : std::string(",,,,"), num(r.model_j_per_call()),
                         r.shared_device ? 1 : 0, r.joint ? 1 : 0);
  return out;
}

json ranks_to_json(const RanksReport& report) {
  json j;
  j["version"] = report.version;
  j["tool"] = "dooly";
  j["kind"] = "ranks";
  j["launcher"] = report.launcher;
  j["job"] = report.job;
  j["size"] = report.size;
  j["mode"] = std::string(to_string(report.mode));
  j["backend"] = report.backend;
  j["ranks_present"] = report.present;
  j["ranks_missing"] = report.missing;
  j["ranks_ignored"] = json::array();
  for (const IgnoredRankFile& i : report.ignored) j["ranks_ignored"].push_back({{"file", i.path}, {"why", i.why}});
  j["waited_s"] = report.waited_s;
  j["joint_skipped"] = report.joint_skipped;
  j["events_dropped"] = report.events_dropped;
  j["unmatched_events"] = report.unmatched_events;
  j["devices"] = json::array();
  for (const ReducedDevice& d : report.devices)
    j["devices"].push_back({{"id", d.id},
                            {"channel", d.channel},
                            {"domain", std::string(to_string(d.domain))},
                            {"ranks", d.ranks},
                            {"shared", d.shared()},
                            {"counted_rank", d.counted_rank},
                            {"run_time_s", d.run_time_s},
                            {"run_energy_j", d.run_energy_j},
                            {"counter_delta_j", opt(d.counter_delta_j)},
                            {"attributed_j_sum", d.attributed_j_sum},
                            {"joint", d.joint}});
  j["hosts"] = json::array();
  for (const ReducedHost& h : report.hosts)
    j["hosts"].push_back(
        {{"host", h.host}, {"ranks", h.ranks}, {"devices", h.devices}, {"run_energy_j", h.run_energy_j}});
  j["channels"] = json::array();
  for (const ReducedChannel& ch : report.channels) {
    json c = {{"name", ch.name},
              {"domain", std::string(to_string(ch.domain))},
              {"ranks", ch.ranks},
              {"devices", ch.devices},
              {"model_lead", ch.model_lead},
              {"run_energy_j", ch.run_energy_j},
              {"attributed_j", ch.attributed_j},
              {"unattributed_j", ch.unattributed_j()},
              {"counter_delta_j", opt(ch.counter_delta_j)},
              {"regions", json::array()}};
    for (const ReducedRow& r : ch.rows) {
      json per_rank = json::array();
      for (const RankFigures& f : r.per_rank)
        per_rank.push_back({{"rank", f.rank},
                            {"calls", f.calls},
                            {"time_s", f.time_s},
                            {"energy_j", f.energy_j},
                            {"model_energy_j", opt(f.model_energy_j)}});
      c["regions"].push_back({{"name", r.name},
                              {"kind", std::string(to_string(r.kind))},
                              {"ranks_with_row", r.ranks_with_row},
                              {"calls", stat_json(r.calls)},
                              {"time_s", stat_json(r.time_s)},
                              {"energy_j", stat_json(r.energy_j)},
                              {"net_energy_j", r.net_energy_j},  // J/call = net_energy_j / calls.sum
                              {"j_per_call", r.j_per_call()},
                              {"model_energy_j", r.model_energy_j ? stat_json(*r.model_energy_j) : json(nullptr)},
                              {"model_net_energy_j", opt(r.model_net_energy_j)},
                              {"model_j_per_call", opt(r.model_j_per_call())},
                              {"overlap_calls", opt(r.overlap_calls)},
                              {"overlap_energy_j", opt(r.overlap_energy_j)},
                              {"overlap_j_per_call", opt(r.overlap_j_per_call())},
                              {"shared_device", r.shared_device},
                              {"joint", r.joint},
                              {"per_rank", per_rank}});
    }
    j["channels"].push_back(std::move(c));
  }
  return j;
}

std::string ranks_to_json_text(const RanksReport& report) {
  return ranks_to_json(report).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace dooly::energy
