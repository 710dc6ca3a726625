#!/usr/bin/env python3
"""Would adaptive refinement of the token grid measure fewer points at an acceptable interpolation error? An
offline answer from a profile store's measured curves (docs/results/2026-12-02-grid-refinement-offline.md).

For every op signature whose points are a complete 1-D NUM_TOKS sweep (>= 9 points, ok rows), the refinement is
replayed on the measured values: start from every 2^L-th point of the sweep (and its last), then, pass by pass,
measure the midpoint of every interval next to a point that lies more than `tol` off the log-log line through its
two measured neighbours, until no interval is added. The points never measured are then interpolated (linear in
log-log between measured neighbours) and compared with what was measured there, for latency and energy.

  python3 scripts/analysis/grid_refinement.py data/profile/h200.sqlite
"""

import collections
import json
import math
import sqlite3
import sys


def curves(db: str) -> dict[int, dict[int, tuple[float, float | None]]]:
    out: dict[int, dict[int, tuple[float, float | None]]] = collections.defaultdict(dict)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        for sid, key, lat, e in c.execute("SELECT signature_id, point_key, latency_mean_s, energy_j FROM measurements "
                                          "WHERE status = 'ok' ORDER BY id"):
            k = json.loads(key)
            if list(k) == ["NUM_TOKS"] and lat > 0:
                out[sid][int(k["NUM_TOKS"])] = (lat, e)  # the newest row of a point wins
    return {s: v for s, v in out.items() if len(v) >= 9}


def interp(xs: list[int], ys: list[float], x: int) -> float:
    for a in range(len(xs) - 1):
        if xs[a] <= x <= xs[a + 1]:
            t = (math.log(x) - math.log(xs[a])) / (math.log(xs[a + 1]) - math.log(xs[a]))
            return math.exp(math.log(ys[a]) + t * (math.log(ys[a + 1]) - math.log(ys[a])))
    raise ValueError(f"{x} outside [{xs[0]}, {xs[-1]}]")


def off_line(sel: list[int], grid: list[int], val: list[float], k: int) -> float:
    """Relative distance of the k-th selected point from the log-log line through its selected neighbours."""
    if k <= 0 or k >= len(sel) - 1:
        return 0.0
    p = interp([grid[sel[k - 1]], grid[sel[k + 1]]], [val[sel[k - 1]], val[sel[k + 1]]], grid[sel[k]])
    return abs(p - val[sel[k]]) / val[sel[k]]


def refine(grid: list[int], val: list[float], level: int, tol: float) -> tuple[list[int], int]:
    n = len(grid)
    sel = sorted(set(range(0, n, 2 ** level)) | {n - 1})
    passes = 0
    while True:
        add = {(sel[k] + sel[k + 1]) // 2 for k in range(len(sel) - 1)
               if sel[k + 1] - sel[k] >= 2 and max(off_line(sel, grid, val, k), off_line(sel, grid, val, k + 1)) > tol}
        if not add:
            return sel, passes
        sel, passes = sorted(set(sel) | add), passes + 1


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1))] if xs else float("nan")


def main() -> int:
    db = sys.argv[1] if len(sys.argv) > 1 else "data/profile/h200.sqlite"
    cs = curves(db)
    sizes = collections.Counter(len(v) for v in cs.values())
    print(f"{db}: {len(cs)} complete 1-D NUM_TOKS curves ({', '.join(f'{n} of {k} points' for k, n in sorted(sizes.items()))})")
    print("level tol   points kept        passes  latency error of skipped points     energy error of skipped points")
    for level in (1, 2, 3):
        for tol in (0.01, 0.02, 0.03, 0.05):
            total = kept = passes = 0
            lat_err: list[float] = []
            e_err: list[float] = []
            for v in cs.values():
                grid = sorted(v)
                lat = [v[g][0] for g in grid]
                sel, p = refine(grid, lat, level, tol)
                total, kept, passes = total + len(grid), kept + len(sel), max(passes, p)
                xs = [grid[i] for i in sel]
                es = [v[grid[i]][1] for i in sel]
                for i in set(range(len(grid))) - set(sel):
                    lat_err.append(abs(interp(xs, [lat[s] for s in sel], grid[i]) - lat[i]) / lat[i])
                    e = v[grid[i]][1]
                    if e and all(es):
                        e_err.append(abs(interp(xs, es, grid[i]) - e) / e)
            print(f"{level:>5} {tol:.2f} {kept:>5}/{total} ({100 * kept / total:3.0f} %) {passes:>6}  "
                  f"p50 {100 * quantile(lat_err, .5):6.2f} p90 {100 * quantile(lat_err, .9):7.2f} "
                  f"max {100 * max(lat_err, default=0):7.1f} %   "
                  f"n {len(e_err):>3} p50 {100 * quantile(e_err, .5):6.2f} p90 {100 * quantile(e_err, .9):7.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
