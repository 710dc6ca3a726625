#!/usr/bin/env bash
# Builds LLNL Variorum (third_party_build/variorum-src, made by scripts/gpu/prepare_variorum.sh) with its NVIDIA
# GPU port, on a machine with no internet and no hwloc/jansson development packages (the GPU machine); also
# runs here, where it was checked (docs/power-sources.md, "Real Variorum").
#   scripts/gpu/build_variorum.sh [gpu|cpu-gpu]      (default gpu)
#     gpu      VARIORUM_WITH_NVIDIA_GPU=ON only: GPU power (nvmlDeviceGetPowerUsage) per GPU.
#     cpu-gpu  also VARIORUM_WITH_INTEL_CPU=ON (RAPL package/DRAM power through the msr or msr-safe driver:
#              /dev/cpu/*/msr_safe or /dev/cpu/*/msr, read-write). In a VM or container these are usually
#              missing or the RAPL MSRs are not passed through, and Variorum then fails the WHOLE call (every
#              platform of a build must answer). Built only on an Intel CPU: the AMD CPU port needs AMD's E-SMI
#              library, which is not in the kit.
# Steps (nothing is written outside $VARIORUM_WORK, default build/variorum):
#   1. unpacks the kit's debs (libhwloc15, libhwloc-dev, libjansson4, libjansson-dev) with dpkg -x into
#      $VARIORUM_WORK/kit (never into /); libudev1 (libhwloc15 needs it) only where the machine has none
#      (or FORCE_KIT_UDEV=1);
#   2. NVML: the header from the kit (nvidia-nvml-dev 13.0.87; NVML_INCLUDE=<dir> to use another). Variorum's
#      CMake takes NVML_DIR (it reads $NVML_DIR/include/nvml.h) but never links NVML itself: its host-configs add
#      "-L<dir> -lnvidia-ml" to CMAKE_SHARED_LINKER_FLAGS. We link against a stub libnvidia-ml.so.1 generated
#      here from nvml.h's declarations (the same thing as CUDA's lib64/stubs, which the toolkit may lack), with
#      --no-as-needed (Ubuntu's gcc links --as-needed by default and would drop it); at run time the driver's
#      libnvidia-ml.so.1 is found through the loader's usual path. The stub's folder is never in the RPATH;
#   3. configures (Release, Ninja if present, no tests/Fortran/Python/OpenMP/MPI/docs) a copy of the source
#      (Variorum writes variorum_config.h into its source tree), builds, installs into $VARIORUM_WORK/<variant>;
#      the library's RPATH (DT_RPATH, so it also serves libhwloc's own needs) is the kit's lib folder;
#   4. checks the library (NEEDED, RPATH, the symbols dooly calls) and prints, last line:
#        VARIORUM_LIBRARY=<path of libvariorum.so>
# Environment: VARIORUM_WORK, VARIORUM_SRC, VARIORUM_KIT, NVML_INCLUDE, JOBS, FORCE_KIT_UDEV,
# VARIORUM_ANY_CPU=1 (build cpu-gpu on a non-Intel CPU too: a compile check; its calls fail there).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
variant=${1:-gpu}
case $variant in gpu|cpu-gpu) ;; *) echo "build_variorum: variant is gpu or cpu-gpu, not '$variant'" >&2; exit 2;; esac
SRC=${VARIORUM_SRC:-$ROOT/third_party_build/variorum-src}
KIT=${VARIORUM_KIT:-$ROOT/third_party_build/variorum-kit}
WORK=${VARIORUM_WORK:-$ROOT/build/variorum}
JOBS=${JOBS:-2}
log() { echo "build_variorum[$variant]: $*" >&2; }
[ -f "$SRC/src/CMakeLists.txt" ] || { log "no Variorum source at $SRC: run scripts/gpu/prepare_variorum.sh here first"; exit 1; }
[ -d "$KIT/debs" ] || { log "no kit at $KIT: run scripts/gpu/prepare_variorum.sh here first"; exit 1; }
if [ "$variant" = cpu-gpu ] && ! grep -q GenuineIntel /proc/cpuinfo && [ "${VARIORUM_ANY_CPU:-0}" != 1 ]; then
  log "not an Intel CPU: Variorum's other CPU ports need libraries the kit lacks (AMD: E-SMI); not built"
  exit 3
fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

# ---- 1. the kit -------------------------------------------------------------------------------------------
PREFIX=$WORK/kit
LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu
if [ ! -f "$PREFIX/.done" ]; then
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  for deb in "$KIT"/debs/*.deb; do
    case $(basename "$deb") in libudev1_*) continue;; esac
    dpkg -x "$deb" "$PREFIX"
  done
  have_udev=0
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
    [ -e "$d/libudev.so.1" ] && have_udev=1
  done
  if [ "$have_udev" = 0 ] || [ "${FORCE_KIT_UDEV:-0}" = 1 ]; then
    log "libudev.so.1: from the kit (the machine has none, or FORCE_KIT_UDEV=1)"
    dpkg -x "$KIT"/debs/libudev1_*.deb "$PREFIX"
    [ -d "$PREFIX/lib/x86_64-linux-gnu" ] && cp -a "$PREFIX"/lib/x86_64-linux-gnu/libudev.so* "$LIBDIR/"
  fi
  # Debian keeps hwloc's generated config header under the multiarch folder; Variorum adds only
  # HWLOC_INCLUDE_DIRS (and var_monitor overrides CMAKE_C_FLAGS): put it beside hwloc.h.
  cp -r "$PREFIX/usr/include/x86_64-linux-gnu/hwloc/autogen" "$PREFIX/usr/include/hwloc/"
  touch "$PREFIX/.done"
fi
for f in "$PREFIX/usr/include/hwloc.h" "$PREFIX/usr/include/hwloc/autogen/config.h" "$PREFIX/usr/include/jansson.h" "$LIBDIR/libhwloc.so" "$LIBDIR/libjansson.so"; do
  [ -e "$f" ] || { log "the kit lacks $f"; exit 1; }
done
log "hwloc $(sed -n 's/^Version: //p' "$LIBDIR/pkgconfig/hwloc.pc" 2>/dev/null), jansson $(sed -n 's/^Version: //p' "$LIBDIR/pkgconfig/jansson.pc" 2>/dev/null) from the kit in $PREFIX"

# ---- 2. NVML header and link stub -------------------------------------------------------------------------
NVML_INC=${NVML_INCLUDE:-$KIT/nvml/include}
[ -f "$NVML_INC/nvml.h" ] || { log "no nvml.h in $NVML_INC"; exit 1; }
NVML_DIR=$WORK/nvml                 # Variorum reads $NVML_DIR/include/nvml.h
STUB=$WORK/nvml-stub
if [ ! -f "$STUB/libnvidia-ml.so.1" ] || [ "$NVML_INC/nvml.h" -nt "$STUB/libnvidia-ml.so.1" ]; then
  rm -rf "$NVML_DIR" "$STUB" && mkdir -p "$NVML_DIR/include" "$STUB"
  cp "$NVML_INC/nvml.h" "$NVML_DIR/include/"
  # Every function nvml.h declares (nvmlReturn_t DECLDIR nvmlX(...)), as an empty function: a link stub.
  grep -oE 'DECLDIR[[:space:]]+nvml[A-Za-z0-9_]+[[:space:]]*\(' "$NVML_INC/nvml.h" \
    | sed -E 's/DECLDIR[[:space:]]+//; s/[[:space:]]*\(//' | sort -u \
    | awk '{print "void " $1 "(void) {}"}' > "$STUB/stub.c"
  gcc -shared -fPIC -o "$STUB/libnvidia-ml.so.1" -Wl,-soname,libnvidia-ml.so.1 "$STUB/stub.c"
  ln -sf libnvidia-ml.so.1 "$STUB/libnvidia-ml.so"
  log "NVML link stub: $(wc -l < "$STUB/stub.c") functions from $NVML_INC/nvml.h"
fi

# ---- 3. configure, build, install ------------------------------------------------------------------------
B=$WORK/$variant
rm -rf "$B/src" && mkdir -p "$B" && cp -r "$SRC/src" "$B/src"
gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
intel=OFF; [ "$variant" = cpu-gpu ] && intel=ON
log "configure (INTEL_CPU=$intel, NVIDIA_GPU=ON) -> $B/install"
cmake -S "$B/src" -B "$B/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  -DCMAKE_INSTALL_PREFIX="$B/install" -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
  -DBUILD_SHARED_LIBS=ON -DBUILD_TESTS=OFF -DBUILD_DOCS=OFF -DENABLE_FORTRAN=OFF -DENABLE_PYTHON=OFF \
  -DENABLE_OPENMP=OFF -DENABLE_MPI=OFF -DENABLE_WARNINGS=OFF -DENABLE_LIBJUSTIFY=OFF \
  -DVARIORUM_WITH_INTEL_CPU=$intel -DVARIORUM_WITH_AMD_CPU=OFF -DVARIORUM_WITH_ARM_CPU=OFF \
  -DVARIORUM_WITH_IBM_CPU=OFF -DVARIORUM_WITH_NVIDIA_GPU=ON -DVARIORUM_WITH_AMD_GPU=OFF \
  -DVARIORUM_WITH_INTEL_GPU=OFF \
  -DHWLOC_DIR="$PREFIX/usr" -DHWLOC_INCLUDE_DIRS="$PREFIX/usr/include" -DHWLOC_LIBRARY="$LIBDIR/libhwloc.so" \
  -DJANSSON_DIR="$PREFIX/usr" -DJANSSON_INCLUDE_DIRS="$PREFIX/usr/include" -DJANSSON_LIBRARY="$LIBDIR/libjansson.so" \
  -DNVML_DIR="$NVML_DIR" \
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--no-as-needed -L$STUB -lnvidia-ml -Wl,--disable-new-dtags" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$STUB:$LIBDIR -Wl,--disable-new-dtags" \
  -DCMAKE_INSTALL_RPATH="$LIBDIR" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
  > "$B/configure.log" 2>&1 || { tail -40 "$B/configure.log" >&2; log "configure FAILED ($B/configure.log)"; exit 1; }
cmake --build "$B/build" -j "$JOBS" > "$B/build.log" 2>&1 \
  || { grep -E "error|Error" "$B/build.log" | head -30 >&2; tail -20 "$B/build.log" >&2; log "build FAILED ($B/build.log)"; exit 1; }
cmake --install "$B/build" > "$B/install.log" 2>&1 || { tail -20 "$B/install.log" >&2; log "install FAILED"; exit 1; }

# ---- 4. checks --------------------------------------------------------------------------------------------
LIB=$(ls "$B"/install/lib/libvariorum.so 2>/dev/null || ls "$B"/install/lib*/libvariorum.so)
dyn=$(readelf -d "$LIB")
for need in libnvidia-ml.so.1 libhwloc.so.15 libjansson.so.4; do
  echo "$dyn" | grep -q "NEEDED.*\[$need\]" || { log "$LIB does not need $need:"; echo "$dyn" >&2; exit 1; }
done
echo "$dyn" | grep -E "\(RPATH\)" | grep -q "$LIBDIR" || { log "$LIB's RPATH lacks $LIBDIR:"; echo "$dyn" | grep -E "PATH" >&2; exit 1; }
echo "$dyn" | grep -E "PATH" | grep -q "$STUB" && { log "the NVML stub's folder leaked into the RPATH"; exit 1; }
for sym in variorum_get_power_json variorum_get_current_version; do
  nm -D --defined-only "$LIB" | grep -qw "$sym" || { log "$LIB lacks $sym"; exit 1; }
done
log "built $(basename "$LIB") (NEEDED libnvidia-ml.so.1 libhwloc.so.15 libjansson.so.4; RPATH $LIBDIR)"
echo "VARIORUM_LIBRARY=$LIB"
