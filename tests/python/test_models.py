"""Shipped model configs, their tiny variants, and dooly.models.load_config's errors."""

import json
import re

import pytest

from dooly import models
from dooly.models import ConfigError, list_models, load_config, model_path, tiny_path

SHIPPED = ["gemma-2-9b-it", "gemma-3-1b-it", "granite-3.1-8b-instruct", "llama-3.1-8b", "mistral-7b-v0.3",
           "mixtral-8x7b-v0.1", "olmo-2-1124-7b", "olmoe-1b-7b-0924", "phi-3-mini-4k-instruct", "phi-4-mini-instruct",
           "qwen2.5-7b", "qwen3-1.7b", "qwen3-30b-a3b", "qwen3-8b"]


def test_list_models_is_the_shipped_set():
    assert list_models() == SHIPPED
    assert (models.models_dir() / "SOURCES.md").is_file()


@pytest.mark.parametrize("name", SHIPPED)
def test_full_and_tiny_configs_load_and_tiny_builds(name):
    import torch
    from transformers import AutoModelForCausalLM

    full = load_config(model_path(name))
    tiny = load_config(tiny_path(name))
    assert type(tiny) is type(full)
    assert tiny.model_type == full.model_type and tiny.architectures == full.architectures
    model = AutoModelForCausalLM.from_config(tiny, dtype=torch.float32)
    assert type(model).__name__ == tiny.architectures[0]
    assert sum(p.numel() for p in model.parameters()) < 600_000
    # The tiny sizes
    assert (tiny.hidden_size, tiny.num_attention_heads, tiny.vocab_size) == (64, 4, 512)
    assert tiny.hidden_size // tiny.num_attention_heads == 16 and (getattr(tiny, "head_dim", None) or 16) == 16
    assert 2 <= tiny.num_hidden_layers <= 6


def _kept_keys(name):
    """Keys whose value the tiny variant copies verbatim from the real config (everything but sizes, token ids)."""
    full = json.loads(model_path(name).read_text())
    tiny = json.loads(tiny_path(name).read_text())
    assert list(tiny) == list(full), "tiny config has the same keys, in the same order"
    changed = {k for k in full if full[k] != tiny[k]}
    sizes = {"hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
             "vocab_size", "head_dim", "query_pre_attn_scalar", "max_window_layers", "sliding_window",
             "sliding_window_size", "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
             "bos_token_id", "eos_token_id", "pad_token_id", "rope_scaling"}
    return changed - sizes, full, tiny


@pytest.mark.parametrize("name", SHIPPED)
def test_tiny_changes_only_sizes(name):
    unexpected, full, tiny = _kept_keys(name)
    assert unexpected == set()
    # attention sharing kept: MHA stays MHA, GQA/MQA stays grouped
    full_kv = full.get("num_key_value_heads", full["num_attention_heads"])
    tiny_kv = tiny.get("num_key_value_heads", tiny["num_attention_heads"])
    assert (full_kv == full["num_attention_heads"]) == (tiny_kv == tiny["num_attention_heads"])
    assert (full_kv == 1) == (tiny_kv == 1)
    # sliding windows kept where present (and small enough to bind in CPU tests where the real one binds)
    assert (full.get("sliding_window") is None) == (tiny.get("sliding_window") is None)
    for key in ("bos_token_id", "pad_token_id"):
        assert tiny.get(key) is None or tiny[key] < tiny["vocab_size"]


@pytest.mark.parametrize("name", SHIPPED)
def test_tiny_dims_do_not_collide(name):
    """The fields that become tensor dimensions have distinct values inside one tiny config, so a dimension's value
    tells which field it came from (q heads x head_dim = hidden and MHA's kv heads = heads are the architecture's)."""
    cfg = json.loads(tiny_path(name).read_text())
    keys = ("hidden_size", "head_dim", "num_attention_heads", "num_key_value_heads", "intermediate_size",
            "vocab_size", "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
            "sliding_window")
    dims = {k: cfg[k] for k in keys if isinstance(cfg.get(k), int) and cfg[k] < 100_000}
    dims.setdefault("head_dim", 16)
    if dims.get("num_key_value_heads") == dims["num_attention_heads"]:
        del dims["num_key_value_heads"]
    values = list(dims.values())
    assert len(values) == len(set(values)), dims


def test_heterogeneous_patterns_are_kept():
    g2 = load_config(tiny_path("gemma-2-9b-it"))
    assert g2.layer_types == ["sliding_attention", "full_attention"] * 3 and g2.sliding_window == 32
    g3 = load_config(tiny_path("gemma-3-1b-it"))
    assert g3.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert g3.sliding_window == 24 and g3.num_key_value_heads == 1
    full_g3 = load_config(model_path("gemma-3-1b-it"))
    assert full_g3.layer_types[:6] == g3.layer_types  # the same 5:1 pattern
    assert g3.rope_parameters == full_g3.rope_parameters  # local/global rope bases


