#!/usr/bin/env bash
# Makes the git-ignored Kokkos copy buildable here: the copy has its examples/benchmarks folders stripped
# (Kokkos's CMake adds them unconditionally), and Kokkos 4.6.x calls two CUDA runtime functions whose
# signatures changed in CUDA 13. Both fixes are applied to the ignored copy only, are idempotent, and are
# guarded by CUDART_VERSION so the same copy still builds with CUDA 12. Never commit the patched copy.
#   scripts/gpu/prepare_kokkos.sh [kokkos-src]   (default third_party_build/kokkos-src)
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)/third_party_build/kokkos-src}
[ -f "$src/CMakeLists.txt" ] || { echo "prepare_kokkos: no Kokkos source at $src" >&2; exit 1; }

for d in example benchmarks; do
  if [ ! -f "$src/$d/CMakeLists.txt" ]; then
    mkdir -p "$src/$d"
    echo "# stub: this folder was stripped from the copy (scripts/gpu/prepare_kokkos.sh)" > "$src/$d/CMakeLists.txt"
    echo "prepare_kokkos: stubbed $d/"
  fi
done

inst="$src/core/src/Cuda/Kokkos_Cuda_Instance.hpp"
if [ -f "$inst" ] && ! grep -q "dooly-cuda13" "$inst"; then
  perl -0pi -e '
    s{(\n)(\s*)return cudaGraphAddDependencies\(graph, from, to, numDependencies\);}{$1#if CUDART_VERSION >= 13000 // dooly-cuda13: edge data argument added\n$2return cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies);\n#else\n$2return cudaGraphAddDependencies(graph, from, to, numDependencies);\n#endif}s;
    s{(\n)(\s*)return cudaMemPrefetchAsync\(devPtr, count, dstDevice, m_stream\);}{$1#if CUDART_VERSION >= 13000 // dooly-cuda13: location struct and flags\n$2cudaMemLocation loc{};\n$2loc.type = cudaMemLocationTypeDevice;\n$2loc.id = dstDevice;\n$2return cudaMemPrefetchAsync(devPtr, count, loc, 0, m_stream);\n#else\n$2return cudaMemPrefetchAsync(devPtr, count, dstDevice, m_stream);\n#endif}s;
  ' "$inst"
  n=$(grep -c "dooly-cuda13" "$inst" || true)
  echo "prepare_kokkos: patched $n CUDA 13 call(s) in $(basename "$inst")"
fi
