#!/usr/bin/env bash
# GPU validation of the Kokkos connector on an NVIDIA H200 (no internet needed). In one go, everything under
# $OUT (default ./out):
#   1. builds Kokkos (CUDA, Kokkos_ARCH_${KOKKOS_ARCH:-HOPPER90}, Release) from third_party_build/kokkos-src
#      (git-ignored; scripts/gpu/prepare_kokkos.sh patches that copy for CUDA 13), dooly energy-only
#      (-DDOOLY_ENERGY_ONLY=ON; fmt/nlohmann/Eigen from .deps/ if the machine lacks them: make it with
#      scripts/gpu/pack_deps.sh where they are installed), the demo and overhead programs (examples/),
#      kokkos-tools' simple-kernel-timer (third_party_build/kokkos-tools-src) and an empty tool (bench/);
#   2. (a) runs kokkos_energy_demo under the connector (DOOLY_RECORD=$OUT/demo.recording, DOOLY_OUTPUT=$OUT/demo:
#      the table leads with the model mode, the JSON holds both modes) and checks it against the GPU's energy
#      counter (summarize_kokkos.py demo);
#      (b) runs kokkos_overhead_bench 5x alternating no tool / empty tool / simple-kernel-timer / dooly and prints
#      medians, each tool's own cost and dooly's sampler CPU (summarize_kokkos.py overhead); then 5x each tool
#      behind bench/kp_timing_shim.cpp, which times the inside of the tool's hooks directly (a fenced launch
#      varies by ~1 us between runs, more than a tool's own cost: differences of run times cannot resolve it);
#      (c) writes driver, GPU name and date to $OUT/env.txt.
# Environment: OUT, WORK (build folders; default build/gpu), JOBS, KOKKOS_ARCH, DEMO_ARGS, OVERHEAD_KERNELS,
# OVERHEAD_REPS, OVERHEAD_WARMUP, SKIP_BUILD=1 (reuse WORK), SKIP_DEMO=1, SANITY_ONLY=1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${WORK:-$ROOT/build/gpu}
mkdir -p "$WORK"
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
ARCH=${KOKKOS_ARCH:-HOPPER90}
KOKKOS_SRC=${KOKKOS_SRC:-$ROOT/third_party_build/kokkos-src}
KT_SRC=${KT_SRC:-$ROOT/third_party_build/kokkos-tools-src}
DEMO_ARGS=${DEMO_ARGS:-"--alone-s 4 --interleaved-s 8 --idle-s 1.5"}
OVERHEAD_KERNELS=${OVERHEAD_KERNELS:-200000}
OVERHEAD_REPS=${OVERHEAD_REPS:-5}
OVERHEAD_WARMUP=${OVERHEAD_WARMUP:-20000}  # launches before the timed loop (GPU clocks and caches settle)
T0=$(date +%s)
log() { echo "[validate +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/progress.log"; }
: > "$OUT/progress.log"

# ---- (c) environment --------------------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname)"
  echo "dooly commit: ${DOOLY_COMMIT:-$(git -C "$ROOT" rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}"
  echo "kernel: $(uname -srm)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -q 2>/dev/null | sed -n '1,/^GPU /p' | grep -E "Timestamp|Driver Version|CUDA Version" || true
    nvidia-smi --query-gpu=index,name,pci.bus_id,persistence_mode,power.limit,clocks.max.sm,clocks.max.mem \
      --format=csv 2>/dev/null || true
  else
    echo "nvidia-smi: not found"
  fi
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
  echo "g++: $(g++ --version | head -1)"
  echo "cmake: $(cmake --version | head -1)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
} > "$OUT/env.txt"
log "environment -> $OUT/env.txt ($(grep -m1 'Driver Version' "$OUT/env.txt" | tr -s ' ' || echo 'no driver'))"

