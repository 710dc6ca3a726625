#pragma once
// The accelerator a simulation runs on: what the engines' memory planners see and what the analytic cost model's
// roofline uses. The defaults are the H200 this project measures on (REFERENCE §1, docs/results/): 143,771 MiB as
// torch reports it, idle 120–128 W at P0, a 700 W cap; HBM3e 4.8 TB/s and 989 TFLOP/s dense bf16 are NVIDIA's
// datasheet figures.
#include <string>

namespace dooly::sim {

struct GpuSpec {
  std::string name = "H200";
  double memory_gib = 143771.0 / 1024.0;  // total device memory (torch.cuda.mem_get_info's total)
  double hbm_bytes_per_s = 4.8e12;
  double peak_flops = 989e12;  // dense bf16 tensor-core
  double idle_power_w = 124;   // board power when nothing runs
  double max_power_w = 700;    // the power cap
};

}  // namespace dooly::sim
