"""Live runs (issue 12 section 4): the real Hugging Face continuous-batching engine serves a workload spec (the
simulator's own parser and generator, through the binding) with random weights and EOS disabled; per-request arrival
and token times, per-step batch compositions and energy are recorded into the simulator's result-file schema.

  python -m dooly.live --model llama-3.1-8b --device cuda --workload SPEC --out live.json   (or: dooly live ...)

Modules: driver (arrivals, open and closed loop), step_recorder (the engine hooks), step_meter (the energy engine
over step windows), metrics (vLLM's serving metrics from raw records), run (one run, the result document).
"""

from .metrics import percentile, request_latencies, summarize

__all__ = ["summarize", "request_latencies", "percentile"]
