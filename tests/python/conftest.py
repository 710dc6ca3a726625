"""Shared set-up for the Python tests. Nothing is skipped silently: without the venv's packages every test fails
with a message that says how to install them."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for p in (REPO / "python", REPO / "build" / "default" / "python"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_REQUIRED = ("torch", "transformers", "numpy")
_MISSING = [m for m in _REQUIRED if importlib.util.find_spec(m) is None]


def pytest_sessionstart(session):
    # Fail the whole run, before collection, rather than skip: a run without torch must not look green.
    if _MISSING:
        pytest.exit(f"Python packages missing: {', '.join(_MISSING)} (interpreter {sys.executable}). Run "
                    f"scripts/setup_python.sh, then the tests with scripts/test_python.sh (it uses .venv).",
                    returncode=1)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