# ---- 1. builds --------------------------------------------------------------------------------------------
KOKKOS_INSTALL=$WORK/kokkos-install
NVCC_WRAPPER=$WORK/nvcc_wrapper
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  log "Kokkos: preparing the ignored copy ($KOKKOS_SRC)"
  bash "$ROOT/scripts/gpu/prepare_kokkos.sh" "$KOKKOS_SRC" 2>&1 | tee -a "$OUT/progress.log"
  # nvcc_wrapper's default -arch (sm_70) is gone in CUDA 13: a copy that defaults to the target architecture.
  sm=$(case "$ARCH" in HOPPER90) echo sm_90;; AMPERE80) echo sm_80;; ADA89) echo sm_89;; BLACKWELL100) echo sm_100;; *) echo sm_90;; esac)
  sed "s/^default_arch=\"sm_70\"/default_arch=\"$sm\"/" "$KOKKOS_SRC/bin/nvcc_wrapper" > "$NVCC_WRAPPER"
  chmod +x "$NVCC_WRAPPER"
  # Kokkos_ENABLE_IMPL_VIEW_LEGACY=ON: with C++20, nvcc 13 and the mdspan-based View ([[no_unique_address]])
  # the host and device disagree on the layout of captured Views: kernels silently write nowhere and reductions
  # fault (seen on the H200, CUDA 13.0, Kokkos 4.6.99). The legacy View (or C++17) works.
  if [ ! -f "$KOKKOS_INSTALL/.done-$ARCH-legacy-view" ]; then
    log "Kokkos: configure + build (CUDA, $ARCH, Release, -j$JOBS)"
    cmake -S "$KOKKOS_SRC" -B "$WORK/kokkos-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$NVCC_WRAPPER" -DCMAKE_CXX_STANDARD=20 -DKokkos_ENABLE_SERIAL=ON \
      -DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$ARCH=ON" -DKokkos_ENABLE_IMPL_VIEW_LEGACY=ON \
      -DCMAKE_INSTALL_PREFIX="$KOKKOS_INSTALL" \
      > "$OUT/build-kokkos.log" 2>&1
    cmake --build "$WORK/kokkos-build" -j "$JOBS" >> "$OUT/build-kokkos.log" 2>&1 \
      || { tail -30 "$OUT/build-kokkos.log"; log "Kokkos build FAILED (see $OUT/build-kokkos.log)"; exit 1; }
    cmake --install "$WORK/kokkos-build" >> "$OUT/build-kokkos.log" 2>&1
    touch "$KOKKOS_INSTALL/.done-$ARCH-legacy-view"
  fi
  log "Kokkos: installed in $KOKKOS_INSTALL"

  log "dooly: energy-only build (-j$JOBS)"
  cmake -S "$ROOT" -B "$WORK/dooly" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOOLY_ENERGY_ONLY=ON \
    > "$OUT/build-dooly.log" 2>&1 || { tail -30 "$OUT/build-dooly.log"; exit 1; }
  cmake --build "$WORK/dooly" -j "$JOBS" --target kp_gpu_energy dooly_power dooly_common >> "$OUT/build-dooly.log" 2>&1 \
    || { tail -30 "$OUT/build-dooly.log"; log "dooly build FAILED"; exit 1; }

  log "examples: kokkos_energy_demo + kokkos_overhead_bench (nvcc_wrapper)"
  kokkos_dir=$(dirname "$(find "$KOKKOS_INSTALL" -name KokkosConfig.cmake | head -1)")
  cmake -S "$ROOT/examples" -B "$WORK/examples" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$NVCC_WRAPPER" -DKokkos_DIR="$kokkos_dir" -DDOOLY_BUILD_DIR="$WORK/dooly" \
    > "$OUT/build-examples.log" 2>&1 || { tail -30 "$OUT/build-examples.log"; exit 1; }
  cmake --build "$WORK/examples" -j "$JOBS" >> "$OUT/build-examples.log" 2>&1 \
    || { tail -30 "$OUT/build-examples.log"; log "examples build FAILED"; exit 1; }

  mkdir -p "$WORK/tools"
  log "tools: empty tool, timing shim and simple-kernel-timer (g++ -O3 -shared)"
  g++ -O3 -std=c++17 -shared -fPIC -fvisibility=hidden "$ROOT/bench/kp_empty_tool.cpp" -o "$WORK/tools/libkp_empty_tool.so"
  g++ -O3 -std=c++17 -shared -fPIC -fvisibility=hidden -I"$ROOT/src" "$ROOT/bench/kp_timing_shim.cpp" \
    -o "$WORK/tools/libkp_timing_shim.so" -ldl
  if [ -f "$KT_SRC/profiling/simple-kernel-timer/kp_kernel_timer.cpp" ]; then
    skt=$KT_SRC/profiling/simple-kernel-timer
    g++ -O3 -std=c++17 -shared -fPIC -w -I"$skt" -I"$KT_SRC/common/makefile-only" -I"$KT_SRC/profiling/all" \
      -I"$KT_SRC/common" "$skt/kp_kernel_timer.cpp" "$skt/kp_shared.cpp" -o "$WORK/tools/libkp_kernel_timer.so"
  else
    log "tools: no kokkos-tools source at $KT_SRC: simple-kernel-timer left out"
  fi
