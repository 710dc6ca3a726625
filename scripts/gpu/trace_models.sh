#!/usr/bin/env bash
# Dooly traces of the shipped models at real size on a GPU machine (issue 3 item 8), under several attention
# backends. The image there has torch and transformers but none of the C++ dev packages: the binding
# (dooly_core) is built with g++ against the headers scripts/gpu/pack_deps.sh copies into .deps/ (carry it).
# Traces are packed one tarball per backend under $OUT (default ./out); build the table here afterwards with
#   for f in out/traces-*.tgz; do tar -xzf $f -C traces/; done
#   dooly signatures traces/*.json --db h200.sqlite
# Usage: scripts/gpu/trace_models.sh [backend ...]    backends: sdpa (PyTorch's choice), sdpa-flash,
#        sdpa-efficient, sdpa-cudnn, eager; MODELS="llama-3.1-8b qwen2.5-7b" restricts the models.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
DEPS=${DEPS:-$ROOT/.deps}
[ -d "$DEPS/openssl" ] || { echo "trace_models: $DEPS/openssl missing: run scripts/gpu/pack_deps.sh here and carry .deps"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/env.txt"

core=/tmp/dooly-core
mkdir -p "$core/obj"
inc="-I$ROOT/src -I$DEPS $(python3 -m pybind11 --includes)"
for f in python/dooly_core.cpp src/dooly/taint/*.cpp src/dooly/taint/rules/*.cpp src/dooly/trace/*.cpp \
         src/dooly/signature/*.cpp src/dooly/common/log.cpp src/dooly/common/env.cpp; do
  g++ -O2 -std=c++20 -fPIC -DFMT_HEADER_ONLY $inc -c "$f" -o "$core/obj/$(echo "$f" | tr / _).o" &
done
wait
g++ -shared "$core"/obj/*.o -o "$core/dooly_core$(python3-config --extension-suffix)" -l:libcrypto.so.3 \
  || { echo "trace_models: linking dooly_core failed"; exit 1; }
export PYTHONPATH="$ROOT/python:$core"
python3 -c "import dooly_core" || exit 1

models=${MODELS:-$(cd data/models && ls *.json | sed 's/\.json$//')}
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(sdpa eager sdpa-flash)
for b in "${backends[@]}"; do
  case $b in
    sdpa) args=(--attention 'paged|sdpa') ;;
    eager) args=(--attention 'paged|eager') ;;
    sdpa-flash|sdpa-efficient|sdpa-cudnn) args=(--attention 'paged|sdpa' --sdpa-kernel "${b#sdpa-}") ;;
    *) echo "trace_models: unknown backend '$b'"; exit 2 ;;
  esac
  dir="$OUT/traces-$b"
  mkdir -p "$dir"
  for m in $models; do
    start=$(date +%s)
    if python3 -m dooly.cli_trace --model "data/models/$m.json" --device cuda "${args[@]}" --out "$dir" \
         > "$dir/$m.log" 2>&1; then
      echo "$b $m ok $(( $(date +%s) - start )) s: $(grep -E 'verification:' "$dir/$m.log" | tail -1)"
    else
      echo "$b $m FAILED ($(tail -1 "$dir/$m.log"))"
    fi
  done | tee -a "$OUT/progress.txt"
  tar -czf "$OUT/traces-$b.tgz" -C "$dir" . && rm -rf "$dir"
done
