#pragma once
// The engine settings of a simulation. Unset optionals take the value the engine itself would resolve (its
// memory planner, its defaults); config.hpp maps every field to one command-line flag.
#include <cstdint>
#include <optional>
#include <string>

#include "dooly/sim/gpu_spec.hpp"

namespace dooly::sim {

struct EngineConfig {
  std::string engine = "hf";                // hf | vllm
  std::string scheduler;                    // hf: fifo (default) | prefill_first; vllm: fcfs (default)
  std::string attention = "paged|sdpa";     // hf: paged|sdpa | paged|eager
  std::string cuda_graphs = "auto";         // auto (the engine's own choice) | on | off
  std::string dtype = "bfloat16";           // bfloat16 | float16 | float32
  std::optional<int64_t> max_batch_tokens;  // hf: max_batch_tokens; vllm: max_num_batched_tokens
  std::optional<int64_t> num_blocks;
  std::optional<int64_t> block_size;    // hf 256, vllm 16
  std::optional<int64_t> max_requests;  // hf: max_requests_per_batch; vllm: max_num_seqs
  std::optional<double> safety_margin;  // hf: free-block fraction under which no new prefill is admitted
  double memory_fraction = 0.9;         // hf: max_memory_percent; vllm: gpu_memory_utilization
  double reserved_gib = 1.5;            // memory the process holds besides the weights when the cache is sized
  int64_t q_padding = 64;               // hf graphs: q_padding_interval_size
  int64_t kv_padding = 16384;           // hf graphs: kv_padding_interval_size
  bool warmup = true;                   // hf graphs: the largest varlen graph is captured before serving
  // The first N requests' lengths served as one batch before the run (`dooly live --warmup N`); what the engine
  // keeps from it carries over (hf: its CUDA graphs).
  int64_t warmup_requests = 0;
  bool chunked_prefill = true;     // vllm: enable_chunked_prefill (HF always splits long prompts)
  int64_t max_capture_size = 512;  // vllm graphs: the largest captured batch (tokens)
  GpuSpec gpu;

  int dtype_bytes() const { return dtype == "float32" ? 4 : 2; }
};

}  // namespace dooly::sim