fi
DOOLY_SO=$WORK/dooly/src/dooly/kokkos/libkp_gpu_energy.so
DEMO=$WORK/examples/kokkos_energy_demo
BENCH=$WORK/examples/kokkos_overhead_bench
for f in "$DOOLY_SO" "$DEMO" "$BENCH" "$WORK/tools/libkp_empty_tool.so"; do
  [ -e "$f" ] || { log "missing $f (build step failed?)"; exit 1; }
done
log "builds done"

# ---- sanity: do Kokkos kernels really run on the GPU? (the overhead bench checks its own result) ---------
if ! sanity=$("$BENCH" --kernels 100 --warmup 0 2>&1); then
  echo "$sanity"
  log "SANITY FAILED: Kokkos CUDA kernels did not produce their result"
  PATH="$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer"
  "$BENCH" --kernels 1 --kokkos-print-configuration 2>&1 | head -60 || true
  if command -v compute-sanitizer >/dev/null 2>&1; then
    compute-sanitizer --print-limit 5 "$BENCH" --kernels 2 --warmup 0 2>&1 | head -40 || true
  fi
  command -v cuobjdump >/dev/null 2>&1 && cuobjdump --list-elf "$BENCH" 2>&1 | head || true
  exit 1
fi
log "sanity: $sanity"
[ "${SANITY_ONLY:-0}" = 1 ] && exit 0

# ---- 2a. the demo under the connector, twice --------------------------------------------------------------
# demo:       the same kernel labels in every phase (a normal program): the model mode fits one power per
#             kernel over the whole run (the alone phases give it the variation it needs); recorded.
# demo-phase: --labels phase: the alone phases' kernels get their own rows, so the trapezoid's interleaved
#             J/call stands on its own.
run_demo() {  # name extra-args...
  local name=$1; shift
  log "demo: kokkos_energy_demo $DEMO_ARGS $* under libkp_gpu_energy.so -> $OUT/$name.*"
  # shellcheck disable=SC2086
  env KOKKOS_TOOLS_LIBS="$DOOLY_SO" DOOLY_OUTPUT="$OUT/$name" DOOLY_BASELINE_MS=${DOOLY_BASELINE_MS:-1000} \
      DOOLY_LOG=info ${RECORD:+DOOLY_RECORD=$RECORD} "$DEMO" $DEMO_ARGS "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err" \
    || { cat "$OUT/$name.err"; log "demo $name FAILED"; exit 1; }
  grep -E "^demo:|^reference" "$OUT/$name.txt" | tee -a "$OUT/progress.log"
  sed -n '/^dooly: gpu/,$p' "$OUT/$name.txt"
}
if [ "${SKIP_DEMO:-0}" != 1 ]; then
RECORD=$OUT/demo.recording run_demo demo
RECORD="" run_demo demo-phase --labels phase
fi
if [ "${SKIP_DEMO:-0}" != 1 ] && command -v python3 >/dev/null 2>&1; then
  python3 "$ROOT/scripts/gpu/summarize_kokkos.py" demo "$OUT/demo.txt" "$OUT/demo.json" \
    "$OUT/demo-phase.txt" "$OUT/demo-phase.json" | tee "$OUT/demo_check.txt"
