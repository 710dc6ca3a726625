"""The torch tracer: taint-labelled traces of a serving engine's forward passes.

Python only collects facts (op calls, shapes, module calls); the taint rules live in the C++ core
(`dooly_core`, built from python/dooly_core.cpp). See docs/dooly-tracing.md."""

from .engine_trace import PRIMARY, SECONDARY, TRACE_FORMAT_VERSION, trace_model, trace_run, write_trace
from .tint import TInt

__all__ = ["TInt", "trace_model", "trace_run", "write_trace", "PRIMARY", "SECONDARY", "TRACE_FORMAT_VERSION"]
