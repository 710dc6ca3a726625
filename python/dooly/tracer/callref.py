"""What a traced op called and with which arguments, in a form that rebuilds the call (docs/dooly-tracing.md,
"Trace file"): a later profiler re-runs each op alone from its record at other request sizes.

* `fn_ref(func)` names the callable the TorchFunctionMode saw as a dotted path that resolves back to the same
  object (`torch.nn.functional.silu`, `torch._C._nn.linear`, `torch.Tensor.view`, `torch.cat`,
  `torch.Tensor.T.__get__`, `torch.ops.aten.add.Tensor`); `resolve_fn(ref)` follows it. A reference is only
  kept when `same_fn(resolve_fn(ref), func)`.
* `encode_call(args, kwargs, ...)` writes the argument structure: tensors as `{"in": k}` (k their index in the
  op's `inputs`, the order of `encode.tensor_leaves`), tainted ints with their label, plain values as JSON and
  the rest as tagged objects (see `encode_value`). `decode_call` builds the arguments back, given a function
  that makes a tensor for each `{"in": k}`.
"""

from __future__ import annotations

import importlib
import math

import torch

from .tint import TInt

# Containers longer than this are not written element by element (module inputs only; op arguments are always
# written in full, since their tensors must each get their "in" index).
MAX_LIST = 64

_METHOD_TYPES = (type(torch.Tensor.add), type(torch.Tensor.__getitem__))  # method_descriptor, wrapper_descriptor
_METHOD_WRAPPER = type(torch.Tensor.T.__get__)
# Searched for a function's name, public ones first (F.linear is torch._C._nn.linear: the first name wins).
_PUBLIC_NAMESPACES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")
_PRIVATE_NAMESPACES = ("torch._C._nn", "torch._C._VariableFunctions", "torch._C._linalg", "torch._C._special",
                       "torch._C._fft")


def resolve_fn(ref: str):
    """The object a dotted reference names: the longest importable module prefix, then attributes.
    Raises ValueError when it names nothing."""
    if not isinstance(ref, str) or not ref:
        raise ValueError(f"not a callable reference: {ref!r}")
    parts = ref.split(".")
    obj, i = None, 0
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
            i = n
            break
        except ImportError:
            continue
    if obj is None:
        raise ValueError(f"'{ref}': no importable module at its start")
    for p in parts[i:]:
        try:
            obj = getattr(obj, p)
        except AttributeError as e:
            raise ValueError(f"'{ref}': {type(obj).__name__} {'.'.join(parts[:i])} has no attribute '{p}'") from e
        i += 1
    return obj


def same_fn(a, b) -> bool:
    """Identity, except for method-wrappers (`torch.Tensor.T.__get__` is a new object at every access): those are
    the same when they wrap the same descriptor's same slot."""
    if a is b:
        return True
    if isinstance(a, _METHOD_WRAPPER) and isinstance(b, _METHOD_WRAPPER):
        return a.__self__ is b.__self__ and a.__name__ == b.__name__
    return False


def _candidates(func):
    name = getattr(func, "__name__", None)
    # Properties and getters: the getset descriptor's (or property's) __get__.
    if isinstance(func, _METHOD_WRAPPER):
        owner = func.__self__
        owner_refs = [] if owner is func else _candidates(owner)
        return [f"{r}.{name}" for r in owner_refs]
    if isinstance(func, torch._ops.OpOverload):
        return [f"torch.ops.{func.namespace}.{func._opname}.{func._overloadname}"]
    if isinstance(func, torch._ops.OpOverloadPacket):
        ns, op = func._qualified_op_name.split("::", 1)
        return [f"torch.ops.{ns}.{op}"]
    out = []
    objclass = getattr(func, "__objclass__", None)
    if objclass is None and isinstance(func, property):
        objclass = torch.Tensor  # a Python property of torch.Tensor
        name = getattr(func.fget, "__name__", None)
    qual = getattr(func, "__qualname__", None) or ""
    if name is None:
        return out
    if objclass is not None or isinstance(func, _METHOD_TYPES) or qual.startswith(("Tensor.", "TensorBase.")):
        out += [f"torch.Tensor.{name}", f"torch._C.TensorBase.{name}"]
        if objclass is not None and objclass not in (torch.Tensor, torch._C.TensorBase):
            out.append(f"{objclass.__module__}.{objclass.__qualname__}.{name}")
    out += [f"{ns}.{name}" for ns in _PUBLIC_NAMESPACES]
    module = getattr(func, "__module__", None)
    if module and qual and "<" not in qual:
        out.append(f"{module}.{qual}")
    out += [f"{ns}.{name}" for ns in _PRIVATE_NAMESPACES]
    return out


def fn_ref(func) -> str | None:
    """A dotted reference that `resolve_fn` turns back into `func` (same_fn), or None when none is found."""
    for ref in _candidates(func):
        try:
            if same_fn(resolve_fn(ref), func):
                return ref
        except (ValueError, TypeError):
            continue
    return None


# -- arguments

def _float(x: float):
    if math.isfinite(x):
        return x
    return {"float": "nan" if x != x else ("inf" if x > 0 else "-inf")}


