"""Golden traces of tiny models for the tests (tests/data/traces/). Regenerate after an intended change of the
tracer, the rules or the engine with:

    PYTHONPATH=python:build/default/python .venv/bin/python -m dooly.tracer.golden [tests/data/traces]

It writes, per model, the full trace (<model>-tiny__paged_sdpa.json, read by the C++ tests) and a label summary
(<model>-tiny.labels.txt, compared by tests/python/test_tracer_golden.py): one line per op with each dim's kind
and expression, no values or timings."""

from __future__ import annotations

import sys
from pathlib import Path

GOLDEN_MODELS = ("llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b-it")
ATTENTION = "paged|sdpa"


def label_lines(doc: dict) -> list[str]:
    def dims(t):
        return "[" + ",".join(f"{d['k']}:{d['e']}" for d in t["shape"]) + "]"

    lines = [f"# {doc['model']} {doc['attention']} trace format {doc['version']}"]
    for s in doc["steps"]:
        lines.append(f"step {s['kind']}")
        for o in s["ops"]:
            ins = " ".join(dims(t) for t in o["inputs"])
            outs = " ".join(dims(t) for t in o["outputs"])
            lines.append(f"{o['op']} @{o['module']} {o['rule']} in {ins} out {outs}")
    return lines


def trace_tiny(name: str, repo: Path) -> dict:
    from .engine_trace import trace_model
    config = repo / "data" / "models" / "tiny" / f"{name}.json"
    return trace_model(str(config), ATTENTION, device="cpu", model_name=f"{name}-tiny", verify=True,
                       kernels=False, log=lambda *_: None)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    repo = Path(__file__).resolve().parents[3]
    out = Path(argv[0]) if argv else repo / "tests" / "data" / "traces"
    out.mkdir(parents=True, exist_ok=True)
    from .engine_trace import write_trace
    for name in GOLDEN_MODELS:
        doc = trace_tiny(name, repo)
        doc["config_path"] = f"data/models/tiny/{name}.json"  # repository-relative, machine-independent
        doc["engine_info"].pop("device_name", None)
        path = write_trace(doc, str(out))
        (out / f"{name}-tiny.labels.txt").write_text("\n".join(label_lines(doc)) + "\n", encoding="utf-8")
        print(f"{path} ({doc['summary']['ops']} ops, {doc['verification']['num_disagreements']} disagreements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
