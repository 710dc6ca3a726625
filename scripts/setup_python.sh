#!/usr/bin/env bash
# Creates .venv at the repo root, installs python/requirements.txt into it, then the project itself (pyproject.toml:
# the `dooly` package, the compiled core `dooly_core`, the `dooly-trace` entry). Idempotent, in two steps with a
# stamp each: the requirements are reinstalled only when requirements.txt or this script changed; the project only
# when one of the files its build reads changed (pyproject.toml, CMakeLists.txt, cmake/, src/, python/). Its CMake
# build stays in build/venv-wheel, so a reinstall compiles only what changed. When nothing changed it returns at
# once without calling pip. scripts/test_python.sh still puts python/ and build/default/python first on
# PYTHONPATH, so the tests see the source tree and the default build over the venv's installed copy.
#   DOOLY_TORCH_INSTALL=auto (default) | light | full     how torch is installed (see below)
#   DOOLY_PYTHON=python3                                  the interpreter the venv is made from
#   DOOLY_INSTALL_PROJECT=0                               requirements only, not the project (scripts/test.sh)
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."

venv=.venv
req=python/requirements.txt
stamp="$venv/.dooly-requirements.sha256"
mode=${DOOLY_TORCH_INSTALL:-auto}
case "$mode" in auto|light|full) ;; *) echo "setup_python: DOOLY_TORCH_INSTALL must be auto, light or full (got '$mode')" >&2; exit 2;; esac

project_stamp="$venv/.dooly-project.sha256"
project_build=build/venv-wheel
# Every file the project's wheel build reads (sorted, content-hashed; untracked edits count too).
project_hash() {
  find pyproject.toml CMakeLists.txt cmake src python -type f \
      \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.py' -o -name '*.cmake' -o -name CMakeLists.txt \
         -o -name '*.toml' \) -not -path '*/__pycache__/*' -print0 \
    | sort -z | xargs -0 sha256sum | cat - "$self" | sha256sum | cut -d' ' -f1
}
install_project() {
  local want_project start_project
  if [ "${DOOLY_INSTALL_PROJECT:-1}" = 0 ]; then
    echo "setup_python: the project itself is not installed into $venv (DOOLY_INSTALL_PROJECT=0)"
    return 0
  fi
  want_project=$(project_hash)
  if [ -f "$project_stamp" ] && [ "$(cat "$project_stamp")" = "$want_project" ]; then
    return 0
  fi
  start_project=$(date +%s)
  rm -f "$project_stamp"
  # No build isolation: scikit-build-core and pybind11 come pinned from requirements.txt, and the CMake cache in
  # $project_build keeps pointing at the same pybind11, so a rerun is incremental.
  "$venv/bin/python" -m pip --disable-pip-version-check -q install --no-deps --no-build-isolation \
    --config-settings=build-dir="$project_build" .
  # From outside the tree, so the installed copies are the ones imported.
  (py="$PWD/$venv/bin/python"; cd / && "$py" -c 'import dooly, dooly_core; assert dooly_core.sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"')
  echo "$want_project" > "$project_stamp"
  echo "setup_python: dooly installed into $venv in $(( $(date +%s) - start_project )) s"
}

want=$(cat "$req" "$self" | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  install_project
  echo "setup_python: $venv is up to date"
  exit 0
fi

start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
  "${DOOLY_PYTHON:-python3}" -m venv "$venv"
fi
rm -f "$stamp"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)   # pip's cache (~/.cache/pip) stays on

torch_pin=$(grep -E '^torch==' "$req" | head -1)
if [ -z "$torch_pin" ]; then echo "setup_python: $req has no 'torch==<version>' line" >&2; exit 2; fi

# Everything except torch: plain pip (transformers does not depend on torch, so this pulls no CUDA wheels).
"${pip[@]}" install -r <(grep -vE '^torch==' "$req")

# torch. PyPI's Linux wheel is the CUDA 13.0 build; installed normally it pulls ~3 GB of nvidia-*/triton wheels
# (4.6 GB venv, ~50 s here even with a warm pip cache). We never run CUDA on this machine, but libtorch still links
# against the CUDA libraries at import time, so `--no-deps` plus torch's pure-Python requirements alone fails to
# import (libcufile.so.0 not found). The CPU-only machines of this project carry the CUDA 13.0 toolkit
# (/usr/local/cuda-13.0/lib is on the loader path), which provides every library libtorch links except cuFile,
# cuSPARSELt and NVSHMEM. "light" therefore installs torch --no-deps, its pure-Python requirements and just those
# three wheels (1.6 GB venv, ~20 s), then checks that torch imports and computes on the CPU. "auto" falls back to
# the normal install when that check fails (a machine without the toolkit); "full" always installs normally.
light_deps=(filelock 'typing-extensions>=4.10.0' 'setuptools<82' 'sympy>=1.13.3' 'networkx>=2.5.1' jinja2
            'fsspec>=0.8.5')
light_nvidia=('nvidia-cufile==1.15.1.6.*' 'nvidia-cusparselt-cu13==0.8.0' 'nvidia-nvshmem-cu13==3.4.5')
torch_ok() {
  "$venv/bin/python" - <<'PY' >/dev/null 2>&1
import torch
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
assert float((x @ x.T).sum()) == 83.0
PY
}
installed=""
if [ "$mode" != full ]; then
  # pip warns that torch's CUDA requirements are missing: that is the point, so its log is shown only on failure.
  log=$(mktemp)
  if ! { "${pip[@]}" install --no-deps "$torch_pin" "${light_nvidia[@]}" && "${pip[@]}" install "${light_deps[@]}"; } \
      >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  if torch_ok; then
    installed=light
  elif [ "$mode" = light ]; then
    echo "setup_python: the light torch install does not import here; rerun with DOOLY_TORCH_INSTALL=full" >&2
    exit 1
  else
    echo "setup_python: light torch install does not import here (no CUDA 13 toolkit?); installing torch fully"
  fi
fi
if [ -z "$installed" ]; then
  "${pip[@]}" uninstall -y torch >/dev/null 2>&1 || true   # else pip sees torch satisfied and skips its deps
  "${pip[@]}" install "$torch_pin"
  torch_ok || { echo "setup_python: torch was installed but does not import; see: $venv/bin/python -c 'import torch'" >&2; exit 1; }
  installed=full
fi

"$venv/bin/python" -c 'import torch, transformers, numpy, pytest; print(f"setup_python: torch {torch.__version__} ('"$installed"' install), transformers {transformers.__version__}, numpy {numpy.__version__}, pytest {pytest.__version__}")'
echo "$want" > "$stamp"
rm -f "$project_stamp"   # new requirements (e.g. another pybind11): build the project again
install_project
echo "setup_python: done in $(( $(date +%s) - start )) s"
