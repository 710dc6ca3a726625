#pragma once
// What the serving simulator serves (issue 12): requests with an arrival time, a prompt length and an output
// length, from a workload spec (`dooly simulate --workload`) or a trace file. docs/simulate.md documents the
// grammar:
//
//   poisson:rate=R,n=N,prompt=DIST,output=DIST[,seed=S]           exponential inter-arrival times, mean 1/R
//   gamma:rate=R,cv=C,n=N,prompt=DIST,output=DIST[,seed=S]        gamma inter-arrival times, mean 1/R, CV C (bursts)
//   constant:rate=R,n=N,prompt=DIST,output=DIST[,seed=S]          one request every 1/R s
//   closed:users=U,n=N,prompt=DIST,output=DIST[,think=T][,seed=S] U users, each sends its next request T s after
//                                                                 its previous one finished (the simulator times it)
//   trace:FILE.jsonl                                              one request per line:
//       {"id": "r1", "arrival_s": 0.0, "prompt_tokens": 412, "output_tokens": 128}   (other fields ignored)
//   DIST: fixed:N | uniform:A:B | lognormal:MEDIAN:SIGMA:MIN:MAX (clipped to [MIN, MAX]) | empirical:FILE
//         (FILE: one length per line, '#' comments; sampled uniformly)
//
// Every bad spec, file or line is one InputError naming it (file:line for files) and the fix, before any work.
// The same spec and seed give the same requests on every platform (sim/rng.hpp).
#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "dooly/sim/rng.hpp"

namespace dooly::sim {

inline constexpr int64_t kMaxRequests = 10'000'000;  // a workload larger than this is refused (memory)
inline constexpr int64_t kMaxTokens = 10'000'000;    // per prompt or output

struct Request {
  std::string id;
  double arrival_s = 0;  // closed loop: 0 (the simulator sends it when its user is free)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

struct LengthDist {
  enum class Kind { fixed, uniform, lognormal, empirical };
  Kind kind = Kind::fixed;
  int64_t fixed = 1;             // fixed
  int64_t lo = 1, hi = 1;        // uniform: [lo, hi]; lognormal: clipped to [lo, hi]
  double median = 1, sigma = 0;  // lognormal
  std::vector<int64_t> values;   // empirical
  std::string spec;              // as given

  int64_t sample(Rng& rng) const;
};

struct Workload {
  enum class Arrivals { poisson, gamma, constant, closed, trace };
  Arrivals arrivals = Arrivals::poisson;
  double rate = 0;     // requests per second (poisson, gamma, constant)
  double cv = 1;       // gamma: coefficient of variation of the inter-arrival times
  int64_t n = 0;       // requests (synthetic kinds)
  int64_t users = 0;   // closed
  double think_s = 0;  // closed
  uint64_t seed = 0;
  LengthDist prompt, output;
  std::string trace_path;  // trace
  std::string spec;        // as given
};

// A length distribution: "fixed:128", "uniform:16:512", "lognormal:900:0.8:16:8192", "empirical:lengths.txt".
// `where` names it in messages ("workload 'poisson:...': prompt").
LengthDist parse_length(std::string_view spec, const std::string& where);
Workload parse_workload(std::string_view spec);

// The requests of a workload, in arrival order (ids "r0", "r1", ...; a trace keeps its own). A trace is read here.
std::vector<Request> generate(const Workload& w);

// A JSONL trace: one request object per line; blank lines skipped; sorted by arrival (stable). `path` names the
// file in messages ("<path>:<line>: ...").
std::vector<Request> parse_trace(std::istream& in, const std::string& path);
std::vector<Request> read_trace(const std::string& path);

}  // namespace dooly::sim
