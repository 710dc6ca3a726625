"""`dooly trace` (the C++ CLI execs `python -m dooly.cli_trace ...` with its arguments untouched): traces one model
under one attention backend and writes traces/<model>__<attention>.json (format version 2, docs/dooly-tracing.md).
The flags are declared here and nowhere else: `dooly trace --help` prints this parser's help."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path


class _Parser(argparse.ArgumentParser):
    """Bad flags get one line naming the problem and where the flags are listed (argparse's default prints the
    usage block first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (the flags: `{self.prog} --help`)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of KV-cache blocks")
    return value


def _parser():
    p = _Parser(prog="dooly trace",
                description="Trace one model's engine steps under one attention backend, every tensor dimension "
                            "labelled by origin; writes OUT/<model>__<backend>.json (trace format 2, "
                            "docs/dooly-tracing.md). Then: dooly signatures OUT/*.json --db dooly.sqlite")
    p.add_argument("--engine", default="hf", choices=["hf"], help="serving engine to trace (hf: transformers CB)")
    p.add_argument("--model", required=True, help="a config file (data/models/<name>.json) or a shipped name")
    p.add_argument("--attention", default="paged|sdpa", help="attention implementation, e.g. 'paged|sdpa'")
    p.add_argument("--out", default="traces", help="output folder")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--dtype", default=None, help="torch dtype (default: float32 on cpu, bfloat16 on cuda)")
    p.add_argument("--tiny", action="store_true", help="use the tiny variant (data/models/tiny/) of the model")
    p.add_argument("--no-verify", action="store_true", help="skip the second run at other request sizes")
    p.add_argument("--strict", action="store_true", help="exit 4 when verification finds disagreements")
    p.add_argument("--sdpa-kernel", default=None, choices=["flash", "efficient", "cudnn", "math"],
                   help="force one PyTorch SDPA kernel (torch.nn.attention.sdpa_kernel) for paged|sdpa")
    p.add_argument("--num-blocks", type=_positive_int, default=None,
                   help="KV-cache blocks (default: the engine sizes the cache from free GPU memory; 331 on cpu). "
                        "Bound it when several traces share a GPU; the cache's size is not part of any signature")
    return p


def _config_path(model: str, tiny: bool) -> Path:
    from .models import model_path, tiny_path
    p = Path(model)
    if p.suffix == ".json" or p.exists():
        if tiny:
            t = p.parent / "tiny" / p.name
            if not t.is_file():
                raise FileNotFoundError(f"{t} does not exist: --tiny needs the tiny variant next to the config "
                                        f"(data/models/tiny/{p.name}).")
            return t
        if not p.is_file():
            raise FileNotFoundError(f"model config {p} does not exist. Pass a file from data/models/.")
        return p
    return tiny_path(model) if tiny else model_path(model)


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad flag (2, one line already printed): a status, as below
        return e.code if isinstance(e.code, int) else 2
    from .tracer.failure import failure_line, out_dir_problem
    problem = out_dir_problem(args.out)
    if problem:
        print(f"dooly trace: {problem}", file=sys.stderr)
        return 2
    try:
        config = _config_path(args.model, args.tiny)
    except (FileNotFoundError, ValueError) as e:
        print(f"dooly trace: {e}", file=sys.stderr)
        return 2
    from .models import ConfigError
    from .tracer import trace_model, write_trace
    name = Path(args.model).stem if Path(args.model).suffix == ".json" else args.model
    if args.tiny:
        name = f"{name}-tiny"
    ctx = contextlib.nullcontext()
    if args.sdpa_kernel:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[args.sdpa_kernel]
        ctx = sdpa_kernel(backend)
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    engine_kwargs = {} if args.num_blocks is None else {"num_blocks": args.num_blocks}
    try:
        with ctx:
            doc = trace_model(str(config), args.attention, device=args.device, dtype=args.dtype, model_name=name,
                              verify=not args.no_verify, log=log, engine_kwargs=engine_kwargs)
        if args.sdpa_kernel:
            doc["sdpa_kernel"] = args.sdpa_kernel
    except ConfigError as e:
        print(f"dooly trace: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # one line, not a traceback: transformers', torch's or our own failure, with its place
        print(f"dooly trace: {failure_line(e, name, args.attention)}", file=sys.stderr)
        return 3
    path = write_trace(doc, args.out)
    s = doc["summary"]
    print(f"{path}: {s['ops']} ops over {len(doc['steps'])} steps "
          f"({', '.join(st['kind'] + ' ' + str(st['num_tokens']) + ' tok/' + str(st['num_requests']) + ' req' for st in doc['steps'])}); "
          f"{s['fallback_ops']} without a rule, {s['ops_with_unknown_outputs']} with UNKNOWN outputs")
    for n in doc["notes"]:
        print(f"note: {n}", file=sys.stderr)
    v = doc.get("verification")
    from .tracer.verify import unknown_dims
    unknown = unknown_dims(doc)
    if unknown:
        print(f"dooly trace: {unknown} UNKNOWN dims (no rule could label them; each is hashed with its value as "
              f"fixed work): see the ops' notes in {path}", file=sys.stderr)
    if args.strict and ((v and v["num_disagreements"]) or unknown):
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
