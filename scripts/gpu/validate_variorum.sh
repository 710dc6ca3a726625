#!/usr/bin/env bash
# The Variorum backend on real Variorum, on the GPU machine (NVIDIA H200; no internet), in one go.
# Before: HERE, scripts/gpu/pack_deps.sh and scripts/gpu/prepare_variorum.sh. Carry (8 paths at most, 64 MiB
# with the tracked files; prepare_variorum.sh prints their sizes):
#   .deps/fmt .deps/nlohmann .deps/eigen3 third_party_build/kokkos-src third_party_build/variorum-src
#   third_party_build/variorum-kit
# Then: OUT=$OUT bash scripts/gpu/validate_variorum.sh
# Steps, all logged under $OUT:
#   1. env.txt: driver, GPU, CPU, sockets, msr devices (Variorum's Intel CPU port needs /dev/cpu/*/msr{,_safe});
#   2. Variorum 0.8.0 twice (scripts/gpu/build_variorum.sh): `gpu` (NVIDIA port only) and, on an Intel CPU,
#      `cpu-gpu` (Intel CPU port too: RAPL through MSRs, which a VM rarely passes through; if it fails, it fails
#      every call: recorded, not fatal);
#   3. variorum_probe.txt: each library's first JSON, its keys, and the cost of variorum_get_power_json (each
#      call runs nvmlInit and nvmlShutdown: Variorum's variorum_enter/variorum_exit);
#   4. Kokkos (CUDA) + dooly energy-only + the demo, built as scripts/gpu/validate_kokkos.sh does;
#   5. kokkos_energy_demo under the connector, back to back: DOOLY_POWER_SOURCE=nvml, then variorum (the `gpu`
#      library; again at DOOLY_PERIOD_MS=100), then variorum with the `cpu-gpu` library if its probe worked; each run also has the demo's
#      own NVML energy-counter reference per phase, and during the variorum runs a side process samples
#      nvmlDeviceGetPowerUsage every 20 ms (nvidia-ml-py, if importable) for a timeline on the same run;
#   6. summary.txt: scripts/gpu/summarize_variorum.py (per-region J/call and energy side by side, sample rates,
#      sensor models, conservation, the channels Variorum exposes) and summarize_kokkos.py's check per run.
# The device returns at most 8 files from $OUT: summary.txt, progress.log and env.txt stay as they are, and
# everything else is packed into $OUT/variorum-validation.tgz at exit (also after a failure).
# Environment: OUT, WORK (default build/gpu-variorum), JOBS, KOKKOS_ARCH, DEMO_ARGS, SKIP_CPU_GPU=1,
# SKIP_DEMO=1 (stop after the probes: no Kokkos, no dooly build); PREBUILT_DOOLY_SO + PREBUILT_DEMO (skip
# step 4: a dry run of the script's logic without a GPU, e.g. over scripts/gpu/fake_nvml_for_variorum.c).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out/variorum}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
R=$OUT/runs                                   # everything packed at exit
mkdir -p "$R"
WORK=${WORK:-$ROOT/build/gpu-variorum}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
ARCH=${KOKKOS_ARCH:-HOPPER90}
KOKKOS_SRC=${KOKKOS_SRC:-$ROOT/third_party_build/kokkos-src}
DEMO_ARGS=${DEMO_ARGS:-"--alone-s 4 --interleaved-s 8 --idle-s 1.5"}
T0=$(date +%s)
log() { echo "[variorum +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/progress.log"; }
pack() {
  (cd "$OUT" && tar -czf variorum-validation.tgz runs && rm -rf runs) 2>/dev/null
  log "packed $OUT/variorum-validation.tgz ($(du -h "$OUT/variorum-validation.tgz" 2>/dev/null | cut -f1))"
}
trap pack EXIT
: > "$OUT/progress.log"

