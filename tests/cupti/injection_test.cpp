// libdooly_cupti.so as the CUDA driver loads it, in a child process: InitializeInjection, records through the stub
// libcupti, the report written by the exit handler; and the one line it prints where no libcupti can be found.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kReplay = std::string("DOOLY_POWER_SOURCE=replay DOOLY_REPLAY_FILE=") + DOOLY_SOURCE_DIR +
                            "/data/runs/h200-kokkos-demo.recording";

// `power` chooses the power source; `app_args` go after the two libraries (the stub libcuda, for the driver test).
int run(const std::string& env, const dooly::testing::TempDir& dir, const std::string& power = kReplay,
        const std::string& app_args = "") {
  const std::string cmd = "env -u DOOLY_TRACE -u DOOLY_RECORD -u NVTX_INJECTION64_PATH " + env + " " + power +
                          " DOOLY_OUTPUT=" + dir.file("report") + " DOOLY_TABLE_FILE=" + dir.file("table.txt") +
                          " DOOLY_CUPTI_DELAY_MS=10 " + INJECTION_APP + " " + DOOLY_CUPTI_INJECTION + " " +
                          DOOLY_STUB_CUPTI_PATH + " " + app_args + " > " + dir.file("out.txt") + " 2> " +
                          dir.file("err.txt");
  return std::system(cmd.c_str());
}

TEST(Injection, TheReportIsWrittenAtExit) {
  dooly::testing::TempDir dir;
  ASSERT_EQ(run(std::string("DOOLY_CUPTI_LIB=") + DOOLY_STUB_CUPTI_PATH, dir), 0) << slurp(dir.file("err.txt"));
  EXPECT_NE(slurp(dir.file("out.txt")).find("app: done"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(dir.file("report.json")));
  bool found = false;
  for (const auto& ch : j.at("channels"))
    for (const auto& r : ch.at("regions"))
      if (r.at("name") == "stencil(float*, int)") {
        found = true;
        EXPECT_EQ(r.at("kind"), "kernel");
        EXPECT_EQ(r.at("calls"), 10);
        EXPECT_NEAR(r.at("time_s").get<double>(), 0.010, 1e-12);
        EXPECT_EQ(r.at("short_name"), "stencil");
      }
  EXPECT_TRUE(found) << j.dump(1);
  const std::string table = slurp(dir.file("table.txt"));
  EXPECT_NE(table.find("stencil "), std::string::npos) << table;
  EXPECT_NE(table.find("GPU 0 stream 7"), std::string::npos) << table;
#ifdef DOOLY_REAL_NVTX
  // The real NVTX (the toolkit's nvtx3) loaded the library through NVTX_INJECTION64_PATH, which the tracer set,
  // and its push/pop and start/end became rows spanning the app's kernels and its 50 ms wait.
  for (const char* name : {"app step", "app started range"}) {
    bool seen = false;
    for (const auto& r : j.at("channels")[0].at("regions"))
      if (r.at("name") == name) {
        seen = true;
        EXPECT_EQ(r.at("kind"), "region");
        EXPECT_EQ(r.at("calls"), 1);
        EXPECT_GE(r.at("time_s").get<double>(), 0.05);
      }
    EXPECT_TRUE(seen) << name << " missing: " << j.dump(1);
  }
#endif
}

// On an H200 (driver 580) the NVML backend's device mapping called cuInit from inside the driver's cuInit, and
// every CUDA program then failed with "initialization error". The stub libcuda fails the same way.
TEST(Injection, NvmlIsOpenedWithoutCallingTheDriverFromInsideCuInit) {
  dooly::testing::TempDir dir;
  {
    std::ofstream script(dir.file("nvml.script"));
    script << "device 00000000:00:06.0 NVIDIA H200\npower * 0 300\n";
  }
  const std::string nvml = std::string("DOOLY_POWER_SOURCE=nvml DOOLY_NVML_LIBRARY=") + DOOLY_STUB_NVML_PATH +
                           " DOOLY_LIBCUDA=" + DOOLY_STUB_CUDA_PATH +
                           " DOOLY_STUB_NVML_SCRIPT=" + dir.file("nvml.script");
  ASSERT_EQ(run(std::string("DOOLY_CUPTI_LIB=") + DOOLY_STUB_CUPTI_PATH, dir, nvml, DOOLY_STUB_CUDA_PATH), 0)
      << slurp(dir.file("err.txt"));
  EXPECT_NE(slurp(dir.file("out.txt")).find("app: done"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(dir.file("report.json")));
  ASSERT_EQ(j.at("channels").size(), 1U) << j.dump(1);
  EXPECT_EQ(j.at("channels")[0].at("name"), "gpu0") << j.dump(1);
}

TEST(Injection, WithoutCuptiOneLineAndTheProgramRunsOn) {
  dooly::testing::TempDir dir;
  ASSERT_EQ(run("DOOLY_CUPTI_LIB=/nonexistent/libcupti.so", dir), 0);
  EXPECT_NE(slurp(dir.file("out.txt")).find("app: done"), std::string::npos);
  const std::string err = slurp(dir.file("err.txt"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("dooly: cupti: cannot use DOOLY_CUPTI_LIB"), std::string::npos) << err;
  std::ifstream report(dir.file("report.json"));
  EXPECT_FALSE(report.good());
}

}  // namespace
