"""Taint sources: model config integers (MODEL_CONFIG), engine limits (MAX_NUM_*), and the per-step inputs
of the forward (NUM_TOKS / NUM_REQS on their dims).

Config integers are labelled by name. Module integer attributes, parameters and buffers exist before any
request, so their sizes are MODEL_CONFIG by construction; their symbols are the config names of equal value
when one name fits (several fitting names are joined with '|', so a reader sees the ambiguity). Step inputs
are labelled by their role in the engine's forward kwargs, never by matching values against request sizes.
"""

from __future__ import annotations

import torch

from . import encode as enc
from .tint import TInt

REQUEST_TOKS = "NUM_TOKS"
REQUEST_REQS = "NUM_REQS"
# Token counts of a step other than the scheduled tokens: the tokens read from the KV cache (cached + new)
# and the per-request maxima the attention kernels receive. They vary with requests like NUM_TOKS.
KV_TOKS = "KV_TOKS"
MAX_SEQLEN_Q = "MAX_SEQLEN_Q"
MAX_SEQLEN_K = "MAX_SEQLEN_K"
# The same counts for sliding-window layers, which read at most window-1 cached tokens per request. They are
# derived labels `KV_TOKS_SLIDING(sliding_window)`: the window is a config value that changes the work (272 vs 652
# KV tokens in one step for windows 48 and 4096), so its value is in the hash ("KV_TOKS_SLIDING(48)"), and a
# step whose sliding and full layers read different lengths labels the two reads apart.
SLIDING_SUFFIX = "_SLIDING"
CACHE_SLOTS = "CACHE_SLOTS"  # rows of the paged KV cache: a limit, like MAX_NUM_TOKS

_INDEX_NAMES = ("layer_idx", "layer_id", "layer_index")


class ConfigTaint:
    """Replaces the int attributes of a transformers config (dotted names) by TInts; restore() undoes it."""

    def __init__(self, session, config, int_attributes: dict[str, int]):
        self.session = session
        self.config = config
        self.saved = []
        self.by_value: dict[int, list[str]] = {}
        for dotted, value in sorted(int_attributes.items()):
            owner, attr = self._resolve(dotted)
            if owner is None or isinstance(getattr(owner, attr, None), bool):
                continue
            current = getattr(owner, attr, None)
            if not isinstance(current, int) or int(current) != int(value):
                continue
            self.saved.append((owner, attr, current))
            label = session.sym(dotted, "MODEL_CONFIG", int(value))
            try:
                setattr(owner, attr, TInt(int(value), label))
            except Exception:  # read-only properties
                self.saved.pop()
                continue
            self.by_value.setdefault(int(value), []).append(dotted)

    def _resolve(self, dotted: str):
        obj = self.config
        parts = dotted.split(".")
        for p in parts[:-1]:
            obj = getattr(obj, p, None)
            if obj is None:
                return None, None
        return obj, parts[-1]

    def symbol_for(self, value: int) -> str:
        names = self.by_value.get(int(value), [])
        if len(names) == 1:
            return names[0]
        if names:
            return "|".join(names[:3]) + ("|..." if len(names) > 3 else "")
        return f"param{int(value)}"

    def restore(self):
        for owner, attr, value in reversed(self.saved):
            setattr(owner, attr, value)
        self.saved = []


class ModuleTaint:
    """Labels module int attributes (MODEL_CONFIG; layer indices stay NONE-kind index symbols), parameters
    and buffers of a model."""

    def __init__(self, session, model: torch.nn.Module, config_taint: ConfigTaint):
        self.saved = []
        self.session = session
        self.cfg = config_taint
        self._sym_cache: dict[int, int] = {}
        for _, module in model.named_modules():
            for attr, value in list(vars(module).items()):
                if attr.startswith("_") or type(value) is not int:
                    continue
                if any(n in attr for n in _INDEX_NAMES):
                    label = session.sym(attr, "NONE", value)
                else:  # the attribute's own name: equal values need not mean the same quantity
                    label = session.sym(attr, "MODEL_CONFIG", value)
                self.saved.append((module, attr, value))
                setattr(module, attr, TInt(value, label))
        for t in list(model.parameters()) + list(model.buffers()):
            self.label_static(t)

    def dim_label(self, size: int) -> int:
        label = self._sym_cache.get(size)
        if label is None:
            label = self.session.sym(self.cfg.symbol_for(size), "MODEL_CONFIG", int(size)) if size != 1 \
                else self.session.constant(1)
            self._sym_cache[size] = label
        return label

    def label_static(self, t: torch.Tensor):
        enc.set_tensor_labels(t, [self.dim_label(int(s)) for s in t.shape])

    def restore(self):
        for module, attr, value in reversed(self.saved):
            setattr(module, attr, value)
        self.saved = []


