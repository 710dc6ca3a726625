"""GPU kernels per op (metadata only, never hashed): their symbols and their summed device time. On CUDA each
recorded op runs inside a `record_function("dooly#<seq>")` range of a torch.profiler session; after the step every
kernel is charged to the innermost dooly range that launched it, and the step's total device time is kept too
(kernels outside every range, e.g. launched by engine code the mode does not see, are the difference). The
composition check (scripts/gpu/composition_check.py) compares these in-engine times with the ops measured alone.
On CPU nothing is collected."""

from __future__ import annotations

import contextlib

import torch


class KernelCollector:
    def __init__(self, enabled: bool):
        self.enabled = enabled and torch.cuda.is_available()
        self.prof = None
        self.step_kernel_us = 0.0

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

    def kernels_by_seq(self) -> dict[int, tuple[list[str], float]]:
        """{seq: (sorted kernel symbols, summed kernel time in us)} of the last step; `step_kernel_us` is set to
        the device time of every kernel of the step (0.0 when nothing was collected)."""
        self.step_kernel_us = 0.0
        if not self.enabled or self.prof is None:
            return {}
        out: dict[int, tuple[list[str], float]] = {}
        events = self.prof.events()
        for evt in events:
            self.step_kernel_us += sum(float(k.duration) for k in getattr(evt, "kernels", []) or [])
            if not evt.name.startswith("dooly#"):
                continue
            seq = int(evt.name[6:])
            names, us = [], 0.0
            stack = [evt]
            while stack:
                e = stack.pop()
                for k in getattr(e, "kernels", []) or []:
                    names.append(k.name)
                    us += float(k.duration)
                stack.extend(c for c in e.cpu_children if not c.name.startswith("dooly#"))
            if names:
                out[seq] = (sorted(set(names)), us)
        self.prof = None
        return out
