#!/usr/bin/env bash
# Run HERE (a machine with internet access and the mirrors), before scripts/gpu/validate_variorum.sh goes to
# the GPU machine, which has no internet. Idempotent; everything it writes is git-ignored (/third_party_build/):
#   third_party_build/variorum-src/   Variorum v0.8.0 source (git archive of the mirror; docs and googletest
#                                     left out: the mirror lacks the docs' PDFs, and the build needs neither)
#   third_party_build/variorum-kit/   what the GPU image may lack, unpacked there with dpkg -x into a private
#                                     prefix (never into /) by scripts/gpu/build_variorum.sh:
#                                       debs/  libhwloc15, libhwloc-dev, libjansson4, libjansson-dev (Debian 12
#                                              amd64; glibc 2.36, so they run on Ubuntu 24.04 too) and libudev1
#                                              (libhwloc15 needs it; used only where the machine lacks it)
#                                       nvml/include/nvml.h  NVML's header (PyPI nvidia-nvml-dev 13.0.87, for
#                                              CUDA 13.0 / driver 580), used where the CUDA toolkit has none
#   third_party_build/kokkos-src/     Kokkos 4.6.99 (develop) for the demo, if the mirror is there (tests,
#                                     benchmarks, examples and docs left out; prepare_kokkos.sh stubs the last)
# Environment: VARIORUM_MIRROR (default /work/.mirror/LLNL+variorum/repo), KOKKOS_MIRROR
# (default /work/.mirror/kokkos+kokkos/repo; get it with the search tool's fetch of github:kokkos/kokkos).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TP=$ROOT/third_party_build
VARIORUM_MIRROR=${VARIORUM_MIRROR:-/work/.mirror/LLNL+variorum/repo}
KOKKOS_MIRROR=${KOKKOS_MIRROR:-/work/.mirror/kokkos+kokkos/repo}
mkdir -p "$TP"

# ---- Variorum source ---------------------------------------------------------------------------------------
src=$TP/variorum-src
if [ ! -f "$src/src/CMakeLists.txt" ]; then
  [ -d "$VARIORUM_MIRROR" ] || { echo "prepare_variorum: no Variorum mirror at $VARIORUM_MIRROR (fetch github:LLNL/variorum)" >&2; exit 1; }
  rm -rf "$src.tmp" && mkdir -p "$src.tmp"
  # The mirror lacks some blobs under src/docs (tutorial PDFs): leave docs out, and googletest (tests are off).
  git -C "$VARIORUM_MIRROR" archive HEAD -- . ':(exclude)src/docs' ':(exclude)src/thirdparty_builtin/googletest' \
    2>/dev/null | tar -x -C "$src.tmp" || true
  [ -f "$src.tmp/src/variorum/variorum.c" ] && [ -f "$src.tmp/src/CMakeLists.txt" ] \
    || { echo "prepare_variorum: the archive of $VARIORUM_MIRROR is incomplete" >&2; exit 1; }
  echo "$(git -C "$VARIORUM_MIRROR" describe --tags HEAD 2>/dev/null || echo unknown) $(git -C "$VARIORUM_MIRROR" rev-parse HEAD)" \
    > "$src.tmp/DOOLY_SOURCE_VERSION"
  mv "$src.tmp" "$src"
fi
echo "prepare_variorum: Variorum source $(cat "$src/DOOLY_SOURCE_VERSION" 2>/dev/null || echo '(version unknown)') in $src"

# ---- the kit: hwloc, jansson (and libudev1) debs, NVML header ---------------------------------------------
kit=$TP/variorum-kit
mkdir -p "$kit/debs" "$kit/nvml/include"
pkgs=(libhwloc15 libhwloc-dev libjansson4 libjansson-dev libudev1)
missing=()
for p in "${pkgs[@]}"; do ls "$kit/debs/${p}_"*_amd64.deb >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  # amd64 whatever this machine is; the GPU machine is x86-64.
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64)
  if ! (cd "$kit/debs" && apt-get "${o[@]}" download "${missing[@]}"); then
    apt-get "${o[@]}" update >/dev/null
    (cd "$kit/debs" && apt-get "${o[@]}" download "${missing[@]}")
  fi
  # Plain names only (libudev1's version has a '~'): the files travel to the GPU machine.
  for f in "$kit"/debs/*.deb; do
    g=$(dirname "$f")/$(basename "$f" | tr -c 'A-Za-z0-9._\n-' '_')
    [ "$f" = "$g" ] || mv "$f" "$g"
  done
fi
if [ ! -f "$kit/nvml/include/nvml.h" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp" 'nvidia-nvml-dev==13.0.87'
  python3 - "$tmp" "$kit/nvml/include" <<'EOF'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/nvidia_nvml_dev-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("include/nvml.h"))
    open(sys.argv[2] + "/nvml.h", "wb").write(z.read(name))
EOF
  echo "nvidia-nvml-dev 13.0.87 (PyPI)" > "$kit/nvml/SOURCE"
  rm -rf "$tmp"
fi
echo "prepare_variorum: kit in $kit: $(cd "$kit/debs" && ls | tr '\n' ' ')+ nvml.h"

# ---- Kokkos for the demo (optional here: validate_variorum.sh needs it) ------------------------------------
ksrc=$TP/kokkos-src
if [ ! -f "$ksrc/CMakeLists.txt" ]; then
  if [ -d "$KOKKOS_MIRROR" ]; then
    rm -rf "$ksrc.tmp" && mkdir -p "$ksrc.tmp"
    # Test, benchmark and example folders are only added when enabled (prepare_kokkos.sh stubs the last two).
    git -C "$KOKKOS_MIRROR" archive HEAD -- . ':(exclude)doc' ':(exclude)example' ':(exclude)benchmarks' \
      ':(exclude)tpls/gtest' ':(exclude,glob)**/unit_test/**' ':(exclude,glob)**/unit_tests/**' \
      ':(exclude,glob)**/perf_test/**' ':(exclude,glob)**/performance_tests/**' | tar -x -C "$ksrc.tmp"
    echo "$(git -C "$KOKKOS_MIRROR" describe --tags HEAD 2>/dev/null || echo unknown) $(git -C "$KOKKOS_MIRROR" rev-parse HEAD)" \
      > "$ksrc.tmp/DOOLY_SOURCE_VERSION"
    mv "$ksrc.tmp" "$ksrc"
    bash "$ROOT/scripts/gpu/prepare_kokkos.sh" "$ksrc"
  else
    echo "prepare_variorum: no Kokkos mirror at $KOKKOS_MIRROR and no $ksrc: validate_variorum.sh needs one" >&2
  fi
fi
[ -f "$ksrc/CMakeLists.txt" ] && echo "prepare_variorum: Kokkos source $(cat "$ksrc/DOOLY_SOURCE_VERSION" 2>/dev/null) in $ksrc"

# ---- what the GPU run carries ------------------------------------------------------------------------------
for d in .deps/fmt .deps/nlohmann .deps/eigen3; do
  [ -e "$ROOT/$d" ] || echo "prepare_variorum: $ROOT/$d missing: run scripts/gpu/pack_deps.sh" >&2
done
echo "prepare_variorum: sizes of what validate_variorum.sh carries:"
(cd "$ROOT" && du -shc .deps/fmt .deps/nlohmann .deps/eigen3 third_party_build/variorum-src \
   third_party_build/variorum-kit third_party_build/kokkos-src 2>/dev/null)
echo "prepare_variorum: tracked files: $(cd "$ROOT" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) bytes"
