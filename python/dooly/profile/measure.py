"""Timing and energy of one unit at one point.

Time: on a GPU, `per` calls captured in one CUDA graph and replayed (CUDA events around each replay); a unit that
cannot be captured runs eagerly between the same events. On a CPU, perf_counter around `per` calls. Warm-up first;
then samples until at least `min_reps` samples and `min_time_s` have passed and the 95 % interval of the mean is
within +-rel_ci of it (nvbench's criterion), or `max_time_s` (the cap; the row says the interval did not close).

Caches are not flushed between calls, but the calls cycle through enough copies of the inputs that the working set
exceeds twice the L2 cache (capped at 64 copies and 2 GiB): in serving, the weights of a layer come from HBM, not L2,
because the other layers ran in between. A unit larger than the L2 gets one copy.

Energy: the project's energy engine (dooly_core.EnergyMeter: the connector's sampler and attributor, NVML's 50 Hz
buffer on a GPU) over the timed samples as one window; J per call = the window's energy (model mode with the idle
baseline as fixed intercept when fitted, else the trapezoid) less the idle baseline over the gaps between samples,
divided by the calls; its interval is the model's 95 % half-width per call."""

from __future__ import annotations

import math
import statistics
import time

import torch

H100_L2_BYTES = 50 * 2**20  # when torch's device properties do not say


def l2_bytes(device) -> int:
    if device.type != "cuda":
        return 0
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or H100_L2_BYTES)


def copies_for(input_bytes: int, device) -> int:
    l2 = l2_bytes(device)
    if l2 == 0 or input_bytes <= 0:
        return 1
    return max(1, min(64, math.ceil(2 * l2 / input_bytes), (2 * 2**30) // max(input_bytes, 1)))


class Settings:
    """The grid's measure settings, as the plan carries them (data/grids/*.json; defaults are the core's)."""

    def __init__(self, d: dict):
        self.warmup_s = float(d["warmup_s"])
        self.min_time_s = float(d["min_time_s"])
        self.max_time_s = float(d["max_time_s"])
        self.min_reps = int(d["min_reps"])
        self.rel_ci = float(d["rel_ci"])
        self.point_timeout_s = float(d["point_timeout_s"])


def _ci_half_width(xs: list[float]) -> float:
    if len(xs) < 2:
        return math.inf
    return 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))


