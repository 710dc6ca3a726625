#!/usr/bin/env bash
# Short live check on a GPU machine without Kokkos: builds dooly energy-only and the bundled CUDA demo
# (examples/cuda_energy_demo, which drives libkp_gpu_energy.so through the Kokkos Tools entry points), runs it
# with a recording, and leaves table, JSON, recording and environment under $OUT (default ./out).
# Needs .deps/ (scripts/gpu/pack_deps.sh) where fmt/nlohmann/Eigen are not installed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
WORK=${WORK:-$ROOT/build/gpu-cuda}
{ date -u '+date: %F %T UTC'; nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader; nvcc --version | tail -1; } > "$OUT/env.txt"
cmake -S "$ROOT" -B "$WORK" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOOLY_ENERGY_ONLY=ON > "$OUT/build.log" 2>&1
cmake --build "$WORK" -j "$(nproc)" --target kp_gpu_energy >> "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
nvcc -O3 -std=c++17 -arch=sm_90 "$ROOT/examples/cuda_energy_demo/cuda_energy_demo.cu" -o "$WORK/cuda_energy_demo"
KOKKOS_TOOLS_LIBS="$WORK/src/dooly/kokkos/libkp_gpu_energy.so" DOOLY_OUTPUT="$OUT/cuda_demo" \
  DOOLY_RECORD="$OUT/cuda_demo.recording" DOOLY_LOG=info \
  "$WORK/cuda_energy_demo" "${PHASE_S:-3}" "${STEP_MS:-3}" | tee "$OUT/cuda_demo.txt"
gzip -f "$OUT/cuda_demo.recording"
