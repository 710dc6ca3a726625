#!/usr/bin/env bash
# Issue 11's checks on a GPU machine, in stages that each fit one command (results under $OUT, raw logs included):
#   trace        GPU traces (trace format 3: layouts, in-engine kernel time per op) of $MODELS under sdpa-efficient
#                and eager, kept in /tmp/dooly-checks while the machine stays held
#   composition  scripts/gpu/composition_check.py over the sdpa-efficient traces (units alone vs the engine step)
#   cost         python -m dooly.profile.engine_cost per model, CUDA graphs off and on (the engine's host cost)
#   validate     scripts/gpu/validate_profile_energy.py --long-only over $DB: $POINTS points of >= 1 ms against a
#                5 s energy-counter reference (the 3 % goal)
#
#   STAGES="trace composition" scripts/gpu/issue11_checks.sh      then   STAGES="cost validate" ...
# Environment: MODELS (default: llama-3.1-8b qwen3-8b olmoe-1b-7b-0924, one of them MoE), STAGES (default: all),
#   DB (default data/profile/h200.sqlite), POINTS (default 20), OUT (default ./out).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
T0=$(date +%s)
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
MODELS=${MODELS:-"llama-3.1-8b qwen3-8b olmoe-1b-7b-0924"}
STAGES=${STAGES:-"trace composition cost validate"}
DB=${DB:-data/profile/h200.sqlite}
POINTS=${POINTS:-20}
TR=/tmp/dooly-checks
core=/tmp/dooly-core
bash scripts/gpu/build_core.sh "$core" > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
export PYTHONPATH="$ROOT/python:$core"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/env.txt"
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

if has trace && [ ! -f "$TR/done" ]; then
  stamp trace
  OUT=$TR VERIFY=0 WORKERS_PER_GPU=3 JOB_TIMEOUT=240 MODELS="$MODELS" BIG="" \
    bash scripts/gpu/trace_models.sh sdpa-efficient eager > "$OUT/trace.log" 2>&1
  mkdir -p "$TR/all"
  for f in "$TR"/traces-*.tgz; do tar -xzf "$f" -C "$TR/all"; done
  touch "$TR/done"
  grep -E "FAILED|skipped|done in" "$TR/progress.txt" | tee "$OUT/trace-summary.txt"
fi
ls "$TR"/all/*.json 2>/dev/null | sed 's/^/trace: /'

if has composition; then
  stamp composition
  python3 scripts/gpu/composition_check.py --out "$OUT/composition.json" $(ls "$TR"/all/*sdpa-efficient*.json) \
    2>&1 | tee "$OUT/composition.txt"
fi

if has cost; then
  for m in $MODELS; do
    stamp "cost $m"
    python3 -m dooly.profile.engine_cost --model "$m" --device cuda --graphs off,on --out "$OUT/cost-$m.json" \
      2>&1 | tee "$OUT/cost-$m.txt"
  done
fi

if has validate; then
  stamp validate
  python3 scripts/gpu/validate_profile_energy.py --db "$DB" --traces "$TR/all" --points "$POINTS" --long-only \
    --out "$OUT/energy-validation-long.json" 2>&1 | tee "$OUT/energy-validation-long.txt" | tail -4
fi
stamp done
