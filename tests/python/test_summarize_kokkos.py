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
