#!/usr/bin/env bash
# The main job. Sets up what it needs, builds dooly, then:
#  - with an NVIDIA GPU and nvcc: measures the bundled CUDA demo live through libkp_gpu_energy.so (the same
#    Kokkos Tools interface a Kokkos program uses) and prints the per-kernel energy table;
#  - without: re-analyses a run recorded on an NVIDIA H200 (power readings + kernel windows, shipped under
#    data/runs/) with the same attribution engine and prints its table.
# Then, GPU or not, the other half: a deployment simulated before it runs (docs/simulate.md), Llama-3.1-8B served by
# Hugging Face continuous batching under a Poisson load, every step priced from the shipped H200 profiling store
# (data/profile/h200.sqlite: time and energy per operator signature): TTFT, TPOT, throughput, J per token.
# Outputs (CSV, JSON, and PNG charts from `dooly plot` and `dooly simulate --plot`) go to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
DOOLY_SKIP_PYTHON=1 bash scripts/setup.sh
bash scripts/build.sh default dooly kp_gpu_energy >/dev/null
mkdir -p out
BIN=build/default/src/dooly
RECORDING=data/runs/h200-kokkos-demo.recording

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  echo "demo: GPU found ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)); measuring the bundled CUDA demo live"
  nvcc -O3 -std=c++17 -arch=native examples/cuda_energy_demo/cuda_energy_demo.cu -o build/default/cuda_energy_demo
  KOKKOS_TOOLS_LIBS="$PWD/$BIN/kokkos/libkp_gpu_energy.so" DOOLY_OUTPUT=out/demo DOOLY_RECORD=out/demo.recording \
    build/default/cuda_energy_demo "${DEMO_PHASE_S:-2}"
  echo "demo: wrote out/demo.csv, out/demo.json and out/demo.recording"
  "$BIN/cli/dooly" plot out/demo.recording --out out/demo
else
  echo "demo: no GPU here; re-analysing a run recorded on an NVIDIA H200: $RECORDING"
  echo "      ($(grep -m1 '^meta,recorded' "$RECORDING" | cut -d, -f3- || true))"
  # The recording predates the H200 sensor characterisation (docs/results/2026-11-30-h200-sensor-window.md):
  # give the model mode the fitted effective window and lag, which the nvml backend now uses by default.
  "$BIN/cli/dooly" analyze "$RECORDING" --sensor-window-ms 25 --sensor-delay-ms 4 --csv out/demo.csv --json out/demo.json
  echo "demo: wrote out/demo.csv and out/demo.json"
  "$BIN/cli/dooly" plot "$RECORDING" --sensor-window-ms 25 --sensor-delay-ms 4 --out out/demo
fi

echo
echo "demo: simulating Llama-3.1-8B on HF continuous batching, steps priced from the H200 store (data/profile/h200.sqlite)"
"$BIN/cli/dooly" simulate --model llama-3.1-8b --db data/profile/h200.sqlite --cuda-graphs off \
  --workload 'poisson:rate=2,n=400,prompt=lognormal:400:0.7:16:2048,output=uniform:16:256,seed=1' \
  --slo ttft:500,tpot:100 --out out/sim.json --csv out/sim.csv --plot out/sim
echo "demo: wrote out/sim.json, out/sim.csv, out/sim-latency.png and out/sim-steps.png"
