"""dooly live on the CPU with a tiny model, end to end through the real code path: the C++ CLI checks the arguments
and execs python -m dooly.live, which drives the real HF continuous-batching engine in its own thread, records the
steps through the engine's own hooks and measures energy with the project's energy engine fed by a fake power
source (the stub libnvidia-ml.so.1 the C++ tests build: a scripted constant 150 W with an energy counter; and the
replay source playing a recorded H200 run). Every assertion is on the recorded data."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DOOLY_BUILD_DIR", REPO / "build" / "default"))
STUB_NVML = BUILD / "tests" / "power" / "stub_nvml" / "libnvidia-ml.so.1"
STUB_CUDA = BUILD / "tests" / "power" / "stub_cuda" / "libcuda.so.1"
RECORDING = REPO / "data" / "runs" / "h200-kokkos-demo.recording"
POWER_W = 150.0
WORKLOAD = "poisson:rate=25,n=10,prompt=uniform:8:300,output=uniform:1:8,seed=3"


def exe() -> str:
    return os.environ.get("DOOLY_EXE", str(BUILD / "src" / "dooly" / "cli" / "dooly"))


def env(**extra) -> dict:
    e = dict(os.environ)
    e.update({"DOOLY_SOURCE_DIR": str(REPO), "PYTHONPATH": f"{REPO / 'python'}:{BUILD / 'python'}"})
    e.update(extra)
    return e


def stub_env(tmp: Path) -> dict:
    for lib in (STUB_NVML, STUB_CUDA):
        if not lib.exists():
            pytest.fail(f"{lib} is missing: build it (scripts/build.sh default dooly_stub_nvml dooly_stub_cuda)")
    script = tmp / "stub.txt"
    script.write_text(f"device 0000:00:06.0 Stub H200\npower * 0 {POWER_W}\nhistory_ms 1000\nfield_period_ms 10\n")
    return env(DOOLY_POWER_SOURCE="nvml", DOOLY_NVML_LIBRARY=str(STUB_NVML), DOOLY_LIBCUDA=str(STUB_CUDA),
               DOOLY_STUB_NVML_SCRIPT=str(script))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One run through `dooly live` (C++ CLI -> python -m dooly.live) under the stub NVML at 150 W."""
    tmp = tmp_path_factory.mktemp("live")
    out = tmp / "live.json"
    cmd = [exe(), "live", "--model", "llama-3.1-8b", "--tiny", "--device", "cpu", "--workload", WORKLOAD,
           "--out", str(out), "--slo", "ttft_s=5,tpot_s=1", "--warmup", "1"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=stub_env(tmp), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    doc["_stdout"], doc["_seconds"] = r.stdout, time.perf_counter() - t
    return doc


def test_every_request_produces_exactly_its_output_length(live):
    import dooly_core

    spec = dooly_core.workload_requests(WORKLOAD)["requests"]
    assert live["version"] == 1 and live["problems"] == []
    assert [r["id"] for r in live["requests"]] == [s[0] for s in spec]  # the simulator's requests, in order
    for r, (rid, arrival, prompt, output) in zip(live["requests"], spec):
        assert r["finished"] and r["error"] is None
        assert (r["prompt_tokens"], r["output_tokens"], r["requested_output_tokens"]) == (prompt, output, output)
        assert len(r["token_times_s"]) == output
        assert r["scheduled_arrival_s"] == pytest.approx(arrival, abs=1e-6)
        assert 0 <= r["submit_lag_s"] < 0.25  # submitted at its arrival (open loop), late only by a wake-up
        assert r["arrival_s"] >= r["scheduled_arrival_s"]
    assert live["summary"]["completed"] == len(spec) and not live["summary"]["aborted_at_deadline"]


def test_latencies_match_their_definitions_on_the_recorded_times(live):
    reqs = live["requests"]
    for r in reqs:
        t = r["token_times_s"]
        assert t == sorted(t) and t[0] > r["arrival_s"]
        assert r["ttft_s"] == pytest.approx(t[0] - r["arrival_s"], abs=2e-6)
        assert r["e2e_s"] == pytest.approx(t[-1] - r["arrival_s"], abs=2e-6)
        if r["output_tokens"] > 1:
            assert r["tpot_s"] == pytest.approx((r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1), abs=2e-6)
        else:
            assert r["tpot_s"] is None
    s = live["summary"]
    for key in ("ttft_s", "e2e_s"):
        xs = [r[key] for r in reqs]
        assert s[key]["mean"] == pytest.approx(np.mean(xs))
        for q, name in ((50, "median"), (90, "p90"), (99, "p99")):
            assert s[key][name] == pytest.approx(np.percentile(xs, q))
    itl = [b - a for r in reqs for a, b in zip(r["token_times_s"], r["token_times_s"][1:])]
    assert s["itl_s"]["median"] == pytest.approx(np.median(itl), abs=2e-6)
    assert s["duration_s"] == pytest.approx(max(r["token_times_s"][-1] for r in reqs))
    assert s["output_throughput_tps"] == pytest.approx(sum(r["output_tokens"] for r in reqs) / s["duration_s"])
    good = sum(1 for r in reqs if r["ttft_s"] <= 5 and (r["tpot_s"] is None or r["tpot_s"] <= 1))
    assert s["good_requests"] == good and s["slo"] == {"ttft_s": 5.0, "tpot_s": 1.0}


def test_step_compositions_account_for_every_token(live):
    steps = live["steps"]
    assert [s["index"] for s in steps] == list(range(len(steps)))
    for a, b in zip(steps, steps[1:]):
        assert a["start_s"] < a["end_s"] <= b["start_s"]  # one step at a time, in order
    by_id = {r["id"]: r for r in live["requests"]}
    fed = dict.fromkeys(by_id, 0)
    sampled: dict[str, list] = {rid: [] for rid in by_id}
    for s in steps:
        assert s["num_tokens"] == sum(x["new_tokens"] for x in s["requests"])
        assert s["num_requests"] == len(s["requests"])
        assert s["num_decode_requests"] == sum(x["decode"] for x in s["requests"])
        for x in s["requests"]:
            r = by_id[x["id"]]
            assert x["context_tokens"] == fed[x["id"]]  # the cache holds exactly what earlier steps fed
            fed[x["id"]] += x["new_tokens"]
            if x["decode"]:
                assert x["new_tokens"] == 1
            if x["decode"] or fed[x["id"]] == r["prompt_tokens"]:  # a decode, or the prompt's last chunk: a token
                sampled[x["id"]].append(s)
    for rid, r in by_id.items():
        # The prompt and every output token but the last (sampled, never fed back) went through the model once.
        assert fed[rid] == r["prompt_tokens"] + r["output_tokens"] - 1 == r["computed_tokens"]
        assert r["recomputed_tokens"] == 0
        # Token k was stamped by the engine inside the k-th step that sampled one for this request.
        assert len(sampled[rid]) == r["output_tokens"]
        for t, s in zip(r["token_times_s"], sampled[rid]):
            assert s["start_s"] <= t <= s["end_s"]


def test_step_energy_is_power_times_window_and_the_split_conserves_it(live):
    p = live["power"]
    assert p["source"] == "nvml" and p["counted_channels"] == ["gpu0"]
    steps = live["steps"]
    assert all(s["energy_j"] is not None for s in steps)
    for s in steps:  # a constant 150 W: each step's window holds 150 W x its duration
        assert s["energy_j"] == pytest.approx(POWER_W * s["duration_s"], rel=0.02, abs=POWER_W * 2e-4)
    steps_j = sum(s["energy_j"] for s in steps)
    assert p["steps_energy_j"] == pytest.approx(steps_j)
    req_j = sum(r["energy_j"] for r in live["requests"])
    assert req_j == pytest.approx(steps_j, rel=1e-9)  # the split hands out exactly the steps' energy
    assert p["requests_energy_j"] == pytest.approx(req_j, rel=1e-9)
    # Each request's share: the tokens it computed in each step over the step's tokens.
    rid = live["requests"][0]["id"]
    mine = sum(s["energy_j"] * x["new_tokens"] / s["num_tokens"] for s in steps for x in s["requests"] if x["id"] == rid)
    assert live["requests"][0]["energy_j"] == pytest.approx(mine, rel=1e-12)
    # The run: steps + empty windows + what fell between steps = the integral over the run, and the vendor counter
    # read at start and stop agrees with it.
    assert p["run_energy_j"] == pytest.approx(p["steps_energy_j"] + p["empty_windows_energy_j"]
                                              + p["between_steps_energy_j"], rel=1e-9)
    assert p["run_energy_j"] == pytest.approx(POWER_W * p["run_time_s"], rel=0.01)
    assert p["counter_ratio"] == pytest.approx(1.0, abs=0.03)
    s = live["summary"]
    assert s["energy_j"] == pytest.approx(req_j)
    assert s["j_per_output_token"] == pytest.approx(req_j / s["output_tokens"])
    assert s["avg_power_w"] == pytest.approx(POWER_W, rel=0.01)
    assert "J/token" in live["_stdout"] and "ratio" in live["_stdout"]


def test_the_engine_settings_are_recorded(live):
    e = live["engine"]
    assert e["num_blocks"] == 331 and e["block_size"] == 256 and e["scheduler"] == "fifo"
    assert e["max_batch_tokens"] > 0 and e["max_batch_requests"] > 0
    assert e["cuda_graphs"] == {"varlen": False, "decode": False}
    assert e["model"] == "llama-3.1-8b" and e["tiny"] is True
    assert live["workload"]["spec"] == WORKLOAD and live["workload"]["n"] == 10
    assert live["run"]["setup"]["warmup_requests"] == 1
    assert live["_seconds"] < 60
    # The board's state at the run's start and end: none for a CPU run.
    assert live["power"]["gpu_state"] == {"start": {}, "end": {}}


def test_a_cuda_run_records_the_boards_clock_and_temperature(monkeypatch, tmp_path):
    """gpu_state asks nvidia-smi as the profiler does for every point (a fake one on PATH here)."""
    from dooly.live.run import gpu_state

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '1980, 41, 0x0000000000000000, GPU-0b4c'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert gpu_state("cuda:0") == {"sm_clock_mhz": 1980, "temperature_c": 41,
                                   "throttle_reasons": "0x0000000000000000", "gpu_uuid": "GPU-0b4c"}
    assert gpu_state("cpu") == {}
    fake.write_text("#!/bin/sh\nexit 9\n")  # a failing nvidia-smi: no state, never an error
    assert gpu_state("cuda") == {}


# ------------------------------------------------------------------------------------------------ in process

def _run_in_process(monkeypatch, workload, **power_env):
    from dooly.live.run import LiveOptions, run_live

    for k in ("DOOLY_POWER_SOURCE", "DOOLY_REPLAY_FILE", "DOOLY_NVML_LIBRARY"):
        monkeypatch.delenv(k, raising=False)
    for k, v in power_env.items():
        monkeypatch.setenv(k, v)
    opts = LiveOptions(model="qwen3-8b", config_path=str(REPO / "data/models/tiny/qwen3-8b.json"),
                       workload=workload, device="cpu", tiny=True, scheduler="prefill_first")
    return run_live(opts, log=lambda msg: None)


def test_closed_loop_users_wait_for_their_previous_result(monkeypatch):
    doc = _run_in_process(monkeypatch, "closed:users=2,n=6,prompt=uniform:8:64,output=fixed:4,think=0.05,seed=1",
                          DOOLY_POWER_SOURCE="replay", DOOLY_REPLAY_FILE=str(RECORDING))
    assert doc["problems"] == [] and doc["engine"]["scheduler"] == "prefill_first"
    reqs = doc["requests"]
    assert all(r["finished"] and r["output_tokens"] == 4 for r in reqs)
    assert [r["user"] for r in reqs[:2]] == [0, 1]
    for u in (0, 1):
        mine = [r for r in reqs if r["user"] == u]
        for prev, nxt in zip(mine, mine[1:]):  # the next request goes out think_s after the previous one's last token
            assert nxt["arrival_s"] >= prev["token_times_s"][-1] + 0.05 - 1e-6
    for r in reqs:  # never more than 2 requests in flight
        inside = [q for q in reqs if q["arrival_s"] <= r["arrival_s"] < q["token_times_s"][-1]]
        assert len(inside) <= 2
    p = doc["power"]  # the replayed H200 run: every step gets energy, and the split hands all of it out
    assert p["source"] == "replay" and all(s["energy_j"] > 0 for s in doc["steps"])
    assert sum(r["energy_j"] for r in reqs) == pytest.approx(p["steps_energy_j"], rel=1e-9)


def test_without_a_power_source_the_file_says_why(monkeypatch):
    doc = _run_in_process(monkeypatch, "constant:rate=50,n=2,prompt=fixed:16,output=fixed:2",
                          DOOLY_POWER_SOURCE="nvml", DOOLY_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    assert doc["power"]["source"] is None and doc["power"]["why"].startswith("no power source: ")
    assert "/nonexistent/libnvidia-ml.so.1" in doc["power"]["why"]
    assert all(s["energy_j"] is None for s in doc["steps"]) and all(r["energy_j"] is None for r in doc["requests"])
    assert doc["summary"]["j_per_output_token"] is None and doc["summary"]["completed"] == 2


# ------------------------------------------------------------------------------------------------ bad input

BAD = [
    (["--model", "llama-9", "--tiny"], "no tiny model config named 'llama-9'"),
    (["--workload", "poisson:rate=2,n=3,prompt=fixed:8"], "output"),
    (["--workload", "poisson:rate=-1,n=3,prompt=fixed:8,output=fixed:2"], "rate"),
    (["--workload", "trace:/nonexistent.jsonl"], "/nonexistent.jsonl"),
    (["--attention", "sdpa"], "not a paged implementation"),
    (["--out", "/nonexistent/dir/live.json"], "does not exist"),
]


def _bad_args(over: list[str]) -> list[str]:
    base = {"--model": "llama-3.1-8b", "--workload": "poisson:rate=2,n=3,prompt=fixed:8,output=fixed:2",
            "--out": "/tmp/never-written.json", "--device": "cpu"}
    flags = ["--tiny"] if "--tiny" in over else []
    over = [x for x in over if x != "--tiny"]
    base.update(dict(zip(over[::2], over[1::2])))
    return [x for kv in base.items() for x in kv] + flags


@pytest.mark.parametrize("over,words", BAD, ids=[b[1][:20] for b in BAD])
@pytest.mark.parametrize("front", ["cli", "python"])
def test_bad_input_is_one_line_and_exit_2_before_the_engine(over, words, front, tmp_path):
    args = _bad_args(over)
    if front == "cli":
        cmd = [exe(), "live", *args]
    else:
        cmd = [sys.executable, "-m", "dooly.live", *args]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=60, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and words.lower() in lines[0].lower(), r.stderr
    assert lines[0].startswith("dooly") and "Traceback" not in r.stderr
    assert time.perf_counter() - t < 10  # torch was never imported
    assert not Path("/tmp/never-written.json").exists()


def test_the_cli_declares_every_flag_of_the_python_side():
    from dooly.live.__main__ import parser

    py_flags = {a.option_strings[0] for a in parser()._actions if a.option_strings and a.option_strings[0] != "-h"}
    r = subprocess.run([exe(), "live", "--help"], capture_output=True, text=True, env=env(), timeout=30)
    assert r.returncode == 0
    missing = {f for f in py_flags if f not in r.stdout}
    assert not missing, f"dooly live --help lacks {missing}"


def test_a_failing_meter_never_reaches_the_engine():
    """The recorder's hooks run in the engine's thread: a meter that raises is dropped, the failure kept, and the
    engine serves on with the steps still recorded."""
    from dooly.engines.hf import HFEngine
    from dooly.live.step_recorder import StepRecorder

    class Failing:
        calls = 0

        def begin(self, name):
            Failing.calls += 1
            if Failing.calls > 3:
                raise RuntimeError("meter broke")

        def end(self, name):
            pass

    with HFEngine(str(REPO / "data/models/tiny/llama-3.1-8b.json")) as eng:
        with StepRecorder(eng._manager.batch_processor, Failing()) as rec:
            steps = eng.run([(16, 4), (40, 3)])
        assert sorted(len(v) for v in eng.last_outputs.values()) == [3, 4]
    assert isinstance(rec.error, RuntimeError) and "meter broke" in str(rec.error)
    assert len(rec.steps) == len(steps)  # every step recorded; the ones after the failure without a window
    assert [s["num_tokens"] for s in rec.steps] == [s.num_tokens for s in steps]
    assert rec.steps[0]["window"] is not None and rec.steps[-1]["window"] is None


def test_the_recorder_marks_the_steps_that_captured_a_cuda_graph(monkeypatch):
    """CUDA graphs do not run on the CPU: the engine's own graph buffer gets an entry where a capture would store one
    (ModelRunner.compute_batch, steps 1 and 3), and the recorder, reading the buffer around each step, marks exactly
    those steps as captures and counts the graphs held."""
    from dooly.engines.hf import HFEngine
    from dooly.live.step_recorder import StepRecorder, graph_count

    class Graph:  # what CudaGraphBuffer holds: it resets each graph when the engine closes
        def reset(self):
            pass

    with HFEngine(str(REPO / "data/models/tiny/llama-3.1-8b.json")) as eng:
        bp = eng._manager.batch_processor
        assert graph_count(bp) == 0
        runner, calls = bp.model_runner, []
        compute = runner.compute_batch

        def compute_batch(model, batch_data):
            calls.append(len(calls) + 1)
            if calls[-1] in (1, 3):
                bp.inputs_and_outputs.graphs.set_graph(("shape", calls[-1]), Graph())
            return compute(model, batch_data)

        monkeypatch.setattr(runner, "compute_batch", compute_batch)
        with StepRecorder(bp) as rec:
            eng.run([(16, 4), (40, 3)])
    assert rec.error is None and len(rec.steps) == len(calls) >= 4
    assert [s["captured"] for s in rec.steps] == [i in (1, 3) for i in calls]
    assert [s["graphs"] for s in rec.steps][:4] == [1, 1, 2, 2]


def test_evicted_requests_keep_their_arrival_and_every_token_time(monkeypatch):
    """A cache too small for the load: the engine evicts requests and re-creates them (a soft reset: new state, new
    created_time, no timestamps); the recorder keeps the first arrival and every token's stamp."""
    from dooly.live.run import LiveOptions, run_live

    monkeypatch.setenv("DOOLY_POWER_SOURCE", "replay")
    monkeypatch.setenv("DOOLY_REPLAY_FILE", str(RECORDING))
    opts = LiveOptions(model="llama-3.1-8b", config_path=str(REPO / "data/models/tiny/llama-3.1-8b.json"),
                       workload="poisson:rate=200,n=24,prompt=uniform:32:64,output=uniform:16:32,seed=2",
                       device="cpu", tiny=True, block_size=16, num_blocks=24)
    doc = run_live(opts, log=lambda msg: None)
    assert doc["problems"] == []
    reqs = doc["requests"]
    assert doc["summary"]["evictions"] > 0 and doc["summary"]["recomputed_tokens"] > 0
    for r in reqs:
        assert r["finished"] and len(r["token_times_s"]) == r["output_tokens"] == r["requested_output_tokens"]
        assert r["token_times_s"] == sorted(r["token_times_s"]) and r["token_times_s"][0] > r["arrival_s"]
        # Tokens are computed again only after an eviction; an evicted request whose blocks were still cached
        # finds them again through the engine's prefix sharing and may recompute nothing.
        assert r["recomputed_tokens"] == 0 or r["evictions"] > 0
    assert sum(r["energy_j"] for r in reqs) == pytest.approx(doc["power"]["steps_energy_j"], rel=1e-9)
