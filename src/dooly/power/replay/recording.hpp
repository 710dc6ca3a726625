#pragma once
// The dooly recording: a whole run's power readings, attribution windows and energy-counter readings, so it
// can be replayed as a power source or re-analysed offline. Text, one record per line, versioned:
//
//   # dooly-recording v1                          first line, exactly
//   meta,<key>,<value>                            value: free text (may hold commas)
//   channel,<index>,<domain>,<device>,<window_ns>,<delay_ns>,<update_ns>,<name>,<description>
//                                                 indices 0,1,2,... in order; description: free text
//   key,<id>,<kind>,<name>                        kind: a short word (for, reduce, region, ...); name: free text
//   s,<channel>,<t_ns>,<power_w>[,<window_ns>]    a power reading; t_ns strictly increasing per channel
//   b,<t_ns>,<key>,<thread>,<device>,<flags>      a window begins (flags: bitset defined by the energy engine)
//   e,<t_ns>,<key>,<thread>,<device>,<flags>      a window ends
//   c,<channel>,<t_ns>,<energy_j>                 a vendor energy-counter reading
//   # ... / blank                                 ignored after the header
//
// Channels and keys are declared before the lines that use them. Doubles are written in the shortest form
// that reads back to the same value. Free text cannot hold line breaks: the writer turns them into spaces.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dooly/power/power_source.hpp"

namespace dooly::power {

inline constexpr std::string_view kRecordingHeader = "# dooly-recording v1";

struct RecordedKey {
  uint32_t id = 0;
  std::string kind;
  std::string name;
};

struct RecordedEvent {
  int64_t t_ns = 0;
  uint32_t key = 0;
  uint32_t thread = 0;
  int32_t device = -1;
  bool begin = true;
  uint32_t flags = 0;
};

struct RecordedCounter {
  uint32_t channel = 0;
  int64_t t_ns = 0;
  double energy_j = 0.0;
};

struct Recording {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<Channel> channels;
  std::vector<RecordedKey> keys;
  std::vector<Reading> samples;
  std::vector<RecordedEvent> events;
  std::vector<RecordedCounter> counters;
};

// Reads and checks a whole recording. Throws InputError naming file:line, what is wrong and the fix.
Recording read_recording(const std::string& path);

// Streams a recording to a file. Every method checks what would make the file unreadable (a comma in a
// field that is not free text, an undeclared channel or key, a sample not after the channel's previous one)
// and throws InputError; I/O failures surface at flush() (and are logged, never thrown, by the destructor).
class RecordingWriter {
 public:
  explicit RecordingWriter(const std::string& path);  // creates or truncates; writes the header
  ~RecordingWriter();
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  void write_meta(std::string_view key, std::string_view value);
  uint32_t write_channel(const Channel& channel);  // returns its index (0, 1, 2, ... in call order)
  void write_key(const RecordedKey& key);
  void write_sample(const Reading& reading);
  void write_event(const RecordedEvent& event);
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

}  // namespace dooly::power
