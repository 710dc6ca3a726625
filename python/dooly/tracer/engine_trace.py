"""Tracing one engine run: taint sources installed, the selected steps' forwards captured, labels propagated
through the C++ rules, and the trace document assembled (format version 2, docs/dooly-tracing.md)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import torch

from . import tint
from .kernels import KernelCollector
from .recorder import Recorder, TaintMode, install_module_hooks
from .sources import ConfigTaint, LimitTaint, ModuleTaint, StepInputs

# Keep equal to dooly::trace::kTraceFormatVersion (src/dooly/trace/trace.hpp); bump both when what is hashed
# changes. 2: scaled_dot_product_attention carries the `@sdpa_kernels` pseudo-argument. 3: non-contiguous tensors
# record their strides and offset (recorder.tensor_layout), which their signatures hash.
TRACE_FORMAT_VERSION = 3

# Default request sets (prompt_len, max_new_tokens). With max_batch_tokens=521 the first set gives a
# prefill-heavy first step (300 + 150 + 71 of 200 = 521 tokens, 3 requests) and a mixed second step (2 decodes +
# the remaining 129 prompt tokens = 131 tokens, 3 requests). The verification run uses max_batch_tokens=389 and
# four requests: 60 + 50 + 40 + 239 of 500 = 389 tokens over 4 requests, then 3 decodes + the remaining 261 = 264
# tokens over 4 requests. Every token and request count differs between the two runs, so each NUM_* dim must
# change. If the engine schedules differently (a kind missing, or a count equal to the first run's), the
# alternatives are tried in order.
PRIMARY = {"max_batch_tokens": 521, "requests": [(300, 3), (150, 3), (200, 3)]}
SECONDARY = {"max_batch_tokens": 389, "requests": [(60, 3), (50, 3), (40, 3), (500, 3)]}
SECONDARY_ALTERNATIVES = (
    {"max_batch_tokens": 389, "requests": [(150, 3), (100, 3), (90, 3), (80, 3)]},
    {"max_batch_tokens": 457, "requests": [(40, 3), (30, 3), (20, 3), (10, 3), (900, 3)]},
)
TRACED_KINDS = ("prefill", "mixed")


def _import_core():
    try:
        import dooly_core
    except ImportError as e:
        raise ImportError("the compiled core `dooly_core` is not importable. Build it (scripts/build.sh default "
                          "dooly_core) and put build/default/python on PYTHONPATH.") from e
    return dooly_core


def config_hash(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _module_table(model: torch.nn.Module):
    table = []
    for path, m in model.named_modules():
        attrs = {}
        for k, v in vars(m).items():
            if k.startswith("_"):
                continue
            if isinstance(v, bool) or v is None:
                attrs[k] = v
            elif isinstance(v, int):
                attrs[k] = int(v)
            elif isinstance(v, float):
                attrs[k] = v if v == v and abs(v) != float("inf") else repr(v)
            elif isinstance(v, str):
                attrs[k] = v
        table.append({"path": path, "class": type(m).__name__, "attrs": attrs})
    return table


def trace_run(engine, requests, kinds=TRACED_KINDS, kernels: bool = False, log=print) -> dict:
    """Runs `requests` through `engine` and traces the first step of each kind in `kinds`. Returns the partial
    document (steps, module table, counters, notes)."""
    core = _import_core()
    session = core.Session()
    recorder = Recorder(session)
    notes: list[str] = []
    recorder.notes = notes
    model = engine.model
    cfg = ConfigTaint(session, engine.config, engine.config_int_attributes())
    modules = ModuleTaint(session, model, cfg)
    limits = LimitTaint(session, engine.limits())
    collector = KernelCollector(kernels)
    if collector.enabled:
        recorder.on_op = collector.op_context
    hooks = install_module_hooks(model, recorder)
    # The root's kwargs are labelled in a pre-hook that may replace ints by TInts.
    # The engine calls the model (and so its pre-hooks) before it hands the step to on_forward, so inputs are
    # labelled on every forward, by role; on_forward then decides whether the step is recorded.
    state = {"inputs": None, "root_args": ((), {})}

    def label_inputs(mod, args, kwargs):
        limits.label_cache(kwargs.get("cache"), modules)
        inputs = StepInputs(session, notes, engine.config)
        labelled = inputs.label(kwargs)
        state["inputs"] = inputs
        state["root_args"] = (args, labelled)
        return args, labelled

    root_hook = model.register_forward_pre_hook(label_inputs, with_kwargs=True, prepend=True)
    steps, wanted = [], list(kinds)

    def on_forward(info, call):
        if info.kind not in wanted:
            return call()
        wanted.remove(info.kind)
        inputs = state["inputs"]
        if inputs is None or (inputs.num_tokens, inputs.num_requests) != (info.num_tokens, info.num_requests):
            seen = None if inputs is None else (inputs.num_tokens, inputs.num_requests)
            notes.append(f"step {info.step}: the scheduler reported {info.num_tokens} tokens / {info.num_requests} "
                         f"requests but the forward inputs hold {seen}")
        recorder.reset()
        recorder.recording = True
        recorder.enter_module("", model, *state["root_args"])  # the root's own hooks ran before on_forward
        tint.set_session(session)
        try:
            with collector.step(), TaintMode(recorder):
                out = call()
        finally:
            tint.set_session(None)
            recorder.exit_module("")
            recorder.recording = False
        by_seq = collector.kernels_by_seq()
        for op in recorder.ops:
            op["kernels"], us = by_seq.get(op["seq"], ([], 0.0))
            if us:
                op["kernel_us"] = round(us, 3)  # in-engine device time of its kernels (metadata, not hashed)
        steps.append({
            "step": info.step, "kind": info.kind, "num_tokens": info.num_tokens, "num_requests": info.num_requests,
            "num_prefill_tokens": info.num_prefill_tokens, "num_decode_requests": info.num_decode_requests,
            "max_kv_read": getattr(info, "max_kv_read", 0),
            **({"kernel_us": round(collector.step_kernel_us, 3)} if collector.step_kernel_us else {}),
            "calls": recorder.calls, "ops": recorder.ops, "queries": recorder.queries,
        })
        return out

    try:
        all_steps = engine.run(requests, on_forward=on_forward)
    finally:
        root_hook.remove()
        for h in hooks:
            h.remove()
        modules.restore()
        cfg.restore()
    for k in wanted:
        notes.append(f"no '{k}' step happened with requests {requests}; it is not traced")
    counters = session.counters()
    return {"steps": steps, "modules": _module_table(model), "counters": counters, "notes": notes,
            "step_kinds": [s.kind for s in all_steps], "limits": engine.limits()}


def trace_model(config_path: str, attention: str, device: str = "cpu", dtype=None, model_name: str | None = None,
                verify: bool = True, kernels: bool | None = None, primary=PRIMARY, secondary=SECONDARY,
                engine_factory=None, log=print, engine_kwargs: dict | None = None) -> dict:
    """The whole trace document of one model under one attention backend. engine_kwargs go to every engine the
    trace builds (e.g. num_blocks, to bound the KV cache when several traces share a GPU)."""
    engine_kwargs = dict(engine_kwargs or {})
    if engine_factory is None:
        from ..engines.hf import HFEngine as engine_factory  # noqa: N813
    kernels = (device.startswith("cuda")) if kernels is None else kernels
    engine = engine_factory(config_path, attention=attention, device=device, dtype=dtype,
                            max_batch_tokens=primary["max_batch_tokens"], **engine_kwargs)
    run_a = trace_run(engine, primary["requests"], kernels=kernels, log=log)
    doc = {
        "version": TRACE_FORMAT_VERSION,
        "model": model_name or Path(config_path).stem,
        "architecture": (getattr(engine.config, "architectures", None) or [""])[0],
        "family": getattr(engine.config, "model_type", ""),
        "config_path": str(config_path),
        "config_hash": config_hash(config_path),
        "attention": attention,
        "dtype": str(engine.dtype).replace("torch.", ""),
        "device": device,
        "engine_info": engine.engine_info(),
        "limits": run_a["limits"],
        "requests": [list(r) for r in primary["requests"]],
        "step_kinds": run_a["step_kinds"],
        "modules": run_a["modules"],
        "steps": run_a["steps"],
        "summary": _summary(run_a),
        "notes": run_a["notes"],
    }
    if verify:
        from .verify import compare_runs, counts_differ
        del engine  # the second engine may need the memory
        candidates = [secondary] + ([] if secondary is not SECONDARY else list(SECONDARY_ALTERNATIVES))
        tried = []
        for cand in candidates:
            engine_b = engine_factory(config_path, attention=attention, device=device, dtype=dtype,
                                      max_batch_tokens=cand["max_batch_tokens"], **engine_kwargs)
            run_b = trace_run(engine_b, cand["requests"], kernels=False, log=log)
            del engine_b
            tried.append({"max_batch_tokens": cand["max_batch_tokens"], "requests": [list(r) for r in cand["requests"]],
                          "steps": [[s["kind"], s["num_tokens"], s["num_requests"]] for s in run_b["steps"]]})
            if counts_differ(run_a, run_b):
                break
            log(f"verification: the run with {cand['requests']} did not give steps of every kind with counts "
                f"different from the first run; trying the next request set")
        doc["verification"] = compare_runs(run_a, run_b, cand)
        doc["verification"]["runs_tried"] = tried
        v = doc["verification"]
        log(f"verification: {v['checked_dims']} dims compared against a second run "
            f"({secondary['max_batch_tokens']} max batch tokens, {len(secondary['requests'])} requests): "
            f"{v['num_disagreements']} disagreements")
        for d in v["disagreements"][:20]:
            log(f"  {d['problem']}: step {d['step_kind']} op #{d['seq']} {d['op']} in '{d['module']}' "
                f"{d['where']}: {d['a']} vs {d['b']}")
        if v["num_disagreements"] > 20:
            log(f"  ... {v['num_disagreements'] - 20} more in the trace file's verification section")
    return doc


def _summary(run) -> dict:
    ops = sum(len(s["ops"]) for s in run["steps"])
    unknown_ops = sum(1 for s in run["steps"] for o in s["ops"]
                      if any(d["k"] == "UNKNOWN" for t in o["outputs"] for d in t["shape"]))
    fallback = sum(1 for s in run["steps"] for o in s["ops"] if o["coverage"] == "fallback")
    uncovered = {}
    for s in run["steps"]:
        for o in s["ops"]:
            if o["coverage"] == "fallback":
                uncovered[o["op"]] = uncovered.get(o["op"], 0) + 1
    return {"ops": ops, "fallback_ops": fallback, "ops_with_unknown_outputs": unknown_ops,
            "uncovered_ops": dict(sorted(uncovered.items())), "session": run["counters"]}


def backend_label(doc: dict) -> str:
    """The attention backend of a trace as reports name it: the implementation, plus the SDPA kernel forced for
    it in brackets ("paged|sdpa[cudnn]"); the C++ reader (Trace::backend) builds the same label."""
    kernel = doc.get("sdpa_kernel")
    return f"{doc['attention']}[{kernel}]" if kernel else doc["attention"]


def write_trace(doc: dict, out_dir: str) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    safe_backend = backend_label(doc).replace("|", "_").replace("[", "-").replace("]", "")
    path = out / f"{doc['model']}__{safe_backend}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
