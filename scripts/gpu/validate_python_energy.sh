#!/usr/bin/env bash
# GPU check of dooly.energy (docs/python-energy.md) on an NVIDIA H200, in one go: builds the binding
# (scripts/gpu/build_core.sh; carry .deps), runs scripts/gpu/python_energy_check.py (a PyTorch GEMM loop, a copy
# loop and idle, each as one long window against the NVML energy counter, then interleaved as short windows), and
# writes env.txt and check.jsonl under $OUT (default ./out/python-energy).
#   scripts/gpu/validate_python_energy.sh            SECONDS_PER_PHASE (default 4), ROUNDS (default 20)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out/python-energy}
mkdir -p "$OUT"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,power.limit --format=csv,noheader || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
bash "$ROOT/scripts/gpu/build_core.sh" /tmp/dooly-core
PYTHONPATH="$ROOT/python:/tmp/dooly-core" python3 "$ROOT/scripts/gpu/python_energy_check.py" \
  --seconds "${SECONDS_PER_PHASE:-4}" --rounds "${ROUNDS:-20}" | tee "$OUT/check.jsonl"
