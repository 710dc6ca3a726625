#!/usr/bin/env bash
# Issue 11's checks on a GPU machine, in stages that each fit one command (results under $OUT, raw logs included):
#   trace        GPU traces (trace format 3: layouts, in-engine kernel time per op) of $MODELS under sdpa-efficient
#                and eager, kept in /tmp/dooly-checks while the machine stays held
#   composition  scripts/gpu/composition_check.py over the sdpa-efficient traces (units alone vs the engine step)
#   cost         python -m dooly.profile.engine_cost per model, CUDA graphs off and on (the engine's host cost, timed
#                in the engine's own thread); $COST_ARGS go to it, e.g. the live runs' limits:
#                COST_ARGS="--max-batch-tokens 2048 --num-blocks 1024" (scripts/gpu/live_validate.sh's defaults)
#   validate     scripts/gpu/validate_profile_energy.py --long-only over the store: $POINTS points of >= 1 ms against a
#                5 s energy-counter reference (the 3 % goal), measured the profiler's way once per settle period in
#                $SETTLE, the reference cut in slices (J per call and SM clock against time from idle)
#   profile      python -m dooly.profile --retry-failed over every trace of $MODELS (any backend shipped) until
#                $DEADLINE_S from the command's start (a held-out model: MODELS=<it> after the corpus; the summary
#                line gives the points and GPU seconds this command measured)
#   naive        the naive plan measured on a subset: each trace of $NAIVE_MODELS profiled alone into a store of its
#                own (/tmp/dooly-checks/naive-<trace>.sqlite, kept while the machine is held; resumes), until the
#                deadline; each store comes back in results.tgz
#
#   STAGES="trace composition cost" scripts/gpu/issue11_checks.sh      then   STAGES="validate profile" ...
# The store is worked on in a copy that stays in /tmp/dooly-checks while the machine is held (made from $DB when
# absent or when $DB is not the store it was made from), so that the engine cost of one command and the points of
# the next add up; every command copies it to $OUT/h200.sqlite.gz: unpack that into data/profile/ and commit it. A machine
# held only 30 s between calls may be a fresh one: if a call's store did not make it into the tree, merge it in
# afterwards (dooly store merge data/profile/h200.sqlite <that store>) rather than copying over. Everything else the command writes is packed into
# $OUT/results.tgz (the logs, the composition, cost and energy JSON); new traces come back as $OUT/traces.tgz.
# Environment: MODELS (traced and profiled; default: every data/models/*.json but $HELDOUT, default qwen3-1.7b,
#   the held-out 14th model: measure it alone afterwards with MODELS=qwen3-1.7b STAGES="trace profile"), CHECK_MODELS (the composition
#   check and the engine cost; default: llama-3.1-8b qwen3-8b olmoe-1b-7b-0924, one of them MoE), STAGES (default: all),
#   DB (default data/profile/h200.sqlite), POINTS (default 20), SETTLE (default 0,grid,2), VALIDATE_ARGS (more
#   arguments to validate_profile_energy.py, e.g. "--per-unit 4" with SETTLE=grid,carry), DEADLINE_S (default
#   560), NAIVE_MODELS (default llama-3.1-8b), BACKENDS (the attention backends traced and profiled; default
#   "sdpa-efficient eager"; the HF engine's `paged|sdpa` runs cuDNN's kernel on the H200: add sdpa-cudnn), OUT
#   (default ./out).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
T0=$(date +%s)
OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
RES=/tmp/dooly-checks/results-$T0; mkdir -p "$RES"  # this command's files, packed into $OUT/results.tgz at the end
HELDOUT=${HELDOUT-qwen3-1.7b}  # the 14th model: a covered family at a new size, profiled after the corpus (MODELS=it)
MODELS=${MODELS:-$(cd data/models && ls *.json | sed 's/\.json$//' | grep -vxF -e "${HELDOUT:-/}" | tr '\n' ' ')}
CHECK_MODELS=${CHECK_MODELS:-"llama-3.1-8b qwen3-8b olmoe-1b-7b-0924"}
STAGES=${STAGES:-"trace composition cost validate profile"}
POINTS=${POINTS:-20}
SETTLE=${SETTLE:-0,grid,2}
DEADLINE_S=${DEADLINE_S:-560}
NAIVE_MODELS=${NAIVE_MODELS:-llama-3.1-8b}
BACKENDS=${BACKENDS:-"sdpa-efficient eager"}
TR=/tmp/dooly-checks
mkdir -p "$TR"
# The store in /tmp carries on from one command to the next while the machine is held, but only while the store it
# was made from is the one this work tree has: a tree with a newer store (committed after an earlier call, or a
# fresh machine) starts again from that one, so a call never measures on top of an older store than the tree's.
SRC=${DB:-data/profile/h200.sqlite}
src_sha=$(sha256sum "$SRC" | cut -d' ' -f1)
if [ ! -f "$TR/h200.sqlite" ] || [ "$(cat "$TR/source.sha256" 2>/dev/null)" != "$src_sha" ]; then
  cp "$SRC" "$TR/h200.sqlite" && echo "$src_sha" > "$TR/source.sha256"
  echo "store: from $SRC"
else
  echo "store: the one the previous command left in $TR (made from $SRC)"
fi
DB=$TR/h200.sqlite
core=/tmp/dooly-core
bash scripts/gpu/build_core.sh "$core" > /tmp/dooly-build.log 2>&1 || { tail -20 /tmp/dooly-build.log; exit 1; }
export PYTHONPATH="$ROOT/python:$core"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$RES/env.txt"
echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores" | tee -a "$RES/env.txt"  # host cost
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

