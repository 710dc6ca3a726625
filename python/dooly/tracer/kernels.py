"""GPU kernel symbols per op (metadata only, never hashed). On CUDA each recorded op runs inside a
`record_function("dooly#<seq>")` range of a torch.profiler session; after the step every kernel is charged to
the innermost dooly range that launched it. On CPU nothing is collected."""

from __future__ import annotations

import contextlib

import torch


class KernelCollector:
    def __init__(self, enabled: bool):
        self.enabled = enabled and torch.cuda.is_available()
        self.prof = None

    def op_context(self, seq: int):
        if not self.enabled or self.prof is None:
            return None
        return torch.profiler.record_function(f"dooly#{seq}")

    @contextlib.contextmanager
    def step(self):
        if not self.enabled:
            yield
            return
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            self.prof = prof
            try:
                yield
            finally:
                torch.cuda.synchronize()
        self.prof = prof

    def kernels_by_seq(self) -> dict[int, list[str]]:
        if not self.enabled or self.prof is None:
            return {}
        out: dict[int, list[str]] = {}
        for evt in self.prof.events():
            if not evt.name.startswith("dooly#"):
                continue
            seq = int(evt.name[6:])
            names = []
            stack = [evt]
            while stack:
                e = stack.pop()
                for k in getattr(e, "kernels", []) or []:
                    names.append(k.name)
                stack.extend(c for c in e.cpu_children if not c.name.startswith("dooly#"))
            if names:
                out[seq] = sorted(set(names))
        self.prof = None
        return out
