"""Op capture: a TorchFunctionMode that labels every torch call's outputs through the C++ rules and records
op facts, plus module hooks that give each op its place in the module hierarchy."""

from __future__ import annotations

import json
import math

import torch
from torch.overrides import TorchFunctionMode

from . import callref
from . import encode as enc
from .tint import TInt

# Attribute reads that carry no shape facts: passed through without a record.
_PASSIVE_GETTERS = {
    "dtype", "device", "is_cuda", "is_cpu", "is_meta", "requires_grad", "grad", "grad_fn", "data", "is_leaf",
    "layout", "names", "is_sparse", "is_quantized", "is_nested", "itemsize", "nbytes", "_base", "_version",
    "is_mkldnn", "output_nr", "_cdata", "real", "imag", "H", "mH", "__dict__", "__class__",
}
_PASSIVE_CALLS = {
    "__repr__", "__format__", "__str__", "__bool__", "__hash__", "data_ptr", "element_size",
    "is_contiguous", "is_floating_point", "is_complex", "get_device", "untyped_storage", "storage_offset",
    "stride", "__array__", "__reduce_ex__", "__deepcopy__", "__setstate__", "__getstate__", "is_set_to",
    "is_inference", "has_names", "numpy", "__torch_function__", "__iter__", "__contains__", "__index__",
    "__int__", "__float__", "__complex__", "is_pinned", "__dlpack__", "__dlpack_device__", "record_stream",
    "__get__",
}
# Shape queries: propagated (their ints carry labels out of tensors) but not recorded as ops.
_QUERY_OPS = {"size", "shape", "dim", "ndimension", "ndim", "numel", "nelement", "len", "item", "tolist"}
# PyTorch's fused attention picks its kernel (flash, memory-efficient, cuDNN, math) from global switches that
# torch.nn.attention.sdpa_kernel sets, not from its arguments. The switches in force are recorded with the op as a
# pseudo-argument, so that a forced kernel is different work in the signature (and the kernel name stays metadata).
SDPA_OPS = {"scaled_dot_product_attention"}
SDPA_KERNELS_ARG = "@sdpa_kernels"


def sdpa_kernels_enabled() -> str:
    """The SDPA kernels PyTorch may choose from now, sorted and comma-separated ("cudnn,efficient,flash,math" by
    default; "math" inside sdpa_kernel(SDPBackend.MATH))."""
    b = torch.backends.cuda
    switches = {"cudnn": b.cudnn_sdp_enabled, "efficient": b.mem_efficient_sdp_enabled, "flash": b.flash_sdp_enabled,
                "math": b.math_sdp_enabled}
    return ",".join(name for name, on in sorted(switches.items()) if on())


def op_name(func) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":
        owner = getattr(func, "__self__", None)
        return getattr(owner, "__name__", "__get__")
    return name


def normalise(name: str) -> str:
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        name = name[2:-2]
        if name in ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior"):
            name = name[1:]
    elif name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name



def tensor_layout(t: torch.Tensor):
    """{"strides", "offset"} (elements) of a strided tensor that is not contiguous or sits at an offset not 16-byte
    aligned: the kernels an op launches can depend on it (a copy for `contiguous`, a strided GEMM), so the profiler
    rebuilds it (dooly::trace::strides_at) and the signature hashes it (docs/dooly-tracing.md, "Layouts").
    None for every other tensor, whose record is as in trace format 2."""
    if t.layout != torch.strided or t.is_nested:
        return None
    offset = int(t.storage_offset())
    if t.is_contiguous() and (offset * t.element_size()) % 16 == 0:
        return None
    return {"strides": [int(s) for s in t.stride()], "offset": offset}

