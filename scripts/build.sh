#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default"). Usage: scripts/build.sh [preset] [targets...]
#   DOOLY_WERROR=1   configure with -DDOOLY_WERROR=ON (warnings are errors; scripts/test.sh sets it, as CI does);
#   DOOLY_WERROR=0   with -DDOOLY_WERROR=OFF; unset: the build folder keeps the value it has (a new one: OFF).
#   DOOLY_UNIT_TESTS=0|1   -DDOOLY_UNIT_TESTS=OFF|ON (OFF: only the tests the plain CI tier runs; unset: kept).
#   DOOLY_PCH=0|1    -DDOOLY_PCH=OFF|ON (precompiled system headers; unset: kept).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}; shift || true
flags=()
if [ -x .venv/bin/python ]; then flags=(-DPython_EXECUTABLE="$PWD/.venv/bin/python"); fi
case "${DOOLY_WERROR:-}" in
  '') ;;
  1) flags+=(-DDOOLY_WERROR=ON) ;;
  0) flags+=(-DDOOLY_WERROR=OFF) ;;
  *) echo "build.sh: DOOLY_WERROR must be 1 or 0, got '$DOOLY_WERROR'" >&2; exit 2 ;;
esac
case "${DOOLY_UNIT_TESTS:-}" in
  '') ;;
  1) flags+=(-DDOOLY_UNIT_TESTS=ON) ;;
  0) flags+=(-DDOOLY_UNIT_TESTS=OFF) ;;
  *) echo "build.sh: DOOLY_UNIT_TESTS must be 1 or 0, got '$DOOLY_UNIT_TESTS'" >&2; exit 2 ;;
esac
case "${DOOLY_PCH:-}" in
  '') ;;
  1) flags+=(-DDOOLY_PCH=ON) ;;
  0) flags+=(-DDOOLY_PCH=OFF) ;;
  *) echo "build.sh: DOOLY_PCH must be 1 or 0, got '$DOOLY_PCH'" >&2; exit 2 ;;
esac
cmake --preset "$preset" "${flags[@]}" >/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
if [ $# -gt 0 ]; then cmake --build --preset "$preset" -j "$jobs" --target "$@"; else cmake --build --preset "$preset" -j "$jobs"; fi
