"""The HF continuous-batching engine driver on CPU: what the engine scheduled, step by step, and the forward hook."""

import pytest
import torch
import transformers

from dooly.engines.hf import EngineError, HFEngine, StepInfo
from dooly.models import ConfigError, list_models, tiny_path

# Two prompts fill the first step (40 + 24 of 30 tokens = 64 = max_batch_tokens); the next step mixes req_0's first
# decode with the 6 remaining prompt tokens of req_1 and all 50 of req_2.
MIX = [(40, 4), (30, 8), (50, 3)]
MIX_STEPS = [  # (kind, tokens, requests, prefill tokens, decode requests), as the FIFO scheduler does it
    ("prefill", 64, 2, 64, 0),
    ("mixed", 57, 3, 56, 1),
    ("decode", 3, 3, 0, 3),
    ("decode", 3, 3, 0, 3),
    ("decode", 1, 1, 0, 1), ("decode", 1, 1, 0, 1), ("decode", 1, 1, 0, 1), ("decode", 1, 1, 0, 1),
    ("decode", 1, 1, 0, 1),
]


def _summary(steps):
    return [(s.kind, s.num_tokens, s.num_requests, s.num_prefill_tokens, s.num_decode_requests) for s in steps]


@pytest.fixture(scope="module")
def llama():
    engine = HFEngine(str(tiny_path("llama-3.1-8b")), max_batch_tokens=64)
    yield engine
    engine.close()


def test_mix_yields_prefill_then_mixed_then_decode_steps(llama):
    steps = llama.run(MIX)
    assert _summary(steps) == MIX_STEPS
    assert [s.step for s in steps] == list(range(len(MIX_STEPS)))
    mixed = steps[1]
    assert [(r.request_id, r.query_tokens, r.past_tokens, r.is_decode) for r in mixed.requests] == [
        ("req_0", 1, 40, True), ("req_1", 6, 24, False), ("req_2", 50, 0, False)]
    assert mixed.num_prefill_requests == 2


def test_token_accounting_matches_requests(llama):
    steps = llama.run(MIX)
    # each prompt token is processed once; each generated token but the last is fed back once
    assert sum(s.num_tokens for s in steps) == sum(p for p, _ in MIX) + sum(n - 1 for _, n in MIX)
    assert sum(s.num_prefill_tokens for s in steps) == sum(p for p, _ in MIX)
    assert sum(s.num_decode_requests for s in steps) == sum(n - 1 for _, n in MIX)
    assert {rid: len(toks) for rid, toks in llama.last_outputs.items()} == {"req_0": 4, "req_1": 8, "req_2": 3}
    assert {rid: len(toks) for rid, toks in llama.last_prompts.items()} == {"req_0": 40, "req_1": 30, "req_2": 50}
    for i, (prompt_len, new_tokens) in enumerate(MIX):
        mine = [r for s in steps for r in s.requests if r.request_id == f"req_{i}"]
        assert sum(r.query_tokens for r in mine) == prompt_len + new_tokens - 1
        # the KV cache grows by exactly what was processed before
        past = 0
        for r in mine:
            assert r.past_tokens == past
            past += r.query_tokens


def test_long_prompt_is_chunked_by_max_batch_tokens(llama):
    steps = llama.run([(150, 2)])
    assert [(s.kind, s.num_tokens, s.requests[0].past_tokens) for s in steps] == [
        ("prefill", 64, 0), ("prefill", 64, 64), ("prefill", 22, 128), ("decode", 1, 150)]


def test_on_forward_is_called_once_per_step_with_that_step(llama):
    seen = []

    def hook(info, call):
        out = call()
        seen.append((info, tuple(out.logits.shape)))
        return out

    steps = llama.run(MIX, on_forward=hook)
    assert [info for info, _ in seen] == steps
    assert all(isinstance(info, StepInfo) for info, _ in seen)
    # one logits row per scheduled request (a chunked prompt's row is computed and dropped by the engine)
    assert [shape for _, shape in seen] == [(1, s.num_requests, 512) for s in steps]


