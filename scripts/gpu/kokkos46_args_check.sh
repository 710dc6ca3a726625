#!/usr/bin/env bash
# The connector under an upstream Kokkos (4.6, Serial back end only), built from a git-ignored copy of its
# source: the start-up checks of tests/kokkos/kokkos_runtime_test.cpp (which CI runs against Debian's Kokkos
# 3.4.1) for a machine without GoogleTest. Kokkos 4.6 calls the tool's init before its parse_args and calls
# parse_args twice (docs/kokkos.md, "When the tool starts"): arguments given with --kokkos-tools-args or
# KOKKOS_TOOLS_ARGS must take effect, a bad one must be one line, and --kokkos-tools-help must print the help
# and nothing else. No GPU needed (power replayed from tests/kokkos/data/square_150w.recording).
#   KOKKOS_SRC=third_party_build/kokkos-4.6-src OUT=out/kokkos46 scripts/gpu/kokkos46_args_check.sh
# Needs CMake, a C++20 compiler, and fmt / nlohmann-json / Eigen headers (system, or .deps/ from
# scripts/gpu/pack_deps.sh). Writes $OUT/kokkos46.txt; exits 1 if a check fails.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KOKKOS_SRC=${KOKKOS_SRC:-$ROOT/third_party_build/kokkos-4.6-src}
OUT=${OUT:-$ROOT/out/kokkos46}
WORK=${WORK:-$ROOT/build/kokkos46}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S "$KOKKOS_SRC" -B "$WORK/kokkos-build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 \
    -DKokkos_ENABLE_SERIAL=ON -DCMAKE_INSTALL_PREFIX="$WORK/kokkos-install" >"$OUT/kokkos_configure.log" 2>&1
  cmake --build "$WORK/kokkos-build" -j "$JOBS" >"$OUT/kokkos_build.log" 2>&1
  cmake --install "$WORK/kokkos-build" >>"$OUT/kokkos_build.log" 2>&1
  cmake -S "$ROOT" -B "$WORK/dooly" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDOOLY_ENERGY_ONLY=ON \
    >"$OUT/dooly_configure.log" 2>&1
  cmake --build "$WORK/dooly" -j "$JOBS" --target kp_gpu_energy >"$OUT/dooly_build.log" 2>&1
  mkdir -p "$WORK/app"
  cat >"$WORK/app/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(kokkos_app CXX)
find_package(Kokkos REQUIRED)
add_executable(kokkos_app $ROOT/tests/kokkos/kokkos_app.cpp)
target_link_libraries(kokkos_app PRIVATE Kokkos::kokkos)
EOF
  cmake -S "$WORK/app" -B "$WORK/app/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DKokkos_ROOT="$WORK/kokkos-install" >"$OUT/app_build.log" 2>&1
  cmake --build "$WORK/app/build" -j "$JOBS" >>"$OUT/app_build.log" 2>&1
fi

APP=$WORK/app/build/kokkos_app
LIB=$WORK/dooly/src/dooly/kokkos/libkp_gpu_energy.so
REPORT=$OUT/kokkos46.txt
: >"$REPORT"
failed=0
say() { echo "$*" | tee -a "$REPORT"; }
check() {  # check <name> <condition...>
  local name=$1
  shift
  if "$@"; then say "PASS $name"; else say "FAIL $name"; failed=1; fi
}
run() {  # run <tag> [VAR=value ...] -- <app args...>; stdout/stderr in $OUT/<tag>.{out,err}
  local tag=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local rc=0
  env -u KOKKOS_TOOLS_ARGS -u KOKKOS_PROFILE_LIBRARY KOKKOS_TOOLS_LIBS="$LIB" DOOLY_POWER_SOURCE=replay \
    DOOLY_REPLAY_FILE="$ROOT/tests/kokkos/data/square_150w.recording" DOOLY_PERIOD_MS=5 \
    DOOLY_OUTPUT="$OUT/$tag" "${envs[@]}" "$APP" "$@" >"$OUT/$tag.out" 2>"$OUT/$tag.err" || rc=$?
  echo $rc >"$OUT/$tag.rc"
}
json_field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>/dev/null || echo "(no report)"; }
dooly_lines() { grep -c '^dooly:' "$1" || true; }

say "kokkos: $(grep -m1 'Kokkos_VERSION' "$WORK/kokkos-build/CMakeCache.txt" 2>/dev/null || git -C "$KOKKOS_SRC" describe 2>/dev/null || echo "$KOKKOS_SRC")"
say "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname), $(g++ --version | head -1)"

run plain -- 3 1000
check "plain run: exit 0, program output, no dooly: line on stderr" \
  test "$(cat "$OUT/plain.rc")" = 0 -a "$(dooly_lines "$OUT/plain.err")" = 0
check "plain run: fence hooks removed, axpy 3 calls, model mode" \
  test "$(json_field "$OUT/plain.json" "d['meta']['kokkos.fence_hooks'], [r['calls'] for r in d['channels'][0]['regions'] if r['name']=='axpy'], d['mode']")" = "('removed at init', [3], 'model')"

run args -- 3 1000 "--kokkos-tools-args=mode=trapezoid period_ms=7 log=info"
check "--kokkos-tools-args: mode and period taken" \
  test "$(json_field "$OUT/args.json" "d['mode'], d['meta']['sampler_period_ms']")" = "('trapezoid', '7')"
check "--kokkos-tools-args: log=info taken" grep -q "^dooly: measuring gpu0 through replay every 7 ms$" "$OUT/args.err"

run env KOKKOS_TOOLS_ARGS="mode=trapezoid period_ms=7" -- 3 1000
check "KOKKOS_TOOLS_ARGS: mode and period taken" \
  test "$(json_field "$OUT/env.json" "d['mode'], d['meta']['sampler_period_ms']")" = "('trapezoid', '7')"

run unknown -- 3 1000 "--kokkos-tools-args=colour=blue"
check "unknown argument: exactly one line (parse_args comes twice), no report, exit 0" \
  test "$(grep '^dooly:' "$OUT/unknown.err")" = "dooly: unknown tool argument 'colour' — see the list of settings with --kokkos-tools-help -- energy measurement is off for this run" \
  -a ! -e "$OUT/unknown.json" -a "$(cat "$OUT/unknown.rc")" = 0

run help DOOLY_POWER_SOURCE=nvml DOOLY_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 -- --kokkos-tools-help
check "help: the settings on stdout, no dooly: line on stderr, no report" \
  test "$(head -1 "$OUT/help.out")" = "dooly (libkp_gpu_energy.so): energy per Kokkos kernel and region." \
  -a "$(dooly_lines "$OUT/help.err")" = 0 -a ! -e "$OUT/help.json"

say "$([ $failed = 0 ] && echo 'all checks passed' || echo 'some checks FAILED')"
exit $failed
