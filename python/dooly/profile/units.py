"""A plan unit made runnable: an op rebuilt from its trace record (python/dooly/tracer/callref.py), or a module of
the model built from its own class with the model's config and random weights, with inputs at a sweep point.

Dimensions take their value from the point: NONE / MODEL_CONFIG / UNKNOWN dims keep the traced value, request-side
dims are their value form evaluated at the point's bindings (dooly_core.eval_dim). Integer tensors get values valid
for their role: indices into the dimension they index (distinct where they fit, as the engine's cache writes are),
token ids below the vocabulary, a grouped GEMM's offsets uniform over its experts (every expert its share of the
routed rows) or as a routing point of the plan asks (MOE_EXPERTS, MOE_SKEW: forced onto fewer experts, skewed);
boolean tensors are all false (a mask that selects nothing is valid for every masked op; an all-true one is not for
masked_scatter)."""

from __future__ import annotations

import json
import math
import os

import torch

import dooly_core
from dooly.tracer import callref

_FIXED_KINDS = {"NONE", "MODEL_CONFIG", "UNKNOWN"}
# Ops whose integer tensor input k indexes input 0 along the op's `dim` argument.
_INDEX_OPS = {"index_select", "index_copy", "index_add", "index_fill", "index_put", "gather", "scatter", "scatter_add",
              "index_reduce", "take_along_dim"}


# A grouped GEMM (a MoE's experts): input 2 holds each expert's end row in the input (cumulative offsets).
_GROUPED_MM_OPS = {"_grouped_mm", "grouped_mm"}


def _request_sized(info: dict) -> bool:
    """Whether a recorded tensor has a dim that follows the step (NUM_TOKS, NUM_REQS, MIX, ...): an activation."""
    return any(d.get("k") not in _FIXED_KINDS for d in info.get("shape", []) if isinstance(d, dict))


def routing_of(bindings: dict | None) -> tuple[int, float] | None:
    """A point's routing control (the plan's MoE routing points, docs/profile.md "MoE routing"): (experts that may
    receive rows, skew exponent), or None for uniform routing."""
    if not bindings or "MOE_EXPERTS" not in bindings:
        return None
    return int(bindings["MOE_EXPERTS"]), int(bindings.get("MOE_SKEW", 0)) / 100.0


