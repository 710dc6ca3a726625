// The dooly recording format (energy/recording.hpp) and the power lines replay reads of it
// (power/replay/recorded_readings.hpp): exact round trip, and one clear message (file:line, problem, fix) per bad
// input.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <streambuf>

#include <fmt/format.h>

#include "dooly/common/error.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/power/replay/recorded_readings.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

using energy::read_recording;
using energy::Recording;
using energy::RecordingWriter;
using energy::write_recording;

using testing::TempDir;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

Recording sample_recording() {
  Recording rec;
  rec.meta = {{"host", "h200-node-3"}, {"command", "./solver --mesh big.h5, --steps 10"}, {"empty", ""}};
  Channel gpu;
  gpu.name = "gpu0";
  gpu.domain = Domain::gpu;
  gpu.device = 0;
  gpu.sensor = {0, 1500000, 20000000, "NVIDIA H200 [PCI 0000:1B:00.0]: nvmlDeviceGetSamples (instantaneous, ~20 ms)"};
  Channel cpu;
  cpu.name = "cpu0";
  cpu.domain = Domain::cpu;
  cpu.device = 0;
  cpu.sensor = {0, 0, 1000000, "RAPL package-0, with a comma"};
  rec.channels = {gpu, cpu};
  rec.keys = {{0, "for", "Kokkos::View<double*, Kokkos::LayoutRight>::init"}, {7, "region", "solve, phase 2"}};
  rec.samples = {{0, 1000, 0.1, -1},
                 {1, 1000, 1.0 / 3.0, 999},
                 {0, 2000, 12345.678901234567891, -1},
                 {0, 3000, 5e-324, -1},
                 {1, 2001, -0.0, 1001},
                 {0, 4000, 1e5, 0}};  // the format's largest power
  rec.events = {{1500, 0, 0, 0, true, 1}, {1700, 0, 0, 0, false, 1}, {1600, 7, 3, -1, true, 0xffffffffu},
                {1620, 7, 3, -1, false, 0}, {-20, 0, 1, -1, false, 0}};
  rec.counters = {{0, 900, 983.25}, {0, 4100, 2024.0000000000002}};
  return rec;
}

TEST(Recording, RoundTripIsExact) {
  TempDir dir;
  const std::string path = dir.file("run.dooly");
  const Recording in = sample_recording();
  write_recording(path, in);

  std::ifstream f(path);
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first, "# dooly-recording v1");

  const Recording out = read_recording(path);
  EXPECT_EQ(out.meta, in.meta);
  ASSERT_EQ(out.channels.size(), in.channels.size());
  for (size_t i = 0; i < in.channels.size(); ++i) {
    EXPECT_EQ(out.channels[i].name, in.channels[i].name);
    EXPECT_EQ(out.channels[i].domain, in.channels[i].domain);
    EXPECT_EQ(out.channels[i].device, in.channels[i].device);
    EXPECT_EQ(out.channels[i].sensor.window_ns, in.channels[i].sensor.window_ns);
    EXPECT_EQ(out.channels[i].sensor.delay_ns, in.channels[i].sensor.delay_ns);
    EXPECT_EQ(out.channels[i].sensor.update_ns, in.channels[i].sensor.update_ns);
    EXPECT_EQ(out.channels[i].sensor.description, in.channels[i].sensor.description);
  }
  ASSERT_EQ(out.keys.size(), 2u);
  EXPECT_EQ(out.keys[0].name, "Kokkos::View<double*, Kokkos::LayoutRight>::init");
  EXPECT_EQ(out.keys[1].id, 7u);
  EXPECT_EQ(out.keys[1].kind, "region");
  EXPECT_EQ(out.keys[1].name, "solve, phase 2");
  ASSERT_EQ(out.samples.size(), in.samples.size());
  for (size_t i = 0; i < in.samples.size(); ++i) {
    EXPECT_EQ(out.samples[i].channel, in.samples[i].channel) << i;
    EXPECT_EQ(out.samples[i].t_ns, in.samples[i].t_ns) << i;
    EXPECT_TRUE(same_bits(out.samples[i].power_w, in.samples[i].power_w)) << i << ": " << out.samples[i].power_w;
    EXPECT_EQ(out.samples[i].window_ns, in.samples[i].window_ns) << i;
  }
  ASSERT_EQ(out.events.size(), in.events.size());
  for (size_t i = 0; i < in.events.size(); ++i) {
    EXPECT_EQ(out.events[i].t_ns, in.events[i].t_ns);
    EXPECT_EQ(out.events[i].key, in.events[i].key);
    EXPECT_EQ(out.events[i].thread, in.events[i].thread);
    EXPECT_EQ(out.events[i].device, in.events[i].device);
    EXPECT_EQ(out.events[i].begin, in.events[i].begin);
    EXPECT_EQ(out.events[i].flags, in.events[i].flags);
  }
  ASSERT_EQ(out.counters.size(), 2u);
  EXPECT_TRUE(same_bits(out.counters[1].energy_j, 2024.0000000000002));
  EXPECT_EQ(out.counters[1].t_ns, 4100);
}

