// MPI ranks end to end: Open MPI's mpirun starts kokkos_app twice with libkp_gpu_energy.so and the replay source;
// each rank writes <prefix>.rank<N>.json and rank 0 the reduced <prefix>.json, .csv and the one table. The
// program does not link MPI: the connector finds its rank in the launcher's environment (energy/ranks.hpp).
// Skipped, saying why, where Open MPI's mpirun is not on PATH (scripts/setup.sh installs openmpi-bin).
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
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

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// Runs argv[0] (a full path) as tests/support/spawn.hpp does; stdout and stderr go to files in dir.
RunResult run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
              const fs::path& dir) {
  return dooly::testing::spawn_program(args, env, dir);
}

// Open MPI's mpirun on PATH, or empty.
std::string find_mpirun() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / "mpirun";
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return {};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

const json* region(const json& channel, const std::string& name) {
  for (const json& r : channel.at("regions"))
    if (r.at("name") == name) return &r;
  return nullptr;
}

std::string hostname() {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  return host;
}

class MpiRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    mpirun_ = find_mpirun();
    if (mpirun_.empty())
      GTEST_SKIP() << "mpirun is not on PATH: install Open MPI (apt-get install openmpi-bin; scripts/setup.sh does) "
                      "to run the MPI ranks test";
    dir_ = fs::path(DOOLY_BINARY_DIR) / "tests" / "kokkos" /
           (std::string("ranks_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const RunResult v = run({mpirun_, "--version"}, {}, dir_);
    if (v.out.find("Open MPI") == std::string::npos && v.err.find("Open MPI") == std::string::npos)
      GTEST_SKIP() << mpirun_ << " is not Open MPI's (it says: " << v.out << v.err
                   << "); this test drives Open MPI's mpirun";
    env_ = {{"KOKKOS_PROFILE_LIBRARY", KP_LIBRARY},  // Kokkos 3.x
            {"KOKKOS_TOOLS_LIBS", KP_LIBRARY},       // Kokkos 4.x
            {"DOOLY_POWER_SOURCE", "replay"},
            {"DOOLY_REPLAY_FILE", std::string(DOOLY_SOURCE_DIR) + "/tests/kokkos/data/square_150w.recording"},
            {"DOOLY_PERIOD_MS", "5"},
            {"DOOLY_OUTPUT", (dir_ / "run").string()},
            {"DOOLY_RANKS_WAIT_S", "60"},
            // As root (containers, CI), on two cores, and on one host without ssh.
            {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
            {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
            {"OMPI_MCA_plm", "isolated"},
            {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};
  }

  // mpirun -np 2 sh -c SCRIPT kokkos_app 4 200000: SCRIPT sets what differs per rank, then execs the program.
  RunResult run_ranks(const std::string& script) {
    return run({mpirun_, "-np", "2", "/bin/sh", "-c", script + "\nexec \"$0\" \"$@\"", KOKKOS_APP, "4", "200000"}, env_,
               dir_);
  }

  // The reduced report's sums are the ranks' files' sums, row by row.
  void expect_sums_of_rank_files(const json& reduced) {
    const json r0 = read_json(dir_ / "run.rank0.json"), r1 = read_json(dir_ / "run.rank1.json");
    const json& ch = reduced.at("channels")[0];
    for (const json& row : ch.at("regions")) {
      const std::string name = row.at("name");
      double calls = 0, energy = 0, time = 0;
      for (const json* rank : {&r0, &r1}) {
        const json* x = region(rank->at("channels")[0], name);
        if (!x) continue;
        calls += x->at("calls").get<double>();
        energy += x->at("energy_j").get<double>();
        time += x->at("time_s").get<double>();
      }
      EXPECT_EQ(row.at("calls").at("sum").get<double>(), calls) << name;
      EXPECT_NEAR(row.at("energy_j").at("sum").get<double>(), energy, 1e-9 * std::max(1.0, energy)) << name;
      EXPECT_NEAR(row.at("time_s").at("sum").get<double>(), time, 1e-12 * std::max(1.0, time)) << name;
    }
  }

  std::string mpirun_;
  fs::path dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(MpiRanks, TwoRanksOnTheirOwnGpusReduceToOneReport) {
  const RunResult r = run_ranks("export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_RANK");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, " ok\n"), 2u) << r.out;  // both ranks ran the program
  // One table, rank 0's reduced one; no rank prints its own.
  EXPECT_EQ(count(r.out, "dooly: 2 of 2 ranks reduced (Open MPI, job "), 1u) << r.out;
  EXPECT_EQ(count(r.out, "dooly: gpu0 [gpu]"), 1u) << r.out;
  EXPECT_NE(r.out.find("dooly: gpu0 [gpu] over ranks 0,1 -- "), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("dooly:"), std::string::npos) << r.err;

  ASSERT_TRUE(fs::exists(dir_ / "run.rank0.json")) << r.err;
  ASSERT_TRUE(fs::exists(dir_ / "run.rank1.json")) << r.err;
  EXPECT_EQ(read_text(dir_ / "run.csv").rfind("# dooly-ranks-csv v1\n", 0), 0u);
  const json j = read_json(dir_ / "run.json");
  EXPECT_EQ(j.at("kind"), "ranks");
  EXPECT_EQ(j.at("launcher"), "Open MPI");
  EXPECT_EQ(j.at("size"), 2);
  EXPECT_EQ(j.at("ranks_present"), json({0, 1}));
  EXPECT_EQ(j.at("ranks_missing"), json::array());
  // Each rank's file names its rank and the job both share.
  const json r0 = read_json(dir_ / "run.rank0.json"), r1 = read_json(dir_ / "run.rank1.json");
  EXPECT_EQ(r0.at("rank").at("rank"), 0);
  EXPECT_EQ(r1.at("rank").at("rank"), 1);
  EXPECT_EQ(r1.at("rank").at("local_rank"), 1);
  EXPECT_EQ(r0.at("rank").at("job"), j.at("job"));
  EXPECT_EQ(r1.at("rank").at("job"), j.at("job"));

  // Two GPUs (CUDA_VISIBLE_DEVICES 0 and 1 on one host), neither shared: both run energies count.
  const std::string host = hostname();
  ASSERT_EQ(j.at("devices").size(), 2u);
  std::set<std::string> ids;
  for (const json& d : j.at("devices")) {
    ids.insert(d.at("id").get<std::string>());
    EXPECT_FALSE(d.at("shared").get<bool>());
  }
  EXPECT_EQ(ids, (std::set<std::string>{host + "/gpu:0", host + "/gpu:1"}));
  const json& ch = j.at("channels")[0];
  EXPECT_NEAR(ch.at("run_energy_j").get<double>(),
              r0.at("channels")[0].at("conservation").at("run_energy_j").get<double>() +
                  r1.at("channels")[0].at("conservation").at("run_energy_j").get<double>(),
              1e-6);
  // Every kernel and region of both ranks, with the calls of both.
  for (const auto& [name, calls] : std::map<std::string, int>{
           {"axpy", 8}, {"dot", 8}, {"prefix", 8}, {"iteration", 8}, {"solve", 2}, {"fill", 2}}) {
    const json* row = region(ch, name);
    ASSERT_NE(row, nullptr) << name << " in " << ch.at("regions").dump();
    EXPECT_EQ(row->at("calls").at("sum"), calls) << name;
    EXPECT_EQ(row->at("ranks_with_row"), 2) << name;
    EXPECT_EQ(row->at("per_rank").size(), 2u) << name;
    EXPECT_FALSE(row->at("shared_device").get<bool>()) << name;
    EXPECT_GT(row->at("energy_j").at("min").get<double>(), 0.0) << name;
  }
  expect_sums_of_rank_files(j);

#ifdef DOOLY_CLI
  // `dooly ranks` reduces the same files later to the same figures.
  const RunResult m = run({DOOLY_CLI, "ranks", (dir_ / "run").string(), "--out", (dir_ / "merged").string()}, {}, dir_);
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_NE(m.out.find("dooly: 2 of 2 ranks reduced (Open MPI, job "), std::string::npos) << m.out;
  json merged = read_json(dir_ / "merged.json");
  json live = j;
  merged.erase("waited_s");
  live.erase("waited_s");
  EXPECT_EQ(merged, live);
#endif
}

TEST_F(MpiRanks, RanksSharingAGpuCountItOnce) {
  env_["DOOLY_RECORD"] = (dir_ / "run.recording").string();  // one per rank: run.rank<N>.recording
  const RunResult r = run_ranks(":");                        // no CUDA_VISIBLE_DEVICES: both ranks measure GPU 0
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "dooly: 2 of 2 ranks reduced"), 1u) << r.out;
  EXPECT_NE(r.out.find("device " + hostname() + "/gpu:0: shared by ranks 0,1; counted once, from rank "),
            std::string::npos)
      << r.out;
  const json j = read_json(dir_ / "run.json");
  ASSERT_EQ(j.at("devices").size(), 1u);
  const json& d = j.at("devices")[0];
  EXPECT_TRUE(d.at("shared").get<bool>());
  EXPECT_EQ(d.at("ranks"), json({0, 1}));
  // Counted once: the run energy of the rank that measured longest, not the sum of both.
  const json r0 = read_json(dir_ / "run.rank0.json"), r1 = read_json(dir_ / "run.rank1.json");
  const int counted = d.at("counted_rank");
  const json& counted_file = counted == 0 ? r0 : r1;
  const json& other_file = counted == 0 ? r1 : r0;
  const double counted_run = counted_file.at("channels")[0].at("conservation").at("run_energy_j").get<double>();
  const double other_run = other_file.at("channels")[0].at("conservation").at("run_energy_j").get<double>();
  EXPECT_GE(counted_file.at("channels")[0].at("run_time_s").get<double>(),
            other_file.at("channels")[0].at("run_time_s").get<double>());
  EXPECT_DOUBLE_EQ(d.at("run_energy_j").get<double>(), counted_run);
  const json& ch = j.at("channels")[0];
  EXPECT_DOUBLE_EQ(ch.at("run_energy_j").get<double>(), counted_run);
  // Not the sum: the other rank measured energy too (how much depends on how long it ran: its share of a loaded
  // machine's time, under a joule on a busy CI host).
  EXPECT_GT(other_run, 0.0);
  EXPECT_LT(ch.at("run_energy_j").get<double>(), counted_run + 0.5 * other_run);
  // The rows are each rank's own attribution, summed and flagged.
  const json* axpy = region(ch, "axpy");
  ASSERT_NE(axpy, nullptr);
  EXPECT_TRUE(axpy->at("shared_device").get<bool>());
  EXPECT_EQ(axpy->at("calls").at("sum"), 8);
  expect_sums_of_rank_files(j);

  // Every rank recorded, each to its own file: the shared GPU can be attributed once with both ranks' windows.
  ASSERT_TRUE(fs::exists(dir_ / "run.rank0.recording"));
  ASSERT_TRUE(fs::exists(dir_ / "run.rank1.recording"));
  EXPECT_FALSE(fs::exists(dir_ / "run.recording"));
#ifdef DOOLY_CLI
  const RunResult m =
      run({DOOLY_CLI, "ranks", (dir_ / "run").string(), "--joint", "--out", (dir_ / "joint").string()}, {}, dir_);
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_NE(m.out.find("shared by ranks 0,1; attributed once with all their windows against rank "), std::string::npos)
      << m.out;
  const json jj = read_json(dir_ / "joint.json");
  EXPECT_TRUE(jj.at("devices")[0].at("joint").get<bool>());
  EXPECT_EQ(jj.at("joint_skipped"), json::array());
  const json* jaxpy = region(jj.at("channels")[0], "axpy");
  ASSERT_NE(jaxpy, nullptr);
  EXPECT_TRUE(jaxpy->at("joint").get<bool>());
  EXPECT_EQ(jaxpy->at("calls").at("sum"), 8);  // every rank's windows, each once
  EXPECT_EQ(jaxpy->at("per_rank").size(), 2u);
#endif
}

TEST_F(MpiRanks, ARankThatNeverReportsIsNamed) {
  env_["DOOLY_RANKS_WAIT_S"] = "1";
  // Rank 1 writes no files (DOOLY_OUTPUT=none: each process on its own, no table).
  const RunResult r =
      run_ranks("if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then export DOOLY_OUTPUT=none DOOLY_TABLE=0; fi");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, " ok\n"), 2u) << r.out;
  EXPECT_NE(r.out.find("dooly: 1 of 2 ranks reduced (Open MPI, job "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank(s) 1 did not report (no fresh file within "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("dooly: rank(s) 1 wrote no " + (dir_ / "run").string() + ".rank<N>.json of this run within"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "run.rank1.json"));
  const json j = read_json(dir_ / "run.json");
  EXPECT_EQ(j.at("ranks_present"), json::array({0}));
  EXPECT_EQ(j.at("ranks_missing"), json({1}));
  EXPECT_EQ(region(j.at("channels")[0], "axpy")->at("calls").at("sum"), 4);
}

}  // namespace
