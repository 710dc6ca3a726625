"""One live run: the real engine serves a workload while its steps, tokens and energy are recorded; the result file
(docs/simulate.md, "Live runs") is built from the raw records.

Order: build the engine (dooly.engines.hf.HFEngine: random weights, the engine's own manager, cache and scheduler);
with CUDA graphs on, the engine's own warm-up (it pre-captures its graphs, as a server does at start); `warmup`
requests served and discarded; then the measured run: the energy engine starts, the engine's loop starts in its own
thread with the step recorder installed, the driver submits requests at their arrivals and collects results, the loop
is stopped and the energy engine's report read.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import sys
import time
from dataclasses import dataclass, field

from .driver import Driver
from .metrics import request_latencies, summarize
from .step_meter import StepMeter, counted_channels
from .step_recorder import StepRecorder

__all__ = ["LiveOptions", "run_live", "RESULT_VERSION"]

RESULT_VERSION = 1
# On a CPU the engine sizes nothing from free memory (HFEngine fixes the cache at 331 blocks) and would take ~43,000
# tokens a step, whose static buffers made the tiny engine's build take 37 s instead of 4: the CPU default is
# HFEngine's, 521.
CPU_MAX_BATCH_TOKENS = 521
LOOP_START_TIMEOUT_S = 120


@dataclass
class LiveOptions:
    model: str  # as given (a name or a config path)
    config_path: str  # the config file used
    workload: str
    device: str = "cpu"
    tiny: bool = False
    attention: str = "paged|sdpa"
    cuda_graphs: bool = False
    scheduler: str = "fifo"
    block_size: int = 256
    num_blocks: int | None = None
    max_batch_tokens: int | None = None
    max_batch_requests: int | None = None
    dtype: str | None = None
    warmup: int = 0
    seed: int = 0
    slo: dict = field(default_factory=dict)
    deadline_s: float | None = None
    argv: list = field(default_factory=list)


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def gpu_state(device: str) -> dict:
    """The board's SM clock, temperature, throttle reasons and UUID now, for a CUDA device (nvidia-smi's view, as the
    profiler records them at every point: a run's energy can be set beside the points' at the same temperature);
    {} for another device or where nvidia-smi is not there."""
    if not device.startswith("cuda"):
        return {}
    import torch

    from ..profile.measure import gpu_state as query
    return query(torch.device(device))


def run_live(opts: LiveOptions, log=lambda msg: print(msg, file=sys.stderr)) -> dict:
    """Runs the workload on the engine; returns the result document (version RESULT_VERSION). Raises EngineError /
    DriverError when the engine cannot serve; what went wrong but still gave data is listed in doc['problems']."""
    import dooly_core
    import torch

    from ..engines.hf import EngineError, HFEngine

    workload = dooly_core.workload_requests(opts.workload)
    n = len(workload["requests"])
    t_build = time.perf_counter()
    max_batch_tokens = opts.max_batch_tokens
    if max_batch_tokens is None and opts.device == "cpu":
        max_batch_tokens = CPU_MAX_BATCH_TOKENS
    engine = HFEngine(opts.config_path, attention=opts.attention, device=opts.device, dtype=opts.dtype,
                      block_size=opts.block_size, num_blocks=opts.num_blocks, max_batch_tokens=max_batch_tokens,
                      seed=opts.seed, max_batch_requests=opts.max_batch_requests, cuda_graphs=opts.cuda_graphs,
                      scheduler=opts.scheduler)
    try:
        manager = engine._manager
        setup = {"build_s": time.perf_counter() - t_build}
        if any(manager.continuous_batching_config.cuda_graph_booleans):
            t = time.perf_counter()
            manager.warmup()  # the engine's own: captures its varlen and decode graphs at their largest sizes
            setup["engine_warmup_s"] = time.perf_counter() - t
        if opts.warmup > 0:
            t = time.perf_counter()
            lengths = [(p, o) for _, _, p, o in workload["requests"][:opts.warmup]]
            lengths += lengths[:1] * (opts.warmup - len(lengths))  # fewer requests than asked: repeat the first
            engine.run(lengths)
            setup["warmup_requests"] = len(lengths)
            setup["warmup_s"] = time.perf_counter() - t
        if opts.device.startswith("cuda"):
            torch.cuda.synchronize()
        engine_doc = {**engine.engine_info(), **engine.serving_config(), "model": opts.model,
                      "config": opts.config_path, "tiny": opts.tiny, "seed": opts.seed}
        log(f"live: {opts.model}{' (tiny)' if opts.tiny else ''} on {engine_doc['device_name']}, {n} requests "
            f"({opts.workload}); num_blocks {engine_doc['num_blocks']}, max_batch_tokens "
            f"{engine_doc['max_batch_tokens']}, graphs {engine_doc['cuda_graphs']}")

        meter = StepMeter(dooly_core)
        log(f"live: energy: {meter.backend}" if meter else
            f"live: no power source, time only (the file says why): {meter.why[:150]}...")
        vocab = engine.config.get_text_config().vocab_size
        bp = manager.batch_processor
        recorder = StepRecorder(bp, meter if meter else None)
        driver = Driver(manager, workload, vocab, seed=opts.seed, deadline_s=opts.deadline_s,
                        gate=recorder.intake)
        board = {"start": gpu_state(opts.device)}
        with recorder:
            meter.start()
            manager.start()
            try:
                # The loop's start (the engine resets its cache and buffers: a second on a CPU) is not serving time.
                if not recorder.loop_running.wait(LOOP_START_TIMEOUT_S):
                    raise EngineError(f"the engine's loop did not start within {LOOP_START_TIMEOUT_S} s")
                t0 = time.perf_counter()
                records = driver.run(t0)
            finally:
                manager.stop(block=True, hard_stop=driver.aborted, keep_for_next_session=False)
                report = meter.stop()
        board["end"] = gpu_state(opts.device)
        wall_s = time.perf_counter() - t0
    finally:
        engine.close()
    return _document(opts, workload, engine_doc, setup, records, recorder, meter, report, t0, wall_s, driver, board)


def _document(opts, workload, engine_doc, setup, records, recorder, meter, report, t0, wall_s, driver,
              board) -> dict:
    problems: list[str] = []
    if recorder.error is not None:
        problems.append(f"the step recorder failed in the engine's thread: {recorder.error!r}")

    # Steps, relative to t0, with their energy (the trapezoid over their window, summed over the counted channels).
    counted = counted_channels(report.get("channels", []), opts.device) if report else []
    energies = meter.window_energies(counted) if report else {}
    steps = []
    for s in recorder.steps:
        w = energies.get(s["window"]) if s["window"] else None
        steps.append({
            "index": s["index"], "start_s": _r(s["start"] - t0), "end_s": _r(s["end"] - t0),
            "duration_s": _r(s["end"] - s["start"]), "kind": s["kind"], "num_tokens": s["num_tokens"],
            "num_requests": s["num_requests"], "num_prefill_tokens": s["num_prefill_tokens"],
            "num_decode_requests": s["num_decode_requests"], "decode_fast_path": s["decode_fast_path"],
            "max_kv_read": s["max_kv_read"], "energy_j": w["energy_j"] if w else None,
            "requests": s["requests"],
        })
        if "captured" in s:  # CUDA graphs: the graphs the engine holds after the step, and whether it captured one
            steps[-1].update(graphs=s["graphs"], captured=s["captured"])
        if s["window_opened_late"]:
            problems.append(f"step {s['index']}: its energy window opened after the step's scheduling")
    if meter and report and any(st["energy_j"] is None for st in steps):
        problems.append("some steps have no energy (their windows are missing from the energy engine's report)")

    # The split: each step's energy to its requests in proportion to the tokens each computed in it.
    share: dict[str, float] = {}
    computed: dict[str, int] = {}
    for st in steps:
        for r in st["requests"]:
            computed[r["id"]] = computed.get(r["id"], 0) + r["new_tokens"]
            if st["energy_j"] is not None and st["num_tokens"] > 0:
                share[r["id"]] = share.get(r["id"], 0.0) + st["energy_j"] * r["new_tokens"] / st["num_tokens"]

    requests = []
    clock_ok = 0
    for rid, arrival_s, prompt, output in workload["requests"]:
        rec = records.get(rid)
        if rec is None:  # never submitted (the deadline came first)
            requests.append({"id": rid, "submitted": False, "finished": False, "scheduled_arrival_s": arrival_s,
                             "prompt_tokens": prompt, "output_tokens": 0, "requested_output_tokens": output,
                             "arrival_s": None, "ttft_s": None, "tpot_s": None, "e2e_s": None, "energy_j": None,
                             "token_times_s": []})
            continue
        # The recorder's view first: it keeps the first state's created_time and every token's stamp across the
        # engine's evictions; the delivered result holds only what followed the last one (and must be its tail).
        created = recorder.created.get(rid, rec["created"] if rec["created"] is not None else rec["submit_after"])
        if rec["submit_before"] <= created <= rec["submit_after"]:
            clock_ok += 1
        arrival = created - t0
        stamps = recorder.token_times.get(rid, [])
        if rec["finished"] and stamps[len(stamps) - len(rec["token_times"]):] != rec["token_times"]:
            problems.append(f"request {rid}: the engine delivered token times that the step recorder did not see")
        times = [t - t0 for t in stamps]
        lat = request_latencies(arrival, times) if rec["finished"] and times else None
        if rec["finished"] and rec["output_tokens"] != output:
            problems.append(f"request {rid} generated {rec['output_tokens']} tokens, asked {output}")
        if rec["finished"] and len(times) != rec["output_tokens"]:
            problems.append(f"request {rid} has {len(times)} token timestamps for {rec['output_tokens']} tokens")
        if rec["error"]:
            problems.append(f"request {rid} failed in the engine: {rec['error']}")
        requests.append({
            "id": rid, "submitted": True, "finished": rec["finished"] and lat is not None,
            "user": rec["user"], "arrival_s": _r(arrival),
            "scheduled_arrival_s": _r(rec["due"] - t0), "submit_lag_s": _r(rec["submit_before"] - rec["due"]),
            "prompt_tokens": prompt, "output_tokens": rec["output_tokens"], "requested_output_tokens": output,
            "ttft_s": _r(lat["ttft_s"]) if lat else None, "tpot_s": _r(lat["tpot_s"]) if lat else None,
            "e2e_s": _r(lat["e2e_s"]) if lat else None,
            "energy_j": share.get(rid, 0.0) if meter and report else None,
            "computed_tokens": computed.get(rid, 0),
            # Tokens fed to the model beyond prompt + output - 1 (the last sampled token is never fed back): a
            # request evicted from a full cache (`evictions`) and computed again.
            "recomputed_tokens": computed.get(rid, 0) - (prompt + rec["output_tokens"] - 1) if rec["finished"] else None,
            "evictions": recorder.resets.get(rid, 0),
            "error": rec["error"],
            "token_times_s": [_r(t) for t in times],
        })
    if clock_ok != len(records):
        problems.append(f"{len(records) - clock_ok} requests have an engine created_time outside their add_request "
                        f"call: the engine's timestamps are not on perf_counter")

    done = [r for r in requests if r["finished"]]
    duration_s = max((r["token_times_s"][-1] for r in done), default=0.0)
    power = meter.describe(opts.device)
    power["gpu_state"] = board  # the board at the run's start and end (SM clock, temperature, throttle reasons)
    energy_totals = None
    if meter and report:
        sel = [c for c in power["channels"] if c["name"] in power["counted_channels"]]
        run_j = math.fsum(c["run_energy_j"] for c in sel)
        steps_j = math.fsum(st["energy_j"] or 0.0 for st in steps)
        empty_j = math.fsum(energies[w]["energy_j"] for w in recorder.empty_windows if w in energies)
        counters = [c["counter_delta_j"] for c in sel]
        counter_j = math.fsum(counters) if counters and all(c is not None for c in counters) else None
        run_s = max((c["run_time_s"] for c in sel), default=None)
        power.update({
            "run_time_s": run_s, "run_energy_j": run_j, "steps_energy_j": steps_j,
            "empty_windows_energy_j": empty_j, "between_steps_energy_j": run_j - steps_j - empty_j,
            "requests_energy_j": math.fsum(r["energy_j"] or 0.0 for r in requests),
            "counter_delta_j": counter_j,
            "counter_ratio": run_j / counter_j if counter_j else None,
            "split": "each step's energy to its requests in proportion to the tokens each computed in the step",
        })
        energy_totals = {"run_energy_j": run_j, "run_time_s": run_s, "steps_energy_j": steps_j}

    summary = summarize(requests, duration_s, opts.slo, energy_totals)
    summary.update({
        "steps": len(steps),
        "recomputed_tokens": sum(r["recomputed_tokens"] or 0 for r in done),
        "evictions": sum(r.get("evictions", 0) for r in requests),
        "aborted_at_deadline": driver.aborted,
    })
    if driver.aborted:
        problems.append(f"the deadline ({opts.deadline_s} s) passed with {len(requests) - len(done)} requests "
                        f"unfinished")
    return {
        "version": RESULT_VERSION,
        "kind": "live",
        "summary": summary,
        "requests": requests,
        "steps": steps,
        "workload": {k: v for k, v in workload.items() if k != "requests"} | {"n": len(workload["requests"])},
        "engine": engine_doc,
        "power": power,
        "run": {
            "clock": "seconds from the run's start (time 0 of the arrivals), perf_counter (CLOCK_MONOTONIC), the "
                     "clock of the engine's created_time and token timestamps",
            "wall_s": wall_s, "setup": setup, "deadline_s": opts.deadline_s, "host": socket.gethostname(),
            "python": platform.python_version(), "pid": os.getpid(), "argv": opts.argv,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "problems": problems,
    }
