#include "dooly/energy/rank_reattribute.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::energy {

namespace {

std::optional<int64_t> meta_int(const Recording& rec, std::string_view key) {
  for (const auto& [k, v] : rec.meta)
    if (k == key) {
      int64_t x = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && p == v.data() + v.size()) return x;
    }
  return std::nullopt;
}

const std::string* meta_of(const Report& report, std::string_view key) {
  for (const auto& [k, v] : report.meta)
    if (k == key) return &v;
  return nullptr;
}

// "name<tag>" -> the name when the tag is rank's, else nullopt.
std::optional<std::string> untagged(const std::string& name, const std::string& tag) {
  if (name.size() < tag.size() || name.compare(name.size() - tag.size(), tag.size(), tag) != 0) return std::nullopt;
  return name.substr(0, name.size() - tag.size());
}

}  // namespace

std::string rank_tag(int rank) { return fmt::format("\x1f{}", rank); }

namespace {

// One rank's keys (tagged with its rank) and its windows on the host or on this device, its threads numbered apart.
void add_windows(const Recording& rec, int rank, int device, int32_t joint_device, size_t index,
                 std::map<std::pair<size_t, uint32_t>, uint32_t>& threads, Recording& joint) {
  std::map<uint32_t, uint32_t> keys;
  for (const RecordedKey& k : rec.keys) {
    const auto id = static_cast<uint32_t>(joint.keys.size());
    keys[k.id] = id;
    joint.keys.push_back({id, k.kind, k.name + rank_tag(rank)});
  }
  for (const Event& e : rec.events) {
    if (e.device >= 0 && e.device != device) continue;  // another GPU of that rank
    const auto key = keys.find(e.key);
    if (key == keys.end()) continue;
    Event x = e;
    x.key = key->second;
    x.device = e.device >= 0 ? joint_device : -1;
    x.thread = threads.try_emplace({index, e.thread}, static_cast<uint32_t>(threads.size())).first->second;
    joint.events.push_back(x);
  }
}

}  // namespace

Recording joint_recording(const std::vector<const Recording*>& recordings, const std::vector<int>& ranks,
                          const std::vector<int>& devices, size_t counted, const std::string& channel) {
  const Recording& base = *recordings.at(counted);
  const auto ch = std::find_if(base.channels.begin(), base.channels.end(),
                               [&](const power::Channel& c) { return c.name == channel; });
  if (ch == base.channels.end())
    DOOLY_THROW(InputError, "pass the recording the rank wrote in the run of its rank file",
                "the recording of rank {} has no channel '{}'", ranks.at(counted), channel);
  const auto index = static_cast<uint32_t>(ch - base.channels.begin());
  Recording joint;
  joint.channels.push_back(*ch);
  for (const auto& [k, v] : base.meta)
    if (k != "run_start_ns" && k != "run_end_ns") joint.meta.emplace_back(k, v);
  for (const power::Reading& s : base.samples)
    if (s.channel == index) joint.samples.push_back({0, s.t_ns, s.power_w, s.window_ns});
  for (const RecordedCounter& c : base.counters)
    if (c.channel == index) joint.counters.push_back({0, c.t_ns, c.energy_j});

  // The run: from the first rank's start to the last rank's end.
  std::optional<int64_t> start, end;
  std::map<std::pair<size_t, uint32_t>, uint32_t> threads;
  for (size_t i = 0; i < recordings.size(); ++i) {
    const auto s = meta_int(*recordings[i], "run_start_ns");
    const auto e = meta_int(*recordings[i], "run_end_ns");
    if (s) start = std::min(start.value_or(*s), *s);
    if (e) end = std::max(end.value_or(*e), *e);
    add_windows(*recordings[i], ranks.at(i), devices.at(i), ch->device, i, threads, joint);
  }
  if (start) joint.meta.emplace_back("run_start_ns", std::to_string(*start));
  if (end) joint.meta.emplace_back("run_end_ns", std::to_string(*end));
  return joint;
}

namespace {

using Member = std::pair<size_t, size_t>;  // (file, channel)

// The sharing ranks' recordings, ranks, ordinals of the device and the one that measured it longest; or why not.
struct Members {
  std::vector<Recording> recordings;
  std::vector<int> ranks, devices;
  size_t counted = 0;
  std::string why_not;
};

Members load_members(const std::vector<RankFile>& files, const std::vector<Member>& members) {
  Members out;
  auto channel = [&](const Member& m) -> const ChannelReport& { return files[m.first].report.channels[m.second]; };
  for (size_t m = 0; m < members.size(); ++m) {
    const RankFile& file = files[members[m].first];
    const std::string* path = meta_of(file.report, "recording");
    if (!path) {
      out.why_not = fmt::format("rank {} did not record (DOOLY_RECORD)", file.rank.rank);
      return out;
    }
    try {
      out.recordings.push_back(read_recording(*path));
    } catch (const InputError& e) {
      out.why_not = fmt::format("rank {}'s recording: {}", file.rank.rank, e.what());
      return out;
    }
    out.ranks.push_back(file.rank.rank);
    out.devices.push_back(channel(members[m]).channel.device);
    if (channel(members[m]).run_time_s > channel(members[out.counted]).run_time_s) out.counted = m;
  }
  return out;
}

// One sharing rank's channel from the joint analysis: its own rows; the device's run on the counted rank only.
void take_share(ChannelReport& ch, const ChannelReport& shared, int rank, bool counted) {
  const std::string tag = rank_tag(rank);
  ch.rows.clear();
  for (const RegionRow& row : shared.rows)
    if (auto name = untagged(row.name, tag)) {
      RegionRow mine = row;
      mine.name = *name;
      ch.rows.push_back(std::move(mine));
    }
  ch.baseline_w = shared.baseline_w;
  ch.baseline_method = shared.baseline_method;
  ch.fit = shared.fit;
  ch.sensor_check = shared.sensor_check;
  if (counted) {
    ch.run_time_s = shared.run_time_s;
    ch.samples = shared.samples;
    ch.conservation = shared.conservation;
  } else {  // the device's run and energy are the counted rank's
    ch.run_time_s = 0;
    ch.conservation = Conservation{};
  }
}

}  // namespace

Reattribution reattribute_shared_devices(std::vector<RankFile>& files, const AnalysisOptions& options) {
  Reattribution out;
  std::map<std::string, std::vector<Member>> by_device;
  for (size_t f = 0; f < files.size(); ++f)
    for (size_t c = 0; c < files[f].device_ids.size(); ++c) by_device[files[f].device_ids[c]].emplace_back(f, c);

  for (const auto& [id, members] : by_device) {
    if (members.size() < 2) continue;
    const Members loaded = load_members(files, members);
    if (!loaded.why_not.empty()) {
      out.skipped.push_back(id + ": " + loaded.why_not);
      continue;
    }
    std::vector<const Recording*> recordings;
    for (const Recording& r : loaded.recordings) recordings.push_back(&r);
    const Member& counted = members[loaded.counted];
    const std::string& channel = files[counted.first].report.channels[counted.second].channel.name;
    Report joint;
    try {
      joint = analyze_recording(joint_recording(recordings, loaded.ranks, loaded.devices, loaded.counted, channel),
                                options);
    } catch (const InputError& e) {
      out.skipped.push_back(id + ": " + e.what());
      continue;
    }
    for (size_t m = 0; m < members.size(); ++m)
      take_share(files[members[m].first].report.channels[members[m].second], joint.channels.at(0), loaded.ranks[m],
                 m == loaded.counted);
    out.devices.push_back(id);
  }
  return out;
}

}  // namespace dooly::energy
