#!/usr/bin/env python3
"""Device time per engine step by kernel, from scripts/gpu/graph_step_kernels.sh's runs.

  step_kernels.py step-kernels.tgz [--top 15] [--json OUT]

Each run served BATCH requests arriving at once, so nearly all its steps decode BATCH requests. For each run: the
steps (count, median duration of the decode steps at the full batch), the kernels' total time per step (CUPTI's GPU
timestamps, summed over every kernel of the run, divided by the steps: the device's busy time a step, overlaps
counted twice), and the top kernels by time with their calls and time per step.
"""
import argparse
import gzip
import io
import json
import os
import statistics
import sys
import tarfile


def runs_in(path):
    files = {}
    with tarfile.open(path) as t:
        for m in t.getmembers():
            if m.isfile():
                files[os.path.basename(m.name)] = t.extractfile(m).read()
    for name in sorted(files):
        if not name.endswith(".json.gz"):
            continue
        stem = name[: -len(".json.gz")]
        cupti = files.get(stem + ".cupti.json")
        if cupti is None:
            print(f"{stem}: no CUPTI report (the run failed?)", file=sys.stderr)
            continue
        yield stem, json.load(gzip.open(io.BytesIO(files[name]))), json.loads(cupti)


def summarise(stem, live, report, top):
    steps = live["steps"]
    batch = max(s["num_requests"] for s in steps)
    full = [s["duration_s"] for s in steps if s["kind"] == "decode" and s["num_requests"] == batch]
    wall = sum(s["duration_s"] for s in steps)
    kernels = [r for ch in report["channels"][:1] for r in ch["regions"] if r["kind"] == "kernel"]
    busy = sum(r["time_s"] for r in kernels)
    n = len(steps)
    out = {
        "run": stem, "steps": n, "batch": batch, "full_batch_decode_steps": len(full),
        "full_batch_decode_median_ms": 1e3 * statistics.median(full) if full else None,
        "step_wall_ms": 1e3 * wall / n, "kernel_ms_per_step": 1e3 * busy / n,
        "kernel_calls_per_step": sum(r["calls"] for r in kernels) / n,
        "top": [{"kernel": r.get("short_name") or r["name"][:80], "ms_per_step": 1e3 * r["time_s"] / n,
                 "calls_per_step": r["calls"] / n, "us_per_call": 1e6 * r["time_s"] / max(1, r["calls"])}
                for r in sorted(kernels, key=lambda r: -r["time_s"])[:top]],
    }
    print(f"{stem}: {n} steps (decode at batch {batch}: {len(full)}, median "
          f"{out['full_batch_decode_median_ms'] or float('nan'):.2f} ms); step wall {out['step_wall_ms']:.2f} ms, "
          f"kernels {out['kernel_ms_per_step']:.2f} ms and {out['kernel_calls_per_step']:.0f} calls a step")
    for k in out["top"]:
        print(f"  {k['ms_per_step']:8.3f} ms/step {k['calls_per_step']:7.1f} calls/step {k['us_per_call']:9.1f} us/call"
              f"  {k['kernel']}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("archive")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [summarise(stem, live, rep, a.top) for stem, live, rep in runs_in(a.archive)]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
