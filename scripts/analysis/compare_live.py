"""Simulates every live run in the given archives (scripts/gpu/live_validate.sh's live-<model>.tgz) with the settings
the live run resolved, compares the two (dooly compare --json) and prints one table row per run: TTFT / TPOT / E2E
per-request MAPE and median error, throughput and J per output token, live against simulated; then the scheduler
check: the same run simulated again with the live run's own arrivals (a trace of when each request was submitted)
and step durations (`dooly simulate --step-times`: each step takes the live step's time, to the next step's start),
so that the simulated scheduler meets every arrival when the live engine did; its row gives the share of steps
whose composition (requests, tokens, prefill tokens, decodes) matches the live step of the same index, and the
first that does not; and the step-time model alone: every step of the scheduler check whose composition matches
the live one, priced by the cost model (`model_dt_s`) against the live step's time, by kind and path. Last, the
live engine against itself, the floor under the simulation's errors: a repeat (`<name>__repeat-k`, live_validate.sh
REPEAT=k) against the first run of its archive, and a run against the run of the same name and workload in an
earlier archive (another session, often another host), compared as a simulation is.

  python3 scripts/analysis/compare_live.py data/live/h200/live-*.tgz [--db data/profile/h200.sqlite]
      [--dooly build/default/src/dooly/cli/dooly] [--out DIR (default: a temporary folder)] [--json summary.json]
      [--sim-args "--moe-routing random"]   (more dooly simulate flags, for both simulations)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile


def simulate_args(live: dict) -> list[str]:
    e, w = live["engine"], live["workload"]
    graphs = "on" if e["cuda_graphs"]["decode"] else "off"
    args = ["--model", e["model"], "--engine", "hf", "--scheduler", e["scheduler"], "--attention", e["attention"],
            "--cuda-graphs", graphs, "--block-size", str(e["block_size"]), "--num-blocks", str(e["num_blocks"]),
            "--max-batch-tokens", str(e["max_batch_tokens"]), "--max-requests", str(e["max_batch_requests"]),
            "--safety-margin", str(e["safety_margin"]), "--workload", w["spec"],
            # dooly live's warm-up requests: the engine keeps the graphs they captured
            "--warmup-requests", str(live.get("run", {}).get("setup", {}).get("warmup_requests", 0))]
    slo = live["summary"].get("slo") or {}
    if slo:
        args += ["--slo", ",".join(f"{k.removesuffix('_s')}:{v * 1e3:g}" for k, v in slo.items())]
    return args


def timing_files(live: dict, base: str) -> tuple[str, str]:
    """The live run's arrivals as a trace (trace:FILE.jsonl) and its step durations (--step-times FILE): each step
    lasts to the next one's start when the engine went straight on (a gap under 5 ms), else to its own end."""
    trace, times = base + ".arrivals.jsonl", base + ".step-times.txt"
    with open(trace, "w") as f:
        for r in sorted(live["requests"], key=lambda r: r["arrival_s"]):
            f.write(json.dumps({"id": r["id"], "arrival_s": r["arrival_s"], "prompt_tokens": r["prompt_tokens"],
                                "output_tokens": r["requested_output_tokens"]}) + "\n")
    steps = live["steps"]
    with open(times, "w") as f:
        f.write("# seconds a step, from the live run's steps\n")
        for a, b in zip(steps, steps[1:] + [None]):
            gap = b["start_s"] - a["end_s"] if b else None
            f.write(f"{(b['start_s'] - a['start_s']) if gap is not None and gap < 0.005 else a['duration_s']:.9f}\n")
    return trace, times


