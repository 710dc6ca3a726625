#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default"). Usage: scripts/build.sh [preset] [targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}; shift || true
py_flags=()
if [ -x .venv/bin/python ]; then py_flags=(-DPython_EXECUTABLE="$PWD/.venv/bin/python"); fi
cmake --preset "$preset" "${py_flags[@]}" >/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
if [ $# -gt 0 ]; then cmake --build --preset "$preset" -j "$jobs" --target "$@"; else cmake --build --preset "$preset" -j "$jobs"; fi
