#!/usr/bin/env bash
# The sampler thread's attribution work per kernel, this tree against another revision, side by side in one run:
# builds hook_bench (Release) for both, then alternates them REPS times over the deterministic streams
# (Attributor/stream: one simulated second at 70,000 kernels/s, NVML-like readings, 100 ms ticks, at top level and
# inside a region), and, where valgrind exists, counts the instructions of one stream in each (immune to a busy
# machine). Prints every run's ns/kernel, the medians and the ratios new/old.
#   bench/compare_attributor.sh [old-rev = HEAD~1] [reps = 5]
set -euo pipefail
cd "$(dirname "$0")/.."
old_rev=${1:-HEAD~1}
reps=${2:-5}
work=${WORK:-build/compare-attributor}
mkdir -p "$work"
old_src="$work/old-src"
if [ ! -d "$old_src/.git" ] && [ ! -f "$old_src/.git" ]; then git worktree add -f --detach "$old_src" "$old_rev" >/dev/null; fi
git -C "$old_src" checkout -q --detach "$old_rev"
build() {  # src dir, build dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOOLY_BUILD_BENCH=ON -DDOOLY_BUILD_TESTS=OFF \
    -DDOOLY_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$2" -j "$(nproc 2>/dev/null || echo 2)" --target hook_bench >/dev/null
}
build "$old_src" "$work/old"
build . "$work/new"
filter='Attributor/stream/depth:[12]/pairs:1'
for i in $(seq 1 "$reps"); do
  for side in old new; do
    "$work/$side/bench/hook_bench" --benchmark_filter="$filter" --benchmark_format=json 2>/dev/null |
      python3 -c '
import json, sys
side = sys.argv[1]
for b in json.load(sys.stdin)["benchmarks"]:
    print(side, b["name"], round(b["ns_per_kernel"] * 1e9, 2))' "$side"
  done
done | tee "$work/runs.txt"
python3 - "$work/runs.txt" <<'PY'
import statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, name, ns = line.split()
    runs[(side, name)].append(float(ns))
print("\nmedian ns per kernel (attribution work of the sampler thread):")
for name in sorted({n for _, n in runs}):
    o, n = statistics.median(runs[("old", name)]), statistics.median(runs[("new", name)])
    print(f"  {name:<40} old {o:6.2f}  new {n:6.2f}  new/old {n / o:.3f}")
PY
if command -v valgrind >/dev/null 2>&1; then
  # Under valgrind one iteration outlasts the minimum time, so the benchmark runs the stream once: the inclusive
  # count of its function is one stream. Its setup (building the events, stream_events(): the same code on both
  # sides; revisions before it was split out inline it, and then the other side's count stands in) is taken out.
  echo; echo "instructions per kernel for one stream (callgrind; the stream's setup taken out):"
  for depth in 1 2; do
    declare -A ir=() setup=()
    for side in old new; do
      out=$(mktemp)
      valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*attributor_stream*' \
        "$work/$side/bench/hook_bench" --benchmark_filter="Attributor/stream/depth:$depth/pairs:1" \
        --benchmark_min_time=0.0001 >/dev/null 2>&1 || true
      ir[$side]=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
      setup[$side]=$(callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
        awk '/stream_events\(.*\[\// {gsub(",", "", $1); print $1; exit}')
      rm -f "$out"
    done
    s_old=${setup[old]:-${setup[new]:-0}} s_new=${setup[new]:-${setup[old]:-0}}
    python3 -c "
o = (${ir[old]:-0} - $s_old) / 70000; n = (${ir[new]:-0} - $s_new) / 70000
print(f'  depth $depth: old {o:.1f} Ir/kernel, new {n:.1f} Ir/kernel, new/old {n / o:.3f}')"
  done
fi
