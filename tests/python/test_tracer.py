"""The torch tracer without the engine: tainted ints, op capture through the C++ rules, uncovered ops,
value collisions, verification, and the trace CLI's bad-input messages."""

import json

import pytest
import torch

from dooly.tracer import encode as enc
from dooly.tracer import tint
from dooly.tracer.recorder import Recorder, TaintMode
from dooly.tracer.tint import TInt
from dooly.tracer.verify import compare_runs


def _core():
    try:
        import dooly_core as core
    except ImportError as e:  # never a silent skip: the binding is part of the build
        pytest.fail(f"dooly_core is not importable ({e}); build it with scripts/build.sh default dooly_core",
                    pytrace=False)
    return core


@pytest.fixture()
def session():
    s = _core().Session()
    tint.set_session(s)
    yield s
    tint.set_session(None)


def kind_expr(s, x):
    v, k, e, f = s.describe(x.label)
    assert v == int(x)
    return k, e


def test_tainted_int_arithmetic_follows_the_table(session):
    h = TInt(64, session.sym("hidden_size", "MODEL_CONFIG", 64))
    n = TInt(4, session.sym("num_attention_heads", "MODEL_CONFIG", 4))
    t = TInt(37, session.sym("NUM_TOKS", "NUM_TOKS", 37))
    d = h // n
    assert isinstance(d, TInt) and int(d) == 16
    assert kind_expr(session, d) == ("MODEL_CONFIG", "hidden_size//num_attention_heads")
    assert kind_expr(session, t * d) == ("MIX", "NUM_TOKS*(hidden_size//num_attention_heads)")
    assert kind_expr(session, 1 + t) == ("NUM_TOKS", "1+NUM_TOKS")
    assert kind_expr(session, t - t) == ("NONE", "0")
    assert type(h / n) is float  # true division leaves the integers
    tint.set_session(None)
    assert type(h + 1) is int  # no session: plain ints, labels never leak into later code


