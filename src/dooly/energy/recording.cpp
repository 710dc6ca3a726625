#include "dooly/energy/recording.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/line_reader.hpp"
#include "dooly/common/log.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::energy {

namespace {

namespace lim = recording_limits;

// The energy lines (key, b, e) on top of the power ones, which power::ReadingsParser reads.
class Parser {
 public:
  explicit Parser(const std::string& path) : power_(path) {}

  void header(size_t no, const std::string& line) const { power_.header(no, line); }

  void line(const LineReader& r, const std::string& text) {
    const std::string_view type = std::string_view(text).substr(0, text.find(','));
    if (power_.line(r, type, text)) return;
    if (type == "key") {
      auto f = split_fields(text, 4);
      r.expect_fields(f, 4, 4, "key,<id>,<kind>,<name>");
      RecordedKey k;
      k.id = r.integer<uint32_t>(f[1], "the key id", 0, lim::max_key_id);
      if (std::binary_search(key_ids_.begin(), key_ids_.end(), k.id))
        r.fail(fmt::format("key {} is declared twice", k.id), "declare each key id once");
      if (f[2].empty()) r.fail("the key kind is empty", "write a kind such as for, reduce, scan or region");
      try {
        (void)kind_from_string(f[2]);
      } catch (const InputError& e) {
        r.fail(fmt::format("the key kind is '{}'", LineReader::shorten(f[2])), e.fix());
      }
      k.kind = std::string(f[2]);
      k.name = r.text(f[3], "the key name");
      key_ids_.insert(std::upper_bound(key_ids_.begin(), key_ids_.end(), k.id), k.id);
      keys.push_back(std::move(k));
    } else if (type == "b" || type == "e") {
      auto f = split_fields(text, 7);
      r.expect_fields(f, 6, 6, fmt::format("{},<t_ns>,<key>,<thread>,<device>,<flags>", type));
      Event e;
      e.begin = type == "b";
      e.t_ns = power_.time(r, f[1], "t_ns");
      e.key = r.integer<uint32_t>(f[2], "key", 0, lim::max_key_id);
      if (!std::binary_search(key_ids_.begin(), key_ids_.end(), e.key))
        r.fail(fmt::format("key {} is not declared", e.key), "declare it with a 'key' line before it is used");
      e.thread = r.integer<uint32_t>(f[3], "thread", 0, lim::max_thread);
      e.device = r.integer<int32_t>(f[4], "device", -1, lim::max_device);
      e.flags = r.integer<uint32_t>(f[5], "flags");
      check_window(r, e);
      events.push_back(e);
    } else {
      power::ReadingsParser::unknown_type(r, type);
    }
  }

  Recording take() {
    Recording rec;
    rec.meta = std::move(power_.readings.meta);
    rec.channels = std::move(power_.readings.channels);
    rec.keys = std::move(keys);
    rec.samples = std::move(power_.readings.samples);
    rec.events = std::move(events);
    rec.counters = std::move(power_.readings.counters);
    return rec;
  }

 private:
  // The 'e' that closes a 'b' of the same key on the same thread (last opened first) must not come before it,
  // and a thread holds a bounded number of open windows.
  void check_window(const LineReader& r, const Event& e) {
    const uint64_t slot = (static_cast<uint64_t>(e.thread) << 32) | e.key;
    if (e.begin) {
      uint32_t& depth = open_per_thread_[e.thread];
      if (depth >= lim::max_open_windows_per_thread)
        r.fail(fmt::format("thread {} would have more than {} windows open at once", e.thread,
                           lim::max_open_windows_per_thread),
               fmt::format("close windows (an 'e' line) before opening more than {} on one thread",
                           lim::max_open_windows_per_thread));
      ++depth;
      open_[slot].push_back(e.t_ns);
      return;
    }
    auto it = open_.find(slot);
    if (it == open_.end() || it->second.empty()) return;  // an end without its begin: the attributor drops it
    const int64_t begin_t = it->second.back();
    if (e.t_ns < begin_t)
      r.fail(fmt::format("the window of key {} on thread {} ends at t_ns {}, before it begins ({})", e.key, e.thread,
                         e.t_ns, begin_t),
             "write each window's end at or after its begin");
    it->second.pop_back();
    if (it->second.empty()) open_.erase(it);
    --open_per_thread_[e.thread];
  }