def encode_value(x, tensor, tint, bounded: bool = False, in_leaves: bool = True, inline: bool = False):
    """One argument as JSON. `tensor(t)` encodes a tensor (called in tensor_leaves order, so it can number them),
    `tint(x)` the label of a tainted int. `bounded`: lists and tuples longer than MAX_LIST become
    {"other": "list[<n>]"} (module inputs). `in_leaves`: whether encode.tensor_leaves visits this position (it
    walks lists and tuples only); a tensor it does not visit (in a slice, a dict) cannot be numbered and is
    {"other": "Tensor"} — unless `inline`: `tensor` writes the tensor itself rather than a number (module inputs,
    {"t": T}), so a tensor in a dict (a per-layer-type attention mask) is written as well."""
    def rec(v, leaves=in_leaves):
        return encode_value(v, tensor, tint, bounded, leaves, inline)

    if isinstance(x, torch.Tensor):
        return tensor(x) if in_leaves or inline else {"other": "Tensor"}
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, TInt):
        return {"i": int(x), "d": tint(x)}
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return _float(float(x))
    if x is Ellipsis:
        return {"ellipsis": True}
    if isinstance(x, slice):
        return {"slice": [rec(x.start, False), rec(x.stop, False), rec(x.step, False)]}
    if isinstance(x, torch.dtype):
        return {"dtype": str(x).replace("torch.", "")}
    if isinstance(x, torch.device):
        return {"device": str(x)}
    if isinstance(x, torch.memory_format):
        return {"memory_format": str(x).replace("torch.", "")}
    if isinstance(x, torch.layout):
        return {"layout": str(x).replace("torch.", "")}
    if isinstance(x, (list, tuple)):
        kind = "list" if isinstance(x, list) else "tuple"
        if bounded and len(x) > MAX_LIST:
            return {"other": f"{kind}[{len(x)}]"}
        return {kind: [rec(i) for i in x]}
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        if bounded and len(x) > MAX_LIST:
            return {"other": f"dict[{len(x)}]"}
        return {"dict": {k: rec(v, False) for k, v in x.items()}}
    return {"other": type(x).__name__}


def encode_call(args, kwargs, tensor, tint, bounded: bool = False, inline: bool = False):
    """{"args": [A...], "kwargs": {name: A}}; keyword arguments are visited in sorted order, as
    encode.tensor_leaves does, so `tensor` is called in the order of the op's inputs. `inline`: see encode_value."""
    enc_args = [encode_value(a, tensor, tint, bounded, inline=inline) for a in args]
    enc_kwargs = {k: encode_value(kwargs[k], tensor, tint, bounded, inline=inline) for k in sorted(kwargs)}
    return {"args": enc_args, "kwargs": enc_kwargs}


def op_call(args, kwargs, tint):
    """An op's argument structure with tensors as {"in": k}, k counting in encode.tensor_leaves order."""
    counter = iter(range(1 << 62))
    return encode_call(args, kwargs, lambda t: {"in": next(counter)}, tint)


class NotRebuildable(ValueError):
    """An argument was written as {"other": ...}: the call cannot be made from the record alone."""


_TORCH_ATTR_TAGS = ("dtype", "memory_format", "layout")


def decode_value(a, tensor):
    """The inverse of encode_value: `tensor(a)` makes the tensor of an {"in": k} or {"t": {...}} entry."""
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, list):  # not written by encode_value; tolerated
        return [decode_value(i, tensor) for i in a]
    if not isinstance(a, dict) or len(a) not in (1, 2):
        raise ValueError(f"not an encoded argument: {a!r}")
    if "in" in a or "t" in a:
        return tensor(a)
    if "i" in a:
        return int(a["i"])
    if "float" in a:
        return float(a["float"])
    if "ellipsis" in a:
        return Ellipsis
    if "slice" in a:
        return slice(*(decode_value(i, tensor) for i in a["slice"]))
    if "list" in a:
        return [decode_value(i, tensor) for i in a["list"]]
    if "tuple" in a:
        return tuple(decode_value(i, tensor) for i in a["tuple"])
    if "dict" in a:
        return {k: decode_value(v, tensor) for k, v in a["dict"].items()}
    if "device" in a:
        return torch.device(a["device"])
    for tag in _TORCH_ATTR_TAGS:
        if tag in a:
            return getattr(torch, a[tag])
    if "other" in a:
        raise NotRebuildable(f"argument of type {a['other']} was not recorded")
    raise ValueError(f"not an encoded argument: {a!r}")


def decode_call(call, tensor):
    """(args, kwargs) from an encode_call structure."""
    return ([decode_value(a, tensor) for a in call["args"]],
            {k: decode_value(v, tensor) for k, v in call["kwargs"].items()})


def example_tensor(info, device=None, generator=None):
    """A tensor of a recorded `{"shape": [DIM...], "dtype"}`: random normal for floating dtypes, zeros otherwise
    (zeros are a valid index into any non-empty dim, and an all-false mask)."""
    shape = [int(d["v"]) for d in info["shape"]]
    dtype = getattr(torch, info["dtype"])
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype, device=device, generator=generator)
    return torch.zeros(shape, dtype=dtype, device=device)


def rebuild_op(op: dict, tensor=None):
    """(callable, args, kwargs) of an op record, ready to call: `tensor(k, info)` makes input k (default:
    example_tensor of the recorded shape and dtype). Raises NotRebuildable when fn is null or an argument was
    not recorded."""
    if not op.get("fn"):
        raise NotRebuildable(f"op '{op.get('op')}' has no callable reference")
    fn = resolve_fn(op["fn"])
    inputs = op["inputs"]
    make = tensor or (lambda k, info: example_tensor(info))
    args, kwargs = decode_call(op["call_args"], lambda a: make(a["in"], inputs[a["in"]]))
    return fn, args, kwargs
