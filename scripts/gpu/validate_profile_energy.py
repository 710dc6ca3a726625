#!/usr/bin/env python3
"""Checks dooly profile's energy per point against a long-window reference (issue 11, section 3).

For N points already in the store (ok rows), chosen across op classes and latencies: each unit is rebuilt exactly
as the profiler builds it and all N are measured once more the profiler's way, back to back in batches of the core's
energy engine (dooly.profile.measure.Timer and EnergyBatch); then each runs for --seconds (default 5) of
back-to-back CUDA-graph replays between NVML energy counter reads. The counter lags (docs/results/2026-11-30-h200-kokkos-lag-robust.md), so each run is followed by an
idle gap split into a 0.5 s head and a 1.0 s rest: the reference is the counter's joules over the run plus the head,
less the head's time at the rest's idle power, per call. Prints one row per point and writes a JSON file.

  PYTHONPATH=python:/tmp/dooly-core python3 scripts/gpu/validate_profile_energy.py --db DB --plan PLAN.json \
      --traces DIR --points 24 --out OUT.json
"""

import argparse
import ctypes
import functools
import glob
import json
import os
import random
import sqlite3
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import dooly_core  # noqa: E402

from dooly.profile.measure import EnergyBatch, Settings, Timer, copies_for  # noqa: E402
from dooly.profile.units import OpUnit, find_op, load_trace  # noqa: E402


class Counter:
    """nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded), through ctypes."""

    def __init__(self, index=0):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0
        self.h = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.h)) == 0

    def joules(self) -> float:
        v = ctypes.c_ulonglong()
        assert self.lib.nvmlDeviceGetTotalEnergyConsumption(self.h, ctypes.byref(v)) == 0
        return v.value / 1000.0


cached_trace = functools.lru_cache(maxsize=2)(load_trace)  # points of one trace share its parse


