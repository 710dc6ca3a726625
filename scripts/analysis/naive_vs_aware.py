#!/usr/bin/env python3
"""GPU time of redundancy-aware profiling against the naive plan, from the store's measured point times.

Aware: the device time of every point the store holds with energy under a measurement context (the points' own
`point_s`: inputs, warm-up, graph capture, timed window). Naive (every model x backend profiles its own
signatures over the same grid, as `dooly profile --dry-run` prints it): each signature's measured time once per
trace that holds it (the store's model_signatures rows under the given trace provenances). The naive figure is
therefore an estimate from measured times, not a naive run. Op classes come from plan files (`--plan-json` of
the runs), since the store keeps the op's rule, not the planner's class.

  python3 scripts/analysis/naive_vs_aware.py --db data/profile/h200.sqlite --context 4 --traces 5,6 PLAN.json.gz...

With --settle-carried, both sides leave out the settle periods of each unit's later long points (the grid's
settle_carry_gap_s, 2026-12-05: a unit's points run back to back, and only its first long one settles): an estimate
from the recorded settle times of points measured before the carry existed.
"""

import argparse
import collections
import gzip
import json
import sqlite3


def later_settles_s(rows) -> dict:
    """Per signature, the settle seconds of its settled points after its first one, from (signature id, extra)
    rows in measurement order: what a settle carried over between a unit's points would not have replayed."""
    seen, later = set(), collections.defaultdict(float)
    for sid, extra in rows:
        settled = extra.get("settle_s") or 0.0
        if settled > 0 and not extra.get("settle_carried_s"):
            if sid in seen:
                later[sid] += settled
            seen.add(sid)
    return later


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--context", type=int, required=True, help="the measurement context (provenance id) of the points")
    ap.add_argument("--traces", required=True, help="provenance ids of the traces, comma-separated")
    ap.add_argument("--settle-carried", action="store_true",
                    help="leave out the settle periods a carried-over settle would not replay (an estimate)")
    ap.add_argument("plans", nargs="*", help="plan JSON files (.json or .json.gz) for the op classes")
    args = ap.parse_args()
    op_class = {}
    for p in args.plans:
        with (gzip.open(p) if p.endswith(".gz") else open(p)) as f:
            for u in json.load(f)["units"]:
                op_class[u["signature_id"]] = u["op_class"]
    traces = [int(x) for x in args.traces.split(",")]
    c = sqlite3.connect(args.db)
    marks = ",".join("?" * len(traces))
    sharing = dict(c.execute(
        f"SELECT signature_id, COUNT(DISTINCT model_id || '-' || provenance_id) FROM model_signatures "
        f"WHERE provenance_id IN ({marks}) GROUP BY signature_id", traces).fetchall())
    spent = collections.defaultdict(float)
    rows = [(sid, json.loads(extra)) for sid, extra in c.execute(
            "SELECT m.signature_id, m.extra_json FROM measurements m JOIN signatures s ON s.id = m.signature_id "
            "WHERE s.kind = 'op' AND m.status = 'ok' AND m.energy_j IS NOT NULL AND m.provenance_id = ? "
            "ORDER BY m.id", (args.context,))]
    for sid, extra in rows:
        spent[sid] += extra.get("point_s", 0.0)
    if args.settle_carried:
        for sid, s in later_settles_s(rows).items():
            spent[sid] -= s
    aware, naive = collections.defaultdict(float), collections.defaultdict(float)
    unshared = 0
    for sid, s in spent.items():
        k = sharing.get(sid)
        if not k:
            unshared += 1  # measured, but in none of these traces (a superseded trace format's hash)
            continue
        cls = op_class.get(sid, "?")
        aware[cls] += s
        naive[cls] += s * k
    a, n = sum(aware.values()), sum(naive.values())
    print(f"{len(spent) - unshared} signatures measured in these traces ({unshared} others left out)")
    print(f"aware {a / 60:.2f} GPU-min, naive (estimated from measured times) {n / 60:.2f} GPU-min, "
          f"saved {100 * (1 - a / n):.1f} %")
    print(f"{'class':<12} {'aware min':>9} {'naive min':>9} {'saved':>7} {'share of the saving':>20}")
    for k in sorted(naive, key=lambda k: -(naive[k] - aware[k])):
        print(f"{k:<12} {aware[k] / 60:9.2f} {naive[k] / 60:9.2f} {100 * (1 - aware[k] / naive[k]):6.1f}% "
              f"{100 * (naive[k] - aware[k]) / (n - a):19.1f}%")


if __name__ == "__main__":
    main()
