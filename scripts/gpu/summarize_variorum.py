#!/usr/bin/env python3
"""Summary for scripts/gpu/validate_variorum.sh (standard library only): the same Kokkos demo measured through
dooly's nvml backend and through real Variorum, side by side.

  summarize_variorum.py [--probe variorum_probe.txt] NAME=PREFIX [NAME=PREFIX ...]

Each PREFIX has PREFIX.json (dooly's report), PREFIX.txt (the demo's stdout: its `reference phase=...` lines are
the GPU's NVML energy counter at the phase edges, read by the demo itself in every run), and optionally
PREFIX.recording (every power reading: the real sample intervals) and PREFIX.side.csv (nvmlDeviceGetPowerUsage
every 20 ms from a side process during the run). The first NAME is the reference the others are compared with.
Prints: the channels each run had (the node view: node, CPU, memory when Variorum exposes them), sensor models,
sample rates and intervals, the sampler's cost, conservation, per-region calls / time / energy / J/call in both
modes and their difference from the first run, and each phase's energy against the counter of the same run.
"""
import json
import re
import statistics
import sys


def load(prefix):
    run = {"report": json.load(open(prefix + ".json")), "ref": {}, "intervals": {}, "side": None}
    try:
        for line in open(prefix + ".txt"):
            if line.startswith("reference phase="):
                kv = dict(re.findall(r"(\w+)=(\S+)", line))
                run["ref"][kv["phase"]] = kv
    except OSError:
        pass
    try:
        last = {}
        for line in open(prefix + ".recording"):
            if line.startswith("s,"):
                f = line.split(",")
                ch, t = int(f[1]), int(f[2])
                if ch in last:
                    run["intervals"].setdefault(ch, []).append((t - last[ch]) / 1e6)
                last[ch] = t
    except OSError:
        pass
    try:
        rows = [l.strip().split(",") for l in open(prefix + ".side.csv")][1:]
        w = [float(r[1]) for r in rows if len(r) == 2]
        if w:
            run["side"] = (len(w), statistics.fmean(w), min(w), max(w))
    except OSError:
        pass
    return run


