"""An offline stand-in for a MoE grouped GEMM's forced-routing points (docs/profile.md, "MoE routing"), made from its
uniform ones, to estimate what `--moe-routing random` does before the forced points are measured on a GPU.

A uniform point at T tokens spreads 8T rows over min(8T, 64) of OLMoE's experts (top-8 of 64), one row each up to 8
tokens: it reads as many experts' weights as a point forced onto k = 8T experts. Assumption: at decode sizes the
grouped GEMM is bound by the weights it reads, so its cost depends on the experts read, not the rows. The proxy
point "forced onto k experts at T_g tokens" is the uniform point at k / top_k tokens, for T_g in 16 and 64 (the
replays' padded size; larger T_g carry more rows per expert, where the assumption weakens). Writes a copy of the
store with those points (extra_json {"proxy": ...}); never the shipped store itself.

  python3 scripts/analysis/moe_routing_proxy.py data/profile/h200.sqlite /tmp/proxy.sqlite --model olmoe-1b-7b-0924
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys


def grouped_gemms(db, model: str, provenance: int) -> list[tuple[int, int, int]]:
    """(signature id, rows per token, experts) of the model's grouped GEMMs measured under the provenance."""
    out = []
    for sid, canonical in db.execute(
            "SELECT DISTINCT s.id, s.canonical_json FROM signatures s JOIN model_signatures ms ON ms.signature_id = s.id "
            "JOIN models m ON m.id = ms.model_id WHERE m.name = ? AND s.name IN ('_grouped_mm', 'grouped_mm')", (model,)):
        c = json.loads(canonical)
        rows, experts = c["inputs"][0]["shape"][0].split(":")[-1], c["inputs"][2]["shape"][0]
        if not rows.endswith("*NUM_TOKS") or not experts.isdigit():
            continue
        if db.execute("SELECT 1 FROM measurements WHERE signature_id = ? AND provenance_id = ? AND status = 'ok'",
                      (sid, provenance)).fetchone():
            out.append((sid, int(rows.split("*")[0]), int(experts)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("out")
    ap.add_argument("--model", default="olmoe-1b-7b-0924")
    ap.add_argument("--provenance", type=int, default=8)
    args = ap.parse_args(argv)
    if os.path.abspath(args.out) == os.path.abspath(args.store):
        print("moe_routing_proxy: write to a copy (the proxy points are not measurements)", file=sys.stderr)
        return 2
    shutil.copyfile(args.store, args.out)
    db = sqlite3.connect(args.out)
    cols = [c[1] for c in db.execute("PRAGMA table_info(measurements)")]
    added = 0
    for sid, top_k, experts in grouped_gemms(db, args.model, args.provenance):
        uniform = {}
        for row in db.execute("SELECT * FROM measurements WHERE signature_id = ? AND provenance_id = ? AND status = 'ok' "
                              "ORDER BY id", (sid, args.provenance)):
            r = dict(zip(cols, row))
            key = json.loads(r["point_key"])
            if list(key) == ["NUM_TOKS"]:
                uniform[key["NUM_TOKS"]] = r  # the newest row of each point
        for t_g in (16, 64):
            for tokens, r in sorted(uniform.items()):
                k = top_k * tokens
                if k >= min(top_k * t_g, experts):
                    continue
                p = {c: v for c, v in r.items() if c != "id"}
                p.update(point_key=json.dumps({"MOE_EXPERTS": k, "MOE_SKEW": 0, "NUM_TOKS": t_g}, separators=(",", ":")),
                         num_tokens=t_g, extra_json=json.dumps({"proxy": f"uniform point at {tokens} tokens"}))
                db.execute(f"INSERT INTO measurements ({','.join(p)}) VALUES ({','.join('?' * len(p))})", list(p.values()))
                added += 1
        print(f"signature {sid}: top-{top_k} of {experts} experts; proxy points from the uniform ones at "
              f"{', '.join(str(t) for t in sorted(uniform) if top_k * t < experts)} tokens")
    db.commit()
    print(f"{args.out}: {added} proxy routing points")
    return 0 if added else 1


if __name__ == "__main__":
    sys.exit(main())
