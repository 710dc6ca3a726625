#!/usr/bin/env python3
"""Checks dooly profile's energy per point against a long-window reference (issue 11, section 3).

For N points already in the store (ok rows), chosen across op classes and latencies: each unit is rebuilt exactly
as the profiler builds it and all N are measured once more the profiler's way, back to back in batches of the core's
energy engine (dooly.profile.measure.Timer and EnergyBatch), once per --settle policy; then each runs for --seconds
(default 5, cut into --slice-s slices: J per call and SM clock against time from idle) of
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
import math
import os
import random
import sqlite3
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import dooly_core  # noqa: E402

from dooly.profile.measure import EnergyBatch, Settings, Timer, copies_for, sm_clock  # noqa: E402
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


def pick(db, n, rnd, units, long_only=False, per_unit=0):
    """n ok points of the plan's op units: 3/4 of >= 1 ms (at most 3 per op name), the rest of 50 us to 1 ms;
    with long_only, all n of >= 1 ms, spread as evenly over the op names as they allow. With per_unit k: n // k
    units of k points of >= 1 ms or more (one unit per op name while they last), each unit's k largest, largest
    first, as the profiler runs a unit's points back to back (its points under 1 ms left out)."""
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
    if per_unit > 0:
        by_unit = {}
        for r in long_:
            by_unit.setdefault(r[0], []).append(r)
        def size(r):  # the profiler's order (plan.cpp points_of): largest first by the swept sizes' log sum
            return sum(math.log(max(x, 1)) for k, x in json.loads(r[2]).items() if not k.startswith("MOE_"))

        runs = [sorted(v, key=lambda r: -size(r))[:per_unit] for v in by_unit.values() if len(v) >= per_unit]
        rnd.shuffle(runs)
        seen, ranked = {}, []
        for run in runs:  # a unit's rank among those of its op name: every name's first unit, then the second, ...
            ranked.append((seen.get(run[0][1], 0), run))
            seen[run[0][1]] = seen.get(run[0][1], 0) + 1
        runs = [run for _, run in sorted(ranked, key=lambda x: x[0])]
        return [r for run in runs[: max(1, n // per_unit)] for r in run]
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
    ap.add_argument("--per-unit", type=int, default=0, help="runs of this many points of one unit, largest first "
                    "(the profiler's order: the settle period carries over between them); 0: points one by one")
    ap.add_argument("--carry-gap-s", type=float, default=0.5, help="the carry policy's settle_carry_gap_s")
    ap.add_argument("--settle", type=lambda v: [x if x in ("grid", "carry") else float(x) for x in v.split(",")],
                    default=["grid"], help="settle periods to measure the profiler's way with, comma-separated: "
                    "seconds, grid (the grid's policy: settle_s, longer while the clock is held down; default) or "
                    "carry (the grid's, carried over between a unit's points within --carry-gap-s)")
    ap.add_argument("--slice-s", type=float, default=0.25, help="the reference run's slices (J per call over time)")
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
    for h, name, key, extra, lat, stored_j in pick(args.db, args.points, random.Random(5), units, args.long_only,
                                                       args.per_unit):
        u = units.get(h)
        if u is not None:
            chosen.append((h, name, key, json.loads(extra)["bindings"], stored_j, u))

    def build(u, bindings):
        path = traces[u["trace"]]
        local = os.path.join(args.traces, os.path.basename(path))
        unit = OpUnit(find_op(cached_trace(local if os.path.exists(local) else path), u["step"], u["seq"]), dev)
        unit.prepare(bindings, copies_for(unit.input_bytes(bindings), dev))
        return unit

    # The profiler's way: every chosen point back to back, in batches of the engine; once per settle period asked.
    measured = {}
    grid_settle = (settings.settle_s, settings.capped_settle_s)
    for settle in args.settle:  # "grid"/"carry": the plan's settle policy; a number: that fixed settle period
        settings.settle_s, settings.capped_settle_s = grid_settle if settle in ("grid", "carry") else (settle, settle)
        settings.settle_carry_gap_s = args.carry_gap_s if settle == "carry" else 0.0
        batch = EnergyBatch(meter, True, baseline)
        got = []
        with torch.no_grad():
            for i, c in enumerate(chosen):
                if i == 0 or c[0] != chosen[i - 1][0]:  # a Timer a unit, as the profiler's worker makes them
                    timer = Timer(dev, settings, meter)
                unit = build(c[5], c[3])
                region = batch.next_region()
                batch.add(region, i, timer.run(unit, region))
                unit.copies = []
                if batch.full():
                    got += batch.close()
            got += batch.close()
        measured[settle] = dict(got)
        torch.cuda.empty_cache()
    results = []
    for i, (h, name, key, bindings, stored_j, u) in enumerate(chosen):
        first = measured[args.settle[0]].get(i)
        if first is None:
            continue
        unit = build(u, bindings)
        per = first["extra"]["calls_per_sample"]
        with torch.no_grad():
            replay, graphed = Timer(dev, settings).replayer(unit, per)
            ref = reference(replay, per, counter, meter, args.seconds, args.slice_s)
        row = {"hash": h, "name": name, "point": key, "stored_j": stored_j, "graphed": graphed, **ref,
               "stored_error": (stored_j - ref["reference_j"]) / ref["reference_j"] if stored_j else None,
               "by_settle": {}}
        for settle in args.settle:
            again = measured[settle].get(i)
            if again is None:
                continue
            e = again["energy"] or {}
            mine = e.get("j")
            row["by_settle"][str(settle)] = {
                "latency_s": again["latency_s"]["mean"], "dooly_j": mine, "dooly_hw_j": e.get("hw_j"),
                "dooly_trapezoid_j": e.get("trapezoid_j"), "avg_power_w": e.get("avg_power_w"),
                "window_s": again["extra"].get("window_s"), "settle_s": again["extra"].get("settle_s"),
                "settle_carried_s": again["extra"].get("settle_carried_s"),
                "error": (mine - ref["reference_j"]) / ref["reference_j"] if mine else None}
        first_s = row["by_settle"][str(args.settle[0])]
        row.update(first_s)  # the first settle period's figures at the top level (the earlier files' fields)
        results.append(row)
        errs = "  ".join(f"settle {k} s err {100 * v['error']:+.2f} %" if v["error"] is not None else f"settle {k} s n/a"
                         for k, v in row["by_settle"].items())
        print(f"{name:<30} {key:<40} lat {row['latency_s'] * 1e3:8.4f} ms  ref {ref['reference_j']:.5g} J "
              f"({ref['reference_power_w']:.0f} W, settles {ref['settle_time_s']} s)  {errs}", flush=True)
        unit.copies = []
        torch.cuda.empty_cache()
    json.dump({"baseline_w": baseline, "seconds": args.seconds, "slice_s": args.slice_s, "settle": args.settle,
               "points": results}, open(args.out, "w"), indent=1)
    for settle in args.settle:
        errs = [r["by_settle"][str(settle)]["error"] for r in results
                if r["latency_s"] >= 1e-3 and r["by_settle"].get(str(settle), {}).get("error") is not None]
        if errs:
            a = sorted(abs(e) for e in errs)
            rows = [r["by_settle"][str(settle)] for r in results if str(settle) in r["by_settle"]]
            replayed = sum((x["settle_s"] or 0) - (x["settle_carried_s"] or 0) for x in rows)  # settle time spent
            print(f"settle {settle} s, points >= 1 ms: {len(a)}, within 3 %: {sum(e <= 0.03 for e in a)}, "
                  f"median |error| {100 * a[len(a) // 2]:.2f} %, worst {100 * a[-1]:.2f} %; settle replays "
                  f"{replayed:.1f} s, {sum(1 for x in rows if x['settle_carried_s'])} points carried over")


def reference(replay, per, counter, meter, seconds, slice_s):
    """--seconds of back-to-back replays from idle between energy-counter reads (lag-robust: the counter's joules
    over the run and a 0.5 s head of the idle gap after it, less the head at the rest's idle power). The run is also
    cut into slices of slice_s, each a region of an engine run with its SM clock: J per call against time from idle,
    which says how long the clocks and the power controller take to settle."""
    time.sleep(1.5)
    meter.start()
    slices = []
    c0 = counter.joules()
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < seconds:
        name = f"s{len(slices)}"
        meter.begin(name, 0)
        a, n = time.perf_counter(), 0
        while time.perf_counter() - a < slice_s:
            for _ in range(10):
                replay()
            n += 10 * per
            torch.cuda.synchronize()
        meter.end(name, 0)
        slices.append({"name": name, "t_s": a - t0, "dt_s": time.perf_counter() - a, "calls": n,
                       "sm_clock_mhz": sm_clock(0).now_mhz()})
        calls += n
    t1 = time.perf_counter()
    c1 = counter.joules()
    time.sleep(0.5)
    c2 = counter.joules()
    t2 = time.perf_counter()
    time.sleep(1.0)
    c3 = counter.joules()
    t3 = time.perf_counter()
    rep = json.loads(meter.stop())
    regions = {r["name"]: r for ch in rep.get("channels", []) for r in ch.get("regions", [])}
    for sl in slices:
        r = regions.get(sl["name"], {})
        j = r.get("energy_j")
        sl["j_per_call"] = j / sl["calls"] if j else None
        sl["power_w"] = j / sl["dt_s"] if j else None
        sl["latency_s"] = sl["dt_s"] / sl["calls"]
    idle_w = (c3 - c2) / (t3 - t2)
    ref_total = (c2 - c0) - idle_w * (t2 - t1)
    tail = [sl["j_per_call"] for sl in slices if sl["t_s"] >= seconds - 2.0 and sl["j_per_call"]]
    steady = sum(tail) / len(tail) if tail else None
    settle_time = None
    if steady:  # the first slice from which every slice's J per call is within 2 % of the last 2 s
        for k in range(len(slices)):
            if all(sl["j_per_call"] and abs(sl["j_per_call"] / steady - 1) <= 0.02 for sl in slices[k:]):
                settle_time = round(slices[k]["t_s"], 2)
                break
    return {"reference_j": ref_total / calls, "reference_power_w": ref_total / (t1 - t0),
            "long_latency_s": (t1 - t0) / calls, "idle_w": idle_w, "calls": calls,
            "steady_j": steady, "settle_time_s": settle_time, "slices": slices}


if __name__ == "__main__":
    main()
