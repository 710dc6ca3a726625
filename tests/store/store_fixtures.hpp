#pragma once
// Rows the store tests write: a signature hash from a number, and the H200 context the traces were taken under.
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

}  // namespace dooly::testing
