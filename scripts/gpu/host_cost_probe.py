"""Why does a live step of the HF engine take longer than the host-cost measurement says? (issue 12, first live runs:
Llama-3.1-8B, CUDA graphs off, decode steps ~70 ms live against ~26 ms in dooly.profile.engine_cost.)

One process, one model, the same decode workload (B requests of P prompt tokens, O output tokens) served four ways
(`main` twice, first and last, to show the order does not matter),
each step timed from prepare_next_batch's start to update_batch's end:
  main        the engine's loop called in this thread (HFEngine.run: what engine_cost measures)
  thread      the engine's own background thread (manager.start), this thread waiting in get_result(timeout=0.05)
              as dooly.live's driver does
  thread-idle the background thread, this thread asleep in time.sleep (no queue polling)
  main-timed  HFEngine.run(timed=True): engine_cost's phase timer on top (its own cost)
and the engine built twice: with the live runs' limits (NUM_BLOCKS, MAX_BATCH_TOKENS) and with engine_cost's
(the engine's own block count, 521 tokens). Prints one line per (limits, way): median and p10/p90 of decode steps.

  PYTHONPATH=python python3 scripts/gpu/host_cost_probe.py [--model llama-3.1-8b] [--graphs off] [--threads N]
  (--device cpu --tiny: a smoke test of the script on a machine without a GPU)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def decode_durations(steps):
    d = sorted(s for kind, s in steps if kind == "decode")
    if not d:
        return "no decode steps"
    q = lambda f: d[min(len(d) - 1, int(f * len(d)))]
    return f"n {len(d):4d}  median {statistics.median(d) * 1e3:7.2f} ms  p10 {q(0.1) * 1e3:7.2f}  p90 {q(0.9) * 1e3:7.2f}"


def serve_main(engine, reqs, timed=False):
    from dooly.live.step_recorder import StepRecorder
    bp = engine._manager.batch_processor
    rec = StepRecorder(bp, None)
    with rec:
        engine.run(reqs, timed=timed)
    return [(s["kind"], s["end"] - s["start"]) for s in rec.steps]


def serve_thread(engine, reqs, idle: bool):
    from dooly.live.step_recorder import StepRecorder
    manager = engine._manager
    bp = manager.batch_processor
    rec = StepRecorder(bp, None)
    vocab = engine.config.get_text_config().vocab_size
    import random
    rng = random.Random(1)
    with rec:
        manager.start()
        rec.loop_running.wait(60)
        for i, (p, o) in enumerate(reqs):
            manager.add_request([rng.randrange(vocab) for _ in range(p)], request_id=f"t{i}_{time.time_ns()}",
                                max_new_tokens=o, eos_token_id=-1)
        done = 0
        deadline = time.perf_counter() + 120
        if idle:
            while not rec.steps or bp.scheduler.has_pending_requests():
                time.sleep(0.05)
                if time.perf_counter() > deadline:
                    break
            while done < len(reqs) and manager.get_result(timeout=1.0) is not None:
                done += 1
        else:
            while done < len(reqs) and time.perf_counter() < deadline:
                if manager.get_result(timeout=0.05) is not None:
                    done += 1
        manager.stop(block=True, keep_for_next_session=True)
    return [(s["kind"], s["end"] - s["start"]) for s in rec.steps]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--graphs", default="off")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--output", type=int, default=48)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tiny variant (a CPU smoke test of this script)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    from dooly.cli_trace import _config_path
    from dooly.engines.hf import HFEngine

    reqs = [(args.prompt, args.output)] * args.batch
    for label, limits in (("live limits (1024 blocks, 2048 tokens, 64 requests)",
                           dict(num_blocks=1024, max_batch_tokens=2048, max_batch_requests=64)),
                          ("engine_cost limits (own blocks, 521 tokens)", dict())):
        t = time.perf_counter()
        if args.device == "cpu" and not limits:
            limits = dict(num_blocks=64)
        engine = HFEngine(str(_config_path(args.model, args.tiny)), device=args.device,
                          cuda_graphs=args.graphs == "on", **limits)
        print(f"== {args.model} graphs {args.graphs}, {label}: built in {time.perf_counter() - t:.1f} s, "
              f"num_blocks {engine._manager.batch_processor.cache.num_blocks}", flush=True)
        engine.run(reqs)  # warm-up
        for way in ("main", "thread", "thread-idle", "main-timed", "main"):
            if way == "main":
                steps = serve_main(engine, reqs)
            elif way == "main-timed":
                steps = serve_main(engine, reqs, timed=True)
            else:
                steps = serve_thread(engine, reqs, idle=way == "thread-idle")
            print(f"  {way:<12} {decode_durations(steps)}", flush=True)
        engine.close()
        del engine
        if args.device == "cuda":
            import torch
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
