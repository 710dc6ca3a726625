#include "dooly/power/replay/recording.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::power {

namespace {

constexpr std::string_view kHeaderPrefix = "# dooly-recording v";

// Splits on commas; with max_fields > 0 the last field keeps the rest of the line (free text).
std::vector<std::string_view> split(std::string_view s, size_t max_fields) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    if (max_fields && out.size() + 1 == max_fields) {
      out.push_back(s.substr(start));
      break;
    }
    const size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(s.substr(start));
      break;
    }
    out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool parse_domain(std::string_view s, Domain& d) {
  for (Domain x : {Domain::gpu, Domain::cpu, Domain::dram, Domain::node, Domain::other})
    if (to_string(x) == s) {
      d = x;
      return true;
    }
  return false;
}

namespace lim = recording_limits;

// Parses one line's fields, with errors that name file:line and the field.
class LineReader {
 public:
  LineReader(const std::string& path, size_t line) : path_(path), line_(line) {}

  [[noreturn]] void fail(const std::string& what, const std::string& fix) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line_, what), fix);
  }

  template <typename Int>
  Int integer(std::string_view text, std::string_view field, Int min = std::numeric_limits<Int>::min(),
              Int max = std::numeric_limits<Int>::max()) const {
    Int v{};
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < min)
      fail(fmt::format("{} is '{}', not a whole number{}", field, shorten(text),
                       min == 0 ? " >= 0" : (min == std::numeric_limits<Int>::min() ? "" : fmt::format(" >= {}", min))),
           fmt::format("write {} as a plain integer", field));
    if (v > max)
      fail(fmt::format("{} is {}, above the format's limit of {}", field, v, max),
           fmt::format("write {} no larger than {} (the recording format's bound)", field, max));
    return v;
  }

  // A time stamp: |t_ns| < 2^62, so that differences of two stamps never overflow.
  int64_t time(std::string_view text, std::string_view field) const {
    return integer<int64_t>(text, field, -lim::max_abs_t_ns, lim::max_abs_t_ns);
  }

  double real(std::string_view text, std::string_view field, double min, double max) const {
    double v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
      fail(fmt::format("{} is '{}', not a finite number", field, shorten(text)),
           fmt::format("write {} as a decimal number such as 123.5", field));
    if (v < min || v > max)
      fail(fmt::format("{} is {}, outside [{}, {}]", field, v, min, max),
           fmt::format("write {} within [{}, {}] (the recording format's bound)", field, min, max));
    return v;
  }

  std::string text(std::string_view value, std::string_view field) const {
    if (const size_t at = utf8::first_invalid(value); at != std::string_view::npos)
      fail(fmt::format("{} is not valid UTF-8 (byte {} of it)", field, at + 1),
           fmt::format("write {} as UTF-8 text (dooly's writer replaces invalid bytes with U+FFFD)", field));
    return std::string(value);
  }

  void expect_fields(const std::vector<std::string_view>& f, size_t lo, size_t hi, std::string_view form) const {
    if (f.size() < lo || f.size() > hi)
      fail(fmt::format("this '{}' line has {}{} fields; expected {}", shorten(f[0]), f.size() > hi ? "more than " : "",
                       f.size() > hi ? hi : f.size(), form),
           fmt::format("write it as {}", form));
  }

  static std::string shorten(std::string_view s) {
    return s.size() > 40 ? std::string(s.substr(0, 40)) + "..." : std::string(s);
  }

 private:
  const std::string& path_;
  size_t line_;
};

class Parser {
 public:
  explicit Parser(const std::string& path) : path_(path) {}

  void header(size_t no, const std::string& line) {
    if (line == kRecordingHeader) return;
    LineReader r(path_, no);
    if (line.rfind(kHeaderPrefix, 0) == 0)
      r.fail(fmt::format("recording format 'v{}' is not supported; this dooly reads '{}'",
                         LineReader::shorten(std::string_view(line).substr(kHeaderPrefix.size())), kRecordingHeader),
             "re-record the run with this dooly, or read it with the dooly version that wrote it");
    r.fail(fmt::format("not a dooly recording: the first line is '{}', expected '{}'",
                       line.size() > 60 ? line.substr(0, 60) + "..." : line, kRecordingHeader),
           "pass a file written by dooly's recorder (DOOLY_REPLAY_FILE or the path option)");
  }

