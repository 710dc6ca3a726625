"""Drives Hugging Face transformers' continuous-batching engine (paged KV cache, FIFO scheduler) on a model built
from a config file with random weights, one scheduler step at a time, and reports what the engine scheduled.

How it hooks the engine (transformers 5.17, generation/continuous_batching/; see docs/engine-hf.md):

* `ContinuousBatchingManager._run_generation_loop` (continuous_api.py) is the engine's own serving loop. `start()`
  runs it in a background thread; `run()` calls it on the calling thread instead, after queueing every request and
  requesting FLUSH_AND_STOP, so the loop serves all requests and returns. Same code, deterministic batches, and the
  tracer's instrumentation sees the forward on its own thread.
* `Scheduler.schedule_batch` (scheduler.py) is wrapped on the engine's scheduler instance: its return value (the
  `FutureRequestState`s it scheduled, with their query lengths) is what `StepInfo` is computed from.
* `ContinuousBatchProcessor._generation_step` (continuous_api.py) is wrapped on the processor instance to delimit a
  step, and the model's `forward` is wrapped on the model instance for the duration of `run()`: the engine's own
  call `model(**batch_data)` (ModelRunner._forward_process_and_sample, model_runner.py) reaches `on_forward`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..models import load_config

__all__ = ["HFEngine", "StepInfo", "ScheduledRequest", "EngineError", "CPU_DEFAULT_NUM_BLOCKS",
           "DEFAULT_MAX_BATCH_REQUESTS", "SCHEDULERS"]

# KV-cache blocks on CPU when num_blocks is None. On CUDA the engine sizes the cache from free GPU memory; on CPU it
# would need psutil and would then claim 90% of the machine's RAM. 331 blocks are far more than any CPU test needs
# (so the FIFO scheduler's 15% free-block safety margin never binds, as on a large GPU), and the value is odd so it
# does not collide with config values or the other limits when dimensions are labelled by value.
CPU_DEFAULT_NUM_BLOCKS = 331
# Maximum requests per batch. The engine's own default is min(1024, max_batch_tokens[, num_blocks]), which equals
# max_batch_tokens (521) here; the reference profiler uses 263 so that the two limits are distinguishable by value.
DEFAULT_MAX_BATCH_REQUESTS = 263
# The engine's scheduler policies (transformers' SCHEDULER_MAPPING): FIFO schedules decodes first, prefill_first the
# remainders of split prompts first. None = the engine's own default for a limit above (max_batch_tokens: from free
# memory; max_batch_requests: min(1024, max_batch_tokens, num_blocks)).
SCHEDULERS = ("fifo", "prefill_first")


class EngineError(RuntimeError):
    """The engine failed or did something other than what was asked (e.g. a request came back short)."""


@dataclass(frozen=True)
class ScheduledRequest:
    """One request in one scheduler step, as the engine scheduled it."""
    request_id: str
    query_tokens: int  # tokens of this request processed in this step
    past_tokens: int  # tokens of this request already in the KV cache before this step
    is_decode: bool  # True: one generated token after a finished prefill; False: a prompt (chunk)


@dataclass(frozen=True)
class StepInfo:
    """One scheduler step (= one model forward) of the continuous-batching engine."""
    step: int  # 0-based, in execution order
    num_tokens: int  # query tokens scheduled this step (the forward's token count, before any padding)
    num_requests: int  # requests scheduled this step
    num_prefill_tokens: int  # tokens of prompt (chunks) in this step
    num_decode_requests: int  # requests decoding one token in this step
    kind: str  # "prefill" (no decode), "decode" (no prompt token) or "mixed"
    num_prefill_requests: int = 0
    max_kv_read: int = 0  # the scheduler's cache-read budget used (KV tokens read by the varlen attention path)
    requests: tuple[ScheduledRequest, ...] = field(default_factory=tuple)
    # run(timed=True): where the step's wall time went, in seconds (docs/engine-hf.md, "Host cost per step").
    times: dict | None = None


def _resolve_dtype(dtype, device: str):
    import torch
    if dtype is None:
        return torch.float32 if device == "cpu" else torch.bfloat16
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        value = getattr(torch, dtype.removeprefix("torch."), None)
        if isinstance(value, torch.dtype):
            return value
    raise ValueError(f"dtype {dtype!r} is not a torch dtype. Pass e.g. torch.bfloat16 or 'float32'.")


class HFEngine:
    """A transformers model with random weights behind the engine's continuous-batching manager."""

    def __init__(self, config_path: str, attention: str = "paged|sdpa", device: str = "cpu", dtype=None,
                 block_size: int = 256, num_blocks: int | None = None, max_batch_tokens: int | None = 521,
                 seed: int = 0, max_batch_requests: int | None = DEFAULT_MAX_BATCH_REQUESTS, cuda_graphs: bool = False,
                 scheduler: str = "fifo"):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, ContinuousBatchingConfig, GenerationConfig

        if scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler {scheduler!r} is not one of the engine's: {', '.join(SCHEDULERS)}")
        if not attention.startswith("paged|"):
            raise ValueError(f"attention {attention!r} is not a paged implementation; the continuous-batching engine "
                             f"runs only paged ones. Use e.g. 'paged|sdpa' or 'paged|eager'.")
        self.config_path = str(config_path)
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise EngineError("device 'cuda' was asked for but torch sees no CUDA device. Use device='cpu'.")
        self.dtype = _resolve_dtype(dtype, self.device.type)
        self.seed = seed
        self._version_check(transformers.__version__)

        self.config = load_config(config_path)
        # Random weights, a function of (config, seed, dtype, device), made on the device itself (an 8B model is
        # initialised in seconds on a GPU, minutes on the host); the caller's RNG state is left as it was.
        rng_devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=rng_devices), torch.device(self.device):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(self.config, attn_implementation=attention, dtype=self.dtype)
        self.model = model.to(self.device).eval()

        if num_blocks is None and self.device.type == "cpu":
            num_blocks = CPU_DEFAULT_NUM_BLOCKS
        # Greedy decoding, no logits processors, EOS disabled per request in run(): outputs have exact lengths.
        self.generation_config = GenerationConfig(do_sample=False, max_new_tokens=1, eos_token_id=-1,
                                                  pad_token_id=0)
        # CUDA graphs, torch.compile and async batching off by default: with graphs the engine replays captured
        # graphs instead of calling the Python forward every step (nothing to trace). With paged|sdpa / paged|eager
        # the engine's own defaults are already these (an attention mask is needed). cuda_graphs=True asks for
        # them on both paths (the host-cost measurement, run(timed=True); the engine turns them off on a CPU).
        self.cuda_graphs = bool(cuda_graphs)
        self.cb_config = ContinuousBatchingConfig(
            block_size=block_size, num_blocks=num_blocks, max_batch_tokens=max_batch_tokens,
            max_requests_per_batch=max_batch_requests, scheduler_type=scheduler, use_cuda_graph=self.cuda_graphs,
            use_async_batching=False, default_compile_level=0, seed=seed)
        self._manager = self.model.init_continuous_batching(generation_config=self.generation_config,
                                                            continuous_batching_config=self.cb_config)
        # Build the paged cache and scheduler now so that limits() reports the engine's resolved values.
        self._manager.batch_processor = self._manager._create_batch_processor()
        self.last_prompts: dict[str, list[int]] = {}  # the last run's prompt token ids, by request id
        self.last_outputs: dict[str, list[int]] = {}  # the last run's generated token ids, by request id
        self._runs = 0

    @staticmethod
    def _version_check(version: str) -> None:
        major_minor = tuple(int(x) for x in version.split(".")[:2])
        if major_minor < (5, 17):
            raise EngineError(f"dooly's HF engine driver hooks transformers 5.17 internals; found {version}. Run "
                              f"scripts/setup_python.sh (it installs the pinned version).")

    # ---------------------------------------------------------------------------------------------- introspection

    def engine_info(self) -> dict:
        import torch
        import transformers
        bp = self._manager.batch_processor
        if self.device.type == "cuda":
            device_name = torch.cuda.get_device_name(self.device)
        else:
            device_name = f"cpu ({os.cpu_count()} cores)"
        return {
            "engine": "hf-transformers",
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda,
            "attention": self.model.config._attn_implementation,
            "dtype": str(self.dtype).removeprefix("torch."),
            "kv_dtype": str(bp.cache.dtype).removeprefix("torch."),
            "block_size": bp.cache.block_size,
            "device": str(self.device),
            "device_name": device_name,
            "scheduler": type(bp.scheduler).__name__,
            "cuda_graphs": list(self._manager.continuous_batching_config.cuda_graph_booleans),
        }

    def limits(self) -> dict:
        """The engine's resolved batch limits (taint sources: they bound slices of request-sized tensors)."""
        bp = self._manager.batch_processor
        return {
            "max_batch_tokens": bp.cache.max_batch_tokens,
            "max_batch_requests": bp.scheduler.max_requests_per_batch,
            "block_size": bp.cache.block_size,
            "num_blocks": bp.cache.num_blocks,
        }

    def serving_config(self) -> dict:
        """Everything the engine resolved that decides how it batches (what a simulator of this engine must be run
        with): the limits, the scheduler and its safety margin, the decode fast path, the CUDA-graph paths and
        padding, block sharing, async batching."""
        bp = self._manager.batch_processor
        cfg = self._manager.continuous_batching_config
        sched = bp.scheduler
        return {
            **self.limits(),
            "scheduler": cfg.scheduler_type,
            "safety_margin": sched.safety_margin,
            "max_blocks_per_request": bp.cache.max_blocks_per_request,
            "decode_fast_path_max_tokens": sched.max_decode_fast_path_length,
            "cuda_graphs": {"varlen": bool(cfg.cuda_graph_booleans[0]), "decode": bool(cfg.cuda_graph_booleans[1])},
            "q_padding_interval_size": cfg.q_padding_interval_size,
            "kv_padding_interval_size": cfg.kv_padding_interval_size,
            "prefix_sharing": bool(bp.cache.use_prefix_sharing),
            "async_batching": bool(cfg.use_async_batching),
            "max_memory_percent": cfg.max_memory_percent,
            "cpu_offload_space_gib": cfg.cpu_offload_space,
        }

    def config_int_attributes(self) -> dict[str, int]:
        """Every integer attribute of the model config, sub-configs and dicts (rope parameters) included, by dotted
        name; list items are named `<name>.<index>`. Booleans are not integers here, and the classification label
        maps (`id2label`, `label2id`: PretrainedConfig's defaults for sequence-classification heads, not part of a
        causal LM) are left out."""
        data = {k: v for k, v in self.config.to_dict().items() if k not in _NOT_MODEL_FIELDS}
        out: dict[str, int] = {}
        _collect_ints(data, "", out)
        return out

    # ---------------------------------------------------------------------------------------------------- running

    def run(self, requests: list[tuple[int, int]], on_forward: Callable | None = None,
            timed: bool = False, engine_thread: bool = False) -> list[StepInfo]:
        """Serves `requests` = [(prompt_len, max_new_tokens), ...] (random prompt tokens) with the engine's own
        loop to completion; returns one StepInfo per scheduler step. `on_forward(step_info, call)` is invoked at
        each step's model forward; `call()` runs that forward and returns its output, and what on_forward returns
        is what the engine uses as the forward's output. `timed`: each StepInfo carries `times`, the step's wall
        time split into the engine's phases (_PhaseTimer); with CUDA graphs on, a replayed step runs no Python
        forward, so on_forward is not called for it. `engine_thread`: the loop runs in a thread of its own, as the
        manager runs it when serving (manager.start), and this call waits for it; otherwise in the caller's thread.
        The two differ in time: on the H200 an eager Llama-3.1-8B decode step took 25 ms in the caller's (main)
        thread and 65 ms in a thread of its own (scripts/gpu/host_cost_probe.py), so whatever times the engine
        for serving uses engine_thread=True."""
        import torch
        from transformers.generation.continuous_batching.continuous_api import BackgroundThreadStatus

        requests = [_check_request(i, r) for i, r in enumerate(requests)]
        if not requests:
            return []
        manager = self._manager
        if manager is None:
            raise EngineError("this HFEngine was closed; make a new one")
        bp = manager.batch_processor
        _drain(manager.output_router.output_queue)  # outputs a failed earlier run may have left behind
        vocab = self.config.get_text_config().vocab_size
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self._runs)
        self._runs += 1

        status = manager.background_thread_status
        status.clear()
        request_ids = []
        self.last_prompts, self.last_outputs = {}, {}
        for i, (prompt_len, new_tokens) in enumerate(requests):
            ids = torch.randint(0, vocab, (prompt_len,), generator=gen).tolist()
            rid = manager.add_request(ids, request_id=f"req_{i}", max_new_tokens=new_tokens, eos_token_id=-1)
            if rid is None:
                raise EngineError(f"the engine refused request {i}: {status.can_accept_new_requests()}")
            request_ids.append(rid)
            self.last_prompts[rid] = ids
        # The loop serves what is queued, then sees FLUSH_AND_STOP with nothing pending and returns.
        status.request_stop(BackgroundThreadStatus.FLUSH_AND_STOP, manager.distributed_helper.global_rank)

        graphs = any(manager.continuous_batching_config.cuda_graph_booleans)
        hooks = _StepHooks(self.model, bp, on_forward, expect_one_forward=not graphs)
        timer = _PhaseTimer(bp, hooks) if timed else contextlib.nullcontext()
        with hooks, timer:
            if engine_thread:
                loop = threading.Thread(target=manager._run_generation_loop, name="dooly-engine-loop")
                loop.start()
                loop.join()
            else:
                manager._run_generation_loop()
        if hooks.error is not None:
            raise hooks.error
        if status.fatal_error is not None:
            raise EngineError(f"the engine's generation loop failed: {status.fatal_error}") from status.fatal_error

        outputs = {out.request_id: out for out in _drain(manager.output_router.output_queue)}
        for rid, (prompt_len, new_tokens) in zip(request_ids, requests):
            out = outputs.get(rid)
            if out is None or out.error is not None:
                why = "no output" if out is None else out.error
                raise EngineError(f"request {rid} ({prompt_len} prompt tokens) did not complete: {why}")
            if len(out.generated_tokens) != new_tokens:
                raise EngineError(f"request {rid} generated {len(out.generated_tokens)} tokens, asked {new_tokens}")
            self.last_outputs[rid] = list(out.generated_tokens)
        return hooks.steps


    def close(self) -> None:
        """Releases the engine's KV cache and the model (GPU memory); the engine cannot run afterwards."""
        if self._manager is not None:
            self._manager.destroy()
            self._manager.batch_processor = None
            self._manager = None
            self.model = None
            import gc
            gc.collect()
            import torch
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def __enter__(self) -> "HFEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _drain(q) -> list:
    import queue
    items = []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items


