"""Per-kernel J/call concurrent against alone, from cuda_overlap runs under libdooly_cupti.so.

  summarize_overlap.py RUN.json [RUN.json ...]

For each kernel (fma_burn, stream_triad, wmma_gemm) and run: the J/call of instance <0> (run alone) and of
instance <1> (run concurrently on other streams), in three ways:
  model      the report's model mode (NNLS over every stream's occupancy), with its 95 % half-width;
  trapezoid  the report's trapezoid mode (each window charged the whole device's power above the floor);
  naive      a split by time: the power above the floor at each instant shared equally among the kernels running
             then (from RUN.trace.json beside the report, when it was written).
The goal (issue 13): the model's J/call concurrent within 10 % of alone. Needs numpy for the naive split.
"""
import gzip
import json
import os
import re
import sys

GOAL = 0.10
KERNELS = ("fma_burn", "stream_triad", "wmma_gemm")


def instance(name):
    m = re.search(r"\b(fma_burn|stream_triad|wmma_gemm)<([01])>", name)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def naive_split(trace_path, channel, baseline_w):
    """J/call per kernel name from the trace: power above the floor shared equally among running kernels."""
    import numpy as np

    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        t = json.load(f)
    sensor = channel["sensor"]
    shift_us = (sensor["delay_ns"] + sensor["window_ns"] / 2) / 1e3
    power = sorted((e["ts"] - shift_us, e["args"]["W"]) for e in t["traceEvents"]
                   if e["ph"] == "C" and e["name"] == f"power {channel['name']} (W)")
    wins = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in t["traceEvents"]
            if e["ph"] == "X" and e.get("cat") == "kernel" and e["pid"] == channel["device"] + 1]
    if not power or not wins:
        return {}
    step = 50.0  # us
    t0 = min(w[0] for w in wins)
    t1 = max(w[1] for w in wins)
    n = int((t1 - t0) / step) + 2
    grid = t0 + step * np.arange(n)
    pw = np.interp(grid, [p[0] for p in power], [p[1] for p in power]) - baseline_w
    count = np.zeros(n + 1)
    idx = [(int((a - t0) / step), max(int((b - t0) / step), int((a - t0) / step) + 1), name) for a, b, name in wins]
    for i, j, _ in idx:
        count[i] += 1
        count[j] -= 1
    active = np.cumsum(count)[:n]
    share = np.where(active > 0, pw / np.maximum(active, 1), 0.0) * step * 1e-6
    prefix = np.concatenate([[0.0], np.cumsum(share)])
    out = {}
    for i, j, name in idx:
        e = out.setdefault(name, [0.0, 0])
        e[0] += prefix[min(j, n)] - prefix[i]
        e[1] += 1
    return {k: v[0] / v[1] for k, v in out.items()}


def summarize(path):
    with open(path) as f:
        r = json.load(f)
    ch = next((c for c in r["channels"] if c["domain"] == "gpu"), r["channels"][0])
    floor = ch["model_fit"]["intercept_w"] if ch["model_fit"]["fitted"] else ch["baseline_w"]
    rows = {}
    for x in ch["regions"]:
        k, inst = instance(x["name"])
        if k:
            rows[(k, inst)] = x
    trace = None
    for cand in (path[:-5] + ".trace.json", path[:-5] + ".trace.json.gz"):
        if os.path.exists(cand):
            trace = cand
    naive = {}
    if trace:
        try:
            naive = naive_split(trace, {"name": ch["name"], "device": ch.get("device", 0), "sensor": ch["sensor"]},
                                ch["baseline_w"])
        except ImportError:
            print("(numpy missing: no naive split)")
    print(f"== {os.path.basename(path)}: {ch['name']}, floor {floor:.1f} W, fit R^2 {ch['model_fit'].get('r_squared', 0):.4f}, "
          f"{ch['model_fit'].get('interval_method', '')}")
    print(f"{'kernel':13} {'mode':9} {'alone J/call':>14} {'concurrent J/call':>18} {'diff':>8}  goal {100 * GOAL:.0f} %")
    results = {}
    for k in KERNELS:
        a, c = rows.get((k, 0)), rows.get((k, 1))
        if not a or not c:
            print(f"{k:13} missing rows")
            continue
        figures = {
            "model": (a["model_j_per_call"], c["model_j_per_call"], a["model_j_per_call_hw_j"], c["model_j_per_call_hw_j"]),
            "trapezoid": (a["j_per_call"], c["j_per_call"], None, None),
        }
        na = [v for key, v in naive.items() if instance(key) == (k, 0)]
        nc = [v for key, v in naive.items() if instance(key) == (k, 1)]
        if na and nc:
            figures["naive"] = (na[0], nc[0], None, None)
        for mode, (ja, jc, ha, hc) in figures.items():
            if ja is None or jc is None or ja == 0:
                continue
            d = jc / ja - 1
            hw = f" (+-{ha:.4f} / +-{hc:.4f})" if isinstance(ha, (int, float)) and isinstance(hc, (int, float)) else ""
            print(f"{k:13} {mode:9} {ja:14.5f} {jc:18.5f} {100 * d:+7.1f}%  {'within' if abs(d) <= GOAL else 'OUT'}{hw}")
            results[(k, mode)] = d
    return results


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    all_results = [summarize(p) for p in argv[1:]]
    print("== over all runs: |concurrent/alone - 1|, worst run")
    for k in KERNELS:
        for mode in ("model", "trapezoid", "naive"):
            ds = [r[(k, mode)] for r in all_results if (k, mode) in r]
            if ds:
                worst = max(ds, key=abs)
                print(f"{k:13} {mode:9} worst {100 * worst:+7.1f}%  {'within' if abs(worst) <= GOAL else 'OUT'} ({len(ds)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
