"""Does the SDPA unit timed alone run as fast as the engine's SDPA at the same shape? (issue 12: the H200 store's
unit and the engine's CUDA-graph replays disagreed at padded decode shapes. The answer, on an H100: the replays'
582-585 us a call was the engine's start-up warm-up averaged in, and the unit's gap was the mask's row stride,
which cuDNN reads 1.13x slower when rows are 16-byte aligned only and 1.7x slower when they are not:
docs/results/2026-12-05-sdpa-mask-rows.md.)

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
  mask-wide   blocks, the mask a view into the engine's static buffer [1, 1, 2048, num_pages + 2048] (transformers
              5.17 continuous_batching/input_outputs.py: rows 264,192 elements apart for 1,024 blocks of 256)
  engine      the engine's whole attention path, LAYERS layers in one graph (integrations/sdpa_paged.py): gather
              the KV from a paged cache [num_pages, KV_HEADS, D] by a read index of whole blocks, transpose,
              repeat_kv to the query's heads, contiguous, SDPA with the mask-wide mask; us/call is per layer
  dooly       the unit's q, k, v with the mask dooly's profiler builds (dooly.profile.units.make_tensor) from the
              first SDPA op of --trace at the shape: the unit builder's layout rule itself (needs dooly_core)
  row-N       blocks, the mask's rows N elements apart (--mask-rows N,M,...: the layouts a trace's strides carry
              to other shapes, dooly_core.strides_at, against the engine's fixed-width buffer)
Every variant also reports the attention kernel's own device time and name (torch.profiler over a few replays) and
the SM clock and board power during its replays (nvidia-smi sampled every 50 ms).
Prints one line per (shape, variant) and, with --json, writes them.

  python3 scripts/gpu/sdpa_isolation_check.py [--heads 32] [--kv-heads 8] [--dim 128] [--layers 32]
                                              [--shapes 64x16448,64x32832,32x16416] [--requests 32] [--replays 200]
                                              [--json out.json]
(--device cpu runs the math kernel on tiny shapes: a smoke test of the script on a machine without a GPU)
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import time

import torch


def make_mask(t, kv, requests, dtype, device, kind, gen, row=0):
    """A [1, 1, T, KV] view into a [1, 1, T, row or KV + 16] buffer (the traced layout: a view of a wider mask)."""
    buf = torch.empty(1, 1, t, row if row >= kv else kv + 16, dtype=dtype, device=device)
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
    row = ENGINE_MASK_ROW if variant == "mask-wide" and device == "cuda" else 0
    if variant.startswith("row-"):
        row = int(variant[4:])
    return q, k, v, make_mask(t, kv, requests, dt, device, "random" if variant == "unit" else "blocks", gen, row)


ENGINE_MASK_ROW = 1024 * 256 + 2048  # num_pages + max_batch_tokens for 1,024 blocks of 256 and 2,048 tokens a step
ATTENTION_KERNEL = ("sdpa", "fmha", "flash", "attention", "attn")


def engine_path(t, kv, heads, kv_heads, dim, requests, layers, gen, block=256):
    """The engine's attention path for one padded step, `layers` times: a function of no arguments."""
    dt = torch.bfloat16
    pages = 1024 * block
    caches = [tuple(torch.randn(pages, kv_heads, dim, dtype=dt, device="cuda", generator=gen) for _ in "kv")
              for _ in range(min(layers, 4))]
    caches = [caches[i % len(caches)] for i in range(layers)]  # 4 caches of >= 1 GiB each: none stays in L2
    blocks = torch.randperm(pages // block, device="cuda", generator=gen)[: -(-kv // block)]
    read = (blocks[:, None] * block + torch.arange(block, device="cuda")).reshape(-1)[:kv]
    qs = [torch.randn(1, t, heads, dim, dtype=dt, device="cuda", generator=gen).transpose(1, 2)
          for _ in range(layers)]
    mask = make_mask(t, kv, requests, dt, "cuda", "blocks", gen, ENGINE_MASK_ROW)
    rep = heads // kv_heads

    def repeat_kv(x):
        if rep == 1:
            return x
        b, h, n, d = x.shape
        return x[:, :, None, :, :].expand(b, h, rep, n, d).reshape(b, h * rep, n, d)

    def fn():
        for (kc, vc), q in zip(caches, qs):
            k = repeat_kv(kc.index_select(0, read).transpose(0, 1).unsqueeze(0)).contiguous()
            v = repeat_kv(vc.index_select(0, read).transpose(0, 1).unsqueeze(0)).contiguous()
            torch.nn.functional.scaled_dot_product_attention(q.contiguous(), k, v, attn_mask=mask)
    return fn


class ClockSampler:
    """nvidia-smi's SM clock (MHz) and board power (W) every 50 ms while a variant replays: medians."""

    def __enter__(self):
        try:
            self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                       "--format=csv,noheader,nounits", "-lms", "50"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.p = None
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.clock = self.power = float("nan")
        if self.p is None:
            return
        self.p.terminate()
        out, _ = self.p.communicate()
        rows = []
        for line in out.splitlines()[2:]:  # the first samples may predate the replays
            try:
                rows.append([float(x) for x in line.split(",")[:2]])
            except ValueError:
                pass
        if rows:
            self.clock = statistics.median(r[0] for r in rows)
            self.power = statistics.median(r[1] for r in rows)


def attention_kernel(run, launches):
    """The attention kernel's device time a launch (us) and its name, from torch.profiler over `launches` runs."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(launches):
            run()
        torch.cuda.synchronize()
    best = None
    for e in prof.key_averages():
        name = e.key.lower()
        total = getattr(e, "device_time_total", None)
        if total is None:
            total = getattr(e, "cuda_time_total", 0.0)
        if any(w in name for w in ATTENTION_KERNEL) and e.count and (best is None or total > best[0]):
            best = (total, e.count, e.key)
    if best is None:
        return float("nan"), ""
    return best[0] / best[1], best[2]


def time_calls(fn, device, replays, graphed, calls=10):
    """Microseconds a call: `calls` calls in a CUDA graph replayed `replays` times (median), or eager; on a GPU also
    the attention kernel's time and name and the SM clock and power during the replays."""
    if device != "cuda":
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return {"us_per_call": 1e6 * (time.perf_counter() - t0) / calls}
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
    with ClockSampler() as clk:
        for _ in range(replays):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()
            samples.append(1e3 * a.elapsed_time(b) / calls)
    kern_us, kern = attention_kernel(run, 5)
    return {"us_per_call": statistics.median(samples), "kernel_us": kern_us, "kernel": kern,
            "sm_clock_mhz": clk.clock, "power_w": clk.power}


def first_sdpa(path):
    """The first scaled_dot_product_attention op of a trace with a mask (4 tensor inputs)."""
    with open(path) as f:
        stack = [json.load(f)]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if x.get("op") == "scaled_dot_product_attention" and len(x.get("inputs", [])) >= 4:
                return x
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))
    raise SystemExit(f"{path}: no scaled_dot_product_attention op with a mask")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8, help="the cache's heads (engine variant; GQA below --heads)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=32, help="layers in the engine variant's graph")
    ap.add_argument("--shapes", default="64x16448,64x32832,64x49216,32x16416,16x16400")
    ap.add_argument("--requests", type=int, default=32, help="requests the blocks mask splits the KV among")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--variants", default="unit,blocks,blocks-eager,q-strided,fresh-kv,no-mask,mask-wide,engine")
    ap.add_argument("--trace", default="", help="a trace whose first SDPA op the dooly variant rebuilds")
    ap.add_argument("--mask-rows", default="", help="comma-separated row strides: one row-N variant each")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    variants = a.variants.split(",") + [f"row-{n}" for n in a.mask_rows.split(",") if n]
    traced = None
    if a.trace:
        variants.append("dooly")
        traced = first_sdpa(a.trace)
    if a.device != "cuda":
        shapes = [(4, 40)]
        variants = [v for v in variants if v not in ("engine", "mask-wide")]
    ctx = None  # a factory: sdpa_kernel's context manager is single-use, so each variant enters a fresh one
    if a.device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)  # noqa: E731
    rows = []
    gen = torch.Generator(device=a.device).manual_seed(1)
    for t, kv in shapes:
        for variant in variants:
            calls, replays = 10, a.replays
            if variant == "engine":
                fn = engine_path(t, kv, a.heads, a.kv_heads, a.dim, a.requests, a.layers, gen)
                calls, replays, held = 1, max(3, a.replays // a.layers), ()
            elif variant == "dooly":
                from dooly.profile.units import make_tensor, shape_at
                mask_info = traced["inputs"][3]
                held = list(inputs(t, kv, a.heads, a.dim, a.requests, "no-mask", a.device, gen)[:3])
                held.append(make_tensor(mask_info, shape_at(mask_info, {"NUM_TOKS": t, "KV_TOKS": kv}), a.device, gen))

                def fn(held=held):
                    return torch.nn.functional.scaled_dot_product_attention(*held[:3], attn_mask=held[3])
            else:
                base = {"blocks-eager": "blocks", "fresh-kv": "blocks"}.get(variant, variant)
                q, k, v, mask = inputs(t, kv, a.heads, a.dim, a.requests, base, a.device, gen)
                copies = [(k, v)] + ([(torch.randn_like(k), torch.randn_like(v)) for _ in range(3)]
                                     if variant == "fresh-kv" else [])
                turn = itertools.cycle(copies)  # a CUDA graph captures each call's copy; replays read them in turn
                held = (q, k, v, mask, copies)

                def fn(turn=turn, q=q, mask=mask):
                    kk, vv = next(turn)
                    return torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
            try:
                if ctx is not None:
                    with ctx():
                        r = time_calls(fn, a.device, replays, graphed=not variant.endswith("eager"), calls=calls)
                else:
                    r = time_calls(fn, a.device, replays, graphed=False)
                err = ""
            except RuntimeError as e:  # a variant cuDNN refuses: said, and the others go on
                r, err = {"us_per_call": float("nan")}, str(e).splitlines()[0][:120]
            if variant == "engine":
                r["us_per_call"] /= a.layers
            if variant == "dooly":
                r["mask_strides"] = list(held[3].stride())
            rows.append({"T": t, "KV": kv, "heads": a.heads, "kv_heads": a.kv_heads, "dim": a.dim,
                         "variant": variant, **r, "error": err})
            extra = ""
            if "kernel_us" in r:
                extra = (f"kernel {r['kernel_us']:8.1f} us  SM {r['sm_clock_mhz']:6.0f} MHz  {r['power_w']:5.0f} W  "
                         f"{r['kernel'][:60]}")
            print(f"T {t:5d} KV {kv:6d} H {a.heads:3d}  {variant:13s} {r['us_per_call']:10.1f} us/call  {extra} {err}",
                  flush=True)
            del fn, held
            if a.device == "cuda":
                torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if a.device == "cuda" else a.device,
                       "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