def _check_request(i: int, r) -> tuple[int, int]:
    try:
        prompt_len, new_tokens = r
    except (TypeError, ValueError):
        raise ValueError(f"request {i} is {r!r}; each request is a (prompt_len, max_new_tokens) pair") from None
    if not (isinstance(prompt_len, int) and isinstance(new_tokens, int)) or prompt_len < 1 or new_tokens < 1:
        raise ValueError(f"request {i} is {r!r}; prompt_len and max_new_tokens must be integers >= 1")
    return prompt_len, new_tokens


def _collect_ints(value: Any, name: str, out: dict[str, int]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        out[name] = value
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect_ints(v, f"{name}.{k}" if name else str(k), out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _collect_ints(v, f"{name}.{i}", out)
    elif hasattr(value, "to_dict"):  # a sub-config object
        _collect_ints(value.to_dict(), name, out)


class _StepHooks:
    """Installs (on instances only, undone on exit) the wrappers that turn the engine's loop into StepInfos and
    route each step's model forward through on_forward."""

    def __init__(self, model, batch_processor, on_forward, expect_one_forward: bool = True):
        self.model = model
        self.bp = batch_processor
        self.on_forward = on_forward
        self.expect_one_forward = expect_one_forward  # False under CUDA graphs: a replay runs no Python forward
        self.steps: list[StepInfo] = []
        self.error: BaseException | None = None
        self._scheduled: StepInfo | None = None
        self._current: StepInfo | None = None
        self._forwards = 0
        self.last_forwards = 0

    def __enter__(self):
        from transformers.generation.continuous_batching.requests import RequestStatus
        scheduler = self.bp.scheduler
        orig_schedule = scheduler.schedule_batch
        orig_step = self.bp._generation_step
        orig_forward = self.model.forward
        self._saved_forward = self.model.__dict__.get("forward", _MISSING)

        def schedule_batch(token_budget, cache_budget):
            decoding = {rid for rid, st in scheduler.active_requests.items() if st.status == RequestStatus.DECODING}
            result = orig_schedule(token_budget, cache_budget)
            scheduled, _, num_q_tokens, max_kv_read = result
            if scheduled:  # None (cache full, the engine offloads and asks again) and [] (nothing to do) are no step
                self._scheduled = _step_info(len(self.steps), scheduled, decoding, num_q_tokens, max_kv_read)
            return result

        def generation_step(model):
            info, self._scheduled = self._scheduled, None
            if info is None:
                raise EngineError("the engine ran a step that its scheduler did not schedule (hook out of sync "
                                  "with this transformers version)")
            self._current, self._forwards = info, 0
            try:
                orig_step(model)
            finally:
                self._current = None
            self.last_forwards = self._forwards
            if self.expect_one_forward and self._forwards != 1:
                raise EngineError(f"step {info.step} ran the model forward {self._forwards} times, expected once "
                                  f"(CUDA graphs or compile would hide it)")
            self.steps.append(info)

        @functools.wraps(orig_forward)  # keeps the signature: the engine inspects it for logits_to_keep
        def forward(*args, **kwargs):
            info = self._current
            if info is None:  # a forward outside a scheduled step (none expected): run it plainly
                return orig_forward(*args, **kwargs)
            self._forwards += 1
            if self.on_forward is None:
                return orig_forward(*args, **kwargs)
            try:
                return self.on_forward(info, lambda: orig_forward(*args, **kwargs))
            except BaseException as e:
                self.error = self.error or e  # the engine's loop swallows exceptions; run() re-raises this one
                raise

        scheduler.schedule_batch = schedule_batch
        self.bp._generation_step = generation_step
        self.model.forward = forward
        return self

    def __exit__(self, *exc):
        del self.bp.scheduler.schedule_batch
        del self.bp._generation_step
        if self._saved_forward is _MISSING:
            del self.model.forward
        else:
            self.model.forward = self._saved_forward
        return False


class _PhaseTimer:
    """run(timed=True): wraps, on instances only and undone on exit, the engine's own phases of a step and records
    their wall time (perf_counter) into the step's StepInfo.times:

    prepare_s  ContinuousBatchProcessor.prepare_next_batch: requests in, scheduling, cache allocation, the
               step's host-side inputs (schedule_s: the scheduler's schedule_batch within it)
    kwargs_s   ContinuousBatchingIOs.get_model_kwargs: the model's keyword arguments (host to device)
    launch_s   ModelRunner.compute_batch: the forward, logits processing and sampling, as the host issues them
               (eager: every op's launch; CUDA graphs: a replay, or a capture the first time a size is seen)
    sync_s     ContinuousBatchingIOs.retrieve_device_outputs: waits for the device, copies the tokens back
    update_s   ContinuousBatchProcessor.update_batch: request states, outputs, freed blocks
    step_s     from prepare_next_batch's start to update_batch's end; other_s what none of these hold
    device_s   on CUDA, the span between events recorded before and after compute_batch on the compute
               stream: the device's time for the step's work, idle gaps while it waits for the host included
    forwards   Python forwards the step ran: 1 eager, 0 a graph replay, 2 a graph capture (warm-up + capture)
    """

    def __init__(self, batch_processor, hooks: "_StepHooks"):
        self.bp = batch_processor
        self.hooks = hooks
        self._saved: list[tuple[object, str, object]] = []
        self._cur: dict | None = None

    def _install(self, obj, name: str, make) -> None:
        """Replaces obj.name (on the instance) with make(original); __exit__ puts back what was there."""
        self._saved.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, make(getattr(obj, name)))

    def _wrap(self, obj, name: str, key: str, after=None):
        def make(orig):
            def timed(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return orig(*args, **kwargs)
                finally:
                    if self._cur is not None:
                        self._cur[key] = self._cur.get(key, 0.0) + time.perf_counter() - t0
                    if after is not None:
                        after()

            return timed

        self._install(obj, name, make)

    def __enter__(self):
        import torch

        bp, io = self.bp, self.bp.inputs_and_outputs
        cuda = torch.cuda.is_available() and getattr(io, "compute_stream", None) is not None

        def prepare(orig):  # a step starts here; a call that schedules nothing is no step
            def prepare_next_batch(*args, **kwargs):
                cur = {"t0": time.perf_counter()}
                self._cur = cur
                available = orig(*args, **kwargs)
                cur["prepare_s"] = time.perf_counter() - cur["t0"]
                if not available:
                    self._cur = None
                return available

            return prepare_next_batch

        self._install(bp, "prepare_next_batch", prepare)
        self._wrap(bp.scheduler, "schedule_batch", "schedule_s")
        self._wrap(io, "get_model_kwargs", "kwargs_s")

        def compute(orig):  # the launches, and on CUDA the device span between events around them
            def compute_batch(*args, **kwargs):
                cur = self._cur
                events = None
                if cuda:
                    events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                    events[0].record(io.compute_stream)
                t0 = time.perf_counter()
                try:
                    return orig(*args, **kwargs)
                finally:
                    if cur is not None:
                        cur["launch_s"] = time.perf_counter() - t0
                        if events is not None:
                            events[1].record(io.compute_stream)
                            cur["events"] = events

            return compute_batch

        self._install(bp.model_runner, "compute_batch", compute)
        self._wrap(io, "retrieve_device_outputs", "sync_s")
        self._wrap(bp, "update_batch", "update_s", after=self._close_step)
        return self

    def _close_step(self):
        cur, self._cur = self._cur, None
        if cur is None or not self.hooks.steps:
            return
        step_s = time.perf_counter() - cur.pop("t0")
        events = cur.pop("events", None)
        times = {k: cur.get(k, 0.0) for k in ("prepare_s", "schedule_s", "kwargs_s", "launch_s", "sync_s", "update_s")}
        times["step_s"] = step_s
        times["other_s"] = step_s - sum(times[k] for k in ("prepare_s", "kwargs_s", "launch_s", "sync_s", "update_s"))
        if events is not None:
            events[1].synchronize()
            times["device_s"] = events[0].elapsed_time(events[1]) * 1e-3
        times["forwards"] = self.hooks.last_forwards
        self.hooks.steps[-1] = dataclasses.replace(self.hooks.steps[-1], times=times)

    def __exit__(self, *exc):
        for obj, name, prev in reversed(self._saved):
            if prev is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, prev)
        self._saved = []
        return False


_MISSING = object()
_NOT_MODEL_FIELDS = frozenset({"id2label", "label2id"})


def _step_info(step: int, scheduled, decoding: set[str], num_q_tokens: int, max_kv_read: int) -> StepInfo:
    reqs = tuple(ScheduledRequest(request_id=fs.state.request_id, query_tokens=fs.query_length,
                                  past_tokens=fs.state.position_offset, is_decode=fs.state.request_id in decoding)
                 for fs in scheduled)
    num_tokens = sum(r.query_tokens for r in reqs)
    if num_tokens != num_q_tokens:
        raise EngineError(f"scheduler reported {num_q_tokens} query tokens but its requests hold {num_tokens}")
    decodes = sum(1 for r in reqs if r.is_decode)
    prefill_tokens = sum(r.query_tokens for r in reqs if not r.is_decode)
    kind = "decode" if prefill_tokens == 0 else "prefill" if decodes == 0 else "mixed"
    return StepInfo(step=step, num_tokens=num_tokens, num_requests=len(reqs), num_prefill_tokens=prefill_tokens,
                    num_decode_requests=decodes, kind=kind, num_prefill_requests=len(reqs) - decodes,
                    max_kv_read=max_kv_read, requests=reqs)
