// MPI ranks without MPI (energy/ranks.hpp, rank_reduce.hpp, rank_writers.hpp, rank_outputs.hpp): the launcher's
// rank read from the environment, device ids across ranks, the reduction (sums, least / mean / largest per rank,
// a shared device counted once), the rank file both ways, and the rendezvous through files with its wait, its
// missing ranks and the files of other runs. The reduced table has a golden; regenerate after an intended change:
//   DOOLY_UPDATE_GOLDEN=1 build/default/tests/energy/energy_ranks_test   (then review the diff)
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/energy/rank_outputs.hpp"
#include "dooly/energy/rank_reattribute.hpp"
#include "dooly/energy/rank_reduce.hpp"
#include "dooly/energy/rank_writers.hpp"
#include "dooly/energy/ranks.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/energy/recording_analysis.hpp"
#include "support/temp_dir.hpp"

namespace dooly::energy {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kGolden = std::string(DOOLY_SOURCE_DIR) + "/tests/energy/golden/";

std::optional<RankInfo> detect(const std::map<std::string, std::string>& vars) {
  return detect_rank(
      [&](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      "node7", 1'000);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RankDetection, NoLauncherIsASingleProcess) {
  EXPECT_FALSE(detect({}));
  EXPECT_FALSE(detect({{"CUDA_VISIBLE_DEVICES", "1"}, {"HOSTNAME", "x"}}));
}

TEST(RankDetection, OpenMpiGivesRankSizeLocalRankAndJob) {
  const auto r = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_MCA_ess_base_jobid", "256049153"},
                         {"CUDA_VISIBLE_DEVICES", "1"},
                         // Open MPI sets PMIx's too, and may run inside a Slurm step: its own come first.
                         {"PMIX_RANK", "3"},
                         {"SLURM_PROCID", "0"},
                         {"SLURM_STEP_NUM_TASKS", "1"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->size, 4);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->launcher, "Open MPI");
  EXPECT_EQ(r->job, "256049153");
  EXPECT_EQ(r->host, "node7");
  EXPECT_EQ(r->cuda_visible_devices, "1");
  EXPECT_EQ(r->start_unix_ns, 1'000);
}

TEST(RankDetection, EachLauncherIsRead) {
  auto mpich = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}});
  ASSERT_TRUE(mpich);
  EXPECT_EQ(mpich->launcher, "MPICH/Intel MPI");
  EXPECT_EQ(mpich->rank, 1);
  EXPECT_EQ(mpich->size, 2);
  EXPECT_EQ(mpich->local_rank, 1);
  EXPECT_EQ(mpich->job, "");

  auto mv = detect({{"MV2_COMM_WORLD_RANK", "0"}, {"MV2_COMM_WORLD_SIZE", "8"}});
  ASSERT_TRUE(mv);
  EXPECT_EQ(mv->launcher, "MVAPICH2");
  EXPECT_EQ(mv->size, 8);
  EXPECT_EQ(mv->local_rank, -1);

  auto srun = detect({{"SLURM_PROCID", "5"},
                      {"SLURM_STEP_NUM_TASKS", "6"},
                      {"SLURM_NTASKS", "6"},
                      {"SLURM_LOCALID", "2"},
                      {"SLURM_JOB_ID", "4711"},
                      {"SLURM_STEP_ID", "0"}});
  ASSERT_TRUE(srun);
  EXPECT_EQ(srun->launcher, "Slurm");
  EXPECT_EQ(srun->rank, 5);
  EXPECT_EQ(srun->local_rank, 2);
  EXPECT_EQ(srun->job, "4711.0");

  auto pmix = detect({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "prterun-x-1@1"}});
  ASSERT_TRUE(pmix);
  EXPECT_EQ(pmix->launcher, "PMIx");
  EXPECT_EQ(pmix->size, 0);  // PMIx does not say how many
  EXPECT_EQ(pmix->job, "prterun-x-1@1");
}

TEST(RankDetection, ABatchScriptAndAJobOfOneRankAreSingleProcesses) {
  // sbatch --ntasks=4 gives the batch script SLURM_PROCID=0 and SLURM_NTASKS=4, but it is one process.
  EXPECT_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "9"}}));
  EXPECT_FALSE(detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}));
}

TEST(RankDetection, MalformedVariablesNameThemAndTheWayOut) {
  EXPECT_EQ(error_of([] {
              detect({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
            }),
            "OMPI_COMM_WORLD_RANK='x' (set by Open MPI) is not a rank, a whole number from 0 — set DOOLY_RANKS=off "
            "to have each process report alone");
  EXPECT_EQ(error_of([] {
              detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}});
            }),
            "PMI_RANK='2' and PMI_SIZE='2' (set by MPICH/Intel MPI) are not a rank and a number of ranks — set "
            "DOOLY_RANKS=off to have each process report alone");
}

