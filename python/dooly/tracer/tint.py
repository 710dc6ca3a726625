"""Tainted Python integers: an `int` that carries a label id of the C++ taint session.

Model code computes shapes with plain Python arithmetic (`config.hidden_size // config.num_attention_heads`,
`hidden_states.shape[:-1]`), so taint has to ride on the integers themselves. `TInt` behaves exactly like
its value for every purpose (hashing, comparison, indexing, as a size argument) and, while a session is
active, each integer operation asks the C++ core for the label of the result. Without an active session the
results are plain ints, so a tainted config left behind can never break later code.
"""

from __future__ import annotations

_session = None  # the active dooly_core.Session, set by the tracer


def active_session():
    return _session


def set_session(session) -> None:
    global _session
    _session = session


class TInt(int):
    """An int with a label id (`.label`) in the active taint session."""

    def __new__(cls, value: int, label: int):
        obj = int.__new__(cls, int(value))
        obj.label = label
        return obj

    def __repr__(self) -> str:
        return f"TInt({int(self)})"

    def __reduce__(self):  # copies and pickles are plain ints: labels belong to one session
        return (int, (int(self),))

    def __copy__(self):
        return int(self)

    def __deepcopy__(self, memo):
        return int(self)


def label_of(x) -> int | None:
    """The label id of a TInt, None for anything else."""
    return x.label if isinstance(x, TInt) else None


def _const(value: int) -> int:
    return _session.constant(int(value))


def _binary(op: str, reflected: bool):
    int_op = getattr(int, f"__{'r' if reflected else ''}{op}__")

    def method(self, other):
        result = int_op(self, other)
        if _session is None or result is NotImplemented or isinstance(other, bool) or not isinstance(other, int):
            return result
        if not isinstance(result, int):  # e.g. a negative power gives a float
            return result
        other_label = other.label if isinstance(other, TInt) else _const(other)
        a, b = (other_label, self.label) if reflected else (self.label, other_label)
        return TInt(result, _session.binary(op, a, b))

    method.__name__ = f"__{'r' if reflected else ''}{op}__"
    return method


def _unary(op: str):
    int_op = getattr(int, f"__{op}__")

    def method(self):
        result = int_op(self)
        if _session is None:
            return result
        return TInt(result, _session.unary(op, self.label))

    method.__name__ = f"__{op}__"
    return method


for _op in ("add", "sub", "mul", "floordiv", "mod", "pow", "lshift", "and", "or", "xor"):
    setattr(TInt, f"__{_op}__", _binary(_op, False))
    setattr(TInt, f"__r{_op}__", _binary(_op, True))
for _op in ("neg", "pos", "abs", "invert"):
    setattr(TInt, f"__{_op}__", _unary(_op))
