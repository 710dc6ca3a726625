#!/usr/bin/env bash
# Fits a power sensor's effective averaging window and lag from a recorded run (DOOLY_RECORD) by re-running
# the model mode over a grid and printing the fit residual for each pair (lowest first). With the Kokkos
# demo's stdout (reference lines from the energy counter) it also prints the interleaved J/call errors.
#   scripts/analysis/sensor_window_grid.sh RECORDING [DEMO_STDOUT]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
rec=$1
ref=${2:-}
dooly=${DOOLY_BIN:-$ROOT/build/default/src/dooly/cli/dooly}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for w in 0 2 5 10 15 20 25 30 40; do
  for d in 0 2 4 6 8 10 15 20; do
    "$dooly" analyze "$rec" --json "$tmp/r.json" --sensor-window-ms "$w" --sensor-delay-ms "$d" >/dev/null
    res=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['channels'][0]['model_fit']; print(f\"{c['residual_rms_w']:.2f}\")" "$tmp/r.json")
    line="window_ms=$w delay_ms=$d residual_w=$res"
    if [ -n "$ref" ]; then
      errs=$(python3 "$ROOT/scripts/gpu/summarize_kokkos.py" demo "$ref" "$tmp/r.json" | awk '/^(stream_triad|fma_chain)/{printf "%s %s%% ", $1, $8}')
      line="$line $errs"
    fi
    echo "$line"
  done
done | sort -t= -k4 -g
