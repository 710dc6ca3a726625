"""dooly.energy on a GPU: a PyTorch loop's windows against the board's energy counter (docs/python-energy.md).

Per phase (a tensor-core GEMM loop, a memory-bound copy loop, idle sleep), one Monitor around one window of
--seconds: the window's energy (trapezoid and model) is compared with the NVML counter's delta over the monitor's
run less the idle baseline times the part of the run outside the window; then one Monitor with the phases
interleaved as many short windows (J/call with intervals, the conservation ratio). Prints one JSON line per check.
"""
import argparse
import json
import sys
import time

import torch

import dooly.energy as de


def gemm(n=8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.mm(a, b)


def copy(n=1 << 28):
    a = torch.empty(n, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)
    return lambda: b.copy_(a)


def run_for(fn, seconds):
    t_end = time.monotonic() + seconds
    calls = 0
    while time.monotonic() < t_end:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        calls += 10
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--short-ms", type=float, default=200.0)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    phases = {"gemm": gemm(), "copy": copy(), "idle": lambda: time.sleep(0.001)}
    for fn in phases.values():
        fn()
    torch.cuda.synchronize()
    for name, fn in phases.items():
        with de.Monitor(gpus=[0], baseline_ms=1000) as mon:
            with mon.measure(name):
                run_for(fn, args.seconds)
        rep = mon.report
        ch = next(c for c in rep.raw["channels"] if c["name"] in rep.counted)
        w = rep[name]
        counter = ch["conservation"]["counter_delta_j"]
        outside = ch["run_time_s"] - w.time_s
        expect = None if counter is None else counter - ch["baseline_w"] * outside
        print(json.dumps({"check": "long_window", "phase": name, "time_s": w.time_s,
                          "trapezoid_j": w.rows[0].trapezoid_energy_j, "model_j": w.rows[0].model_energy_j,
                          "counter_delta_j": counter, "baseline_w": ch["baseline_w"], "outside_s": outside,
                          "counter_window_j": expect,
                          "trapezoid_vs_counter": None if not expect else w.rows[0].trapezoid_energy_j / expect - 1,
                          "conservation_ratio": ch["conservation"]["ratio"]}), flush=True)
    with de.Monitor(gpus=[0], baseline_ms=1000) as mon:
        for _ in range(args.rounds):
            for name, fn in phases.items():
                with mon.measure(name):
                    run_for(fn, args.short_ms / 1000)
    rep = mon.report
    ch = next(c for c in rep.raw["channels"] if c["name"] in rep.counted)
    rows = {n: {"calls": rep[n].calls, "j_per_call": rep[n].j_per_call, "hw": rep[n].j_per_call_hw,
                "mode": rep[n].rows[0].mode, "trapezoid_j_per_call": rep[n].rows[0].trapezoid_j_per_call,
                "avg_power_w": rep[n].avg_power_w} for n in phases}
    print(json.dumps({"check": "interleaved", "rows": rows, "conservation_ratio": ch["conservation"]["ratio"],
                      "baseline_w": ch["baseline_w"], "fit_r2": ch["model_fit"]["r_squared"]}), flush=True)
    print(rep.table(), file=sys.stderr)


if __name__ == "__main__":
    main()