def test_on_forward_result_is_what_the_engine_uses(llama):
    def force_token_7(info, call):
        out = call()
        logits = torch.zeros_like(out.logits)
        logits[..., 7] = 1.0
        out.logits = logits
        return out

    steps = llama.run(MIX, on_forward=force_token_7)
    assert _summary(steps) == MIX_STEPS
    assert llama.last_outputs == {"req_0": [7] * 4, "req_1": [7] * 8, "req_2": [7] * 3}
    llama.run(MIX)
    assert any(t != 7 for toks in llama.last_outputs.values() for t in toks)  # the weights do not say 7


def test_error_in_on_forward_is_raised_and_engine_stays_usable(llama):
    class Boom(Exception):
        pass

    def hook(info, call):
        if info.step == 1:
            raise Boom("tracer failed")
        return call()

    with pytest.raises(Boom, match="tracer failed"):
        llama.run(MIX, on_forward=hook)
    assert _summary(llama.run(MIX)) == MIX_STEPS


def test_same_requests_give_same_steps_and_outputs():
    a = HFEngine(str(tiny_path("llama-3.1-8b")), max_batch_tokens=64)
    b = HFEngine(str(tiny_path("llama-3.1-8b")), attention="paged|eager", max_batch_tokens=64)
    try:
        assert _summary(a.run(MIX)) == _summary(b.run(MIX)) == MIX_STEPS
        assert a.last_prompts == b.last_prompts
        assert a.last_outputs == b.last_outputs  # same weights (seeded), eager and sdpa agree on greedy tokens
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("name", ["llama-3.1-8b", "gemma-2-9b-it", "phi-3-mini-4k-instruct"])
def test_paged_engine_generates_what_plain_generate_does(name):
    """The paged KV cache on CPU is exact: greedy tokens equal transformers' ordinary generate() with the same
    weights. Gemma 2 (window 32) and Phi-3 (window 48) exercise sliding windows shorter than the sequences."""
    engine = HFEngine(str(tiny_path(name)), max_batch_tokens=64)
    try:
        engine.run([(40, 6), (52, 5)])
        ref = transformers.AutoModelForCausalLM.from_config(engine.config, attn_implementation="sdpa",
                                                            dtype=torch.float32)
        ref.load_state_dict(engine.model.state_dict())
        ref.eval()
        for rid, prompt in engine.last_prompts.items():
            n = len(engine.last_outputs[rid])
            out = ref.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                               eos_token_id=None, pad_token_id=0)
            assert out[0, len(prompt):].tolist() == engine.last_outputs[rid], rid
    finally:
        engine.close()


@pytest.mark.parametrize("name", list_models())
def test_every_tiny_model_runs_prefill_and_mixed_steps(name):
    engine = HFEngine(str(tiny_path(name)), max_batch_tokens=32)
    try:
        steps = engine.run([(20, 3), (25, 2)])
        assert _summary(steps) == [("prefill", 32, 2, 32, 0), ("mixed", 14, 2, 13, 1), ("decode", 2, 2, 0, 2)]
        assert {k: len(v) for k, v in engine.last_outputs.items()} == {"req_0": 3, "req_1": 2}
    finally:
        engine.close()


def test_engine_info_and_limits(llama):
    info = llama.engine_info()
    assert info["engine"] == "hf-transformers"
    assert info["transformers_version"] == transformers.__version__ == "5.17.0"
    assert info["torch_version"] == torch.__version__ and info["torch_version"].startswith("2.11.0")
    assert (info["attention"], info["dtype"], info["kv_dtype"], info["block_size"]) == (
        "paged|sdpa", "float32", "float32", 256)
    assert (info["device"], info["scheduler"], info["cuda_graphs"]) == ("cpu", "FIFOScheduler", [False, False])
    assert info["device_name"].startswith("cpu")
    # max_batch_tokens=64 caps the engine's requests per batch to 64 as well
    assert llama.limits() == {"max_batch_tokens": 64, "max_batch_requests": 64, "block_size": 256, "num_blocks": 331}


