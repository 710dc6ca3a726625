#!/usr/bin/env python3
"""Energy per phase of examples/cuda_overlap against the sum of its kernels' alone J/calls (issue 13, section 2): is
energy per call conserved when kernels run concurrently? From the Perfetto trace the CUPTI library writes
(DOOLY_TRACE: kernel windows, the NVTX phase ranges, the power readings as a counter track). Per phase: the
trapezoid of the power readings over the phase less the floor over its length, each reading placed at the middle of
the window it averages (its time less the sensor's delay and half its window, --shift-ms, as
scripts/gpu/summarize_overlap.py places them); alone phases give each kernel's J per
call, concurrent ones are compared with the sum over their kernels of calls x J/call alone. A split of concurrent
readings that keeps the measured energy can only bring every kernel within x % of its alone figure where the phase's
excess is within x %.

  python3 scripts/analysis/overlap_phase_energy.py --floors 123.7,128.9 run1.trace.json.gz run2.trace.json.gz
(the floor: the model fit's, `dooly analyze` on the run's recording prints it; default: the median power reading
before the first phase)
"""

import argparse
import collections
import gzip
import json
import re
import statistics


def phase_table(path: str, floor: float | None, shift_ms: float) -> None:
    with gzip.open(path) if path.endswith(".gz") else open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    power = sorted((e["ts"] - 1e3 * shift_ms, next(iter(e["args"].values()))) for e in ev if e.get("ph") == "C")
    phases = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in ev
              if e.get("ph") == "X" and e["name"].split(" ")[0] in ("alone", "concurrent")}
    if not phases or not power:
        raise SystemExit(f"overlap_phase_energy: {path} has no phase ranges or no power track (a cuda_overlap trace?)")
    calls = collections.defaultdict(collections.Counter)
    for e in ev:
        m = re.search(r"::(\w+)<\d+>", e.get("name", "")) if e.get("ph") == "X" else None
        if m:
            for p, (a, b) in phases.items():
                if a <= e["ts"] < b:
                    calls[p][m.group(1)] += 1
    if floor is None:
        first = min(a for a, _ in phases.values())
        floor = statistics.median(w for ts, w in power if ts < first)

    def joules(a, b):  # trapezoid of the readings over [a, b] (microseconds)
        return sum((w0 + w1) / 2 * (min(t1, b) - max(t0, a)) * 1e-6
                   for (t0, w0), (t1, w1) in zip(power, power[1:]) if min(t1, b) > max(t0, a))

    print(f"{path}: floor {floor:.1f} W")
    alone = {}
    for p, (a, b) in sorted(phases.items(), key=lambda x: x[1][0]):
        dt = (b - a) * 1e-6
        e = joules(a, b)
        above = e - floor * dt
        c = calls[p]
        line = f"  {p:22s} {dt:6.3f} s {e / dt:5.0f} W  above the floor {above:8.1f} J  calls {dict(c)}"
        if p.startswith("alone"):
            k = next(iter(c))
            alone[k] = above / c[k]
            print(f"{line}  J/call {alone[k]:.4f}")
        else:
            s = sum(alone[k] * n for k, n in c.items())
            print(f"{line}  alone J/calls summed {s:8.1f} J  {100 * (above / s - 1):+.1f} %")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--floors", default="", help="the floor (W) of each trace, comma-separated")
    ap.add_argument("--shift-ms", type=float, default=16.5, help="the sensor's delay plus half its window (default: "
                    "NVML's sample buffer, 4 + 25 / 2 ms; the report's channel sensor gives them)")
    a = ap.parse_args()
    floors = [float(x) for x in a.floors.split(",")] if a.floors else [None] * len(a.traces)
    if len(floors) != len(a.traces):
        raise SystemExit(f"overlap_phase_energy: {len(a.traces)} traces but {len(floors)} floors")
    for path, floor in zip(a.traces, floors):
        phase_table(path, floor, a.shift_ms)


if __name__ == "__main__":
    main()
