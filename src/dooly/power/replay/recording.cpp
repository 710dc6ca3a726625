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

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"

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

// Parses one line's fields, with errors that name file:line and the field.
class LineReader {
 public:
  LineReader(const std::string& path, size_t line) : path_(path), line_(line) {}

  [[noreturn]] void fail(const std::string& what, const std::string& fix) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line_, what), fix);
  }

  template <typename Int>
  Int integer(std::string_view text, std::string_view field, Int min = std::numeric_limits<Int>::min()) const {
    Int v{};
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < min)
      fail(fmt::format("{} is '{}', not a whole number{}", field, text,
                       min == 0 ? " >= 0" : (min == std::numeric_limits<Int>::min() ? "" : fmt::format(" >= {}", min))),
           fmt::format("write {} as a plain integer", field));
    return v;
  }

  double real(std::string_view text, std::string_view field) const {
    double v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
      fail(fmt::format("{} is '{}', not a finite number", field, text),
           fmt::format("write {} as a decimal number such as 123.5", field));
    return v;
  }

  void expect_fields(const std::vector<std::string_view>& f, size_t lo, size_t hi, std::string_view form) const {
    if (f.size() < lo || f.size() > hi)
      fail(fmt::format("this '{}' line has {} fields; expected {}", f[0], f.size(), form),
           fmt::format("write it as {}", form));
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
                         line.substr(kHeaderPrefix.size()), kRecordingHeader),
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
      rec.meta.emplace_back(std::string(f[1]), std::string(f[2]));
    } else if (type == "channel") {
      auto f = split(text, 9);
      r.expect_fields(f, 9, 9, "channel,<index>,<domain>,<device>,<window_ns>,<delay_ns>,<update_ns>,<name>,<description>");
      const auto index = r.integer<uint32_t>(f[1], "the channel index");
      if (index != rec.channels.size())
        r.fail(fmt::format("channel index {} where {} was expected", index, rec.channels.size()),
               "number channels 0, 1, 2, ... in the order their lines appear");
      Channel ch;
      if (!parse_domain(f[2], ch.domain))
        r.fail(fmt::format("domain is '{}'", f[2]), "use one of gpu, cpu, dram, node, other");
      ch.device = r.integer<int32_t>(f[3], "device");
      ch.sensor.window_ns = r.integer<int64_t>(f[4], "window_ns", 0);
      ch.sensor.delay_ns = r.integer<int64_t>(f[5], "delay_ns", 0);
      ch.sensor.update_ns = r.integer<int64_t>(f[6], "update_ns", 0);
      if (f[7].empty()) r.fail("the channel name is empty", "give every channel a name such as gpu0");
      ch.name = std::string(f[7]);
      ch.sensor.description = std::string(f[8]);
      rec.channels.push_back(std::move(ch));
      last_sample_t_.push_back(INT64_MIN);
    } else if (type == "key") {
      auto f = split(text, 4);
      r.expect_fields(f, 4, 4, "key,<id>,<kind>,<name>");
      RecordedKey k;
      k.id = r.integer<uint32_t>(f[1], "the key id");
      if (std::binary_search(key_ids_.begin(), key_ids_.end(), k.id))
        r.fail(fmt::format("key {} is declared twice", k.id), "declare each key id once");
      if (f[2].empty()) r.fail("the key kind is empty", "write a kind such as for, reduce, scan or region");
      k.kind = std::string(f[2]);
      k.name = std::string(f[3]);
      key_ids_.insert(std::upper_bound(key_ids_.begin(), key_ids_.end(), k.id), k.id);
      rec.keys.push_back(std::move(k));
    } else if (type == "s") {
      auto f = split(text, 0);
      r.expect_fields(f, 4, 5, "s,<channel>,<t_ns>,<power_w>[,<window_ns>]");
      Reading s;
      s.channel = channel(r, f[1]);
      s.t_ns = r.integer<int64_t>(f[2], "t_ns");
      s.power_w = r.real(f[3], "power_w");
      if (f.size() == 5) s.window_ns = r.integer<int64_t>(f[4], "window_ns", 0);
      int64_t& last = last_sample_t_[s.channel];
      if (s.t_ns <= last)
        r.fail(fmt::format("t_ns {} is not after the previous sample of channel {} ({})", s.t_ns, s.channel, last),
               "write each channel's samples in strictly increasing time order");
      last = s.t_ns;
      rec.samples.push_back(s);
    } else if (type == "b" || type == "e") {
      auto f = split(text, 0);
      r.expect_fields(f, 6, 6, fmt::format("{},<t_ns>,<key>,<thread>,<device>,<flags>", type));
      RecordedEvent e;
      e.begin = type == "b";
      e.t_ns = r.integer<int64_t>(f[1], "t_ns");
      e.key = r.integer<uint32_t>(f[2], "key");
      if (!std::binary_search(key_ids_.begin(), key_ids_.end(), e.key))
        r.fail(fmt::format("key {} is not declared", e.key), "declare it with a 'key' line before it is used");
      e.thread = r.integer<uint32_t>(f[3], "thread");
      e.device = r.integer<int32_t>(f[4], "device");
      e.flags = r.integer<uint32_t>(f[5], "flags");
      rec.events.push_back(e);
    } else if (type == "c") {
      auto f = split(text, 0);
      r.expect_fields(f, 4, 4, "c,<channel>,<t_ns>,<energy_j>");
      RecordedCounter c;
      c.channel = channel(r, f[1]);
      c.t_ns = r.integer<int64_t>(f[2], "t_ns");
      c.energy_j = r.real(f[3], "energy_j");
      rec.counters.push_back(c);
    } else {
      r.fail(fmt::format("unknown record type '{}'", type.size() > 20 ? std::string(type.substr(0, 20)) + "..." : std::string(type)),
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

  const std::string& path_;
  std::vector<int64_t> last_sample_t_;
  std::vector<uint32_t> key_ids_;  // sorted
};

// Fields that are not free text must not hold separators.
void check_plain(std::string_view value, std::string_view what) {
  if (value.empty() || value.find_first_of(",\r\n") != std::string_view::npos)
    DOOLY_THROW(InputError, "use a non-empty value without commas or line breaks",
                "cannot record {} '{}': it is empty or holds a comma or line break", what, value);
}

std::string free_text(std::string_view value) {
  std::string s(value);
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

}  // namespace

Recording read_recording(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    DOOLY_THROW(InputError, "check the path (DOOLY_REPLAY_FILE or the path option) and that the file is readable",
                "cannot open recording '{}': {}", path, std::strerror(errno));
  Parser p(path);
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
  if (no == 0)
    DOOLY_THROW(InputError, "pass a file written by dooly's recorder", "{}:1: the file is empty, not a dooly recording",
                path);
  return std::move(p.rec);
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
}  // namespace

void RecordingWriter::write_meta(std::string_view key, std::string_view value) {
  check_plain(key, "meta key");
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "meta,{},{}\n", key, free_text(value));
  put(file_, b);
}

uint32_t RecordingWriter::write_channel(const Channel& ch) {
  check_plain(ch.name, "channel name");
  if (ch.sensor.window_ns < 0 || ch.sensor.delay_ns < 0 || ch.sensor.update_ns < 0)
    DOOLY_THROW(InputError, "give the sensor model non-negative times", "channel '{}' has a negative sensor time",
                ch.name);
  const auto index = static_cast<uint32_t>(last_sample_t_ns_.size());
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
  if (!std::isfinite(r.power_w))
    DOOLY_THROW(InputError, "drop non-finite readings before recording them", "sample power {} on channel {} is not finite",
                r.power_w, r.channel);
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
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "{},{},{},{},{},{}\n", e.begin ? 'b' : 'e', e.t_ns, e.key, e.thread, e.device,
                 e.flags);
  put(file_, b);
}

void RecordingWriter::write_counter(const RecordedCounter& c) {
  if (c.channel >= last_sample_t_ns_.size())
    DOOLY_THROW(InputError, "write the channel before its counter readings", "counter for undeclared channel {}",
                c.channel);
  if (!std::isfinite(c.energy_j))
    DOOLY_THROW(InputError, "drop non-finite readings before recording them", "counter value {} is not finite",
                c.energy_j);
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