def pick(db, n, rnd, units, long_only=False):
    """n ok points of the plan's op units: 3/4 of >= 1 ms (at most 3 per op name), the rest of 50 us to 1 ms;
    with long_only, all n of >= 1 ms, spread as evenly over the op names as they allow."""
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT s.hash, s.name, m.point_key, m.extra_json, m.latency_mean_s, m.energy_j FROM measurements m "
            "JOIN signatures s ON s.id = m.signature_id WHERE m.status = 'ok' "
            "AND s.kind = 'op' ORDER BY m.id").fetchall()
    rows = sorted({(r[0], r[2]): r for r in rows if r[0] in units}.values())  # one row a point (the newest id wins)
    long_ = [r for r in rows if r[4] >= 1e-3]
    short = [r for r in rows if 5e-5 <= r[4] < 1e-3]
    rnd.shuffle(long_)
    rnd.shuffle(short)
    by_name, chosen = {}, []
    want, cap = (n, 1) if long_only else (n - n // 4, 3)
    while True:  # spread over op names first: round by round, up to `cap` a name (no cap left with long_only)
        before = len(chosen)
        for r in long_:
            if r not in chosen and by_name.get(r[1], 0) < cap and len(chosen) < want:
                by_name[r[1]] = by_name.get(r[1], 0) + 1
                chosen.append(r)
        if not long_only or len(chosen) == before or len(chosen) >= want:
            break
        cap += 1
    if not long_only:
        chosen += short[: n - len(chosen)]
    return chosen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--plan", default="", help="plan JSON of the run (default: planned now from --traces)")
    ap.add_argument("--grid", default="data/grids/default.json")
    ap.add_argument("--traces", required=True, help="folder of the traces the plan names")
    ap.add_argument("--points", type=int, default=24)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--long-only", action="store_true", help="only points of >= 1 ms (the 3 %% goal's range)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    if args.plan:
        plan = json.load(open(args.plan))
    else:
        paths = sorted(glob.glob(os.path.join(args.traces, "*.json")))
        plan = json.loads(dooly_core.profile_plan(args.db, paths, args.grid, 0))
    units = {u["hash"]: u for u in plan["units"]}
    traces = plan["traces"]
    counter = Counter(0)
    meter = dooly_core.EnergyMeter(None, 1000)
    meter.start()
    rep = json.loads(meter.stop())
    baseline = next((ch["baseline_w"] for ch in rep["channels"] if ch.get("baseline_w")), None)
    meter = dooly_core.EnergyMeter(baseline, 0)
    settings = Settings(plan["measure"])
    chosen = []
    for h, name, key, extra, lat, stored_j in pick(args.db, args.points, random.Random(5), units, args.long_only):
        u = units.get(h)
        if u is not None:
            chosen.append((h, name, key, json.loads(extra)["bindings"], stored_j, u))

    def build(u, bindings):
        path = traces[u["trace"]]
        local = os.path.join(args.traces, os.path.basename(path))
        unit = OpUnit(find_op(cached_trace(local if os.path.exists(local) else path), u["step"], u["seq"]), dev)
        unit.prepare(bindings, copies_for(unit.input_bytes(bindings), dev))
        return unit

    # The profiler's way: every chosen point back to back, in batches of the engine.
    batch = EnergyBatch(meter, True, baseline)
    timer = Timer(dev, settings, meter)
    measured = []
    with torch.no_grad():
        for c in chosen:
            unit = build(c[5], c[3])
            region = batch.next_region()
            batch.add(region, c, timer.run(unit, region))
            unit.copies = []
            if batch.full():
                measured += batch.close()
        measured += batch.close()
    torch.cuda.empty_cache()
    results = []
    for (h, name, key, bindings, stored_j, u), again in measured:
        unit = build(u, bindings)
        with torch.no_grad():
            # The long window: the same replays for --seconds, between counter reads.
            replay, graphed = Timer(dev, settings).replayer(unit, again["extra"]["calls_per_sample"])
            per = again["extra"]["calls_per_sample"]
            time.sleep(1.5)
            c0 = counter.joules()
            t0 = time.perf_counter()
            calls = 0
            while time.perf_counter() - t0 < args.seconds:
                for _ in range(50):
                    replay()
                calls += 50 * per
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            c1 = counter.joules()
            time.sleep(0.5)
            c2 = counter.joules()
            t2 = time.perf_counter()
            time.sleep(1.0)
            c3 = counter.joules()
            t3 = time.perf_counter()
        idle_w = (c3 - c2) / (t3 - t2)
        ref_total = (c2 - c0) - idle_w * (t2 - t1)
        ref_j = ref_total / calls
        long_lat = (t1 - t0) / calls
        e = again["energy"] or {}
        mine = e.get("j")
        row = {"hash": h, "name": name, "point": key, "latency_s": again["latency_s"]["mean"],
               "long_latency_s": long_lat, "dooly_j": mine, "dooly_hw_j": e.get("hw_j"),
               "dooly_trapezoid_j": e.get("trapezoid_j"), "avg_power_w": e.get("avg_power_w"),
               "reference_power_w": ref_total / (t1 - t0),
               "trapezoid_error": (e["trapezoid_j"] - ref_j) / ref_j if e.get("trapezoid_j") else None,
               "stored_j": stored_j, "reference_j": ref_j, "idle_w": idle_w, "calls": calls, "graphed": graphed,
               "error": (mine - ref_j) / ref_j if mine else None,
               "stored_error": (stored_j - ref_j) / ref_j if stored_j else None}
        results.append(row)
        stored = f"  stored err {100 * row['stored_error']:+.2f} %" if row["stored_error"] is not None else ""
        trap = f" (trapezoid {100 * row['trapezoid_error']:+.2f} %)" if row["trapezoid_error"] is not None else ""
        print(f"{name:<30} {key:<40} lat {row['latency_s'] * 1e3:8.4f} ms  dooly {mine} J  ref {ref_j:.5g} J  "
              f"err {100 * (row['error'] or 0):+.2f} %{trap}{stored}", flush=True)
        unit.copies = []
        torch.cuda.empty_cache()
    json.dump({"baseline_w": baseline, "seconds": args.seconds, "points": results}, open(args.out, "w"), indent=1)
    big = [r for r in results if r["latency_s"] >= 1e-3 and r["error"] is not None]
    if big:
        worst = max(abs(r["error"]) for r in big)
        print(f"points >= 1 ms: {len(big)}, worst |error| {100 * worst:.2f} %, "
              f"mean |error| {100 * sum(abs(r['error']) for r in big) / len(big):.2f} %")


if __name__ == "__main__":
    main()
