"""The composition check (issue 11, section 3): does the sum of units measured alone give an engine step's GPU time?

For each traced engine step (a trace made on a GPU: every op carries `kernel_us`, the device time of the kernels it
launched inside the real engine, and the step carries the device time of all its kernels), the step's ops are
grouped into identical records (same callable, arguments, shapes, layouts and scalars: the repeated layers collapse
here as they do into signatures), each group is rebuilt at the traced sizes exactly as the profiler rebuilds a unit
(units.OpUnit, make_tensor) and timed the profiler's way (measure.Timer: CUDA-graph replays, inputs cycled past the
L2), and

    predicted = sum over groups of (isolated time per call x calls in the step)
    measured  = the step's kernel time in the engine (ops' kernel_us; the step's total besides)

The gap is split by op name, so a report says what it is made of: kernels that ran longer or shorter alone, the
per-call cost of a graph replay (`isolated_kernel_s`, the kernel time of one isolated call, separates the two),
and ops that did not run alone (their in-engine time is counted as not predicted, never silently dropped).
"""

from __future__ import annotations

import json

import torch

from .measure import Settings, Timer
from .units import OpUnit, describe_error, kernel_events, prepare_inputs


def record_key(op: dict) -> str:
    """Identical work within one step: the callable, the argument structure (labelled ints by value), the tensors
    (shapes by value, dtypes, layouts) and the scalars."""
    tensors = [{"s": [d["v"] for d in t["shape"]], "d": t["dtype"], "st": t.get("strides"), "o": t.get("offset", 0)}
               for t in op["inputs"]]
    return json.dumps([op.get("fn"), op.get("call_args"), tensors,
                       [[s.get("arg"), s.get("type"), s.get("value")] for s in op.get("scalars", [])]],
                      sort_keys=True)


def step_groups(step: dict) -> list[dict]:
    """The step's ops as groups of identical records, in first-seen order: {op (the first), calls, kernel_us}."""
    groups: dict[str, dict] = {}
    for op in step["ops"]:
        g = groups.setdefault(record_key(op), {"op": op, "calls": 0, "kernel_us": 0.0})
        g["calls"] += 1
        g["kernel_us"] += float(op.get("kernel_us", 0.0))
    return list(groups.values())


def check_step(step: dict, device, settings: Settings, only_with_kernels: bool = True, inputs: str = "cycled") -> dict:
    """One step's check: per group the in-engine and the isolated time, and the totals (seconds). `inputs`:
    "cycled" rebuilds every input the profiler's way (copies cycled past the L2); "warm" cycles the weights only and
    keeps the activations in place, as the engine's previous op leaves them (which is closer is what the check
    measures: H200, 2026-12-02, the RMSNorm chain ran 44-51 % longer alone, cycled, than in the engine)."""
    if inputs not in ("cycled", "warm"):
        raise ValueError(f"inputs must be cycled or warm, not {inputs!r}")
    cuda = device.type == "cuda"
    rows = []
    for g in step_groups(step):
        op = g["op"]
        if only_with_kernels and cuda and g["kernel_us"] == 0.0:
            continue  # launched no kernel in the engine (a view, a shape query): nothing to predict
        row = {"op": op["op"], "module": op.get("module", ""), "calls": g["calls"],
               "engine_s": g["kernel_us"] * 1e-6, "isolated_s": None, "isolated_kernel_s": None, "error": None}
        try:
            unit = OpUnit(op, device)
            prepare_inputs(unit, None, inputs, device)
            with torch.no_grad():
                r = Timer(device, settings).run(unit)
                row["isolated_s"] = r["latency_s"]["mean"]
                row["cuda_graph"] = r["extra"]["cuda_graph"]
                if cuda:
                    # one call's kernels alone: the isolated time without graph-replay overhead
                    row["isolated_kernel_s"] = sum(e.time_range.elapsed_us() for e in kernel_events(unit.call)) * 1e-6
            unit.copies = []
        except Exception as e:  # noqa: BLE001 - an op that does not run alone is reported, and the check goes on
            row["error"] = describe_error(e)
        rows.append(row)
    ran = [r for r in rows if r["isolated_s"] is not None]
    out = {
        "step": step["step"], "kind": step["kind"], "inputs": inputs, "num_tokens": step.get("num_tokens"),
        "num_requests": step.get("num_requests"), "groups": len(rows), "ops": sum(r["calls"] for r in rows),
        "step_kernel_s": step.get("kernel_us", 0.0) * 1e-6,
        "engine_s": sum(r["engine_s"] for r in rows),
        "engine_isolated_s": sum(r["engine_s"] for r in ran),
        "not_isolated_s": sum(r["engine_s"] for r in rows if r["isolated_s"] is None),
        "predicted_s": sum(r["isolated_s"] * r["calls"] for r in ran),
        "predicted_kernel_s": (sum(r["isolated_kernel_s"] * r["calls"] for r in ran) if cuda else None),
        "rows": rows,
    }
    out["gap"] = (out["predicted_s"] - out["engine_s"]) / out["engine_s"] if out["engine_s"] > 0 else None
    return out


def by_op(checks: list[dict]) -> list[dict]:
    """What a gap is made of: per op name over the steps, engine vs isolated seconds (largest share first)."""
    agg: dict[str, dict] = {}
    for c in checks:
        for r in c["rows"]:
            a = agg.setdefault(r["op"], {"op": r["op"], "calls": 0, "engine_s": 0.0, "predicted_s": 0.0,
                                         "predicted_kernel_s": 0.0, "not_isolated_calls": 0})
            a["calls"] += r["calls"]
            a["engine_s"] += r["engine_s"]
            if r["isolated_s"] is None:
                a["not_isolated_calls"] += r["calls"]
                continue
            a["predicted_s"] += r["isolated_s"] * r["calls"]
            a["predicted_kernel_s"] += (r["isolated_kernel_s"] or 0.0) * r["calls"]
    return sorted(agg.values(), key=lambda a: -a["engine_s"])