def with_workload(args: list[str], workload: str) -> list[str]:
    out = list(args)
    out[out.index("--workload") + 1] = workload
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archives", nargs="+")
    ap.add_argument("--db", default="data/profile/h200.sqlite")
    ap.add_argument("--dooly", default="build/default/src/dooly/cli/dooly")
    ap.add_argument("--out", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--sim-args", default="", help="more dooly simulate flags, split on spaces")
    args = ap.parse_args(argv)
    extra = args.sim_args.split()
    out = args.out or tempfile.mkdtemp(prefix="compare-live-")
    os.makedirs(out, exist_ok=True)
    rows = []
    lives = []  # (archive, name, workload spec, path): the live runs, for the live-against-live table
    for archive in args.archives:
        tag = os.path.basename(archive).removesuffix(".tgz")  # names the archive's files and rows
        with tarfile.open(archive) as t:
            members = sorted((m for m in t.getmembers() if m.name.endswith(".json.gz")), key=lambda m: m.name)
            for m in members:
                live = json.load(gzip.open(t.extractfile(m)))
                name = m.name.removesuffix(".json.gz")
                # Files by archive too: two archives may hold runs of the same name (two sessions).
                stem = f"{tag}__{name}"
                live_path = os.path.join(out, f"{stem}.live.json")
                sim_path = os.path.join(out, f"{stem}.sim.json")
                cmp_path = os.path.join(out, f"{stem}.compare.json")
                with open(live_path, "w") as f:
                    json.dump(live, f)
                lives.append((tag, name, live.get("workload", {}).get("spec"), live_path))
                sim = subprocess.run([args.dooly, "simulate", "--db", args.db, *simulate_args(live), *extra,
                                      "--out", sim_path],
                                     capture_output=True, text=True)
                if sim.returncode != 0:
                    print(f"{name}: simulate failed: {sim.stderr.strip()[:300]}", file=sys.stderr)
                    continue
                c = subprocess.run([args.dooly, "compare", live_path, sim_path, "--json", cmp_path],
                                   capture_output=True, text=True)
                if c.returncode != 0:
                    print(f"{name}: compare failed: {c.stderr.strip()[:300]}", file=sys.stderr)
                    continue
                row = {"run": name, "archive": tag,
                       "compare": json.load(open(cmp_path))}
                # The scheduler check: the live arrivals and step times.
                trace, times = timing_files(live, os.path.join(out, stem))
                forced_sim, forced_cmp = (os.path.join(out, f"{stem}.forced.{x}.json") for x in ("sim", "compare"))
                f_sim = subprocess.run([args.dooly, "simulate", "--db", args.db,
                                        *with_workload(simulate_args(live), f"trace:{trace}"), *extra,
                                        "--step-times", times, "--out", forced_sim], capture_output=True, text=True)
                f_cmp = subprocess.run([args.dooly, "compare", live_path, forced_sim, "--json", forced_cmp],
                                       capture_output=True, text=True) if f_sim.returncode == 0 else f_sim
                if f_cmp.returncode == 0:
                    forced = json.load(open(forced_cmp))
                    row["scheduler_check"] = forced["steps"]
                    row["energy_at_live_timing"] = {"request": forced["metrics"].get("energy"),
                                                    "j_per_output_token": forced["j_per_output_token"]}
                    row["ttft_at_live_timing"] = forced["metrics"].get("ttft")
                else:
                    print(f"{name}: the scheduler check failed: {f_cmp.stderr.strip()[:300]}", file=sys.stderr)
                rows.append(row)
    if not rows:
        return 1
    many = len(args.archives) > 1  # runs of one name in two archives: each archive's rows under its name
    print(f"{'run':<40} {'TTFT MAPE':>9} {'med err':>8} {'TPOT MAPE':>9} {'med err':>8} {'E2E MAPE':>8} "
          f"{'tok/s live':>10} {'sim':>7} {'J/tok live':>10} {'sim':>6} {'err':>7}")
    for r in by_archive(rows, many):
        c = r["compare"]
        m = c["metrics"]
        mape, med = (lambda k: metric(m, k, "mape", "8")), (lambda k: metric(m, k, "median_error", "+7"))
        thr, jl, js = c["output_throughput_tps"], c["j_per_output_token"]["live"], c["j_per_output_token"]["sim"]
        print(f"{r['run']:<40} {mape('ttft')} {med('ttft')} {mape('tpot')} {med('tpot')} {mape('e2e')} "
              f"{thr['live']:10.1f} {thr['sim']:7.1f} "
              + (f"{jl:10.3f} {js:6.3f} {100 * (js / jl - 1):+6.1f}%" if jl and js else "         -      -       -"))
    print(f"\nscheduler check (live arrivals and step times): steps with the live step's composition, TTFT at the live"
          f" step times (per-request MAPE), and the energy model at the live timing (per-request MAPE and median error,"
          f" J per output token)")
    print(f"{'run':<40} {'matching':>14} {'share':>7} {'TTFT MAPE':>9} {'E MAPE':>7} {'med err':>8} {'J/tok err':>9}"
          f"  first mismatch")
    for r in by_archive(rows, many):
        st = r.get("scheduler_check")
        if not st:
            continue
        share = st["matching"] / st["compared"] if st["compared"] else float("nan")
        e = r.get("energy_at_live_timing", {})
        req, jt = e.get("request") or {}, e.get("j_per_output_token") or {}
        ttft = pct((r.get("ttft_at_live_timing") or {}).get("mape"), "8")
        mape, med, jerr = pct(req.get("mape"), "6"), pct(req.get("median_error"), "+7"), j_error(jt)
        print(f"{r['run']:<40} {st['matching']:>6}/{st['compared']:<7} {100 * share:6.1f}% {ttft} {mape} {med} {jerr}  "
              f"{st.get('first_mismatch') or '-'}")
    print("\nthe step-time model at the live step's composition (scheduler check: every matched step priced by the"
          " cost model against the live step's time; median error is the medians')")
    print(f"{'run':<40} {'kind, path':<16} {'steps':>6} {'MAPE':>7} {'live ms':>8} {'sim ms':>8} {'med err':>8}")
    for r in by_archive(rows, many):
        for p in (r.get("scheduler_check") or {}).get("pricing", []):
            name = f"{p['kind']} {p['path']}".strip()
            print(f"{r['run']:<40} {name:<16} {p['steps']:>6} {100 * p['mape']:6.1f}% {1e3 * p['live_median_s']:8.2f}"
                  f" {1e3 * p['sim_median_s']:8.2f} {100 * p['median_error']:+7.1f}%")
    floor = live_against_live(args.dooly, lives, out)
    if floor:
        print("\nthe live engine against itself (the same workload served again: a repeat in the same session, or the run"
              " of an earlier archive; errors of the second run against the first, as the simulation's above)")
        print(f"{'run':<40} {'against':<34} {'TTFT MAPE':>9} {'med err':>8} {'TPOT MAPE':>9} {'med err':>8} "
              f"{'E2E MAPE':>8} {'J/tok err':>9}")
        for f in floor:
            m = f["compare"]["metrics"]
            print(f"{f['run']:<40} {f['against']:<34} {metric(m, 'ttft', 'mape', '8')} "
                  f"{metric(m, 'ttft', 'median_error', '+7')} {metric(m, 'tpot', 'mape', '8')} "
                  f"{metric(m, 'tpot', 'median_error', '+7')} {metric(m, 'e2e', 'mape', '7')} "
                  f"{j_error(f['compare']['j_per_output_token'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"version": 1, "db": args.db, "runs": rows, "live_against_live": floor}, f, indent=1)
    return 0


def pct(fraction, spec: str) -> str:
    """A fraction as a percent cell of format `spec` ("8", "+7": width and sign), or "-" as wide when absent."""
    return f"{'-':>{int(spec.lstrip('+')) + 1}}" if fraction is None else f"{100 * fraction:{spec}.1f}%"


def metric(metrics: dict, name: str, field: str, spec: str) -> str:
    """One figure of `dooly compare`'s metric (mape, median_error, ...) as a percent cell."""
    return pct(metrics.get(name, {}).get(field), spec)


def j_error(jt: dict) -> str:
    """The simulated (or later) run's J per output token against the live (or first) one, as a percent cell."""
    return pct(jt["sim"] / jt["live"] - 1 if jt.get("live") and jt.get("sim") else None, "+8")


def by_archive(rows: list[dict], many: bool):
    """The rows in order; with several archives, each archive's first row preceded by a line naming it."""
    last = None
    for r in rows:
        if many and r["archive"] != last:
            print(f"-- {r['archive']}")
            last = r["archive"]
        yield r


def live_against_live(dooly: str, lives: list, out: str) -> list[dict]:
    """Pairs of live runs of one workload: each `<name>__repeat-k` with `<name>` of its archive, and each run with the
    run of the same name and workload spec in an earlier archive; `dooly compare` of the pair (the later run in the
    simulation's place)."""
    pairs = []
    first = {(a, n): p for a, n, _, p in lives}
    for a, n, _, p in lives:
        base, sep, k = n.rpartition("__repeat-")
        if sep and (a, base) in first:
            pairs.append((base, f"repeat {k} against run 1", first[(a, base)], p))
    seen = {}
    for a, n, spec, p in lives:
        if "__repeat-" in n:
            continue
        if (n, spec) in seen:
            earlier_tag, earlier_path = seen[(n, spec)]
            pairs.append((n, f"against {earlier_tag}"[:34], earlier_path, p))
        else:
            seen[(n, spec)] = (a, p)
    rows = []
    for i, (name, against, a, b) in enumerate(pairs):
        cmp_path = os.path.join(out, f"live-against-live-{i}.compare.json")
        c = subprocess.run([dooly, "compare", a, b, "--json", cmp_path], capture_output=True, text=True)
        if c.returncode != 0:
            print(f"{name} ({against}): compare failed: {c.stderr.strip()[:300]}", file=sys.stderr)
            continue
        rows.append({"run": name, "against": against, "compare": json.load(open(cmp_path))})
    return rows


if __name__ == "__main__":
    sys.exit(main())
