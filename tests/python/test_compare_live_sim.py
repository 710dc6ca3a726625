"""The simulator's HF engine model against the real engine, on the CPU: an offline batch (every request arrives at
0, so no arrival timing can reorder admission) served by `dooly live` on a tiny model and simulated by `dooly
simulate` with the engine settings the live run resolved. The scheduler emulation must give the same steps, step by
step (`dooly compare`'s horizon covers the whole run), under both schedulers and with split prefills. Times are
not compared here (a tiny model on a CPU is not what the store measured)."""

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DOOLY_BUILD_DIR", REPO / "build" / "default"))


def exe() -> str:
    return os.environ.get("DOOLY_EXE", str(BUILD / "src" / "dooly" / "cli" / "dooly"))


def env() -> dict:
    e = dict(os.environ)
    e.update({"DOOLY_SOURCE_DIR": str(REPO), "PYTHONPATH": f"{REPO / 'python'}:{BUILD / 'python'}"})
    return e


def run(*args, check=True):
    r = subprocess.run([exe(), *map(str, args)], capture_output=True, text=True, env=env(), timeout=600)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def batch(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"r{i}", "arrival_s": 0.0, "prompt_tokens": rng.randint(8, 700),
                                "output_tokens": rng.randint(1, 12)}) + "\n")
    return path


@pytest.mark.parametrize("scheduler", ["fifo", "prefill_first"])
def test_an_offline_batch_gives_the_engines_steps_exactly(tmp_path, scheduler):
    trace = batch(tmp_path / "batch.jsonl", 24, seed=7)
    live = tmp_path / "live.json"
    run("live", "--model", "llama-3.1-8b", "--tiny", "--device", "cpu", "--scheduler", scheduler,
        "--workload", f"trace:{trace}", "--out", live)
    engine = json.loads(live.read_text())["engine"]
    sim = tmp_path / "sim.json"
    run("simulate", "--model", "llama-3.1-8b", "--scheduler", scheduler, "--workload", f"trace:{trace}",
        "--max-batch-tokens", engine["max_batch_tokens"], "--num-blocks", engine["num_blocks"],
        "--block-size", engine["block_size"], "--out", sim)
    report = tmp_path / "compare.json"
    out = run("compare", live, sim, "--json", report, "--plot", tmp_path / "c").stdout
    c = json.loads(report.read_text())
    steps = c["steps"]
    assert steps["live"] == steps["sim"] > 10, out
    assert steps["matching"] == steps["compared"] == steps["horizon"], out  # every step, from the first
    assert c["requests"]["both_finished"] == 24 and c["requests"]["only_live"] == 0
    lives = json.loads(live.read_text())["steps"]
    assert any(s["num_prefill_tokens"] and s["num_decode_requests"] for s in lives)  # mixed steps were emulated
    assert any(s["num_tokens"] == engine["max_batch_tokens"] for s in lives)  # split prefills at the budget
    assert (tmp_path / "c-cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_refuses_what_is_not_a_result_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 2, "requests": []}')
    r = run("compare", bad, bad, check=False)
    assert r.returncode == 2
    assert "result file version 2 (this build reads version 1)" in r.stderr and "\n" not in r.stderr.strip()
