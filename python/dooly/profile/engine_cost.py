"""The engine's own cost per step (issue 11, section 3): what HF continuous batching spends besides the model's GPU
work, as a function of the step's composition, with CUDA graphs on and off. Part 3's simulator predicts a step as
device work (the units) plus this.

The real engine (dooly.engines.hf.HFEngine: the model's own classes, random weights, the engine's own loop,
scheduler, cache and sampling) serves workloads chosen to produce the step kinds serving produces: prefill chunks
of one request, decode batches of 1..B requests, and the mixed steps of requests arriving together. Every step's
wall time is split into the engine's phases (HFEngine.run(timed=True); docs/engine-hf.md, "Host cost per step").
Per (step kind, CUDA-graph mode) a least-squares line host_s = a + b * requests + c * tokens is fitted to the host
part (step_s less the device's share: on CUDA, what the device span exceeds of the host's own launch time is
waiting; on a CPU the forward is host work and is reported apart as launch_s).

  python -m dooly.profile.engine_cost --model llama-3.1-8b --device cuda --graphs off,on --out cost.json [--db S]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# (name, requests): prefill chunks of one request, decode batches (each request prefilled, then decoding), the
# tracer's mixed set. Output lengths make the decode steps: a batch of B requests of 16 new tokens gives 15 decode
# steps of B requests at growing context.
DEFAULT_WORKLOADS = {
    "prefill": [[(n, 1)] for n in (16, 64, 256, 512)],
    "decode": [[(64, 16)] * b for b in (1, 2, 4, 8, 16, 32)],
    "mixed": [[(300, 3), (150, 3), (200, 3)], [(40, 12)] * 6 + [(400, 2)]],
}
TINY_WORKLOADS = {  # CPU tests: the same kinds in seconds
    "prefill": [[(n, 1)] for n in (16, 64)],
    "decode": [[(16, 4)] * b for b in (1, 4)],
    "mixed": [[(300, 3), (150, 3), (200, 3)]],
}


def host_s(t: dict) -> float:
    """The step's host time: its wall time less what it spent waiting for the device (sync_s beyond the copy). The
    wall time is the untimed pass's where there is one (`untimed_step_s`: measured as `dooly live` measures a serving
    step), the timed pass's otherwise; the wait is the timed pass's."""
    wall = t.get("untimed_step_s", t["step_s"])
    if "device_s" in t:
        wait = max(0.0, t["device_s"] - t["launch_s"])
        return max(0.0, wall - min(wait, t["sync_s"]))
    return wall


# The composition variables a step kind's host cost can depend on: a prefill chunk of one request varies in tokens
# only, a decode batch has as many tokens as requests, a mixed step varies in both.
FIT_VARIABLES = {"prefill": ("num_tokens",), "decode": ("num_requests",), "mixed": ("num_requests", "num_tokens")}


def fit_line(rows: list[dict], variables: tuple[str, ...], key=host_s) -> dict | None:
    """Least squares key(times) = a + sum(coef_v * v) over the rows; None with fewer rows than 2 + variables."""
    if len(rows) < len(variables) + 2:
        return None
    import numpy as np

    x = np.array([[1.0] + [float(r[v]) for v in variables] for r in rows])
    y = np.array([key(r["times"]) for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    pred = x @ coef
    rel = [abs(p - v) / v for p, v in zip(pred, y) if v > 0]
    return {"a_s": float(coef[0]), **{f"per_{v.removeprefix('num_')}_s": float(c) for v, c in zip(variables, coef[1:])},
            "rows": len(rows), "mape": statistics.fmean(rel) if rel else None,
            "max_rel_error": max(rel) if rel else None}


# Where the engine's loop runs while it is timed. "engine-thread": a thread of its own, as the manager serves
# (manager.start); "caller": the measuring thread. Stored in the engine signature's attributes; the simulator prefers
# engine-thread measurements (an eager step is ~2.6x slower there on the H200: HFEngine.run's docstring).
LOOP = "engine-thread"


def measure(config_path: str, attention: str, device: str, graphs: bool, workloads: dict, dtype=None,
            repeat: int = 1, max_batch_tokens: int = 521, num_blocks: int | None = None,
            loop: str = LOOP) -> list[dict]:
    """Every step of every workload, after a warm-up run of each (caches, allocator, graph captures). The warm-up's
    steps that captured a CUDA graph (two Python forwards: warm-up + capture) are kept too, flagged `capture`
    (`repeat` -1): what the first step at a new padded shape costs, which the simulator prices as its `capture` path;
    they stay out of the fits and the store (summarize, commit)."""
    from ..engines.hf import HFEngine

    rows = []
    with HFEngine(config_path, attention=attention, device=device, dtype=dtype, cuda_graphs=graphs,
                  max_batch_tokens=max_batch_tokens, num_blocks=num_blocks) as eng:
        info = eng.engine_info()
        engine = {"attention": info["attention"], "dtype": info["dtype"], "block_size": info["block_size"],
                  "max_batch_tokens": eng.limits()["max_batch_tokens"], "cuda_graphs": list(info["cuda_graphs"]),
                  "loop": loop}
        in_thread = loop == "engine-thread"
        for kind, sets in workloads.items():
            for requests in sets:
                warm = eng.run(requests, timed=True, engine_thread=in_thread)  # warm-up: caches, graph captures
                rows += [step_row(kind, -1, s, info, engine, capture=True) for s in warm
                         if s.times.get("forwards") == 2]
                for rep in range(repeat):
                    walls = untimed_walls(eng, requests, in_thread)
                    steps = eng.run(requests, timed=True, engine_thread=in_thread)
                    if walls and [c for _, c in walls] == [(s.kind, s.num_tokens, s.num_requests) for s in steps]:
                        for s, (w, _) in zip(steps, walls):
                            s.times["untimed_step_s"] = w
                    rows += [step_row(kind, rep, s, info, engine) for s in steps]
    return rows


def step_row(workload: str, repeat: int, s, info: dict, engine: dict, capture: bool = False) -> dict:
    row = {"workload": workload, "repeat": repeat, "step": s.step, "kind": s.kind, "num_tokens": s.num_tokens,
           "num_requests": s.num_requests, "num_prefill_tokens": s.num_prefill_tokens,
           "num_decode_requests": s.num_decode_requests, "cuda_graphs": list(info["cuda_graphs"]), "engine": engine,
           "times": s.times}
    if capture:
        row["capture"] = True
    return row


COMPOSITION = ("num_tokens", "num_requests", "num_prefill_tokens", "num_decode_requests")


def untimed_walls(eng, requests, in_thread: bool) -> list[tuple[float, tuple]] | None:
    """The requests served once more with no phase timer: each step's wall time (prepare_next_batch's start to
    update_batch's end, as dooly live records a serving step) and its (kind, tokens, requests); the timed pass keeps
    the phase split and the device's wait. On the H200 the two passes agree within the host's noise (docs/engine-hf.md,
    "Which thread the loop runs in matters")."""
    from ..live.step_recorder import StepRecorder

    rec = StepRecorder(eng._manager.batch_processor, None)
    with rec:
        eng.run(requests, engine_thread=in_thread)
    if rec.error is not None:
        return None
    return [(s["end"] - s["start"], (s["kind"], s["num_tokens"], s["num_requests"])) for s in rec.steps]


def commit(db: str, rows: list[dict], model: str, config_path: str, device: str) -> int:
    """Stores the steps as measurements of the engine's own signature (kind 'engine', one per model and engine
    configuration; dooly::plan::upsert_engine_signature) under this machine's measurement context: one row per step
    composition, its statistics over the steps of that composition (host time, as host_s). Returns the rows."""
    import collections
    import hashlib

    import torch

    import dooly_core

    from .context import machine_context

    store = dooly_core.ProfileStore(db)
    ctx = store.measurement_context(json.dumps(machine_context(torch.device(device))))
    with open(config_path, "rb") as f:
        config_hash = hashlib.sha256(f.read()).hexdigest()
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        if r.get("capture"):
            continue  # the first step at a shape: measured (summarize), not yet a signature of its own
        groups[(json.dumps(r["engine"], sort_keys=True), tuple(r[k] for k in COMPOSITION))].append(r)
    hashes: dict[str, str] = {}
    for (engine, comp), sel in sorted(groups.items()):
        if engine not in hashes:
            hashes[engine] = store.engine_signature(json.dumps(
                {"name": "hf-continuous-batching", "model": model, "config_hash": config_hash, **json.loads(engine)}))
        toks, reqs, prefill, decodes = comp
        key = json.dumps({"DECODE_REQS": decodes, "NUM_REQS": reqs, "NUM_TOKS": toks, "PREFILL_TOKS": prefill},
                         sort_keys=True, separators=(",", ":"))
        hs = [host_s(r["times"]) for r in sel]
        phases = {k: statistics.median(r["times"][k] for r in sel) for k in
                  ("step_s", "prepare_s", "schedule_s", "kwargs_s", "launch_s", "sync_s", "update_s")}
        dev = [r["times"]["device_s"] for r in sel if "device_s" in r["times"]]
        store.commit_point(json.dumps({
            "signature": hashes[engine], "provenance_id": ctx, "status": "ok", "repetitions": len(hs),
            "point": {"key": key, "num_tokens": toks, "num_requests": reqs, "prefill_tokens": prefill,
                      "decode_requests": decodes, "kv_tokens": 0},
            "latency_s": {"mean": statistics.fmean(hs), "median": statistics.median(hs), "min": min(hs),
                          "max": max(hs), "std": statistics.stdev(hs) if len(hs) > 1 else 0.0},
            "extra": {"measures": "host_s: the step's wall time (untimed pass) less its wait for the device "
                                  "(engine_cost.py)",
                      "kind": sel[0]["kind"], "phases_median_s": phases,
                      "device_s_median": statistics.median(dev) if dev else None}}))
    return len(groups)


def summarize(rows: list[dict]) -> list[dict]:
    """Per CUDA-graph mode and step kind: the phases' medians and the host fit; then, where the warm-up captured,
    one `capture` row (every kind's captures together; no fit)."""
    out = []
    for graphs in sorted({tuple(r["cuda_graphs"]) for r in rows}):
        for kind in ("prefill", "decode", "mixed", "capture"):
            sel = [r for r in rows
                   if tuple(r["cuda_graphs"]) == graphs and ("capture" if r.get("capture") else r["kind"]) == kind]
            if not sel:
                continue
            med = {k: statistics.median(r["times"][k] for r in sel)
                   for k in ("step_s", "prepare_s", "schedule_s", "kwargs_s", "launch_s", "sync_s", "update_s")}
            dev = [r["times"]["device_s"] for r in sel if "device_s" in r["times"]]
            out.append({"cuda_graphs": list(graphs), "kind": kind, "steps": len(sel), "median": med,
                        "median_device_s": statistics.median(dev) if dev else None,
                        "median_host_s": statistics.median(host_s(r["times"]) for r in sel),
                        "fit_host": fit_line(sel, FIT_VARIABLES[kind]) if kind in FIT_VARIABLES else None})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dooly.profile.engine_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a shipped model name or a config.json")
    ap.add_argument("--attention", default="paged|sdpa")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--graphs", default="off", help="off, on, or off,on: CUDA-graph modes to measure")
    ap.add_argument("--tiny", action="store_true", help="the model's tiny config and tiny workloads (CPU tests)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--max-batch-tokens", type=int, default=521, help="the engine's token budget per step")
    ap.add_argument("--num-blocks", type=int, default=0, help="KV cache blocks (0: the engine's own sizing)")
    ap.add_argument("--loop", choices=("engine-thread", "caller"), default=LOOP,
                    help="where the engine's loop runs while timed: its own thread, as when serving (default), or "
                         "the caller's (how versions before 2026-12-04 measured)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--db", default="", help="also store the steps as the engine's signatures (kind 'engine') here")
    args = ap.parse_args(argv)
    from ..cli_trace import _config_path

    modes = []
    for m in args.graphs.split(","):
        if m not in ("off", "on"):
            print(f"engine_cost: --graphs takes off, on or off,on, not '{m}'", file=sys.stderr)
            return 2
        modes.append(m == "on")
    try:
        config = str(_config_path(args.model, args.tiny))
    except Exception as e:  # noqa: BLE001 - an unknown model is one line naming it and the known ones
        print(f"engine_cost: {e}", file=sys.stderr)
        return 2
    workloads = TINY_WORKLOADS if args.tiny else DEFAULT_WORKLOADS
    t0 = time.perf_counter()
    rows = []
    for g in modes:
        rows += measure(config, args.attention, args.device, g, workloads, repeat=args.repeat,
                        max_batch_tokens=args.max_batch_tokens, num_blocks=args.num_blocks or None, loop=args.loop)
    summary = summarize(rows)
    if args.db:
        n = commit(args.db, rows, args.model, config, args.device)
        print(f"engine_cost: {n} step compositions stored in {args.db}")
    with open(args.out, "w") as f:
        json.dump({"version": 1, "model": args.model, "attention": args.attention, "device": args.device,
                   "seconds": time.perf_counter() - t0, "summary": summary, "steps": rows}, f, indent=1)
    for s in summary:
        fit = s["fit_host"]
        line = (f"graphs {'on ' if any(s['cuda_graphs']) else 'off'} {s['kind']:<8} steps {s['steps']:>4}  "
                f"step {s['median']['step_s'] * 1e3:8.3f} ms  host {s['median_host_s'] * 1e3:8.3f} ms  "
                f"(prepare {s['median']['prepare_s'] * 1e3:.3f}, launch {s['median']['launch_s'] * 1e3:.3f}, "
                f"sync {s['median']['sync_s'] * 1e3:.3f}, update {s['median']['update_s'] * 1e3:.3f})")
        if s["median_device_s"] is not None:
            line += f"  device span {s['median_device_s'] * 1e3:.3f} ms"
        if fit:
            terms = "".join(f" + {fit[k] * 1e6:.2f} us/{k[4:-2]}" for k in fit if k.startswith("per_"))
            line += f"  fit: {fit['a_s'] * 1e3:.3f} ms{terms} (MAPE {100 * (fit['mape'] or 0):.1f} %)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
