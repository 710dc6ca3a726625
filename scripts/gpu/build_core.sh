#!/usr/bin/env bash
# Builds the Python binding dooly_core on a GPU machine whose image has torch but none of the C++ dev packages:
# g++ against the headers scripts/gpu/pack_deps.sh copies into .deps/ (carry it), fmt header-only, linked to the
# machine's libcrypto and libsqlite3 (Python's own ssl and sqlite3 modules use them). The whole binding: taint,
# trace, signatures, the store, the planner, the energy engine with every power backend, and the simulator's
# workloads (dooly live serves them).
#   scripts/gpu/build_core.sh [dest=/tmp/dooly-core]    then: export PYTHONPATH=$PWD/python:<dest>
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
core=${1:-/tmp/dooly-core}
DEPS=${DEPS:-$ROOT/.deps}
[ -d "$DEPS/openssl" ] && [ -f "$DEPS/sqlite3.h" ] || { echo "build_core: $DEPS lacks openssl/ or sqlite3.h: run scripts/gpu/pack_deps.sh here and carry .deps"; exit 2; }
lib_of() {  # soname -> a path the linker takes (ldconfig's, else the one a Python module links)
  local p
  p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')
  [ -n "$p" ] || p=$(ldd "$(python3 -c "import $2; print($2.__file__)")" 2>/dev/null | awk -v n="$1" '$1 == n {print $3; exit}')
  echo "$p"
}
crypto=$(lib_of libcrypto.so.3 _ssl); sqlite=$(lib_of libsqlite3.so.0 _sqlite3)
[ -n "$crypto" ] && [ -n "$sqlite" ] || { echo "build_core: libcrypto.so.3 ($crypto) or libsqlite3.so.0 ($sqlite) not found"; exit 1; }
mkdir -p "$core/obj"
pyinc=$(python3 -m pybind11 --includes 2>/dev/null) || pyinc=$(python3-config --includes)  # else a system pybind11
version=$(sed -n 's/^project(dooly VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
inc="-I$ROOT/src -I$DEPS -I$DEPS/eigen3 $pyinc -DDOOLY_VERSION=\"$version\""
srcs=(python/dooly_core.cpp src/dooly/taint/*.cpp src/dooly/taint/rules/*.cpp src/dooly/trace/*.cpp
      src/dooly/signature/*.cpp src/dooly/store/*.cpp src/dooly/plan/*.cpp src/dooly/energy/*.cpp
      src/dooly/power/*.cpp src/dooly/power/*/*.cpp src/dooly/common/*.cpp
      src/dooly/sim/workload.cpp)  # the workloads only: the rest of sim/ is not bound
pids=()
for f in "${srcs[@]}"; do
  o="$core/obj/$(echo "$f" | tr / _).o"
  [ "$o" -nt "$f" ] && continue
  g++ -O2 -std=c++20 -fPIC -DFMT_HEADER_ONLY $inc -c "$f" -o "$o" &
  pids+=($!)
  [ ${#pids[@]} -lt "$(nproc)" ] || { wait "${pids[0]}"; pids=("${pids[@]:1}"); }
done
wait
g++ -shared "$core"/obj/*.o -o "$core/dooly_core$(python3-config --extension-suffix)" "$crypto" "$sqlite" -ldl -lpthread
PYTHONPATH="$ROOT/python:$core" python3 -c "import dooly_core; print('build_core: dooly_core ok')"