  void line(size_t no, const std::string& text) {
    if (text.empty() || text[0] == '#') return;
    LineReader r(path_, no);
    const std::string_view type = std::string_view(text).substr(0, text.find(','));
    if (type == "meta") {
      auto f = split(text, 3);
      r.expect_fields(f, 3, 3, "meta,<key>,<value>");
      if (f[1].empty()) r.fail("the meta key is empty", "write meta,<key>,<value> with a non-empty key");
      rec.meta.emplace_back(r.text(f[1], "the meta key"), r.text(f[2], "the meta value"));
    } else if (type == "channel") {
      auto f = split(text, 9);
      r.expect_fields(f, 9, 9, "channel,<index>,<domain>,<device>,<window_ns>,<delay_ns>,<update_ns>,<name>,<description>");
      const auto index = r.integer<uint32_t>(f[1], "the channel index");
      if (index != rec.channels.size())
        r.fail(fmt::format("channel index {} where {} was expected", index, rec.channels.size()),
               "number channels 0, 1, 2, ... in the order their lines appear");
      if (index >= lim::max_channels)
        r.fail(fmt::format("channel {} is one more than the format's {} channels", index, lim::max_channels),
               fmt::format("record at most {} channels", lim::max_channels));
      Channel ch;
      if (!parse_domain(f[2], ch.domain))
        r.fail(fmt::format("domain is '{}'", LineReader::shorten(f[2])), "use one of gpu, cpu, dram, node, other");
      ch.device = r.integer<int32_t>(f[3], "device", -1, lim::max_device);
      ch.sensor.window_ns = r.integer<int64_t>(f[4], "window_ns", 0, lim::max_sensor_ns);
      ch.sensor.delay_ns = r.integer<int64_t>(f[5], "delay_ns", 0, lim::max_sensor_ns);
      ch.sensor.update_ns = r.integer<int64_t>(f[6], "update_ns", 0, lim::max_sensor_ns);
      if (f[7].empty()) r.fail("the channel name is empty", "give every channel a name such as gpu0");
      ch.name = r.text(f[7], "the channel name");
      ch.sensor.description = r.text(f[8], "the channel description");
      rec.channels.push_back(std::move(ch));
      last_sample_t_.push_back(INT64_MIN);
    } else if (type == "key") {
      auto f = split(text, 4);
      r.expect_fields(f, 4, 4, "key,<id>,<kind>,<name>");
      RecordedKey k;
      k.id = r.integer<uint32_t>(f[1], "the key id", 0, lim::max_key_id);
      if (std::binary_search(key_ids_.begin(), key_ids_.end(), k.id))
        r.fail(fmt::format("key {} is declared twice", k.id), "declare each key id once");
      if (f[2].empty()) r.fail("the key kind is empty", "write a kind such as for, reduce, scan or region");
      k.kind = r.text(f[2], "the key kind");
      k.name = r.text(f[3], "the key name");
      key_ids_.insert(std::upper_bound(key_ids_.begin(), key_ids_.end(), k.id), k.id);
      rec.keys.push_back(std::move(k));
    } else if (type == "s") {
      auto f = split(text, 6);
      r.expect_fields(f, 4, 5, "s,<channel>,<t_ns>,<power_w>[,<window_ns>]");
      Reading s;
      s.channel = channel(r, f[1]);
      s.t_ns = time(r, f[2], "t_ns");
      s.power_w = r.real(f[3], "power_w", 0.0, lim::max_power_w);
      if (f.size() == 5) s.window_ns = r.integer<int64_t>(f[4], "window_ns", 0, lim::max_sensor_ns);
      int64_t& last = last_sample_t_[s.channel];
      if (s.t_ns <= last)
        r.fail(fmt::format("t_ns {} is not after the previous sample of channel {} ({})", s.t_ns, s.channel, last),
               "write each channel's samples in strictly increasing time order");
      last = s.t_ns;
      rec.samples.push_back(s);
    } else if (type == "b" || type == "e") {
      auto f = split(text, 7);
      r.expect_fields(f, 6, 6, fmt::format("{},<t_ns>,<key>,<thread>,<device>,<flags>", type));
      RecordedEvent e;
      e.begin = type == "b";
      e.t_ns = time(r, f[1], "t_ns");
      e.key = r.integer<uint32_t>(f[2], "key", 0, lim::max_key_id);
      if (!std::binary_search(key_ids_.begin(), key_ids_.end(), e.key))
        r.fail(fmt::format("key {} is not declared", e.key), "declare it with a 'key' line before it is used");
      e.thread = r.integer<uint32_t>(f[3], "thread", 0, lim::max_thread);
      e.device = r.integer<int32_t>(f[4], "device", -1, lim::max_device);
      e.flags = r.integer<uint32_t>(f[5], "flags");
      check_window(r, e);
      rec.events.push_back(e);
    } else if (type == "c") {
      auto f = split(text, 5);
      r.expect_fields(f, 4, 4, "c,<channel>,<t_ns>,<energy_j>");
      RecordedCounter c;
      c.channel = channel(r, f[1]);
      c.t_ns = time(r, f[2], "t_ns");
      c.energy_j = r.real(f[3], "energy_j", 0.0, lim::max_energy_j);
      rec.counters.push_back(c);
    } else {
      r.fail(fmt::format("unknown record type '{}'", LineReader::shorten(type)),
             "start each line with meta, channel, key, s, b, e or c (or # for a comment)");
    }
  }

