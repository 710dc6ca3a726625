#pragma once
// Rows the store tests write: a signature hash from a number, and the H200 context the traces were taken under.
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "dooly/store/records.hpp"

namespace dooly::testing {

// A valid signature hash (64 lowercase hex digits) for test signature n.
inline std::string hex(int n) { return fmt::format("{:064x}", n); }

// The provenance of an H200 trace under paged SDPA; extra_json as given (not normalized: the store does that).
inline store::Provenance h200_provenance(std::string extra_json) {
  store::Provenance p;
  p.gpu_name = "NVIDIA H200";
  p.driver_version = "580.159.04";
  p.cuda_version = "13.0";
  p.engine = "hf-transformers";
  p.engine_version = "5.17.0";
  p.attention_backend = "paged|sdpa";
  p.dtype = "bfloat16";
  p.kv_cache_dtype = "bfloat16";
  p.block_size = 256;
  p.tp = 1;
  p.extra_json = std::move(extra_json);
  return p;
}

// An ok point of `tokens` tokens (latency 0.1 ms and 0.07 J a token), measured at unix time `at`.
inline store::Measurement point(int64_t signature_id, int64_t provenance_id, int tokens, int64_t at) {
  store::Measurement m;
  m.signature_id = signature_id;
  m.provenance_id = provenance_id;
  m.point_key = fmt::format(R"({{"NUM_TOKS":{}}})", tokens);
  m.num_tokens = tokens;
  m.repetitions = 10;
  m.latency_mean_s = 1e-4 * tokens;
  m.latency_median_s = 1e-4 * tokens;
  m.latency_min_s = 0.9e-4 * tokens;
  m.latency_max_s = 1.2e-4 * tokens;
  m.latency_std_s = 1e-6;
  m.energy_j = 0.07 * tokens;
  m.energy_hw_j = 0.001;
  m.measured_at_unix_s = at;
  return m;
}

}  // namespace dooly::testing
