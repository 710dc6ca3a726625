#!/usr/bin/env bash
# The whole test suite, as CI runs it: set up, then
#   1. unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (every test not labelled no-sanitizer),
#   2. the plain build: the deliverables (dooly, libkp_gpu_energy.so, the Python binding) and the tests that
#      load them into other programs (a real Kokkos runtime, Python),
#   3. the threaded parts (sampler, profiler, store concurrency) under ThreadSanitizer,
#   4. the Python tests.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
bash scripts/build.sh asan
ctest --preset asan -j "$jobs"

echo "== plain build: deliverables and integration tests"
bash scripts/build.sh default
ctest --preset default -j "$jobs" -L no-sanitizer

echo "== ThreadSanitizer (threads)"
bash scripts/build.sh tsan dooly_threads_tests
ctest --preset tsan -j "$jobs"

if [ -f scripts/test_python.sh ]; then
  echo "== Python"
  bash scripts/test_python.sh
fi
echo "== all test suites passed"
