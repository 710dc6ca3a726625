"""python -m dooly.live (also `dooly live`): serve a workload on the real Hugging Face continuous-batching engine and
write the result file (docs/simulate.md, "Live runs").

  python -m dooly.live --model llama-3.1-8b --device cuda --cuda-graphs on \\
      --workload 'poisson:rate=2,n=200,prompt=uniform:128:1024,output=fixed:128,seed=1' --out live.json

Every argument is checked before torch is imported: bad input is one line on stderr and exit status 2. Exit 3: the
run finished but something in it is wrong (listed on stderr and in the file's "problems"); 1: the engine failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

PROG = "dooly live"


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage + error lines, as one line
        print(f"{PROG}: {message} (the flags: {PROG} --help)", file=sys.stderr)
        raise SystemExit(2)


def _positive(name):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            v = 0
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} takes a whole number >= 1, not '{text}'")
        return v

    return parse


def _non_negative(name, kind=int):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            v = -1
        if not v >= 0:
            raise argparse.ArgumentTypeError(f"{name} takes a number >= 0, not '{text}'")
        return v

    return parse


def parser() -> argparse.ArgumentParser:
    ap = _OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a model name from data/models/ (e.g. llama-3.1-8b) or a config.json")
    ap.add_argument("--tiny", action="store_true", help="the model's tiny variant (data/models/tiny/; CPU tests)")
    ap.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (auto: cuda when torch sees one)")
    ap.add_argument("--attention", default="paged|sdpa", help="a paged attention implementation (default paged|sdpa)")
    ap.add_argument("--cuda-graphs", choices=("on", "off"), default="off", help="the engine's CUDA graphs (default off)")
    ap.add_argument("--scheduler", choices=("fifo", "prefill_first"), default="fifo", help="the engine's scheduler")
    ap.add_argument("--max-batch-tokens", type=_positive("--max-batch-tokens"), default=None,
                    help="tokens per step (default: the engine's own, from free memory; 521 on a CPU)")
    ap.add_argument("--max-batch-requests", type=_positive("--max-batch-requests"), default=None,
                    help="requests per step (default: the engine's own)")
    ap.add_argument("--block-size", type=_positive("--block-size"), default=256, help="KV-cache block size (tokens)")
    ap.add_argument("--num-blocks", type=_positive("--num-blocks"), default=None,
                    help="KV-cache blocks (default: the engine's own from free GPU memory; 331 on a CPU)")
    ap.add_argument("--dtype", default=None, help="weights and cache dtype (default bfloat16 on a GPU, float32 on a CPU)")
    ap.add_argument("--workload", required=True, help="a workload spec (docs/simulate.md), e.g. "
                    "'poisson:rate=2,n=100,prompt=uniform:64:512,output=fixed:64,seed=1'")
    ap.add_argument("--out", required=True, help="the result file to write (JSON)")
    ap.add_argument("--warmup", type=_non_negative("--warmup"), default=0,
                    help="serve this many of the workload's first requests, all at once, before the measured run")
    ap.add_argument("--seed", type=_non_negative("--seed"), default=0, help="random weights and prompt token ids")
    ap.add_argument("--slo", default="", help="goodput SLOs in seconds, e.g. ttft_s=2,tpot_s=0.1,e2e_s=30")
    ap.add_argument("--deadline-s", type=_non_negative("--deadline-s", float), default=None,
                    help="end the run this many seconds after its start; unfinished requests are recorded as such")
    return ap


def _fail(message: str) -> int:
    print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _check_out(path: str) -> str | None:
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        return f"--out {path} is a folder; give a file name such as {path.rstrip('/')}/live.json"
    if not parent.is_dir():
        return f"--out {path}: the folder {parent} does not exist; create it first"
    if not os.access(parent, os.W_OK):
        return f"--out {path}: the folder {parent} is not writable; choose another place"
    return None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad flag (2, one line already printed)
        return e.code if isinstance(e.code, int) else 2

    from ..cli_trace import _config_path
    from .metrics import parse_slo

    if not args.attention.startswith("paged|"):
        return _fail(f"--attention {args.attention} is not a paged implementation; the continuous-batching engine "
                     f"runs only those: use e.g. paged|sdpa or paged|eager")
    if args.device not in ("auto", "cpu", "cuda") and not (args.device.startswith("cuda:")
                                                            and args.device[5:].isdigit()):
        return _fail(f"unknown --device '{args.device}'; use cpu, cuda or cuda:N")
    try:
        config = str(_config_path(args.model, args.tiny))
    except (FileNotFoundError, ValueError) as e:
        return _fail(str(e))
    try:
        slo = parse_slo(args.slo)
    except ValueError as e:
        return _fail(str(e))
    problem = _check_out(args.out)
    if problem:
        return _fail(problem)
    try:
        import dooly_core
    except ImportError:
        return _fail("the compiled core dooly_core is not importable: build it (scripts/build.sh default dooly_core) "
                     "and put build/default/python on PYTHONPATH")
    try:
        n = len(dooly_core.workload_requests(args.workload)["requests"])
    except ValueError as e:  # dooly's InputError: names the spec, the field and the fix
        return _fail(str(e))
    if n == 0:
        return _fail(f"--workload {args.workload} has no requests; give n >= 1 or a trace with requests")

    # Validated: now torch (seconds to import) and the engine.
    import torch

    from ..engines.hf import EngineError
    from .driver import DriverError
    from .run import LiveOptions, run_live

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        return _fail(f"--device {device}: torch sees no CUDA device here; use --device cpu")
    opts = LiveOptions(model=args.model, config_path=config, workload=args.workload, device=device, tiny=args.tiny,
                       attention=args.attention, cuda_graphs=args.cuda_graphs == "on", scheduler=args.scheduler,
                       block_size=args.block_size, num_blocks=args.num_blocks, max_batch_tokens=args.max_batch_tokens,
                       max_batch_requests=args.max_batch_requests, dtype=args.dtype, warmup=args.warmup,
                       seed=args.seed, slo=slo, deadline_s=args.deadline_s, argv=[PROG, *argv])
    try:
        doc = run_live(opts)
    except (EngineError, DriverError) as e:
        print(f"{PROG}: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    tmp = f"{args.out}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, args.out)
    _print_summary(doc, args.out)
    for p in doc["problems"]:
        print(f"{PROG}: problem: {p}", file=sys.stderr)
    return 3 if doc["problems"] else 0


def _ms(stats, key="median"):
    return "-" if not stats else f"{stats[key] * 1e3:.1f}"


def _print_summary(doc: dict, out: str) -> None:
    s = doc["summary"]
    line = (f"{PROG}: {s['completed']}/{s['requests']} requests in {s['duration_s']:.2f} s, {s['steps']} steps; "
            f"TTFT median {_ms(s['ttft_s'])} ms p99 {_ms(s['ttft_s'], 'p99')} ms, TPOT median {_ms(s['tpot_s'])} ms, "
            f"E2E median {_ms(s['e2e_s'])} ms; {s['output_throughput_tps'] or 0:.1f} output tok/s")
    if s["j_per_output_token"] is not None:
        line += f"; {s['j_per_output_token']:.4g} J/token, {s['avg_power_w']:.1f} W"
    print(line)
    p = doc["power"]
    if p.get("source") is None:
        print(f"{PROG}: no energy figures: no power source (power.why in the file says why)")
    elif p.get("counter_ratio") is not None:
        print(f"{PROG}: energy {p['run_energy_j']:.1f} J ({p['source']}), counter {p['counter_delta_j']:.1f} J "
              f"(ratio {p['counter_ratio']:.3f}); steps {p['steps_energy_j']:.1f} J")
    print(f"{PROG}: wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
