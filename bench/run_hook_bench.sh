#!/usr/bin/env bash
# Per-hook cost, side by side in one run: Profiler::begin+end, and begin+end of the kernel hooks of dooly's
# connector, an empty tool and simple-kernel-timer (when third_party_build/kokkos-tools-src exists), each
# dlopen'ed as Kokkos does. Prints the raw Google Benchmark table, then the ratios.
#   bench/run_hook_bench.sh [build dir = build/bench] [extra benchmark flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/bench}; shift || true
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOOLY_BUILD_BENCH=ON -DDOOLY_BUILD_TESTS=OFF \
    -DDOOLY_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target hook_bench >/dev/null
json=$(mktemp /tmp/dooly-hook-bench-XXXXXX.json)
"$build/bench/hook_bench" --benchmark_repetitions=${REPS:-5} --benchmark_report_aggregates_only=true \
  --benchmark_out="$json" --benchmark_out_format=json "$@"
python3 - "$json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
med = {}
for b in d["benchmarks"]:
    if b.get("aggregate_name") == "median":
        # Benchmarks that time a batch (the attributor's streams) report their own per-kernel figure.
        med[b["run_name"]] = b["ns_per_kernel"] * 1e9 if "ns_per_kernel" in b else \
            b["real_time"] if b["time_unit"] == "ns" else b["real_time"] * {"us": 1e3, "ms": 1e6}[b["time_unit"]]
print("\nmedian ns per begin+end pair (per kernel):")
for k, v in med.items():
    print(f"  {k:<40} {v:8.1f}")
for depth in (1, 2):
    on, off = med.get(f"Attributor/stream/depth:{depth}/pairs:1"), med.get(f"Attributor/stream/depth:{depth}/pairs:0")
    if on and off:
        print(f"attributor stream, depth {depth}: a kernel's edges in one step / one at a time = {on / off:.3f}")
for prefix, what in (("", "tight loop"), ("Paced/", "paced, ~1 us between begin and end")):
    e = med.get(prefix + "Tool/empty/begin_end")
    dl = med.get(prefix + "Tool/dooly/begin_end")
    s = med.get(prefix + "Tool/simple-kernel-timer/begin_end")
    if dl and s:
        line = f"{what}: ratio dooly / simple-kernel-timer = {dl / s:.3f}"
        if e is not None and s - e > 0:
            line += f"; own cost (minus empty tool) dooly {dl - e:.1f} ns, simple-kernel-timer {s - e:.1f} ns, ratio {(dl - e) / (s - e):.3f}"
        print(line)
    elif dl:
        print(f"{what}: simple-kernel-timer not built (no third_party_build/kokkos-tools-src): no ratio")
PY
rm -f "$json"
