"""A PyTorch transformer forward loop, for measuring what libdooly_cupti.so costs a real workload.

Prints one JSON line: {"tag", "size", "iters", "seconds", "ms_per_iter"}. The timed part is
`iters` forward passes (no grad, bf16) between two synchronizations, after a warm-up; with --nvtx each pass is an
NVTX range (torch.cuda.nvtx), so the NVTX path is part of what is measured.
  small: d_model 256, 4 heads, 4 layers, batch 8 x 128 tokens  -- many short kernels (launch-bound)
  large: d_model 2048, 16 heads, 8 layers, batch 8 x 1024 tokens -- long kernels (compute-bound)
"""
import argparse
import json
import time

import torch

SIZES = {
    "small": dict(d=256, heads=4, layers=4, batch=8, seq=128),
    "large": dict(d=2048, heads=16, layers=8, batch=8, seq=1024),
}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--nvtx", action="store_true")
    p.add_argument("--tag", default="")
    a = p.parse_args()
    s = SIZES[a.size]
    layer = torch.nn.TransformerEncoderLayer(s["d"], s["heads"], 4 * s["d"], dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, s["layers"], enable_nested_tensor=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(s["batch"], s["seq"], s["d"], device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(a.warmup):
            model(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            if a.nvtx:
                torch.cuda.nvtx.range_push("forward")
            model(x)
            if a.nvtx:
                torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    print(json.dumps({"tag": a.tag, "size": a.size, "iters": a.iters, "seconds": seconds,
                      "ms_per_iter": 1e3 * seconds / a.iters}))


if __name__ == "__main__":
    main()
