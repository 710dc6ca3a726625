"""Issue 13, section 2, with the engine's split (docs/energy-attribution.md, "Concurrent kernels"): on recordings
of examples/cuda_overlap (scripts/gpu/validate_overlap.sh), each kernel's J/call while overlapped against its
J/call alone, as `dooly analyze` reports them.

The program launches each kernel as two template instances, `X<0>` in the phases where it runs alone and `X<1>` in
the concurrent ones, so a recording holds two keys per kernel. A real program launches one function in both: this
script merges each `X<1>` into its `X<0>` (the same function; the windows and readings untouched) and analyses the
merged recording, so the engine meets each kernel alone and overlapped under one key, as it would in a real
program. Reported per kernel: the alone reference (the unmerged recording's `X<0>` row, model mode), the merged
row's J/call over the calls in split readings (`model_overlap_energy_j / model_overlap_calls`), the difference
(goal: within 10 %); and, for the unmerged `X<1>` row against the same reference: the split when the kernel is
never seen alone (its J/call alone fitted on the overlapped readings, flag `=`), the model without the split
(`--no-overlap-split`: power taken as additive, the engine before the split) and the trapezoid.

  python3 scripts/analysis/overlap_engine_check.py --dooly build/default/src/dooly/cli/dooly \\
      data/runs/h200-cuda-overlap-hostdelay-run{1,2,3}.recording.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

TWIN = re.compile(r"<1>")


def merged(src: str, dst: str) -> None:
    """Writes src with every kernel key named X<1> folded into the key named X<0>."""
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        lines = f.read().splitlines()
    names = {}
    for line in lines:
        if line.startswith("key,"):
            _, kid, kind, name = line.split(",", 3)
            names[kid] = (kind, name)
    by_name = {(k, n): kid for kid, (k, n) in names.items() if "<1>" not in n}
    fold = {kid: by_name[(k, TWIN.sub("<0>", n))] for kid, (k, n) in names.items()
            if "<1>" in n and (k, TWIN.sub("<0>", n)) in by_name}
    with open(dst, "w") as out:
        for line in lines:
            if line.startswith("key,") and line.split(",", 2)[1] in fold:
                continue
            if line[:2] in ("b,", "e,"):
                p = line.split(",")
                p[2] = fold.get(p[2], p[2])
                line = ",".join(p)
            out.write(line + "\n")


def analyze(dooly: str, rec: str, *extra: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "r.json")
        subprocess.run([dooly, "analyze", rec, "--json", js, *extra], check=True, capture_output=True)
        with open(js) as f:
            return json.load(f)


def rows(report: dict) -> dict:
    ch = report["channels"][0]
    return {r["name"]: r for r in ch["regions"]}, ch


def short(name: str) -> str:
    m = re.search(r"(\w+)<(\d)>", name)
    return m.group(1) if m else name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recordings", nargs="+")
    ap.add_argument("--dooly", default="build/default/src/dooly/cli/dooly")
    ap.add_argument("--span-ms", type=float, help="dooly analyze --overlap-span-ms (default: the engine's)")
    args = ap.parse_args(argv)
    span = ["--overlap-span-ms", f"{args.span_ms:g}"] if args.span_ms is not None else []
    worst: dict[str, float] = {}
    for path in args.recordings:
        with tempfile.TemporaryDirectory() as d:
            plain = os.path.join(d, "plain.rec")
            with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f, open(plain, "w") as o:
                o.write(f.read())
            m = os.path.join(d, "merged.rec")
            merged(path, m)
            before, _ = rows(analyze(args.dooly, plain, *span))
            additive, _ = rows(analyze(args.dooly, plain, "--no-overlap-split"))
            after, ch = rows(analyze(args.dooly, m, *span))
        fit = ch["model_fit"]
        print(f"{os.path.basename(path)}: floor {fit['intercept_w']:.1f} W, {fit['samples']} readings fitted, "
              f"{fit.get('concurrent_readings', 0)} split (span {fit.get('split_span_ms', 0):g} ms)")
        for name, r0 in sorted(before.items()):
            if r0.get("kind") != "kernel" or "<0>" not in name:
                continue
            twin = before.get(name.replace("<0>", "<1>"))
            ra = after.get(name)
            if not twin or not ra or not ra.get("model_overlap_calls"):
                continue
            alone = r0["model_j_per_call"]
            over = ra["model_overlap_energy_j"] / ra["model_overlap_calls"]
            diff = over / alone - 1
            k = short(name)
            if abs(diff) >= abs(worst.get(k, 0.0)):
                worst[k] = diff
            pct = lambda x: f"{100 * (x / alone - 1):+.1f} %"  # noqa: E731
            other = additive[name.replace("<0>", "<1>")]
            print(f"  {k:<14} alone {alone:.4f} J  overlapped {over:.4f} J  {100 * diff:+6.1f} %  "
                  f"{'within' if abs(diff) <= 0.10 else 'OUT'}  ({ra['model_overlap_calls']:.0f} of {ra['calls']} "
                  f"calls)  X<1>: never alone {pct(twin['model_j_per_call'])}, additive power "
                  f"{pct(other['model_j_per_call'])}, trapezoid {pct(twin['j_per_call'])}")
    print("== worst over the runs: " + ", ".join(f"{k} {100 * d:+.1f} %" for k, d in sorted(worst.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