def _gpu_state(device) -> dict:
    """SM clock, temperature and throttle reasons now (nvidia-smi's view; empty when it is not there)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,temperature.gpu,clocks_throttle_reasons.active",
                              "--format=csv,noheader,nounits", "-i", str(device.index or 0)],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        sm, temp, thr = [x.strip() for x in out.split(",")]
        return {"sm_clock_mhz": int(sm), "temperature_c": int(temp), "throttle_reasons": thr}
    except Exception:  # noqa: BLE001 - the state is a record, never a reason to fail
        return {}


class Timer:
    """Runs `unit.call` (prepared) and returns its per-call statistics, with energy when a meter is given."""

    def __init__(self, device, settings: Settings, meter=None, baseline_w: float | None = None, state_every_s=30.0):
        self.device = device
        self.cuda = device.type == "cuda"
        self.s = settings
        self.meter = meter
        self.baseline_w = baseline_w
        self._last_state = -1e9
        self._state = {}
        self.state_every_s = state_every_s

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def run(self, unit) -> dict:
        s = self.s
        # Warm-up: at least 3 calls and warmup_s.
        t0 = time.perf_counter()
        n = 0
        while n < 3 or time.perf_counter() - t0 < s.warmup_s:
            unit.call()
            n += 1
            if n % 8 == 0:
                self._sync()
        self._sync()
        est = (time.perf_counter() - t0) / n
        per = max(1, min(64 if self.cuda else 1000, math.ceil((2e-3 if self.cuda else 1e-3) / max(est, 1e-9))))
        replay, graphed = self._replayer(unit, per)

        if self.cuda and time.perf_counter() - self._last_state > self.state_every_s:
            self._state = _gpu_state(self.device)
            self._last_state = time.perf_counter()
        samples: list[float] = []
        dev = self.device.index if self.cuda else -1
        if self.meter is not None:
            self.meter.start()
            self.meter.begin("point", dev if dev is not None else 0)
        w0 = time.perf_counter()
        capped = False
        batch = 8
        while True:
            if self.cuda:
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(batch + 1)]
                ev[0].record()
                for i in range(batch):
                    replay()
                    ev[i + 1].record()
                ev[-1].synchronize()
                samples += [ev[i].elapsed_time(ev[i + 1]) * 1e-3 / per for i in range(batch)]
            else:
                for _ in range(batch):
                    a = time.perf_counter()
                    replay()
                    samples.append((time.perf_counter() - a) / per)
            elapsed = time.perf_counter() - w0
            mean = statistics.fmean(samples)
            if len(samples) >= s.min_reps and elapsed >= s.min_time_s and _ci_half_width(samples) <= s.rel_ci * mean:
                break
            if elapsed >= s.max_time_s:
                capped = True
                break
            batch = min(256, batch * 2)
        window_s = time.perf_counter() - w0
        energy = None
        if self.meter is not None:
            self.meter.end("point", dev if dev is not None else 0)
            energy = self._energy(self.meter.stop(), len(samples) * per, window_s, sum(samples) * per)
        mean = statistics.fmean(samples)
        out = {
            "repetitions": len(samples) * per,
            "latency_s": {"mean": mean, "median": statistics.median(samples), "min": min(samples), "max": max(samples),
                          "std": statistics.stdev(samples) if len(samples) > 1 else 0.0},
            "energy": energy,
            "extra": {"samples": len(samples), "calls_per_sample": per, "cuda_graph": graphed,
                      "ci95_rel": _ci_half_width(samples) / mean if mean > 0 else None, "capped": capped,
                      "window_s": window_s, **self._state},
        }
        return out

    def _replayer(self, unit, per):
        """A zero-argument callable that runs `per` calls: a CUDA graph replay when the unit can be captured."""
        if self.cuda:
            try:
                stream = torch.cuda.Stream(self.device)
                stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(stream):
                    for _ in range(2):
                        unit.call()
                torch.cuda.current_stream(self.device).wait_stream(stream)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for _ in range(per):
                        unit.call()
                g.replay()
                self._sync()
                unit._graph = g  # keep it (and its memory pool) alive with the unit
                return g.replay, True
            except Exception:  # noqa: BLE001 - not capturable (host syncs, dynamic shapes): time it eagerly
                torch.cuda.synchronize(self.device)

        def eager():
            for _ in range(per):
                unit.call()

        return eager, False

    def _energy(self, report_json: str, calls: int, window_s: float, busy_s: float) -> dict | None:
        import json

        rep = json.loads(report_json)
        for ch in rep.get("channels", []):
            for r in ch.get("regions", []):
                if r.get("name") != "point" or not r.get("calls"):
                    continue
                model_j = r.get("model_energy_j")
                total_j = model_j if model_j is not None else r.get("energy_j")
                if total_j is None:
                    continue
                idle_w = self.baseline_w if self.baseline_w is not None else ch.get("baseline_w", 0.0) or 0.0
                # On a GPU the gaps between event-timed samples are the device idling while the host syncs: charge
                # them at the idle baseline, not to the unit. On a CPU the loop between samples is host work like
                # the unit's, at its power: no correction.
                gaps_s = max(0.0, r.get("time_s", window_s) - busy_s) if self.cuda else 0.0
                j = (total_j - idle_w * gaps_s) / calls
                if j <= 0:
                    return {"j": None, "note": f"below the resolution floor (window {total_j:.4g} J, idle over gaps "
                                               f"{idle_w * gaps_s:.4g} J)"}
                hw = r.get("model_energy_hw_j")
                trap_j = (r.get("energy_j", 0.0) - idle_w * gaps_s) / calls  # both figures kept: they are checked
                return {"j": j, "hw_j": hw / calls if hw is not None else None, "trapezoid_j": trap_j,
                        "readings": ch.get("model_fit", {}).get("samples"),
                        "avg_power_w": j * calls / busy_s if busy_s > 0 else None,
                        "method": "model" if model_j is not None else "trapezoid",
                        "channel": ch.get("name", ""), "window_s": r.get("time_s"), "idle_w": idle_w}
        return None
