#!/usr/bin/env bash
# What the HF engine's GPU runs in a step, by kernel, with CUDA graphs on and off (issue 12: the simulator priced
# graphs-on decode steps at 44 ms from the units against 32-34 ms live). Serves decode-heavy workloads of known
# batch (BATCHES requests with PROMPT-token prompts and OUTPUT new tokens, all arriving at once) with `python -m
# dooly.live` under libdooly_cupti.so (CUDA_INJECTION64_PATH: every kernel with GPU timestamps, including the ones
# a graph replay launches), and keeps for each run the live result (steps, their durations) and the CUPTI report
# (time and calls by kernel). scripts/analysis/step_kernels.py turns them into device time per step by kernel.
#
#   scripts/gpu/graph_step_kernels.sh                   (carry .deps; ~40 s a run, mostly loading)
#   MODEL=llama-3.1-8b GRAPHS="on off" BATCHES="8 32" PROMPT=32 OUTPUT=128 scripts/gpu/graph_step_kernels.sh
#   OUTPUTS="64 128" ...   runs each (graphs, batch) at each output length, named <run>__out-N: step_kernels.py
#                          differences them into the kernels of the added steps alone (the engine's start-up
#                          warm-up at its largest shapes cancels)
#
# $OUT gets step-kernels.tgz: <model>__graphs-<g>__batch-<b>.{json.gz,cupti.json,log} and env.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
T0=$(date +%s)
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
MODEL=${MODEL:-llama-3.1-8b}
GRAPHS=${GRAPHS:-"on off"}
BATCHES=${BATCHES:-"8 32"}
PROMPT=${PROMPT:-32}
OUTPUT=${OUTPUT:-128}
OUTPUTS=${OUTPUTS:-$OUTPUT}
MBTS=${MBTS:-2048}  # max_batch_tokens values (the mask rows are 1,024 x 256 + it wide: 2049 makes them unaligned)
RES=/tmp/dooly-step-kernels; rm -rf "$RES"; mkdir -p "$RES"
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
core=${CORE:-/tmp/dooly-core}
bash scripts/gpu/build_core.sh "$core" > /tmp/dooly-build.log 2>&1 || { tail -20 /tmp/dooly-build.log; exit 1; }
WORK=$(bash scripts/gpu/cupti_build.sh) || exit 1
LIB="$WORK/src/dooly/cupti/libdooly_cupti.so"
export PYTHONPATH="$ROOT/python:$core" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
{
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} 2>&1 | tee "$RES/env.txt"
for g in $GRAPHS; do
  for b in $BATCHES; do
   for mbt in $MBTS; do for o in $OUTPUTS; do
    name="${MODEL}__graphs-${g}__batch-${b}"
    [ "$mbt" = 2048 ] || name="${name}__mbt-${mbt}"
    [ "$OUTPUTS" = "$OUTPUT" ] || name="${name}__out-${o}"
    stamp "$name"
    # All requests at t=0 (rate far above the engine's): the steps after the first prefills decode b requests.
    spec="poisson:rate=10000,n=$b,prompt=uniform:$PROMPT:$PROMPT,output=uniform:$o:$o,seed=1"
    CUDA_INJECTION64_PATH="$LIB" DOOLY_OUTPUT="$RES/$name.cupti" DOOLY_TABLE=0 DOOLY_CUPTI_NVTX=0 \
      timeout 300 python3 -m dooly.live --model "$MODEL" --cuda-graphs "$g" --block-size 256 --num-blocks 1024 \
      --max-batch-tokens "$mbt" --max-batch-requests 64 --warmup 0 --deadline-s 120 --workload "$spec" \
      --out "$RES/$name.json" > "$RES/$name.log" 2>&1
    echo "exit $?"; tail -3 "$RES/$name.log"
    [ -f "$RES/$name.json" ] && gzip -f "$RES/$name.json"
   done; done
  done
done
rm -f "$RES"/*.cupti.csv
tar -czf "$OUT/step-kernels.tgz" -C "$RES" .
stamp done
