#include "dooly/power/replay/recorded_readings.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::power {

namespace lim = recording_limits;

namespace {
constexpr std::string_view kHeaderPrefix = "# dooly-recording v";
}  // namespace

bool parse_domain(std::string_view s, Domain& d) {
  for (Domain x : {Domain::gpu, Domain::cpu, Domain::dram, Domain::node, Domain::other})
    if (to_string(x) == s) {
      d = x;
      return true;
    }
  return false;
}

void ReadingsParser::header(size_t no, const std::string& line) const {
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

void ReadingsParser::unknown_type(const LineReader& r, std::string_view type) {
  r.fail(fmt::format("unknown record type '{}'", LineReader::shorten(type)),
         "start each line with meta, channel, key, s, b, e or c (or # for a comment)");
}

int64_t ReadingsParser::time(const LineReader& r, std::string_view text, std::string_view field) {
  const int64_t t = r.integer<int64_t>(text, field, -lim::max_abs_t_ns, lim::max_abs_t_ns);
  const int64_t lo = std::min(t_min_, t), hi = std::max(t_max_, t);
  if (hi - lo > lim::max_span_ns)  // both within 2^62: no overflow
    r.fail(fmt::format("{} {} is more than 2^52 ns (52 days) from the recording's other times ({} .. {})", field, t,
                       t_min_, t_max_),
           "record one run per file, with times from one steady clock");
  t_min_ = lo;
  t_max_ = hi;
  return t;
}

uint32_t ReadingsParser::channel(const LineReader& r, std::string_view text) const {
  const auto c = r.integer<uint32_t>(text, "channel");
  if (c >= readings.channels.size())
    r.fail(fmt::format("channel {} is not declared ({} channel line(s) so far)", c, readings.channels.size()),
           "declare every channel with a 'channel' line before its samples");
  return c;
}

bool ReadingsParser::line(const LineReader& r, std::string_view type, const std::string& text) {
  if (type == "meta") {
    auto f = split_fields(text, 3);
    r.expect_fields(f, 3, 3, "meta,<key>,<value>");
    if (f[1].empty()) r.fail("the meta key is empty", "write meta,<key>,<value> with a non-empty key");
    readings.meta.emplace_back(r.text(f[1], "the meta key"), r.text(f[2], "the meta value"));
  } else if (type == "channel") {
    auto f = split_fields(text, 9);
    r.expect_fields(f, 9, 9,
                    "channel,<index>,<domain>,<device>,<window_ns>,<delay_ns>,<update_ns>,<name>,<description>");
    const auto index = r.integer<uint32_t>(f[1], "the channel index");
    if (index != readings.channels.size())
      r.fail(fmt::format("channel index {} where {} was expected", index, readings.channels.size()),
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
    readings.channels.push_back(std::move(ch));
    last_sample_t_.push_back(INT64_MIN);
  } else if (type == "s") {
    auto f = split_fields(text, 6);
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
    readings.samples.push_back(s);
  } else if (type == "c") {
    auto f = split_fields(text, 5);
    r.expect_fields(f, 4, 4, "c,<channel>,<t_ns>,<energy_j>");
    RecordedCounter c;
    c.channel = channel(r, f[1]);
    c.t_ns = time(r, f[2], "t_ns");
    c.energy_j = r.real(f[3], "energy_j", 0.0, lim::max_energy_j);
    readings.counters.push_back(c);
  } else {
    return false;
  }
  return true;
}

RecordedReadings read_recorded_readings(std::istream& in, const std::string& name) {
  ReadingsParser p(name);
  const size_t lines = for_each_line(in, name, [&](size_t no, const std::string& text) {
    if (no == 1) return p.header(no, text);
    if (text.empty() || text[0] == '#') return;
    LineReader r(name, no);
    const std::string_view type = std::string_view(text).substr(0, text.find(','));
    if (p.line(r, type, text)) return;
    if (type != "key" && type != "b" && type != "e") ReadingsParser::unknown_type(r, type);
  });
  if (lines == 0)
    DOOLY_THROW(InputError, "pass a file written by dooly's recorder", "{}:1: the file is empty, not a dooly recording",
                name);
  return std::move(p.readings);
}

RecordedReadings read_recorded_readings(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    DOOLY_THROW(InputError, "check the path (DOOLY_REPLAY_FILE or the path option) and that the file is readable",
                "cannot open recording '{}': {}", path, std::strerror(errno));
  return read_recorded_readings(in, path);
}

}  // namespace dooly::power