TEST(RankPaths, PerRankNamesAndTheSharedDefaultPrefix) {
  EXPECT_EQ(rank_file_path("out/run", 3), "out/run.rank3.json");
  EXPECT_EQ(per_rank_path("out/run.recording", 2), "out/run.rank2.recording");
  EXPECT_EQ(per_rank_path("out.d/trace", 2), "out.d/trace.rank2");
  EXPECT_EQ(per_rank_path(".hidden", 1), ".hidden.rank1");
  RankInfo r;
  r.job = "4711.0";
  EXPECT_EQ(default_output_prefix(r), "dooly-energy-4711.0");
  r.job = "prterun-x@1";
  EXPECT_EQ(default_output_prefix(r), "dooly-energy-prterun-x_1");
  r.job.clear();
  EXPECT_EQ(default_output_prefix(r), "dooly-energy-ranks");
  EXPECT_EQ(default_output_prefix(std::nullopt).rfind("dooly-energy-", 0), 0u);
  EXPECT_NE(default_output_prefix(std::nullopt), "dooly-energy-ranks");
}

power::Channel gpu(int ordinal, std::string description = "test") {
  power::Channel c;
  c.name = "gpu" + std::to_string(ordinal);
  c.domain = power::Domain::gpu;
  c.device = ordinal;
  c.sensor.description = std::move(description);
  return c;
}

TEST(DeviceIds, SameDeviceSameIdAcrossRanks) {
  // NVML's description names the bus; NVML's 8-digit domain and CUDA's 4-digit one are the same bus.
  EXPECT_EQ(device_id(gpu(0, "NVIDIA H200 [PCI 00000000:1A:00.0]: nvmlDeviceGetSamples"), "n1", ""),
            "n1/pci:0000:1a:00.0");
  EXPECT_EQ(device_id(gpu(1, "NVIDIA H200 [PCI 0000:1a:00.0]: x"), "n1", "3"), "n1/pci:0000:1a:00.0");
  EXPECT_EQ(device_id(gpu(0, "NVIDIA H200 [PCI ?]: x"), "n1", ""), "n1/gpu:0");
  // Without a bus id: the ordinal through CUDA_VISIBLE_DEVICES, so rank 0's gpu0 (devices 2,3) and rank 1's gpu1
  // (device 3) are one GPU.
  EXPECT_EQ(device_id(gpu(1), "n1", "2,3"), "n1/gpu:3");
  EXPECT_EQ(device_id(gpu(0), "n1", "3"), "n1/gpu:3");
  EXPECT_EQ(device_id(gpu(0), "n1", ""), "n1/gpu:0");
  EXPECT_EQ(device_id(gpu(0), "n1", "GPU-8c2d, GPU-11aa"), "n1/GPU-8c2d");
  EXPECT_EQ(device_id(gpu(0), "n2", ""), "n2/gpu:0");  // another host, another GPU
  power::Channel pkg{"package-1", power::Domain::cpu, 1, {}};
  EXPECT_EQ(device_id(pkg, "n1", "0"), "n1/cpu:1");
  power::Channel dram{"dram0", power::Domain::dram, 0, {}};
  EXPECT_EQ(device_id(dram, "n1", ""), "n1/dram:0");
  power::Channel node{"node", power::Domain::node, -1, {}};
  EXPECT_EQ(device_id(node, "n1", ""), "n1/node");
  power::Channel other{"psu", power::Domain::other, -1, {}};
  EXPECT_EQ(device_id(other, "n1", ""), "n1/psu");
}

struct Row {
  Row(std::string n, Kind k, uint64_t c, double t, double e, std::optional<double> m = std::nullopt)
      : name(std::move(n)), kind(k), calls(c), time_s(t), energy_j(e), model_energy_j(m) {}
  std::string name;
  Kind kind;
  uint64_t calls;
  double time_s, energy_j;
  std::optional<double> model_energy_j;
};

