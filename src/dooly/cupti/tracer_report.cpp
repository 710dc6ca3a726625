// What the tracer adds to the engine's report: a row per stream (its kernels' and copies' rows summed, each
// in proportion to the time it spent on that stream), the kernels' short names, and what CUPTI said.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "dooly/cupti/tracer.hpp"

namespace dooly::cupti {

using energy::KeyId;
using energy::Kind;
using energy::RegionRow;

namespace {

const RegionRow* find_row(const energy::ChannelReport& ch, const std::string& name, Kind kind) {
  for (const RegionRow& r : ch.rows)
    if (r.kind == kind && r.name == name) return &r;
  return nullptr;
}

// share of `row` (by time) into `sum`: every figure that adds up.
void add_share(RegionRow& sum, const RegionRow& row, uint64_t calls, int64_t time_ns) {
  const double share = row.time_s > 0 ? static_cast<double>(time_ns) * 1e-9 / row.time_s : 0.0;
  sum.calls += calls;
  sum.time_s += static_cast<double>(time_ns) * 1e-9;
  sum.energy_j += row.energy_j * share;
  sum.excl_time_s += row.excl_time_s * share;
  sum.excl_energy_j += row.excl_energy_j * share;
  if (row.model_energy_j) {
    sum.model_energy_j = sum.model_energy_j.value_or(0) + *row.model_energy_j * share;
    // Intervals of rows fitted together are not independent: added, not in quadrature (an upper bound).
    if (row.model_energy_hw_j)
      sum.model_energy_hw_j = sum.model_energy_hw_j.value_or(0) + *row.model_energy_hw_j * share;
  }
}

}  // namespace

std::optional<RegionRow> Tracer::stream_row(uint32_t track, const StreamKey& sk,
                                            const energy::ChannelReport& ch) const {
  RegionRow sum;
  sum.name = fmt::format("GPU {} stream {}", sk.device, sk.stream);
  sum.kind = Kind::stream;
  for (auto it = stream_tallies_.lower_bound({track, 0}); it != stream_tallies_.end() && it->first.first == track;
       ++it) {
    auto name = key_names_.find(it->first.second);
    if (name == key_names_.end()) continue;
    if (const RegionRow* row = find_row(ch, name->second.first, name->second.second))
      add_share(sum, *row, it->second.calls, it->second.time_ns);
  }
  if (sum.calls == 0) return std::nullopt;
  if (sum.model_energy_hw_j) sum.model_j_per_call_hw_j = *sum.model_energy_hw_j / static_cast<double>(sum.calls);
  return sum;
}

namespace {

// Each kernel row gets its short form (the table's label).
void add_short_names(energy::ChannelReport& ch, const std::unordered_map<std::string, const std::string*>& brief) {
  for (RegionRow& row : ch.rows) {
    if (row.kind != Kind::kernel) continue;
    if (auto it = brief.find(row.name); it != brief.end()) row.short_name = *it->second;
  }
}

}  // namespace

void Tracer::add_stream_rows(energy::Report& report) const {
  std::unordered_map<std::string, const std::string*> brief;  // kernel name -> its short form
  for (const auto& [key, text] : short_names_)
    if (auto it = key_names_.find(key); it != key_names_.end()) brief.emplace(it->second.first, &text);
  for (energy::ChannelReport& ch : report.channels) {
    const bool gpu_only = ch.channel.domain == power::Domain::gpu && ch.channel.device >= 0;
    std::vector<RegionRow> streams;
    for (const auto& [track, sk] : stream_of_track_) {
      if (gpu_only && static_cast<int32_t>(sk.device) != ch.channel.device) continue;
      if (auto row = stream_row(track, sk, ch)) streams.push_back(std::move(*row));
    }
    add_short_names(ch, brief);
    for (RegionRow& s : streams) ch.rows.push_back(std::move(s));
  }
}

void Tracer::add_meta(energy::Report& report) const {
  auto& m = report.meta;
  m.emplace_back("cupti.library", lib_->file());
  m.emplace_back("cupti.records", std::to_string(records_));
  m.emplace_back("cupti.records_incomplete", std::to_string(incomplete_));
  m.emplace_back("cupti.records_dropped_by_cupti", std::to_string(cupti_dropped_));
  m.emplace_back("cupti.buffers_refused", std::to_string(buffers_refused_));
  m.emplace_back("cupti.windows_refused", std::to_string(windows_refused_));
  m.emplace_back("cupti.streams", std::to_string(stream_of_track_.size()));
  m.emplace_back("cupti.nvtx_ranges", std::to_string(nvtx_ranges_.load()));
  m.emplace_back("cupti.buffers_walked", std::to_string(buffers_walked_));
  m.emplace_back("cupti.buffer_walk_s", fmt::format("{:.6f}", static_cast<double>(walk_ns_) * 1e-9));
  // The clock conversion's residual: how far the offset moved between calibrations, and the widest bracket.
  m.emplace_back("cupti.clock_calibrations", std::to_string(clock_->calibrations()));
  m.emplace_back("cupti.clock_offset_drift_ns", std::to_string(clock_->offset_ns() - clock_->first_offset_ns()));
  m.emplace_back("cupti.clock_max_step_ns", std::to_string(clock_->max_step_ns()));
  m.emplace_back("cupti.clock_bracket_ns", std::to_string(clock_->max_bracket_ns()));
  if (cupti_dropped_ > 0 || buffers_refused_ > 0) {
    report.events_dropped += 2 * cupti_dropped_;
    log::warn(
        "CUPTI dropped {} records ({} buffer requests found the pool of {} full): raise DOOLY_CUPTI_MAX_BUFFERS or "
        "DOOLY_CUPTI_BUFFER_KB",
        cupti_dropped_, buffers_refused_, settings_.max_buffers);
  }
  if (incomplete_ > 0)
    log::info("{} GPU records were still incomplete at the end (work that had not finished) and are left out",
              incomplete_);
}

}  // namespace dooly::cupti
