"""Verification against a second run at different request sizes: the same model code must produce the same op
sequence; a dim labelled NONE/MODEL_CONFIG must keep its value, a NUM_TOKS/NUM_REQS/MIX dim must change, and
labels must agree. Every disagreement is reported (never dropped)."""

from __future__ import annotations

CONFIG_KINDS = {"NONE", "MODEL_CONFIG"}
REQUEST_KINDS = {"NUM_TOKS", "NUM_REQS", "MIX"}
MAX_LISTED = 2000


def counts_differ(run_a: dict, run_b: dict) -> bool:
    """True when run_b has a step of every traced kind of run_a, each with other token and request counts."""
    steps_b = {s["kind"]: s for s in run_b["steps"]}
    for sa in run_a["steps"]:
        sb = steps_b.get(sa["kind"])
        if sb is None or sb["num_tokens"] == sa["num_tokens"] or sb["num_requests"] == sa["num_requests"]:
            return False
    return True


def compare_runs(run_a: dict, run_b: dict, secondary: dict) -> dict:
    disagreements = []
    total = 0
    checked = 0
    unchecked = 0
    steps_b = {s["kind"]: s for s in run_b["steps"]}
    compared_steps = []

    def add(problem, step_kind, op, where, a, b):
        nonlocal total
        total += 1
        if len(disagreements) < MAX_LISTED:
            disagreements.append({"problem": problem, "step_kind": step_kind, "seq": op["seq"], "op": op["op"],
                                  "module": op["module"], "where": where, "a": a, "b": b})

    for sa in run_a["steps"]:
        sb = steps_b.get(sa["kind"])
        if sb is None:
            add("step missing in second run", sa["kind"], {"seq": -1, "op": "", "module": ""}, "", sa["kind"], None)
            continue
        compared_steps.append({"kind": sa["kind"], "a": [sa["num_tokens"], sa["num_requests"]],
                               "b": [sb["num_tokens"], sb["num_requests"]]})
        # A request-side dim can only be required to change when its quantity changed between the runs.
        same = {"NUM_TOKS": sa["num_tokens"] == sb["num_tokens"], "NUM_REQS": sa["num_requests"] == sb["num_requests"]}
        same["MIX"] = same["NUM_TOKS"] and same["NUM_REQS"]
        ops_a, ops_b = sa["ops"], sb["ops"]
        if len(ops_a) != len(ops_b):
            add("op count differs", sa["kind"], {"seq": -1, "op": "", "module": ""}, "", len(ops_a), len(ops_b))
        for oa, ob in zip(ops_a, ops_b):
            if oa["op"] != ob["op"] or oa["module"] != ob["module"]:
                add("op sequences diverge", sa["kind"], oa, "", f"{oa['op']}@{oa['module']}",
                    f"{ob['op']}@{ob['module']}")
                break
            for side in ("inputs", "outputs"):
                ta, tb = oa[side], ob[side]
                if len(ta) != len(tb):
                    add("tensor count differs", sa["kind"], oa, side, len(ta), len(tb))
                    continue
                for i, (xa, xb) in enumerate(zip(ta, tb)):
                    if len(xa["shape"]) != len(xb["shape"]):
                        add("rank differs", sa["kind"], oa, f"{side}[{i}]", len(xa["shape"]), len(xb["shape"]))
                        continue
                    for d, (da, db) in enumerate(zip(xa["shape"], xb["shape"])):
                        checked += 1
                        where = f"{side}[{i}] dim {d}"
                        if da["k"] != db["k"] or da["e"] != db["e"]:
                            add("label differs", sa["kind"], oa, where, _short(da), _short(db))
                        elif da["k"] in CONFIG_KINDS and da["v"] != db["v"]:
                            add(f"{da['k']} dim changed", sa["kind"], oa, where, _short(da), _short(db))
                        elif da["k"] in REQUEST_KINDS and da["v"] == db["v"]:
                            if same[da["k"]]:
                                unchecked += 1  # the step's count was equal in both runs: nothing to learn
                            else:
                                add(f"{da['k']} dim did not change", sa["kind"], oa, where, _short(da), _short(db))
    return {"second_run": {"max_batch_tokens": secondary["max_batch_tokens"],
                           "requests": [list(r) for r in secondary["requests"]]},
            "steps": compared_steps, "checked_dims": checked, "unchecked_request_dims": unchecked,
            "num_disagreements": total,
            "disagreements": disagreements}


def _short(d):
    return f"{d['k']}:{d['e']}={d['v']}"


def unknown_dims(doc: dict) -> int:
    """UNKNOWN dims of a trace document (op inputs, outputs and labelled int scalars of every traced step). Each
    is hashed with its value (fixed work, never swept); `dooly trace --strict` fails on any."""
    n = 0
    for st in doc.get("steps", []):
        for o in st["ops"]:
            for t in o["inputs"] + o["outputs"]:
                n += sum(1 for d in t["shape"] if d["k"] == "UNKNOWN")
            n += sum(1 for sc in o.get("scalars", []) if (sc.get("label") or {}).get("k") == "UNKNOWN")
    return n
