#!/usr/bin/env bash
# The simulator's speed target (issue 12): 100,000 requests of docs/simulate.md's benchmark workload in <= 2.5 s
# and <= 300 MB peak RSS, start-up and result.json included. Times the whole `dooly simulate` command with
# farm-bench (median of RUNS runs after one warm-up; peak RSS is the OS's accounting), per engine model.
#   bench/run_sim_bench.sh [build dir = build/default]      RUNS=5 by default
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
dooly=$build/src/dooly/cli/dooly
[ -x "$dooly" ] || { echo "run_sim_bench: $dooly is missing; build it: scripts/build.sh default dooly" >&2; exit 2; }
command -v farm-bench >/dev/null || { echo "run_sim_bench: farm-bench is not installed" >&2; exit 2; }
workload="poisson:rate=6.45,n=100000,prompt=lognormal:900:0.7:16:8192,output=lognormal:160:0.75:1:2048,seed=1"
out=$(mktemp -d /tmp/dooly-sim-bench-XXXXXX)
trap 'rm -rf "$out"' EXIT
for engine in hf vllm; do
  echo "== dooly simulate --engine $engine, 100,000 requests ($workload)"
  farm-bench -n "${RUNS:-5}" --timeout 300 -- "$dooly" simulate --model llama-3.1-8b --engine "$engine" \
    --workload "$workload" --out "$out/result-$engine.json"
  "$dooly" simulate --model llama-3.1-8b --engine "$engine" --workload "$workload" --out "$out/result-$engine.json" \
    | sed -n '2p'
  ls -l "$out/result-$engine.json" | awk '{printf "result.json: %.0f MB\n", $5 / 1e6}'
done