  Recording rec;

 private:
  uint32_t channel(const LineReader& r, std::string_view text) const {
    const auto c = r.integer<uint32_t>(text, "channel");
    if (c >= rec.channels.size())
      r.fail(fmt::format("channel {} is not declared ({} channel line(s) so far)", c, rec.channels.size()),
             "declare every channel with a 'channel' line before its samples");
    return c;
  }

  // A stamp within the format's bound whose distance to every other stamp so far stays within the span bound.
  int64_t time(const LineReader& r, std::string_view text, std::string_view field) {
    const int64_t t = r.time(text, field);
    const int64_t lo = std::min(t_min_, t), hi = std::max(t_max_, t);
    if (hi - lo > lim::max_span_ns)  // both within 2^62: no overflow
      r.fail(fmt::format("{} {} is more than 2^52 ns (52 days) from the recording's other times ({} .. {})", field, t,
                         t_min_, t_max_),
             "record one run per file, with times from one steady clock");
    t_min_ = lo;
    t_max_ = hi;
    return t;
  }

  // The 'e' that closes a 'b' of the same key on the same thread (last opened first) must not come before it,
  // and a thread holds a bounded number of open windows.
  void check_window(const LineReader& r, const RecordedEvent& e) {
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

  const std::string& path_;
  std::vector<int64_t> last_sample_t_;
  std::vector<uint32_t> key_ids_;  // sorted
  int64_t t_min_ = lim::max_abs_t_ns, t_max_ = -lim::max_abs_t_ns;
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
  std::string text;
  size_t no = 0;
  while (std::getline(in, text)) {
    ++no;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (no == 1)
      p.header(no, text);
    else
      p.line(no, text);
  }
  // getline also stops on a read error: without this check a failing disk or a vanished file read as a
  // shorter recording.
  if (in.bad())
    DOOLY_THROW(InputError, "check the disk and the file, then run again",
                "{}:{}: reading the recording failed after line {}", name, no + 1, no);
  if (no == 0)
    DOOLY_THROW(InputError, "pass a file written by dooly's recorder", "{}:1: the file is empty, not a dooly recording",
                name);
  return std::move(p.rec);
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
    DOOLY_THROW(InputError, "record steady-clock nanoseconds (|t_ns| < 2^62)", "time {} ns is outside the format's range",
                t_ns);
}
}  // namespace

void RecordingWriter::write_meta(std::string_view key, std::string_view value) {
  check_plain(key, "meta key");
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "meta,{},{}\n", key, free_text(value));
  put(file_, b);
}

uint32_t RecordingWriter::write_channel(const Channel& ch) {
  check_plain(ch.name, "channel name");
  for (int64_t t : {ch.sensor.window_ns, ch.sensor.delay_ns, ch.sensor.update_ns})
    if (t < 0 || t > lim::max_sensor_ns)
      DOOLY_THROW(InputError, "give the sensor model times within [0, 60 s]",
                  "channel '{}' has a sensor time of {} ns, outside [0, 60 s]", ch.name, t);
  if (ch.device < -1 || ch.device > lim::max_device)
    DOOLY_THROW(InputError, "use -1 or a device ordinal below 65536", "channel '{}' has device {}", ch.name,
                ch.device);
  const auto index = static_cast<uint32_t>(last_sample_t_ns_.size());
  if (index >= lim::max_channels)
    DOOLY_THROW(InputError, "record at most 64 channels", "channel '{}' would be channel {}", ch.name, index);
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "channel,{},{},{},{},{},{},{},{}\n", index, to_string(ch.domain), ch.device,
                 ch.sensor.window_ns, ch.sensor.delay_ns, ch.sensor.update_ns, ch.name,
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

void RecordingWriter::write_sample(const Reading& r) {
  if (r.channel >= last_sample_t_ns_.size())
    DOOLY_THROW(InputError, "write the channel before its samples", "sample for undeclared channel {}", r.channel);
  if (r.t_ns <= last_sample_t_ns_[r.channel])
    DOOLY_THROW(InputError, "write each channel's samples in time order", "sample at {} ns is not after {} ns on channel {}",
                r.t_ns, last_sample_t_ns_[r.channel], r.channel);
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

void RecordingWriter::write_event(const RecordedEvent& e) {
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

}  // namespace dooly::power
