#!/usr/bin/env python3
"""Summaries for scripts/gpu/validate_kokkos.sh (standard library only).

  summarize_kokkos.py demo <demo stdout> <demo.json>
      The 2% check: per-kernel J/call (above idle) measured by dooly while the kernels interleave, in both
      attribution modes, against the J/call each kernel has alone (GPU energy counter at the phase edges,
      idle power from the counter over the idle gaps); the time/energy inversion; conservation.
  summarize_kokkos.py overhead <overhead.tsv> [dooly report .json ...]
      Medians of ns_per_kernel per tool, each tool's own cost (minus the empty tool's), the ratio
      dooly / simple-kernel-timer, and the sampler's CPU share from the reports' meta.
"""
import json
import re
import statistics
import sys


def parse_reference(path):
    phases = {}
    for line in open(path):
        if not line.startswith("reference phase="):
            continue
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        phases[kv["phase"]] = kv
    return phases


def rows_by_name(report):
    ch = report["channels"][0]
    return ch, {r["name"]: r for r in ch["regions"]}


def demo(stdout_path, json_path):
    ref = parse_reference(stdout_path)
    report = json.load(open(json_path))
    ch, rows = rows_by_name(report)
    if not ref:
        print("demo: no reference lines (no GPU energy counter): only dooly's figures below")
    idle = [p for name, p in ref.items() if name.startswith("idle:")]
    p_idle = (sum(float(p["counter_j"]) for p in idle) / sum(float(p["time_s"]) for p in idle)) if idle else None
    if p_idle is not None:
        print(f"idle power (counter over {len(idle)} idle gaps): {p_idle:.2f} W; "
              f"dooly baseline {ch['baseline_w']:.2f} W ({ch['baseline_method']}); "
              f"model floor {ch['model_fit']['intercept_w']:.2f} W")
    fit = ch["model_fit"]
    print(f"model fit: fitted={fit['fitted']} samples={fit['samples']} residual={fit['residual_rms_w']:.2f} W "
          f"R2={fit['r_squared']:.4f} {fit['why_not']}")

    def jpc(row, energy_key, base):
        if row is None or row.get(energy_key) is None or not row["calls"]:
            return None
        return (row[energy_key] - base * row["time_s"]) / row["calls"]

    ok_modes = {"trapezoid": True, "model": True}
    print(f"{'kernel':<14} {'ref J/call':>11} | {'trap interl.':>12} {'err%':>7} | {'model interl.':>13} {'err%':>7} |"
          f" {'trap alone':>10} {'err%':>7} | {'model alone':>11} {'err%':>7}")
    for base, phase in (("stream_triad", "alone:stream"), ("fma_chain", "alone:fma")):
        p = ref.get(phase)
        ref_jpc = None
        if p and p_idle is not None:
            ref_jpc = (float(p["counter_j"]) - p_idle * float(p["time_s"])) / int(p["calls"])
        inter, alone = rows.get(base), rows.get(base + "@alone")
        b = p_idle if p_idle is not None else ch["baseline_w"]
        vals = [jpc(inter, "energy_j", b), jpc(inter, "model_energy_j", b), jpc(alone, "energy_j", b),
                jpc(alone, "model_energy_j", b)]
        cells = []
        for i, v in enumerate(vals):
            err = (100.0 * (v - ref_jpc) / ref_jpc) if (v is not None and ref_jpc) else None
            if i < 2 and (err is None or abs(err) > 2.0):
                ok_modes["trapezoid" if i == 0 else "model"] = False
            cells.append(f"{v:>12.5g} {err:>+7.2f}" if err is not None else
                         (f"{v:>12.5g} {'-':>7}" if v is not None else f"{'-':>12} {'-':>7}"))
        print(f"{base:<14} {ref_jpc if ref_jpc is not None else float('nan'):>11.5g} | " + " | ".join(cells))
    print("(J/call above idle; dooly's energies with the counter's idle power subtracted, so only the attribution "
          "differs)")
    for mode, ok in ok_modes.items():
        print(f"2% check ({mode}, interleaved vs alone reference): {'PASS' if ok else 'FAIL'}")

    s, f = rows.get("stream_triad"), rows.get("fma_chain")
    if s and f:
        print(f"interleaved: stream_triad {s['calls']} calls {s['time_s']:.3f} s {s['energy_j']:.1f} J (model "
              f"{s['model_energy_j'] or 0:.1f} J); fma_chain {f['calls']} calls {f['time_s']:.3f} s "
              f"{f['energy_j']:.1f} J (model {f['model_energy_j'] or 0:.1f} J)")
        inv_t = f["time_s"] > s["time_s"] and s["energy_j"] > f["energy_j"]
        inv_m = f["time_s"] > s["time_s"] and (s["model_energy_j"] or 0) > (f["model_energy_j"] or 0)
        print(f"inversion (fma longer, stream more energy): trapezoid {'YES' if inv_t else 'no'}, "
              f"model {'YES' if inv_m else 'no'}")
    try:
        cpu = float(report["meta"]["sampler_cpu_s"])
        print(f"sampler CPU: {cpu:.3f} s over a {ch['run_time_s']:.1f} s run = {100 * cpu / ch['run_time_s']:.3f}% "
              f"of one core ({report['meta'].get('sampler_ticks')} ticks, "
              f"{report['meta'].get('sampler_missed_deadlines')} missed deadlines)")
    except (KeyError, ValueError, ZeroDivisionError):
        pass
    c = ch["conservation"]
    if c.get("ratio") is not None:
        ok = abs(c["ratio"] - 1) <= 0.03
        print(f"conservation: attributed {c['attributed_j']:.1f} J + unattributed {c['unattributed_j']:.1f} J vs "
              f"counter {c['counter_delta_j']:.1f} J: ratio {c['ratio']:.4f} ({'PASS' if ok else 'FAIL'} at 3%)")
    else:
        print("conservation: no energy counter in the report")