# Every stage but cost reads the traces: the shipped ones are unpacked (and missing ones traced) for any of them.
traces_of() {  # the shipped/traced traces of the models given, those present
  for m in "$@"; do for b in $BACKENDS; do
    [ -f "$TR/all/${m}__paged_${b}.json" ] && echo "$TR/all/${m}__paged_${b}.json"
  done; done
}
if { has trace || has composition || has validate || has profile || has naive; } && [ ! -f "$TR/done" ]; then
  stamp trace
  bash scripts/gpu/traces_for.sh "$TR" "$BACKENDS" "$MODELS $NAIVE_MODELS" "$RES/trace.log" \
    | tee "$RES/trace-summary.txt"
fi
# The profile stage measures every shipped trace of $MODELS, whatever its backend: beside the $BACKENDS ones, the
# engine's own `sdpa` (and `sdpa-cudnn`) traces of the models served live, which the simulator prices them from.
if has profile && [ -f data/traces/h200/traces.tgz ]; then
  shipped=$(tar -tzf data/traces/h200/traces.tgz)
  want=()
  for m in $MODELS; do
    for f in $(grep -x -- "${m}__paged_.*\.json" <<< "$shipped"); do [ -f "$TR/all/$f" ] || want+=("$f"); done
  done
  [ ${#want[@]} -eq 0 ] || tar -xzf data/traces/h200/traces.tgz -C "$TR/all" "${want[@]}"
fi
ls "$TR"/all/*.json 2>/dev/null | sed 's/^/trace: /'
every_trace_of() {  # each trace of the models given in $TR/all, any backend
  for m in "$@"; do ls "$TR/all/${m}__paged_"*.json 2>/dev/null; done
}

if has composition; then
  stamp composition
  python3 scripts/gpu/composition_check.py --out "$RES/composition.json" \
    $(for m in $CHECK_MODELS; do echo "$TR/all/${m}__paged_sdpa-efficient.json"; done) \
    2>&1 | tee "$RES/composition.txt"
fi

if has cost; then
  for m in $CHECK_MODELS; do
    stamp "cost $m"
    python3 -m dooly.profile.engine_cost --model "$m" --device cuda --graphs off,on --out "$RES/cost-$m.json" \
      --db "$DB" ${COST_ARGS:-} 2>&1 | tee "$RES/cost-$m.txt"
  done
fi

if has validate; then
  stamp validate
  python3 scripts/gpu/validate_profile_energy.py --db "$DB" --traces "$TR/all" --points "$POINTS" --long-only \
    --settle "$SETTLE" ${VALIDATE_ARGS:-} --out "$RES/energy-validation-long.json" 2>&1 | tee "$RES/energy-validation-long.txt" | tail -4
fi
if has profile; then
  left=$(( DEADLINE_S - ($(date +%s) - T0) - 20 ))
  stamp "profile ($left s)"
  if [ "$left" -gt 30 ]; then
    DOOLY_PROFILE_DEADLINE_S=$left python3 -m dooly.profile --db "$DB" --grid data/grids/default.json --device cuda \
      --retry-failed --plan-json "$RES/plan.json" -- $(every_trace_of $MODELS) 2>&1 | tail -c 200000 > "$RES/profile.log"
    echo "profile: exit ${PIPESTATUS[0]}; $(tail -3 "$RES/profile.log")"
    gzip -f "$RES/plan.json"
  fi
fi
if has naive; then
  for t in $(traces_of $NAIVE_MODELS); do
    left=$(( DEADLINE_S - ($(date +%s) - T0) - 20 ))
    [ "$left" -gt 30 ] || break
    n=$TR/naive-$(basename "$t" .json).sqlite
    stamp "naive $(basename "$t") ($left s)"
    DOOLY_PROFILE_DEADLINE_S=$left python3 -m dooly.profile --db "$n" --grid data/grids/default.json --device cuda \
      -- "$t" 2>&1 | tail -c 100000 > "$RES/naive-$(basename "$t" .json).log"
    echo "naive: exit ${PIPESTATUS[0]}; $(tail -1 "$RES/naive-$(basename "$t" .json).log")"
    python3 - "$n" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n, s = c.execute("SELECT count(*), sum(json_extract(extra_json, '$.point_s')) FROM measurements").fetchone()
print(f"naive store {sys.argv[1]}: {n} points, point_s {s or 0:.1f} s")
PY
    cp "$n" "$RES/"
  done
fi
python3 - "$DB" "$T0" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n, s = c.execute("SELECT count(*), sum(json_extract(extra_json, '$.point_s')) FROM measurements "
                 "WHERE measured_at_unix_s >= ?", (int(sys.argv[2]),)).fetchone()
print(f"this command measured {n} points, point_s {s or 0:.1f} s")
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print("store:", dict(c.execute("SELECT status, count(*) FROM measurements GROUP BY status").fetchall()),
      "resolutions:", dict(c.execute("SELECT status, count(*) FROM resolutions GROUP BY status").fetchall()))
PY
gzip -c "$DB" > "$OUT/h200.sqlite.gz"  # compressed: the store passed the 16 MiB a returned file may have
[ -f "$TR/traces.tgz" ] && cp "$TR/traces.tgz" "$OUT/"  # new traces: commit it as data/traces/h200/traces.tgz
stamp done
tar -czf "$OUT/results.tgz" -C "$RES" .  # $OUT brings back at most 8 files: results.tgz, h200.sqlite.gz, traces.tgz
