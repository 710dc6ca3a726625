"""`pip install .` into a fresh venv gives `import dooly`, the compiled core `dooly_core` and the `dooly-trace`
entry (pyproject.toml). Not under tests/python, so scripts/test_python.sh does not run it; run it alone:
    .venv/bin/python -m pytest -q tests/packaging
DOOLY_WHEEL_BUILD_DIR=<dir> keeps scikit-build-core's CMake build there so a rerun compiles only what changed
(default: a fresh temporary one, as a user's install). DOOLY_WHEEL_UNOPTIMISED=1 compiles it at -O0 (a third less
compile time than the Release a user gets; scripts/test.sh sets it: what this test checks is what gets installed
and where, not the optimiser)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.install

# One call into each half of the binding: SHA-256 (signature) and the combination table (taint), and the pure
# Python package found in site-packages, not in the source tree.
PROBE = r"""
import json, pathlib, sys
import dooly, dooly_core, dooly.cli_trace
site = pathlib.Path(sys.prefix)
assert site in pathlib.Path(dooly.__file__).resolve().parents, dooly.__file__
assert site in pathlib.Path(dooly_core.__file__).resolve().parents, dooly_core.__file__
assert dooly_core.sha256_hex(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
print(json.dumps({"combine": dooly_core.combine("NUM_TOKS", "MODEL_CONFIG")}))
"""


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd[:4]} exited {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
    return r


def test_pip_install_gives_package_core_and_entry(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    cmd = [py, "-m", "pip", "install", "--disable-pip-version-check", "-q", str(REPO)]
    build_dir = os.environ.get("DOOLY_WHEEL_BUILD_DIR")
    if build_dir:
        cmd.append(f"--config-settings=build-dir={build_dir}")
    if os.environ.get("DOOLY_WHEEL_UNOPTIMISED") == "1":
        cmd += ["--config-settings=cmake.build-type=Debug", "--config-settings=cmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0",
                "--config-settings=cmake.define.CMAKE_C_FLAGS_DEBUG=-O0"]
    _run(cmd)

    # Outside the repository and without PYTHONPATH, so only the installed copies can be imported.
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = _run([py, "-c", PROBE], cwd=tmp_path, env=clean).stdout
    assert '"combine": "MIX"' in out, out

    help_text = _run([str(env_dir / "bin" / "dooly-trace"), "--help"], cwd=tmp_path, env=clean).stdout
    assert "--model" in help_text and "dooly trace" in help_text

    # The wheel holds the binding and nothing else that CMake built (no tests, benchmarks, CLI, static libs).
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"]).stdout.strip())
    built = sorted(p.name for p in site.iterdir() if p.suffix in (".so", ".a") or p.name.startswith("libdooly"))
    assert len(built) == 1 and built[0].startswith("dooly_core."), built
