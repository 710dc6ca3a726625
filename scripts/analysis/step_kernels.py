#!/usr/bin/env python3
"""Device time per engine step by kernel, from scripts/gpu/graph_step_kernels.sh's runs.

  step_kernels.py step-kernels.tgz [--top 15] [--json OUT]

Each run served BATCH requests arriving at once, so nearly all its steps decode BATCH requests. For each run: the
steps (count, median duration of the decode steps at the full batch), the kernels' total time per step (CUPTI's GPU
timestamps, summed over every kernel of the run, divided by the steps: the device's busy time a step, overlaps
counted twice), and the top kernels by time with their calls and time per step.

A run's totals include what the engine runs outside its steps: at start-up it warms up (and with CUDA graphs
captures) at its largest shapes (transformers 5.17: a forward of max_batch_tokens queries over the whole cache), so
an attention kernel's time a call in one run is a mix of those calls and the steps'. Runs that differ only in their
output length (the script's OUTPUTS, named <run>__out-N) difference that away: for each pair, the second run's
totals minus the first's, per added step, are the kernels of the added steps alone (printed as "per added step").
"""
import re
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


def kernel_totals(report):
    """{kernel name: (time_s, calls)} over the run (the first channel: every channel sees the same kernels)."""
    return {r["name"]: (r["time_s"], r["calls"]) for ch in report["channels"][:1] for r in ch["regions"]
            if r["kind"] == "kernel"}


def added_steps(runs, top):
    """Kernels per added step between runs that differ only in output length (<run>__out-N)."""
    groups = {}
    for stem, live, report in runs:
        m = re.fullmatch(r"(.*)__out-(\d+)", stem)
        if m:
            groups.setdefault(m.group(1), []).append((int(m.group(2)), live, report))
    out = []
    for base, rs in sorted(groups.items()):
        rs.sort(key=lambda r: r[0])
        for (oa, la, ra), (ob, lb, rb) in zip(rs, rs[1:]):
            steps = len(lb["steps"]) - len(la["steps"])
            if steps <= 0:
                continue
            ta, tb = kernel_totals(ra), kernel_totals(rb)
            rows = []
            for name in set(ta) | set(tb):
                (t0, c0), (t1, c1) = ta.get(name, (0.0, 0)), tb.get(name, (0.0, 0))
                if c1 > c0:
                    rows.append({"kernel": name[:80], "ms_per_step": 1e3 * (t1 - t0) / steps,
                                 "calls_per_step": (c1 - c0) / steps, "us_per_call": 1e6 * (t1 - t0) / (c1 - c0)})
            wall = sum(s["duration_s"] for s in lb["steps"]) - sum(s["duration_s"] for s in la["steps"])
            busy = sum(r["ms_per_step"] for r in rows)
            row = {"runs": f"{base}__out-{oa} -> {ob}", "added_steps": steps, "step_wall_ms": 1e3 * wall / steps,
                   "kernel_ms_per_step": busy,
                   "top": sorted(rows, key=lambda r: -r["ms_per_step"])[:top]}
            print(f"{base}: out {oa} -> {ob}, per added step ({steps} steps): wall {row['step_wall_ms']:.2f} ms, "
                  f"kernels {busy:.2f} ms")
            for k in row["top"]:
                print(f"  {k['ms_per_step']:8.3f} ms/step {k['calls_per_step']:7.1f} calls/step "
                      f"{k['us_per_call']:9.1f} us/call  {k['kernel']}")
            out.append(row)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("archive")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = list(runs_in(a.archive))
    rows = [summarise(stem, live, rep, a.top) for stem, live, rep in runs]
    diffs = added_steps(runs, a.top)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": rows, "added_steps": diffs}, f, indent=1)


if __name__ == "__main__":
    main()
