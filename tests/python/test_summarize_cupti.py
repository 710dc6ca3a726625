"""scripts/gpu/summarize_cupti.py overhead: the CUPTI library's overhead runs summarized in each view (whole runs,
each run's fastest tenth of its blocks, the launching thread's CPU time and instructions, steal)."""

import importlib.util
import json


def _load(repo_root):
    spec = importlib.util.spec_from_file_location("summarize_cupti", repo_root / "scripts" / "gpu" / "summarize_cupti.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Per mode, the cost of a pass on a quiet host (ms) and the launching thread's instructions a pass.
COST = {"plain": 1.00, "cupti": 1.10, "dooly": 1.111, "nonvtx": 1.1055}
INSTR = {"plain": 100_000, "cupti": 112_000, "dooly": 112_560, "nonvtx": 112_100}


def _write_runs(folder, runs=5, blocks=40):
    """Each run: its blocks at the mode's cost, the odd runs on a host 30 % slower for their second half, and the
    run's whole-run mean from its blocks (as cupti_workload.py prints them)."""
    folder.mkdir()
    for r in range(runs):
        for mode, cost in COST.items():
            slow = 1.3 if r % 2 else 1.0
            block_ms = [cost * (slow if b >= blocks // 2 else 1.0) * (1 + 0.001 * (b % 3)) for b in range(blocks)]
            doc = {"tag": mode, "size": "small", "iters": 100 * blocks, "seconds": sum(block_ms) / 10,
                   "ms_per_iter": sum(block_ms) / blocks, "block_ms": block_ms,
                   "block_cpu_ms": [0.99 * b for b in block_ms], "block_instr": [INSTR[mode]] * blocks,
                   "steal_s": 0.01}
            (folder / f"small-{mode}-{r}.json").write_text(json.dumps(doc) + "\n")


def test_overhead_views_find_the_per_launch_cost_under_a_two_speed_host(repo_root, tmp_path, capsys):
    mod = _load(repo_root)
    _write_runs(tmp_path / "overhead")
    assert mod.overhead(str(tmp_path / "overhead")) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "overhead.json").read_text())["small"]
    # The fastest tenth of each run's blocks is the quiet host's: the modes' own costs, whatever the slow halves.
    fast = summary["fast_block_ms"]
    assert abs(fast["cupti"] / fast["plain"] - 1.10) < 1e-3
    assert abs(fast["dooly"] / fast["cupti"] - 1.01) < 1e-3
    assert abs(summary["thread_cpu_ms"]["dooly"] / summary["thread_cpu_ms"]["plain"] - 1.111) < 0.01
    assert summary["thread_instructions"]["dooly"] == INSTR["dooly"]
    assert len(summary["fast_block_ms_runs"]["plain"]) == 5
    # One row per view, the diagnostic mode under each, and the steal line.
    for label in ("  fast", "  cpu", "  instr"):
        assert any(line.startswith(label) for line in out.splitlines()), label
    assert "+10.00" in next(line for line in out.splitlines() if line.startswith("  fast"))
    assert "nonvtx" in out and "steal over the run's cores" in out


def test_overhead_without_blocks_prints_the_whole_run_views_only(repo_root, tmp_path, capsys):
    mod = _load(repo_root)
    folder = tmp_path / "overhead"
    folder.mkdir()
    for mode, cost in COST.items():  # an older workload's lines: no blocks, no CPU time, no steal
        (folder / f"small-{mode}-1.json").write_text(json.dumps(
            {"tag": mode, "size": "small", "iters": 4000, "seconds": 4 * cost, "ms_per_iter": cost}) + "\n")
    assert mod.overhead(str(folder)) == 0
    out = capsys.readouterr().out
    assert "  fast" not in out and "  cpu" not in out and "steal" not in out
    assert json.loads((tmp_path / "overhead.json").read_text())["small"]["dooly_over_cupti"] > 0
