#!/usr/bin/env bash
# Issue 13's H200 checks in one device command, stage by stage (each under its own time limit, so one that fails or
# runs long leaves the others their time):
#   cupti    scripts/gpu/validate_cupti.sh      the demo's report and the overhead on a PyTorch loop (goal <= 3 %)
#   overlap  scripts/gpu/validate_overlap.sh    concurrent kernels against their alone references (goal <= 10 %)
#   python   scripts/gpu/validate_python_energy.sh   dooly.energy against the NVML energy counter
# Each stage works in /tmp/dooly-i13/<stage> and comes back as $OUT/<stage>.tgz (the device returns few files),
# with its summary lines appended to $OUT/summary.txt. Variorum has its own command (scripts/gpu/validate_variorum.sh).
#   STAGES="cupti python" bash scripts/gpu/issue13_checks.sh        (carry .deps)
# Environment: STAGES (default: cupti overlap python), LIMIT_<STAGE> seconds (defaults: cupti 330, overlap 200,
# python 200), OUT (default ./out); the stages' own variables (REPS, ITERS, RUNS, PHASE_S, ROUNDS, ...) pass through.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
STAGES=${STAGES:-cupti overlap python}
T0=$(date +%s)
for stage in $STAGES; do
  case $stage in
    cupti) script=validate_cupti.sh; limit=${LIMIT_CUPTI:-330}; keep="demo-check.txt overhead.txt" ;;
    overlap) script=validate_overlap.sh; limit=${LIMIT_OVERLAP:-200}; keep="summary.txt" ;;
    python) script=validate_python_energy.sh; limit=${LIMIT_PYTHON:-200}; keep="check.jsonl" ;;
    *) echo "issue13_checks: unknown stage '$stage' (cupti, overlap, python)" >&2; exit 2 ;;
  esac
  dir=/tmp/dooly-i13/$stage
  rm -rf "$dir" && mkdir -p "$dir"
  echo "== $stage (+$(( $(date +%s) - T0 )) s, limit $limit s)" | tee -a "$OUT/summary.txt"
  OUT=$dir timeout "$limit" bash "$ROOT/scripts/gpu/$script" > "$dir/stage.log" 2>&1
  rc=$?
  echo "== $stage exit $rc after +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/summary.txt"
  for f in $keep; do [ -f "$dir/$f" ] && cat "$dir/$f" >> "$OUT/summary.txt"; done
  [ $rc = 0 ] || tail -25 "$dir/stage.log" | tee -a "$OUT/summary.txt"
  tar -czf "$OUT/$stage.tgz" -C /tmp/dooly-i13 "$stage"
done
cat "$OUT/summary.txt"
