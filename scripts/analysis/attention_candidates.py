#!/usr/bin/env python3
"""Would another model family predict the two-quantity attention surfaces better (issue 12 §1)? Offline, over a
store: every signature swept over NUM_TOKS and a KV quantity with at least 8 points, 3 of them off the prefill
diagonal (KV != T), is cross-validated as `dooly predict fit` does (5 folds from a fixed shuffle, held-out points
inside their fold's training range only) with four families, and the pooled held-out MAPE printed:
  ls_product  least squares on 1, T, KV, T*KV minimising relative error (the C++ candidate, without its
              non-negativity)
  rows        per measured T row, log-log linear in KV; between rows linear in log T; outside, the pooled log-log
              slopes (what a tensor-grid scheme would do with the grid's rows)
  nn          the nearest point in log space
  loglin2     log latency quadratic in log T and log KV
  waves       least squares on 1, KV, T, waves and waves*KV, waves = ceil(H * ceil(T / 64) / 132): flash kernels
              run one CTA per head and 64-query tile, each walking the keys, on 132 SMs (H from the signature's
              query shape)
  min-per-sig the best of the families per signature (an oracle: an upper bound on what choosing among them can give)

  .venv/bin/python scripts/analysis/attention_candidates.py --db data/profile/h200.sqlite [--provenance 8]
"""
import argparse
import collections
import json
import random
import sqlite3

import numpy as np


def heads_of(c):
    """Each signature's query heads: dim 1 of its first input when that is a number (SDPA's [1, H, T, D]), else 1."""
    out = {}
    for sid, cj in c.execute("SELECT id, canonical_json FROM signatures"):
        try:
            out[sid] = int(json.loads(cj)["inputs"][0]["shape"][1])
        except (KeyError, IndexError, ValueError, TypeError):
            out[sid] = 1
    return out


HEADS = {}


def load(db, provenance):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    HEADS.update(heads_of(c))
    data = collections.defaultdict(dict)
    for sid, key, lat in c.execute(
            "SELECT signature_id, point_key, latency_mean_s FROM measurements WHERE provenance_id = ? AND "
            "status = 'ok' AND point_key LIKE '%KV_TOKS%NUM_TOKS%' ORDER BY id", (provenance,)):
        k = json.loads(key)
        kv = [v for name, v in k.items() if name.startswith("KV_TOKS")]
        if len(k) == 2 and kv and lat > 0:
            data[sid][(k["NUM_TOKS"], kv[0])] = lat  # the newest row of a key
    return {s: d for s, d in data.items() if len(d) >= 8 and sum(kv != t for t, kv in d) >= 3}


def folds(n, k=5, seed=1):
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return [idx[i::k] for i in range(k)]


def fit_ls_product(p, y):
    t, kv = p[:, 0], p[:, 1]
    x = np.stack([np.ones_like(t), t, kv, t * kv], 1) / y[:, None]
    coef, *_ = np.linalg.lstsq(x, np.ones_like(y), rcond=None)
    return lambda q: coef @ np.array([1, q[0], q[1], q[0] * q[1]])


def fit_rows(p, y):
    lt, lk, ly = np.log(p[:, 0]), np.log(p[:, 1]), np.log(y)
    g, *_ = np.linalg.lstsq(np.stack([np.ones_like(lt), lt, lk], 1), ly, rcond=None)
    rows = collections.defaultdict(list)
    for a, b, v in zip(lt, lk, ly):
        rows[a].append((b, v))
    keys = sorted(rows)

    def in_row(r, b):
        xs, vs = zip(*sorted(rows[r]))
        if b <= xs[0]:
            return vs[0] + g[2] * (b - xs[0])
        if b >= xs[-1]:
            return vs[-1] + g[2] * (b - xs[-1])
        return float(np.interp(b, xs, vs))

    def f(q):
        a, b = np.log(q[0]), np.log(q[1])
        if a <= keys[0]:
            return np.exp(in_row(keys[0], b) + g[1] * (a - keys[0]))
        if a >= keys[-1]:
            return np.exp(in_row(keys[-1], b) + g[1] * (a - keys[-1]))
        j = int(np.searchsorted(keys, a))
        r0, r1 = keys[j - 1], keys[j]
        w = (a - r0) / (r1 - r0)
        return np.exp((1 - w) * in_row(r0, b) + w * in_row(r1, b))
    return f


def fit_nn(p, y):
    lp = np.log(p)
    return lambda q: y[np.argmin(((lp - np.log(q)) ** 2).sum(1))]


def fit_loglin2(p, y):
    def feats(t, kv):
        lt, lk = np.log(t), np.log(kv)
        return np.stack([np.ones_like(lt), lt, lk, lt * lk, lk * lk, lt * lt], -1)
    g, *_ = np.linalg.lstsq(feats(p[:, 0], p[:, 1]), np.log(y), rcond=None)
    return lambda q: float(np.exp(feats(np.float64(q[0]), np.float64(q[1])) @ g))


def fit_waves(p, y, heads=1, tile=64, sms=132):
    def feats(t, kv):
        w = np.ceil(heads * np.ceil(t / tile) / sms)
        return np.stack([np.ones_like(t), kv, t, w, w * kv], -1)
    x = feats(p[:, 0], p[:, 1]) / y[:, None]
    coef, *_ = np.linalg.lstsq(x, np.ones_like(y), rcond=None)
    return lambda q: float(feats(np.float64(q[0]), np.float64(q[1])) @ coef)


FAMILIES = {"ls_product": fit_ls_product, "rows": fit_rows, "nn": fit_nn, "loglin2": fit_loglin2, "waves": fit_waves}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--provenance", type=int, default=8)
    a = ap.parse_args()
    sigs = load(a.db, a.provenance)
    pooled = collections.defaultdict(list)
    for sid, d in sigs.items():
        p, y = np.array(list(d), float), np.array(list(d.values()))
        errors = {}
        for name, fit0 in FAMILIES.items():
            fit = (lambda pp, yy, h=HEADS.get(sid, 1): fit_waves(pp, yy, h)) if name == "waves" else fit0
            e = []
            for test in folds(len(y)):
                train = [i for i in range(len(y)) if i not in test]
                lo, hi = p[train].min(0), p[train].max(0)
                f = fit(p[train], y[train])
                e += [abs(f(p[i]) - y[i]) / y[i] for i in test if (p[i] >= lo).all() and (p[i] <= hi).all()]
            errors[name] = e
            pooled[name] += e
        best = min(errors, key=lambda n: np.mean(errors[n]) if errors[n] else np.inf)
        pooled["min-per-sig"] += errors[best]
    print(f"{len(sigs)} signatures over T and KV (provenance {a.provenance}); held-out interior points, pooled")
    for name, e in pooled.items():
        print(f"{name:12} MAPE {100 * np.mean(e):6.2f} %  median {100 * np.median(e):5.2f} %  points {len(e)}")


if __name__ == "__main__":
    main()
