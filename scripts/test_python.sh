#!/usr/bin/env bash
# Runs the Python tests (tests/python) with the project venv. scripts/test.sh runs scripts/setup.sh first, which
# creates the venv (scripts/setup_python.sh); this script does not. Extra arguments go to pytest.
# pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "test_python: .venv is missing; run scripts/setup_python.sh first" >&2
  exit 1
fi
# The dooly package from the source tree, and the compiled binding (dooly_core) from the default build when built.
export PYTHONPATH="$PWD/python:$PWD/build/default/python${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1   # random weights only: nothing may be downloaded
set +e
# The files on one worker more than there are cores (pytest-xdist: the end-to-end tests spend much of their time
# waiting on subprocesses and replayed clocks), each file on one worker so its module fixtures run once;
# PYTEST_JOBS=0 runs them in this process.
jobs=${PYTEST_JOBS:-$(( $(nproc 2>/dev/null || echo 2) + 1 ))}
xdist=()
[ "$jobs" -gt 1 ] && xdist=(-n "$jobs" --dist loadfile)
.venv/bin/python -m pytest -q "${xdist[@]}" tests/python "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test_python: pytest collected no tests (exit 5); that is a failure" >&2
  exit 1
fi
exit "$rc"
