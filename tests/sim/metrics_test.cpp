// Metric definitions on hand-computed cases: numpy's percentiles, TTFT / TPOT / ITL / E2E as vLLM defines them,
// goodput under SLOs, throughput and energy totals.
#include "dooly/sim/metrics.hpp"

#include <gtest/gtest.h>

#include "dooly/common/error.hpp"

namespace dooly::sim {
namespace {

TEST(Metrics, PercentilesAreNumpysLinearOnes) {
  std::vector<double> v = {10, 1, 4, 3, 2};
  const Stat s = stat_of(v);
  EXPECT_DOUBLE_EQ(s.mean, 4);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p90, 7.6);   // numpy.percentile([1,2,3,4,10], 90): rank 3.6 -> 4 + 0.6 * 6
  EXPECT_DOUBLE_EQ(s.p99, 9.76);  // rank 3.96
  std::vector<double> one = {5};
  EXPECT_DOUBLE_EQ(stat_of(one).p99, 5);
  std::vector<double> none;
  EXPECT_DOUBLE_EQ(stat_of(none).mean, 0);
}

TEST(Metrics, RunsGiveTheSameAsTheValuesRepeated) {
  std::vector<std::pair<double, int64_t>> runs = {{0.03, 3}, {0.01, 2}, {0.5, 1}, {0.03, 4}};
  std::vector<double> flat = {0.03, 0.03, 0.03, 0.01, 0.01, 0.5, 0.03, 0.03, 0.03, 0.03};
  const Stat a = stat_of_runs(runs), b = stat_of(flat);
  EXPECT_DOUBLE_EQ(a.mean, b.mean);
  EXPECT_DOUBLE_EQ(a.median, b.median);
  EXPECT_DOUBLE_EQ(a.p90, b.p90);
  EXPECT_DOUBLE_EQ(a.p99, b.p99);
}

RequestState done(double arrival, double first, double finish, int64_t output) {
  RequestState r;
  r.arrival_s = arrival;
  r.first_token_s = first;
  r.finish_s = finish;
  r.prompt_tokens = 100;
  r.output_tokens = output;
  r.status = Status::finished;
  return r;
}

TEST(Metrics, LatencyDefinitionsGoodputAndEnergy) {
  // A: TTFT 0.5 s, E2E 2.5 s, 5 tokens: TPOT = (2.5 - 0.5) / 4 = 0.5 s. B: one token, TTFT = E2E = 0.2 s, no TPOT.
  const std::vector<RequestState> rs = {done(1.0, 1.5, 3.5, 5), done(2.0, 2.2, 2.2, 1)};
  Recorder rec;
  rec.itl.add(0.5);
  rec.itl.add(0.5);
  rec.itl.add(0.25);
  rec.itl.add(0.75);
  rec.step_energy_j = 700;
  rec.busy_s = 3.0;
  rec.step_count = 5;
  const Summary s = summarize(rs, rec, 100, parse_slo("ttft:600,tpot:400"));
  EXPECT_EQ(s.completed, 2);
  EXPECT_DOUBLE_EQ(s.duration_s, 3.5);
  EXPECT_DOUBLE_EQ(s.ttft_ms.mean, (500 + 200) / 2.0);
  EXPECT_DOUBLE_EQ(s.tpot_ms.mean, 500);  // B has no TPOT
  EXPECT_DOUBLE_EQ(s.e2e_ms.median, (2500 + 200) / 2.0);
  EXPECT_DOUBLE_EQ(s.itl_ms.mean, 500);
  EXPECT_DOUBLE_EQ(s.itl_ms.median, 500);
  EXPECT_EQ(s.good_requests, 1);  // A misses the TPOT SLO; B's TPOT counts as 0
  EXPECT_DOUBLE_EQ(s.request_goodput, 1 / 3.5);
  EXPECT_DOUBLE_EQ(s.request_throughput, 2 / 3.5);
  EXPECT_DOUBLE_EQ(s.output_throughput, 6 / 3.5);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 206 / 3.5);
  EXPECT_DOUBLE_EQ(s.idle_energy_j, 100 * 0.5);  // 3.5 s, of which 3 in steps
  EXPECT_DOUBLE_EQ(s.energy_j, 750);
  EXPECT_DOUBLE_EQ(s.j_per_output_token, 125);
  EXPECT_DOUBLE_EQ(s.j_per_request, 375);
  EXPECT_DOUBLE_EQ(s.average_power_w, 750 / 3.5);
}

TEST(Metrics, SloSpecs) {
  const Slo s = parse_slo("ttft:200,tpot:50,e2el:3000");
  EXPECT_DOUBLE_EQ(*s.ttft_ms, 200);
  EXPECT_DOUBLE_EQ(*s.tpot_ms, 50);
  EXPECT_DOUBLE_EQ(*s.e2e_ms, 3000);
  EXPECT_TRUE(meets(s, 0.2, 0.05, 3.0));
  EXPECT_FALSE(meets(s, 0.2001, 0.05, 3.0));
  for (const char* bad : {"", "ttft", "ttft:x", "ttft:-1", "ttft:1,ttft:2", "latency:5", "ttft:1,"})
    EXPECT_THROW((void)parse_slo(bad), InputError) << bad;
}

}  // namespace
}  // namespace dooly::sim
