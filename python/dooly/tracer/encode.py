"""Encoding of op arguments and outputs for the C++ session (the adapter protocol in docs/dooly-tracing.md)
and of labels for the trace file."""

from __future__ import annotations

import torch

from .tint import TInt

LABELS_ATTR = "_dooly_dims"  # label ids of a tensor's dims, one per dim


def tensor_labels(t: torch.Tensor):
    ids = getattr(t, LABELS_ATTR, None)
    if ids is None or len(ids) != t.dim():
        return None
    return ids


def set_tensor_labels(t: torch.Tensor, ids) -> None:
    try:
        setattr(t, LABELS_ATTR, list(ids))
    except (AttributeError, RuntimeError):  # some tensor subclasses refuse attributes
        pass


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def encode(x):
    """A Python value as the session's JSON value."""
    if isinstance(x, torch.Tensor):
        labels = tensor_labels(x)
        return {"s": list(map(int, x.shape)), "t": labels, "d": dtype_name(x.dtype)}
    if isinstance(x, bool):
        return x
    if isinstance(x, TInt):
        return {"i": int(x), "l": x.label}
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if x == x and x not in (float("inf"), float("-inf")) else {"other": repr(x)}
    if isinstance(x, str):
        return x
    if x is None:
        return None
    if x is Ellipsis:
        return {"ellipsis": 1}
    if isinstance(x, slice):
        return {"slice": [encode(x.start), encode(x.stop), encode(x.step)]}
    if isinstance(x, tuple) and not isinstance(x, torch.Size):
        return {"tuple": [encode(i) for i in x]}
    if isinstance(x, (list, torch.Size)):
        return [encode(i) for i in x]
    return {"other": type(x).__name__}


def flatten_outputs(out):
    """Leaves of an op's result that carry shape facts: tensors and ints, in order."""
    leaves = []

    def visit(v):
        if isinstance(v, torch.Tensor):
            leaves.append(v)
        elif isinstance(v, bool):
            return
        elif isinstance(v, int):
            leaves.append(v)
        elif isinstance(v, (list, tuple)):
            for i in v:
                visit(i)

    visit(out)
    return leaves


def encode_output(v):
    if isinstance(v, torch.Tensor):
        return {"s": list(map(int, v.shape))}
    return int(v)


def rebuild_outputs(out, labelled):
    """Returns `out` with its int leaves replaced by TInts carrying the given labels (tensors get their labels
    attached in place). `labelled` is the session's outputs list, aligned with flatten_outputs(out)."""
    it = iter(labelled)

    def visit(v):
        if isinstance(v, torch.Tensor):
            enc = next(it)
            if enc and "t" in enc:
                set_tensor_labels(v, enc["t"])
            return v
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            enc = next(it)
            if enc and "l" in enc:
                return TInt(int(v), enc["l"])
            return v
        if isinstance(v, torch.Size):
            return torch.Size([visit(i) for i in v])
        if isinstance(v, tuple):
            return _same_tuple_type(v, [visit(i) for i in v])
        if isinstance(v, list):
            return [visit(i) for i in v]
        return v

    return visit(out)


def _same_tuple_type(original: tuple, items: list) -> tuple:
    """`items` as a tuple of the same type as `original`, so callers keep their attribute access: named tuples
    (`_fields`, built from positional items), struct sequences such as `torch.return_types.max` (no `_fields`;
    `n_sequence_fields`, built from one sequence; `x.max(dim=-1).values` must keep working) and other tuple
    subclasses. A struct sequence with fields beyond its sequence part (os.stat_result) cannot be rebuilt from
    the items: it is returned as it was (its tensors are labelled in place; only its ints stay plain)."""
    cls = type(original)
    if cls is tuple:
        return tuple(items)
    if hasattr(original, "_fields"):
        return cls(*items)
    n_seq = getattr(cls, "n_sequence_fields", None)
    if n_seq is not None:
        return cls(items) if getattr(cls, "n_fields", n_seq) == n_seq else original
    try:
        return cls(items)
    except TypeError:
        return original


def scalar_leaves(args, kwargs):
    """Non-tensor arguments flattened to (path, value) leaves: "1", "1.0", "1.0.stop", "dim", ..."""
    leaves = []

    def visit(path, v):
        if isinstance(v, torch.Tensor):
            return
        if isinstance(v, slice):
            for part in ("start", "stop", "step"):
                visit(f"{path}.{part}", getattr(v, part))
            return
        if isinstance(v, (list, tuple)) and not isinstance(v, str):
            for i, item in enumerate(v):
                visit(f"{path}.{i}", item)
            return
        leaves.append((path, v))

    for i, a in enumerate(args):
        visit(str(i), a)
    for k in sorted(kwargs):
        visit(k, kwargs[k])
    return leaves


def tensor_leaves(args, kwargs):
    out = []

    def visit(v):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for i in v:
                visit(i)

    for a in args:
        visit(a)
    for k in sorted(kwargs):
        visit(kwargs[k])
    return out