# ---- 1. environment -------------------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname)"
  echo "dooly commit: $(git -C "$ROOT" rev-parse --verify -q HEAD 2>/dev/null || echo unknown)"
  echo "kernel: $(uname -srm)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,power.limit --format=csv 2>&1 || true
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
  echo "g++: $(g++ --version | head -1); cmake: $(cmake --version | head -1)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)" \
       "($(grep -m1 vendor_id /proc/cpuinfo | cut -d: -f2 | tr -d ' '), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')," \
       "model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' '))"
  echo "physical ids (sockets): $(grep 'physical id' /proc/cpuinfo | sort -u | wc -l)"
  echo "msr devices: $(ls /dev/cpu/0/ 2>/dev/null | tr '\n' ' ' || echo none) (msr-safe allowlist: $(ls /dev/cpu/msr_allowlist /dev/cpu/msr_whitelist 2>/dev/null || echo none))"
  echo "powercap: $(ls /sys/class/powercap 2>/dev/null | tr '\n' ' ' || echo none)"
  echo "libudev.so.1 on the machine: $(ls /lib/x86_64-linux-gnu/libudev.so.1 /usr/lib/x86_64-linux-gnu/libudev.so.1 2>/dev/null | head -1 || echo none)"
  echo "libnvidia-ml.so.1: $( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p) | grep -m1 'libnvidia-ml.so.1 ' || echo 'not in the loader cache')"
  python3 -c "import pynvml; print('pynvml (nvidia-ml-py):', pynvml.__file__)" 2>&1 | tail -1
} > "$OUT/env.txt" 2>&1
log "environment -> $OUT/env.txt"

