#!/usr/bin/env python3
"""The composition check on a GPU (issue 11, section 3; python/dooly/profile/composition.py says how): for each
trace given (traced on this GPU, so its ops carry their in-engine kernel time), every step's identical op records
are run alone at the traced sizes and timed the profiler's way; their sum x calls is compared with the step's
kernel time in the engine. Prints one line per step and the largest contributors per trace; writes a JSON file.

  PYTHONPATH=python:/tmp/dooly-core python3 scripts/gpu/composition_check.py --out OUT.json TRACE.json...
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from dooly.profile.composition import by_op, check_step  # noqa: E402
from dooly.profile.measure import Settings  # noqa: E402
from dooly.profile.units import load_trace  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--grid", default="data/grids/default.json", help="its measure settings time the units")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-steps", type=int, default=4)
    ap.add_argument("--inputs", default="cycled,warm",
                    help="input policies, comma-separated: cycled (the profiler's: every input cycled past the L2), "
                         "warm (weights cycled, activations kept in place)")
    args = ap.parse_args()
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    settings = Settings(json.load(open(args.grid))["measure"])
    results = []
    for path, inputs in [(p, i) for p in args.traces for i in args.inputs.split(",")]:
        trace = load_trace(path)
        t0 = time.perf_counter()
        checks = [check_step(s, dev, settings, inputs=inputs) for s in trace["steps"][: args.max_steps]]
        for c in checks:
            gap = f"{100 * c['gap']:+6.2f} %" if c["gap"] is not None else "   n/a"
            print(f"{trace['model']:<24} {trace['attention']:<14} {inputs:<6} step {c['step']:>3} {c['kind']:<8} "
                  f"{c['num_tokens']:>5} tok {c['num_requests']:>3} req  engine {c['engine_s'] * 1e3:8.3f} ms  "
                  f"alone {c['predicted_s'] * 1e3:8.3f} ms  gap {gap}  not alone {c['not_isolated_s'] * 1e3:.3f} ms  "
                  f"step kernels {c['step_kernel_s'] * 1e3:.3f} ms", flush=True)
        ops = by_op(checks)
        for a in ops[:8]:
            print(f"    {a['op']:<32} calls {a['calls']:>5}  engine {a['engine_s'] * 1e3:8.3f} ms  "
                  f"alone {a['predicted_s'] * 1e3:8.3f} ms  alone (kernels) {a['predicted_kernel_s'] * 1e3:8.3f} ms"
                  f"{'  not alone: %d calls' % a['not_isolated_calls'] if a['not_isolated_calls'] else ''}")
        results.append({"trace": os.path.basename(path), "model": trace["model"], "attention": trace["attention"],
                        "inputs": inputs,
                        "seconds": time.perf_counter() - t0, "steps": checks, "by_op": ops})
    json.dump({"device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu", "results": results},
              open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
