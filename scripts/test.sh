#!/usr/bin/env bash
# The whole test suite, as CI runs it: set up, then
#   1. unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (every test not labelled no-sanitizer; clang,
#      whose build also gives the fuzz targets of tier 5),
#   2. the plain build: the deliverables (dooly, libkp_gpu_energy.so, the Python binding) and the tests that
#      load them into other programs (a real Kokkos runtime, Python), and the CLI's tests (the sanitizer build
#      leaves the CLI out: its subcommands are thin callers of the libraries tested there),
#   3. the threaded parts (sampler, profiler, store concurrency) under ThreadSanitizer,
#   4. the Python tests, and the installed package (the venv's `pip install .`),
#   5. every reader's fuzz target for a short run (libFuzzer, ASan + UBSan, built in tier 1; FUZZ_SECONDS per
#      target, default 6: a smoke run from the committed corpora; the long campaigns are in
#      docs/results/2026-12-01-fuzzing.md),
#   6. lint: clang-format over src/ and clang-tidy (bugprone, performance, complexity <= 25) over all of src/;
#      a unit whose exact content (preprocessed, with the same config and tool) .ci/tidy-clean.txt lists as
#      found clean is not tidied again (scripts/clean_units.py; refresh it with
#      scripts/lint.sh --tidy-only --cache .ci/tidy-clean.txt --update-cache, on a build with -Werror as CI's:
#      DOOLY_WERROR=1 scripts/build.sh default, or a clone's build/default after this script).
# Every build treats compiler warnings as errors: DOOLY_WERROR=1 below makes scripts/build.sh (and the fuzz
# build in scripts/fuzz.sh) configure with -DDOOLY_WERROR=ON; those folders keep it for later local builds
# (DOOLY_WERROR=0 scripts/build.sh <preset> turns it off again).
# The randomized differential tests (label `random`: the reference attributor, paired vs one-at-a-time) run a
# small set under the sanitizers (unoptimised) and the whole set in the plain build. The venv gets torch and
# transformers but not the project itself (DOOLY_INSTALL_PROJECT=0): the tests import the source tree and the
# plain build, and tier 4 installs the project into a fresh venv as a user would. Each tier's line carries the
# seconds since the start, so a CI log shows where the time goes.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
tier() { echo "== [$(($(date +%s) - start)) s] $*"; }
DOOLY_INSTALL_PROJECT=0 bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
export DOOLY_WERROR=1

tier "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
bash scripts/build.sh asan
ctest --preset asan -j "$jobs"

tier "plain build: deliverables and integration tests, the CLI's tests; every public header compiles on its own"
# The unit tests ran under the sanitizers above; this build defines only the tests it runs (DOOLY_UNIT_TESTS=OFF),
# and the folder gets every test back when this script ends, however it ends. It shares precompiled system headers
# as the sanitizer builds do (DOOLY_PCH=1); a unit of src/ that leans on them for an include it does not make still
# fails in tier 6, where clang-tidy compiles it as written (scripts/clean_units.py compdb), and a header in the
# header check. The folder keeps the setting (DOOLY_PCH=0 scripts/build.sh default turns it off).
trap 'cmake --preset default -DDOOLY_UNIT_TESTS=ON >/dev/null 2>&1 || true' EXIT
DOOLY_PCH=1 DOOLY_UNIT_TESTS=0 bash scripts/build.sh default
# Every header compiled alone (cmake/HeaderCheck.cmake's units), less those whose exact text .ci/headers-clean.txt
# lists as found clean (refresh: python3 scripts/clean_units.py headers build/default --cache
# .ci/headers-clean.txt --update-cache).
python3 scripts/clean_units.py headers build/default --cache .ci/headers-clean.txt
ctest --preset default -j "$jobs" -L "no-sanitizer|random|cli"

tier "ThreadSanitizer (threads)"
bash scripts/build.sh tsan dooly_threads_tests
ctest --preset tsan -j "$jobs"

if [ -f scripts/test_python.sh ]; then
  tier "Python; beside it, the installed package (pip install . into a fresh venv, as a user would)"
  # The wheel's build runs while the Python tests wait on their subprocesses and replayed clocks; its output is
  # shown after them. It compiles at -O0 (DOOLY_WHEEL_UNOPTIMISED): the test checks what is installed and where.
  DOOLY_WHEEL_UNOPTIMISED=1 .venv/bin/python -m pytest -q tests/packaging > build/packaging.log 2>&1 &
  packaging=$!
  python_rc=0
  bash scripts/test_python.sh || python_rc=$?
  packaging_rc=0
  wait "$packaging" || packaging_rc=$?
  tier "the installed package: exit $packaging_rc"
  cat build/packaging.log
  [ "$python_rc" -eq 0 ] && [ "$packaging_rc" -eq 0 ] || { echo "test.sh: Python tests exit $python_rc, packaging exit $packaging_rc" >&2; exit 1; }
fi

tier "fuzz targets, ${FUZZ_SECONDS:-6} s each (the asan build's: clang, coverage-instrumented)"
FUZZ_PRESET=asan FUZZ_NO_BUILD=1 bash scripts/fuzz.sh "${FUZZ_SECONDS:-6}"

tier "lint"
bash scripts/lint.sh --format-only
bash scripts/lint.sh --tidy-only --cache .ci/tidy-clean.txt build/default
tier "all test suites passed"