def test_default_limits_are_distinct_odd_values():
    with HFEngine(str(tiny_path("qwen2.5-7b"))) as engine:
        assert engine.limits() == {"max_batch_tokens": 521, "max_batch_requests": 263, "block_size": 256,
                                   "num_blocks": 331}
    # The engine caps requests per batch at max_batch_tokens, and at num_blocks where it cannot share prefix blocks
    # (models with sliding-window layers): limits() reports what the engine resolved, not what was asked.
    with HFEngine(str(tiny_path("qwen2.5-7b")), block_size=32, num_blocks=97, max_batch_tokens=200) as engine:
        assert engine.limits() == {"max_batch_tokens": 200, "max_batch_requests": 200, "block_size": 32,
                                   "num_blocks": 97}
    with HFEngine(str(tiny_path("gemma-2-9b-it")), block_size=32, num_blocks=97, max_batch_tokens=200) as engine:
        assert engine.limits() == {"max_batch_tokens": 200, "max_batch_requests": 97, "block_size": 32,
                                   "num_blocks": 97}


def test_config_int_attributes(llama):
    ints = llama.config_int_attributes()
    expected = {"hidden_size": 64, "intermediate_size": 176, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 16, "num_hidden_layers": 3, "vocab_size": 512, "max_position_embeddings": 131072,
                "rope_parameters.original_max_position_embeddings": 8192, "bos_token_id": 511, "eos_token_id": 510,
                "pretraining_tp": 1}
    assert {k: ints[k] for k in expected} == expected
    assert all(type(v) is int for v in ints.values())
    assert "tie_word_embeddings" not in ints and "use_cache" not in ints  # booleans are not integers here
    assert not any(k.startswith(("id2label", "label2id")) for k in ints)
    with HFEngine(str(tiny_path("gemma-3-1b-it"))) as gemma3:
        g = gemma3.config_int_attributes()
        assert g["rope_parameters.sliding_attention.rope_theta"] == 10000
        assert g["rope_parameters.full_attention.rope_theta"] == 1000000
        assert (g["sliding_window"], g["num_key_value_heads"], g["eos_token_id.1"]) == (24, 1, 106)


def test_bad_arguments_are_refused(llama, tmp_path):
    with pytest.raises(ValueError, match=r"not a paged implementation.*'paged\|sdpa'"):
        HFEngine(str(tiny_path("llama-3.1-8b")), attention="sdpa")
    with pytest.raises(ValueError, match=r"request 1 is \(0, 3\)"):
        llama.run([(4, 1), (0, 3)])
    with pytest.raises(ValueError, match=r"not a torch dtype"):
        HFEngine(str(tiny_path("llama-3.1-8b")), dtype="float33")
    if not torch.cuda.is_available():
        with pytest.raises(EngineError, match=r"no CUDA device"):
            HFEngine(str(tiny_path("llama-3.1-8b")), device="cuda")
    assert llama.run([]) == []


def test_bad_config_files_give_the_clear_error(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"model_type": "llama", "hidden_size": }')
    with pytest.raises(ConfigError, match=r"broken\.json: malformed JSON at line 1"):
        HFEngine(str(bad))
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"model_type": "not-a-model"}')
    with pytest.raises(ConfigError, match=r"unknown\.json: field 'model_type' = 'not-a-model' is not a model type"):
        HFEngine(str(unknown))


def test_closed_engine_refuses_to_run():
    engine = HFEngine(str(tiny_path("llama-3.1-8b")), max_batch_tokens=64)
    engine.close()
    with pytest.raises(EngineError, match="closed"):
        engine.run(MIX)