def overhead(tsv_path, reports):
    runs = {}
    for line in open(tsv_path):
        parts = line.split()
        if len(parts) >= 3 and parts[0] != "rep":
            runs.setdefault(parts[1], []).append(float(parts[2]))
    med = {t: statistics.median(v) for t, v in runs.items()}
    empty = med.get("empty")
    print(f"{'tool':<22} {'runs':>4} {'median ns/kernel':>17} {'own ns/kernel':>14}   all runs")
    for t in ("none", "empty", "simple-kernel-timer", "dooly"):
        if t not in med:
            continue
        own = f"{med[t] - empty:14.1f}" if empty is not None and t not in ("none", "empty") else f"{'-':>14}"
        print(f"{t:<22} {len(runs[t]):>4} {med[t]:>17.1f} {own}   " + " ".join(f"{x:.1f}" for x in runs[t]))
    if empty is not None and "dooly" in med and "simple-kernel-timer" in med:
        d, s = med["dooly"] - empty, med["simple-kernel-timer"] - empty
        ratio = d / s if s > 0 else float("inf")
        print(f"own cost ratio dooly / simple-kernel-timer = {ratio:.3f} (goal <= 0.5: {'PASS' if ratio <= 0.5 else 'FAIL'})")
    shares = []
    for path in reports:
        try:
            r = json.load(open(path))
            cpu = float(r["meta"]["sampler_cpu_s"])
            wall = float(r["channels"][0]["run_time_s"])
            shares.append(100.0 * cpu / wall)
        except (OSError, KeyError, ValueError, IndexError):
            continue
    if shares:
        m = statistics.median(shares)
        print(f"dooly sampler CPU: median {m:.3f}% of one core over {len(shares)} runs "
              f"(goal < 1%: {'PASS' if m < 1 else 'FAIL'})")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "demo":
        demo(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "overhead":
        overhead(sys.argv[2], sys.argv[3:])
    else:
        print(__doc__)
        sys.exit(2)
