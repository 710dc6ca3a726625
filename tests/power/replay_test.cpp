// The replay backend: a recording played back as-is (original stamps, all at once) and in real time.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/replay/recorded_readings.hpp"
#include "dooly/power/replay/replay_provider.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

constexpr int64_t kMs = 1'000'000;

// Two channels, written channel by channel (so out of time order across channels), with counters.
std::string write_two_channel_recording(const TempDir& dir) {
  const std::string path = dir.file("run.dooly");
  testing::write_file(path,
                   "# dooly-recording v1\n"
                   "meta,host,h200\n"
                   "channel,0,gpu,0,0,0,20000000,gpu0,NVIDIA H200: nvmlDeviceGetSamples\n"
                   "channel,1,cpu,0,0,0,1000000,cpu0,RAPL package-0\n"
                   "key,1,for,axpy\n"
                   "s,0,1000000000,120.5\n"
                   "s,0,1020000000,410\n"
                   "s,0,1040000000,415.25\n"
                   "s,1,1010000000,80,10000000\n"
                   "s,1,1030000000,85,20000000\n"
                   "b,1015000000,1,0,0,0\n"
                   "e,1035000000,1,0,0,0\n"
                   "c,0,999000000,5000\n"
                   "c,0,1041000000,5012.5\n");
  return path;
}

TEST(Replay, AsIsReturnsEverySampleAtOnceThenEndsTheRecording) {
  TempDir dir;
  Options o;
  o.path = write_two_channel_recording(dir);
  o.replay_realtime = false;
  auto s = make_replay_provider()->open(o);
  ASSERT_EQ(s->channels().size(), 2u);
  EXPECT_EQ(s->channels()[0].name, "gpu0");
  EXPECT_EQ(s->channels()[0].sensor.update_ns, 20 * kMs);
  EXPECT_EQ(s->channels()[1].domain, Domain::cpu);
  ASSERT_TRUE(s->supports_energy_counter());
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(0), 5000.0);  // before the first poll: the run's start

  std::vector<Reading> r;
  PollStatus st = s->poll(r);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_EQ(r.size(), 5u);
  const std::vector<int64_t> t = {1000000000, 1010000000, 1020000000, 1030000000, 1040000000};
  const std::vector<uint32_t> ch = {0, 1, 0, 1, 0};
  const std::vector<double> w = {120.5, 80, 410, 85, 415.25};
  const std::vector<int64_t> win = {-1, 10000000, -1, 20000000, -1};
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].t_ns, t[i]);
    EXPECT_EQ(r[i].channel, ch[i]);
    EXPECT_DOUBLE_EQ(r[i].power_w, w[i]);
    EXPECT_EQ(r[i].window_ns, win[i]);
  }
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(0), 5012.5);  // after it: the run's end
  EXPECT_FALSE(s->energy_counter_j(1).has_value());

  std::vector<Reading> r2;
  st = s->poll(r2);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(st.fatal);
  EXPECT_NE(st.message.find("end of recording " + o.path + " (5 samples replayed)"), std::string::npos) << st.message;
  EXPECT_TRUE(r2.empty());
}

TEST(Replay, RealtimeShiftsTheFirstSampleToOpenAndReleasesSamplesAsTimePasses) {
  TempDir dir;
  const std::string path = dir.file("rt.dooly");
  testing::write_file(path,
                   "# dooly-recording v1\n"
                   "channel,0,gpu,0,0,0,20000000,gpu0,x\n"
                   "s,0,500000000000,100\n"
                   "s,0,500003000000,200\n"     // +3 ms
                   "s,0,500010000000,300\n"     // +10 ms
                   "s,0,500000000000000,400\n"  // far in the future: never released here
                   "c,0,500000000000,7\n"
                   "c,0,500000000000000,9\n");
  Options o;
  o.path = path;
  o.replay_realtime = true;
  const int64_t before = now_ns();
  auto s = make_replay_provider()->open(o);
  const int64_t after = now_ns();
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(0), 7.0);  // the future reading has not happened yet

  std::vector<Reading> r;
  ASSERT_TRUE(s->poll(r).ok);
  ASSERT_GE(r.size(), 1u);
  EXPECT_GE(r[0].t_ns, before);
  EXPECT_LE(r[0].t_ns, after);
  EXPECT_DOUBLE_EQ(r[0].power_w, 100.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  const int64_t polled_at = now_ns();
  ASSERT_TRUE(s->poll(r).ok);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].t_ns - r[0].t_ns, 3 * kMs);
  EXPECT_EQ(r[2].t_ns - r[0].t_ns, 10 * kMs);
  EXPECT_DOUBLE_EQ(r[2].power_w, 300.0);
  for (const auto& x : r) EXPECT_LE(x.t_ns, polled_at + kMs);
  ASSERT_TRUE(s->poll(r).ok);  // the last sample is due in ~139 hours
  EXPECT_EQ(r.size(), 3u);
}

TEST(Replay, RealtimeEndsAfterTheLastSampleIsReleased) {
  TempDir dir;
  const std::string path = dir.file("short.dooly");
  testing::write_file(path, "# dooly-recording v1\nchannel,0,node,-1,0,0,0,node,x\ns,0,10,1\ns,0,2000010,2\n");
  Options o;
  o.path = path;
  auto s = make_replay_provider()->open(o);
  EXPECT_FALSE(s->supports_energy_counter());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  std::vector<Reading> r;
  ASSERT_TRUE(s->poll(r).ok);
  EXPECT_EQ(r.size(), 2u);
  const PollStatus st = s->poll(r);
  EXPECT_TRUE(st.fatal);
  EXPECT_NE(st.message.find("end of recording"), std::string::npos);
}

TEST(Replay, FileComesFromTheEnvironmentAndIsNeverAutoDetected) {
  TempDir dir;
  auto p = make_replay_provider();
  {
    ScopedEnv none("DOOLY_REPLAY_FILE", nullptr);
    const Probe probe = p->probe(Options{});
    EXPECT_FALSE(probe.available);
    EXPECT_NE(probe.reason.find("never auto-detected"), std::string::npos);
    EXPECT_NE(probe.reason.find("DOOLY_POWER_SOURCE=replay"), std::string::npos);
    try {
      p->open(Options{});
      FAIL();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("no recording given"), std::string::npos);
      EXPECT_NE(e.fix().find("DOOLY_REPLAY_FILE"), std::string::npos);
    }
  }
  const std::string path = write_two_channel_recording(dir);
  ScopedEnv file("DOOLY_REPLAY_FILE", path.c_str());
  EXPECT_FALSE(p->probe(Options{}).available);
  EXPECT_EQ(p->open(Options{})->channels().size(), 2u);

  // A malformed recording is the reader's InputError, naming the line.
  testing::write_file(dir.file("bad"), "# dooly-recording v1\ns,0,1,1\n");
  Options o;
  o.path = dir.file("bad");
  try {
    p->open(o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("bad") + ":2: channel 0 is not declared"), std::string::npos);
  }
  testing::write_file(dir.file("nosamples"), "# dooly-recording v1\nchannel,0,node,-1,0,0,0,node,x\n");
  o.path = dir.file("nosamples");
  EXPECT_THROW(p->open(o), InputError);
}

}  // namespace
}  // namespace dooly::power
