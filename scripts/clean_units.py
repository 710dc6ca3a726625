#!/usr/bin/env python3
"""Content keys for translation units already found clean, so that CI does not check the same text twice.

Two checks use it: clang-tidy over src/ (scripts/lint.sh --cache .ci/tidy-clean.txt) and the header check
(every header under src/dooly compiled alone, the units cmake/HeaderCheck.cmake generates; .ci/headers-clean.txt).
A unit's key is the SHA-256 of what the tool would see: the unit preprocessed with its own compile command (every
header it includes, at the versions installed; no line markers; the repository's path replaced by a placeholder,
so another checkout of the same tree has the same keys), its flags, and the tool: for tidy, .clang-tidy and
clang-tidy's version (without the host CPU that `--version` also prints); for the header check, the compiler's
version. A key in a list means that exact text passed that exact tool, so skipping it loses nothing; any change
to the unit, a header, the flags, the configuration or the tool gives a new key and the unit is checked again.

    clean_units.py keys BUILD_DIR FILE...     prints "FILE KEY" per unit for clang-tidy (preprocessing in parallel)
    clean_units.py headers BUILD_DIR [--cache FILE [--update-cache]]
                                              compiles every header-check unit not listed in FILE; exit 1 when
                                              one fails (its compiler output printed); --update-cache rewrites
                                              FILE with the keys of every unit now clean
    clean_units.py compdb BUILD_DIR OUT_DIR   writes OUT_DIR/compile_commands.json as the tools read it (below)

Every tool reads a unit's command without the precompiled header CMake adds (-include .../cmake_pch.hxx,
-Winvalid-pch: a build configured with DOOLY_PCH=ON, as scripts/test.sh's are): the unit is checked as it is
written, clang-tidy never meets gcc's precompiled file, and the keys are those of a build without it. So clang-tidy,
which compiles every unit it checks, is also what fails a unit of src/ that leans on the precompiled header for an
include it does not make (a compile error in src/ is a finding), and a cached key is that of the unit as written.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import functools
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


def _is_pch_header(path: str) -> bool:
    return os.path.basename(path) == "cmake_pch.hxx"


def _argv(entry: dict) -> list[str]:
    """The unit's command without the precompiled header (the module's docstring)."""
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    keep: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "-include" and i + 1 < len(argv) and _is_pch_header(argv[i + 1]):
            i += 2
            continue
        if argv[i] != "-Winvalid-pch":
            keep.append(argv[i])
        i += 1
    return keep


def compdb(build: str, out_dir: str) -> int:
    """compile_commands.json of BUILD as the tools read it: each unit's command without the precompiled header."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    os.makedirs(out_dir, exist_ok=True)
    cleaned = [{"directory": e["directory"], "file": e["file"], "arguments": _argv(e),
                **({"output": e["output"]} if "output" in e else {})} for e in entries]
    with open(os.path.join(out_dir, "compile_commands.json"), "w") as f:
        json.dump(cleaned, f, indent=1)
    return 0


def _argv_to(entry: dict, action: list[str]) -> list[str]:
    """The unit's compile command with no output file: `action` instead (-E -P, -fsyntax-only)."""
    keep: list[str] = []
    skip = False
    for a in _argv(entry):
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-o"):
            continue
        keep.append(a)
    return keep + action


def _preprocess_argv(entry: dict) -> list[str]:
    return _argv_to(entry, ["-E", "-P"])


def _without_host_cpu(version: str) -> str:
    # LLVM's `--version` also names the machine's CPU ("Host CPU: rocketlake"), which is not the tool: CI's
    # machines differ from a developer's, and with the line kept no key ever matched there.
    return "\n".join(line for line in version.splitlines() if "Host CPU" not in line)


def _tool_fingerprint(root: str) -> bytes:
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        config = f.read()
    return hashlib.sha256(_without_host_cpu(version).encode() + b"\0" + config).digest()


@functools.lru_cache(maxsize=None)
def _compiler_fingerprint(compiler: str) -> bytes:
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    return hashlib.sha256(b"compile\0" + _without_host_cpu(version).encode()).digest()