# ---- 2. Variorum ------------------------------------------------------------------------------------------
export VARIORUM_WORK=$WORK/variorum
VLIB_GPU=$(JOBS=$JOBS bash "$ROOT/scripts/gpu/build_variorum.sh" gpu 2> "$R/build-variorum-gpu.log" | sed -n 's/^VARIORUM_LIBRARY=//p')
cat "$R/build-variorum-gpu.log" >> "$OUT/progress.log"
[ -n "$VLIB_GPU" ] && [ -f "$VLIB_GPU" ] || { log "Variorum (gpu) build FAILED"; cp -r "$VARIORUM_WORK"/gpu/*.log "$R/" 2>/dev/null; exit 1; }
log "Variorum gpu: $VLIB_GPU"
VLIB_CPU=""
if [ "${SKIP_CPU_GPU:-0}" != 1 ]; then
  VLIB_CPU=$(JOBS=$JOBS bash "$ROOT/scripts/gpu/build_variorum.sh" cpu-gpu 2> "$R/build-variorum-cpu-gpu.log" | sed -n 's/^VARIORUM_LIBRARY=//p')
  cat "$R/build-variorum-cpu-gpu.log" >> "$OUT/progress.log"
  log "Variorum cpu-gpu: ${VLIB_CPU:-not built (see build-variorum-cpu-gpu.log)}"
fi

# ---- 3. probe: the JSON and the cost of a call ------------------------------------------------------------
probe() {  # name library
  log "probe $1: 1 + 50 calls of variorum_get_power_json"
  timeout 120 python3 "$ROOT/scripts/gpu/variorum_probe.py" "$2" "$R/variorum-$1.json" > "$R/probe-$1.txt" 2>&1
  local rc=$?
  cat "$R/probe-$1.txt" >> "$R/variorum_probe.txt"
  echo "(exit $rc)" >> "$R/variorum_probe.txt"
  return $rc
}
probe gpu "$VLIB_GPU" || log "probe gpu FAILED: see variorum_probe.txt"
CPU_OK=0
if [ -n "$VLIB_CPU" ]; then
  if VARIORUM_LOG=0 probe cpu-gpu "$VLIB_CPU"; then CPU_OK=1; else log "probe cpu-gpu failed (no MSR access?): no cpu-gpu demo run"; fi
fi
tail -n +1 "$R"/probe-*.txt | tee -a "$OUT/progress.log"

if [ "${SKIP_DEMO:-0}" = 1 ]; then  # the Variorum part alone (also how it is checked without a GPU)
  python3 "$ROOT/scripts/gpu/summarize_variorum.py" --probe "$R/variorum_probe.txt" > "$OUT/summary.txt" 2>&1
  log "SKIP_DEMO=1: stopping after the probes"
  exit 0
fi

# ---- 4. Kokkos, dooly, the demo ---------------------------------------------------------------------------
if [ -n "${PREBUILT_DOOLY_SO:-}" ]; then  # a dry run without a GPU: a connector and a (Serial) demo built elsewhere
  DOOLY_SO=$PREBUILT_DOOLY_SO DEMO=$PREBUILT_DEMO BENCH=""
  log "prebuilt: $DOOLY_SO, $DEMO"
else
KOKKOS_INSTALL=$WORK/kokkos-install
NVCC_WRAPPER=$WORK/nvcc_wrapper
bash "$ROOT/scripts/gpu/prepare_kokkos.sh" "$KOKKOS_SRC" >> "$OUT/progress.log" 2>&1
sm=$(case "$ARCH" in HOPPER90) echo sm_90;; AMPERE80) echo sm_80;; ADA89) echo sm_89;; *) echo sm_90;; esac)
sed "s/^default_arch=\"sm_70\"/default_arch=\"$sm\"/" "$KOKKOS_SRC/bin/nvcc_wrapper" > "$NVCC_WRAPPER"
chmod +x "$NVCC_WRAPPER"
if [ ! -f "$KOKKOS_INSTALL/.done-$ARCH-legacy-view" ]; then
  log "Kokkos: configure + build (CUDA, $ARCH, Release, -j$JOBS)"
  # Kokkos_ENABLE_IMPL_VIEW_LEGACY=ON: see validate_kokkos.sh (mdspan View + nvcc 13 + C++20 write nowhere).
  { cmake -S "$KOKKOS_SRC" -B "$WORK/kokkos-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$NVCC_WRAPPER" -DCMAKE_CXX_STANDARD=20 -DKokkos_ENABLE_SERIAL=ON \
      -DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$ARCH=ON" -DKokkos_ENABLE_IMPL_VIEW_LEGACY=ON \
      -DCMAKE_INSTALL_PREFIX="$KOKKOS_INSTALL" \
    && cmake --build "$WORK/kokkos-build" -j "$JOBS" && cmake --install "$WORK/kokkos-build"; } \
    > "$R/build-kokkos.log" 2>&1 || { tail -30 "$R/build-kokkos.log"; log "Kokkos build FAILED"; exit 1; }
  touch "$KOKKOS_INSTALL/.done-$ARCH-legacy-view"
fi
log "dooly: energy-only build + examples"
{ cmake -S "$ROOT" -B "$WORK/dooly" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOOLY_ENERGY_ONLY=ON \
  && cmake --build "$WORK/dooly" -j "$JOBS" --target kp_gpu_energy dooly_power dooly_common; } \
  > "$R/build-dooly.log" 2>&1 || { tail -30 "$R/build-dooly.log"; log "dooly build FAILED"; exit 1; }
kokkos_dir=$(dirname "$(find "$KOKKOS_INSTALL" -name KokkosConfig.cmake | head -1)")
{ cmake -S "$ROOT/examples" -B "$WORK/examples" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$NVCC_WRAPPER" -DKokkos_DIR="$kokkos_dir" -DDOOLY_BUILD_DIR="$WORK/dooly" \
  && cmake --build "$WORK/examples" -j "$JOBS"; } \
  > "$R/build-examples.log" 2>&1 || { tail -30 "$R/build-examples.log"; log "examples build FAILED"; exit 1; }
DOOLY_SO=$WORK/dooly/src/dooly/kokkos/libkp_gpu_energy.so
DEMO=$WORK/examples/kokkos_energy_demo
BENCH=$WORK/examples/kokkos_overhead_bench
if ! sanity=$("$BENCH" --kernels 100 --warmup 0 2>&1); then
  echo "$sanity"; log "SANITY FAILED: Kokkos CUDA kernels did not produce their result"; exit 1
fi
log "builds done; sanity: $sanity"
fi

# ---- 5. the runs ------------------------------------------------------------------------------------------
side_sampler() {  # out.csv: nvmlDeviceGetPowerUsage of GPU 0 every 20 ms, wall-clock us, until killed
  python3 - "$1" > /dev/null 2> "$1.err" <<'EOF' &
import sys, time, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
with open(sys.argv[1], "w", buffering=1) as f:
    f.write("t_us,power_w\n")
    while True:
        f.write(f"{int(time.time() * 1e6)},{pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0}\n")
        time.sleep(0.02)
EOF
  echo $!
}
run_demo() {  # name, then environment assignments
  local name=$1; shift
  local side=""
  if [ "$name" != nvml ] && python3 -c "import pynvml" 2>/dev/null; then side=$(side_sampler "$R/$name.side.csv"); fi
  log "run $name: $* kokkos_energy_demo $DEMO_ARGS"
  env "$@" KOKKOS_TOOLS_LIBS="$DOOLY_SO" KOKKOS_PROFILE_LIBRARY="$DOOLY_SO" DOOLY_OUTPUT="$R/$name" DOOLY_RECORD="$R/$name.recording" \
      DOOLY_BASELINE_MS=1000 DOOLY_LOG=info "$DEMO" $DEMO_ARGS > "$R/$name.txt" 2> "$R/$name.err"
  local rc=$?
  [ -n "$side" ] && kill "$side" 2>/dev/null
  [ $rc = 0 ] || { tail -5 "$R/$name.err"; log "run $name FAILED (exit $rc)"; return 1; }
  [ -f "$R/$name.json" ] || { tail -5 "$R/$name.err"; log "run $name wrote no $name.json (was the tool loaded?)"; return 1; }
  grep -E "^dooly: (gpu|cpu|dram|node|other)|^run " "$R/$name.txt" | tee -a "$OUT/progress.log"
}
run_demo nvml DOOLY_POWER_SOURCE=nvml
run_demo variorum DOOLY_POWER_SOURCE=variorum DOOLY_VARIORUM_LIBRARY="$VLIB_GPU"
# Variorum's GPU value is nvmlDeviceGetPowerUsage (refreshed ~every 100 ms): the same at a 100 ms period.
run_demo variorum-p100 DOOLY_POWER_SOURCE=variorum DOOLY_VARIORUM_LIBRARY="$VLIB_GPU" DOOLY_PERIOD_MS=100
[ "$CPU_OK" = 1 ] && run_demo variorum-cpu DOOLY_POWER_SOURCE=variorum DOOLY_VARIORUM_LIBRARY="$VLIB_CPU"

# ---- 6. summaries -----------------------------------------------------------------------------------------
runs=(nvml variorum variorum-p100); [ "$CPU_OK" = 1 ] && runs+=(variorum-cpu)
{
  args=()
  for n in "${runs[@]}"; do [ -f "$R/$n.json" ] && args+=("$n=$R/$n"); done
  python3 "$ROOT/scripts/gpu/summarize_variorum.py" --probe "$R/variorum_probe.txt" "${args[@]}"
  for n in "${runs[@]}"; do
    [ -f "$R/$n.json" ] || continue
    echo; echo "==== summarize_kokkos.py demo ($n): J/call interleaved vs the counter's alone reference"
    python3 "$ROOT/scripts/gpu/summarize_kokkos.py" demo "$R/$n.txt" "$R/$n.json" 2>&1
  done
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
log "done in $(( $(date +%s) - T0 )) s"