def test_combine_is_exposed():
    core = _core()
    assert core.combine("NUM_TOKS", "MODEL_CONFIG") == "MIX"
    assert core.combine("MAX_NUM_TOKS", "NUM_TOKS") == "NUM_TOKS"
    assert core.combine("UNKNOWN", "NONE") == "UNKNOWN"
    with pytest.raises(ValueError, match="is not a taint kind"):
        core.combine("TOKENS", "NONE")


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 64, bias=False)
        self.head_dim = 16

    def forward(self, x):
        b, t, _ = x.shape
        q = self.proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        s = torch.cat([q, q], dim=-1)
        return s[:, :, : t // 2]


def run_toy(session, x, fn):
    rec = Recorder(session)
    rec.recording = True
    with TaintMode(rec):
        out = fn(x)
    return rec, out


def test_ops_are_labelled_through_the_rules(session):
    toy = Toy()
    toy.head_dim = TInt(16, session.sym("head_dim", "MODEL_CONFIG", 16))
    hid = session.sym("hidden_size", "MODEL_CONFIG", 64)
    enc.set_tensor_labels(toy.proj.weight, [hid, hid])
    x = torch.randn(1, 37, 64)
    enc.set_tensor_labels(x, [session.constant(1), session.sym("NUM_TOKS", "NUM_TOKS", 37), hid])
    rec, out = run_toy(session, x, toy)
    ops = [o["op"] for o in rec.ops]
    assert ops == ["linear", "view", "transpose", "cat", "getitem"]
    view = rec.ops[1]["outputs"][0]["shape"]
    assert [(d["k"], d["e"]) for d in view] == [("NONE", "1"), ("NUM_TOKS", "NUM_TOKS"),
                                                ("MODEL_CONFIG", "hidden_size//head_dim"),
                                                ("MODEL_CONFIG", "head_dim")]
    last = rec.ops[-1]["outputs"][0]["shape"]
    assert [(d["k"], d["e"]) for d in last] == [("NONE", "1"), ("MODEL_CONFIG", "hidden_size//head_dim"),
                                                ("NUM_TOKS", "NUM_TOKS//2"), ("MODEL_CONFIG", "2*head_dim")]
    assert session.counters()["fallback_ops"] == 0 and session.counters()["unknown_dims"] == 0


def test_value_collision_does_not_mislabel(session):
    # hidden_size == NUM_TOKS == 37: the labels are symbolic, so each dim keeps its own origin.
    hid = session.sym("hidden_size", "MODEL_CONFIG", 37)
    toks = session.sym("NUM_TOKS", "NUM_TOKS", 37)
    x = torch.randn(37, 37)
    enc.set_tensor_labels(x, [toks, hid])
    rec, out = run_toy(session, x, lambda x: x.sum(dim=0).unsqueeze(0))
    assert [(d["k"], d["e"]) for d in rec.ops[0]["outputs"][0]["shape"]] == [("MODEL_CONFIG", "hidden_size")]
    # Where only sizes can decide (an op no rule covers), the match is flagged as ambiguous, never guessed.
    rec, out = run_toy(session, x, lambda x: torch.kron(x[:1, :1], x))
    kron = rec.ops[-1]
    assert kron["coverage"] == "fallback"
    assert [d["k"] for d in kron["outputs"][0]["shape"]] == ["UNKNOWN", "UNKNOWN"]
    assert any("ambiguous" in n for n in kron["notes"])
    assert session.counters()["ambiguous"] == 2


def test_uncovered_op_is_recorded_as_unknown_and_counted(session):
    x = torch.randn(3, 5)
    enc.set_tensor_labels(x, [session.sym("NUM_REQS", "NUM_REQS", 3), session.sym("hidden_size", "MODEL_CONFIG", 5)])
    rec, out = run_toy(session, x, lambda x: torch.kron(x, x))  # [9, 25]: no input dim has those sizes
    assert rec.ops[-1]["op"] == "kron" and rec.ops[-1]["rule"] == "fallback"
    assert [d["e"] for d in rec.ops[-1]["outputs"][0]["shape"]] == ["UNKNOWN", "UNKNOWN"]
    assert any("no rule covers op 'kron'" in n for n in rec.ops[-1]["notes"])
    c = session.counters()
    assert c["fallback_ops"] == 1 and c["unknown_dims"] == 2


def test_unlabelled_inputs_are_counted_not_guessed(session):
    x = torch.randn(4, 6)  # no labels at all
    rec, out = run_toy(session, x, lambda x: x * 2)
    assert [d["e"] for d in rec.ops[0]["inputs"][0]["shape"]] == ["UNLABELLED", "UNLABELLED"]
    assert session.counters()["unlabelled_inputs"] == 2


def _op(seq, dims):
    return {"seq": seq, "op": "linear", "module": "m", "inputs": [], "outputs": [{"shape": dims, "dtype": "f"}]}


def test_verification_reports_every_disagreement():
    cfg = lambda v: {"v": v, "k": "MODEL_CONFIG", "e": "hidden_size", "f": str(v)}  # noqa: E731
    tok = lambda v: {"v": v, "k": "NUM_TOKS", "e": "NUM_TOKS", "f": "NUM_TOKS"}  # noqa: E731
    a = {"steps": [{"kind": "prefill", "num_tokens": 521, "num_requests": 3,
                    "ops": [_op(0, [tok(521), cfg(64)]), _op(1, [tok(521), cfg(64)])]}]}
    b = {"steps": [{"kind": "prefill", "num_tokens": 389, "num_requests": 4,
                    "ops": [_op(0, [tok(389), cfg(64)]), _op(1, [tok(521), cfg(65)])]}]}
    v = compare_runs(a, b, {"max_batch_tokens": 389, "requests": [(1, 1)]})
    assert v["checked_dims"] == 4
    assert v["num_disagreements"] == 2
    assert v["unchecked_request_dims"] == 0
    assert sorted(d["problem"] for d in v["disagreements"]) == ["MODEL_CONFIG dim changed",
                                                                 "NUM_TOKS dim did not change"]


def test_trace_cli_bad_inputs(tmp_path, capsys):
    from dooly import cli_trace
    assert cli_trace.main(["--model", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama", "hidden_size": 64,')
    assert cli_trace.main(["--model", str(bad), "--out", str(tmp_path)]) == 2
    assert "malformed JSON" in capsys.readouterr().err
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"model_type": "no-such-arch", "architectures": ["NoSuchForCausalLM"]}))
    assert cli_trace.main(["--model", str(unknown), "--out", str(tmp_path)]) == 2
    assert "model_type" in capsys.readouterr().err