TEST(Recording, WriterTurnsLineBreaksInFreeTextIntoSpaces) {
  TempDir dir;
  RecordingWriter w(dir.file("r"));
  w.write_meta("note", "two\nlines\r");
  w.flush();
  EXPECT_EQ(read_recording(dir.file("r")).meta.at(0).second, "two lines ");
}

TEST(Recording, WriterRejectsWhatTheReaderWouldReject) {
  TempDir dir;
  try {
    RecordingWriter w(dir.file("no/such/folder/run.dooly"));
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write recording '" + dir.file("no/such/folder/run.dooly") +
                                         "': No such file or directory"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.fix(), "choose a writable path whose folder exists");
  }
  RecordingWriter w(dir.file("run.dooly"));
  Channel bad;
  bad.name = "gpu,0";
  EXPECT_THROW(w.write_channel(bad), InputError);
  Channel ok;
  ok.name = "gpu0";
  EXPECT_EQ(w.write_channel(ok), 0u);
  EXPECT_EQ(w.write_channel(ok), 1u);
  EXPECT_THROW(w.write_sample({2, 10, 1.0, -1}), InputError);  // undeclared channel
  w.write_sample({0, 10, 1.0, -1});
  EXPECT_THROW(w.write_sample({0, 10, 2.0, -1}), InputError);  // not after the previous sample
  EXPECT_THROW(w.write_sample({0, 11, std::nan(""), -1}), InputError);
  EXPECT_THROW(w.write_event({5, 3, 0, 0, true, 0}), InputError);  // undeclared key
  w.write_key({3, "fence", "sync"});
  EXPECT_THROW(w.write_key({3, "fence", "again"}), InputError);
  EXPECT_THROW(w.write_key({4, "a kind,with comma", "x"}), InputError);
  w.write_event({5, 3, 0, 0, true, 0});
  w.flush();
  const Recording r = read_recording(dir.file("run.dooly"));
  EXPECT_EQ(r.channels.size(), 2u);
  EXPECT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.events.size(), 1u);
}

struct BadCase {
  const char* what;
  const char* text;
  const char* where;    // "file:line" suffix expected in the message
  const char* problem;  // a phrase of the message
  const char* fix;      // a phrase of the fix
};

class RecordingReject : public ::testing::TestWithParam<BadCase> {};

TEST_P(RecordingReject, NamesTheLineTheProblemAndTheFix) {
  const BadCase& c = GetParam();
  TempDir dir;
  const std::string path = dir.file("bad.dooly");
  testing::write_file(path, c.text);
  try {
    read_recording(path);
    FAIL() << c.what << ": should throw";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ":" + c.where + ": ", 0), 0u) << what;
    EXPECT_NE(e.problem().find(c.problem), std::string::npos) << what;
    EXPECT_NE(e.fix().find(c.fix), std::string::npos) << what;
  }
}

constexpr const char* kHead = "# dooly-recording v1\nchannel,0,gpu,0,0,0,20000000,gpu0,H200\n";