  power::ReadingsParser power_;
  std::vector<RecordedKey> keys;
  std::vector<Event> events;
  std::vector<uint32_t> key_ids_;                            // sorted
  std::unordered_map<uint64_t, std::vector<int64_t>> open_;  // (thread, key) -> begin stamps of open windows
  std::unordered_map<uint32_t, uint32_t> open_per_thread_;
};

// Fields that are not free text must not hold separators.
void check_plain(std::string_view value, std::string_view what) {
  if (value.empty() || value.find_first_of(",\r\n") != std::string_view::npos || !utf8::valid(value))
    DOOLY_THROW(InputError, "use a non-empty UTF-8 value without commas or line breaks",
                "cannot record {} '{}': it is empty, holds a comma or line break, or is not UTF-8", what,
                utf8::make_valid(value));
}

std::string free_text(std::string_view value) {
  std::string s = utf8::make_valid(value);
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

}  // namespace

Recording read_recording(std::istream& in, const std::string& name) {
  Parser p(name);
  const size_t lines = for_each_line(in, name, [&](size_t no, const std::string& text) {
    if (no == 1) return p.header(no, text);
    if (text.empty() || text[0] == '#') return;
    p.line(LineReader(name, no), text);
  });
  if (lines == 0)
    DOOLY_THROW(InputError, "pass a file written by dooly's recorder", "{}:1: the file is empty, not a dooly recording",
                name);
  return p.take();
}

Recording read_recording(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    DOOLY_THROW(InputError, "check the path (DOOLY_REPLAY_FILE or the path option) and that the file is readable",
                "cannot open recording '{}': {}", path, std::strerror(errno));
  return read_recording(in, path);
}

RecordingWriter::RecordingWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_)
    DOOLY_THROW(InputError, "choose a writable path whose folder exists", "cannot write recording '{}': {}", path,
                std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 16);
  const std::string header = fmt::format("{}\n", kRecordingHeader);
  std::fwrite(header.data(), 1, header.size(), file_);
}

RecordingWriter::~RecordingWriter() {
  if (!file_) return;
  const bool failed = std::fflush(file_) != 0 || std::ferror(file_);
  const int err = errno;
  std::fclose(file_);
  if (failed) log::error("writing recording '{}' failed: {}", path_, std::strerror(err));
}

namespace {
void put(std::FILE* f, const fmt::memory_buffer& b) { std::fwrite(b.data(), 1, b.size(), f); }

void check_time(int64_t t_ns) {
  if (t_ns < -lim::max_abs_t_ns || t_ns > lim::max_abs_t_ns)
    DOOLY_THROW(InputError, "record steady-clock nanoseconds (|t_ns| < 2^62)",
                "time {} ns is outside the format's range", t_ns);
}
}  // namespace

void RecordingWriter::write_meta(std::string_view key, std::string_view value) {
  check_plain(key, "meta key");
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "meta,{},{}\n", key, free_text(value));
  put(file_, b);
}

uint32_t RecordingWriter::write_channel(const power::Channel& ch) {
  check_plain(ch.name, "channel name");
  for (int64_t t : {ch.sensor.window_ns, ch.sensor.delay_ns, ch.sensor.update_ns})
    if (t < 0 || t > lim::max_sensor_ns)
      DOOLY_THROW(InputError, "give the sensor model times within [0, 60 s]",
                  "channel '{}' has a sensor time of {} ns, outside [0, 60 s]", ch.name, t);
  if (ch.device < -1 || ch.device > lim::max_device)
    DOOLY_THROW(InputError, "use -1 or a device ordinal below 65536", "channel '{}' has device {}", ch.name, ch.device);
  const auto index = static_cast<uint32_t>(last_sample_t_ns_.size());
  if (index >= lim::max_channels)
    DOOLY_THROW(InputError, "record at most 64 channels", "channel '{}' would be channel {}", ch.name, index);
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "channel,{},{},{},{},{},{},{},{}\n", index, power::to_string(ch.domain),
                 ch.device, ch.sensor.window_ns, ch.sensor.delay_ns, ch.sensor.update_ns, ch.name,
                 free_text(ch.sensor.description));
  put(file_, b);
  last_sample_t_ns_.push_back(INT64_MIN);
  return index;
}

