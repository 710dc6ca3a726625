#!/usr/bin/env bash
# The whole test suite: set up, build, run unit tests (plain, ASan+UBSan, TSan on the threaded parts),
# the connector under a real Kokkos runtime, and the Python tests. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== default build"
bash scripts/build.sh default
ctest --preset default -j 2

echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
bash scripts/build.sh asan
ctest --preset asan -j 2

echo "== ThreadSanitizer (sampler and profiler threads)"
bash scripts/build.sh tsan
ctest --preset tsan -j 2

if [ -f scripts/test_python.sh ]; then
  echo "== Python"
  bash scripts/test_python.sh
fi
echo "== all test suites passed"
