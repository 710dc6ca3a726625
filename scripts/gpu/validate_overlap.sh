#!/usr/bin/env bash
# GPU validation of how libdooly_cupti.so splits power among kernels that overlap (issue 13, section 2), on an
# NVIDIA H200. Everything under $OUT (default ./out/overlap):
#   1. builds the library and examples/cuda_overlap (scripts/gpu/cupti_build.sh);
#   2. runs cuda_overlap under the library RUNS times (three kernels of different power -- FMA chain, memory
#      triad, WMMA tensor-core GEMM -- alone, then concurrently on three streams with varying overlaps), each run
#      with its report, recording and Perfetto trace;
#   3. prints, per kernel and run, J/call concurrent (instance <1>) against alone (instance <0>) in the model mode
#      with its 95 % interval, in the trapezoid mode, and for a naive split by time (the power above the floor at
#      each instant shared equally among the kernels running, from the trace), and whether each is within the
#      10 % goal (summarize_overlap.py: the figures as the live library reported them).
# The engine's split of the overlapped readings (docs/energy-attribution.md, "Concurrent kernels") is checked from
# the recordings on any machine with the full build: python3 scripts/analysis/overlap_engine_check.py
# $OUT/run*.recording.gz (each kernel's overlapped calls against its calls alone; commit the recordings to data/runs/).
# Environment: OUT, WORK, RUNS (default 3), PHASE_S (default 4), TARGET_MS (default 3), DELAY (host: the host varies
# the overlaps, the default since 2026-12-04; device: a spin kernel does, as the first H200 runs), SKIP_BUILD=1, PYTHON.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out/overlap}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
RUNS=${RUNS:-3}
T0=$(date +%s)
log() { echo "[validate_overlap +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/progress.log"; }
: > "$OUT/progress.log"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,power.limit --format=csv,noheader || true
  (PATH=$PATH:/usr/local/cuda/bin nvcc --version | tail -1) || true
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

log "building"
WORK=$(bash "$ROOT/scripts/gpu/cupti_build.sh")
LIB="$WORK/src/dooly/cupti/libdooly_cupti.so"
for run in $(seq "$RUNS"); do
  log "run $run of $RUNS"
  CUDA_INJECTION64_PATH="$LIB" DOOLY_OUTPUT="$OUT/run$run" DOOLY_RECORD="$OUT/run$run.recording" \
    DOOLY_TRACE="$OUT/run$run.trace.json" DOOLY_TRACE_MAX_WINDOWS=20000000 DOOLY_LOG=info \
    "$WORK/examples/cuda_overlap/cuda_overlap" --phase-s "${PHASE_S:-4}" --target-ms "${TARGET_MS:-3}" \
    --delay "${DELAY:-host}" \
    > "$OUT/run$run.txt" 2>&1 || { cat "$OUT/run$run.txt"; exit 1; }
  grep -E "^(calibrated|phase|cuda_overlap)" "$OUT/run$run.txt" || true
done
reports=(); for run in $(seq "$RUNS"); do reports+=("$OUT/run$run.json"); done  # not run*.json: the traces match
$PY "$ROOT/scripts/gpu/summarize_overlap.py" "${reports[@]}" | tee "$OUT/summary.txt"
gzip -f "$OUT"/run*.recording "$OUT"/run*.trace.json
log "done: $OUT"
