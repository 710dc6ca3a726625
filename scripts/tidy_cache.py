#!/usr/bin/env python3
"""Content keys for clang-tidy's results, so that a translation unit already found clean is not tidied again.

A unit's key is the SHA-256 of what clang-tidy would see: the unit preprocessed with its own compile command
(every header it includes, at the versions installed; no line markers; the repository's path replaced by a
placeholder, so another checkout of the same tree has the same keys), plus .clang-tidy and clang-tidy's
version (without the host CPU that `--version` also prints). A key in the cache (.ci/tidy-clean.txt) means that
exact text passed that exact configuration, so skipping it loses nothing; any change to the unit, a header, the
flags, the configuration or the tool gives a new key and the unit is tidied again. scripts/lint.sh uses it:

    tidy_cache.py keys BUILD_DIR FILE...    prints "FILE KEY" per unit (preprocessing in parallel)
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def _commands(build: str, root: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    with open(os.path.join(build, "compile_commands.json")) as f:
        for e in json.load(f):
            rel = os.path.relpath(os.path.join(e["directory"], e["file"]), root)
            out.setdefault(rel, e)
    return out


def _preprocess_argv(entry: dict) -> list[str]:
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    keep: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-o"):
            continue
        keep.append(a)
    return keep + ["-E", "-P"]


def _tool_fingerprint(root: str) -> bytes:
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    # `--version` also names the machine's CPU ("Host CPU: rocketlake"), which is not the tool: CI's machines
    # differ from a developer's, and with the line kept no key ever matched there.
    version = "\n".join(line for line in version.splitlines() if "Host CPU" not in line)
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        config = f.read()
    return hashlib.sha256(version.encode() + b"\0" + config).digest()


def _key(entry: dict, root: str, fingerprint: bytes) -> str:
    argv = _preprocess_argv(entry)
    r = subprocess.run(argv, cwd=entry["directory"], capture_output=True)
    if r.returncode != 0:  # cannot preprocess: no key, so the unit is always tidied
        return "none"
    # The flags as well as the text: clang-tidy parses with them (language level, warnings it reports as errors).
    flags = "\0".join(argv).replace(root, "@ROOT@").encode()
    text = r.stdout.replace(root.encode(), b"@ROOT@")
    return hashlib.sha256(fingerprint + flags + b"\0" + text).hexdigest()


def keys(build: str, files: list[str]) -> int:
    root = os.getcwd()
    cmds = _commands(build, root)
    fingerprint = _tool_fingerprint(root)
    jobs = int(os.environ.get("DOOLY_LINT_JOBS", os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {f: pool.submit(_key, cmds[f], root, fingerprint) for f in files if f in cmds}
        for f in files:
            print(f, futures[f].result() if f in futures else "none")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "keys":
        return keys(argv[1], argv[2:])
    print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
