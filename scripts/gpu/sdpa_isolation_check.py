"""Does the SDPA unit timed alone run as fast as the engine's SDPA at the same shape? (issue 12: at CUDA-graph padded
decode shapes the unit alone and the engine's replays disagree both ways: Llama-3.1-8B's replays ran cuDNN's SDPA
at 582-585 us a call where the unit measured 432 us at (T 64, KV 16,448); OLMoE's padded replays took less than the
unit's 1,317 us at (64, 32,832) implies. First seen in docs/results/2026-12-04-h200-cudnn-sdpa-host-drift.md, which
named the candidate differences tried here; docs/results/2026-12-05-h200-settle-carry-check.md section 3.)

For each shape T x KV (query tokens x key/value tokens, one sequence of H heads of D) it times PyTorch's SDPA, cuDNN's
kernel forced, as the profiler times a unit (10 calls captured in a CUDA graph, the graph replayed; microseconds a
call, median of the replays), under input variants that differ in what the profiler rebuilds and the engine hands
over:
  unit        q, k, v contiguous, the additive mask a [1, 1, T, KV] view into a wider buffer (the traced layout),
              random values (what dooly.profile.units builds)
  blocks      the same layout, the mask as the engine's: 0 where a query row may read (its request's KV span), the
              dtype's lowest elsewhere, R requests splitting the KV evenly and padded query rows reading nothing
  blocks-eager the blocks variant launched eagerly, 10 calls between two synchronizations (no graph)
  q-strided   blocks, with q a [1, T, H, D] tensor transposed to [1, H, T, D] (a projection's view)
  fresh-kv    blocks, each call reading another of 4 copies of k and v (the engine's are new every layer; the
              unit's are made once and reused by every repetition)
  no-mask     q, k, v only (SDPA without a mask: the unmasked kernel's floor)
Prints one line per (shape, variant) and, with --json, writes them.

  python3 scripts/gpu/sdpa_isolation_check.py [--heads 32] [--dim 128] [--shapes 64x16448,64x32832,32x16416]
                                              [--requests 32] [--replays 50] [--json out.json]
(--device cpu runs the math kernel on tiny shapes: a smoke test of the script on a machine without a GPU)
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time

import torch


def make_mask(t, kv, requests, dtype, device, kind, gen):
    """A [1, 1, T, KV] view into a [1, 1, T, KV + 16] buffer (the traced layout: a view of a wider mask)."""
    buf = torch.empty(1, 1, t, kv + 16, dtype=dtype, device=device)
    mask = buf[..., :kv]
    if kind == "random":
        mask.copy_(torch.randn(1, 1, t, kv, dtype=dtype, device=device, generator=gen))
        return mask
    mask.fill_(torch.finfo(dtype).min)
    span = max(1, kv // requests)
    for r in range(min(requests, t)):  # request r's query row reads its own KV span; padded rows read nothing
        mask[0, 0, r, r * span:min(kv, (r + 1) * span)] = 0
    return mask


def inputs(t, kv, heads, dim, requests, variant, device, gen):
    dt = torch.bfloat16 if device == "cuda" else torch.float32
    if variant == "q-strided":
        q = torch.randn(1, t, heads, dim, dtype=dt, device=device, generator=gen).transpose(1, 2)
    else:
        q = torch.randn(1, heads, t, dim, dtype=dt, device=device, generator=gen)
    k = torch.randn(1, heads, kv, dim, dtype=dt, device=device, generator=gen)
    v = torch.randn(1, heads, kv, dim, dtype=dt, device=device, generator=gen)
    if variant == "no-mask":
        return q, k, v, None
    return q, k, v, make_mask(t, kv, requests, dt, device, "random" if variant == "unit" else "blocks", gen)


def time_calls(fn, device, replays, graphed, calls=10):
    """Microseconds a call: `calls` calls in a CUDA graph replayed `replays` times (median), or eager."""
    if device != "cuda":
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return 1e6 * (time.perf_counter() - t0) / calls
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    if graphed:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        run = g.replay
    else:
        def run():
            for _ in range(calls):
                fn()
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        samples.append(1e3 * a.elapsed_time(b) / calls)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--shapes", default="64x16448,64x32832,64x49216,32x16416,16x16400")
    ap.add_argument("--requests", type=int, default=32, help="requests the blocks mask splits the KV among")
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    if a.device != "cuda":
        shapes = [(4, 40)]
    ctx = None  # a factory: sdpa_kernel's context manager is single-use, so each variant enters a fresh one
    if a.device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)  # noqa: E731
    rows = []
    gen = torch.Generator(device=a.device).manual_seed(1)
    for t, kv in shapes:
        for variant in ("unit", "blocks", "blocks-eager", "q-strided", "fresh-kv", "no-mask"):
            base = {"blocks-eager": "blocks", "fresh-kv": "blocks"}.get(variant, variant)
            q, k, v, mask = inputs(t, kv, a.heads, a.dim, a.requests, base, a.device, gen)
            copies = [(k, v)] + ([(torch.randn_like(k), torch.randn_like(v)) for _ in range(3)]
                                 if variant == "fresh-kv" else [])
            turn = itertools.cycle(copies)  # a CUDA graph captures each call's copy; its replays read them in turn

            def fn():
                kk, vv = next(turn)
                return torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
            try:
                if ctx is not None:
                    with ctx():
                        us = time_calls(fn, a.device, a.replays, graphed=not variant.endswith("eager"))
                else:
                    us = time_calls(fn, a.device, a.replays, graphed=False)
                err = ""
            except RuntimeError as e:  # a variant cuDNN refuses: said, and the others go on
                us, err = float("nan"), str(e).splitlines()[0][:120]
            rows.append({"T": t, "KV": kv, "heads": a.heads, "dim": a.dim, "variant": variant, "us_per_call": us,
                         "error": err})
            print(f"T {t:5d} KV {kv:6d} H {a.heads:3d}  {variant:13s} {us:10.1f} us/call  {err}", flush=True)
            del q, k, v, mask, copies
        if a.device == "cuda":
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if a.device == "cuda" else a.device,
                       "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