INSTANTIATE_TEST_SUITE_P(
    Malformed, RecordingReject,
    ::testing::Values(
        BadCase{"bad header", "time,power\n1,2\n", "1", "not a dooly recording", "written by dooly's recorder"},
        BadCase{"empty file", "", "1", "the file is empty", "recorder"},
        BadCase{"wrong version", "# dooly-recording v2\n", "1", "format 'v2' is not supported; this dooly reads",
                "re-record"},
        BadCase{"unknown channel", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\n\n# c\ns,5,100,1.5\n", "5",
                "channel 5 is not declared (1 channel line(s) so far)", "declare every channel"},
        BadCase{"non-numeric time", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,12ab,1.5\n", "3",
                "t_ns is '12ab', not a whole number", "plain integer"},
        BadCase{"non-numeric power", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,12,watts\n", "3",
                "power_w is 'watts', not a finite number", "decimal number"},
        BadCase{"infinite power", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,12,inf\n", "3",
                "power_w is 'inf'", "decimal number"},
        BadCase{"non-monotone time",
                "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,200,1\ns,0,200,2\n", "4",
                "t_ns 200 is not after the previous sample of channel 0 (200)", "strictly increasing"},
        BadCase{"negative window", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,1,2,-3\n", "3",
                "window_ns is '-3', not a whole number >= 0", "plain integer"},
        BadCase{"too few fields", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,1\n", "3",
                "this 's' line has 3 fields", "s,<channel>,<t_ns>,<power_w>[,<window_ns>]"},
        BadCase{"unknown type", "# dooly-recording v1\nx,1,2\n", "2", "unknown record type 'x'",
                "meta, channel, key, s, b, e or c"},
        BadCase{"channel index gap", "# dooly-recording v1\nchannel,1,gpu,0,0,0,0,gpu1,x\n", "2",
                "channel index 1 where 0 was expected", "0, 1, 2"},
        BadCase{"bad domain", "# dooly-recording v1\nchannel,0,tpu,0,0,0,0,tpu0,x\n", "2", "domain is 'tpu'",
                "gpu, cpu, dram, node, other"},
        BadCase{"undeclared key", "# dooly-recording v1\nb,10,4,0,0,0\n", "2", "key 4 is not declared",
                "'key' line before"},
        BadCase{"duplicate key", "# dooly-recording v1\nkey,4,for,a\nkey,4,for,b\n", "3", "key 4 is declared twice",
                "once"},
        BadCase{"counter on unknown channel", "# dooly-recording v1\nc,0,10,5.0\n", "2", "channel 0 is not declared",
                "'channel' line"},
        BadCase{"event field count", "# dooly-recording v1\nkey,1,for,a\ne,10,1,0,0\n", "3",
                "this 'e' line has 5 fields", "e,<t_ns>,<key>,<thread>,<device>,<flags>"},
        // Found by fuzzing `dooly analyze`: each was accepted and then crashed, exhausted memory or overflowed.
        BadCase{"key id 2^32-1 (wrapped the key table: SIGSEGV)", "# dooly-recording v1\nkey,4294967295,for,a\n", "2",
                "the key id is 4294967295, above the format's limit of 16777215", "no larger than 16777215"},
        BadCase{"key id 1e8 (3.8 GB)", "# dooly-recording v1\nkey,100000000,for,a\n", "2",
                "the key id is 100000000, above", "no larger than 16777215"},
        BadCase{"key use above the bound", "# dooly-recording v1\nkey,1,for,a\nb,10,16777216,0,0,1\n", "3",
                "key is 16777216, above", "no larger than"},
        BadCase{"thread 2^31-1 (12.6 GB)", "# dooly-recording v1\nkey,1,for,a\nb,10,1,2147483647,0,1\n", "3",
                "thread is 2147483647, above the format's limit of 65535", "no larger than 65535"},
        BadCase{"device far out", "# dooly-recording v1\nkey,1,for,a\nb,10,1,0,70000,1\n", "3",
                "device is 70000, above", "no larger than 65535"},
        BadCase{"device below -1", "# dooly-recording v1\nkey,1,for,a\nb,10,1,0,-2,1\n", "3",
                "device is '-2', not a whole number >= -1", "plain integer"},
        BadCase{"time INT64_MAX (overflowed)", "# dooly-recording v1\nkey,1,for,a\nb,9223372036854775807,1,0,0,1\n",
                "3", "t_ns is 9223372036854775807, above the format's limit of 4611686018427387903", "no larger"},
        BadCase{"time INT64_MIN (overflowed)", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,-9223372036854775808,1\n",
                "3", "t_ns is '-9223372036854775808', not a whole number >= -4611686018427387903", "plain integer"},
        BadCase{"times further apart than 2^52 ns",
                "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,0,1\ns,0,4503599627370497,1\n", "4",
                "t_ns 4503599627370497 is more than 2^52 ns (52 days) from the recording's other times", "one run per file"},
        BadCase{"window ends before it begins",
                "# dooly-recording v1\nkey,1,for,a\nb,500,1,3,0,1\ne,100,1,3,0,1\n", "4",
                "the window of key 1 on thread 3 ends at t_ns 100, before it begins (500)", "at or after its begin"},
        BadCase{"negative power (a -406 W baseline)", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,1,-406\n",
                "3", "power_w is -406, outside [0, 100000]", "within [0, 100000]"},
        BadCase{"power 1e308", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\ns,0,1,1e308\n", "3",
                "power_w is 1e+308, outside [0, 100000]", "within [0, 100000]"},
        BadCase{"negative energy counter", "# dooly-recording v1\nchannel,0,gpu,0,0,0,0,gpu0,x\nc,0,1,-5\n", "3",
                "energy_j is -5, outside [0, 1000000000000000]", "within"},
        BadCase{"sensor window of a year", "# dooly-recording v1\nchannel,0,gpu,0,31536000000000000,0,0,gpu0,x\n", "2",
                "window_ns is 31536000000000000, above the format's limit of 60000000000", "no larger"},
        BadCase{"non-UTF-8 key name (made --json fail after the table)", "# dooly-recording v1\nkey,1,for,ab\xff\xfe\n",
                "2", "the key name is not valid UTF-8 (byte 3 of it)", "UTF-8"},
        BadCase{"non-UTF-8 meta value", "# dooly-recording v1\nmeta,host,\xc3\n", "2",
                "the meta value is not valid UTF-8", "UTF-8"},
        BadCase{"a line of many commas", "# dooly-recording v1\nkey,1,for,a\nb,1,1,0,0,1,,,,,,,,,,,,,,,,,\n", "3",
                "this 'b' line has more than 6 fields", "b,<t_ns>,<key>,<thread>,<device>,<flags>"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string n = info.param.what;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(Recording, NestingIsBoundedPerThread) {
  // 200,000 nested windows made the attribution run for minutes (quadratic in depth); the format holds 1024
  // open windows per thread.
  std::string text = "# dooly-recording v1\nkey,1,region,r\n";
  for (int i = 0; i < 1025; ++i) text += fmt::format("b,{},1,0,0,1\n", i);
  TempDir dir;
  testing::write_file(dir.file("deep"), text);
  try {
    read_recording(dir.file("deep"));
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.problem()), dir.file("deep") + ":1027: thread 0 would have more than 1024 windows open at once");
    EXPECT_NE(e.fix().find("before opening more than 1024"), std::string::npos);
  }
  // As deep as allowed, closed again, and again: the depth counts what is open now.
  text = "# dooly-recording v1\nkey,1,region,r\n";
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 1024; ++i) text += fmt::format("b,{},1,0,0,1\n", round * 10000 + i);
    for (int i = 1023; i >= 0; --i) text += fmt::format("e,{},1,0,0,1\n", round * 10000 + 5000 - i);
  }
  testing::write_file(dir.file("ok"), text);
  EXPECT_EQ(read_recording(dir.file("ok")).events.size(), 4096u);
}

