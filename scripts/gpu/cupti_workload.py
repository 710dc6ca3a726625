"""A PyTorch transformer forward loop, for measuring what libdooly_cupti.so costs a real workload.

Prints one JSON line: {"tag", "size", "iters", "seconds", "ms_per_iter", "block_ms"}. The timed part is
`iters` forward passes (no grad, bf16) between two synchronizations, after a warm-up; with --nvtx each pass is an
NVTX range (torch.cuda.nvtx), so the NVTX path is part of what is measured. The passes are also timed in blocks of
--block passes, each ended by a synchronization (block_ms: ms a pass in each block): the GPU VMs' hosts run at two
speeds in stretches of seconds, so a whole run's mean mixes them, while the fastest blocks of a run see a quiet
host, and a cost paid on every launch (CUPTI's, dooly's) is in every block. Each block's CPU time of the launching
thread (block_cpu_ms, ms a pass) leaves out time the hypervisor took the vCPU away (steal, recorded over the
run from /proc/stat for the cores the process may run on: steal_s): CUPTI's per-launch work runs in that thread.
Where the VM exposes a hardware counter (perf_event_open), block_instr gives the launching thread's user-mode
instructions a pass: a count the host's speed does not change.
  small: d_model 256, 4 heads, 4 layers, batch 8 x 128 tokens  -- many short kernels (launch-bound)
  large: d_model 2048, 16 heads, 8 layers, batch 8 x 1024 tokens -- long kernels (compute-bound)
"""
import argparse
import json
import os
import time

import torch

SIZES = {
    "small": dict(d=256, heads=4, layers=4, batch=8, seq=128),
    "large": dict(d=2048, heads=16, layers=8, batch=8, seq=1024),
}


def steal_s():
    """Seconds of steal over the cores this process may run on (/proc/stat, USER_HZ ticks); None where unreadable."""
    try:
        cores = {f"cpu{c}" for c in os.sched_getaffinity(0)}
        with open("/proc/stat") as f:
            rows = [line.split() for line in f if line.startswith("cpu")]
        return sum(int(r[8]) for r in rows if r[0] in cores) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def instruction_counter():
    """A reader of this thread's user-mode instructions (perf_event_open), or None where the VM has no counter."""
    try:
        import ctypes
        import struct
        attr = bytearray(112)  # struct perf_event_attr, PERF_ATTR_SIZE_VER5
        struct.pack_into("IIQ", attr, 0, 0, 112, 1)  # PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS
        struct.pack_into("Q", attr, 40, (1 << 5) | (1 << 6))  # exclude_kernel, exclude_hv
        buf = ctypes.create_string_buffer(bytes(attr), len(attr))
        fd = ctypes.CDLL(None, use_errno=True).syscall(298, buf, 0, -1, -1, 0)  # x86-64 perf_event_open
        if fd < 0:
            return None
        return lambda: int.from_bytes(os.read(fd, 8), "little")
    except (OSError, AttributeError):
        return None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--nvtx", action="store_true")
    p.add_argument("--tag", default="")
    p.add_argument("--block", type=int, default=100, help="passes a timed block (0: no blocks)")
    a = p.parse_args()
    s = SIZES[a.size]
    layer = torch.nn.TransformerEncoderLayer(s["d"], s["heads"], 4 * s["d"], dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, s["layers"], enable_nested_tensor=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(s["batch"], s["seq"], s["d"], device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(a.warmup):
            model(x)
        torch.cuda.synchronize()
        blocks, cpu, instr = [], [], []
        count = instruction_counter()
        ib = count() if count else 0
        s0 = steal_s()
        t0 = tb = time.perf_counter()
        cb = time.thread_time()
        for i in range(a.iters):
            if a.nvtx:
                torch.cuda.nvtx.range_push("forward")
            model(x)
            if a.nvtx:
                torch.cuda.nvtx.range_pop()
            if a.block and (i + 1) % a.block == 0:
                torch.cuda.synchronize()
                now = time.perf_counter()
                c = time.thread_time()
                blocks.append(1e3 * (now - tb) / a.block)
                cpu.append(1e3 * (c - cb) / a.block)
                tb, cb = now, c
                if count:
                    i1 = count()
                    instr.append((i1 - ib) / a.block)
                    ib = i1
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        s1 = steal_s()
    print(json.dumps({"tag": a.tag, "size": a.size, "iters": a.iters, "seconds": seconds,
                      "ms_per_iter": 1e3 * seconds / a.iters, "block_ms": [round(b, 5) for b in blocks],
                      "block_cpu_ms": [round(b, 5) for b in cpu],
                      "block_instr": [round(b) for b in instr] or None,
                      "steal_s": None if s0 is None or s1 is None else round(s1 - s0, 3)}))


if __name__ == "__main__":
    main()