else
  log "python3 missing: compare the reference lines in $OUT/demo*.txt with $OUT/demo*.json by hand"
fi

# ---- 2b. per-kernel overhead: none / empty / simple-kernel-timer / dooly, alternating ---------------------
log "overhead: $OVERHEAD_REPS x {none, empty, simple-kernel-timer, dooly}, $OVERHEAD_KERNELS kernels each"
mkdir -p "$OUT/overhead"
echo "rep tool ns_per_kernel" > "$OUT/overhead.tsv"
tools=(none empty)
[ -f "$WORK/tools/libkp_kernel_timer.so" ] && tools+=(simple-kernel-timer)
tools+=(dooly)
tool_lib() {  # the Kokkos Tools library of a tool name ("" for none)
  case $1 in
    none) echo "" ;;
    empty) echo "$WORK/tools/libkp_empty_tool.so" ;;
    simple-kernel-timer) echo "$WORK/tools/libkp_kernel_timer.so" ;;
    dooly) echo "$DOOLY_SO" ;;
  esac
}
for rep in $(seq 1 "$OVERHEAD_REPS"); do
  for tool in "${tools[@]}"; do
    lib=$(tool_lib "$tool")
    line=$(cd "$OUT/overhead" && env ${lib:+KOKKOS_TOOLS_LIBS=$lib} DOOLY_OUTPUT="$OUT/overhead/dooly-$rep" DOOLY_TABLE=0 \
             "$BENCH" --kernels "$OVERHEAD_KERNELS" --warmup "$OVERHEAD_WARMUP" 2>>"$OUT/overhead/stderr.txt" | grep "ns_per_kernel=" || true)
    ns=$(echo "$line" | sed -n 's/.*ns_per_kernel=\([0-9.]*\).*/\1/p')
    echo "$rep $tool $ns" >> "$OUT/overhead.tsv"
    echo "  rep $rep $tool: $line"
  done
done
SHIM=$WORK/tools/libkp_timing_shim.so
if [ -f "$SHIM" ]; then
  log "overhead: $OVERHEAD_REPS x {empty, simple-kernel-timer, dooly} behind the timing shim"
  : > "$OUT/shim.txt"
  for rep in $(seq 1 "$OVERHEAD_REPS"); do
    for tool in "${tools[@]}"; do
      [ "$tool" = none ] && continue
      lib=$(tool_lib "$tool")
      (cd "$OUT/overhead" && env KOKKOS_TOOLS_LIBS="$SHIM" KP_SHIM_INNER="$lib" KP_SHIM_OUT="$OUT/shim.txt" \
         KP_SHIM_SKIP_KERNELS="$OVERHEAD_WARMUP" DOOLY_OUTPUT="$OUT/overhead/shim-dooly-$rep" DOOLY_TABLE=0 \
         "$BENCH" --kernels "$OVERHEAD_KERNELS" --warmup "$OVERHEAD_WARMUP" >/dev/null 2>>"$OUT/overhead/stderr.txt") || true
      echo "  shim rep $rep $tool: $(tail -1 "$OUT/shim.txt")"
    done
  done
fi
shim_args=()
[ -s "$OUT/shim.txt" ] && shim_args=(--shim "$OUT/shim.txt")
if command -v python3 >/dev/null 2>&1; then
  python3 "$ROOT/scripts/gpu/summarize_kokkos.py" overhead "$OUT/overhead.tsv" "${shim_args[@]}" \
    "$OUT"/overhead/dooly-*.json | tee "$OUT/overhead_summary.txt"
fi
rm -f "$OUT"/overhead/*.dat  # simple-kernel-timer's own output files
log "done in $(( $(date +%s) - T0 )) s; results in $OUT"