void RecordingWriter::write_key(const RecordedKey& key) {
  check_plain(key.kind, "key kind");
  if (key.id > lim::max_key_id)
    DOOLY_THROW(InputError, "use key ids below 2^24", "key id {} is above the recording format's limit", key.id);
  if (std::binary_search(keys_.begin(), keys_.end(), key.id))
    DOOLY_THROW(InputError, "declare each key id once", "key {} is already recorded", key.id);
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "key,{},{},{}\n", key.id, key.kind, free_text(key.name));
  put(file_, b);
  keys_.insert(std::upper_bound(keys_.begin(), keys_.end(), key.id), key.id);
}

void RecordingWriter::write_sample(const power::Reading& r) {
  if (r.channel >= last_sample_t_ns_.size())
    DOOLY_THROW(InputError, "write the channel before its samples", "sample for undeclared channel {}", r.channel);
  if (r.t_ns <= last_sample_t_ns_[r.channel])
    DOOLY_THROW(InputError, "write each channel's samples in time order",
                "sample at {} ns is not after {} ns on channel {}", r.t_ns, last_sample_t_ns_[r.channel], r.channel);
  if (!std::isfinite(r.power_w) || r.power_w < 0 || r.power_w > lim::max_power_w)
    DOOLY_THROW(InputError, "drop readings outside [0, 1e5] W before recording them",
                "sample power {} on channel {} is not a finite power within [0, 1e5] W", r.power_w, r.channel);
  check_time(r.t_ns);
  if (r.window_ns > lim::max_sensor_ns)
    DOOLY_THROW(InputError, "give readings a window within [0, 60 s]", "sample window {} ns is above 60 s",
                r.window_ns);
  last_sample_t_ns_[r.channel] = r.t_ns;
  fmt::memory_buffer b;
  if (r.window_ns >= 0)
    fmt::format_to(std::back_inserter(b), "s,{},{},{},{}\n", r.channel, r.t_ns, r.power_w, r.window_ns);
  else
    fmt::format_to(std::back_inserter(b), "s,{},{},{}\n", r.channel, r.t_ns, r.power_w);
  put(file_, b);
}

void RecordingWriter::write_event(const Event& e) {
  if (!std::binary_search(keys_.begin(), keys_.end(), e.key))
    DOOLY_THROW(InputError, "write the key before its windows", "window for undeclared key {}", e.key);
  check_time(e.t_ns);
  if (e.thread > lim::max_thread || e.device < -1 || e.device > lim::max_device)
    DOOLY_THROW(InputError, "use threads below 2^16 and devices in [-1, 2^16)", "window on thread {}, device {}",
                e.thread, e.device);
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{}\n", e.begin ? 'b' : 'e', e.t_ns, e.key, e.thread, e.device,
                 e.flags);
  put(file_, b);
}

void RecordingWriter::write_counter(const RecordedCounter& c) {
  if (c.channel >= last_sample_t_ns_.size())
    DOOLY_THROW(InputError, "write the channel before its counter readings", "counter for undeclared channel {}",
                c.channel);
  if (!std::isfinite(c.energy_j) || c.energy_j < 0 || c.energy_j > lim::max_energy_j)
    DOOLY_THROW(InputError, "drop counter readings outside [0, 1e15] J before recording them",
                "counter value {} is not a finite energy within [0, 1e15] J", c.energy_j);
  check_time(c.t_ns);
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "c,{},{},{}\n", c.channel, c.t_ns, c.energy_j);
  put(file_, b);
}

void RecordingWriter::flush() {
  if (std::fflush(file_) != 0 || std::ferror(file_))
    DOOLY_THROW(InputError, "free disk space or choose another path", "writing recording '{}' failed: {}", path_,
                std::strerror(errno));
}

void write_recording(const std::string& path, const Recording& rec) {
  RecordingWriter w(path);
  for (const auto& [k, v] : rec.meta) w.write_meta(k, v);
  for (const auto& c : rec.channels) w.write_channel(c);
  for (const auto& k : rec.keys) w.write_key(k);
  for (const auto& s : rec.samples) w.write_sample(s);
  for (const auto& e : rec.events) w.write_event(e);
  for (const auto& c : rec.counters) w.write_counter(c);
  w.flush();
}

}  // namespace dooly::energy