def pct(a, b):
    return f"{100.0 * (a - b) / b:+.1f}%" if a is not None and b not in (None, 0) else "-"


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def main(argv):
    probe = None
    if len(argv) > 2 and argv[1] == "--probe":
        probe, argv = argv[2], [argv[0]] + argv[3:]
    runs = []
    for a in argv[1:]:
        name, prefix = a.split("=", 1)
        try:
            runs.append((name, load(prefix)))
        except (OSError, ValueError) as e:
            print(f"{name}: cannot read {prefix}.json: {e}")
    if probe:
        print("==== Variorum's own JSON (variorum_get_power_json), per library")
        try:
            print(open(probe).read().rstrip())
        except OSError as e:
            print(f"no probe: {e}")
        print()
    if not runs:
        return 0 if probe else 1

    print("==== channels, sensor models, samples")
    for name, run in runs:
        rep = run["report"]
        meta = rep.get("meta", {})
        print(f"-- {name}: backend {rep.get('backend', '?')}, mode {rep.get('mode', '?')}, "
              f"events dropped {rep.get('events_dropped', 0)}")
        for i, ch in enumerate(rep["channels"]):
            s = ch["sensor"]
            iv = run["intervals"].get(i, [])
            ivs = (f"; interval median {statistics.median(iv):.1f} ms, p95 {sorted(iv)[int(0.95 * (len(iv) - 1))]:.1f} ms"
                   if iv else "")
            rate = ch["samples"] / ch["run_time_s"] if ch.get("run_time_s") else 0
            print(f"  {ch['name']} [{ch['domain']}] {s['description']}: window {s['window_ns'] / 1e6:g} ms, "
                  f"delay {s['delay_ns'] / 1e6:g} ms, update {s['update_ns'] / 1e6:g} ms; {ch['samples']} samples "
                  f"in {ch['run_time_s']:.1f} s ({rate:.1f}/s, {ch.get('samples_dropped', 0)} dropped){ivs}")
            c = ch["conservation"]
            print(f"    run {c['run_energy_j']:.1f} J = attributed {c['attributed_j']:.1f} + unattributed "
                  f"{c['unattributed_j']:.1f}; counter {fmt(c['counter_delta_j'], '.1f')} J, ratio "
                  f"{fmt(c['ratio'], '.4f')}; baseline {ch['baseline_w']:.1f} W ({ch.get('baseline_method', '')}); "
                  f"model fit {ch['model_fit']['fitted']} {ch['model_fit'].get('why_not', '')}")
        keys = ("sampler_period_ms", "sampler_ticks", "sampler_missed_deadlines", "sampler_cpu_s",
                "sampler_poll_cpu_s", "sampler_page_faults")
        print("  meta: " + ", ".join(f"{k}={meta[k]}" for k in keys if k in meta))
        if run["side"]:
            n, mean, lo, hi = run["side"]
            print(f"  side NVML sampler (nvmlDeviceGetPowerUsage / 20 ms, same run): {n} readings, mean {mean:.1f} W "
                  f"[{lo:.1f}, {hi:.1f}]")

    def gpu_channel(rep):
        for ch in rep["channels"]:
            if ch["domain"] == "gpu":
                return ch
        return None

    ref_name, ref_run = runs[0]
    ref_ch = gpu_channel(ref_run["report"])
    print()
    print(f"==== GPU channel, per region (differences against {ref_name})")
    names = [r["name"] for r in ref_ch["regions"]] if ref_ch else []
    for name, run in runs[1:]:
        ch = gpu_channel(run["report"])
        if ch:
            names += [r["name"] for r in ch["regions"] if r["name"] not in names]
    print(f"{'region':34} {'run':14} {'calls':>8} {'time(s)':>9} {'energy(J)':>10} {'J/call':>10} "
          f"{'J/call(model)':>13} {'dE':>7} {'dJ/call':>8} {'dJ/call(m)':>10}")
    for rn in names:
        base = None
        for name, run in runs:
            ch = gpu_channel(run["report"])
            row = next((r for r in ch["regions"] if r["name"] == rn), None) if ch else None
            if row is None:
                print(f"{rn[:34]:34} {name[:14]:14} (no row)")
                continue
            if base is None and name == ref_name:
                base = row
            d = (pct(row["energy_j"], base["energy_j"]), pct(row["j_per_call"], base["j_per_call"]),
                 pct(row["model_j_per_call"], base["model_j_per_call"])) if base and name != ref_name else ("", "", "")
            print(f"{rn[:34]:34} {name[:14]:14} {row['calls']:>8} {row['time_s']:>9.3f} {row['energy_j']:>10.2f} "
                  f"{fmt(row['j_per_call'], '.4f'):>10} {fmt(row['model_j_per_call'], '.4f'):>13} {d[0]:>7} "
                  f"{d[1]:>8} {d[2]:>10}")

    print()
    print("==== each phase region's energy (GPU channel) against the NVML energy counter of the same run")
    for name, run in runs:
        ch = gpu_channel(run["report"])
        if not ch or not run["ref"]:
            print(f"-- {name}: {'no GPU channel' if not ch else 'no reference lines (no counter)'}")
            continue
        rows = {r["name"]: r for r in ch["regions"]}
        parts = []
        for phase, kv in run["ref"].items():
            if phase.startswith("idle:") or phase not in rows:
                continue
            e = float(kv["counter_j"])
            r = rows[phase]
            parts.append(f"{phase} counter {e:.1f} J, trapezoid {r['energy_j']:.1f} ({pct(r['energy_j'], e)}), "
                         f"model {fmt(r['model_energy_j'], '.1f')} ({pct(r['model_energy_j'], e)})")
        print(f"-- {name}:")
        for p in parts:
            print("   " + p)

    other = [(name, [c for c in run["report"]["channels"] if c["domain"] != "gpu"]) for name, run in runs]
    print()
    print("==== the node view (channels other than GPUs)")
    for name, chans in other:
        if not chans:
            print(f"-- {name}: none")
            continue
        for c in chans:
            top = sorted(c["regions"], key=lambda r: -r["energy_j"])[:5]
            print(f"-- {name}: {c['name']} [{c['domain']}] {c['sensor']['description']}, baseline "
                  f"{c['baseline_w']:.1f} W; top regions: "
                  + "; ".join(f"{r['name']} {r['energy_j']:.1f} J ({r['avg_power_w']:.1f} W)" for r in top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