def test_a_timed_run_splits_every_step_into_the_engines_phases(llama):
    """run(timed=True): the same steps, each with its wall time split into the engine's own phases (the host cost the
    simulator predicts); the hooks come off afterwards."""
    plain = llama.run(MIX)
    timed = llama.run(MIX, timed=True)
    assert _summary(timed) == _summary(plain) == MIX_STEPS
    assert all(s.times is None for s in plain)
    for s in timed:
        t = s.times
        assert set(t) >= {"prepare_s", "schedule_s", "kwargs_s", "launch_s", "sync_s", "update_s", "step_s", "other_s",
                          "forwards"}
        assert "device_s" not in t  # CPU: no device span
        assert t["forwards"] == 1  # eager: one Python forward a step
        assert 0 < t["schedule_s"] <= t["prepare_s"] and t["launch_s"] > 0 and t["update_s"] > 0
        parts = t["prepare_s"] + t["kwargs_s"] + t["launch_s"] + t["sync_s"] + t["update_s"]
        assert parts <= t["step_s"] and t["other_s"] == pytest.approx(t["step_s"] - parts)
    # The phases hold the step: nothing large is unaccounted. Over the run, not per step: a step of ~15 ms on a
    # loaded 2-core machine can lose the CPU between two phases (CI runs this beside a pip install).
    other = sum(s.times["other_s"] for s in timed)
    assert other < 0.5 * sum(s.times["step_s"] for s in timed), [s.times for s in timed]
    bp = llama._manager.batch_processor
    for obj, name in ((bp, "prepare_next_batch"), (bp, "update_batch"), (bp.scheduler, "schedule_batch"),
                      (bp.model_runner, "compute_batch"), (bp.inputs_and_outputs, "get_model_kwargs")):
        assert name not in obj.__dict__, f"{name} is still wrapped"


