"""A first prototype, offline, of a regression additive in energy per call (rather than in power) on a recording of
concurrent kernels (issue 13, section 2; docs/results/2026-12-04-h200-issue13-overlap-overhead.md). Not the engine's
fit: no regions, no quiet-reading baseline, no intervals; it is kept to reproduce that record's prototype figures.

For every power reading i of the recording (a boxcar of the channel's window ending its delay before the reading)
and every kernel key k, two regressors:
  power basis   x_ik = (time k ran inside the reading's window) / window            -> coefficient: W above the floor
  energy basis  x_ik = sum over calls c of k of overlap(c, window) / duration(c) / window (calls per second, each
                call spread evenly over its own duration)                           -> coefficient: J per call
with a free intercept (the floor) and the rest >= 0, over the readings from the first kernel to the last. Prints
J/call per kernel key in both bases and every X<1> against X<0>.

  .venv/bin/python scripts/analysis/overlap_energy_basis.py data/runs/h200-cuda-overlap-run1.recording.gz [--exclude spin]
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys

import numpy as np


def read_recording(path):
    opener = gzip.open if path.endswith(".gz") else open
    keys, begins, calls, samples, channel = {}, {}, [], [], None
    with opener(path, "rt") as f:
        for line in f:
            p = line.rstrip("\n").split(",")
            tag = p[0]
            if tag == "s":
                samples.append((int(p[2]), float(p[3])))
            elif tag == "b":
                begins[(int(p[3]), int(p[2]))] = int(p[1])  # (track, key) -> begin; kernels do not nest on a track
            elif tag == "e":
                t0 = begins.pop((int(p[3]), int(p[2])), None)
                if t0 is not None:
                    calls.append((int(p[2]), t0, int(p[1])))
            elif tag == "key":
                keys[int(p[1])] = (p[2], ",".join(p[3:]))
            elif tag == "channel" and channel is None:
                channel = (int(p[5]), int(p[6]))  # window ns, delay ns
    return keys, calls, np.array(samples), channel


def short(name: str) -> str:
    return re.sub(r"^void ", "", name).replace("(anonymous namespace)::", "").split("(")[0]


def design(calls, kernel_keys, samples, window_ns, delay_ns, basis):
    hi = samples[:, 0] - delay_ns
    lo = hi - window_ns
    col = {k: j for j, k in enumerate(kernel_keys)}
    x = np.zeros((len(hi), len(kernel_keys)))
    order = np.argsort(lo)
    lo_sorted = lo[order]
    for key, b, e in calls:
        j = col.get(key)
        if j is None or e <= b:
            continue
        idx = order[np.searchsorted(lo_sorted, b - window_ns):np.searchsorted(lo_sorted, e)]
        ov = np.clip(np.minimum(hi[idx], e) - np.maximum(lo[idx], b), 0, None)
        x[idx, j] += ov / window_ns if basis == "power" else ov / (e - b) / (window_ns * 1e-9)
    return x


def nnls_with_intercept(x, y, floor_w: float | None = None, sweeps: int = 20000):
    """Least squares of y on an intercept and x, the intercept free (or fixed at floor_w) and the other coefficients
    >= 0, by coordinate descent on the normal equations (a handful of columns). Returns (floor, coef, rms)."""
    fixed = floor_w is not None
    a = x if fixed else np.hstack([np.ones((len(y), 1)), x])
    target = y - floor_w if fixed else y
    g, b = a.T @ a, a.T @ target
    coef = np.zeros(a.shape[1])
    for _ in range(sweeps):
        change = 0.0
        for j in range(len(coef)):
            if g[j, j] <= 0:
                continue
            new = coef[j] + (b[j] - g[j] @ coef) / g[j, j]
            if fixed or j > 0:
                new = max(0.0, new)
            change = max(change, abs(new - coef[j]) * np.sqrt(g[j, j]))
            coef[j] = new
        if change < 1e-9:
            break
    rms = float(np.sqrt(np.mean((target - a @ coef) ** 2)))
    return (floor_w, coef, rms) if fixed else (coef[0], coef[1:], rms)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recording")
    ap.add_argument("--exclude", default="", help="comma-separated substrings of kernel names left out of the fit")
    ap.add_argument("--busy-only", action="store_true",
                    help="fit only the readings whose window some kernel occupies throughout (leaves out the idle "
                         "gaps, where the power decays with no kernel to carry it)")
    ap.add_argument("--floor", type=float, default=None, help="fix the intercept at this many W (default: fitted)")
    args = ap.parse_args(argv)
    keys, calls, samples, (window_ns, delay_ns) = read_recording(args.recording)
    excluded = [s for s in args.exclude.split(",") if s]
    kernel_keys = [k for k, (kind, name) in sorted(keys.items())
                   if kind in ("kernel", "copy") and not any(s in name for s in excluded)]
    first = min(b for _, b, _ in calls) - window_ns
    last = max(e for _, _, e in calls) + window_ns + delay_ns
    samples = samples[(samples[:, 0] >= first) & (samples[:, 0] <= last)]
    if args.busy_only:  # the union of all kernels' windows covers the reading's window
        busy = np.zeros(len(samples), dtype=bool)
        spans = sorted((b, e) for _, b, e in calls)
        merged = []
        for b, e in spans:
            if merged and b <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([b, e])
        starts = np.array([m[0] for m in merged])
        ends = np.array([m[1] for m in merged])
        hi = samples[:, 0] - delay_ns
        lo = hi - window_ns
        j = np.searchsorted(starts, lo, side="right") - 1
        ok = j >= 0
        busy[ok] = ends[j[ok]] >= hi[ok]
        samples = samples[busy]
    n_calls = {k: 0 for k in kernel_keys}
    time_s = {k: 0.0 for k in kernel_keys}
    for key, b, e in calls:
        if key in n_calls:
            n_calls[key] += 1
            time_s[key] += (e - b) * 1e-9
    out = {}
    for basis in ("power", "energy"):
        floor, coef, rms = nnls_with_intercept(design(calls, kernel_keys, samples, window_ns, delay_ns, basis),
                                               samples[:, 1], args.floor)
        print(f"== {basis} basis: floor {floor:.1f} W, residual {rms:.1f} W rms over {len(samples)} readings")
        for j, k in enumerate(kernel_keys):
            out[(basis, k)] = coef[j] * time_s[k] / n_calls[k] if basis == "power" else coef[j]
            print(f"  {short(keys[k][1]):<24} calls {n_calls[k]:6d}  time {time_s[k]:7.3f} s  "
                  f"J/call {out[(basis, k)]:8.4f}")
    by_name = {short(keys[k][1]): k for k in kernel_keys}
    print("== concurrent <1> against alone <0>")
    for name, k1 in sorted(by_name.items()):
        k0 = by_name.get(name[:-3] + "<0>") if name.endswith("<1>") else None
        if k0 is None:
            continue
        for basis in ("power", "energy"):
            a, c = out[(basis, k0)], out[(basis, k1)]
            diff = 100 * (c / a - 1) if a > 0 else float("nan")
            print(f"  {name[:-3]:<16} {basis:<6} alone {a:8.4f}  concurrent {c:8.4f}  {diff:+9.1f} %  "
                  f"{'ok' if abs(diff) <= 10 else 'OUT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
