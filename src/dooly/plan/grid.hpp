#pragma once
// The sweep grids `dooly profile` measures units over, by the kind of step quantities a unit depends on, and the
// measurement settings. One JSON file (data/grids/default.json is the shipped default; docs/profile.md documents
// every field); an unknown field, a wrong type or an empty list is one InputError naming the file and field.
//
//   {"version": 1,
//    "tokens": [1, 2, 4, ...],                 units whose only step quantity is NUM_TOKS
//    "tokens_by_class": {"matmul": [...]},     the same for op classes (the trace's rule class) that need another
//    "requests": [1, 2, 4, ...],               units whose only step quantity is NUM_REQS (decodes of 1 token)
//    "compositions": {                         everything else (attention, KV-cache reads, logits of requests)
//      "prefill": {"chunk": [...], "context": [...]},      one request: chunk new tokens after context cached ones
//      "decode":  {"batch": [...], "context": [...]},      batch requests of one new token each after context
//      "mixed":   [{"decodes": 8, "decode_context": 1024, "chunk": 256, "chunk_context": 0}, ...]},
//    "composition_stride_by_class": {"view": 8},  every k-th composition (and the last) for these op classes
//    "moe": {"tokens": [16, 64, ...],         a MoE's grouped GEMM (its experts) also under controlled routing:
//            "experts": [1, 2, 4, ...],         forced: the routed rows spread evenly over this many experts
//            "skew": [0.5, 1.0, ...]},          skewed: expert i of E gets a share of the rows ~ 1/(i+1)^s
//    "bounds": {"max_tokens": 8192, "max_kv_tokens": 262144},
//    "measure": {"warmup_s": 0.02, "min_time_s": 0.15, "max_time_s": 2.0, "min_reps": 10, "rel_ci": 0.01,
//                "point_timeout_s": 60, "settle_s": 0.5, "settle_min_latency_s": 0.001, "capped_settle_s": 2.0,
//                "inputs": "warm"}}
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/plan/composition.hpp"

namespace dooly::plan {

inline constexpr int kGridVersion = 1;

struct MixedPoint {
  int64_t decodes = 0, decode_context = 0, chunk = 0, chunk_context = 0;
};

// The routing sweep of a MoE's grouped GEMM (docs/profile.md, "MoE routing"). Every grouped GEMM op is measured
// over its token grid with the routed rows spread evenly over every expert (uniform, as a balanced router sends
// them); where this section is present, also at `tokens` with the rows forced onto fewer experts and with skewed
// shares. Its points bind MOE_EXPERTS (experts that may receive rows) and MOE_SKEW (the exponent x 100) besides
// NUM_TOKS.
struct MoeRouting {
  std::vector<int64_t> tokens;
  std::vector<int64_t> experts;  // forced counts; those a uniform spread reaches anyway are skipped
  std::vector<int64_t> skew_percent;
  bool empty() const noexcept { return tokens.empty() || (experts.empty() && skew_percent.empty()); }
};

struct MeasureSettings {
  double warmup_s = 0.02;       // calls before timing, at least this long
  double min_time_s = 0.15;     // each point runs at least this long: the energy window
  double max_time_s = 2.0;      // the repetition cap when the interval never narrows enough
  int64_t min_reps = 10;        // timed calls (or graph replays) at least
  double rel_ci = 0.01;         // stop when the 95 % interval of the mean is within +-rel_ci of it
  double point_timeout_s = 60;  // a point still running after this is stopped and stored as a timeout
  // The settle period: a unit of at least settle_min_latency_s a call replays for settle_s before its timed window
  // (the clocks rise over the first ~0.3 s of sustained load), and up to capped_settle_s in all while the power
  // controller holds the SM clock below its maximum (docs/profile.md, "Energy").
  double settle_s = 0.5;
  double settle_min_latency_s = 1e-3;
  double capped_settle_s = 2.0;
  // A long point that starts within this many seconds of the end of its unit's previous settled point (the unit's
  // points run largest first, back to back) counts the unit's run so far as settled time; 0: every long point
  // settles from scratch (docs/profile.md, "The settle period").
  double settle_carry_gap_s = 0.0;
  // Which inputs cycle past the L2 between calls: "warm" (the default) cycles the inputs that do not grow with the
  // step (weights, caches, tables: read from HBM in serving, the other layers ran in between) and makes the
  // step-sized ones (activations, which the engine's previous op has just written) once, kept in place; "cycled"
  // cycles every input. Chosen by the composition check (docs/profile.md, "Caches").
  std::string inputs = "warm";
};

// The settings as the plan's JSON and the worker carry them.
nlohmann::json measure_json(const MeasureSettings& m);

struct Grid {
  std::vector<int64_t> tokens;
  std::map<std::string, std::vector<int64_t>> tokens_by_class;
  std::vector<int64_t> requests;
  std::vector<int64_t> prefill_chunk, prefill_context;
  std::vector<int64_t> decode_batch, decode_context;
  std::vector<MixedPoint> mixed;
  std::map<std::string, int64_t> composition_stride_by_class;
  MoeRouting moe;
  int64_t max_tokens = 8192;
  int64_t max_kv_tokens = 262144;
  MeasureSettings measure;
  std::string sha256;  // of the file's bytes (provenance of every measurement)
  std::string origin;  // the file, for messages

  const std::vector<int64_t>& tokens_for(const std::string& op_class) const {
    auto it = tokens_by_class.find(op_class);
    return it == tokens_by_class.end() ? tokens : it->second;
  }
  // Every composition of the "compositions" section, bounded by max_tokens and max_kv_tokens, in file order.
  std::vector<Composition> compositions() const;
  // The compositions an op class is swept over: every one, or every k-th (and the last) where a stride is set.
  std::vector<Composition> compositions_for(const std::string& op_class) const;
};

Grid parse_grid(const nlohmann::json& j, const std::string& origin);
Grid read_grid(const std::string& path);  // InputError when missing or not JSON, with the fix

}  // namespace dooly::plan