def test_engine_cost_fits_host_time_per_step_kind(tmp_path):
    """dooly.profile.engine_cost on the tiny Llama: every step measured, one summary row per step kind with a fit over
    the kind's composition variables."""
    import json

    from dooly.profile import engine_cost

    workloads = {"prefill": [[(n, 1)] for n in (8, 16, 32, 48)], "decode": [[(8, 3)] * b for b in (1, 2, 3)],
                 "mixed": [MIX]}
    rows = engine_cost.measure(str(tiny_path("llama-3.1-8b")), "paged|sdpa", "cpu", False, workloads,
                               max_batch_tokens=64)
    kinds = {r["kind"] for r in rows}
    assert kinds == {"prefill", "decode", "mixed"}
    assert all(r["times"]["step_s"] > 0 and r["cuda_graphs"] == [False, False] for r in rows)
    # Every step also timed in an untimed pass of the same schedule: the host time is that wall time.
    assert all(r["times"]["untimed_step_s"] > 0 for r in rows)
    assert all(engine_cost.host_s(r["times"]) == r["times"]["untimed_step_s"] for r in rows)  # no device on a CPU
    assert engine_cost.host_s({"step_s": 0.08, "untimed_step_s": 0.06, "device_s": 0.05, "launch_s": 0.01,
                               "sync_s": 0.045}) == pytest.approx(0.06 - 0.04)  # less the timed pass's wait
    assert not any(r.get("capture") for r in rows)  # no CUDA graphs on a CPU: the warm-up captured nothing
    summary = {s["kind"]: s for s in engine_cost.summarize(rows)}
    assert "capture" not in summary
    # A step of the warm-up that captured a graph: its own summary row, kept out of the kinds' fits and the store.
    cap = dict(rows[0], capture=True, repeat=-1, times=dict(rows[0]["times"], forwards=2, step_s=9.0))
    with_cap = {s["kind"]: s for s in engine_cost.summarize(rows + [cap])}
    assert with_cap["capture"]["steps"] == 1 and with_cap["capture"]["median"]["step_s"] == 9.0
    assert with_cap["capture"]["fit_host"] is None
    assert with_cap[rows[0]["kind"]]["steps"] == summary[rows[0]["kind"]]["steps"]
    assert summary["decode"]["fit_host"] and set(summary["decode"]["fit_host"]) >= {"a_s", "per_requests_s", "mape"}
    assert summary["prefill"]["fit_host"] and "per_tokens_s" in summary["prefill"]["fit_host"]
    assert summary["prefill"]["steps"] == sum(1 for r in rows if r["kind"] == "prefill")
    # Stored as the engine's own signature (kind 'engine', schema v4): one row per step composition.
    import sqlite3

    db = tmp_path / "cost.sqlite"
    n = engine_cost.commit(str(db), rows + [cap], "llama-3.1-8b-tiny", str(tiny_path("llama-3.1-8b")), "cpu")
    assert n == len({tuple(r[k] for k in engine_cost.COMPOSITION) for r in rows})  # the capture not stored
    with sqlite3.connect(db) as c:
        sigs = c.execute("SELECT kind, name, canonical_json FROM signatures").fetchall()
        stored = c.execute("SELECT point_key, num_tokens, num_requests, prefill_chunk, batch, repetitions, "
                           "latency_mean_s FROM measurements WHERE status = 'ok'").fetchall()
    assert [(k, name) for k, name, _ in sigs] == [("engine", "hf-continuous-batching")]
    assert json.loads(sigs[0][2])["attrs"]["cuda_graphs"] == [False, False]
    assert json.loads(sigs[0][2])["attrs"]["loop"] == "engine-thread"  # timed as the engine serves
    assert len(stored) == n and all(lat > 0 and reps >= 1 for *_, reps, lat in stored)
    decode_of_3 = [r for r in stored if r[2] == 3 and r[4] == 3]
    assert decode_of_3 and json.loads(decode_of_3[0][0]) == {"DECODE_REQS": 3, "NUM_REQS": 3, "NUM_TOKS": 3,
                                                             "PREFILL_TOKS": 0}
    assert engine_cost.commit(str(db), rows, "llama-3.1-8b-tiny", str(tiny_path("llama-3.1-8b")), "cpu") == n
    with sqlite3.connect(db) as c:  # the same engine again: its signature once, its points measured twice
        assert c.execute("SELECT count(*) FROM signatures").fetchone()[0] == 1
    out = tmp_path / "cost.json"
    assert engine_cost.main(["--model", "llama-3.1-8b", "--tiny", "--graphs", "maybe", "--out", str(out)]) == 2
    assert engine_cost.main(["--model", "no-such-model", "--tiny", "--out", str(out)]) == 2
    assert not out.exists()
    json.dumps(rows)


def test_the_engines_own_thread_serves_the_same_steps_and_tokens():
    """HFEngine.run(engine_thread=True) runs the engine's loop in a thread of its own (as manager.start does when
    serving; engine_cost times it there): the same schedule and the same greedy tokens as in the caller's thread,
    and the loop ran in another thread."""
    import threading

    requests = [(20, 4), (9, 6), (33, 3)]
    seen = []

    def serve(engine_thread):  # a fresh engine each: the same prompts (a run's prompts follow its engine's seed)
        with HFEngine(str(tiny_path("llama-3.1-8b")), device="cpu", max_batch_tokens=32) as eng:
            steps = eng.run(requests, on_forward=lambda info, call: (seen.append(threading.get_ident()), call())[1],
                            engine_thread=engine_thread)
            return [(s.kind, s.num_tokens, s.num_requests) for s in steps], dict(eng.last_outputs)

    here = serve(False)
    caller_forwards, seen[:] = list(seen), []
    there = serve(True)
    assert there == here
    assert set(caller_forwards) == {threading.get_ident()}
    assert seen and threading.get_ident() not in seen and len(set(seen)) == 1
