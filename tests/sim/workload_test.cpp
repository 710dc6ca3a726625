// Workloads: the spec grammar, every bad spec or trace line as one named InputError, the arrival processes and
// length distributions against their definitions (moments over 20,000 draws), and determinism for a seed.
#include "dooly/sim/workload.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "dooly/common/error.hpp"
#include "support/temp_dir.hpp"

namespace dooly::sim {
namespace {

std::string error_of(const std::string& spec) {
  try {
    (void)generate(parse_workload(spec));
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

std::string trace_error(const std::string& text) {
  std::istringstream in(text);
  try {
    (void)parse_trace(in, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct Moments {
  double mean = 0, cv = 0;
};

Moments gaps_of(const std::vector<Request>& rs) {
  std::vector<double> g;
  for (size_t i = 1; i < rs.size(); ++i) g.push_back(rs[i].arrival_s - rs[i - 1].arrival_s);
  const double mean = std::accumulate(g.begin(), g.end(), 0.0) / static_cast<double>(g.size());
  double var = 0;
  for (double x : g) var += (x - mean) * (x - mean);
  var /= static_cast<double>(g.size() - 1);
  return {mean, std::sqrt(var) / mean};
}

TEST(Workload, PoissonArrivalsHaveMeanGapOneOverRateAndUnitCv) {
  const auto rs = generate(parse_workload("poisson:rate=6.45,n=20000,prompt=fixed:100,output=fixed:10,seed=3"));
  ASSERT_EQ(rs.size(), 20000u);
  EXPECT_EQ(rs.front().id, "r0");
  for (size_t i = 1; i < rs.size(); ++i) ASSERT_GE(rs[i].arrival_s, rs[i - 1].arrival_s);
  const Moments m = gaps_of(rs);
  EXPECT_NEAR(m.mean, 1 / 6.45, 0.02 / 6.45);  // 2 %: the standard error is 0.7 % at n = 20,000
  EXPECT_NEAR(m.cv, 1.0, 0.03);
  EXPECT_EQ(rs[5].prompt_tokens, 100);
  EXPECT_EQ(rs[5].output_tokens, 10);
}

TEST(Workload, GammaArrivalsAreBurstierWithTheSameMean) {
  const auto rs = generate(parse_workload("gamma:rate=4,cv=3,n=20000,prompt=fixed:1,output=fixed:1,seed=1"));
  const Moments m = gaps_of(rs);
  EXPECT_NEAR(m.mean, 0.25, 0.25 * 0.06);
  EXPECT_NEAR(m.cv, 3.0, 0.3);
  const Moments smooth = gaps_of(generate(parse_workload("gamma:rate=4,cv=0.5,n=20000,prompt=fixed:1,output=fixed:1")));
  EXPECT_NEAR(smooth.cv, 0.5, 0.03);
}

TEST(Workload, ConstantRateAndClosedLoop) {
  const auto rs = generate(parse_workload("constant:rate=2,n=5,prompt=fixed:7,output=fixed:3"));
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_DOUBLE_EQ(rs[i].arrival_s, 0.5 * static_cast<double>(i));
  const Workload w = parse_workload("closed:users=8,n=100,think=0.5,prompt=uniform:1:4,output=fixed:2");
  EXPECT_EQ(w.arrivals, Workload::Arrivals::closed);
  EXPECT_EQ(w.users, 8);
  EXPECT_DOUBLE_EQ(w.think_s, 0.5);
  const auto closed = generate(w);
  ASSERT_EQ(closed.size(), 100u);
  for (const Request& r : closed) EXPECT_EQ(r.arrival_s, 0.0);  // the simulator sends them as users free up
}

TEST(Workload, LengthDistributions) {
  Rng rng(11);
  const LengthDist u = parse_length("uniform:16:19", "t");
  std::vector<int> seen(4);
  for (int i = 0; i < 4000; ++i) {
    const int64_t x = u.sample(rng);
    ASSERT_GE(x, 16);
    ASSERT_LE(x, 19);
    ++seen[static_cast<size_t>(x - 16)];
  }
  for (int c : seen) EXPECT_NEAR(c, 1000, 120);  // every value, evenly (both ends included)
  const LengthDist ln = parse_length("lognormal:900:0.8:1:1000000", "t");
  std::vector<int64_t> xs;
  for (int i = 0; i < 20001; ++i) xs.push_back(ln.sample(rng));
  std::nth_element(xs.begin(), xs.begin() + 10000, xs.end());
  EXPECT_NEAR(static_cast<double>(xs[10000]), 900, 27);  // the median, within 3 %
  const LengthDist clipped = parse_length("lognormal:900:2:100:2000", "t");
  int at_min = 0, at_max = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t x = clipped.sample(rng);
    ASSERT_GE(x, 100);
    ASSERT_LE(x, 2000);
    at_min += x == 100;
    at_max += x == 2000;
  }
  EXPECT_GT(at_min, 100);  // sigma 2 puts ~13 % below 100 and ~35 % above 2000: clipped, not redrawn
  EXPECT_GT(at_max, 400);
}

// docs/simulate.md's example of Vidur's usual workload: mean prompt ~1,150 tokens, mean output ~210.
TEST(Workload, TheDocumentedVidurLikeWorkloadHasItsMeans) {
  const auto rs = generate(parse_workload(
      "poisson:rate=6.45,n=20000,prompt=lognormal:900:0.7:16:8192,output=lognormal:160:0.75:1:2048,seed=1"));
  double prompt = 0, output = 0;
  for (const Request& r : rs) {
    prompt += static_cast<double>(r.prompt_tokens);
    output += static_cast<double>(r.output_tokens);
  }
  EXPECT_NEAR(prompt / 20000, 1150, 1150 * 0.03);
  EXPECT_NEAR(output / 20000, 210, 210 * 0.03);
}

TEST(Workload, EmpiricalLengthsComeFromTheFile) {
  testing::TempDir dir;
  const std::string f = dir.file("lengths.txt");
  std::ofstream(f) << "# prompt lengths\n12\n\n340\n 7 \n";
  const LengthDist d = parse_length("empirical:" + f, "t");
  EXPECT_EQ(d.values, (std::vector<int64_t>{12, 340, 7}));
  Rng rng(2);
  for (int i = 0; i < 100; ++i) {
    const int64_t x = d.sample(rng);
    EXPECT_TRUE(x == 12 || x == 340 || x == 7);
  }
  std::ofstream(f) << "12\nmany\n";
  try {
    (void)parse_length("empirical:" + f, "t");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(f + ":2: 'many' is not an integer"), std::string::npos) << e.what();
  }
}

TEST(Workload, TheSameSeedGivesTheSameRequestsAndLengthsDoNotDependOnTheRate) {
  const std::string dists = ",n=500,prompt=lognormal:900:0.8:16:8192,output=uniform:16:512,seed=9";
  const auto a = generate(parse_workload("poisson:rate=2" + dists));
  const auto b = generate(parse_workload("poisson:rate=2" + dists));
  const auto c = generate(parse_workload("gamma:rate=20,cv=2" + dists));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].arrival_s, b[i].arrival_s);
    ASSERT_EQ(a[i].prompt_tokens, c[i].prompt_tokens);  // another load, the same requests
    ASSERT_EQ(a[i].output_tokens, c[i].output_tokens);
  }
  const auto d = generate(parse_workload("poisson:rate=2,n=500,prompt=lognormal:900:0.8:16:8192,output=fixed:1"));
  EXPECT_NE(a[0].arrival_s, d[0].arrival_s);  // seed 0
  // Pinned values: a change of generator or stream is a change of every simulation's workload.
  const auto p = generate(parse_workload("poisson:rate=1,n=3,prompt=uniform:1:1000,output=uniform:1:1000,seed=42"));
  EXPECT_DOUBLE_EQ(p[0].arrival_s, 0.24534990767024067);
  EXPECT_EQ(p[0].prompt_tokens, 84);
  EXPECT_EQ(p[0].output_tokens, 379);
  EXPECT_DOUBLE_EQ(p[2].arrival_s, 0.71359424691684414);
  EXPECT_EQ(p[2].prompt_tokens, 992);
}

TEST(Workload, BadSpecsAreOneNamedLine) {
  EXPECT_NE(error_of("poisson").find("no kind"), std::string::npos);
  EXPECT_NE(error_of("uniformish:rate=1").find("unknown kind 'uniformish'"), std::string::npos);
  EXPECT_NE(error_of("poisson:rate=1,n=5,prompt=fixed:1").find("output is missing"), std::string::npos);
  EXPECT_NE(error_of("poisson:rate=0,n=5,prompt=fixed:1,output=fixed:1").find("rate: '0' is not a number in"),
            std::string::npos);
  EXPECT_NE(error_of("poisson:rate=1,n=5,prompt=fixed:1,output=fixed:1,cv=2").find("unknown field 'cv' for poisson"),
            std::string::npos);
  EXPECT_NE(error_of("poisson:rate=1,rate=2,n=5,prompt=fixed:1,output=fixed:1").find("'rate' given twice"),
            std::string::npos);
  EXPECT_NE(error_of("poisson:rate=1,n=5,prompt=uniform:9:3,output=fixed:1").find("'3' is not an integer in [9,"),
            std::string::npos);
  EXPECT_NE(error_of("poisson:rate=1,n=5,prompt=lognormal:900:0.8,output=fixed:1")
                .find("is not lognormal:MEDIAN:SIGMA:MIN:MAX"),
            std::string::npos);
  EXPECT_NE(error_of("poisson:rate=1,n=99999999999,prompt=fixed:1,output=fixed:1").find("n: '99999999999'"),
            std::string::npos);
  EXPECT_NE(error_of("poisson:rate=nan,n=5,prompt=fixed:1,output=fixed:1").find("rate: 'nan'"), std::string::npos);
  EXPECT_NE(error_of("closed:n=5,prompt=fixed:1,output=fixed:1").find("users is missing"), std::string::npos);
  EXPECT_NE(error_of("trace:").find("names no file"), std::string::npos);
  EXPECT_NE(error_of("trace:/nonexistent/x.jsonl").find("cannot open"), std::string::npos);
}

TEST(Workload, ATraceIsReadSortedByArrival) {
  std::istringstream in(
      "{\"id\": \"a\", \"arrival_s\": 1.5, \"prompt_tokens\": 412, \"output_tokens\": 128, \"user\": \"x\"}\n"
      "\n"
      "{\"id\": 7, \"arrival_s\": 0.25, \"prompt_tokens\": 3, \"output_tokens\": 1}\n"
      "{\"arrival_s\": 1.5, \"prompt_tokens\": 9, \"output_tokens\": 2}\n");
  const auto rs = parse_trace(in, "t.jsonl");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].id, "7");
  EXPECT_EQ(rs[1].id, "a");   // equal arrivals keep file order
  EXPECT_EQ(rs[2].id, "r2");  // no id: its index
  EXPECT_EQ(rs[1].prompt_tokens, 412);
  EXPECT_DOUBLE_EQ(rs[0].arrival_s, 0.25);
}

