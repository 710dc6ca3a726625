"""Summaries for scripts/gpu/validate_cupti.sh.

  summarize_cupti.py demo REPORT.json       checks cupti_demo's report: the rows it must have, no drops, the
                                            clock residual, attributed + unattributed against the energy counter
  summarize_cupti.py overhead FOLDER        medians of the overhead runs: plain / CUPTI alone / dooly, per size,
                                            and the overheads against the 3 % target (also over each run's fastest
                                            tenth of its timed blocks); writes FOLDER/../overhead.json
"""
import glob
import json
import os
import statistics
import sys

TARGET = 0.03


def meta(report, key):
    return dict(report.get("meta", {})).get(key)


def demo(path):
    with open(path) as f:
        r = json.load(f)
    ok = True
    for ch in r["channels"]:
        rows = {x["name"]: x for x in ch["regions"]}
        kinds = {}
        for x in ch["regions"]:
            kinds.setdefault(x["kind"], []).append(x)
        print(f"{ch['name']}: {len(ch['regions'])} rows, baseline {ch['baseline_w']:.1f} W, fit {ch['model_fit']['fitted']}")
        for x in sorted(ch["regions"], key=lambda x: -(x.get("model_energy_j") or x["energy_j"])):
            print(f"  {x['kind']:7} {x.get('short_name') or x['name'][:60]:60} calls {x['calls']:7} "
                  f"time {x['time_s']:8.4f} s  J/call model {x['model_j_per_call'] if x['model_j_per_call'] is not None else float('nan'):.5f}"
                  f" +- {x['model_j_per_call_hw_j'] if isinstance(x['model_j_per_call_hw_j'], (int, float)) else float('nan'):.5f}"
                  f"  trapezoid {x['j_per_call']:.5f}")
        for needed in ("saxpy", "fma_chain"):
            if not any(needed == x.get("short_name") or x["name"].startswith(needed) for x in kinds.get("kernel", [])):
                print(f"MISSING kernel row {needed}")
                ok = False
        for needed in ("step", "setup", "teardown"):
            if needed not in rows:
                print(f"MISSING NVTX row {needed}")
                ok = False
        if not any(x["name"].startswith("memcpy HtoD") for x in kinds.get("copy", [])):
            print("MISSING memcpy HtoD row")
            ok = False
        if len(kinds.get("stream", [])) < 2:
            print("MISSING stream rows (want 2)")
            ok = False
        cs = ch["conservation"]
        if cs.get("counter_delta_j"):
            total = cs["attributed_j"] + cs["unattributed_j"]
            print(f"  conservation: trace {total:.1f} J vs energy counter {cs['counter_delta_j']:.1f} J "
                  f"({100 * (total / cs['counter_delta_j'] - 1):+.1f} %)")
    dropped = r["events_dropped"]
    print(f"events dropped {dropped}; CUPTI dropped {meta(r, 'cupti.records_dropped_by_cupti')}; "
          f"records {meta(r, 'cupti.records')}; incomplete {meta(r, 'cupti.records_incomplete')}")
    print(f"clock: drift {meta(r, 'cupti.clock_offset_drift_ns')} ns over the run, largest step "
          f"{meta(r, 'cupti.clock_max_step_ns')} ns, widest bracket {meta(r, 'cupti.clock_bracket_ns')} ns "
          f"({meta(r, 'cupti.clock_calibrations')} calibrations)")
    if dropped:
        ok = False
    print("demo check:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def fast_blocks(block_ms):
    """A run's fastest decile of blocks (ms a pass): the host at its quiet speed."""
    b = sorted(block_ms)
    return b[len(b) // 10]


def view(into, label, per_mode, name, what, scale=1.0):
    """One more view of the overheads: per mode, the median over runs of each run's figure (per_mode: mode -> the
    runs' figures), printed as a row of the table and a line per diagnostic mode; kept in into[name] (the runs'
    figures in into[name + "_runs"]). Nothing without plain, CUPTI alone and dooly."""
    v = {t: statistics.median(x) for t, x in per_mode.items()}
    if not {"plain", "cupti", "dooly"} <= v.keys():
        return
    into[name], into[name + "_runs"] = v, {t: sorted(x) for t, x in per_mode.items()}
    pct = lambda a, b: 100 * (v[a] / v[b] - 1)  # noqa: E731
    print(f"{label:6} {scale * v['plain']:9.3f} {scale * v['cupti']:9.3f} {scale * v['dooly']:9.3f} "
          f"{pct('cupti', 'plain'):+8.2f} {pct('dooly', 'plain'):+8.2f} {pct('dooly', 'cupti'):+14.2f}  ({what}, "
          f"medians; plain {scale * min(per_mode['plain']):.3f}-{scale * max(per_mode['plain']):.3f})")
    for tag in sorted(set(v) - {"plain", "cupti", "dooly"}):
        print(f"{'':6} {tag:>9} {scale * v[tag]:9.3f} {label.strip()}: {pct(tag, 'plain'):+.2f} % over plain, "
              f"{pct(tag, 'cupti'):+.2f} % over CUPTI alone")


def overhead(folder):
    runs = {}
    fast = {}  # per size and mode: each run's fastest-decile block
    cpu = {}  # the launching thread's CPU time a pass, each run's median block
    instr = {}  # the launching thread's user-mode instructions a pass (where the VM has the counter)
    steal = {}  # steal over the process's cores, seconds a second of the timed part
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as f:
                line = f.read().strip().splitlines()[-1]
            d = json.loads(line)
        except (OSError, ValueError, IndexError):
            continue
        if "ms_per_iter" not in d:
            continue
        runs.setdefault(d["size"], {}).setdefault(d["tag"], []).append(d["ms_per_iter"])
        if d.get("block_ms"):
            fast.setdefault(d["size"], {}).setdefault(d["tag"], []).append(fast_blocks(d["block_ms"]))
        if d.get("block_cpu_ms"):
            cpu.setdefault(d["size"], {}).setdefault(d["tag"], []).append(statistics.median(d["block_cpu_ms"]))
        if d.get("block_instr"):
            instr.setdefault(d["size"], {}).setdefault(d["tag"], []).append(statistics.median(d["block_instr"]))
        if d.get("steal_s") is not None:
            steal.setdefault(d["size"], {}).setdefault(d["tag"], []).append(d["steal_s"] / d["seconds"])
    summary = {}
    print(f"{'size':6} {'plain ms':>9} {'cupti ms':>9} {'dooly ms':>9} {'cupti %':>8} {'dooly %':>8} "
          f"{'dooly-cupti %':>14}  target {100 * TARGET:.0f} %")
    worst = 0.0
    for size, tags in sorted(runs.items()):
        med = {t: statistics.median(v) for t, v in tags.items()}
        if not {"plain", "cupti", "dooly"} <= med.keys():
            continue
        c = med["cupti"] / med["plain"] - 1
        d = med["dooly"] / med["plain"] - 1
        own = med["dooly"] / med["cupti"] - 1
        worst = max(worst, d)
        spread = {t: (min(v), max(v)) for t, v in tags.items()}
        summary[size] = {"median_ms": med, "range_ms": spread, "cupti_overhead": c, "dooly_overhead": d,
                         "dooly_over_cupti": own, "runs": {t: len(v) for t, v in tags.items()}}
        print(f"{size:6} {med['plain']:9.3f} {med['cupti']:9.3f} {med['dooly']:9.3f} {100 * c:+8.2f} {100 * d:+8.2f} "
              f"{100 * own:+14.2f}  {'within' if d <= TARGET else 'OVER'}")
        # Interference only slows a launch-bound loop: the fastest run of each mode is the other view.
        low = {t: min(v) for t, v in tags.items()}
        summary[size]["min_ms"] = low
        print(f"{'  min':6} {low['plain']:9.3f} {low['cupti']:9.3f} {low['dooly']:9.3f} "
              f"{100 * (low['cupti'] / low['plain'] - 1):+8.2f} {100 * (low['dooly'] / low['plain'] - 1):+8.2f} "
              f"{100 * (low['dooly'] / low['cupti'] - 1):+14.2f}  (spread: plain {min(tags['plain']):.3f}-"
              f"{max(tags['plain']):.3f} ms over {len(tags['plain'])} runs)")
        # The host's slow stretches last seconds: each run's fastest tenth of its blocks, medians over runs.
        view(summary[size], "  fast", fast.get(size, {}), "fast_block_ms", "each run's fastest tenth of its blocks")
        # CPU time of the launching thread: what the hypervisor took away is not in it.
        view(summary[size], "  cpu", cpu.get(size, {}), "thread_cpu_ms", "the launching thread's CPU time a pass")
        view(summary[size], "  instr", instr.get(size, {}), "thread_instructions",
             "the launching thread's user instructions a pass, thousands", scale=1e-3)
        if steal.get(size):
            summary[size]["steal_per_s"] = {t: sorted(v) for t, v in steal[size].items()}
            print("        steal over the run's cores, s a second: " + ", ".join(
                f"{t} {min(v):.3f}-{max(v):.3f}" for t, v in sorted(steal[size].items())))
        for tag in sorted(set(med) - {"plain", "cupti", "dooly"}):  # the diagnostic modes
            summary[size][tag + "_overhead"] = med[tag] / med["plain"] - 1
            print(f"{'':6} {tag:>9} {med[tag]:9.3f} ms: {100 * (med[tag] / med['plain'] - 1):+.2f} % over plain, "
                  f"{100 * (med[tag] / med['cupti'] - 1):+.2f} % over CUPTI alone")
    walks = {}  # the time CUPTI's thread spent in dooly's buffer walk, from the reports' meta
    for path in sorted(glob.glob(os.path.join(folder, "report-*.json"))):
        try:
            with open(path) as f:
                meta = dict(json.load(f).get("meta", []))
            walk = (float(meta["cupti.buffer_walk_s"]), int(meta["cupti.buffers_walked"]), int(meta["cupti.records"]))
            walks.setdefault(os.path.basename(path).split("-")[1], []).append(walk)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
    for size, w in sorted(walks.items()):
        s, b, n = (statistics.median(x[i] for x in w) for i in range(3))
        print(f"{size}: buffer walk {s:.3f} s over {b:.0f} buffers, {n:.0f} records ({1e9 * s / max(n, 1):.0f} ns a "
              f"record; medians over {len(w)} reports)")
    with open(os.path.join(folder, "..", "overhead.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ("demo", "overhead"):
        print(__doc__)
        return 2
    return demo(argv[2]) if argv[1] == "demo" else overhead(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
