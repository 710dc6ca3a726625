#!/usr/bin/env bash
# The engine host cost of the live-validation models (llama-3.1-8b, olmoe-1b-7b-0924, qwen3-8b) with the engine loop in
# its own thread and the live runs' limits (1024 blocks of 256, 2048 tokens), stored into a copy of the shipped
# store that comes back as $OUT/h200.sqlite.gz (carry .deps). Issue 12, 2026-12-04.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
T0=$(date +%s)
bash scripts/gpu/build_core.sh /tmp/dooly-core > /tmp/b.log 2>&1 || { tail -5 /tmp/b.log; exit 1; }
export PYTHONPATH=python:/tmp/dooly-core HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cp data/profile/h200.sqlite /tmp/h200.sqlite
for m in llama-3.1-8b olmoe-1b-7b-0924 qwen3-8b; do
  [ $(( $(date +%s) - T0 )) -gt 250 ] && { echo "skip $m: $(( $(date +%s) - T0 )) s"; continue; }
  echo "== $m at $(( $(date +%s) - T0 )) s"
  timeout 200 python3 -m dooly.profile.engine_cost --model $m --device cuda --graphs off,on --max-batch-tokens 2048 --num-blocks 1024 --out $OUT/cost-$m.json --db /tmp/h200.sqlite 2>&1 | grep -v -i warn | tail -8
done
gzip -c /tmp/h200.sqlite > $OUT/h200.sqlite.gz; gzip $OUT/cost-*.json; ls -la $OUT; echo "total $(( $(date +%s) - T0 )) s"
