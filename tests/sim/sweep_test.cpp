// Sweeps: the grid grammar, the expansion order, the rate override, points checked before any run, and the same
// rows whatever the number of threads.
#include "dooly/sim/sweep.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"
#include "sim_support.hpp"

namespace dooly::sim {
namespace {

SimConfig base() {
  SimConfig c;
  c.model = "llama-3.1-8b";
  c.workload = "poisson:rate=1,n=60,prompt=uniform:50:400,output=uniform:5:40,seed=3";
  return c;
}

TEST(Sweep, GridExpandsLastAxisFastest) {
  const auto grid = parse_grid("scheduler=fifo,prefill_first;max-batch-tokens=256,512,1024");
  ASSERT_EQ(grid.size(), 2u);
  const auto points = expand_grid(base(), grid);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].values, (std::vector<std::string>{"fifo", "256"}));
  EXPECT_EQ(points[1].values, (std::vector<std::string>{"fifo", "512"}));
  EXPECT_EQ(points[5].values, (std::vector<std::string>{"prefill_first", "1024"}));
  EXPECT_EQ(points[5].config.engine.scheduler, "prefill_first");
  EXPECT_EQ(points[5].config.engine.max_batch_tokens, 1024);
}

TEST(Sweep, RateReplacesTheWorkloadsRate) {
  EXPECT_EQ(with_rate("poisson:rate=1,n=60,prompt=fixed:5,output=fixed:2", "6.45"),
            "poisson:rate=6.45,n=60,prompt=fixed:5,output=fixed:2");
  EXPECT_EQ(with_rate("constant:n=6,rate=2,prompt=fixed:5,output=fixed:2", "3"),
            "constant:n=6,rate=3,prompt=fixed:5,output=fixed:2");
  EXPECT_THROW((void)with_rate("trace:x.jsonl", "2"), InputError);
  EXPECT_THROW((void)with_rate("closed:users=2,n=4,prompt=fixed:5,output=fixed:2", "2"), InputError);
}

TEST(Sweep, BadGridsAreOneLine) {
  for (const char* bad : {"", "scheduler", "bogus=1", "out=a.json", "rate=1;rate=2", "scheduler=fifo,"})
    EXPECT_THROW((void)parse_grid(bad), InputError) << bad;
  const auto points = expand_grid(base(), parse_grid("scheduler=fifo,lifo"));
  try {
    (void)run_sweep(points, testing::models_dir(), 2);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sweep point (lifo): unknown HF scheduler 'lifo'"), std::string::npos)
        << e.what();
  }
}

TEST(Sweep, RowsDoNotDependOnThreads) {
  const auto grid = parse_grid("engine=hf,vllm;rate=2,8");
  const auto points = expand_grid(base(), grid);
  const auto one = run_sweep(points, testing::models_dir(), 1);
  const auto two = run_sweep(points, testing::models_dir(), 2);
  EXPECT_EQ(sweep_csv(grid, points, one), sweep_csv(grid, points, two));
  const std::string csv = sweep_csv(grid, points, one);
  EXPECT_EQ(csv.rfind("# dooly sweep, version 1\nengine,rate,completed,", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6);
  for (const Summary& s : one) EXPECT_EQ(s.completed, 60);
}

}  // namespace
}  // namespace dooly::sim
