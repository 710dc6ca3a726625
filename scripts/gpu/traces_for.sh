#!/usr/bin/env bash
# The GPU traces a profiling command needs, in DIR/all: those the repository ships (data/traces/h200/traces.tgz,
# GPU traces of an earlier session: tracing the corpus costs ~5 H200-minutes a session) and, for every
# (model, backend) it lacks, a fresh trace (scripts/gpu/trace_models.sh). New traces are also packed, with the
# shipped ones, into DIR/traces.tgz: copy that to data/traces/h200/ and commit it. DIR/done marks the work done
# (the folder survives between commands while the machine is held).
#   scripts/gpu/traces_for.sh DIR "BACKEND..." "MODEL..." [LOG]
# Environment: SHIPPED (default data/traces/h200/traces.tgz), WORKERS_PER_GPU, JOB_TIMEOUT, BIG (trace_models.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
dir=$1 backends=$2 models=$3 log=${4:-/dev/null}
SHIPPED=${SHIPPED:-data/traces/h200/traces.tgz}
[ -f "$dir/done" ] && exit 0
mkdir -p "$dir/all"
name() { echo "$1__paged_$2.json"; }  # model backend -> the trace's file name (dooly.cli_trace)
if [ -f "$SHIPPED" ]; then
  want=()
  for b in $backends; do for m in $models; do want+=("$(name "$m" "$b")"); done; done
  tar -xzf "$SHIPPED" -C "$dir/all" "${want[@]}" 2>/dev/null  # the ones it has; the rest are traced below
fi
fresh=0
for b in $backends; do
  missing=""
  for m in $models; do [ -f "$dir/all/$(name "$m" "$b")" ] || missing="$missing $m"; done
  [ -n "$missing" ] || { echo "traces_for: $b: every model shipped ($SHIPPED)"; continue; }
  echo "traces_for: $b: tracing$missing"
  OUT=$dir/run-$b VERIFY=0 WORKERS_PER_GPU=${WORKERS_PER_GPU:-3} JOB_TIMEOUT=${JOB_TIMEOUT:-300} MODELS="$missing" \
    BIG=${BIG-"mixtral-8x7b-v0.1 qwen3-30b-a3b olmo-2-1124-7b"} bash scripts/gpu/trace_models.sh "$b" >> "$log" 2>&1
  for f in "$dir/run-$b"/traces-*.tgz; do [ -f "$f" ] && tar -xzf "$f" -C "$dir/all"; done
  grep -E "FAILED|skipped|done in" "$dir/run-$b/progress.txt" 2>/dev/null
  fresh=1
done
if [ "$fresh" = 1 ]; then  # the shipped traces and the new ones, in one file for the repository
  tmp=$(mktemp -d)
  [ -f "$SHIPPED" ] && tar -xzf "$SHIPPED" -C "$tmp"
  cp "$dir"/all/*.json "$tmp"/ 2>/dev/null
  (cd "$tmp" && tar -czf "$dir/traces.tgz" -- *.json) && rm -rf "$tmp"
fi
touch "$dir/done"
echo "traces_for: $(ls "$dir"/all/*.json 2>/dev/null | wc -l) traces in $dir/all"