def test_moe_and_rope_features_are_kept():
    for name, experts_key in (("mixtral-8x7b-v0.1", "num_local_experts"), ("olmoe-1b-7b-0924", "num_experts"),
                              ("qwen3-30b-a3b", "num_experts")):
        c = load_config(tiny_path(name))
        assert (getattr(c, experts_key), c.num_experts_per_tok) == (6, 3)
    assert load_config(tiny_path("qwen3-30b-a3b")).norm_topk_prob is True
    assert load_config(tiny_path("olmoe-1b-7b-0924")).norm_topk_prob is False
    llama = load_config(tiny_path("llama-3.1-8b"))
    assert llama.rope_parameters == load_config(model_path("llama-3.1-8b")).rope_parameters
    phi4 = load_config(tiny_path("phi-4-mini-instruct"))
    assert phi4.rope_parameters["rope_type"] == "longrope" and phi4.tie_word_embeddings is True
    # longrope has one factor per rotary frequency: head_dim 16 x partial_rotary_factor 0.75 / 2
    assert len(phi4.rope_parameters["long_factor"]) == len(phi4.rope_parameters["short_factor"]) == 6
    assert load_config(tiny_path("granite-3.1-8b-instruct")).tie_word_embeddings is True


def test_qk_norm_kept():
    import torch
    from transformers import AutoModelForCausalLM
    for name in ("qwen3-8b", "olmo-2-1124-7b", "olmoe-1b-7b-0924", "qwen3-30b-a3b"):
        model = AutoModelForCausalLM.from_config(load_config(tiny_path(name)), dtype=torch.float32)
        names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
        assert {"q_norm", "k_norm"} <= names, name


def _write(tmp_path, text, name="bad.json"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_malformed_json_names_file_line_and_fix(tmp_path):
    p = _write(tmp_path, '{\n  "model_type": "llama",\n  "hidden_size": 64,,\n}\n')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert str(p) in msg and "line 3" in msg and "malformed JSON" in msg and "Fix the file" in msg


def test_top_level_not_an_object(tmp_path):
    with pytest.raises(ConfigError, match=r"top level is a JSON list"):
        load_config(_write(tmp_path, "[1, 2]"))


def test_missing_model_type(tmp_path):
    with pytest.raises(ConfigError, match=r"bad\.json: field 'model_type' is missing.*\"model_type\": \"llama\""):
        load_config(_write(tmp_path, '{"hidden_size": 64}'))


def test_unknown_model_type_names_field_and_close_match(tmp_path):
    p = _write(tmp_path, '{"model_type": "lama", "hidden_size": 64}')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert str(p) in msg and "field 'model_type' = 'lama'" in msg and "llama" in msg
    assert re.search(r"Use one of transformers' model types", msg)


def test_unknown_architecture(tmp_path):
    cfg = json.loads(tiny_path("llama-3.1-8b").read_text())
    cfg["architectures"] = ["LlamaForTimeTravel"]
    with pytest.raises(ConfigError, match=r"field 'architectures' names 'LlamaForTimeTravel'"):
        load_config(_write(tmp_path, json.dumps(cfg)))


def test_architecture_must_match_model_type(tmp_path):
    cfg = json.loads(tiny_path("llama-3.1-8b").read_text())
    cfg["architectures"] = ["Qwen2ForCausalLM"]
    with pytest.raises(ConfigError, match=r"names 'Qwen2ForCausalLM' but model_type 'llama' builds 'LlamaForCausalLM'"):
        load_config(_write(tmp_path, json.dumps(cfg)))


def test_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read the model config"):
        load_config(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match=r"No tiny model config named 'llama-3.1-8' .*Did you mean llama-3.1-8b\?"):
        tiny_path("llama-3.1-8")


@pytest.mark.parametrize("field,value,problem", [
    ("hidden_size", None, "hidden_size: missing"),  # transformers would silently use 4096
    ("vocab_size", None, "vocab_size: missing"),  # ... and 32000
    ("num_hidden_layers", 0, "num_hidden_layers: 0 is not positive"),
    ("intermediate_size", -176, "intermediate_size: -176 is not positive"),
    ("num_key_value_heads", 3, "num_key_value_heads: 3 does not divide num_attention_heads = 4"),
    ("hidden_size", 66, "hidden_size: 66 is not divisible by num_attention_heads = 4"),
    ("vocab_size", 1 << 30, "vocab_size: 1073741824 is above 16777216"),
])
def test_bad_sizes_are_refused_in_one_line_naming_the_field(tmp_path, field, value, problem):
    cfg = json.loads(tiny_path("llama-3.1-8b").read_text())
    if value is None:
        del cfg[field]
    else:
        cfg[field] = value
    p = _write(tmp_path, json.dumps(cfg))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: {problem}") and "\n" not in msg, msg


def test_check_sizes_returns_the_checked_values():
    from dooly.models import check_sizes
    c = check_sizes(tiny_path("qwen3-30b-a3b").read_text(), "qwen3")
    assert (c["hidden_size"], c["head_dim"], c["num_key_value_heads"], c["intermediate_size"]) == (64, 16, 2, 176)
    assert check_sizes(tiny_path("gemma-2-9b-it").read_text(), "g")["sliding_window"] == 32


def test_a_file_that_is_not_utf8_is_one_line(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b'{"model_type": "ll\xc3\x28ma"}')
    with pytest.raises(ConfigError, match=r"bin\.json: not UTF-8 text \(byte 18\)"):
        load_config(p)
