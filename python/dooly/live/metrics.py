"""Serving metrics of a run from its raw records, with vLLM's definitions (`vllm bench serve`; docs/simulate.md,
"Live runs"). A pure function of plain data: the per-request records and the energy totals of a result file, so the
same summary can be recomputed from any result.json (live or simulated), and the function can move to the C++ core
unchanged in meaning (it uses no library: percentiles are numpy's default, linear interpolation, written out).

Per request (finished): TTFT = first token - arrival; E2E = last token - arrival; TPOT = (E2E - TTFT) / (output
tokens - 1), none for a one-token output; ITL = the gaps between successive tokens (pooled over requests).
"""

from __future__ import annotations

import math

__all__ = ["request_latencies", "summarize", "percentile", "parse_slo", "SLO_KEYS"]

SLO_KEYS = ("ttft_s", "tpot_s", "e2e_s")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"mean": math.fsum(values) / len(values), "median": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values), "count": len(values)}


def request_latencies(arrival_s: float, token_times_s: list[float]) -> dict:
    """TTFT, TPOT, E2E and the inter-token gaps of one request from its arrival and its tokens' times (same clock)."""
    if not token_times_s:
        raise ValueError("a finished request has at least one token")
    ttft = token_times_s[0] - arrival_s
    e2e = token_times_s[-1] - arrival_s
    n = len(token_times_s)
    return {"ttft_s": ttft, "e2e_s": e2e, "tpot_s": (e2e - ttft) / (n - 1) if n > 1 else None,
            "itl_s": [b - a for a, b in zip(token_times_s, token_times_s[1:])]}


def parse_slo(text: str) -> dict[str, float]:
    """'ttft_s=2,tpot_s=0.1' -> {'ttft_s': 2.0, 'tpot_s': 0.1}; raises ValueError with the fix."""
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in SLO_KEYS:
            raise ValueError(f"--slo item '{item}' is not KEY=SECONDS with KEY one of {', '.join(SLO_KEYS)} "
                             f"(e.g. --slo ttft_s=2,tpot_s=0.1)")
        if key in out:
            raise ValueError(f"--slo gives {key} twice")
        try:
            v = float(value)
        except ValueError:
            v = math.nan
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"--slo {key}={value}: give a positive number of seconds")
        out[key] = v
    return out


def _meets(r: dict, slo: dict[str, float]) -> bool:
    """vLLM's goodput rule: every given SLO holds (a one-token request has no TPOT and passes that one)."""
    return all(r[k] is None or r[k] <= limit for k, limit in slo.items())


def summarize(requests: list[dict], duration_s: float, slo: dict[str, float] | None = None,
              energy: dict | None = None) -> dict:
    """The summary of a result file. `requests`: dicts with `finished`, `prompt_tokens`, `output_tokens`, `ttft_s`,
    `tpot_s`, `e2e_s`, `token_times_s` (arrival-relative or absolute: only differences are used) and `energy_j`
    (None without a power source). `duration_s`: from the run's start (time 0 of the arrivals) to the last token.
    `energy`: the run's totals (`run_energy_j`, `run_time_s`, `steps_energy_j`), or None."""
    done = [r for r in requests if r["finished"]]
    itl = [g for r in done for g in (b - a for a, b in zip(r["token_times_s"], r["token_times_s"][1:]))]
    out_tokens = sum(r["output_tokens"] for r in done)
    in_tokens = sum(r["prompt_tokens"] for r in done)
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: None)
    s = {
        "requests": len(requests),
        "completed": len(done),
        "duration_s": duration_s,
        "prompt_tokens": in_tokens,
        "output_tokens": out_tokens,
        "request_throughput_rps": per_s(len(done)),
        "output_throughput_tps": per_s(out_tokens),
        "total_token_throughput_tps": per_s(in_tokens + out_tokens),
        "ttft_s": _stats([r["ttft_s"] for r in done]),
        "tpot_s": _stats([r["tpot_s"] for r in done if r["tpot_s"] is not None]),
        "itl_s": _stats(itl),
        "e2e_s": _stats([r["e2e_s"] for r in done]),
        "slo": dict(slo or {}),
    }
    if slo:
        good = sum(1 for r in done if _meets(r, slo))
        s.update(good_requests=good, goodput_rps=per_s(good))
    else:
        s.update(good_requests=None, goodput_rps=None)
    e = energy or {}
    req_j = [r["energy_j"] for r in done if r.get("energy_j") is not None]
    charged = math.fsum(req_j) if done and len(req_j) == len(done) else None
    run_j, run_s = e.get("run_energy_j"), e.get("run_time_s")
    s.update({
        # Headline energy: what the per-step split hands to the requests (the steps' energy), per output token and
        # per request; the run's whole energy (idle gaps between steps included) beside it.
        "energy_j": charged,
        "j_per_output_token": charged / out_tokens if charged is not None and out_tokens else None,
        "j_per_request": charged / len(done) if charged is not None and done else None,
        "run_energy_j": run_j,
        "run_j_per_output_token": run_j / out_tokens if run_j is not None and out_tokens else None,
        "avg_power_w": run_j / run_s if run_j is not None and run_s else None,
    })
    return s
