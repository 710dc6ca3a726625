"""scripts/gpu/summarize_kokkos.py: the lag-robust energy-counter reference of the GPU validation."""

import importlib.util


def _load(repo_root):
    spec = importlib.util.spec_from_file_location("summarize_kokkos", repo_root / "scripts" / "gpu" / "summarize_kokkos.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _demo_lines(lag_s, heads):
    """Reference lines of a demo run whose counter reports the true energy lag_s late: idle 125 W, then busy
    phases at 380 W and 265 W (4 s each), each followed by a 1.5 s gap (0.5 s head + 1 s rest when heads)."""
    plan = [("idle:start", 1.5, 125.0), ("alone:stream", 4.0, 380.0), ("idle:after_stream", 1.5, 125.0),
            ("alone:fma", 4.0, 265.0), ("idle:end", 1.5, 125.0)]
    pieces = []
    for name, dur, watts in plan:
        if heads and name.startswith("idle:") and name != "idle:start":
            pieces += [(name + ":head", 0.5, watts), (name, dur - 0.5, watts)]
        else:
            pieces.append((name, dur, watts))
    edges, t = [], 0.0
    for _, dur, _ in pieces:
        edges.append((t, t + dur))
        t += dur

    def true_energy(x):  # integral of the true power from 0 to x (power before 0 is idle)
        e = 125.0 * min(x, 0.0)
        for (_, dur, watts), (a, b) in zip(pieces, edges):
            if x > a:
                e += watts * (min(x, b) - a)
        return e

    lines = []
    for (name, dur, watts), (a, b) in zip(pieces, edges):
        counter = true_energy(b - lag_s) - true_energy(a - lag_s)
        lines.append(f"reference phase={name} kernel=k calls=1 time_s={dur:.6f} kernel_time_s={dur:.6f} "
                     f"counter_j={counter:.6f}\n")
    return lines


def test_lag_robust_reference_recovers_the_busy_energy(repo_root, tmp_path):
    mod = _load(repo_root)
    lag = 0.06
    path = tmp_path / "demo.txt"
    path.write_text("".join(_demo_lines(lag, heads=True)))
    robust, idle, has_heads = mod.lag_robust(mod.parse_reference(path))
    assert has_heads
    assert abs(robust["alone:stream"] - 380.0 * 4) < 1e-6
    assert abs(robust["alone:fma"] - 265.0 * 4) < 1e-6
    # The idle power comes from the rests only: exact although the heads hold the previous phase's tail.
    assert [r["phase"] for r in idle] == ["idle:start", "idle:after_stream", "idle:end"]
    p_idle = sum(float(r["counter_j"]) for r in idle) / sum(float(r["time_s"]) for r in idle)
    assert abs(p_idle - 125.0) < 1e-6

    # Without heads (older demo output) the plain counter joules are kept, lag and all.
    old = tmp_path / "old.txt"
    old.write_text("".join(_demo_lines(lag, heads=False)))
    robust_old, _, has_heads_old = mod.lag_robust(mod.parse_reference(old))
    assert not has_heads_old
    assert abs(robust_old["alone:stream"] - (380.0 * 4 - lag * (380.0 - 125.0))) < 1e-6


def test_shim_own_costs_subtract_the_empty_tools_floor_per_call(repo_root, tmp_path):
    mod = _load(repo_root)
    shim = tmp_path / "shim.txt"
    # Floor 20 ns per timed call (empty tool: 2 calls per kernel). dooly: 2 calls per kernel, 50 ns each -> own
    # 2 x (50 - 20) = 60 ns per kernel; simple-kernel-timer 2 x 80 -> own 120; a tool with fence hooks: 8 calls
    # per kernel at 25 ns -> own 8 x 5 = 40.
    lines = []
    for floor in (19.0, 20.0, 21.0):
        lines.append(f"kp_timing_shim inner=libkp_empty_tool.so kernels=1000 hook_calls=2000 hook_ns={2000 * floor:.0f} "
                     f"ns_per_kernel={2 * floor:.2f} ns_per_call={floor:.3f}\n")
    lines.append("kp_timing_shim inner=libkp_gpu_energy.so kernels=1000 hook_calls=2000 hook_ns=100000 "
                 "ns_per_kernel=100.00 ns_per_call=50.000\n")
    lines.append("kp_timing_shim inner=libkp_kernel_timer.so kernels=1000 hook_calls=2000 hook_ns=160000 "
                 "ns_per_kernel=160.00 ns_per_call=80.000\n")
    lines.append("kp_timing_shim inner=libfenced.so kernels=1000 hook_calls=8000 hook_ns=200000 "
                 "ns_per_kernel=200.00 ns_per_call=25.000\n")
    lines.append("unrelated line\n")
    shim.write_text("".join(lines))
    own, floor = mod.shim_own_costs(str(shim))
    assert floor == 20.0
    assert own["libkp_gpu_energy.so"] == [60.0]
    assert own["libkp_kernel_timer.so"] == [120.0]
    assert own["libfenced.so"] == [40.0]


def test_shim_lines_with_their_own_floor_are_taken_as_they_are(repo_root, tmp_path):
    mod = _load(repo_root)
    shim = tmp_path / "shim.txt"
    shim.write_text(
        "kp_timing_shim inner=libkp_empty_tool.so kernels=100 hook_calls=200 hook_ns=9000 ns_per_kernel=90.00 "
        "ns_per_call=45.000 floor_ns=8900 own_ns=100 own_ns_per_kernel=1.00\n"
        "kp_timing_shim inner=libkp_gpu_energy.so kernels=100 hook_calls=1400 hook_ns=70000 ns_per_kernel=700.00 "
        "ns_per_call=50.000 floor_ns=63000 own_ns=7000 own_ns_per_kernel=70.00\n"
        "kp_timing_shim inner=libkp_gpu_energy.so kernels=100 hook_calls=1400 hook_ns=80000 ns_per_kernel=800.00 "
        "ns_per_call=57.143 floor_ns=72000 own_ns=8000 own_ns_per_kernel=80.00\n")
    own, floor = mod.shim_own_costs(str(shim))
    assert own["libkp_gpu_energy.so"] == [70.0, 80.0]  # not 700 - 14 x 45
    assert own["libkp_empty_tool.so"] == [1.0]
    assert floor == 45.0


def test_overhead_summary_prints_the_shim_ratio_and_the_sampler_poll_share(repo_root, tmp_path, capsys):
    import json
    mod = _load(repo_root)
    tsv = tmp_path / "overhead.tsv"
    tsv.write_text("rep tool ns_per_kernel\n1 none 100\n1 empty 110\n1 simple-kernel-timer 130\n1 dooly 118\n")
    shim = tmp_path / "shim.txt"
    shim.write_text("kp_timing_shim inner=libkp_empty_tool.so kernels=10 hook_calls=20 hook_ns=400 ns_per_kernel=40 ns_per_call=20\n"
                    "kp_timing_shim inner=libkp_gpu_energy.so kernels=10 hook_calls=20 hook_ns=700 ns_per_kernel=70 ns_per_call=35\n"
                    "kp_timing_shim inner=libkp_kernel_timer.so kernels=10 hook_calls=20 hook_ns=1000 ns_per_kernel=100 ns_per_call=50\n")
    report = tmp_path / "dooly-1.json"
    report.write_text(json.dumps({"meta": {"sampler_cpu_s": "0.02", "sampler_poll_cpu_s": "0.005",
                                           "sampler_page_faults": "17"},
                                  "channels": [{"run_time_s": 4.0}]}))
    report2 = tmp_path / "dooly-2.json"
    report2.write_text(json.dumps({"meta": {"sampler_cpu_s": "0.06", "sampler_poll_cpu_s": "0.005",
                                            "sampler_page_faults": "5"},
                                   "channels": [{"run_time_s": 4.0}]}))
    mod.overhead(str(tsv), [str(report), str(report2)], str(shim))
    out = capsys.readouterr().out
    assert "own cost ratio dooly / simple-kernel-timer (run times) = 0.400" in out
    assert "own cost ratio dooly / simple-kernel-timer (shim) = 0.500 (goal <= 0.5: PASS)" in out
    assert "median 1.000% of one core over 2 runs (polling the power source: median 0.125%) (goal < 1%: FAIL)" in out
    assert "runs: 0.500% 1.500%; sampler page faults: 17 5" in out  # every run, not only the median


def test_overhead_summary_says_when_run_times_cannot_resolve_the_tools(repo_root, tmp_path, capsys):
    # The empty tool's runs as slow as the others' (the GPU's spread): no ratio, no PASS or FAIL from run times.
    mod = _load(repo_root)
    tsv = tmp_path / "overhead.tsv"
    tsv.write_text("rep tool ns_per_kernel\n1 none 100\n1 empty 120\n1 simple-kernel-timer 115\n1 dooly 118\n")
    mod.overhead(str(tsv), [], None)
    out = capsys.readouterr().out
    assert "(run times): not resolved (own costs -2.0 and -5.0 ns/kernel" in out
    assert "(run times) = " not in out
