#!/usr/bin/env bash
# Copies the header-only dependencies of the energy engine (fmt, nlohmann/json, Eigen) from this machine's
# /usr/include into .deps/ (git-ignored), so a GPU machine without those packages can build dooly with
# -DDOOLY_ENERGY_ONLY=ON (fmt is then used header-only). Carry .deps/ along with the work tree.
#   scripts/gpu/pack_deps.sh [dest=.deps]
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-.deps}
mkdir -p "$dest"
for d in fmt nlohmann eigen3; do
  if [ ! -d "/usr/include/$d" ]; then
    echo "pack_deps: /usr/include/$d missing -- install libfmt-dev nlohmann-json3-dev libeigen3-dev (scripts/setup.sh)" >&2
    exit 1
  fi
  rm -rf "${dest:?}/$d"
  cp -r "/usr/include/$d" "$dest/$d"
done
# OpenSSL's headers (libcrypto for the signatures' SHA-256, used by scripts/gpu/trace_models.sh), with the two
# architecture-specific ones Debian keeps apart.
if [ -d /usr/include/openssl ]; then
  rm -rf "${dest:?}/openssl"
  cp -r /usr/include/openssl "$dest/openssl"
  cp /usr/include/x86_64-linux-gnu/openssl/*.h "$dest/openssl/" 2>/dev/null || true
fi
# SQLite's header (the store, for scripts/gpu/build_core.sh); the library itself is on the GPU machine (Python's
# sqlite3 module links it).
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$dest/" 2>/dev/null || true
# Eigen's unsupported/ modules are not used: keep the carried folder small.
rm -rf "$dest/eigen3/unsupported"
echo "pack_deps: $(du -sh "$dest" | cut -f1) in $dest (fmt $(sed -n 's/^#define FMT_VERSION \([0-9]*\).*/\1/p' "$dest/fmt/core.h"))"
