// The rapl backend over the checked-in fixture powercap tree (fixtures/powercap_root), copied to a temporary
// root whose energy_uj files the test rewrites between polls, wraparounds included.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "dooly/common/error.hpp"
#include "dooly/power/rapl/powercap.hpp"
#include "dooly/power/rapl/rapl_provider.hpp"
#include "support/temp_dir.hpp"

namespace dooly::power {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

class RaplTest : public ::testing::Test {
 protected:
  RaplTest() {
    fs::copy(std::string(DOOLY_SOURCE_DIR) + "/tests/power/fixtures/powercap_root", dir_.path(),
             fs::copy_options::recursive);
    options_.root = dir_.path();
  }
  std::string zone(const std::string& id) const { return dir_.path() + "/sys/class/powercap/" + id; }
  void set_energy(const std::string& id, uint64_t uj) { testing::write_file(zone(id) + "/energy_uj", std::to_string(uj) + "\n"); }

  TempDir dir_;
  Options options_;
  std::unique_ptr<Provider> provider_ = make_rapl_provider();
};

// Checks that a reading is exactly the energy moved over its own window.
void expect_power(const Reading& r, uint64_t delta_uj) {
  ASSERT_GT(r.window_ns, 0);
  EXPECT_DOUBLE_EQ(r.power_w, static_cast<double>(delta_uj) * 1e-6 / (static_cast<double>(r.window_ns) * 1e-9));
}

TEST_F(RaplTest, ZonesBecomeNamedChannels) {
  auto s = provider_->open(options_);
  std::vector<std::string> names;
  std::vector<Domain> domains;
  std::vector<int> devices;
  for (const auto& c : s->channels()) {
    names.push_back(c.name);
    domains.push_back(c.domain);
    devices.push_back(c.device);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cpu0", "core0", "dram0", "cpu1", "dram1", "node"}));
  EXPECT_EQ(domains, (std::vector<Domain>{Domain::cpu, Domain::other, Domain::dram, Domain::cpu, Domain::dram,
                                          Domain::node}));
  EXPECT_EQ(devices, (std::vector<int>{0, 0, 0, 1, 1, -1}));
  EXPECT_NE(s->channels()[2].sensor.description.find("RAPL dram (intel-rapl:0:1)"), std::string::npos);
  EXPECT_TRUE(s->supports_energy_counter());

  const Probe p = provider_->probe(options_);
  EXPECT_TRUE(p.available) << p.reason;
  EXPECT_EQ(p.reason, "RAPL zones: cpu0, core0, dram0, cpu1, dram1, node");
}

TEST(RaplCounter, WrapModulusFollowsTheKernelsCounterWidth) {
  EXPECT_EQ(rapl::counter_modulus_uj(261993004995ull), 261993004995ull + 61);  // (2^32-1) x 61 uJ
  EXPECT_EQ(rapl::counter_modulus_uj(262143328850ull), 262143328850ull + 61);  // Intel's 61.035 uJ unit
  EXPECT_EQ(rapl::counter_modulus_uj(1000000), 1000001u);
  EXPECT_EQ(rapl::counter_delta_uj(10, 25, 100), 15u);
  EXPECT_EQ(rapl::counter_delta_uj(90, 5, 100), 15u);
}

TEST_F(RaplTest, PowerIsEnergyOverTheIntervalWithWraparound) {
  auto s = provider_->open(options_);
  set_energy("intel-rapl:0", 1000000 + 2000000);
  set_energy("intel-rapl:0:0", 500000 + 1000000);
  set_energy("intel-rapl:0:1", 500);        // wrapped: 500 + 1000001 - 999000 = 1501 uJ
  set_energy("intel-rapl:1", 5);            // wrapped: 5 + (261993004995 + 61) - 261993004000 = 1061 uJ
  set_energy("intel-rapl:2", 123456);       // psys
  // intel-rapl:1:0 (dram1) unchanged: a stale counter gives no reading
  std::vector<Reading> r;
  PollStatus st = s->poll(r);
  ASSERT_TRUE(st.ok) << st.message;
  std::map<uint32_t, Reading> by;
  for (const auto& x : r) by[x.channel] = x;
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(by.count(4), 0u);
  expect_power(by[0], 2000000);
  expect_power(by[1], 1000000);
  expect_power(by[2], 1501);
  expect_power(by[3], 1061);
  expect_power(by[5], 123456);

  set_energy("intel-rapl:0", 1000000 + 2000000 + 700000);
  set_energy("intel-rapl:0:1", 999999);     // +999499
  set_energy("intel-rapl:1:0", 42);         // dram1 moves: its window covers everything since open
  std::vector<Reading> r2;
  ASSERT_TRUE(s->poll(r2).ok);
  std::map<uint32_t, Reading> by2;
  for (const auto& x : r2) by2[x.channel] = x;
  ASSERT_EQ(r2.size(), 3u);
  expect_power(by2[0], 700000);
  EXPECT_EQ(by2[0].window_ns, by2[0].t_ns - by[0].t_ns);  // back to back, exactly
  expect_power(by2[2], 999499);
  EXPECT_EQ(by2[2].window_ns, by2[2].t_ns - by[2].t_ns);
  expect_power(by2[4], 42);
  EXPECT_GT(by2[4].window_ns, by2[0].window_ns);

  // Accumulated, wrap-corrected joules since open.
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(2), (1501 + 999499) * 1e-6);
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(3), 1061 * 1e-6);
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(0), 2700000 * 1e-6);
  set_energy("intel-rapl:0:1", 3);          // wraps again: 3 + 1000001 - 999999 = 5 uJ
  EXPECT_DOUBLE_EQ(*s->energy_counter_j(2), (1501 + 999499 + 5) * 1e-6);
  std::vector<Reading> r3;
  ASSERT_TRUE(s->poll(r3).ok);
  ASSERT_EQ(r3.size(), 1u);  // the counter read above moved the energy, the reading still spans it
  EXPECT_EQ(r3[0].channel, 2u);
  expect_power(r3[0], 5);
  EXPECT_FALSE(s->energy_counter_j(99).has_value());
}