class LimitTaint:
    """Engine limits: max batch tokens / requests (MAX_NUM_*), the paged cache's rows (CACHE_SLOTS, a token
    limit) and its block size (an engine constant hashed by value)."""

    def __init__(self, session, limits: dict):
        self.session = session
        self.limits = dict(limits)
        self.labels = {}
        if limits.get("max_batch_tokens"):
            self.labels["max_batch_tokens"] = session.sym("MAX_NUM_TOKS", "MAX_NUM_TOKS", int(limits["max_batch_tokens"]))
        for key in ("max_requests", "max_batch_requests", "max_num_requests"):
            if limits.get(key):
                self.labels["max_requests"] = session.sym("MAX_NUM_REQS", "MAX_NUM_REQS", int(limits[key]))
                break

    def label_cache(self, cache, module_taint: ModuleTaint):
        """Labels the paged cache's tensors: dim 0 (rows) as CACHE_SLOTS, the rest by config."""
        if cache is None or getattr(cache, "_dooly_labelled", False):
            return
        tensors = []
        for attr in ("key_cache", "value_cache"):
            for t in getattr(cache, attr, []) or []:
                if isinstance(t, torch.Tensor):
                    tensors.append(t)
        for t in tensors:
            if t.dim() == 0:
                continue
            rows = self.session.sym(CACHE_SLOTS, "MAX_NUM_TOKS", int(t.shape[0]))
            enc.set_tensor_labels(t, [rows] + [module_taint.dim_label(int(s)) for s in t.shape[1:]])
        try:
            cache._dooly_labelled = True
        except Exception:
            pass


