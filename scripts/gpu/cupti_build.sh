#!/usr/bin/env bash
# Builds what the CUPTI validation runs need on a GPU machine, into $WORK (default build/gpu-cupti): dooly
# energy-only (-DDOOLY_ENERGY_ONLY=ON: common, power, energy, the Kokkos connector and libdooly_cupti.so; fmt,
# nlohmann/json and Eigen from .deps/ where the machine lacks them: scripts/gpu/pack_deps.sh makes it) and, with
# the machine's nvcc, the CUDA examples cupti_demo and cuda_overlap (CUDA_ARCH, default 90 for Hopper).
# Prints the build folder. SKIP_BUILD=1 reuses it as it is.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-$ROOT/build/gpu-cupti}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  mkdir -p "$WORK"
  PATH=$PATH:/usr/local/cuda/bin
  cmake -S "$ROOT" -B "$WORK" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOOLY_ENERGY_ONLY=ON \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DDOOLY_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > "$WORK/configure.log" 2>&1 \
    || { tail -30 "$WORK/configure.log" >&2; exit 1; }
  cmake --build "$WORK" -j "$JOBS" --target dooly_cupti_injection cupti_demo cuda_overlap > "$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log" >&2; exit 1; }
fi
echo "$WORK"
