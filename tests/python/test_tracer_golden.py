"""Golden labelled traces of tiny models: re-trace on CPU and compare structure and labels (kinds and
expressions of every dim of every op; no values, no timings) with tests/data/traces/*.labels.txt.
Regenerate after an intended change: `PYTHONPATH=python:build/default/python .venv/bin/python -m dooly.tracer.golden`."""

import difflib
import json
import subprocess

import pytest

from dooly.tracer import TRACE_FORMAT_VERSION
from dooly.tracer.golden import GOLDEN_MODELS, label_lines, trace_tiny

REGENERATE = "PYTHONPATH=python:build/default/python .venv/bin/python -m dooly.tracer.golden"


def _require_current_format(path):
    """Goldens of an older trace format fail with what to do, before any comparison."""
    with open(path) as f:
        version = json.load(f).get("version")
    if version != TRACE_FORMAT_VERSION:
        pytest.fail(f"{path} is trace format {version}, the tracer writes format {TRACE_FORMAT_VERSION}: "
                    f"regenerate the goldens with `{REGENERATE}`", pytrace=False)


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_labels_match_golden(name, repo_root):
    _require_current_format(repo_root / "tests" / "data" / "traces" / f"{name}-tiny__paged_sdpa.json")
    doc = trace_tiny(name, repo_root)
    got = label_lines(doc)
    want = (repo_root / "tests" / "data" / "traces" / f"{name}-tiny.labels.txt").read_text().splitlines()
    if got != want:
        diff = "\n".join(list(difflib.unified_diff(want, got, "golden", "now", lineterm=""))[:60])
        pytest.fail(f"labels of {name} differ from the golden file:\n{diff}")
    assert doc["verification"]["num_disagreements"] == 0, doc["verification"]["disagreements"][:5]
    assert doc["summary"]["ops_with_unknown_outputs"] == 0
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds == ["prefill", "mixed"]
    # The mixed step has decodes: its attention reads the paged cache (KV_TOKS dims; a sliding-window layer's
    # read is KV_TOKS_SLIDING(sliding_window), Gemma 2's even layers).
    kv = {d["e"] for o in doc["steps"][1]["ops"] for t in o["outputs"] for d in t["shape"] if "KV_TOKS" in d["e"]}
    assert "KV_TOKS" in kv
    assert ("KV_TOKS_SLIDING(sliding_window)" in kv) == (name == "gemma-2-9b-it"), kv


def test_signatures_cli_writes_the_store(repo_root, tmp_path):
    import os
    from pathlib import Path
    exe = Path(os.environ.get("DOOLY_EXE", repo_root / "build" / "default" / "src" / "dooly" / "cli" / "dooly"))
    if not exe.exists():
        pytest.fail(f"{exe} is not built; run scripts/build.sh default dooly", pytrace=False)
    traces = [str(repo_root / "tests" / "data" / "traces" / f"{m}-tiny__paged_sdpa.json") for m in GOLDEN_MODELS]
    for t in traces:
        _require_current_format(Path(t))
    db = tmp_path / "d.sqlite"
    out = subprocess.run([str(exe), "signatures", *traces, "--db", str(db)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["model", "backend", "ops", "unique", "new", "shared-with-earlier"]
    assert lines[1].split() == ["llama-3.1-8b-tiny", "paged|sdpa", "494", "71", "71", "0"]
    assert lines[2].split() == ["qwen2.5-7b-tiny", "paged|sdpa", "500", "74", "6", "68"]
    assert lines[3].split() == ["gemma-2-9b-it-tiny", "paged|sdpa", "1261", "95", "27", "68"]
    assert lines[4] == "total occurrences 2255 -> unique signatures 104"
    import sqlite3
    con = sqlite3.connect(db)
    n_ops = con.execute("select count(*) from signatures where kind='op'").fetchone()[0]
    assert n_ops == 104
    # Running again: nothing is new, everything is shared with what the store holds.
    again = subprocess.run([str(exe), "signatures", traces[0], "--db", str(db)], capture_output=True, text=True)
    assert again.stdout.splitlines()[1].split() == ["llama-3.1-8b-tiny", "paged|sdpa", "494", "71", "0", "71"]
