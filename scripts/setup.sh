#!/usr/bin/env bash
# Installs everything dooly needs on a fresh Debian 12 machine (idempotent), then configures the build.
#   scripts/setup.sh            system packages + Python venv
#   DOOLY_SKIP_APT=1 ...        skip apt-get (packages already present)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev sqlite3 libssl-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev python3-dev python3-venv
  libtrilinos-kokkos-dev   # a real Kokkos runtime (3.4.1, Serial) for the connector's integration tests
  libcairo2-dev fonts-dejavu-core   # charts (src/dooly/plot, `dooly plot`); the font keeps their text the same everywhere
  clang libclang-rt-14-dev clang-format clang-tidy   # the sanitizer builds, the fuzz targets (libFuzzer), scripts/lint.sh
  openmpi-bin   # mpirun for the MPI ranks test (tests/kokkos/ranks_runtime_test.cpp); dooly itself links no MPI
)

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ] && [ "${DOOLY_SKIP_APT:-0}" != 1 ]; then
  echo "setup: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Python: a project venv for the engine adapters (PyTorch / transformers) and pytest.
if [ -f scripts/setup_python.sh ] && [ "${DOOLY_SKIP_PYTHON:-0}" != 1 ]; then
  bash scripts/setup_python.sh
fi
