#!/usr/bin/env python3
"""What one model alone needs measured, given every other model the store holds: the signatures of its traces that
no other model's traces hold, and their points under a measurement context (count and the sum of `point_s`, the
worker's time per point: inputs, warm-up, graph capture, settle, timed window; a run's start-up is not in it). For
a held-out model profiled after the corpus, this is its new profiling once the corpus is complete (issue 11: a 14th
model of a covered family in <= 1 H200-minute).

  python3 scripts/analysis/model_own_points.py --db data/profile/h200.sqlite --model qwen3-1.7b --context 8
"""

import argparse
import json
import sqlite3
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--model", required=True, help="the model's name in the store (its `models` rows)")
    ap.add_argument("--context", type=int, required=True, help="the measurement context (provenance id)")
    a = ap.parse_args()
    db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    ids = [r[0] for r in db.execute("SELECT id FROM models WHERE name = ?", (a.model,))]
    if not ids:
        known = ", ".join(sorted({r[0] for r in db.execute("SELECT name FROM models")}))
        sys.exit(f"model_own_points: the store has no model '{a.model}' (it has: {known})")
    marks = ",".join("?" * len(ids))
    own = {r[0] for r in db.execute(f"SELECT DISTINCT signature_id FROM model_signatures WHERE model_id IN ({marks})",
                                    ids)}
    others = {r[0] for r in db.execute(
        f"SELECT DISTINCT signature_id FROM model_signatures WHERE model_id NOT IN ({marks})", ids)}
    alone = sorted(own - others)
    points, seconds, missing, modules = 0, 0.0, 0, 0
    for sid in alone:
        kind = db.execute("SELECT kind FROM signatures WHERE id = ?", (sid,)).fetchone()[0]
        rows = db.execute("SELECT extra_json FROM measurements WHERE signature_id = ? AND provenance_id = ? AND "
                          "status = 'ok'", (sid, a.context)).fetchall()
        if not rows:  # a module whose ops are the units has no point of its own
            modules += kind == "module"
            missing += kind != "module"
        for (extra,) in rows:
            points += 1
            seconds += json.loads(extra).get("point_s", 0.0)
    print(f"{a.model}: {len(own)} signatures, {len(own) - len(alone)} held by other models too, {len(alone)} its own "
          f"({modules} of them modules measured through their ops); under context {a.context}: {points} points, "
          f"{seconds:.1f} s of point time ({seconds / 60:.3f} min)"
          + (f"; {missing} of its own op signatures have no point yet" if missing else ""))


if __name__ == "__main__":
    main()
