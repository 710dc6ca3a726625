#!/usr/bin/env bash
# Builds the fuzz preset (clang, libFuzzer, ASan + UBSan) and runs every fuzz target for N seconds each
# (default 30), two at a time. Seeds come from tests/fuzz/corpus/<target>/ (read only); what a run adds is
# kept in build/<preset>/corpus/<target>/, and a crash, leak, timeout or out-of-memory input lands in
# build/<preset>/artifacts/<target>/. Exits non-zero on any finding, naming the input to copy into
# tests/fuzz/crashes/<target>/ (fuzz_replay_test replays those in every build once the bug is fixed).
#
#   scripts/fuzz.sh [seconds-per-target] [target...]     FUZZ_JOBS=n runs n targets at once (default 2);
#                                                        FUZZ_NO_BUILD=1 skips the build;
#                                                        FUZZ_PRESET=asan uses the asan build's executables
#                                                        (clang at -O0, also coverage-instrumented: CI's
#                                                        quick run), default the fuzz preset (-O1);
#                                                        DOOLY_WERROR=1|0: see scripts/build.sh, which builds it
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(recording readings analyze variorum_json trace_json model_config store grid value_form workload result_json)
jobs=${FUZZ_JOBS:-2}
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: seconds-per-target must be a whole number, got '$seconds'" >&2; exit 2 ;; esac

preset=${FUZZ_PRESET:-fuzz}
case "$preset" in fuzz | asan) ;; *) echo "fuzz.sh: FUZZ_PRESET must be fuzz or asan, got '$preset'" >&2; exit 2 ;; esac
dir=build/$preset
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then  # FUZZ_NO_BUILD=1: run the executables already in build/<preset>
  bash scripts/build.sh "$preset" dooly_fuzzers  # DOOLY_WERROR as scripts/build.sh reads it
fi

run_one() {
  local t=$1 bin=$dir/tests/fuzz/fuzz_$1
  local work=$dir/corpus/$t art=$dir/artifacts/$t/ log=$dir/logs/$t.log
  mkdir -p "$work" "$art" "$dir/logs"
  # -timeout: one input may take 10 s; -rss_limit_mb: an input that needs 2 GB is a finding (memory bomb).
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$art" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo ok >"$log.status"
  else
    echo "finding" >"$log.status"
  fi
}

running=0
for t in "${targets[@]}"; do
  [ -x "$dir/tests/fuzz/fuzz_$t" ] || { echo "fuzz.sh: no target '$t'" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

failed=0
printf '%-14s %12s %8s %8s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
  log=$dir/logs/$t.log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  status=$(cat "$log.status")
  printf '%-14s %12s %8s %8s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$status"
  if [ "$status" != ok ]; then
    failed=1
    grep -m1 -E 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" || true
    ls "$dir"/artifacts/"$t"/ 2>/dev/null | sed "s|^|  input: $dir/artifacts/$t/|"
    echo "  log: $log"
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz.sh: a target found a crash; fix it, then copy the input into tests/fuzz/crashes/<target>/" >&2
  exit 1
fi
echo "fuzz.sh: no findings (${seconds} s per target)"