def test_verification_does_not_blame_a_count_that_did_not_change():
    tok = lambda v: {"v": v, "k": "NUM_TOKS", "e": "NUM_TOKS", "f": "NUM_TOKS"}  # noqa: E731
    req = lambda v: {"v": v, "k": "NUM_REQS", "e": "NUM_REQS", "f": "NUM_REQS"}  # noqa: E731
    a = {"steps": [{"kind": "prefill", "num_tokens": 521, "num_requests": 3, "ops": [_op(0, [tok(521), req(3)])]}]}
    b = {"steps": [{"kind": "prefill", "num_tokens": 340, "num_requests": 3, "ops": [_op(0, [tok(340), req(3)])]}]}
    v = compare_runs(a, b, {"max_batch_tokens": 389, "requests": [(1, 1)]})
    assert v["num_disagreements"] == 0 and v["unchecked_request_dims"] == 1


def test_trace_cli_forced_sdpa_kernel_and_kv_blocks(tmp_path, capsys):
    """--sdpa-kernel names the backend in the document and the file name; --num-blocks bounds the engine's cache."""
    from dooly import cli_trace
    assert cli_trace.main(["--model", "llama-3.1-8b", "--tiny", "--no-verify", "--sdpa-kernel", "math",
                           "--num-blocks", "97", "--out", str(tmp_path)]) == 0
    path = tmp_path / "llama-3.1-8b-tiny__paged_sdpa-math.json"
    assert path.is_file(), sorted(p.name for p in tmp_path.iterdir())
    doc = json.loads(path.read_text())
    assert doc["attention"] == "paged|sdpa" and doc["sdpa_kernel"] == "math"
    assert doc["limits"]["num_blocks"] == 97
    assert cli_trace.main(["--model", "llama-3.1-8b", "--tiny", "--num-blocks", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--num-blocks" in err and "'0': give a positive number of KV-cache blocks" in err and err.count("\n") == 1


def test_forced_sdpa_kernel_is_a_different_attention_signature(tmp_path, repo_root):
    """The kernel switches in force are part of the attention op (a pseudo-argument): a forced kernel gives the
    attention ops new signatures and leaves every other op's signature as it was."""
    import os
    import subprocess
    from dooly import cli_trace
    from dooly.tracer.recorder import SDPA_KERNELS_ARG
    for kernel in ([], ["--sdpa-kernel", "math"]):
        assert cli_trace.main(["--model", "llama-3.1-8b", "--tiny", "--no-verify", "--out", str(tmp_path)] + kernel) == 0
    default = json.loads((tmp_path / "llama-3.1-8b-tiny__paged_sdpa.json").read_text())
    forced = json.loads((tmp_path / "llama-3.1-8b-tiny__paged_sdpa-math.json").read_text())

    def sdpa_switches(doc):
        return {sc["value"] for st in doc["steps"] for o in st["ops"] if o["op"] == "scaled_dot_product_attention"
                for sc in o["scalars"] if sc["arg"] == SDPA_KERNELS_ARG}
    assert sdpa_switches(default) == {"cudnn,efficient,flash,math"}
    assert sdpa_switches(forced) == {"math"}

    exe = os.environ.get("DOOLY_EXE", str(repo_root / "build" / "default" / "src" / "dooly" / "cli" / "dooly"))
    out = subprocess.run([exe, "signatures", str(tmp_path / "llama-3.1-8b-tiny__paged_sdpa.json"),
                          str(tmp_path / "llama-3.1-8b-tiny__paged_sdpa-math.json"), "--db", str(tmp_path / "d.sqlite")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first, second = (line.split() for line in out.stdout.splitlines()[1:3])
    assert first[1] == "paged|sdpa" and second[1] == "paged|sdpa[math]"
    unique, new, shared = int(second[3]), int(second[4]), int(second[5])
    assert unique == int(first[3]) and 0 < new <= 3 and shared == unique - new  # only the attention ops are new


def _fake_doc(dims):
    op = {"seq": 0, "op": "mul", "module": "m", "inputs": [], "outputs": [{"shape": dims, "dtype": "float32"}],
          "scalars": []}
    return {"model": "fake", "attention": "paged|sdpa", "steps": [{"kind": "prefill", "num_tokens": 3,
                                                                   "num_requests": 1, "ops": [op]}],
            "summary": {"ops": 1, "fallback_ops": 0, "ops_with_unknown_outputs": 1}, "notes": [],
            "verification": {"num_disagreements": 0}}


def test_strict_fails_on_unknown_dims(tmp_path, monkeypatch, capsys):
    """--strict exited 0 on a trace whose only problem was UNKNOWN dims (no disagreement with the second run)."""
    import dooly.tracer
    from dooly import cli_trace
    from dooly.tracer.verify import unknown_dims
    unknown = {"v": 16, "k": "UNKNOWN", "e": "DATA", "f": "DATA"}
    tok = {"v": 3, "k": "NUM_TOKS", "e": "NUM_TOKS", "f": "NUM_TOKS"}
    doc = _fake_doc([tok, unknown])
    assert unknown_dims(doc) == 1 and unknown_dims(_fake_doc([tok])) == 0
    monkeypatch.setattr(dooly.tracer, "trace_model", lambda *a, **k: json.loads(json.dumps(doc)))
    args = ["--model", "llama-3.1-8b", "--tiny", "--out", str(tmp_path)]
    assert cli_trace.main(args + ["--strict"]) == 4
    assert "1 UNKNOWN dims" in capsys.readouterr().err
    assert cli_trace.main(args) == 0  # without --strict: written, and said
    assert "1 UNKNOWN dims" in capsys.readouterr().err
    monkeypatch.setattr(dooly.tracer, "trace_model", lambda *a, **k: _fake_doc([tok]))
    assert cli_trace.main(args + ["--strict"]) == 0


def test_trace_cli_bad_sizes_and_out_fail_in_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """A config without hidden_size traced silently as a 4096-wide model; zero sizes, heads that do not divide
    and an --out that is a file ended in long tracebacks after the whole trace."""
    import transformers
    from dooly import cli_trace
    from dooly.models import tiny_path

    def built(*a, **k):
        raise AssertionError("a model was built")
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_config", built)
    good = json.loads(tiny_path("llama-3.1-8b").read_text())
    for change, expected in (({"hidden_size": None}, "hidden_size: missing"),
                             ({"vocab_size": None}, "vocab_size: missing"),
                             ({"num_attention_heads": 0}, "num_attention_heads: 0 is not positive"),
                             ({"num_key_value_heads": 3}, "num_key_value_heads: 3 does not divide")):
        cfg = {k: v for k, v in dict(good, **change).items() if v is not None}
        p = tmp_path / "cfg.json"
        p.write_text(json.dumps(cfg))
        assert cli_trace.main(["--model", str(p), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"dooly trace: {p}: {expected}") and err.count("\n") == 1, err
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, expected in ((afile, "exists and is not a directory"), (afile / "sub", "is a file")):
        assert cli_trace.main(["--model", "llama-3.1-8b", "--tiny", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_trace_cli_transformers_failure_is_one_line(tmp_path, capsys):
    """An attention backend transformers cannot run here (flash-attn is not installed) fails in transformers:
    one line that says so, with the exception's last line, exit 3."""
    from dooly import cli_trace
    assert cli_trace.main(["--model", "llama-3.1-8b", "--tiny", "--attention", "paged|flash_attention_2",
                           "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "failed in transformers" in err and "Error: " in err, err
    assert "Traceback" not in err


# -- fn and call_args: each op rebuilt alone from its record (what the profiler does at other request sizes)

from dooly.tracer import callref  # noqa: E402


@pytest.fixture(scope="module")
def llama_trace(repo_root):
    """The tiny Llama traced once for the tests below (no verification run)."""
    from dooly.tracer import trace_model
    cfg = repo_root / "data" / "models" / "tiny" / "llama-3.1-8b.json"
    return trace_model(str(cfg), "paged|sdpa", verify=False, kernels=False, log=lambda *_: None)


def _ops(doc):
    return [o for st in doc["steps"] for o in st["ops"]]


def _walk(a, visit):
    """Every encoded argument under `a`, depth first in argument order."""
    visit(a)
    if isinstance(a, dict):
        for key in ("list", "tuple", "slice"):
            for item in a.get(key, ()):
                _walk(item, visit)
        for item in a.get("dict", {}).values():
            _walk(item, visit)


def _in_indices(call):
    found = []

    def visit(a):
        if isinstance(a, dict) and "in" in a:
            found.append(a["in"])
    for a in call["args"]:
        _walk(a, visit)
    for k in call["kwargs"]:
        _walk(call["kwargs"][k], visit)
    return found


def test_fn_refs_resolve_back_to_the_same_callable():
    import torch.nn.functional as F
    funcs = {F.linear: "torch.nn.functional.linear", F.silu: "torch.nn.functional.silu", torch.cat: "torch.cat",
             torch.Tensor.view: "torch.Tensor.view", torch.Tensor.__getitem__: "torch.Tensor.__getitem__",
             torch.Tensor.add_: "torch.Tensor.add_", torch.Tensor.split: "torch.Tensor.split",
             torch.Tensor.__rsub__: "torch.Tensor.__rsub__", torch.einsum: "torch.einsum",
             torch.Tensor.T.__get__: "torch.Tensor.T.__get__", torch.ops.aten.add.Tensor: "torch.ops.aten.add.Tensor",
             torch.ops.aten.mm.default: "torch.ops.aten.mm.default", torch.ops.aten.add: "torch.ops.aten.add",
             torch._C._nn.scaled_dot_product_attention: "torch.nn.functional.scaled_dot_product_attention"}
    for func, ref in funcs.items():
        assert callref.fn_ref(func) == ref
        assert callref.same_fn(callref.resolve_fn(ref), func), ref
    assert callref.resolve_fn("torch.Tensor.T.__get__")(torch.zeros(2, 3)).shape == (3, 2)
    assert callref.fn_ref(lambda x: x) is None
    for bad in ("torch.no_such_function", "no_such_module.f", ""):
        with pytest.raises(ValueError):
            callref.resolve_fn(bad)


def test_unresolvable_callable_is_null_with_one_note(session):
    rec = Recorder(session)
    local = lambda x: x  # noqa: E731
    assert rec.fn_of("mystery", local) is None and rec.fn_of("mystery", local) is None
    assert len(rec.notes) == 1 and "op 'mystery'" in rec.notes[0]


def test_call_args_encoding():
    t = torch.zeros(2)
    labels = []

    def tint(x):
        labels.append(x.label)
        return {"v": int(x), "k": "NUM_TOKS", "e": "NUM_TOKS", "f": "NUM_TOKS"}
    call = callref.op_call(
        (t, [t, (t, 3)], slice(1, None, 2), Ellipsis, None, TInt(7, 42), float("inf"), float("-inf"), float("nan"),
         1.5, True, "mean", torch.bfloat16, torch.device("cpu"), torch.channels_last, torch.strided, {"a": t},
         object()),
        {"z": t, "a": [t]}, tint)
    assert call["args"] == [
        {"in": 0}, {"list": [{"in": 1}, {"tuple": [{"in": 2}, 3]}]}, {"slice": [1, None, 2]}, {"ellipsis": True},
        None, {"i": 7, "d": {"v": 7, "k": "NUM_TOKS", "e": "NUM_TOKS", "f": "NUM_TOKS"}}, {"float": "inf"},
        {"float": "-inf"}, {"float": "nan"}, 1.5, True, "mean", {"dtype": "bfloat16"}, {"device": "cpu"},
        {"memory_format": "channels_last"}, {"layout": "strided"}, {"dict": {"a": {"other": "Tensor"}}},
        {"other": "object"}]
    # keyword arguments in sorted order, as encode.tensor_leaves visits them
    assert list(call["kwargs"]) == ["a", "z"] and call["kwargs"] == {"a": {"list": [{"in": 3}]}, "z": {"in": 4}}
    assert labels == [42]
    json.dumps(call, allow_nan=False)  # strict JSON
    long = callref.encode_call((list(range(65)),), {}, lambda x: None, lambda x: None, bounded=True)
    assert long["args"] == [{"other": "list[65]"}]
    # Module inputs write tensors inline, so one in a dict or a slice is written too (not {"other": "Tensor"}).
    inline = callref.encode_call(({"a": t}, slice(t, None)), {}, lambda x: {"t": "T"}, tint, inline=True)
    assert inline["args"] == [{"dict": {"a": {"t": "T"}}}, {"slice": [{"t": "T"}, None, None]}]


def test_call_args_in_indices_follow_the_inputs_order():
    """{"in": k} is the k-th tensor of encode.tensor_leaves (the order of the record's "inputs"): decoding with
    the leaves puts every tensor object back where it was."""
    a, b, c, d, e = (torch.zeros(i + 1) for i in range(5))
    args = (a, [b, (c, 2)], slice(None, 3))
    kwargs = {"out": e, "index": d}
    leaves = enc.tensor_leaves(args, kwargs)
    call = callref.op_call(args, kwargs, lambda x: None)
    assert _in_indices(call) == list(range(len(leaves)))
    got_args, got_kwargs = callref.decode_call(call, lambda x: leaves[x["in"]])
    assert got_args[0] is a and got_args[1][0] is b and got_args[1][1][0] is c and got_args[2] == slice(None, 3)
    assert got_kwargs["index"] is d and got_kwargs["out"] is e


def test_trace_ops_have_fn_and_call_args_in_input_order(llama_trace):
    ops = _ops(llama_trace)
    assert len(ops) == 494
    for o in ops:
        assert isinstance(o["fn"], str), o
        assert callable(callref.resolve_fn(o["fn"])), o["fn"]
        assert set(o["call_args"]) == {"args", "kwargs"}
        assert _in_indices(o["call_args"]) == list(range(len(o["inputs"]))), (o["op"], o["call_args"])
    fns = {o["op"]: o["fn"] for o in ops}
    assert fns["linear"] == "torch.nn.functional.linear" and fns["cat"] == "torch.cat"
    assert fns["getitem"] == "torch.Tensor.__getitem__" and fns["index_copy"] == "torch.Tensor.index_copy_"
    view = next(o for o in ops if o["op"] == "view")
    sizes = view["call_args"]["args"][1]["tuple"]
    assert any(isinstance(s, dict) and s["d"]["k"] == "NUM_TOKS" for s in sizes), sizes
    assert not [n for n in llama_trace["notes"] if "no reference resolves" in n]


def _rebuild_failures(doc):
    """Each op called alone with example tensors of its recorded inputs; the ones whose outputs do not have the
    recorded shapes and dtypes (or that fail), with why."""
    torch.manual_seed(0)
    failures, n = [], 0
    for st in doc["steps"]:
        for o in st["ops"]:
            n += 1
            try:
                fn, args, kwargs = callref.rebuild_op(o)
                out = fn(*args, **kwargs)
                got = [(list(t.shape), enc.dtype_name(t.dtype)) for t in enc.flatten_outputs(out)
                       if isinstance(t, torch.Tensor)]
                want = [([d["v"] for d in t["shape"]], t["dtype"]) for t in o["outputs"]]
                if got != want:
                    raise AssertionError(f"outputs {got}, recorded {want}")
            except Exception as e:  # every failure is listed with its reason
                failures.append(f"{st['kind']} #{o['seq']} {o['op']} ({o['fn']}) in '{o['module']}': "
                                f"{type(e).__name__}: {str(e)[:200]}")
    return n, failures


def _check_rebuild(doc, name):
    n, failures = _rebuild_failures(doc)
    print(f"{name}: {n - len(failures)}/{n} ops rebuilt from their records")
    for f in failures:
        print("  FAILED", f)
    assert n and (n - len(failures)) >= 0.95 * n, "\n".join(failures[:50])


def test_every_op_rebuilds_from_its_record(llama_trace):
    _check_rebuild(llama_trace, "llama-3.1-8b-tiny (fresh trace)")


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b-it"])
def test_golden_trace_ops_rebuild_from_their_records(name, repo_root):
    doc = json.loads((repo_root / "tests" / "data" / "traces" / f"{name}-tiny__paged_sdpa.json").read_text())
    ops = _ops(doc)
    if any("fn" not in o for o in ops):
        pytest.fail(f"the golden trace of {name} predates fn/call_args: regenerate the goldens with "
                    f"`PYTHONPATH=python:build/default/python .venv/bin/python -m dooly.tracer.golden`",
                    pytrace=False)
    _check_rebuild(doc, f"{name}-tiny (golden)")


def test_module_calls_carry_class_and_inputs(llama_trace):
    prefill = llama_trace["steps"][0]
    calls = prefill["calls"]
    assert all("class" in c and set(c["inputs"]) == {"args", "kwargs"} for c in calls)
    root = calls[0]
    assert root["module"] == "" and root["class"] == "LlamaForCausalLM"
    assert root["inputs"]["kwargs"]["cache"] == {"other": "PagedAttentionCache"}
    ids = root["inputs"]["kwargs"]["input_ids"]["t"]
    assert [(d["k"], d["e"]) for d in ids["shape"]] == [("NONE", "1"), ("NUM_TOKS", "NUM_TOKS")]
    assert root["inputs"]["kwargs"]["max_seqlen_q"]["d"]["e"] == "MAX_SEQLEN_Q"
    layer = next(c for c in calls if c["module"] == "model.layers.0")
    assert layer["class"] == "LlamaDecoderLayer"
    hidden = layer["inputs"]["args"][0]["t"]
    assert [(d["k"], d["e"]) for d in hidden["shape"]] == [("NONE", "1"), ("NUM_TOKS", "NUM_TOKS"),
                                                           ("MODEL_CONFIG", "hidden_size")]
    assert hidden["dtype"] == "float32"
    norm = next(c for c in calls if c["module"] == "model.layers.0.input_layernorm")
    assert norm["class"] == "LlamaRMSNorm" and norm["inputs"]["kwargs"] == {}
    json.dumps(llama_trace, allow_nan=False)


def test_strided_tensors_record_their_layout_and_contiguous_ones_do_not():
    """Trace format 3: what the profiler needs to rebuild a view (docs/dooly-tracing.md, "Layouts")."""
    import torch

    from dooly.tracer.recorder import tensor_layout

    x = torch.randn(1, 7, 4, 64)
    assert tensor_layout(x) is None
    assert tensor_layout(x.transpose(1, 2)) == {"strides": [1792, 64, 256, 1], "offset": 0}
    qkv = torch.randn(5, 3 * 256)
    assert tensor_layout(qkv[:, 256:512]) == {"strides": [768, 1], "offset": 256}
    assert tensor_layout(qkv[1:]) is None  # contiguous at 768 floats (3072 bytes): aligned, nothing to record
    last = torch.randn(1, 7, 3)[:, -1]  # contiguous, but 18 floats (72 bytes) in: not 16-byte aligned
    assert tensor_layout(last) == {"strides": [21, 1], "offset": 18}
    assert tensor_layout(torch.randn(2, 1, 8).expand(2, 4, 8))["strides"] == [8, 0, 1]
