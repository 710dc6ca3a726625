#!/usr/bin/env bash
# Live runs for the simulator's validation (issue 12 section 4) on a GPU machine: `python -m dooly.live` (what
# `dooly live` execs; the GPU image has no CLI11, so the binding alone is built) serves Poisson workloads on the real
# HF engine for each model, CUDA-graph mode and load level, from light load to overload, and records every request's
# tokens, every step's composition and energy (NVML) into one result file per run (docs/simulate.md, "Live runs").
#
#   scripts/gpu/live_validate.sh                                    (carry .deps; one call of at most 10 minutes)
#   MODELS=olmoe-1b-7b-0924 GRAPHS=on RATES="1 4" scripts/gpu/live_validate.sh
#
# Fits 10-minute calls and resumes: runs go in the order model, graphs, rate; a run whose result file exists is not
# run again; no run starts when less than RUN_DEADLINE_S + 60 s of DEADLINE_S is left. Results stay in
# /tmp/dooly-live while the machine is held, and every call packs all of them into $OUT/live-<model>.tgz (one archive
# a model: $OUT brings back at most 8 files of 16 MiB); to resume on a fresh machine, put those archives in the tree
# (e.g. data/live/h200/, or a carried folder) and pass them as PREV: their files count as done. Each result is
# <model>__graphs-<on|off>__rate-<R>.json.gz with its log beside it.
#
# Environment (defaults in brackets):
#   MODELS        [llama-3.1-8b qwen3-8b olmoe-1b-7b-0924]
#   GRAPHS        [off on]
#   RATES         requests/s, light load to overload [8B models: 0.5 1 2 4 8; OLMoE: 1 2 4 8 16 32]; the engine limits
#                 below put capacity near 3-6 requests/s for the 8B models (graphs off ~140 ms a step for up to 64
#                 requests of ~80 output tokens), so the top levels overload
#   ARRIVAL_S     [20] seconds of arrivals per run: n = max(16, rate x ARRIVAL_S) requests
#   PROMPT        [uniform:64:1024]   OUTPUT [uniform:32:128]   SEED [1] (every level serves the same lengths)
#   BLOCK_SIZE [256]  NUM_BLOCKS [1024]  MAX_BATCH_TOKENS [2048]  MAX_BATCH_REQUESTS [64]   (empty: the engine's own)
#   SCHEDULER     [fifo]     WARMUP [4] requests before each measured run     SLO [ttft_s=2,tpot_s=0.2]
#   RUN_DEADLINE_S [150] one run's limit (unfinished requests are recorded as such)
#   DEVICE [cuda]  TINY [unset; 1: the tiny models]: DEVICE=cpu TINY=1 smoke-tests this script on a machine without
#                 a GPU (with DEPS pointing at a .deps folder, NUM_BLOCKS= MAX_BATCH_TOKENS= for the CPU defaults)
#   REPEAT        [1] runs of each (model, graphs, rate), back to back; the k-th (k > 1) is <name>__repeat-k: the same
#                 workload served again, the engine's own run-to-run spread (scripts/analysis/compare_live.py prints
#                 each repeat against the first run beside the simulation's error)
#   DEADLINE_S    [540] from this command's start     PREV (earlier calls' live-*.tgz, space-separated)   OUT [./out]
#   WORK [/tmp/dooly-live] where results accumulate      CORE [/tmp/dooly-core] where the binding is built
# $OUT gets live-<model>.tgz (that model's results and logs so far, env.txt, summary.txt) and summary.txt (one line
# per run, every model).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
T0=$(date +%s)
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
MODELS=${MODELS:-"llama-3.1-8b qwen3-8b olmoe-1b-7b-0924"}
GRAPHS=${GRAPHS:-"off on"}
ARRIVAL_S=${ARRIVAL_S:-20}
PROMPT=${PROMPT:-uniform:64:1024}
OUTPUT=${OUTPUT:-uniform:32:128}
SEED=${SEED:-1}
BLOCK_SIZE=${BLOCK_SIZE-256}
NUM_BLOCKS=${NUM_BLOCKS-1024}
MAX_BATCH_TOKENS=${MAX_BATCH_TOKENS-2048}
MAX_BATCH_REQUESTS=${MAX_BATCH_REQUESTS-64}
SCHEDULER=${SCHEDULER:-fifo}
WARMUP=${WARMUP:-4}
SLO=${SLO:-ttft_s=2,tpot_s=0.2}
RUN_DEADLINE_S=${RUN_DEADLINE_S:-150}
REPEAT=${REPEAT:-1}
case "$REPEAT" in ''|*[!0-9]*|0) echo "live_validate: REPEAT must be a whole number >= 1, got '$REPEAT'"; exit 2 ;; esac
DEADLINE_S=${DEADLINE_S:-540}
DEVICE=${DEVICE:-cuda}
tiny=(); [ -n "${TINY:-}" ] && tiny=(--tiny)
RES=${WORK:-/tmp/dooly-live}/results; mkdir -p "$RES"
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

for prev in ${PREV:-}; do
  [ -f "$prev" ] || { echo "live_validate: PREV file $prev does not exist (give earlier calls' live-*.tgz)"; exit 2; }
  tar -xzf "$prev" -C "$RES" && stamp "resumed from $prev: $(ls "$RES"/*.json.gz 2>/dev/null | wc -l) results"
