"""The tracer on architectures and config values the shipped tiny configs do not cover: gpt-oss under
paged|eager (struct-sequence results), sliding windows read from the config (Mistral style), and which config
values reach which signatures. Configs are written here (random weights, no downloads)."""

import json

import pytest
import torch

from dooly.tracer import encode as enc
from dooly.tracer import tint
from dooly.tracer.recorder import Recorder, TaintMode

# A tiny gpt-oss: alternating sliding/full layers, 6 experts top-3, yarn rope, sinks in the attention.
TINY_GPT_OSS = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 176,
    "head_dim": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
    "num_local_experts": 6, "num_experts_per_tok": 3, "vocab_size": 512, "sliding_window": 32,
    "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 4096,
    "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                        "truncate": False, "original_max_position_embeddings": 4096, "rope_theta": 150000.0},
    "pad_token_id": 511, "eos_token_id": 510, "bos_token_id": 509, "tie_word_embeddings": False,
}


def _core():
    try:
        import dooly_core as core
    except ImportError as e:  # never a silent skip: the binding is part of the build
        pytest.fail(f"dooly_core is not importable ({e}); build it with scripts/build.sh default dooly_core",
                    pytrace=False)
    return core


def write_config(tmp_path, name, data):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_struct_sequence_results_keep_their_type():
    """torch.return_types.* are struct sequences (no `_fields`): the rebuilt result must keep `.values`."""
    s = _core().Session()
    tint.set_session(s)
    try:
        x = torch.randn(3, 5)
        enc.set_tensor_labels(x, [s.sym("NUM_TOKS", "NUM_TOKS", 3), s.sym("hidden_size", "MODEL_CONFIG", 5)])
        rec = Recorder(s)
        rec.recording = True
        with TaintMode(rec):
            r = x.max(dim=-1, keepdim=True)
            values, indices = r.values, r.indices
            top = torch.topk(x, 2, dim=-1)
        assert type(r) is torch.return_types.max and type(top) is torch.return_types.topk
        assert [s.describe(i)[2] for i in enc.tensor_labels(values)] == ["NUM_TOKS", "1"]
        assert [s.describe(i)[2] for i in enc.tensor_labels(indices)] == ["NUM_TOKS", "1"]
        assert [s.describe(i)[2] for i in enc.tensor_labels(top.values)][0] == "NUM_TOKS"
    finally:
        tint.set_session(None)


def test_tuple_types_are_rebuilt_as_they_came():
    import collections
    import os
    Pair = collections.namedtuple("Pair", "a b")
    rebuilt = enc.rebuild_outputs(Pair(1, 2), [None, None])
    assert rebuilt == Pair(1, 2) and type(rebuilt) is Pair
    st = os.stat(".")  # a struct sequence with fields beyond its sequence part: left as it was
    assert enc.rebuild_outputs(st, [None] * 10) is st
    assert type(enc.rebuild_outputs((1, (2, 3)), [None, None, None])) is tuple


def test_gpt_oss_traces_under_paged_eager(tmp_path):
    """gpt-oss's eager paged attention calls `x.max(dim=-1, keepdim=True).values`; it failed with
    AttributeError: 'tuple' object has no attribute 'values' before struct sequences kept their type."""
    from dooly.tracer import trace_model
    cfg = write_config(tmp_path, "gpt-oss-tiny", TINY_GPT_OSS)
    doc = trace_model(str(cfg), "paged|eager", verify=False, kernels=False, log=lambda *_: None)
    ops = [o for st in doc["steps"] for o in st["ops"]]
    assert [st["kind"] for st in doc["steps"]] == ["prefill", "mixed"]
    assert any(o["op"] == "max" for o in ops)
    assert doc["summary"]["fallback_ops"] == 0 and doc["summary"]["ops_with_unknown_outputs"] == 0
    assert doc["architecture"] == "GptOssForCausalLM"
    # Its sliding (window 32) and full layers read different KV lengths in the mixed step: distinct labels.
    mixed = doc["steps"][1]
    kv = {(d["e"], d["v"]) for o in mixed["ops"] if o["op"] == "matmul" for t in o["inputs"] + o["outputs"]
          for d in t["shape"] if d["e"].startswith("KV_TOKS")}
    assert {e for e, _ in kv} == {"KV_TOKS", "KV_TOKS_SLIDING(sliding_window)"}, kv
    assert len({v for _, v in kv}) == 2


def _trace(tmp_path, name, data, attention="paged|sdpa"):
    from dooly.tracer import trace_model
    cfg = write_config(tmp_path, name, data)
    return trace_model(str(cfg), attention, verify=False, kernels=False, log=lambda *_: None)


def _op_units(doc):
    """{hash: (name, canonical)} of the trace's op signatures."""
    return {u["hash"]: (u["name"], u["canonical"]) for u in json.loads(_core().units_of_trace(json.dumps(doc)))
            if u["kind"] == "op"}


def _kv_reads(doc, kind):
    return {d["v"] for st in doc["steps"] if st["kind"] == kind for o in st["ops"]
            if o["op"] == "scaled_dot_product_attention" for d in o["inputs"][1]["shape"][-2:-1]}


def test_a_sliding_window_read_from_the_config_reaches_the_signature(tmp_path, repo_root):
    """Mistral's attention module does not store its window (the mask code and the cache read the config): windows
    48 and 4096 read 272 vs 652 KV tokens in the mixed step, and had identical signatures."""
    base = json.loads((repo_root / "data" / "models" / "tiny" / "mistral-7b-v0.3.json").read_text())
    small = _trace(tmp_path, "mistral-w48", dict(base, sliding_window=48))
    large = _trace(tmp_path, "mistral-w4096", dict(base, sliding_window=4096))
    assert _kv_reads(small, "mixed") == {272} and _kv_reads(large, "mixed") == {652}
    sdpa = lambda doc: {h for h, (n, _) in _op_units(doc).items() if n == "scaled_dot_product_attention"}  # noqa: E731
    assert sdpa(small) and not sdpa(small) & sdpa(large)
    canon = [c for n, c in _op_units(small).values() if n == "scaled_dot_product_attention"]
    assert any("KV_TOKS_SLIDING(48)" in c for c in canon), canon
    # Ops that see no window (the MLP, the projections) still share their signatures.
    mlp = lambda doc: {h for h, (n, _) in _op_units(doc).items() if n in ("silu", "linear")}  # noqa: E731
    assert mlp(small) == mlp(large)


def test_config_values_an_op_does_not_use_do_not_split_it(tmp_path, repo_root):
    """rms_norm_eps is used only by the norm's `add` (a scalar), max_position_embeddings by no op (the rotary
    module's max_seq_len_cached): all other ops keep their signatures."""
    base = json.loads((repo_root / "data" / "models" / "tiny" / "llama-3.1-8b.json").read_text())
    a = _op_units(_trace(tmp_path, "llama-a", base))
    b = _op_units(_trace(tmp_path, "llama-b", dict(base, rms_norm_eps=1e-6, max_position_embeddings=8192)))
    only_a = sorted({a[h][0] for h in set(a) - set(b)})
    only_b = sorted({b[h][0] for h in set(b) - set(a)})
    assert only_a == ["add"] and only_b == ["add"], (only_a, only_b)
    assert all('"1e-06"' in b[h][1] for h in set(b) - set(a))
