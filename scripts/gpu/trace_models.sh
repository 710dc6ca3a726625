#!/usr/bin/env bash
# Dooly traces of the shipped models at real size on a GPU machine (issue 3 item 8), under several attention
# backends. The image there has torch and transformers but none of the C++ dev packages: the binding
# (dooly_core) is built with g++ against the headers scripts/gpu/pack_deps.sh copies into .deps/ (carry it).
# Traces are packed one tarball per backend under $OUT (default ./out); build the table here afterwards with
#   for f in out/traces-*.tgz; do tar -xzf $f -C traces/; done
#   dooly signatures traces/*.json --db h200.sqlite
#
# Usage: scripts/gpu/trace_models.sh [backend ...]
#   backends: sdpa (PyTorch's choice), sdpa-flash, sdpa-efficient, sdpa-cudnn, sdpa-math, eager.
#   A forced SDPA kernel is first tried on a masked bf16 attention like the engine's (paged|sdpa always passes a
#   mask); one that refuses it is skipped with the reason, not traced 13 times to fail.
# Environment:
#   MODELS          models to trace (default: every data/models/*.json)
#   GPUS            CUDA ordinals to spread the jobs over (default "0"); "0@FILE" starts GPU 0's workers only once
#                   FILE exists (another measurement has the GPU until then)
#   WORKERS_PER_GPU concurrent traces per GPU (default 3; tracing is bound by Python, not by the GPU)
#   BIG             models that get a GPU to themselves (default: mixtral-8x7b-v0.1 qwen3-30b-a3b; ~94 and ~61 GB)
#   NUM_BLOCKS      KV-cache blocks per trace (default 331, as on CPU): bounds each trace's cache so that traces
#                   can share a GPU; the cache size is in no signature
#   VERIFY          1 (default): trace a second run and compare labels; 0: --no-verify (half the time)
#   JOB_TIMEOUT     seconds per trace (default 420); DEADLINE: no trace starts later than this many seconds
#                   after the script did (default: none)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEPS=${DEPS:-$ROOT/.deps}
GPUS=${GPUS:-0}
WORKERS_PER_GPU=${WORKERS_PER_GPU:-3}
BIG=${BIG:-"mixtral-8x7b-v0.1 qwen3-30b-a3b"}
NUM_BLOCKS=${NUM_BLOCKS:-331}
JOB_TIMEOUT=${JOB_TIMEOUT:-420}
T0=$(date +%s)
command -v flock >/dev/null || { echo "trace_models: flock (util-linux) missing: one trace per GPU"; WORKERS_PER_GPU=1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)" | tee -a "$OUT/env.txt"

# ---- the binding ------------------------------------------------------------------------------------------
core=/tmp/dooly-core
bash scripts/gpu/build_core.sh "$core" || exit 1
export PYTHONPATH="$ROOT/python:$core"

# ---- which backends run -----------------------------------------------------------------------------------
probe_sdpa() {  # kernel -> exit 0 when it runs a masked bf16 attention shaped like a packed prefill
  CUDA_VISIBLE_DEVICES=${GPUS%%[ @]*} python3 - "$1" <<'EOF'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
kernel = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
          "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[sys.argv[1]]
q = torch.randn(1, 32, 300, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 32, 556, 128, device="cuda", dtype=torch.bfloat16)
mask = torch.full((1, 1, 300, 556), torch.finfo(torch.bfloat16).min, device="cuda", dtype=torch.bfloat16).triu(257)
with sdpa_kernel(kernel):
    torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
torch.cuda.synchronize()
EOF
}
requested=("$@")
[ ${#requested[@]} -gt 0 ] || requested=(eager sdpa-efficient sdpa-cudnn sdpa-math)
backends=()
for b in "${requested[@]}"; do
  case $b in
    sdpa|eager) backends+=("$b") ;;
    sdpa-flash|sdpa-efficient|sdpa-cudnn|sdpa-math)
      if why=$(probe_sdpa "${b#sdpa-}" 2>&1); then
        backends+=("$b")
      else
        echo "backend $b skipped: PyTorch's ${b#sdpa-} SDPA kernel refuses a masked bf16 attention: $(echo "$why" | grep -v '^ ' | tail -2 | tr '\n' ' ')" \
          | tee -a "$OUT/progress.txt"
      fi ;;
    *) echo "trace_models: unknown backend '$b' (sdpa, sdpa-flash, sdpa-efficient, sdpa-cudnn, sdpa-math, eager)"; exit 2 ;;
  esac
