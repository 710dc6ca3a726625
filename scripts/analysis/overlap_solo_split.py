"""A second prototype, offline, for concurrent kernels (issue 13, section 2): split each power reading among the
kernels active in its sensor window in proportion to what each would draw there alone. Not the engine's code; it
is kept to reproduce docs/results/2026-12-04-h200-cudnn-sdpa-host-drift.md §5.

  1. Solo fit: over the readings whose window holds at most one kernel key, power = floor + sum_k P_k x_k (x_k: the
     share of the window key k ran; P_k >= 0, the floor free): each kernel's power above the floor when alone.
  2. Split: every reading's energy above the floor (its power less the floor, times its period) goes to the kernels
     active in its window in proportion to a weight:
       --weights power   P_k x_k                                        (power x time: a slowed kernel gets more)
       --weights calls   J_k c_k, J_k = P_k x (solo time / solo calls), c_k = the calls of k in the window, each
                         spread evenly over its own duration             (energy per call, the default)
     A concurrent key `X<1>` of scripts/gpu/validate_overlap.sh's program never runs alone: it takes the weight of
     its solo twin `X<0>` (the same kernel function; in a real program the key is one and the same).
     --memory-ms M widens the window the split weights are taken over by M ms back in time (the solo fit keeps the
     sensor's window): the board's power falls for tens of ms after a kernel ends, so a reading's energy above the
     floor also belongs to what ran just before its window.
  3. J per call of each key, and every X<1> against X<0> (the goal: within 10 %).

  .venv/bin/python scripts/analysis/overlap_solo_split.py data/runs/h200-cuda-overlap-hostdelay-run1.recording.gz [--weights power]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overlap_energy_basis import design, nnls_with_intercept, read_recording, short  # noqa: E402


def twin(names: list[str], j: int) -> int:
    """The solo key standing in for key j: its X<0> twin when j is a concurrent X<1>, else j itself."""
    n = names[j]
    if n.endswith("<1>") and n[:-3] + "<0>" in names:
        return names.index(n[:-3] + "<0>")
    return j


def split(path: str, weights: str, memory_ns: int = 0) -> dict[str, float]:
    keys, calls, samples, (window_ns, delay_ns) = read_recording(path)
    kk = [k for k, (kind, _) in sorted(keys.items()) if kind in ("kernel", "copy")]
    names = [short(keys[k][1]) for k in kk]
    first = min(b for _, b, _ in calls) - window_ns
    last = max(e for _, _, e in calls) + window_ns + delay_ns
    samples = samples[(samples[:, 0] >= first) & (samples[:, 0] <= last)]
    share_of_window = design(calls, kk, samples, window_ns, delay_ns, "power")
    solo = (share_of_window > 1e-9).sum(axis=1) <= 1
    floor, power, _ = nnls_with_intercept(share_of_window[solo], samples[solo, 1])
    n_calls = np.zeros(len(kk))
    busy_s = np.zeros(len(kk))
    col = {k: j for j, k in enumerate(kk)}
    for key, b, e in calls:
        if key in col:
            n_calls[col[key]] += 1
            busy_s[col[key]] += (e - b) * 1e-9
    if weights == "power":
        w = design(calls, kk, samples, window_ns + memory_ns, delay_ns, "power")
        w *= np.array([power[twin(names, j)] for j in range(len(kk))])
    else:
        j_solo = np.array([power[t] * busy_s[t] / max(1.0, n_calls[t]) for t in (twin(names, j) for j in range(len(kk)))])
        w = design(calls, kk, samples, window_ns + memory_ns, delay_ns, "energy") * j_solo
    period_s = np.diff(samples[:, 0], prepend=samples[0, 0] - np.median(np.diff(samples[:, 0]))) * 1e-9
    above_j = np.clip(samples[:, 1] - floor, 0, None) * period_s
    total = w.sum(axis=1)
    share = np.divide(w, total[:, None], out=np.zeros_like(w), where=total[:, None] > 0)
    energy = (share * above_j[:, None]).sum(axis=0)
    print(f"{os.path.basename(path)}: floor {floor:.1f} W over {int(solo.sum())} solo readings; solo power above it: "
          + ", ".join(f"{n} {p:.0f} W" for n, p in zip(names, power) if not n.endswith("<1>")))
    return {n: energy[j] / n_calls[j] for j, n in enumerate(names) if n_calls[j] > 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recordings", nargs="+")
    ap.add_argument("--weights", choices=("calls", "power"), default="calls")
    ap.add_argument("--memory-ms", type=float, default=0.0, help="widen the split's window back by this much")
    args = ap.parse_args(argv)
    worst: dict[str, float] = {}
    for path in args.recordings:
        j = split(path, args.weights, int(args.memory_ms * 1e6))
        for n in sorted(j):
            if n.endswith("<1>") and n[:-3] + "<0>" in j:
                a, c = j[n[:-3] + "<0>"], j[n]
                d = c / a - 1
                if abs(d) >= abs(worst.get(n[:-3], 0.0)):
                    worst[n[:-3]] = d
                print(f"  {n[:-3]:<14} alone {a:.4f} J  concurrent {c:.4f} J  {100 * d:+6.1f} %  "
                      f"{'within' if abs(d) <= 0.10 else 'OUT'}")
    print(f"== worst over the runs ({args.weights} weights, memory {args.memory_ms:g} ms): "
          + ", ".join(f"{n} {100 * d:+.1f} %" for n, d in sorted(worst.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
