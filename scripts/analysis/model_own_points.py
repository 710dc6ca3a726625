#!/usr/bin/env python3
"""What one model alone needs measured, given every other model the store holds: the signatures of its traces that
no other model's traces hold, and their points under a measurement context (count and the sum of `point_s`, the
worker's time per point: inputs, warm-up, graph capture, settle, timed window; a run's start-up is not in it). For
a held-out model profiled after the corpus, this is its new profiling once the corpus is complete (issue 11: a 14th
model of a covered family in <= 1 H200-minute). It also gives the point time without the settle periods of each
unit's later long points, which the settle carried over between a unit's points (settle_carry_gap_s) does not
replay: an estimate from the recorded settle times.

  python3 scripts/analysis/model_own_points.py --db data/profile/h200.sqlite --model qwen3-1.7b --context 8
"""

import argparse
import json
import os
import sqlite3
import sys

from naive_vs_aware import later_settles_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--model", required=True, help="the model's name in the store (its `models` rows)")
    ap.add_argument("--context", type=int, required=True, help="the measurement context (provenance id)")
    a = ap.parse_args()
    if not os.path.isfile(a.db):
        sys.exit(f"model_own_points: no store at {a.db}")
    db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    ids = [r[0] for r in db.execute("SELECT id FROM models WHERE name = ?", (a.model,))]
    if not ids:
        known = ", ".join(sorted({r[0] for r in db.execute("SELECT name FROM models")}))
        sys.exit(f"model_own_points: the store has no model '{a.model}' (it has: {known})")
    marks = ",".join("?" * len(ids))
    (own,) = db.execute(f"SELECT COUNT(DISTINCT signature_id) FROM model_signatures WHERE model_id IN ({marks})",
                        ids).fetchone()
    # Its own signatures (no other model's traces hold them), each with its points under the context, if any.
    rows = db.execute(
        f"SELECT s.id, s.kind, m.extra_json FROM signatures s "
        f"LEFT JOIN measurements m ON m.signature_id = s.id AND m.provenance_id = ? AND m.status = 'ok' "
        f"WHERE s.id IN (SELECT signature_id FROM model_signatures WHERE model_id IN ({marks})) "
        f"AND s.id NOT IN (SELECT signature_id FROM model_signatures WHERE model_id NOT IN ({marks})) "
        f"ORDER BY m.id", [a.context, *ids, *ids]).fetchall()
    alone = {sid for sid, _, _ in rows}
    unmeasured = {(sid, kind) for sid, kind, extra in rows if extra is None}
    modules = sum(kind == "module" for _, kind in unmeasured)  # a module whose ops are the units has no point
    missing = len(unmeasured) - modules
    points = sum(extra is not None for _, _, extra in rows)
    measured = [(sid, json.loads(extra)) for sid, _, extra in rows if extra is not None]
    seconds = sum(extra.get("point_s", 0.0) for _, extra in measured)
    carried = seconds - sum(later_settles_s(measured).values())
    print(f"{a.model}: {own} signatures, {own - len(alone)} held by other models too, {len(alone)} its own "
          f"({modules} of them modules measured through their ops); under context {a.context}: {points} points, "
          f"{seconds:.1f} s of point time ({seconds / 60:.3f} min; {carried:.1f} s with the settle carried over)"
          + (f"; {missing} of its own op signatures have no point yet" if missing else ""))

if __name__ == "__main__":
    main()