// A stream whose storage fails after the first bytes (a disk error, a file truncated by another process).
class FailingBuf : public std::streambuf {
 public:
  explicit FailingBuf(std::string head) : head_(std::move(head)) { setg(head_.data(), head_.data(), head_.data() + head_.size()); }

 protected:
  int_type underflow() override { throw std::ios_base::failure("input/output error"); }

 private:
  std::string head_;
};

TEST(Recording, ReadErrorIsReportedNotTakenForTheEnd) {
  // getline stopped at the error as at the end of the file: the run read back shorter, silently.
  FailingBuf buf(std::string(kHead) + "s,0,5,2.5\ns,0,6,2.5\n");
  std::istream in(&buf);
  try {
    read_recording(in, "run.dooly");
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.problem()), "run.dooly:5: reading the file failed after line 4");
    EXPECT_EQ(e.fix(), "check the disk and the file, then run again");
  }
}

TEST(Recording, WriterMakesFreeTextUtf8AndRefusesWhatIsOutOfBounds) {
  TempDir dir;
  RecordingWriter w(dir.file("r"));
  w.write_key({1, "for", "caf\xe9 \xff"});  // Latin-1 bytes
  EXPECT_THROW(w.write_key({2, "f\xe9", "x"}), InputError);  // not free text: refused
  EXPECT_THROW(w.write_key({16777216, "for", "x"}), InputError);
  Channel ch;
  ch.name = "gpu0";
  w.write_channel(ch);
  EXPECT_THROW(w.write_sample({0, 10, -1.0, -1}), InputError);
  EXPECT_THROW(w.write_sample({0, 10, 1e6, -1}), InputError);
  EXPECT_THROW(w.write_sample({0, std::numeric_limits<int64_t>::max(), 1.0, -1}), InputError);
  EXPECT_THROW(w.write_event({10, 1, 1u << 16, 0, true, 1}), InputError);
  EXPECT_THROW(w.write_counter({0, 10, -1.0}), InputError);
  w.flush();
  const Recording r = read_recording(dir.file("r"));
  ASSERT_EQ(r.keys.size(), 1u);
  EXPECT_EQ(r.keys[0].name, "caf\xef\xbf\xbd \xef\xbf\xbd");
}

