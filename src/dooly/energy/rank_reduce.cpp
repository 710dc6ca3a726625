#include "dooly/energy/rank_reduce.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::energy {

namespace {

constexpr const char* kRankFileFix = "pass each rank's <prefix>.rank<N>.json once, from one run";

// Per rank, in the channel's rank order: the value, 0 where the rank lacks the row.
RankStat stat_of(const std::vector<int>& ranks, const std::map<int, double>& values) {
  RankStat s;
  if (ranks.empty()) return s;
  bool first = true;
  for (int rank : ranks) {
    const auto it = values.find(rank);
    const double v = it == values.end() ? 0.0 : it->second;
    s.sum += v;
    if (first || v < s.min) s.min = v;
    if (first || v > s.max) {
      s.max = v;
      s.max_rank = rank;
    }
    first = false;
  }
  s.mean = s.sum / static_cast<double>(ranks.size());
  return s;
}

// What one row gathers over the ranks before its figures are computed.
struct RowAccumulator {
  std::string name;
  Kind kind = Kind::other;
  std::map<int, double> calls, time_s, energy_j, model_energy_j;
  bool model_everywhere = true;
  double net_energy_j = 0, model_net_energy_j = 0;
  bool shared_device = false;
  bool joint = false;
  std::vector<RankFigures> per_rank;
  std::optional<double> overlap_calls, overlap_energy_j;
};

void reduce_devices(const std::vector<const RankFile*>& files, const std::vector<std::string>& joint,
                    RanksReport& out) {
  std::map<std::string, size_t> index;
  for (const RankFile* f : files) {
    for (size_t c = 0; c < f->report.channels.size(); ++c) {
      const ChannelReport& ch = f->report.channels[c];
      const std::string& id = f->device_ids[c];
      auto [it, added] = index.emplace(id, out.devices.size());
      if (added) {
        ReducedDevice d;
        d.id = id;
        d.channel = ch.channel.name;
        d.domain = ch.channel.domain;
        d.joint = std::find(joint.begin(), joint.end(), id) != joint.end();
        out.devices.push_back(std::move(d));
      }
      ReducedDevice& d = out.devices[it->second];
      if (d.ranks.empty() || d.ranks.back() != f->rank.rank) d.ranks.push_back(f->rank.rank);
      d.attributed_j_sum += ch.conservation.attributed_j;
      // The longest run covers the other ranks' runs most: its reading of the device is the one counted.
      if (d.counted_rank < 0 || ch.run_time_s > d.run_time_s) {
        d.counted_rank = f->rank.rank;
        d.run_time_s = ch.run_time_s;
        d.run_energy_j = ch.conservation.run_energy_j;
        d.counter_delta_j = ch.conservation.counter_delta_j;
      }
    }
  }
}

ReducedRow finish_row(RowAccumulator& a, const std::vector<int>& ranks) {
  ReducedRow row;
  row.name = std::move(a.name);
  row.kind = a.kind;
  row.ranks_with_row = static_cast<int>(a.per_rank.size());
  row.calls = stat_of(ranks, a.calls);
  row.time_s = stat_of(ranks, a.time_s);
  row.energy_j = stat_of(ranks, a.energy_j);
  row.net_energy_j = a.net_energy_j;
  if (a.model_everywhere) {
    row.model_energy_j = stat_of(ranks, a.model_energy_j);
    row.model_net_energy_j = a.model_net_energy_j;
  }
  row.shared_device = a.shared_device;
  row.joint = a.joint;
  row.per_rank = std::move(a.per_rank);
  row.overlap_calls = a.overlap_calls;
  row.overlap_energy_j = a.overlap_energy_j;
  return row;
}

// A channel's rows as they gather over the ranks, in order of first appearance.
struct ChannelRows {
  std::map<std::pair<std::string, Kind>, RowAccumulator> rows;
  std::vector<std::pair<std::string, Kind>> order;