class StepInputs:
    """Labels the forward kwargs of one engine step by their role."""

    def __init__(self, session, notes: list, config=None):
        self.session = session
        self.notes = notes
        self.config = config  # the engine's model config (its sliding_window is a TInt while tracing)
        self.toks = self.reqs = None
        self.num_tokens = self.num_requests = None
        self.one = session.constant(1)
        self.extra = {}
        self.group_windows: list[int | None] = []  # per KV-cache layer group: its sliding window, None if full

    def _named(self, name: str, value: int, kind: str = "NUM_TOKS", window: int | None = None) -> int:
        """The step's count `name` (KV_TOKS, MAX_SEQLEN_K); for a sliding-window layer type the derived
        `<name>_SLIDING(sliding_window)`."""
        key = (name, int(value), window)
        if key not in self.extra:
            if window is None:
                self.extra[key] = self.session.sym(name, kind, int(value))
            else:
                self.extra[key] = self.session.derived(name + SLIDING_SUFFIX, kind, int(value),
                                                       [self._window_label(window)])
        return self.extra[key]

    def _window_label(self, window: int) -> int:
        w = getattr(self.config, "sliding_window", None)
        if isinstance(w, TInt) and int(w) == int(window):
            return w.label  # MODEL_CONFIG `sliding_window`
        return self.session.constant(int(window))

    def _read_groups(self, cache) -> None:
        self.group_windows = []
        for cm in getattr(cache, "group_cache_managers", None) or []:
            w = getattr(cm, "sliding_window", None)
            self.group_windows.append(int(w) if isinstance(w, int) and not isinstance(w, bool) else None)

    def _window_of_type(self, layer_type) -> int | None:
        """The window of a layer type ("sliding_attention" / "full_attention"; None: the step's only type)."""
        sliding = [w for w in self.group_windows if w is not None]
        if layer_type is None:
            return sliding[0] if sliding and len(sliding) == len(self.group_windows) else None
        if layer_type == "sliding_attention" and sliding:
            return sliding[0]
        return None

    def _expect(self, t, name, labels):
        values = [self.session.describe(l)[0] for l in labels]
        if list(map(int, t.shape)) != values:
            self.notes.append(f"forward input '{name}' has shape {list(t.shape)}, expected {values}; "
                              f"its dims are left unlabelled (UNKNOWN)")
            return
        enc.set_tensor_labels(t, labels)

    def _seq_plus_one(self):
        return self.session.binary("add", self.reqs, self.one)

    def _counts(self, kwargs: dict):
        """The step's token and request counts, read from the roles of the forward kwargs (the engine packs
        all requests into one sequence: input_ids is [1, NUM_TOKS]; one logits index per request)."""
        ids = kwargs.get("input_ids")
        if not isinstance(ids, torch.Tensor):
            raise ValueError("the forward received no input_ids tensor; the tracer needs the engine's packed inputs")
        self.num_tokens = int(ids.shape[-1])
        li, cu = kwargs.get("logits_indices"), kwargs.get("cu_seq_lens_q")
        if isinstance(li, torch.Tensor) and li.dim() == 1:
            self.num_requests = int(li.shape[0])
        elif isinstance(cu, torch.Tensor) and cu.dim() == 1:
            self.num_requests = int(cu.shape[0]) - 1
        else:
            raise ValueError("the forward received neither logits_indices nor cu_seq_lens_q; cannot tell the "
                             "step's request count")
        self.toks = self.session.sym(REQUEST_TOKS, "NUM_TOKS", self.num_tokens)
        self.reqs = self.session.sym(REQUEST_REQS, "NUM_REQS", self.num_requests)

    def label(self, kwargs: dict) -> dict:
        self._counts(kwargs)
        self._read_groups(kwargs.get("cache"))
        out = dict(kwargs)
        for name, v in kwargs.items():
            if name in ("input_ids", "position_ids") and isinstance(v, torch.Tensor):
                self._expect(v, name, [self.one, self.toks][-v.dim():] if v.dim() <= 2 else [])
            elif name in ("cu_seq_lens_q", "cu_seq_lens_k"):
                for t in (v.values() if isinstance(v, dict) else [v]):
                    if isinstance(t, torch.Tensor):
                        self._expect(t, name, [self._seq_plus_one()])
            elif name == "logits_indices" and isinstance(v, torch.Tensor):
                self._expect(v, name, [self.reqs])
            elif name == "logits_processor_args" and isinstance(v, torch.Tensor) and v.dim() == 2:
                self._expect(v, name, [self.session.constant(int(v.shape[0])), self.reqs])
            elif name == "write_index" and isinstance(v, (list, tuple)):
                for t in v:
                    self._expect(t, name, [self.toks])
            elif name == "read_index" and isinstance(v, (list, tuple)):
                for i, t in enumerate(v):
                    window = self.group_windows[i] if i < len(self.group_windows) else None
                    if t.numel() == 0:
                        enc.set_tensor_labels(t, [self.session.constant(0)])
                    else:
                        self._expect(t, name, [self._named(KV_TOKS, int(t.shape[0]), window=window)])
            elif name == "attention_mask" and v is not None:
                for layer_type, t in (v.items() if isinstance(v, dict) else [(None, v)]):
                    if isinstance(t, torch.Tensor) and t.dim() == 4:
                        kv = self._named(KV_TOKS, int(t.shape[-1]), window=self._window_of_type(layer_type))
                        self._expect(t, name, [self.one, self.one, self.toks, kv])
            elif name == "max_seqlen_q" and isinstance(v, int) and not isinstance(v, bool):
                out[name] = TInt(v, self._named(MAX_SEQLEN_Q, v))
            elif name == "max_seqlen_k":
                if isinstance(v, dict):
                    out[name] = {k: TInt(x, self._named(MAX_SEQLEN_K, x, window=self._window_of_type(k)))
                                 if type(x) is int else x for k, x in v.items()}
                elif type(v) is int:
                    out[name] = TInt(v, self._named(MAX_SEQLEN_K, v, window=self._window_of_type(None)))
            elif name == "block_table" and isinstance(v, torch.Tensor):
                dims = [self.session.constant(int(v.shape[0]))] + [self.reqs] + \
                       [self._named("MAX_BLOCKS_PER_REQ", int(s), "MAX_NUM_TOKS") for s in v.shape[2:]]
                self._expect(v, name, dims[: v.dim()])
            elif isinstance(v, torch.Tensor) and enc.tensor_labels(v) is None:
                self.notes.append(f"forward input '{name}' (shape {list(v.shape)}) has no known role; "
                                  f"its dims stay unlabelled (UNKNOWN)")
        return out
