// libkp_gpu_energy.so loaded by a real Kokkos runtime (Debian's Trilinos Kokkos in CI): the test launches
// kokkos_app with KOKKOS_PROFILE_LIBRARY / KOKKOS_TOOLS_LIBS pointing at the connector and a recorded power
// trace replayed in real time, then checks the JSON report, the program's own output and the exit status.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/spawn.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using RunResult = dooly::testing::Spawned;
using dooly::testing::read_text;

// Runs the Kokkos program as tests/support/spawn.hpp does (no DOOLY_/Kokkos-tools variable of ours), plus `env`.
RunResult run_app(const std::map<std::string, std::string>& env, const std::vector<std::string>& args,
                  const fs::path& dir) {
  std::vector<std::string> argv = {KOKKOS_APP};
  argv.insert(argv.end(), args.begin(), args.end());
  return dooly::testing::spawn_program(argv, env, dir);
}

std::vector<std::string> dooly_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("dooly:", 0) == 0) lines.push_back(line);
  return lines;
}

const json* region(const json& channel, const std::string& name) {
  for (const json& r : channel.at("regions"))
    if (r.at("name") == name) return &r;
  return nullptr;
}

class KokkosRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(DOOLY_BINARY_DIR) / "tests" / "kokkos" /
           (std::string("runtime_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    env_ = {{"KOKKOS_PROFILE_LIBRARY", KP_LIBRARY},  // Kokkos 3.x
            {"KOKKOS_TOOLS_LIBS", KP_LIBRARY},       // Kokkos 4.x
            {"DOOLY_POWER_SOURCE", "replay"},
            {"DOOLY_REPLAY_FILE", std::string(DOOLY_SOURCE_DIR) + "/tests/kokkos/data/square_150w.recording"},
            {"DOOLY_PERIOD_MS", "5"},
            {"DOOLY_OUTPUT", (dir_ / "run").string()}};
  }
  fs::path dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(KokkosRuntime, ConnectorReportsEveryKernelRegionSectionAndCopyWithExactCalls) {
  const RunResult r = run_app(env_, {"8", "2000000"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("kokkos_app: iterations=8 n=2000000 dot="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ok\n"), std::string::npos) << r.out;
  EXPECT_TRUE(dooly_lines(r.err).empty()) << r.err;  // a clean run says nothing on stderr
  // The table goes to stdout after the program's own output.
  const size_t table = r.out.find("dooly: gpu0 [gpu]");
  ASSERT_NE(table, std::string::npos) << r.out;
  EXPECT_GT(table, r.out.find("kokkos_app:"));

  ASSERT_TRUE(fs::exists(dir_ / "run.csv"));
  EXPECT_EQ(read_text(dir_ / "run.csv").rfind("# dooly-energy-csv v3\n", 0), 0u);
  std::ifstream in(dir_ / "run.json");
  ASSERT_TRUE(in.good());
  const json j = json::parse(in);
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(j.at("tool"), "dooly");
  EXPECT_EQ(j.at("backend"), "replay");
  EXPECT_EQ(j.at("events_dropped"), 0);
  EXPECT_EQ(j.at("unmatched_events"), 0);
  ASSERT_EQ(j.at("channels").size(), 1u);
  const json& ch = j.at("channels")[0];
  EXPECT_EQ(ch.at("name"), "gpu0");

  const std::map<std::string, std::pair<std::string, int>> expected = {
      {"fill", {"for", 1}},       {"axpy", {"for", 8}},         {"dot", {"reduce", 8}},
      {"prefix", {"scan", 8}},    {"solve", {"region", 1}},     {"iteration", {"region", 8}},
      {"checkpoint_section", {"section", 1}}};
  for (const auto& [name, kind_calls] : expected) {
    const json* row = region(ch, name);
    ASSERT_NE(row, nullptr) << "no row " << name << " in " << ch.at("regions").dump();
    EXPECT_EQ(row->at("kind"), kind_calls.first) << name;
    EXPECT_EQ(row->at("calls"), kind_calls.second) << name;
    EXPECT_GT(row->at("time_s").get<double>(), 0.0) << name;
    EXPECT_GT(row->at("energy_j").get<double>(), 0.0) << name;
    // The replayed trace lies between 130 and 170 W: every average must too.
    EXPECT_GE(row->at("avg_power_w").get<double>(), 130.0 - 1e-6) << name;
    EXPECT_LE(row->at("avg_power_w").get<double>(), 170.0 + 1e-6) << name;
    // Every window but the last (the section, which ends just before finalize) lies inside the readings.
    if (name != "checkpoint_section") {
      EXPECT_EQ(row->at("extrapolated_windows"), 0) << name;
    }
  }
  // Inclusive nesting: the solve region holds every iteration.
  EXPECT_GE(region(ch, "solve")->at("time_s").get<double>(), region(ch, "iteration")->at("time_s").get<double>());
  // One deep copy, named after both ends (Kokkos names the spaces; the labels are the views').
  int copies = 0;
  for (const json& row : ch.at("regions"))
    if (row.at("kind") == "copy") {
      ++copies;
      const std::string name = row.at("name");
      EXPECT_EQ(name.rfind("deep_copy Host:", 0), 0u) << name;
      EXPECT_NE(name.find(" <- Host:y"), std::string::npos) << name;
      EXPECT_EQ(row.at("calls"), 1) << name;
    }
  EXPECT_EQ(copies, 1) << ch.at("regions").dump();

  const json& meta = j.at("meta");
  EXPECT_EQ(meta.at("kokkos.problem_size"), "2000000");
  EXPECT_EQ(meta.at("kokkos.event.checkpoint"), "1");
  // The real runtime has Tools::Experimental::set_{begin,end}_fence_callback: the connector took its fence
  // hooks out at init (fences get no rows by default).
  EXPECT_EQ(meta.at("kokkos.fence_hooks"), "removed at init") << meta;
  EXPECT_GE(std::stoll(meta.at("kokkos.peak_bytes.Host").get<std::string>()), 4 * 2000000 * 8);
  EXPECT_TRUE(meta.contains("sampler_cpu_s"));

  // The recording's energy counter brackets the run: conservation is reported against it.
  EXPECT_FALSE(ch.at("conservation").at("counter_delta_j").is_null());
}

TEST_F(KokkosRuntime, WithFenceRowsTheFenceHooksStay) {
  std::map<std::string, std::string> env = env_;
  env["DOOLY_FENCES"] = "1";
  const RunResult r = run_app(env, {"8", "2000000"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(dir_ / "run.json");
  ASSERT_TRUE(in.good()) << r.err;
  const json j = json::parse(in);
  EXPECT_EQ(j.at("meta").at("kokkos.fence_hooks"), "rows (DOOLY_FENCES=1)");
  // Kokkos 4 reports every Kokkos::fence() to the tool (the program fences 8 times); 3.4 does not call the
  // fence hooks for them.
  uint64_t fence_calls = 0;
  for (const json& row : j.at("channels")[0].at("regions"))
    if (row.at("kind") == "fence") fence_calls += row.at("calls").get<uint64_t>();
  EXPECT_GE(fence_calls, KOKKOS_APP_MAJOR >= 4 ? 8u : 0u);
  EXPECT_NE(region(j.at("channels")[0], "axpy"), nullptr);
}

TEST_F(KokkosRuntime, MalformedPeriodPrintsOneLineAndTheProgramRunsOn) {
  env_["DOOLY_PERIOD_MS"] = "fast";
  const RunResult r = run_app(env_, {"3", "1000"}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("kokkos_app: iterations=3 n=1000 dot="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ok\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("dooly:"), std::string::npos) << r.out;  // no table
  const auto lines = dooly_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("DOOLY_PERIOD_MS='fast'"), std::string::npos) << lines[0];
  EXPECT_FALSE(fs::exists(dir_ / "run.json"));
}

TEST_F(KokkosRuntime, MalformedRecordingPrintsOneLineNamingTheFileAndTheProgramRunsOn) {
  const fs::path bad = dir_ / "bad.recording";
  std::ofstream(bad) << "# dooly-recording v1\nchannel,0,gpu,0,0,0,10000000,gpu0,x\ns,0,banana,100\n";
  env_["DOOLY_REPLAY_FILE"] = bad.string();
  const RunResult r = run_app(env_, {"2", "1000"}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" ok\n"), std::string::npos) << r.out;
  const auto lines = dooly_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find(bad.string()), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("program runs on"), std::string::npos) << lines[0];
  EXPECT_FALSE(fs::exists(dir_ / "run.json"));
}

// Kokkos calls the tool's init before its parse_args (3.4: once; 4.x: twice): arguments that the measurement
// needs at its start (mode, period, log level) must still take effect.
TEST_F(KokkosRuntime, ToolArgumentsOnTheCommandLineTakeEffect) {
  const RunResult r = run_app(env_, {"3", "1000", "--kokkos-tools-args=mode=trapezoid period_ms=7 log=info"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("kokkos_app: iterations=3 n=1000 dot="), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("dooly: measuring gpu0 through replay every 7 ms\n"), std::string::npos) << r.err;
  std::ifstream in(dir_ / "run.json");
  ASSERT_TRUE(in.good()) << r.err;
  const json j = json::parse(in);
  EXPECT_EQ(j.at("mode"), "trapezoid");
  EXPECT_EQ(j.at("meta").at("sampler_period_ms"), "7");
  EXPECT_EQ(region(j.at("channels")[0], "axpy")->at("calls"), 3);
}

#if KOKKOS_APP_MAJOR >= 4
TEST_F(KokkosRuntime, KokkosToolsArgsTakeEffect) {  // Kokkos 3.4 does not read KOKKOS_TOOLS_ARGS
  env_["KOKKOS_TOOLS_ARGS"] = "mode=trapezoid period_ms=7";
  const RunResult r = run_app(env_, {"3", "1000"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(dooly_lines(r.err).empty()) << r.err;
  std::ifstream in(dir_ / "run.json");
  ASSERT_TRUE(in.good()) << r.err;
  const json j = json::parse(in);
  EXPECT_EQ(j.at("mode"), "trapezoid");
  EXPECT_EQ(j.at("meta").at("sampler_period_ms"), "7");
}
#endif

TEST_F(KokkosRuntime, UnknownToolArgumentIsOneLineAndNothingIsMeasured) {
  const RunResult r = run_app(env_, {"2", "1000", "--kokkos-tools-args=colour=blue"}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" ok\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("dooly:"), std::string::npos) << r.out;  // no table
  EXPECT_EQ(dooly_lines(r.err),
            std::vector<std::string>{"dooly: unknown tool argument 'colour' — see the list of settings with "
                                     "--kokkos-tools-help -- energy measurement is off for this run"})
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "run.json"));
}

TEST_F(KokkosRuntime, HelpPrintsTheSettingsAndNothingElse) {
  // A power source that cannot be opened: asking for help must not try it.
  env_["DOOLY_POWER_SOURCE"] = "nvml";
  env_["DOOLY_NVML_LIBRARY"] = (dir_ / "no-such-libnvidia-ml.so.1").string();
  const RunResult r = run_app(env_, {"--kokkos-tools-help"}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("dooly (libkp_gpu_energy.so): energy per Kokkos kernel and region.\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\n  PERIOD_MS "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("kokkos_app:"), std::string::npos) << r.out;  // Kokkos exits after the help
  EXPECT_TRUE(dooly_lines(r.err).empty()) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "run.json"));
}

#ifdef KP_TIMING_SHIM
// bench/kp_timing_shim.cpp, the per-hook timer used for the overhead figures on the GPU: around dooly it must
// forward every hook (dooly's report is exactly what it is without the shim) and count the program's kernels;
// around the empty tool it measures the floor per call; without an inner tool the program runs on.
std::map<std::string, std::string> shim_line(const std::string& text) {
  std::map<std::string, std::string> fields;
  const size_t at = text.find("kp_timing_shim inner=");
  if (at == std::string::npos) return fields;
  std::istringstream in(text.substr(at, text.find('\n', at) - at));
  for (std::string word; in >> word;)
    if (const size_t eq = word.find('='); eq != std::string::npos) {
      fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
  return fields;
}

TEST_F(KokkosRuntime, TimingShimForwardsEveryHookAndTimesTheInnerTool) {
  std::map<std::string, std::string> env = env_;
  env["KOKKOS_PROFILE_LIBRARY"] = env["KOKKOS_TOOLS_LIBS"] = KP_TIMING_SHIM;
  env["KP_SHIM_INNER"] = KP_LIBRARY;
  env["KP_SHIM_OUT"] = (dir_ / "shim.txt").string();
  const RunResult r = run_app(env, {"8", "2000000"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // dooly behind the shim: every kernel, region and section with its exact calls.
  std::ifstream in(dir_ / "run.json");
  ASSERT_TRUE(in.good()) << r.err;
  const json j = json::parse(in);
  const json& ch = j.at("channels")[0];
  for (const auto& [name, calls] : std::map<std::string, int>{
           {"fill", 1}, {"axpy", 8}, {"dot", 8}, {"prefix", 8}, {"solve", 1}, {"iteration", 8}, {"checkpoint_section", 1}}) {
    const json* row = region(ch, name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(row->at("calls"), calls) << name;
  }
  // The shim's line, on stderr and in KP_SHIM_OUT: as many kernels as dooly's kernel rows have calls (the
  // program's 25 and Kokkos's own View initialisations), each a timed begin and end, plus the regions' pushes
  // and pops and the section's start and stop.
  uint64_t kernel_calls = 0;
  for (const json& row : ch.at("regions"))
    if (row.at("kind") == "for" || row.at("kind") == "reduce" || row.at("kind") == "scan") {
      kernel_calls += row.at("calls").get<uint64_t>();
    }
  EXPECT_GE(kernel_calls, 25u);
  const auto f = shim_line(read_text(dir_ / "shim.txt"));
  ASSERT_FALSE(f.empty()) << r.err;
  EXPECT_EQ(f.at("inner"), fs::path(KP_LIBRARY).filename().string());
  EXPECT_EQ(std::stoull(f.at("kernels")), kernel_calls);
  EXPECT_GE(std::stoull(f.at("hook_calls")), kernel_calls * 2 + 9 * 2 + 2);
  EXPECT_GT(std::stod(f.at("ns_per_kernel")), 0.0);
  EXPECT_EQ(shim_line(r.err), f);

  // The empty tool: the floor, per timed call; the first 10 kernels left out as a warm-up.
  env["KP_SHIM_INNER"] = KP_EMPTY_TOOL;
  env["KP_SHIM_OUT"] = (dir_ / "shim_empty.txt").string();
  env["KP_SHIM_SKIP_KERNELS"] = "10";
  const RunResult e = run_app(env, {"8", "2000000"}, dir_);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto fe = shim_line(read_text(dir_ / "shim_empty.txt"));
  ASSERT_FALSE(fe.empty()) << e.err;
  EXPECT_EQ(std::stoull(fe.at("kernels")), kernel_calls - 10);
  EXPECT_EQ(std::stoull(fe.at("hook_calls")), 2 * (kernel_calls - 10));  // the empty tool has kernel hooks only
  EXPECT_GT(std::stod(fe.at("ns_per_call")), 0.0);

  // No inner tool: one line saying what to set, and the program runs on.
  env.erase("KP_SHIM_INNER");
  const RunResult n = run_app(env, {"2", "1000"}, dir_);
  EXPECT_EQ(n.exit_code, 0) << n.err;
  EXPECT_NE(n.err.find("kp_timing_shim: set KP_SHIM_INNER"), std::string::npos) << n.err;
}
#endif

}  // namespace