done
core=${CORE:-/tmp/dooly-core}
bash scripts/gpu/build_core.sh "$core" > /tmp/dooly-build.log 2>&1 || { tail -20 /tmp/dooly-build.log; exit 1; }
export PYTHONPATH="$ROOT/python:$core" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader \
  2>&1 | tee "$RES/env.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' \
  | tee -a "$RES/env.txt"
# The host CPU: the engine's host cost (most of an eager step, and a capture) follows it; machines lent on different
# days differed by ~25 % in the same eager step (docs/results/2026-12-05-h200-captures-routing-heldout.md).
echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores" | tee -a "$RES/env.txt"

rates_for() {
  if [ -n "${RATES:-}" ]; then echo "$RATES"; return; fi
  case "$1" in olmoe*) echo "1 2 4 8 16 32" ;; *) echo "0.5 1 2 4 8" ;; esac
}
limits=()
[ -n "$BLOCK_SIZE" ] && limits+=(--block-size "$BLOCK_SIZE")
[ -n "$NUM_BLOCKS" ] && limits+=(--num-blocks "$NUM_BLOCKS")
[ -n "$MAX_BATCH_TOKENS" ] && limits+=(--max-batch-tokens "$MAX_BATCH_TOKENS")
[ -n "$MAX_BATCH_REQUESTS" ] && limits+=(--max-batch-requests "$MAX_BATCH_REQUESTS")

stopped=0
for m in $MODELS; do
  for g in $GRAPHS; do
    # rate:k for each rate and each of its REPEAT runs, in that order
    for rk in $(for r in $(rates_for "$m"); do seq -f "$r:%g" 1 "$REPEAT"; done); do
      r=${rk%:*} k=${rk##*:}
      name="${m}__graphs-${g}__rate-${r}"
      [ "$k" -gt 1 ] && name="${name}__repeat-$k"
      [ -f "$RES/$name.json.gz" ] && { echo "done before: $name"; continue; }
      left=$(( DEADLINE_S - ($(date +%s) - T0) ))
      if [ "$left" -lt $(( RUN_DEADLINE_S + 60 )) ]; then
        stamp "stopping: $left s left, a run needs up to $(( RUN_DEADLINE_S + 60 )) s; call again to go on"
        stopped=1; break 3
      fi
      n=$(python3 -c "import math; print(max(16, math.ceil($r * $ARRIVAL_S)))")
      spec="poisson:rate=$r,n=$n,prompt=$PROMPT,output=$OUTPUT,seed=$SEED"
      stamp "$name ($spec)"
      timeout $(( RUN_DEADLINE_S + 120 )) python3 -m dooly.live --model "$m" "${tiny[@]}" --device "$DEVICE" \
        --cuda-graphs "$g" \
        --scheduler "$SCHEDULER" "${limits[@]}" --warmup "$WARMUP" --slo "$SLO" --deadline-s "$RUN_DEADLINE_S" \
        --workload "$spec" --out "$RES/$name.json" > "$RES/$name.log" 2>&1
      rc=$?
      tail -4 "$RES/$name.log"
      # Exit 3: the run finished with problems listed in the file; it is kept (and not run again).
      if [ -f "$RES/$name.json" ] && { [ $rc -eq 0 ] || [ $rc -eq 3 ]; }; then
        gzip -f "$RES/$name.json"
      else
        echo "run failed: $name (exit $rc)"; mv "$RES/$name.log" "$RES/$name.failed.log"
      fi
    done
  done
done

python3 - "$RES" <<'PY' | tee "$RES/summary.txt"
import glob, gzip, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json.gz"))):
    d = json.load(gzip.open(f))
    s, p, e, w = d["summary"], d["power"], d["engine"], d["workload"]
    ms = lambda x, k="median": "-" if not x else f"{x[k] * 1e3:.0f}"
    rows.append(f"{e['model']:<18} graphs {'on ' if e['cuda_graphs']['decode'] else 'off'} rate {w['rate']:>5g} "
                f"done {s['completed']:>4}/{s['requests']:<4} {s['duration_s']:7.1f} s steps {s['steps']:>5}  "
                f"TTFT {ms(s['ttft_s'])}/{ms(s['ttft_s'], 'p99')} ms  TPOT {ms(s['tpot_s'])}/{ms(s['tpot_s'], 'p99')} ms  "
                f"E2E {ms(s['e2e_s'])} ms  {s['output_throughput_tps'] or 0:7.1f} tok/s  "
                f"goodput {s['goodput_rps'] or 0:5.2f}/s  "
                + (f"{s['j_per_output_token']:.3f} J/tok  {s['avg_power_w']:.0f} W  counter {p['counter_ratio'] or 0:.3f}"
                   if s.get("j_per_output_token") is not None else f"no energy ({p.get('why', '')[:60]})")
                + (f"  PROBLEMS {len(d['problems'])}" if d["problems"] else ""))
print("\n".join(rows) if rows else "no results yet")
PY
cp "$RES/summary.txt" "$OUT/summary.txt"
for m in $(cd "$RES" && ls *__graphs-*.json.gz *__graphs-*.log 2>/dev/null | sed 's/__graphs-.*//' | sort -u); do
  (cd "$RES" && tar -czf "$OUT/live-$m.tgz" env.txt summary.txt "$m"__graphs-*)
done
stamp "packed $(ls "$RES"/*.json.gz 2>/dev/null | wc -l) results into $(cd "$OUT" && ls live-*.tgz 2>/dev/null | tr '\n' ' ')$([ $stopped -eq 1 ] && echo '; more to run')"
