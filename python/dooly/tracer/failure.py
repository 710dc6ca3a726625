"""One-line reports for `dooly trace`: a bad --out before any work, and a failure during the trace (from
transformers, torch or dooly itself) with the exception's last line instead of a traceback."""

from __future__ import annotations

import os
import traceback
from pathlib import Path


def out_dir_problem(out: str) -> str | None:
    """Why `out` cannot be the output folder (None when it can): it exists and is not a folder, a parent of it is
    a file, or the folder it would be created in is not writable."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        return f"--out {out}: exists and is not a directory. Pass a folder (it is created if missing)."
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        return f"--out {out}: {probe} is a file, so the folder cannot be created there. Pass another folder."
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        return f"--out {out}: {probe} is not writable. Pass a folder you can write to."
    return None


def _origin(e: BaseException) -> tuple[str, str]:
    """(who, where): the package of the innermost frame of e's traceback and its file:line."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return "dooly", "?"
    last = frames[-1]
    where = f"{Path(last.filename).name}:{last.lineno}"
    path = last.filename.replace(os.sep, "/")
    if "/transformers/" in path:
        import transformers
        return f"transformers {transformers.__version__}", where
    if "/torch/" in path:
        import torch
        return f"torch {torch.__version__}", where
    return "dooly", where


def last_line(e: BaseException) -> str:
    """The last line Python would print for e: `Type: message` (the message's last line when it has several)."""
    lines = [ln for ln in "".join(traceback.format_exception_only(type(e), e)).splitlines() if ln.strip()]
    text = lines[-1].strip() if lines else type(e).__name__
    if not text.startswith(type(e).__name__):
        text = f"{type(e).__name__}: {text}"
    return text[:400]


def failure_line(e: BaseException, model: str, attention: str) -> str:
    """`tracing <model> under <attention> failed in <who> (<file:line>): <Type>: <message>`. The place is that of
    the first exception in the chain (an EngineError raised from the engine's own failure names the engine's)."""
    root = e
    while root.__cause__ is not None:
        root = root.__cause__
    who, where = _origin(root)
    hint = ""
    if who.startswith("transformers"):
        hint = " This architecture or attention backend is not supported by transformers' paged engine here; " \
               "try another --attention (e.g. 'paged|eager') or model."
    return f"tracing {model} under {attention} failed in {who} ({where}): {last_line(e)}.{hint}"