  void add(int rank, const ChannelReport& ch, const ReducedDevice& device) {
    const double floor = ch.fit.fitted ? ch.fit.intercept_w : ch.baseline_w;
    for (const RegionRow& r : ch.rows) {
      const auto key = std::make_pair(r.name, r.kind);
      auto [it, added] = rows.try_emplace(key);
      RowAccumulator& a = it->second;
      if (added) {
        a.name = r.name;
        a.kind = r.kind;
        order.push_back(key);
      }
      a.calls[rank] += static_cast<double>(r.calls);
      a.time_s[rank] += r.time_s;
      a.energy_j[rank] += r.energy_j;
      a.net_energy_j += net_of(r.energy_j, ch.baseline_w * r.time_s);
      if (r.model_energy_j) {
        a.model_energy_j[rank] += *r.model_energy_j;
        a.model_net_energy_j += net_of(*r.model_energy_j, floor * r.time_s);
      } else {
        a.model_everywhere = false;
      }
      a.shared_device = a.shared_device || device.shared();
      a.joint = a.joint || device.joint;
      a.per_rank.push_back(RankFigures{rank, r.calls, r.time_s, r.energy_j, r.model_energy_j});
      if (r.model_overlap_calls && r.model_overlap_energy_j) {
        a.overlap_calls = a.overlap_calls.value_or(0.0) + *r.model_overlap_calls;
        a.overlap_energy_j = a.overlap_energy_j.value_or(0.0) + *r.model_overlap_energy_j;
      }
    }
  }
};

// The channel's devices, each once: their run energy and energy counters.
void add_device(ReducedChannel& rc, const ReducedDevice& device, bool& all_counters, double& counters) {
  if (std::find(rc.devices.begin(), rc.devices.end(), device.id) != rc.devices.end()) return;
  rc.devices.push_back(device.id);
  rc.run_energy_j += device.run_energy_j;
  if (device.counter_delta_j)
    counters += *device.counter_delta_j;
  else
    all_counters = false;
}

void reduce_channel(ReducedChannel& rc, const std::vector<const RankFile*>& files, const RanksReport& out) {
  std::map<std::string, const ReducedDevice*> devices;
  for (const ReducedDevice& d : out.devices) devices[d.id] = &d;
  ChannelRows rows;
  bool all_fitted = true, all_counters = true;
  double counters = 0;
  for (const RankFile* f : files)
    for (size_t c = 0; c < f->report.channels.size(); ++c) {
      const ChannelReport& ch = f->report.channels[c];
      if (ch.channel.name != rc.name) continue;
      const ReducedDevice& device = *devices.at(f->device_ids[c]);
      rc.ranks.push_back(f->rank.rank);
      add_device(rc, device, all_counters, counters);
      rc.attributed_j += ch.conservation.attributed_j;
      all_fitted = all_fitted && ch.fit.fitted;
      rows.add(f->rank.rank, ch, device);
    }
  rc.model_lead = out.mode == Mode::model && all_fitted && !rc.ranks.empty();
  if (all_counters && !rc.devices.empty()) rc.counter_delta_j = counters;
  for (const auto& key : rows.order) rc.rows.push_back(finish_row(rows.rows.at(key), rc.ranks));
  const bool model = rc.model_lead;
  auto lead = [model](const ReducedRow& r) {
    return model && r.model_energy_j ? r.model_energy_j->sum : r.energy_j.sum;
  };
  std::stable_sort(rc.rows.begin(), rc.rows.end(),
                   [&](const ReducedRow& a, const ReducedRow& b) { return lead(a) > lead(b); });
}

void reduce_hosts(const std::vector<const RankFile*>& files, RanksReport& out) {
  for (const RankFile* f : files) {
    auto it =
        std::find_if(out.hosts.begin(), out.hosts.end(), [&](const ReducedHost& h) { return h.host == f->rank.host; });
    if (it == out.hosts.end()) {
      out.hosts.push_back(ReducedHost{f->rank.host, {}, {}, 0});
      it = out.hosts.end() - 1;
    }
    it->ranks.push_back(f->rank.rank);
    for (const std::string& id : f->device_ids)
      if (std::find(it->devices.begin(), it->devices.end(), id) == it->devices.end()) {
        it->devices.push_back(id);
        for (const ReducedDevice& d : out.devices)
          if (d.id == id) it->run_energy_j += d.run_energy_j;
      }
  }
}

// The files in rank order, each rank once and below size; throws InputError otherwise.
std::vector<const RankFile*> in_rank_order(const std::vector<RankFile>& files) {
  std::vector<const RankFile*> sorted;
  sorted.reserve(files.size());
  for (const RankFile& f : files) {
    if (f.device_ids.size() != f.report.channels.size())
      DOOLY_THROW(InputError, kRankFileFix, "the rank file of rank {} names {} devices for {} channels", f.rank.rank,
                  f.device_ids.size(), f.report.channels.size());
    sorted.push_back(&f);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const RankFile* a, const RankFile* b) { return a->rank.rank < b->rank.rank; });
  auto name = [](const RankFile* f) { return f->path.empty() ? std::string("this process's") : f->path; };
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->rank.rank == sorted[i - 1]->rank.rank)
      DOOLY_THROW(InputError, kRankFileFix, "two reports of rank {}: {} and {}", sorted[i]->rank.rank,
                  name(sorted[i - 1]), name(sorted[i]));
  return sorted;
}

// Who reported, who did not, and what every rank's report says of the whole run.
void reduce_presence(const std::vector<const RankFile*>& sorted, RanksReport& out) {
  if (!sorted.empty()) {
    const RankFile& first = *sorted.front();
    out.launcher = first.rank.launcher;
    out.job = first.rank.job;
    out.mode = first.report.mode;
  }
  for (const RankFile* f : sorted) {
    out.present.push_back(f->rank.rank);
    out.events_dropped += f->report.events_dropped;
    out.unmatched_events += f->report.unmatched_events;
    if (out.backend.find(f->report.backend) == std::string::npos)
      out.backend += (out.backend.empty() ? "" : ",") + f->report.backend;
  }
  for (int r = 0; r < out.size; ++r)
    if (!std::binary_search(out.present.begin(), out.present.end(), r)) out.missing.push_back(r);
}

}  // namespace

RanksReport reduce_ranks(const std::vector<RankFile>& files, int size, const std::vector<std::string>& joint) {
  const std::vector<const RankFile*> sorted = in_rank_order(files);
  RanksReport out;
  out.size = size > 0 ? size : (sorted.empty() ? 0 : sorted.back()->rank.rank + 1);
  if (!sorted.empty() && sorted.back()->rank.rank >= out.size)
    DOOLY_THROW(InputError, kRankFileFix, "a report of rank {} in a job of {} ranks ({})", sorted.back()->rank.rank,
                out.size, sorted.back()->path);
  reduce_presence(sorted, out);
  reduce_devices(sorted, joint, out);
  reduce_hosts(sorted, out);
  for (const RankFile* f : sorted)
    for (const ChannelReport& ch : f->report.channels)
      if (std::none_of(out.channels.begin(), out.channels.end(),
                       [&](const ReducedChannel& c) { return c.name == ch.channel.name; })) {
        ReducedChannel rc;
        rc.name = ch.channel.name;
        rc.domain = ch.channel.domain;
        out.channels.push_back(std::move(rc));
      }
  for (ReducedChannel& rc : out.channels) reduce_channel(rc, sorted, out);
  return out;
}

}  // namespace dooly::energy