def _key(entry: dict, root: str, fingerprint: bytes) -> str:
    argv = _preprocess_argv(entry)
    r = subprocess.run(argv, cwd=entry["directory"], capture_output=True)
    if r.returncode != 0:  # cannot preprocess: no key, so the unit is always checked
        return "none"
    # The flags as well as the text: the tool parses with them (language level, warnings it reports as errors).
    # Not the debug-info level (-g, -g1, ...): it changes what is emitted, never what parses or warns.
    flags = "\0".join(a for a in argv if not a.startswith("-g")).replace(root, "@ROOT@").encode()
    text = r.stdout.replace(root.encode(), b"@ROOT@")
    return hashlib.sha256(fingerprint + flags + b"\0" + text).hexdigest()


def _jobs() -> int:
    return int(os.environ.get("DOOLY_LINT_JOBS", os.cpu_count() or 2))


def keys(build: str, files: list[str]) -> int:
    root = os.getcwd()
    cmds = _commands(build, root)
    fingerprint = _tool_fingerprint(root)
    with concurrent.futures.ThreadPoolExecutor(max_workers=_jobs()) as pool:
        futures = {f: pool.submit(_key, cmds[f], root, fingerprint) for f in files if f in cmds}
        for f in files:
            print(f, futures[f].result() if f in futures else "none")
    return 0


def _check_header_unit(entry: dict, root: str, clean: set[str]) -> tuple[str, bool, str]:
    """(key, passed, compiler output); a listed key passes without compiling."""
    key = _key(entry, root, _compiler_fingerprint(_argv(entry)[0]))
    if key != "none" and key in clean:
        return key, True, ""
    r = subprocess.run(_argv_to(entry, ["-fsyntax-only"]), cwd=entry["directory"], capture_output=True, text=True)
    return key, r.returncode == 0, r.stdout + r.stderr


def headers(build: str, cache: str | None, update: bool) -> int:
    root = os.getcwd()
    folder = os.path.relpath(os.path.join(build, "header_check"), root) + os.sep
    units = {f: e for f, e in _commands(build, root).items() if f.startswith(folder)}
    if not units:
        print(f"header check: {build}/compile_commands.json has no unit under {folder}: configure the build "
              f"(cmake --preset default)", file=sys.stderr)
        return 2
    if update and not any("-Werror" in _argv(e) for e in units.values()):
        print(f"header check: --update-cache: {build} is not configured as CI's builds are (no -Werror), so its keys "
              f"would never match there; configure it with DOOLY_WERROR=1 scripts/build.sh default", file=sys.stderr)
        return 2
    clean: set[str] = set()
    if cache and os.path.exists(cache):
        with open(cache) as f:
            clean = {line.strip() for line in f if line.strip()}
    with concurrent.futures.ThreadPoolExecutor(max_workers=_jobs()) as pool:
        results = dict(zip(units, pool.map(lambda e: _check_header_unit(e, root, clean), units.values())))
    failed = sorted(f for f, (_, ok, _) in results.items() if not ok)
    for f in failed:
        print(f"header check: {f} does not compile alone:\n{results[f][2]}", file=sys.stderr)
    skipped = sum(1 for key, ok, out in results.values() if ok and key in clean)
    print(f"header check: {len(units)} headers, {skipped} as they were when found clean"
          f"{f' ({cache})' if cache else ''}, {len(units) - skipped} compiled, {len(failed)} failed")
    if cache and update:
        now = sorted({key for key, ok, _ in results.values() if ok and key != "none"})
        with open(cache, "w") as f:
            f.writelines(k + "\n" for k in now)
        print(f"header check: {cache} now lists {len(now)} clean units")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="clean_units.py", description=__doc__.strip().split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    k = sub.add_parser("keys", help="print 'FILE KEY' per unit for clang-tidy")
    k.add_argument("build")
    k.add_argument("files", nargs="*")
    h = sub.add_parser("headers", help="compile every header-check unit not listed clean")
    h.add_argument("build")
    h.add_argument("--cache", help="the list of clean keys (CI: .ci/headers-clean.txt)")
    h.add_argument("--update-cache", action="store_true", help="rewrite --cache with the keys of every unit now clean")
    c = sub.add_parser("compdb", help="write compile_commands.json without the precompiled header")
    c.add_argument("build")
    c.add_argument("out_dir")
    args = parser.parse_args(argv)
    if args.command == "keys":
        return keys(args.build, args.files)
    if args.command == "compdb":
        return compdb(args.build, args.out_dir)
    if args.update_cache and not args.cache:
        parser.error("--update-cache needs --cache FILE")
    return headers(args.build, args.cache, args.update_cache)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
