#pragma once
// The dooly recording: a whole run's power readings, attribution windows and energy-counter readings, so it
// can be replayed as a power source or re-analysed offline. Text, one record per line, versioned:
//
//   # dooly-recording v1                          first line, exactly
//   meta,<key>,<value>                            value: free text (may hold commas)
//   channel,<index>,<domain>,<device>,<window_ns>,<delay_ns>,<update_ns>,<name>,<description>
//                                                 indices 0,1,2,... in order; description: free text
//   key,<id>,<kind>,<name>                        kind: for, reduce, scan, region, section, fence, copy, idle,
//                                                 other; name: free text
//   s,<channel>,<t_ns>,<power_w>[,<window_ns>]    a power reading; t_ns strictly increasing per channel
//   b,<t_ns>,<key>,<thread>,<device>,<flags>      a window begins (flags: energy/event.hpp)
//   e,<t_ns>,<key>,<thread>,<device>,<flags>      a window ends
//   c,<channel>,<t_ns>,<energy_j>                 a vendor energy-counter reading
//   # ... / blank                                 ignored after the header
//
// Channels and keys are declared before the lines that use them. Doubles are written in the shortest form
// that reads back to the same value. Free text is UTF-8 without line breaks: the writer turns line breaks
// into spaces and invalid bytes into U+FFFD; the reader refuses invalid UTF-8.
//
// Bounds (the reader refuses anything outside them, naming file:line and the field; the writer refuses the
// per-value ones):
//   key ids < 2^24; threads < 2^16; devices in [-1, 2^16); at most 64 channels
//   |t_ns| < 2^62, and all times of one recording (with meta run_start_ns/run_end_ns) within 2^52 ns (52 days)
//   power_w in [0, 1e5] W; energy_j in [0, 1e15] J; a sensor's window/delay/update and a sample's window
//   in [0, 60 s]
//   an 'e' line does not come before the 'b' of the same key on the same thread that it closes, and at most
//   1024 windows are open on one thread at once
//
// The power lines (meta, channel, s, c) are read by power/replay/recorded_readings.hpp, which the replay
// source uses; this file reads and writes the whole format.
#include <cstdint>
#include <cstdio>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dooly/energy/event.hpp"
#include "dooly/power/replay/recorded_readings.hpp"

namespace dooly::energy {

using power::kRecordingHeader;
using power::RecordedCounter;

// The energy engine's bounds, with the power ones in power::recording_limits.
namespace recording_limits {
using namespace power::recording_limits;
inline constexpr uint32_t max_key_id = (1u << 24) - 1;
inline constexpr uint32_t max_thread = (1u << 16) - 1;
inline constexpr uint32_t max_open_windows_per_thread = 1024;
}  // namespace recording_limits

struct RecordedKey {
  uint32_t id = 0;
  std::string kind;  // a word of energy::Kind (to_string)
  std::string name;
};

struct Recording {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<power::Channel> channels;
  std::vector<RecordedKey> keys;
  std::vector<power::Reading> samples;
  std::vector<Event> events;
  std::vector<RecordedCounter> counters;
};

// Reads and checks a whole recording. Throws InputError naming file:line, what is wrong and the fix.
Recording read_recording(const std::string& path);
// The same from a stream; `name` stands for the file in messages. A read error is an InputError too.
Recording read_recording(std::istream& in, const std::string& name);

// Streams a recording to a file. Every method checks what would make the file unreadable (a comma in a
// field that is not free text, an undeclared channel or key, a sample not after the channel's previous one,
// a value outside the format's bounds) and throws InputError; I/O failures surface at flush() (and are
// logged, never thrown, by the destructor).
class RecordingWriter {
 public:
  explicit RecordingWriter(const std::string& path);  // creates or truncates; writes the header
  ~RecordingWriter();
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  void write_meta(std::string_view key, std::string_view value);
  uint32_t write_channel(const power::Channel& channel);  // returns its index (0, 1, 2, ... in call order)
  void write_key(const RecordedKey& key);
  void write_sample(const power::Reading& reading);
  void write_event(const Event& event);
  void write_counter(const RecordedCounter& counter);
  void flush();  // throws InputError if anything written so far failed to reach the file

  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<int64_t> last_sample_t_ns_;  // per channel
  std::vector<uint32_t> keys_;             // declared ids (sorted)
};

// Writes a whole Recording (channels, keys, then samples, events and counters in the given order).
void write_recording(const std::string& path, const Recording& recording);

}  // namespace dooly::energy