TEST(Workload, BadTraceLinesNameFileAndLine) {
  const std::string ok = "{\"id\": \"a\", \"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 2}\n";
  EXPECT_NE(trace_error(ok + "{not json\n").find("t.jsonl:2: not a JSON object"), std::string::npos);
  EXPECT_NE(trace_error(ok + "[1, 2]\n").find("t.jsonl:2: not a JSON object"), std::string::npos);
  EXPECT_NE(trace_error("{\"arrival_s\": -1, \"prompt_tokens\": 4, \"output_tokens\": 2}\n")
                .find("t.jsonl:1: arrival_s must be a number of seconds >= 0"),
            std::string::npos);
  EXPECT_NE(trace_error("{\"arrival_s\": 0, \"prompt_tokens\": 4.5, \"output_tokens\": 2}\n")
                .find("t.jsonl:1: prompt_tokens must be an integer in [1,"),
            std::string::npos);
  EXPECT_NE(trace_error("{\"arrival_s\": 0, \"prompt_tokens\": 4}\n").find("output_tokens must be"), std::string::npos);
  EXPECT_NE(trace_error("{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 0}\n").find("output_tokens"),
            std::string::npos);
  EXPECT_NE(trace_error(ok + "\n" + ok).find("t.jsonl:3: id 'a' is already on line 1"), std::string::npos);
  EXPECT_NE(trace_error("{\"id\": \"\", \"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 2}\n")
                .find("id must be a non-empty string or an integer"),
            std::string::npos);
  EXPECT_NE(trace_error("\n\n").find("t.jsonl: holds no request"), std::string::npos);
}

}  // namespace
}  // namespace dooly::sim
