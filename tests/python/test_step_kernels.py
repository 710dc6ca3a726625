"""scripts/analysis/step_kernels.py: runs that differ only in output length difference away the engine's start-up
(its warm-up at the largest shapes), leaving each kernel's time in the added steps alone."""

import gzip
import importlib.util
import io
import json
import tarfile


def _load(repo_root):
    path = repo_root / "scripts" / "analysis" / "step_kernels.py"
    spec = importlib.util.spec_from_file_location("step_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ATTN, COPY = "cudnn_sdpa_fprop", "elementwise_kernel"


def _run(steps, layers=32):
    """A live result of `steps` decode steps of 30 ms, and its CUPTI report: per step `layers` attention calls of
    430 us and 4 copies a layer of 97 us; at start-up one warm-up forward whose attention calls take 22 ms each."""
    live = {"steps": [{"kind": "decode", "num_requests": 32, "duration_s": 0.030} for _ in range(steps)]}
    attn_calls, copy_calls = layers * (steps + 1), 4 * layers * (steps + 1)
    regions = [
        {"kind": "kernel", "name": ATTN, "calls": attn_calls, "time_s": layers * (steps * 430e-6 + 22e-3)},
        {"kind": "kernel", "name": COPY, "calls": copy_calls, "time_s": copy_calls * 97e-6},
        {"kind": "stream", "name": "GPU 0 stream 13", "calls": attn_calls + copy_calls, "time_s": 1.0},
    ]
    return live, {"channels": [{"regions": regions}]}


def _archive(path, runs):
    with tarfile.open(path, "w:gz") as t:
        for name, (live, report) in runs.items():
            for member, data in ((f"{name}.json.gz", gzip.compress(json.dumps(live).encode())),
                                 (f"{name}.cupti.json", json.dumps(report).encode())):
                info = tarfile.TarInfo(member)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))


def test_added_steps_leave_the_start_up_warm_up_out(repo_root, tmp_path, capsys):
    mod = _load(repo_root)
    path = tmp_path / "step-kernels.tgz"
    _archive(path, {"m__graphs-on__batch-32__out-64": _run(65), "m__graphs-on__batch-32__out-128": _run(129)})
    runs = list(mod.runs_in(str(path)))
    whole = {r["run"]: r for r in (mod.summarise(s, live, rep, 5) for s, live, rep in runs)}
    attn_whole = next(k for k in whole["m__graphs-on__batch-32__out-128"]["top"] if k["kernel"] == ATTN)
    assert attn_whole["us_per_call"] > 590  # the warm-up's 22 ms calls averaged in: the old analysis's reading
    (diff,) = mod.added_steps(runs, 5)
    assert diff["added_steps"] == 64
    per = {k["kernel"]: k for k in diff["top"]}
    assert abs(per[ATTN]["us_per_call"] - 430) < 1e-6
    assert abs(per[ATTN]["calls_per_step"] - 32) < 1e-9
    assert abs(per[COPY]["us_per_call"] - 97) < 1e-6
    assert abs(diff["kernel_ms_per_step"] - 32 * (0.430 + 4 * 0.097)) < 1e-9
    assert abs(diff["step_wall_ms"] - 30.0) < 1e-9
    assert "per added step (64 steps)" in capsys.readouterr().out


def test_runs_without_an_output_pair_give_no_difference(repo_root, tmp_path):
    mod = _load(repo_root)
    path = tmp_path / "step-kernels.tgz"
    _archive(path, {"m__graphs-on__batch-32": _run(129), "m__graphs-on__batch-8__out-64": _run(65)})
    assert mod.added_steps(list(mod.runs_in(str(path))), 5) == []
