"""dooly_core.workload_requests: the simulator's own workload parser and generator (dooly::sim) through the binding,
so a live run serves the requests a simulation of the same spec and seed serves."""

import json

import pytest

import dooly_core

SPEC = "poisson:rate=4,n=50,prompt=uniform:16:512,output=lognormal:64:0.5:1:256,seed=7"


def test_a_spec_gives_its_requests_in_arrival_order():
    w = dooly_core.workload_requests(SPEC)
    assert (w["spec"], w["arrivals"], w["rate"], w["seed"]) == (SPEC, "poisson", 4.0, 7)
    assert (w["prompt"], w["output"]) == ("uniform:16:512", "lognormal:64:0.5:1:256")
    reqs = w["requests"]
    assert len(reqs) == 50 and [r[0] for r in reqs] == [f"r{i}" for i in range(50)]
    arrivals = [r[1] for r in reqs]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    assert all(16 <= r[2] <= 512 and 1 <= r[3] <= 256 for r in reqs)
    assert all(isinstance(r[2], int) and isinstance(r[3], int) for r in reqs)
    # Poisson at 4/s: 50 gaps average 0.25 s (loosely: this is one draw, the C++ tests check the statistics).
    assert 0.12 < arrivals[-1] / 50 < 0.5


def test_same_spec_same_requests_and_load_does_not_change_the_lengths():
    a = dooly_core.workload_requests(SPEC)["requests"]
    assert dooly_core.workload_requests(SPEC)["requests"] == a
    b = dooly_core.workload_requests(SPEC.replace("poisson:rate=4", "gamma:rate=9,cv=3"))["requests"]
    assert [r[2:] for r in b] == [r[2:] for r in a]  # lengths from their own stream: a load sweep serves the same
    assert [r[1] for r in b] != [r[1] for r in a]
    c = dooly_core.workload_requests(SPEC.replace("seed=7", "seed=8"))["requests"]
    assert [r[2:] for r in c] != [r[2:] for r in a]


def test_closed_loop_and_constant_and_trace():
    w = dooly_core.workload_requests("closed:users=3,n=5,prompt=fixed:10,output=fixed:4,think=0.5")
    assert (w["arrivals"], w["users"], w["think_s"]) == ("closed", 3, 0.5)
    assert w["requests"] == [(f"r{i}", 0.0, 10, 4) for i in range(5)]  # the driver times closed-loop arrivals
    c = dooly_core.workload_requests("constant:rate=2,n=3,prompt=fixed:8,output=fixed:2")["requests"]
    assert [r[1] for r in c] == [0.0, 0.5, 1.0]


def test_a_trace_keeps_its_ids_and_is_sorted(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [
        {"id": "b", "arrival_s": 1.5, "prompt_tokens": 30, "output_tokens": 3},
        {"id": 7, "arrival_s": 0.5, "prompt_tokens": 20, "output_tokens": 2, "other": "ignored"},
        {"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 1}]) + "\n")
    w = dooly_core.workload_requests(f"trace:{f}")
    assert w["arrivals"] == "trace"
    assert w["requests"] == [("7", 0.5, 20, 2), ("r2", 0.5, 10, 1), ("b", 1.5, 30, 3)]


@pytest.mark.parametrize("spec,words", [
    ("poisson:rate=2,n=3,prompt=fixed:8", "output is missing"),
    ("poisson:rate=2,n=3,prompt=uniform:9:3,output=fixed:1", "uniform"),
    ("burst:rate=2,n=3,prompt=fixed:8,output=fixed:1", "burst"),
    ("trace:/nonexistent/t.jsonl", "/nonexistent/t.jsonl"),
])
def test_a_bad_spec_is_an_input_error_naming_it(spec, words):
    with pytest.raises(dooly_core.InputError, match=None) as e:
        dooly_core.workload_requests(spec)
    assert isinstance(e.value, ValueError)
    assert words in str(e.value) and "\n" not in str(e.value)
