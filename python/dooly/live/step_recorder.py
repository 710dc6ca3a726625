"""Records every scheduler step of the engine's own serving loop while it runs in its own thread: the step's
window (start, end) and its batch composition (each request's new tokens and cached context), as the engine's
scheduler made it; optionally opens and closes an energy window around each step.

Hooks (transformers 5.17, generation/continuous_batching/; installed on the instances only, undone on exit):

* `ContinuousBatchProcessor.prepare_next_batch` starts a step: it pulls new requests in, schedules, and builds the
  step's inputs; it returns True when there is a step to run. The energy window opens before it is called when
  there is work (requests pending or queued), so the window holds the step's host work from its start.
* `Scheduler.schedule_batch` (inside it) returns the `FutureRequestState`s scheduled, each with its query length;
  `state.position_offset` is the request's tokens already in the cache. The composition is read there, as
  dooly.engines.hf does for the tracer.
* `ContinuousBatchProcessor.update_batch` ends the step: it hands the sampled tokens to the requests (that is where
  the engine stamps each token's time) and delivers finished requests. The stamps the engine added to each scheduled
  request's state in the step are collected here, with the state's `created_time` (when the request entered the
  engine): when the cache is full the engine evicts a request and re-creates its state (a "soft reset": the tokens so
  far become its prompt, with a new created_time and no timestamps), so the result the engine delivers holds only
  the times after the last reset; the recorder's hold them all.

With CUDA graphs on, each step also records how many graphs the engine holds when it ends (`graphs`: the graph
buffers of `inputs_and_outputs`, one per IO pair in async mode) and whether the step captured one (`captured`): the
first step at a new padded shape runs a warm-up forward and a capture instead of a replay, the simulator's
`capture` path (docs/simulate.md), so a live run says which of its steps were captures and what they took.

The hooks run in the engine's thread. Nothing of dooly's may raise there: every piece of bookkeeping is guarded, the
first failure is kept in `error` (the run reports it when it ends) and the engine's own calls go on untouched.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["StepRecorder"]

_MISSING = object()


def graph_count(batch_processor) -> int | None:
    """CUDA graphs the engine holds (transformers 5.17: `inputs_and_outputs.graphs`, a CudaGraphBuffer, or one per
    IO pair's device IO in async mode); None where this version keeps them elsewhere."""
    io = getattr(batch_processor, "inputs_and_outputs", None)
    buffers = [getattr(io, "graphs", None)]
    buffers += [getattr(getattr(p, "device_io", None), "graphs", None) for p in (getattr(io, "io_pairs", None) or [])]
    sizes = [len(b._storage) for b in buffers if isinstance(getattr(b, "_storage", None), dict)]
    return sum(sizes) if sizes else None


SUBMISSION_WAIT_S = 1.0  # the longest a step waits for a group of simultaneous requests to be submitted


class StepRecorder:
    """Steps of the engine, in execution order, as dicts (perf_counter seconds; `window`: the energy window's name,
    None without a meter)."""

    def __init__(self, batch_processor, meter=None, clock: Callable[[], float] = time.perf_counter):
        self.bp = batch_processor
        self.meter = meter  # an object with begin(name) / end(name), or None
        self.clock = clock
        self.steps: list[dict] = []
        self.empty_windows: list[str] = []  # windows opened for work that turned out to schedule nothing
        self.error: BaseException | None = None
        self._saved: list[tuple[object, str, object]] = []
        self._scheduled = None  # (requests, decode fast path, max_kv_read) of this prepare's schedule
        self._current: dict | None = None
        self._windows = 0
        self.created: dict[str, float] = {}  # request id -> created_time of its first state (its arrival)
        self.token_times: dict[str, list[float]] = {}  # request id -> the engine's stamp of each of its tokens
        self.resets: dict[str, int] = {}  # request id -> states the engine re-created for it (evictions)
        self._states: dict[str, object] = {}
        self.loop_running = threading.Event()  # set at the loop's first prepare_next_batch: it serves from now on
        # Held by the driver while it submits the requests due at one moment, and by the engine's thread over each
        # prepare_next_batch (where the engine takes queued requests in and schedules): a group of simultaneous
        # requests enters one step whole, as the simulator orders them (arrivals before a step starting then).
        self.intake = threading.Lock()

    # ------------------------------------------------------------------------------------------------ install

    def _install(self, obj, name: str, make) -> None:
        self._saved.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, make(getattr(obj, name)))

    def __enter__(self) -> "StepRecorder":
        from transformers.generation.continuous_batching.requests import RequestStatus

        bp = self.bp
        scheduler = bp.scheduler

        def schedule(orig):
            def schedule_batch(*args, **kwargs):
                decoding = self._guard(lambda: {rid for rid, st in scheduler.active_requests.items()
                                                if st.status == RequestStatus.DECODING})
                result = orig(*args, **kwargs)
                self._guard(lambda: self._note_schedule(result, decoding))
                return result

            return schedule_batch

        def prepare(orig):
            def prepare_next_batch(*args, **kwargs):
                if not self.loop_running.is_set():
                    self._guard(self._register_thread)
                    self.loop_running.set()
                held = self.intake.acquire(timeout=SUBMISSION_WAIT_S)  # bounded: a stuck driver never stops it
                try:
                    t0 = self.clock()
                    window = self._guard(self._open_window_if_work)
                    self._scheduled = None
                    try:
                        available = orig(*args, **kwargs)
                    except BaseException:
                        self._guard(lambda: self._close_window(window))
                        raise
                finally:
                    if held:
                        self.intake.release()
                self._guard(lambda: self._after_prepare(available, t0, window))
                return available

            return prepare_next_batch

        def update(orig):
            def update_batch(*args, **kwargs):
                try:
                    return orig(*args, **kwargs)
                finally:
                    self._guard(self._end_step)

            return update_batch

        self._install(scheduler, "schedule_batch", schedule)
        self._install(bp, "prepare_next_batch", prepare)
        self._install(bp, "update_batch", update)
        return self

    def __exit__(self, *exc) -> bool:
        for obj, name, prev in reversed(self._saved):
            if prev is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, prev)
        self._saved = []
        if self._current is not None:  # the engine failed inside a step: close its window, keep what is known
            self._guard(self._end_step)
        return False

    # --------------------------------------------------------------------------------------- bookkeeping (guarded)

    def _guard(self, fn):
        """Runs fn; a failure is kept (the first one) and never reaches the engine."""
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - the engine's thread must not see dooly's failures
            if self.error is None:
                self.error = e
            return None

    THREAD_WINDOW = "<engine thread>"

    def _meter(self, method: str, name: str) -> bool:
        """meter.begin / meter.end; a meter that fails is dropped (the steps go on being recorded, without energy
        windows) and its failure kept. Returns whether the call was made."""
        if self.meter is None:
            return False
        try:
            getattr(self.meter, method)(name)
            return True
        except Exception as e:  # noqa: BLE001 - see _guard
            self.meter = None
            if self.error is None:
                self.error = e
            return False

    def _register_thread(self) -> None:
        """An empty window from the engine's thread before any step: the energy engine sets up a thread's event ring
        at its first event and stamps that event after the set-up (milliseconds late), so the first step's window
        would start late."""
        if self._meter("begin", self.THREAD_WINDOW):
            self._meter("end", self.THREAD_WINDOW)

    def _open_window_if_work(self) -> str | None:
        if self.meter is None:
            return None
        bp = self.bp
        if not bp.scheduler.has_pending_requests() and (bp.input_queue is None or bp.input_queue.empty()):
            return None  # an idle poll of the loop: no step can come of it
        return self._open_window()

    def _open_window(self) -> str | None:
        name = f"w{self._windows}"
        self._windows += 1
        return name if self._meter("begin", name) else None

    def _close_window(self, window: str | None) -> None:
        if window is not None:
            self._meter("end", window)

    def _note_schedule(self, result, decoding: set[str]) -> None:
        """Read at once: preparing the step's inputs moves each request's position_offset past the step's tokens."""
        scheduled, fast_path, _num_q_tokens, max_kv_read = result
        if scheduled:  # None: the cache is full (the engine offloads and asks again); []: nothing to run
            reqs = [{"id": fs.state.request_id, "new_tokens": int(fs.query_length),
                     "context_tokens": int(fs.state.position_offset), "decode": fs.state.request_id in decoding}
                    for fs in scheduled]
            marks = []
            for fs in scheduled:
                state, rid = fs.state, fs.state.request_id
                if rid not in self.created:
                    self.created[rid] = float(state.created_time)
                elif self._states.get(rid) is not state:
                    self.resets[rid] = self.resets.get(rid, 0) + 1
                self._states[rid] = state
                marks.append((state, len(state.timestamps or ())))
            self._scheduled = (reqs, bool(fast_path), int(max_kv_read), marks)

    def _after_prepare(self, available: bool, t0: float, window: str | None) -> None:
        if not available:
            if window is not None:
                self._close_window(window)
                self.empty_windows.append(window)
            return
        late = False
        if window is None and self.meter is not None:  # work arrived between the check and the queue's drain
            window, late = self._open_window(), True
        if self._scheduled is None:
            self._close_window(window)
            raise RuntimeError("the engine prepared a step its scheduler did not schedule (hook out of sync with "
                               "this transformers version)")
        reqs, fast_path, max_kv_read, marks = self._scheduled
        self._scheduled = None
        num_tokens = sum(r["new_tokens"] for r in reqs)
        decodes = sum(1 for r in reqs if r["decode"])
        prefill_tokens = num_tokens - sum(r["new_tokens"] for r in reqs if r["decode"])
        self._current = {
            "index": len(self.steps), "start": t0, "end": None, "window": window, "window_opened_late": late,
            "kind": "decode" if prefill_tokens == 0 else "prefill" if decodes == 0 else "mixed",
            "num_tokens": num_tokens, "num_requests": len(reqs), "num_prefill_tokens": prefill_tokens,
            "num_decode_requests": decodes, "decode_fast_path": fast_path, "max_kv_read": max_kv_read,
            "requests": reqs, "marks": marks, "graphs_before": graph_count(self.bp),
        }

    def _end_step(self) -> None:
        cur, self._current = self._current, None
        if cur is None:
            return
        cur["end"] = self.clock()
        self._close_window(cur["window"])
        before, after = cur.pop("graphs_before"), graph_count(self.bp)
        if after is not None:
            cur["graphs"] = after
            cur["captured"] = before is not None and after > before
        for state, before in cur.pop("marks"):
            stamps = state.timestamps or ()
            if len(stamps) > before:
                self.token_times.setdefault(state.request_id, []).extend(float(t) for t in stamps[before:])
            if state.status.name == "FINISHED" and self._states.get(state.request_id) is state:
                del self._states[state.request_id]  # bounded memory: a finished request is seen no more
        self.steps.append(cur)
