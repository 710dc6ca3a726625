"""Submits a workload's requests to the engine's manager as their arrivals come, and collects the results.

Open loop (poisson, gamma, constant, trace): request i is submitted at run start + its arrival_s, whatever the engine
is doing. Closed loop (closed:users=U,...,think=T): U users; user u sends request u at the start, and each user sends
the next request not yet sent (in workload order) T seconds after its previous one finished (its last token). One
thread does both, submitting when a request is due and otherwise waiting on the engine's output queue until the next
one is due, so a submission is late only by the queue's wake-up (the file records each request's lag).

Each request: random prompt token ids of exactly its prompt length, `max_new_tokens` = its output length,
`eos_token_id=-1` (EOS disabled: exactly that many tokens), `record_timestamps=True` (the engine stamps each token
with perf_counter, the clock of its `created_time`, which is stamped inside add_request: the arrival).
"""

from __future__ import annotations

import heapq
import time
from typing import Callable

__all__ = ["Driver", "DriverError"]


class DriverError(RuntimeError):
    """The engine stopped serving (its loop failed or refused a request) before every request finished."""


class Driver:
    def __init__(self, manager, workload: dict, vocab_size: int, seed: int = 0,
                 clock: Callable[[], float] = time.perf_counter, deadline_s: float | None = None, gate=None):
        import numpy as np

        self.manager = manager
        self.workload = workload
        self.requests = workload["requests"]  # (id, arrival_s, prompt_tokens, output_tokens), arrival order
        self.closed = workload["arrivals"] == "closed"
        self.vocab = vocab_size
        self.rng = np.random.default_rng(seed)
        self.clock = clock
        self.deadline_s = deadline_s
        self.records: dict[str, dict] = {}
        self.aborted = False  # the deadline passed with requests unfinished
        # A lock the engine's thread holds over each step's intake (StepRecorder.intake): held while a group of
        # requests due at one moment is submitted, so they enter the same step.
        self.gate = gate

    def _submit(self, index: int, due: float, user: int | None) -> None:
        rid, arrival_s, prompt, output = self.requests[index]
        ids = self.rng.integers(0, self.vocab, size=prompt).tolist()
        before = self.clock()
        got = self.manager.add_request(ids, request_id=rid, max_new_tokens=output, record_timestamps=True,
                                       eos_token_id=-1)
        after = self.clock()
        if got is None:
            why = self.manager.background_thread_status.can_accept_new_requests()
            raise DriverError(f"the engine refused request {rid}: {why}")
        self.records[rid] = {"index": index, "user": user, "due": due, "submit_before": before,
                             "submit_after": after, "prompt_tokens": prompt, "requested_output_tokens": output,
                             "finished": False, "error": None, "created": None, "token_times": [],
                             "output_tokens": 0}

    def run(self, t0: float) -> dict[str, dict]:
        """Serves every request (or until the deadline); returns the records by request id (perf_counter times)."""
        n = len(self.requests)
        due: list[tuple[float, int, int | None]] = []  # (due time, request index, user)
        if self.closed:
            users = min(int(self.workload["users"]), n)
            due = [(t0, i, i) for i in range(users)]
            next_index = users
        else:
            due = [(t0 + r[1], i, None) for i, r in enumerate(self.requests)]
            next_index = n
        heapq.heapify(due)
        think = float(self.workload.get("think_s", 0.0))
        done = 0
        while done < n:
            now = self.clock()
            if self.deadline_s is not None and now - t0 > self.deadline_s:
                self.aborted = True
                break
            if due and due[0][0] <= now:
                self._submit_due(due, now)
            wait = 0.05 if not due else min(0.05, max(0.0, due[0][0] - self.clock()))
            out = self.manager.get_result(timeout=wait)
            if out is None:
                self._check_engine(done, n)
                continue
            rec = self.records.get(out.request_id)
            if rec is None or rec["finished"] or rec["error"]:
                continue  # not ours (none expected) or delivered twice
            self._record(rec, out)
            done += 1
            if self.closed and next_index < n:
                finished = rec["token_times"][-1] if rec["token_times"] else self.clock()
                heapq.heappush(due, (max(finished + think, t0), next_index, rec["user"]))
                next_index += 1
        return self.records

    def _submit_due(self, due: list, now: float) -> None:
        """Every request due by now, as one group the engine's next step waits for (see `gate`)."""
        if self.gate is not None:
            self.gate.acquire()
        try:
            while due and due[0][0] <= now:
                when, i, user = heapq.heappop(due)
                self._submit(i, when, user)
        finally:
            if self.gate is not None:
                self.gate.release()

    def _record(self, rec: dict, out) -> None:
        rec["created"] = float(out.created_time)
        rec["token_times"] = [float(t) for t in (out.timestamps or [])]
        rec["output_tokens"] = len(out.generated_tokens)
        if out.error is not None:
            rec["error"] = " ".join(str(out.error).split())
        else:
            rec["finished"] = True

    def _check_engine(self, done: int, n: int) -> None:
        status = self.manager.background_thread_status
        if status.fatal_error is not None:
            raise DriverError(f"the engine's loop failed with {done} of {n} requests finished: "
                              f"{' '.join(str(status.fatal_error).split())}")
        if not self.manager.is_running():
            raise DriverError(f"the engine's loop stopped with {done} of {n} requests finished")