TEST_F(RaplTest, AmdNamingIsAccepted) {
  fs::remove_all(dir_.path() + "/sys");
  const std::string z = dir_.path() + "/sys/class/powercap/amd-rapl:0";
  fs::create_directories(z);
  testing::write_file(z + "/name", "package-0\n");
  testing::write_file(z + "/energy_uj", "10\n");
  testing::write_file(z + "/max_energy_range_uj", "4294967295\n");
  const std::string die = dir_.path() + "/sys/class/powercap/amd-rapl:1";
  fs::create_directories(die);
  testing::write_file(die + "/name", "package-1-die-0\n");
  testing::write_file(die + "/energy_uj", "10\n");
  testing::write_file(die + "/max_energy_range_uj", "4294967295\n");
  fs::create_directories(dir_.path() + "/sys/class/powercap/amd-rapl-mmio:0");  // not a RAPL zone: ignored
  auto s = provider_->open(options_);
  ASSERT_EQ(s->channels().size(), 2u);
  EXPECT_EQ(s->channels()[0].name, "cpu0");
  EXPECT_EQ(s->channels()[1].name, "cpu1die0");
  EXPECT_EQ(s->channels()[1].device, 1);
}

TEST_F(RaplTest, MissingTreeAndVanishedFilesAreExplained) {
  Options empty;
  TempDir nothing;
  empty.root = nothing.path();
  const Probe p = provider_->probe(empty);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.reason.find("no powercap folder " + nothing.path() + "/sys/class/powercap"), std::string::npos)
      << p.reason;
  EXPECT_NE(p.reason.find("modprobe intel_rapl_msr"), std::string::npos) << p.reason;

  auto s = provider_->open(options_);
  fs::remove(zone("intel-rapl:0:0") + "/energy_uj");
  set_energy("intel-rapl:0", 1000001);
  std::vector<Reading> r;
  PollStatus st = s->poll(r);
  EXPECT_FALSE(st.ok);
  EXPECT_FALSE(st.fatal);
  EXPECT_NE(st.message.find(zone("intel-rapl:0:0") + "/energy_uj"), std::string::npos) << st.message;
  ASSERT_EQ(r.size(), 1u);  // the other zones still read
  EXPECT_EQ(r[0].channel, 0u);

  testing::write_file(zone("intel-rapl:0") + "/max_energy_range_uj", "lots\n");
  try {
    provider_->open(options_);
    FAIL() << "open should throw";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("max_energy_range_uj holds 'lots'"), std::string::npos) << e.what();
  }
}

// energy_uj readable by root only (Linux >= 5.10): the probe must say so and how to fix it. Root reads
// anything, so as root the probe runs in a child that drops to user nobody.
TEST_F(RaplTest, RootOnlyCounterIsExplained) {
  for (auto it = fs::recursive_directory_iterator(dir_.path()); it != fs::recursive_directory_iterator(); ++it)
    fs::permissions(it->path(), it->is_directory() ? fs::perms(0755) : fs::perms(0644));
  fs::permissions(dir_.path(), fs::perms(0755));
  fs::permissions(zone("intel-rapl:0") + "/energy_uj", fs::perms(0400));

  std::string reason;
  bool available = true;
  if (geteuid() != 0) {
    const Probe p = provider_->probe(options_);
    available = p.available;
    reason = p.reason;
    EXPECT_THROW(provider_->open(options_), SourceError);
  } else {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
      const Probe p = provider_->probe(options_);
      const std::string out = std::string(p.available ? "1" : "0") + p.reason;
      if (write(fds[1], out.data(), out.size()) < 0) _exit(3);
      _exit(0);
    }
    close(fds[1]);
    char buf[4096];
    ssize_t n;
    std::string out;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    ASSERT_FALSE(out.empty());
    available = out[0] == '1';
    reason = out.substr(1);
  }
  EXPECT_FALSE(available);
  EXPECT_NE(reason.find(zone("intel-rapl:0") + "/energy_uj: Permission denied"), std::string::npos) << reason;
  EXPECT_NE(reason.find("root-only on Linux >= 5.10"), std::string::npos) << reason;
  EXPECT_NE(reason.find("chmod o+r"), std::string::npos) << reason;
}

}  // namespace
}  // namespace dooly::power
