#pragma once
// The power half of the dooly recording (the format is documented in energy/recording.hpp, which reads and
// writes all of it): meta, channel, 's' (power reading) and 'c' (energy-counter reading) lines. The replay
// source reads only these; key and window lines ('key', 'b', 'e') belong to the energy engine and are
// skipped here unparsed.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dooly/common/line_reader.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::power {

inline constexpr std::string_view kRecordingHeader = "# dooly-recording v1";

// What the format allows (energy/recording.hpp lists every bound): keeps every later sum and allocation
// bounded.
namespace recording_limits {
inline constexpr int32_t max_device = (1 << 16) - 1;  // devices in [-1, max_device]
inline constexpr uint32_t max_channels = 64;
inline constexpr int64_t max_abs_t_ns = (int64_t{1} << 62) - 1;
inline constexpr int64_t max_span_ns = int64_t{1} << 52;  // all times of one recording within 52 days
inline constexpr double max_power_w = 1e5;
inline constexpr double max_energy_j = 1e15;
inline constexpr int64_t max_sensor_ns = 60'000'000'000;
}  // namespace recording_limits

struct RecordedCounter {
  uint32_t channel = 0;
  int64_t t_ns = 0;
  double energy_j = 0.0;
};

struct RecordedReadings {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<Channel> channels;
  std::vector<Reading> samples;
  std::vector<RecordedCounter> counters;
};

// Parses the header and the power lines of a recording, one line at a time; the energy engine's reader
// drives it and handles the other record types itself.
class ReadingsParser {
 public:
  explicit ReadingsParser(const std::string& path) : path_(path) {}

  // Throws InputError unless the first line is kRecordingHeader.
  void header(size_t no, const std::string& line) const;
  // Parses a meta, channel, s or c line into `readings` and returns true; false for any other type.
  bool line(const LineReader& r, std::string_view type, const std::string& text);
  // A stamp within |t_ns| < 2^62 whose distance to every stamp read so far stays within the span bound.
  int64_t time(const LineReader& r, std::string_view text, std::string_view field);
  // Throws the "unknown record type" error.
  [[noreturn]] static void unknown_type(const LineReader& r, std::string_view type);

  RecordedReadings readings;

 private:
  uint32_t channel(const LineReader& r, std::string_view text) const;

  const std::string& path_;
  std::vector<int64_t> last_sample_t_;
  int64_t t_min_ = recording_limits::max_abs_t_ns, t_max_ = -recording_limits::max_abs_t_ns;
};

// Reads and checks a recording's readings, skipping its key and window lines. Throws InputError naming
// file:line, what is wrong and the fix.
RecordedReadings read_recorded_readings(const std::string& path);
RecordedReadings read_recorded_readings(std::istream& in, const std::string& name);

// The recording's domain words (gpu, cpu, dram, node, other); false for another word.
bool parse_domain(std::string_view word, Domain& domain);

}  // namespace dooly::power