done
[ ${#backends[@]} -gt 0 ] || { echo "trace_models: no backend left to trace"; exit 1; }

# ---- the job queue: big models first, claimed with mkdir (atomic) by workers on every GPU ------------------
models=${MODELS:-$(cd data/models && ls *.json | sed 's/\.json$//')}
is_big() { [[ " $BIG " == *" $1 "* ]]; }
jobs=()
for m in $models; do is_big "$m" && for b in "${backends[@]}"; do jobs+=("$b $m"); done; done
for m in $models; do is_big "$m" || for b in "${backends[@]}"; do jobs+=("$b $m"); done; done
queue=$(mktemp -d /tmp/dooly-queue.XXXX)
for b in "${backends[@]}"; do mkdir -p "$OUT/traces-$b"; done
echo "trace_models: ${#jobs[@]} traces (${backends[*]}) on GPU(s) $GPUS, $WORKERS_PER_GPU per GPU" | tee -a "$OUT/progress.txt"

run_job() {  # gpu backend model
  local gpu=$1 b=$2 m=$3 args dir=$OUT/traces-$2 start=$(date +%s)
  case $b in
    sdpa) args=(--attention 'paged|sdpa') ;;
    eager) args=(--attention 'paged|eager') ;;
    *) args=(--attention 'paged|sdpa' --sdpa-kernel "${b#sdpa-}") ;;
  esac
  if CUDA_VISIBLE_DEVICES=$gpu OMP_NUM_THREADS=4 PYTHONUNBUFFERED=1 timeout "$JOB_TIMEOUT" nice -n 5 \
       python3 -m dooly.cli_trace --model "data/models/$m.json" --device cuda --num-blocks "$NUM_BLOCKS" "${args[@]}" \
       $([ "${VERIFY:-1}" = 0 ] && echo --no-verify) --out "$dir" > "$dir/$m.log" 2>&1; then
    echo "$b $m ok gpu$gpu $(( $(date +%s) - start )) s: $(grep -E '^verification:' "$dir/$m.log" | tail -1)"
  else
    local rc=$?
    echo "$b $m FAILED gpu$gpu after $(( $(date +%s) - start )) s (rc $rc$([ $rc = 124 ] && echo ": over JOB_TIMEOUT")): $(tail -1 "$dir/$m.log")"
  fi >> "$OUT/progress.txt"
}

worker() {  # gpu index(0..WORKERS_PER_GPU-1) ready-file
  local gpu=$1 w=$2 ready=$3 j b m big slot
  while [ -n "$ready" ] && [ ! -e "$ready" ]; do sleep 2; done
  for j in "${jobs[@]}"; do
    [ -z "${DEADLINE:-}" ] || [ $(( $(date +%s) - T0 )) -lt "$DEADLINE" ] || break
    read -r b m <<< "$j"
    if is_big "$m"; then
      [ "$w" = 0 ] || continue                         # one big trace per GPU, taken by its first worker
      mkdir "$queue/$b.$m" 2>/dev/null || continue
      exec {big}>"$queue/gpu$gpu.big"; flock -x "$big"  # no new small trace starts on this GPU...
      exec {slot}>"$queue/gpu$gpu"; flock -x "$slot"    # ...and the running ones end first
      run_job "$gpu" "$b" "$m"
      exec {slot}>&- {big}>&-
    else
      mkdir "$queue/$b.$m" 2>/dev/null || continue
      exec {big}>"$queue/gpu$gpu.big"; flock -s "$big"  # waits while a big trace has this GPU
      exec {slot}>"$queue/gpu$gpu"; flock -s "$slot"
      exec {big}>&-
      run_job "$gpu" "$b" "$m"
      exec {slot}>&-
    fi
  done
}

for spec in $GPUS; do
  gpu=${spec%%@*}; ready=""
  [ "$spec" = "$gpu" ] || ready=${spec#*@}
  touch "$queue/gpu$gpu" "$queue/gpu$gpu.big"
  for w in $(seq 0 $(( WORKERS_PER_GPU - 1 ))); do worker "$gpu" "$w" "$ready" & done
done
wait
echo "trace_models: done in $(( $(date +%s) - T0 )) s; $(grep -c ' ok ' "$OUT/progress.txt") ok, $(grep -c ' FAILED ' "$OUT/progress.txt") failed" \
  | tee -a "$OUT/progress.txt"

# ---- pack: one tarball per backend (the traces compress ~10x) ----------------------------------------------
for b in "${backends[@]}"; do
  tar -czf "$OUT/traces-$b.tgz" -C "$OUT/traces-$b" . && rm -rf "$OUT/traces-$b"
  echo "traces-$b.tgz: $(du -h "$OUT/traces-$b.tgz" | cut -f1)"
done
rm -rf "$queue"