TEST(RecordedReadings, ReplayReadsThePowerLinesAndSkipsTheEnergyOnes) {
  // Window and key lines are the energy engine's: the readings reader neither parses nor needs them (a 'b'
  // line of an undeclared key passes here and fails in the full reader), but an unknown type still fails.
  const std::string text = std::string(kHead) + "meta,backend,nvml\nkey,1,for,a\nb,5,9,0,0,1\ns,0,5,2.5\nc,0,6,10\n";
  TempDir dir;
  testing::write_file(dir.file("r"), text);
  const RecordedReadings r = read_recorded_readings(dir.file("r"));
  ASSERT_EQ(r.channels.size(), 1u);
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].t_ns, 5);
  ASSERT_EQ(r.counters.size(), 1u);
  EXPECT_DOUBLE_EQ(r.counters[0].energy_j, 10.0);
  EXPECT_EQ(r.meta.at(0).second, "nvml");
  EXPECT_THROW(read_recording(dir.file("r")), InputError);  // key 9 is not declared
  testing::write_file(dir.file("x"), std::string(kHead) + "x,1\n");
  try {
    read_recorded_readings(dir.file("x"));
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.problem()), dir.file("x") + ":3: unknown record type 'x'");
  }
  testing::write_file(dir.file("neg"), std::string(kHead) + "s,0,5,-406\n");
  EXPECT_THROW(read_recorded_readings(dir.file("neg")), InputError);
}

TEST(Recording, UnknownKeyKindIsRefusedAtItsLine) {
  // The kind was checked only by the analysis, in a message without file:line.
  TempDir dir;
  testing::write_file(dir.file("k"), "# dooly-recording v1\nkey,1,kernels,a\n");  // ("kernel" is a kind now)
  try {
    read_recording(dir.file("k"));
    FAIL() << "should throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.problem()), dir.file("k") + ":2: the key kind is 'kernels'");
    EXPECT_NE(e.fix().find("for, reduce, scan, region"), std::string::npos);
  }
}

TEST(Recording, MissingFileIsExplained) {
  TempDir dir;
  try {
    read_recording(dir.file("absent.dooly"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open recording '" + dir.file("absent.dooly") + "'"),
              std::string::npos);
    EXPECT_NE(e.fix().find("DOOLY_REPLAY_FILE"), std::string::npos);
  }
}

TEST(Recording, CommentsBlankLinesAndCrLfAreAccepted) {
  TempDir dir;
  testing::write_file(dir.file("r"), std::string(kHead) + "\r\n# note\r\ns,0,5,2.5\r\n");
  const Recording r = read_recording(dir.file("r"));
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.channels[0].sensor.description, "H200");
  EXPECT_DOUBLE_EQ(r.samples[0].power_w, 2.5);
}

}  // namespace
}  // namespace dooly::power
