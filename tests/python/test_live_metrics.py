"""The serving metrics of a result file (dooly.live.metrics) against vLLM's definitions, on records made by hand."""

import numpy as np
import pytest

from dooly.live.metrics import parse_slo, percentile, request_latencies, summarize


def test_percentile_is_numpys_linear_interpolation():
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 10, 101):
        xs = rng.exponential(size=n).tolist()
        for q in (0, 10, 50, 90, 99, 100):
            assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_request_latencies_follow_the_definitions():
    lat = request_latencies(1.0, [1.5, 1.7, 2.0, 2.6])
    assert lat["ttft_s"] == pytest.approx(0.5)
    assert lat["e2e_s"] == pytest.approx(1.6)
    assert lat["tpot_s"] == pytest.approx((1.6 - 0.5) / 3)
    assert lat["itl_s"] == pytest.approx([0.2, 0.3, 0.6])
    one = request_latencies(0.0, [0.25])
    assert one["tpot_s"] is None and one["itl_s"] == [] and one["ttft_s"] == one["e2e_s"] == 0.25


def _req(arrival, times, prompt=10, energy=1.0, finished=True):
    lat = request_latencies(arrival, times)
    return {"finished": finished, "prompt_tokens": prompt, "output_tokens": len(times), "ttft_s": lat["ttft_s"],
            "tpot_s": lat["tpot_s"], "e2e_s": lat["e2e_s"], "token_times_s": times, "energy_j": energy}


def test_summary_throughput_goodput_and_energy():
    reqs = [_req(0.0, [0.1, 0.2, 0.3], energy=3.0), _req(0.5, [1.5, 1.6], energy=2.0),
            _req(1.0, [1.2], energy=1.0), _req(2.0, [9.0], finished=False)]
    s = summarize(reqs, duration_s=2.0, slo={"ttft_s": 0.5, "tpot_s": 0.2},
                  energy={"run_energy_j": 10.0, "run_time_s": 2.5, "steps_energy_j": 6.0})
    assert (s["requests"], s["completed"]) == (4, 3)
    assert s["output_tokens"] == 6 and s["prompt_tokens"] == 30
    assert s["request_throughput_rps"] == pytest.approx(1.5)
    assert s["output_throughput_tps"] == pytest.approx(3.0)
    assert s["total_token_throughput_tps"] == pytest.approx(18.0)
    ttfts = [0.1, 1.0, 0.2]
    assert s["ttft_s"]["mean"] == pytest.approx(np.mean(ttfts))
    assert s["ttft_s"]["median"] == pytest.approx(np.median(ttfts))
    assert s["ttft_s"]["p90"] == pytest.approx(np.percentile(ttfts, 90))
    assert s["ttft_s"]["p99"] == pytest.approx(np.percentile(ttfts, 99))
    assert s["tpot_s"]["count"] == 2  # the one-token request has no TPOT
    assert s["itl_s"]["count"] == 3 and s["itl_s"]["max"] == pytest.approx(0.1)
    assert s["e2e_s"]["median"] == pytest.approx(np.median([0.3, 1.1, 0.2]))
    # Request 2's TTFT (1.0 s) misses the TTFT SLO; the one-token request passes the TPOT one.
    assert s["good_requests"] == 2 and s["goodput_rps"] == pytest.approx(1.0)
    assert s["energy_j"] == pytest.approx(6.0)
    assert s["j_per_output_token"] == pytest.approx(1.0)
    assert s["j_per_request"] == pytest.approx(2.0)
    assert s["run_j_per_output_token"] == pytest.approx(10.0 / 6)
    assert s["avg_power_w"] == pytest.approx(4.0)


def test_summary_without_slo_or_energy_says_none():
    s = summarize([_req(0.0, [0.1], energy=None)], duration_s=0.1)
    assert s["goodput_rps"] is None and s["good_requests"] is None
    assert s["energy_j"] is None and s["j_per_output_token"] is None and s["avg_power_w"] is None


def test_parse_slo():
    assert parse_slo("ttft_s=2,tpot_s=0.1") == {"ttft_s": 2.0, "tpot_s": 0.1}
    assert parse_slo("") == {}
    for bad, words in (("ttft=2", "KEY=SECONDS"), ("ttft_s=-1", "positive"), ("ttft_s=nan", "positive"),
                       ("ttft_s=1,ttft_s=2", "twice"), ("e2e_s", "KEY=SECONDS")):
        with pytest.raises(ValueError, match=words):
            parse_slo(bad)


def test_parse_slo_rejects_infinity():
    for bad in ("e2e_s=inf", "e2e_s=1e400"):
        with pytest.raises(ValueError, match="positive"):
            parse_slo(bad)