// One rank's report: one channel with the given rows and run figures.
RankFile rank_file(int rank, int size, std::vector<Row> rows, double run_time_s, double run_energy_j,
                   std::string cvd = "", std::string host = "n1") {
  Report r;
  r.backend = "replay";
  r.mode = Mode::trapezoid;
  ChannelReport c;
  c.channel = gpu(0);
  c.baseline_w = 100;
  c.run_time_s = run_time_s;
  c.conservation.run_energy_j = run_energy_j;
  for (const Row& x : rows) {
    RegionRow row;
    row.name = x.name;
    row.kind = x.kind;
    row.calls = x.calls;
    row.time_s = x.time_s;
    row.energy_j = x.energy_j;
    row.model_energy_j = x.model_energy_j;
    if (x.kind != Kind::region) c.conservation.attributed_j += x.energy_j;
    c.rows.push_back(row);
  }
  c.conservation.unattributed_j = run_energy_j - c.conservation.attributed_j;
  r.channels.push_back(c);
  RankInfo info;
  info.rank = rank;
  info.size = size;
  info.launcher = "Open MPI";
  info.job = "77";
  info.host = std::move(host);
  info.cuda_visible_devices = std::move(cvd);
  info.start_unix_ns = 1'000;
  return make_rank_file(r, info, 2'000);
}

const ReducedRow& row_of(const ReducedChannel& ch, const std::string& name) {
  for (const ReducedRow& r : ch.rows)
    if (r.name == name) return r;
  throw std::runtime_error("no row " + name);
}

TEST(RankReduce, SumsAndPerRankSpreadOverDistinctDevices) {
  std::vector<RankFile> files = {
      rank_file(1, 3, {{"axpy", Kind::kernel_for, 10, 1.0, 150.0}, {"dot", Kind::kernel_reduce, 5, 0.5, 60.0}}, 4.0,
                500.0, "1"),
      rank_file(0, 3, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0, "0"),
      rank_file(2, 3, {{"axpy", Kind::kernel_for, 20, 1.0, 120.0}}, 3.0, 400.0, "2")};
  const RanksReport red = reduce_ranks(files, 3);
  EXPECT_EQ(red.present, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(red.missing.empty());
  EXPECT_EQ(red.launcher, "Open MPI");
  EXPECT_EQ(red.job, "77");
  ASSERT_EQ(red.devices.size(), 3u);
  for (const ReducedDevice& d : red.devices) EXPECT_FALSE(d.shared()) << d.id;
  EXPECT_EQ(red.devices[0].id, "n1/gpu:0");
  EXPECT_EQ(red.devices[1].id, "n1/gpu:1");
  ASSERT_EQ(red.channels.size(), 1u);
  const ReducedChannel& ch = red.channels[0];
  EXPECT_EQ(ch.ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(ch.run_energy_j, 1600.0);  // three GPUs: each rank's run energy counts
  EXPECT_DOUBLE_EQ(ch.attributed_j, 630.0);
  EXPECT_DOUBLE_EQ(ch.unattributed_j(), 970.0);

  const ReducedRow& axpy = row_of(ch, "axpy");
  EXPECT_EQ(axpy.ranks_with_row, 3);
  EXPECT_DOUBLE_EQ(axpy.calls.sum, 40);
  EXPECT_DOUBLE_EQ(axpy.calls.max, 20);
  EXPECT_EQ(axpy.calls.max_rank, 2);
  EXPECT_DOUBLE_EQ(axpy.energy_j.sum, 570.0);
  EXPECT_DOUBLE_EQ(axpy.energy_j.min, 120.0);
  EXPECT_DOUBLE_EQ(axpy.energy_j.mean, 190.0);
  EXPECT_DOUBLE_EQ(axpy.energy_j.max, 300.0);
  EXPECT_EQ(axpy.energy_j.max_rank, 0);
  EXPECT_DOUBLE_EQ(axpy.time_s.sum, 4.0);
  // J/call: each rank's energy above its baseline (100 W) over the calls of all ranks.
  EXPECT_DOUBLE_EQ(axpy.j_per_call(), (570.0 - 100.0 * 4.0) / 40.0);
  EXPECT_FALSE(axpy.model_energy_j);  // no rank had a model figure
  EXPECT_FALSE(axpy.shared_device);

  // A row only rank 1 has: the other ranks count 0 in its spread.
  const ReducedRow& dot = row_of(ch, "dot");
  EXPECT_EQ(dot.ranks_with_row, 1);
  EXPECT_DOUBLE_EQ(dot.energy_j.sum, 60.0);
  EXPECT_DOUBLE_EQ(dot.energy_j.min, 0.0);
  EXPECT_DOUBLE_EQ(dot.energy_j.mean, 20.0);
  EXPECT_EQ(dot.energy_j.max_rank, 1);
  ASSERT_EQ(dot.per_rank.size(), 1u);
  EXPECT_EQ(dot.per_rank[0].rank, 1);
  // Rows by summed energy.
  EXPECT_EQ(ch.rows[0].name, "axpy");
}

TEST(RankReduce, ASharedDeviceIsCountedOnceAndItsRowsAreFlagged) {
  // Ranks 0 and 1 both see physical GPU 0 (no CUDA_VISIBLE_DEVICES); rank 2 has its own.
  std::vector<RankFile> files = {rank_file(0, 3, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0),
                                 rank_file(1, 3, {{"axpy", Kind::kernel_for, 10, 2.5, 350.0}}, 5.5, 760.0),
                                 rank_file(2, 3, {{"axpy", Kind::kernel_for, 10, 1.0, 120.0}}, 3.0, 400.0, "1")};
  const RanksReport red = reduce_ranks(files, 3);
  ASSERT_EQ(red.devices.size(), 2u);
  const ReducedDevice& shared = red.devices[0];
  EXPECT_EQ(shared.id, "n1/gpu:0");
  EXPECT_EQ(shared.ranks, (std::vector<int>{0, 1}));
  EXPECT_TRUE(shared.shared());
  EXPECT_EQ(shared.counted_rank, 1);  // the longer run
  EXPECT_DOUBLE_EQ(shared.run_energy_j, 760.0);
  EXPECT_DOUBLE_EQ(shared.attributed_j_sum, 650.0);
  const ReducedChannel& ch = red.channels[0];
  EXPECT_EQ(ch.devices, (std::vector<std::string>{"n1/gpu:0", "n1/gpu:1"}));
  EXPECT_DOUBLE_EQ(ch.run_energy_j, 760.0 + 400.0);  // not 700 + 760 + 400
  const ReducedRow& axpy = row_of(ch, "axpy");
  EXPECT_TRUE(axpy.shared_device);
  EXPECT_DOUBLE_EQ(axpy.energy_j.sum, 770.0);  // each rank's own attribution, flagged
  const std::string table = format_ranks_table(red);
  EXPECT_NE(table.find("device n1/gpu:0: shared by ranks 0,1; counted once, from rank 1"), std::string::npos) << table;
  EXPECT_NE(table.find("= on a device other ranks measured too: each rank's attribution saw only its own windows"),
            std::string::npos)
      << table;
}

TEST(RankReduce, TheNodeViewCountsEachHostsDevicesOnce) {
  // Ranks 0 and 1 on n1 share its GPU 0; rank 2 on n2 has n2's GPU 0, another GPU.
  std::vector<RankFile> files = {rank_file(0, 3, {{"a", Kind::region, 1, 1.0, 10.0}}, 5.0, 700.0),
                                 rank_file(1, 3, {{"a", Kind::region, 1, 1.0, 10.0}}, 5.5, 760.0),
                                 rank_file(2, 3, {{"a", Kind::region, 1, 1.0, 10.0}}, 3.0, 400.0, "", "n2")};
  const RanksReport red = reduce_ranks(files, 3);
  ASSERT_EQ(red.hosts.size(), 2u);
  EXPECT_EQ(red.hosts[0].host, "n1");
  EXPECT_EQ(red.hosts[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(red.hosts[0].devices, (std::vector<std::string>{"n1/gpu:0"}));
  EXPECT_DOUBLE_EQ(red.hosts[0].run_energy_j, 760.0);
  EXPECT_EQ(red.hosts[1].host, "n2");
  EXPECT_DOUBLE_EQ(red.hosts[1].run_energy_j, 400.0);
  EXPECT_FALSE(red.devices[1].shared());
  const std::string table = format_ranks_table(red);
  EXPECT_NE(table.find("node n1: ranks 0,1; 1 device(s), run 760.0 J, each device once (n1/gpu:0)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(ranks_to_json(red).at("hosts")[1].at("ranks"), json({2}));
}

TEST(RankReduce, MissingRanksAreNamedAndDuplicatesRefused) {
  std::vector<RankFile> files = {rank_file(0, 3, {{"a", Kind::region, 1, 1.0, 10.0}}, 2.0, 20.0, "0"),
                                 rank_file(2, 3, {{"a", Kind::region, 1, 1.0, 10.0}}, 2.0, 20.0, "2")};
  const RanksReport red = reduce_ranks(files, 3);
  EXPECT_EQ(red.present, (std::vector<int>{0, 2}));
  EXPECT_EQ(red.missing, (std::vector<int>{1}));
  EXPECT_NE(format_ranks_table(red).find("2 of 3 ranks reduced (Open MPI, job 77): rank(s) 1 did not report"),
            std::string::npos)
      << format_ranks_table(red);
  files.push_back(files[1]);
  files.back().path = "x.rank2.json";
  EXPECT_NE(error_of([&] { reduce_ranks(files, 3); }).find("two reports of rank 2"), std::string::npos);
}

TEST(RankReduce, ModelFiguresWhenEveryRankHasThem) {
  std::vector<RankFile> files = {rank_file(0, 2, {{"k", Kind::kernel_for, 4, 1.0, 200.0, 180.0}}, 2.0, 300.0, "0"),
                                 rank_file(1, 2, {{"k", Kind::kernel_for, 4, 1.0, 220.0, 190.0}}, 2.0, 300.0, "1")};
  for (RankFile& f : files) {
    f.report.mode = Mode::model;
    f.report.channels[0].fit.fitted = true;
    f.report.channels[0].fit.intercept_w = 90;
  }
  RanksReport red = reduce_ranks(files, 2);
  const ReducedRow& k = row_of(red.channels[0], "k");
  EXPECT_TRUE(red.channels[0].model_lead);
  ASSERT_TRUE(k.model_energy_j);
  EXPECT_DOUBLE_EQ(k.model_energy_j->sum, 370.0);
  EXPECT_EQ(k.model_energy_j->max_rank, 1);
  ASSERT_TRUE(k.model_j_per_call());
  EXPECT_DOUBLE_EQ(*k.model_j_per_call(), (370.0 - 90.0 * 2.0) / 8.0);
  // Calls split as overlapped on each rank (the model's split of concurrent kernels): summed over the ranks.
  files[0].report.channels[0].rows[0].model_overlap_calls = 2.0;
  files[0].report.channels[0].rows[0].model_overlap_energy_j = 30.0;
  files[1].report.channels[0].rows[0].model_overlap_calls = 1.5;
  files[1].report.channels[0].rows[0].model_overlap_energy_j = 25.0;
  red = reduce_ranks(files, 2);
  const ReducedRow& o = row_of(red.channels[0], "k");
  ASSERT_TRUE(o.overlap_j_per_call());
  EXPECT_DOUBLE_EQ(*o.overlap_calls, 3.5);
  EXPECT_DOUBLE_EQ(*o.overlap_j_per_call(), 55.0 / 3.5);
  EXPECT_NE(format_ranks_table(red).find("overlapped: k: 15.714 J/call over 4 of its 8 calls"), std::string::npos)
      << format_ranks_table(red);
  EXPECT_EQ(ranks_to_json(red)["channels"][0]["regions"][0]["overlap_calls"], 3.5);
  // One rank without the model's figure: no model sum (it would not be one).
  files[1].report.channels[0].rows[0].model_energy_j.reset();
  files[1].report.channels[0].fit.fitted = false;
  red = reduce_ranks(files, 2);
  EXPECT_FALSE(row_of(red.channels[0], "k").model_energy_j);
  EXPECT_FALSE(red.channels[0].model_lead);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = kGolden + name;
  if (std::getenv("DOOLY_UPDATE_GOLDEN")) {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "wrote " << path;
  }
  ASSERT_TRUE(fs::exists(path)) << path;
  EXPECT_EQ(actual, read(path)) << "golden " << name << " differs";
}

TEST(RankWriters, TableGolden) {
  std::vector<RankFile> files = {
      rank_file(0, 3, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}, {"solve", Kind::region, 1, 4.0, 620.0}}, 5.0, 700.0),
      rank_file(1, 3, {{"axpy", Kind::kernel_for, 10, 2.5, 350.0}, {"solve", Kind::region, 1, 4.5, 700.0}}, 5.5, 760.0),
      rank_file(3, 4, {{"axpy", Kind::kernel_for, 12, 1.0, 120.0}}, 3.0, 400.0, "1")};
  for (RankFile& f : files) f.rank.size = 4;
  RanksReport red = reduce_ranks(files, 4);
  red.waited_s = 120;
  red.ignored.push_back({"out/run.rank2.json", "from job 76, not this run's job 77"});
  check_golden("ranks_table.txt", format_ranks_table(red));
}

TEST(RankWriters, CsvAndJsonCarryEveryFigure) {
  std::vector<RankFile> files = {rank_file(0, 2, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0),
                                 rank_file(1, 2, {{"axpy", Kind::kernel_for, 6, 2.5, 350.0}}, 5.5, 760.0)};
  const RanksReport red = reduce_ranks(files, 2);
  const std::string csv = ranks_to_csv(red);
  EXPECT_EQ(csv.rfind("# dooly-ranks-csv v1\n# size=2 present=0,1 missing= job=77\nchannel,domain,region,kind,", 0), 0u)
      << csv;
  EXPECT_NE(csv.find("\ngpu0,gpu,axpy,for,2,16,6,8,10,0,4.5,2,2.25,2.5,1,650,300,325,350,1,"), std::string::npos)
      << csv;
  const json j = json::parse(ranks_to_json_text(red));
  EXPECT_EQ(j.at("kind"), "ranks");
  EXPECT_EQ(j.at("version"), kRanksReportVersion);
  EXPECT_EQ(j.at("ranks_present"), json({0, 1}));
  EXPECT_EQ(j.at("devices").size(), 1u);
  EXPECT_EQ(j.at("devices")[0].at("ranks"), json({0, 1}));
  EXPECT_EQ(j.at("devices")[0].at("shared"), true);
  const json& axpy = j.at("channels")[0].at("regions")[0];
  EXPECT_EQ(axpy.at("calls").at("sum"), 16.0);
  EXPECT_EQ(axpy.at("energy_j").at("max_rank"), 1);
  EXPECT_EQ(axpy.at("net_energy_j"), (300.0 - 100 * 2.0) + (350.0 - 100 * 2.5));  // each rank's own baseline
  EXPECT_EQ(axpy.at("j_per_call"), 200.0 / 16);
  EXPECT_EQ(axpy.at("shared_device"), true);
  EXPECT_EQ(axpy.at("per_rank").size(), 2u);
  EXPECT_EQ(axpy.at("per_rank")[1].at("calls"), 6);
  // The reduced report is not one run's: the report reader says which file to give it instead.
  EXPECT_NE(error_of([&] { report_from_json(j); }).find("pass one rank's report, <prefix>.rank<N>.json"),
            std::string::npos);
}

TEST(RankWriters, RankFileRoundTrips) {
  RankFile f = rank_file(1, 2, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0, "GPU-abc");
  f.rank.local_rank = 1;
  const RankFile back = rank_file_from_json(json::parse(rank_file_json(f).dump()), "r.rank1.json");
  EXPECT_EQ(back.path, "r.rank1.json");
  EXPECT_EQ(back.rank.rank, 1);
  EXPECT_EQ(back.rank.size, 2);
  EXPECT_EQ(back.rank.local_rank, 1);
  EXPECT_EQ(back.rank.job, "77");
  EXPECT_EQ(back.rank.host, "n1");
  EXPECT_EQ(back.rank.cuda_visible_devices, "GPU-abc");
  EXPECT_EQ(back.rank.start_unix_ns, 1'000);
  EXPECT_EQ(back.written_unix_ns, 2'000);
  EXPECT_EQ(back.device_ids, (std::vector<std::string>{"n1/GPU-abc"}));
  ASSERT_EQ(back.report.channels.size(), 1u);
  EXPECT_EQ(back.report.channels[0].rows[0].calls, 10u);
  // A plain report is not a rank file.
  json plain = to_json(f.report);
  EXPECT_EQ(error_of([&] { rank_file_from_json(plain, "p.json"); }),
            "p.json: not a rank file (no 'rank' object) — pass a <prefix>.rank<N>.json that dooly wrote under an "
            "MPI launcher");
  json bad = rank_file_json(f);
  bad["rank"]["device_ids"] = json::array();
  EXPECT_NE(error_of([&] { rank_file_from_json(bad, "b.json"); }).find("b.json: 0 device ids for 1 channels"),
            std::string::npos);
}

// The rendezvous: each rank's write_outputs with a RankInfo, in one folder.
OutputSettings rank_settings(const std::string& prefix, int rank, int size, const std::string& job, double wait_s) {
  OutputSettings o;
  o.prefix = prefix;
  o.table = false;
  RankInfo r;
  r.rank = rank;
  r.size = size;
  r.launcher = "Open MPI";
  r.job = job;
  r.host = "n1";
  r.cuda_visible_devices = std::to_string(rank);
  r.start_unix_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  o.ranks = r;
  o.ranks_wait_s = wait_s;
  return o;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(RankOutputs, RankZeroWaitsForTheOthersAndWritesTheReducedReport) {
  dooly::testing::TempDir dir;
  const std::string prefix = dir.file("run");
  const Report r1 = rank_file(1, 2, {{"axpy", Kind::kernel_for, 6, 1.0, 150.0}}, 4.0, 500.0).report;
  const Report r0 = rank_file(0, 2, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0).report;
  // Rank 1 finishes after rank 0 has started waiting.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(write_outputs(r1, rank_settings(prefix, 1, 2, "j1", 10)), "");  // other ranks print nothing
  });
  const std::string table = write_outputs(r0, rank_settings(prefix, 0, 2, "j1", 10));
  late.join();
  EXPECT_NE(table.find("dooly: 2 of 2 ranks reduced (Open MPI, job j1): all reported\n"), std::string::npos) << table;
  EXPECT_TRUE(fs::exists(prefix + ".rank0.json"));
  EXPECT_TRUE(fs::exists(prefix + ".rank1.json"));
  EXPECT_FALSE(fs::exists(prefix + ".rank0.csv"));  // per-rank CSV and table only with rank_tables
  EXPECT_EQ(read(prefix + ".csv").rfind("# dooly-ranks-csv v1\n", 0), 0u);
  const json j = read_json(prefix + ".json");
  EXPECT_EQ(j.at("ranks_present"), json({0, 1}));
  EXPECT_EQ(j.at("ranks_missing"), json::array());
  EXPECT_GE(j.at("waited_s").get<double>(), 0.2);
  EXPECT_LT(j.at("waited_s").get<double>(), 9.0);
  EXPECT_EQ(j.at("channels")[0].at("regions")[0].at("calls").at("sum"), 16.0);
  EXPECT_EQ(j.at("channels")[0].at("run_energy_j"), 1200.0);
}

TEST(RankOutputs, FilesOfAnotherRunAreIgnoredAndTheRankIsMissing) {
  dooly::testing::TempDir dir;
  const std::string prefix = dir.file("run");
  const Report r = rank_file(0, 2, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0).report;
  write_outputs(r, rank_settings(prefix, 1, 2, "old", 0));  // an earlier job's rank 1
  const std::string table = write_outputs(r, rank_settings(prefix, 0, 2, "new", 0.3));
  EXPECT_NE(table.find("1 of 2 ranks reduced (Open MPI, job new): rank(s) 1 did not report (no fresh file within "),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("dooly: ignored " + prefix + ".rank1.json: from job old, not this run's job new\n"),
            std::string::npos)
      << table;
  const json j = read_json(prefix + ".json");
  EXPECT_EQ(j.at("ranks_missing"), json({1}));
  EXPECT_EQ(j.at("ranks_ignored")[0].at("file"), prefix + ".rank1.json");

  // Without job ids a file written before this rank 0 started is an earlier run's.
  write_outputs(r, rank_settings(prefix, 1, 2, "", 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string again = write_outputs(r, rank_settings(prefix, 0, 2, "", 0.1));
  EXPECT_NE(again.find("written before this run started"), std::string::npos) << again;
}

TEST(RankOutputs, RankTablesAndRemovalOnRequest) {
  dooly::testing::TempDir dir;
  const std::string prefix = dir.file("run");
  const Report r = rank_file(0, 2, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0).report;
  OutputSettings one = rank_settings(prefix, 1, 2, "j", 0);
  one.rank_tables = true;
  EXPECT_NE(write_outputs(r, one).find("dooly: gpu0 [gpu]"), std::string::npos);
  EXPECT_TRUE(fs::exists(prefix + ".rank1.csv"));
  EXPECT_EQ(read(prefix + ".rank1.txt").rfind("dooly: gpu0 [gpu]", 0), 0u);
  OutputSettings zero = rank_settings(prefix, 0, 2, "j", 5);
  zero.keep_rank_files = false;
  write_outputs(r, zero);
  EXPECT_TRUE(fs::exists(prefix + ".json"));
  EXPECT_FALSE(fs::exists(prefix + ".rank0.json"));
  EXPECT_FALSE(fs::exists(prefix + ".rank1.json"));
}

TEST(RankOutputs, MergeLaterTakesTheNewestJobsFiles) {
  dooly::testing::TempDir dir;
  const std::string prefix = dir.file("run");
  const Report r = rank_file(0, 2, {{"axpy", Kind::kernel_for, 10, 2.0, 300.0}}, 5.0, 700.0).report;
  write_outputs(r, rank_settings(prefix, 2, 3, "old", 0));  // an earlier job of 3 ranks left its rank 2
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  write_outputs(r, rank_settings(prefix, 1, 2, "new", 0));
  dooly::testing::write_file(dir.file("run.rank7.json.tmp"), "partial");  // not a rank file's name
  dooly::testing::write_file(dir.file("runx.rank3.json"), "{}");          // another prefix's
  RanksReport red = merge_rank_files(prefix, std::nullopt);
  EXPECT_EQ(red.job, "new");
  EXPECT_EQ(red.size, 2);
  EXPECT_EQ(red.present, (std::vector<int>{1}));
  EXPECT_EQ(red.missing, (std::vector<int>{0}));
  ASSERT_EQ(red.ignored.size(), 1u);
  EXPECT_EQ(red.ignored[0].path, prefix + ".rank2.json");
  EXPECT_EQ(red.ignored[0].why, "from job old, not job new");
  red = merge_rank_files(prefix, std::string("old"));
  EXPECT_EQ(red.size, 3);
  EXPECT_EQ(red.present, (std::vector<int>{2}));
  EXPECT_EQ(red.missing, (std::vector<int>{0, 1}));
  EXPECT_THROW(merge_rank_files(prefix, std::string("gone")), InputError);
  EXPECT_EQ(error_of([&] { merge_rank_files(dir.file("nothing"), std::nullopt); }),
            "no readable rank file nothing.rank<N>.json in '" + dir.path() +
                "' — give the prefix the ranks wrote with (DOOLY_OUTPUT), without .rank<N>.json");
}

namespace joint_test {

constexpr int64_t kMs = 1'000'000;

// 4 s of instantaneous readings every 10 ms of a GPU drawing 100 W idle, +100 W while rank 0's kernel runs and
// +50 W while rank 1's does. In 100 ms slots rank 0 runs in 3 of every 4 (i % 4 != 3) and rank 1 in 2 (i % 4 < 2):
// rank 1 runs only while rank 0 does, so on its own rank 1 sees rank 0's 100 W as its own.
bool active(int rank, int slot) { return rank == 0 ? slot % 4 != 3 : slot % 4 < 2; }

Recording rank_recording(int rank) {
  Recording rec;
  rec.meta = {{"backend", "replay"}, {"run_start_ns", "0"}, {"run_end_ns", std::to_string(4000 * kMs)}};
  rec.channels.push_back(power::Channel{"gpu0", power::Domain::gpu, 0, {0, 0, 10 * kMs, "test [PCI 0000:01:00.0]"}});
  rec.keys.push_back({7, "for", "k"});
  for (int j = 0; j < 400; ++j) {
    const int64_t t = j * 10 * kMs + 5 * kMs;
    const int slot = static_cast<int>(t / (100 * kMs));
    rec.samples.push_back({0, t, 100.0 + (active(0, slot) ? 100.0 : 0.0) + (active(1, slot) ? 50.0 : 0.0), -1});
  }
  for (int slot = 0; slot < 40; ++slot)
    if (active(rank, slot)) {
      rec.events.push_back({slot * 100 * kMs + 1 * kMs, 7, 0, 0, true, flags::nested});
      rec.events.push_back({(slot + 1) * 100 * kMs - 1 * kMs, 7, 0, 0, false, flags::nested});
    }
  return rec;
}

// Rank r's own report (its readings, its windows) as its rank file, naming its recording.
RankFile recorded_rank(int rank, const std::string& dir, const AnalysisOptions& o) {
  const Recording rec = rank_recording(rank);
  const std::string path = dir + "/run.rank" + std::to_string(rank) + ".recording";
  write_recording(path, rec);
  Report report = analyze_recording(rec, o);
  report.meta.emplace_back("recording", path);
  RankInfo info;
  info.rank = rank;
  info.size = 2;
  info.job = "9";
  info.host = "n1";
  RankFile f = make_rank_file(report, info, 1);
  f.report.channels[0].run_time_s += rank * 0.5;  // rank 1 measured longest: its readings are the ones counted
  return f;
}

double model_j_per_call(const RankFile& f) {
  const ChannelReport& ch = f.report.channels.at(0);
  for (const RegionRow& r : ch.rows)
    if (r.name == "k") return r.model_j_per_call(ch.fit.intercept_w).value_or(-1);
  return -1;
}

TEST(RankJoint, ASharedGpuIsAttributedOnceWithEveryRanksWindows) {
  dooly::testing::TempDir dir;
  AnalysisOptions o;
  o.mode = Mode::model;
  std::vector<RankFile> files = {recorded_rank(0, dir.path(), o), recorded_rank(1, dir.path(), o)};
  ASSERT_EQ(files[0].device_ids, files[1].device_ids);  // the same bus: one GPU
  // Alone, rank 1's fit hands it rank 0's power too (100 W over a 98 ms window, not 50 W).
  EXPECT_NEAR(model_j_per_call(files[1]), 9.8, 0.3);
  EXPECT_NEAR(model_j_per_call(files[0]), 0.098 * (100 + 50 * 2.0 / 3), 0.3);  // and rank 0 a share of rank 1's

  const Reattribution joint = reattribute_shared_devices(files, o);
  ASSERT_EQ(joint.devices, (std::vector<std::string>{"n1/pci:0000:01:00.0"}));
  EXPECT_TRUE(joint.skipped.empty());
  EXPECT_NEAR(model_j_per_call(files[0]), 9.8, 0.2);  // 100 W x 98 ms
  EXPECT_NEAR(model_j_per_call(files[1]), 4.9, 0.2);  // 50 W x 98 ms
  EXPECT_EQ(files[0].report.channels[0].rows.size(), 1u);
  EXPECT_EQ(files[1].report.channels[0].rows[0].calls, 20u);
  // The device's run once: on the counted rank (1, the longer run); none on rank 0.
  EXPECT_NEAR(files[1].report.channels[0].conservation.run_energy_j, 4.0 * (100 + 0.75 * 100 + 0.5 * 50), 3.0);
  EXPECT_EQ(files[0].report.channels[0].conservation.run_energy_j, 0.0);

  const RanksReport red = reduce_ranks(files, 2, joint.devices);
  ASSERT_EQ(red.devices.size(), 1u);
  EXPECT_TRUE(red.devices[0].joint);
  EXPECT_EQ(red.devices[0].counted_rank, 1);
  EXPECT_NEAR(red.channels[0].run_energy_j, 800.0, 3.0);
  const ReducedRow& k = row_of(red.channels[0], "k");
  EXPECT_TRUE(k.joint);
  EXPECT_DOUBLE_EQ(k.calls.sum, 50);
  const std::string table = format_ranks_table(red);
  EXPECT_NE(table.find("device n1/pci:0000:01:00.0: shared by ranks 0,1; attributed once with all their windows "
                       "against rank 1's readings"),
            std::string::npos)
      << table;
}

TEST(RankJoint, ADeviceIsLeftAsItWasWhenARankDidNotRecord) {
  dooly::testing::TempDir dir;
  AnalysisOptions o;
  std::vector<RankFile> files = {recorded_rank(0, dir.path(), o), recorded_rank(1, dir.path(), o)};
  std::erase_if(files[1].report.meta, [](const auto& m) { return m.first == "recording"; });
  const double before = model_j_per_call(files[1]);
  const Reattribution joint = reattribute_shared_devices(files, o);
  EXPECT_TRUE(joint.devices.empty());
  EXPECT_EQ(joint.skipped, (std::vector<std::string>{"n1/pci:0000:01:00.0: rank 1 did not record (DOOLY_RECORD)"}));
  EXPECT_EQ(model_j_per_call(files[1]), before);
}

}  // namespace joint_test

}  // namespace
}  // namespace dooly::energy