def routed_rows(rows: int, experts: int, routing: tuple[int, float] | None) -> list[int]:
    """Rows per expert. Uniform (None): expert e ends at row ceil((e + 1) * rows / experts), every expert its share
    of the routed rows (as many experts as the rows reach). (k, s): the rows go to k experts spread over the index
    range, expert i of them a share ~ 1/(i + 1)^s (s = 0: evenly), each at least one row where the rows allow."""
    if routing is None:
        ends = [-(-(e + 1) * rows // experts) for e in range(experts)]
        return [b - a for a, b in zip([0] + ends[:-1], ends)]
    k = max(1, min(routing[0], experts, rows))
    w = [(i + 1) ** -routing[1] for i in range(k)]
    exact = [rows * x / sum(w) for x in w]
    counts = [max(1, int(x)) if rows >= k else int(i < rows) for i, x in enumerate(exact)]
    by_remainder = sorted(range(k), key=lambda i: (-(exact[i] - int(exact[i])), i))
    while sum(counts) < rows:  # the rows floor() dropped, largest remainder first
        for i in by_remainder[:rows - sum(counts)]:
            counts[i] += 1
    while sum(counts) > rows:  # the ones max(1, .) added, taken from the largest shares
        counts[max(range(k), key=lambda i: (counts[i], -i))] -= 1
    out = [0] * experts
    for i, c in enumerate(counts):
        out[i * experts // k] = c
    return out


def _routed_offsets(rows: int, experts: int, dtype, device, routing=None) -> torch.Tensor:
    """A grouped GEMM's offsets: each expert's end row (all zeros, the default for an integer input, would route no
    row and measure no work)."""
    ends, total = [], 0
    for c in routed_rows(rows, experts, routing):
        total += c
        ends.append(total)
    return torch.tensor(ends, dtype=dtype, device=device)


class UnitError(RuntimeError):
    """The unit cannot run alone (the finder walks up a level)."""


def dim_value(d: dict, bindings: dict | None) -> int:
    if bindings is None or d["k"] in _FIXED_KINDS:
        return int(d["v"])
    return int(dooly_core.eval_dim(d["f"], bindings))


def shape_at(info: dict, bindings: dict | None) -> list[int]:
    return [dim_value(d, bindings) for d in info["shape"]]


def _args_at(a, bindings):
    """call_args with every labelled int evaluated at the point."""
    if isinstance(a, list):
        return [_args_at(x, bindings) for x in a]
    if isinstance(a, dict):
        if "i" in a and "d" in a:
            return {"i": dim_value(a["d"], bindings), "d": a["d"]}
        return {k: _args_at(v, bindings) for k, v in a.items()}
    return a


def _dim_arg(op: dict) -> int:
    args = op["call_args"]
    if "dim" in args["kwargs"]:
        v = args["kwargs"]["dim"]
    elif len(args["args"]) > 1:
        v = args["args"][1]
    else:
        return 0
    if isinstance(v, dict) and "i" in v:
        v = v["i"]
    return int(v) if isinstance(v, int) else 0


def _int_tensor(op: dict, k: int, shape: list[int], dtype, device, shapes: list[list[int]], gen,
                routing=None) -> torch.Tensor:
    numel = math.prod(shape)
    name = op["op"]
    if name == "embedding" and k == 0 and len(shapes) > 1 and shapes[1]:
        high = shapes[1][0]
    elif name in _INDEX_OPS and k > 0 and shapes and shapes[0]:
        d = _dim_arg(op)
        high = shapes[0][d if d >= 0 else len(shapes[0]) + d] if -len(shapes[0]) <= d < len(shapes[0]) else 1
    elif name in ("getitem", "setitem") and k > 0 and shapes and shapes[0]:
        high = min(shapes[0])
    elif name in _GROUPED_MM_OPS and k == 2 and len(shape) == 1 and shapes and shapes[0]:
        return _routed_offsets(shapes[0][0], numel, dtype, device, routing)
    else:
        return torch.zeros(shape, dtype=dtype, device=device)
    high = max(int(high), 1)
    if name in ("index_copy", "index_put", "scatter") and numel <= high:
        vals = torch.randperm(high, generator=gen, device=device)[:numel]
    else:
        vals = torch.randint(0, high, (numel,), generator=gen, device=device)
    return vals.reshape(shape).to(dtype=dtype, device=device)


def make_tensor(info: dict, shape: list[int], device, gen, op: dict | None = None, k: int = 0,
                shapes: list[list[int]] | None = None, routing=None) -> torch.Tensor:
    """An input of the recorded dtype at `shape`, with values valid for its role, in the recorded layout: a
    transposed view, a slice of a fused projection or an expanded head launch the kernels they launched in the
    trace, where a contiguous copy would not (a `contiguous` of a contiguous tensor launches none). `routing`: a
    grouped GEMM's (routing_of)."""
    if "strides" not in info:
        return _values(info, shape, device, gen, op, k, shapes, routing)
    strides, offset, storage = layout_at(info, shape)
    dtype = getattr(torch, info["dtype"])
    if dtype.is_floating_point or dtype.is_complex:  # random everywhere: any view of it reads random values
        return _values(info, [storage], device, gen, None).as_strided(shape, strides, offset)
    view = torch.zeros(storage, dtype=dtype, device=device).as_strided(shape, strides, offset)
    dst, src = view, _values(info, shape, device, gen, op, k, shapes, routing)
    for d, st in enumerate(strides):  # a broadcast dim holds one value: write through one slice of it
        if st == 0 and shape[d] > 1:
            dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
    dst.copy_(src)
    return view


def layout_at(info: dict, shape: list[int]) -> tuple[list[int], int, int]:
    """(strides, offset, storage elements) of a recorded layout carried to `shape` (dooly::trace::strides_at; a dim
    is swept when its label follows the step: a gap around one is a static buffer's row, rebuilt aligned)."""
    traced = [int(d["v"]) for d in info["shape"]]
    swept = [isinstance(d, dict) and d.get("k") not in _FIXED_KINDS for d in info["shape"]]
    return dooly_core.strides_at(traced, info["strides"], int(info.get("offset", 0)), list(shape), swept)


def _values(info: dict, shape: list[int], device, gen, op: dict | None = None, k: int = 0,
            shapes: list[list[int]] | None = None, routing=None) -> torch.Tensor:
    dtype = getattr(torch, info["dtype"])
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype, device=device, generator=gen)
    if dtype == torch.bool:
        return torch.zeros(shape, dtype=dtype, device=device)
    if op is not None:
        return _int_tensor(op, k, shape, dtype, device, shapes or [], gen, routing)
    return torch.zeros(shape, dtype=dtype, device=device)


def _device_args(a, device):
    """Recorded devices point at the trace's device: the unit runs on ours."""
    if isinstance(a, list):
        return [_device_args(x, device) for x in a]
    if isinstance(a, dict):
        if set(a) == {"device"}:
            return {"device": str(device)}
        return {k: _device_args(v, device) for k, v in a.items()}
    return a


def tensor_bytes(info: dict, bindings: dict | None) -> int:
    """The bytes an input occupies: its elements, or the storage its recorded layout spans."""
    shape = shape_at(info, bindings)
    elements = layout_at(info, shape)[2] if "strides" in info else math.prod(shape)
    return elements * torch.empty((), dtype=getattr(torch, info["dtype"])).element_size()


def sdpa_backends(op: dict) -> list | None:
    """The SDPA kernels the traced call could choose from (its `@sdpa_kernels` pseudo-argument, the switches
    torch.nn.attention.sdpa_kernel had set), as SDPBackend values; None for other ops."""
    from dooly.tracer.recorder import SDPA_KERNELS_ARG

    text = next((s["value"] for s in op.get("scalars", []) if s.get("arg") == SDPA_KERNELS_ARG), None)
    if text is None:
        return None
    from torch.nn.attention import SDPBackend

    names = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
    if any(n not in names for n in text.split(",")):  # "" too: a call that could choose no kernel
        raise UnitError(f"the trace's SDPA kernels '{text}' name no kernel this worker knows: re-trace with this build")
    return [names[n] for n in text.split(",")]


class _Unit:
    """What every unit shares: `copies` sets of arguments made by prepare(), cycled through by call()."""

    level = 0
    fn = None

    def __init__(self, device):
        self.device = device
        self.copies: list[tuple[list, dict]] = []
        self._next = 0

    def _prepare(self, call: dict, bindings, copies: int, seed: int, make) -> None:
        """`make(entry, gen)` makes the tensor of one {"in"}/{"t"} entry of the call record."""
        gen = torch.Generator(device=self.device).manual_seed(seed)
        call = _device_args(_args_at(call, bindings), self.device)
        self.copies = []
        for _ in range(max(1, copies)):
            try:
                self.copies.append(callref.decode_call(call, lambda a: make(a, gen)))
            except callref.NotRebuildable as e:
                raise UnitError(str(e)) from e
        self._next = 0

    def call(self):
        args, kwargs = self.copies[self._next]
        self._next = (self._next + 1) % len(self.copies)
        return self.fn(*args, **kwargs)


class OpUnit(_Unit):
    """One op record, callable at any point: prepare(bindings) makes the inputs, then call() runs it once."""

    def __init__(self, op: dict, device):
        super().__init__(device)
        if not op.get("fn") or "call_args" not in op:
            raise UnitError("the trace records no callable for this op: re-create it with this build's dooly trace")
        allowed = [a for a in os.environ.get("DOOLY_PROFILE_ALLOW_FN", "").split(",") if a]
        if not (op["fn"].startswith("torch.") or op["fn"] in allowed):
            # A trace names what the worker will call: only torch's callables, so a trace cannot run arbitrary code.
            raise UnitError(f"'{op['fn']}' is not a torch callable (DOOLY_PROFILE_ALLOW_FN lists exceptions)")
        self.op = op
        self.fn = callref.resolve_fn(op["fn"])
        self.sdpa_backends = sdpa_backends(op)

    def call(self):
        if self.sdpa_backends is None:
            return super().call()
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(self.sdpa_backends):  # the kernels the traced call could choose from, no others
            return super().call()

    def input_bytes(self, bindings) -> int:
        return sum(tensor_bytes(info, bindings) for info in self.op["inputs"])

    def weight_bytes(self, bindings) -> int:
        """Bytes of the inputs that do not grow with the step (no request-side dim): weights, caches, tables."""
        return sum(tensor_bytes(i, bindings) for i in self.op["inputs"] if not _request_sized(i))

    def prepare(self, bindings: dict | None, copies: int = 1, seed: int = 0, warm_activations: bool = False) -> None:
        """`copies` sets of inputs, cycled through by call(). With warm_activations, the inputs sized by the step
        (activations, which the previous op has just written in the engine) are made once and shared by every
        copy, so only the weights cycle past the L2 (the composition check's --inputs warm)."""
        inputs = self.op["inputs"]
        shapes = [shape_at(i, bindings) for i in inputs]
        routing = routing_of(bindings)
        if routing is not None and self.op["op"] not in _GROUPED_MM_OPS:
            raise UnitError(f"a routing point (MOE_EXPERTS) of an op that routes nothing: {self.op['op']}")
        shared: dict[int, torch.Tensor] = {}

        def make(a, gen):  # the input's role decides its integer values (index ranges from the other inputs)
            k = a["in"]
            if warm_activations and _request_sized(inputs[k]):
                if k not in shared:
                    shared[k] = make_tensor(inputs[k], shapes[k], self.device, gen, self.op, k, shapes, routing)
                return shared[k]
            return make_tensor(inputs[k], shapes[k], self.device, gen, self.op, k, shapes, routing)

        self._prepare(self.op["call_args"], bindings, copies, seed, make)

    def expected_shapes(self, bindings) -> list[list[int]]:
        return [shape_at(o, bindings) for o in self.op["outputs"]]


class ModuleUnit(_Unit):
    """A module of the model (its own class, the model's config, random weights) called with its recorded inputs."""

    def __init__(self, module: torch.nn.Module, call: dict, level: int, device):
        super().__init__(device)
        self.fn = module
        self.record = call.get("inputs") or {"args": [], "kwargs": {}}
        self.level = level

    def input_bytes(self, bindings) -> int:
        def walk(a) -> int:
            if isinstance(a, dict) and "t" in a:
                return tensor_bytes(a["t"], bindings)
            if isinstance(a, dict):
                return sum(walk(v) for v in a.values())
            if isinstance(a, list):
                return sum(walk(v) for v in a)
            return 0

        return walk(self.record)

    def prepare(self, bindings, copies: int = 1, seed: int = 0) -> None:
        if routing_of(bindings) is not None:  # its own router decides; the point would be uniform routing mislabelled
            raise UnitError("a routing point (MOE_EXPERTS) needs the grouped GEMM alone; a module routes with its "
                            "own router")
        self._prepare(self.record, bindings, copies, seed,
                      lambda a, gen: make_tensor(a["t"], shape_at(a["t"], bindings), self.device, gen))

    def expected_shapes(self, bindings):
        return None  # a module's outputs are not recorded: its children's were checked where they ran


def prepare_inputs(runner, bindings: dict, inputs: str, device) -> int:
    """Makes the unit's inputs at the point by the grid's policy (measure.Settings.inputs) and returns the copies
    cycled through. "warm": an op's weights cycle past the L2, its activations are made once (OpUnit); a module
    cycles every input (its weights are its parameters, one copy: its recorded inputs are activations)."""
    from .measure import copies_for  # measure does not import units: no cycle, and torch is loaded by now

    if inputs == "warm" and hasattr(runner, "weight_bytes"):
        copies = copies_for(runner.weight_bytes(bindings), device)
        runner.prepare(bindings, copies, warm_activations=True)
    else:
        copies = copies_for(runner.input_bytes(bindings), device)
        runner.prepare(bindings, copies)
    return copies


def output_shapes(out) -> list[list[int]]:
    shapes = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            shapes.append(list(v.shape))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(out)
    return shapes


def compare_kernels(traced: list[str], launched: list[str]) -> tuple[str, str]:
    """Does the isolated unit launch the kernels the trace saw? ('same' | 'superset' | 'subset' | 'disjoint' |
    'untraced', a one-line detail). A superset is a warning (the unit does a little more, e.g. a copy of its
    inputs); a disjoint set is an error: the isolated unit is not the traced work."""
    t, got = set(traced), set(launched)
    if not t:
        return "untraced", f"{len(got)} kernels launched, none recorded in the trace"
    if t == got:
        return "same", ""
    if got > t:
        return "superset", "also launched: " + ", ".join(sorted(got - t))[:300]
    if got & t:
        return "subset", "not launched: " + ", ".join(sorted(t - got))[:300]
    return "disjoint", f"launched {sorted(got)[:3]}, traced {sorted(t)[:3]}"[:300]


def kernel_events(fn) -> list:
    """The CUDA kernel events of one call of fn (torch.profiler): their names and device time ranges."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def launched_kernels(fn) -> list[str]:
    """The CUDA kernels one call of fn launches."""
    return sorted({e.name for e in kernel_events(fn)})


def describe_error(e: BaseException) -> str:
    """'<Type>: <last line of the message>' — what the store keeps of a failure."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:400]


class ModelCache:
    """One model per trace (its own classes, the trace's config, random weights), built on first need."""

    def __init__(self, device):
        self.device = device
        self.models: dict[int, torch.nn.Module] = {}

    def get(self, index: int, trace: dict) -> torch.nn.Module:
        if index not in self.models:
            from transformers import AutoModelForCausalLM

            from dooly.models import load_config

            self.models.clear()  # one at a time: real models are large
            path = trace["config_path"]
            repo_path = os.path.join(os.path.dirname(__file__), "..", "..", "..", path)
            if not os.path.isabs(path) and not os.path.exists(path) and os.path.exists(repo_path):
                path = repo_path  # traces name configs relative to the repository
            config = load_config(path)
            impl = trace.get("attention", "sdpa")
            try:
                config._attn_implementation = impl
            except Exception:  # noqa: BLE001 - older configs: the attribute is read-only
                pass
            dtype = getattr(torch, trace.get("dtype", "float32"))
            with torch.device(self.device):
                model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
            self.models[index] = model.eval()
        return self.models[index]


def find_op(trace: dict, step: int, seq: int) -> dict:
    for op in trace["steps"][step]["ops"]:
        if op["seq"] == seq:
            return op
    raise UnitError(f"op seq {seq} is not in step {step} of the trace")


def find_call(trace: dict, step: int, call_id: int) -> dict:
    for c in trace["steps"][step]["calls"]:
        if c["id"] == call_id:
            return c
    raise UnitError(f"module call {call_id} is not in step {step} of the trace")


def load_trace(path: str) -> dict:
    with open(path) as f:
        return json.load(f)