class Recorder:
    """Collects module calls and op records of the current step. Label descriptions are cached per id."""

    def __init__(self, session):
        self.session = session
        self.seq = 0
        self.calls = []
        self.ops = []
        self.stack = []  # (call id, module path)
        self.recording = False
        self.queries = 0
        self._describe = {}
        self.on_op = None  # hook for the kernel-symbol collector: on_op(seq) -> context manager or None
        self.notes = []  # run notes (the trace's "notes"); trace_run shares its list
        self._fn_refs = {}  # callable -> fn_ref(callable) checked by resolve_fn, or None
        self._fn_noted = set()  # op names whose callable had no reference (noted once each)

    def reset(self):
        self.seq = 0
        self.calls = []
        self.ops = []
        self.stack = []
        self.queries = 0

    def describe(self, label_id):
        d = self._describe.get(label_id)
        if d is None:
            v, k, e, f = self.session.describe(label_id)
            d = {"v": v, "k": k, "e": e, "f": f}
            self._describe[label_id] = d
        return d

    def describe_tensor(self, t: torch.Tensor):
        ids = enc.tensor_labels(t)
        if ids is None:
            shape = [{"v": int(s), "k": "UNKNOWN", "e": "UNLABELLED", "f": "UNLABELLED"} for s in t.shape]
        else:
            shape = [self.describe(i) if self.describe(i)["v"] == int(s) else
                     {"v": int(s), "k": "UNKNOWN", "e": "UNLABELLED", "f": "UNLABELLED"} for i, s in zip(ids, t.shape)]
        out = {"shape": shape, "dtype": enc.dtype_name(t.dtype)}
        layout = tensor_layout(t)
        if layout is not None:
            out.update(layout)
        return out

    def describe_arg(self, t: torch.Tensor):
        return {"t": self.describe_tensor(t)}

    def fn_of(self, name: str, func):
        """The op's callable as a reference that resolves back to it (callref), None with a note otherwise."""
        try:
            ref = self._fn_refs[func]
        except KeyError:
            ref = callref.fn_ref(func)
            self._fn_refs[func] = ref
        except TypeError:  # unhashable
            ref = callref.fn_ref(func)
        if ref is None and name not in self._fn_noted:
            self._fn_noted.add(name)
            self.notes.append(f"op '{name}': no reference resolves back to its callable {func!r}; its records have "
                              f"fn null")
        return ref

    # -- module hierarchy
    def enter_module(self, path: str, module=None, args=(), kwargs=None):
        call_id = len(self.calls)
        parent = self.stack[-1][0] if self.stack else -1
        rec = {"id": call_id, "parent": parent, "seq": self.seq, "module": path}
        if module is not None:
            rec["class"] = type(module).__name__
            # Hooks run under TaintMode: reading the shapes here must not become (counted) shape queries.
            with torch._C.DisableTorchFunction():
                rec["inputs"] = callref.encode_call(args, kwargs or {}, self.describe_arg,
                                                    lambda x: self.describe(x.label), bounded=True, inline=True)
        self.calls.append(rec)
        self.seq += 1
        self.stack.append((call_id, path))

    def exit_module(self, path: str):
        # Pop back to this module's call (a module that raised may have left inner frames behind).
        while self.stack:
            call_id, p = self.stack.pop()
            if p == path:
                break

    # -- ops
    def record(self, name, args, kwargs, out, result, func=None):
        seq = self.seq
        self.seq += 1
        call, module = self.stack[-1] if self.stack else (-1, "")
        scalars = []
        for path, v in enc.scalar_leaves(args, kwargs):
            scalars.append(self._scalar(path, v))
        if result["op"] in SDPA_OPS:
            scalars.append({"arg": SDPA_KERNELS_ARG, "type": "str", "value": sdpa_kernels_enabled()})
        outputs = [self.describe_tensor(t) for t in enc.flatten_outputs(out) if isinstance(t, torch.Tensor)]
        rec = {
            "seq": seq, "call": call, "op": result["op"], "module": module,
            "fn": None if func is None else self.fn_of(result["op"], func),
            "call_args": callref.op_call(args, kwargs, lambda x: self.describe(x.label)),
            "inputs": [self.describe_tensor(t) for t in enc.tensor_leaves(args, kwargs)],
            "outputs": outputs, "scalars": scalars, "rule": result["rule"], "coverage": result["coverage"],
            "notes": result["notes"], "kernels": [],
        }
        self.ops.append(rec)
        return rec

    def _scalar(self, path, v):
        if isinstance(v, bool):
            return {"arg": path, "type": "bool", "value": v}
        if isinstance(v, TInt):
            return {"arg": path, "type": "int", "value": int(v), "label": self.describe(v.label)}
        if isinstance(v, int):
            return {"arg": path, "type": "int", "value": int(v)}
        if isinstance(v, float):
            if math.isfinite(v):
                return {"arg": path, "type": "float", "value": v}
            return {"arg": path, "type": "float", "value": repr(v)}
        if isinstance(v, str):
            return {"arg": path, "type": "str", "value": v}
        if v is None:
            return {"arg": path, "type": "none", "value": None}
        if isinstance(v, (torch.dtype, torch.device)):
            return {"arg": path, "type": "other", "value": str(v)}
        return {"arg": path, "type": "other", "value": type(v).__name__}


class TaintMode(TorchFunctionMode):
    """Labels the outputs of every torch call (through the C++ rules) and records compute ops."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.rec = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        raw = op_name(func)
        if raw in _PASSIVE_CALLS or raw in _PASSIVE_GETTERS:
            return func(*args, **kwargs)
        name = normalise(raw)
        kernel_ctx = self.rec.on_op(self.rec.seq) if (self.rec.on_op and name not in _QUERY_OPS) else None
        if kernel_ctx is not None:
            with kernel_ctx:
                out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        leaves = enc.flatten_outputs(out)
        if not leaves:
            if name in ("setitem", "copy", "index_copy", "fill", "zero") and self.rec.recording:
                result = {"op": name, "rule": "index" if name == "setitem" else "elementwise", "coverage": "rule",
                          "notes": []}
                self.rec.record(name, args, kwargs, out, result, func)
            return out
        call = {
            "op": name,
            "args": [enc.encode(a) for a in args],
            "kwargs": {k: enc.encode(v) for k, v in kwargs.items()},
            "outputs": [enc.encode_output(v) for v in leaves],
        }
        result = json.loads(self.rec.session.propagate(json.dumps(call)))
        out = enc.rebuild_outputs(out, result["outputs"])
        if name in _QUERY_OPS:
            self.rec.queries += 1
        elif self.rec.recording:
            self.rec.record(name, args, kwargs, out, result, func)
        return out


def install_module_hooks(model: torch.nn.Module, recorder: Recorder):
    """Forward pre/post hooks on every module; returns the handles (remove them when done)."""
    handles = []
    for path, module in model.named_modules():
        def pre(mod, args, kwargs, _path=path):
            if recorder.recording:
                recorder.enter_module(_path, mod, args, kwargs)

        def post(mod, inputs, output, _path=path):
            if recorder.recording:
                recorder.exit_module(_path)

        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, always_call=True))
    return handles
