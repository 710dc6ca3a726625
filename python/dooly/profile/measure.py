"""Timing and energy of one unit at one point.

Time: on a GPU, `per` calls captured in one CUDA graph and replayed (CUDA events around each replay); a unit that
cannot be captured runs eagerly between the same events. On a CPU, perf_counter around `per` calls. Warm-up first;
then, for a unit of at least settle_min_latency_s a call, settle_s of replays, on to capped_settle_s while the
power controller holds the SM clock down (the settle period: the window sees the steady state, docs/profile.md;
a point that follows the unit's previous one within settle_carry_gap_s counts the unit's run so far as settled);
then samples until at least `min_reps` samples and `min_time_s` have passed and the 95 % interval of the mean is
within +-rel_ci of it (nvbench's criterion), or `max_time_s` (the cap; the row says the interval did not close).

Caches are not flushed between calls, but the calls cycle through enough copies of the weights (the inputs that do
not grow with the step: weights, caches, tables) that they exceed twice the L2 cache (capped at 64 copies and 2 GiB):
in serving, the weights of a layer come from HBM, not L2, because the other layers ran in between. The activations
(step-sized inputs) are made once and stay in place, as the engine's previous op leaves them in the L2 (grid
`measure.inputs` "warm", the default; "cycled" cycles them too). A unit larger than the L2 gets one copy.

Energy: the project's energy engine (dooly_core.EnergyMeter: the connector's sampler and attributor, NVML's 50 Hz
buffer on a GPU). The points of a unit run back to back in one run of the engine (EnergyBatch: up to 24 points or
3 s of timed windows a run), each point's timed samples one region and its warm-up and graph capture another, so
the device does not fall idle between points and the engine's start and stop (the sensor's lag, the counters) are
paid once a batch, not once a point. J per call = the point's region energy (model mode with the idle baseline as
fixed intercept when fitted, else the trapezoid) less the idle baseline over the gaps between samples, divided by
the calls; its interval is the model's 95 % half-width per call. A batch's points are committed when the batch
closes: a crash loses the batch in flight (at most 3 s of measuring), never a committed point."""

from __future__ import annotations

import contextlib
import functools
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
    if input_bytes <= 0:  # nothing to cycle (no input, or the activations only of a warm unit)
        return 1
    l2 = l2_bytes(device)
    if l2 == 0:
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
        # The settle period (the grid's; a plan without it: none): a unit of at least settle_min_latency_s a call
        # replays for settle_s after its warm-up, before the timed window, and on up to capped_settle_s in all while
        # the power controller holds the SM clock down, so that the window sees the steady state.
        self.settle_s = float(d.get("settle_s", 0.0))
        self.settle_min_latency_s = float(d.get("settle_min_latency_s", 1e-3))
        self.capped_settle_s = max(self.settle_s, float(d.get("capped_settle_s", self.settle_s)))
        # The settle carried over: a point that starts within settle_carry_gap_s of the end of the unit's previous
        # settled point (its points run largest first, back to back) counts the unit's run since its last idle gap
        # as settled time (0: every long point settles from scratch, the policy before 2026-12-05).
        self.settle_carry_gap_s = float(d.get("settle_carry_gap_s", 0.0))
        # "warm": only the inputs that do not grow with the step (weights, caches) cycle past the L2; the
        # step-sized ones (activations) are made once and stay where the previous op would have left them.
        # "cycled": every input cycles. A plan without it is an older one: cycled, as it was then.
        self.inputs = str(d.get("inputs", "cycled"))


def _ci_half_width(xs: list[float]) -> float:
    if len(xs) < 2:
        return math.inf
    return 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))


def gpu_state(device) -> dict:
    """SM clock, temperature, throttle reasons and the board's UUID now (nvidia-smi's view; empty when it is not
    there)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi",
                              "--query-gpu=clocks.sm,temperature.gpu,clocks_throttle_reasons.active,uuid",
                              "--format=csv,noheader,nounits", "-i", str(device.index or 0)],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        sm, temp, thr, uuid = [x.strip() for x in out.split(",")]
        # The board: two H200s measured the same points 6-8 % apart in energy (docs/results, 2026-12-03).
        return {"sm_clock_mhz": int(sm), "temperature_c": int(temp), "throttle_reasons": thr, "gpu_uuid": uuid}
    except Exception:  # noqa: BLE001 - the state is a record, never a reason to fail
        return {}


WARM_SUFFIX = ":warm"  # the region of a point's warm-up and graph capture (its energy is not the point's)


@functools.lru_cache(maxsize=None)
def sm_clock(index: int) -> "SmClock":
    """One SmClock per device for the process (Timers are made per unit; NVML is loaded and initialised once)."""
    return SmClock(index)


class SmClock:
    """Whether the power controller holds the device's SM clock below its maximum now (NVML through ctypes: a few
    microseconds a read); None where NVML cannot say (no GPU, no library)."""

    def __init__(self, index: int = 0):
        import ctypes

        self._c = ctypes
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            self.h = ctypes.c_void_p()
            ok = self.lib.nvmlInit_v2() == 0 and self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.h)) == 0
            self.max_mhz = self._read(self.lib.nvmlDeviceGetMaxClockInfo) if ok else None
        except OSError:
            self.max_mhz = None

    def _read(self, fn) -> int | None:
        v = self._c.c_uint()
        return v.value if fn(self.h, 1, self._c.byref(v)) == 0 else None  # 1: NVML_CLOCK_SM

    def now_mhz(self) -> int | None:
        return self._read(self.lib.nvmlDeviceGetClockInfo) if self.max_mhz else None

    def held_down(self) -> bool | None:
        now = self.now_mhz()
        return None if now is None else now < 0.97 * self.max_mhz


class Timer:
    """Runs `unit.call` (prepared) and returns its per-call statistics; with a meter, the warm-up and the timed
    window are regions of the meter's open run (EnergyBatch fills in the energy when the run closes). `clock`
    (an SmClock, or any object with held_down()) extends a unit's settle period while the clock is held down."""

    def __init__(self, device, settings: Settings, meter=None, state_every_s=30.0, clock=None):
        self.device = device
        self.cuda = device.type == "cuda"
        self.s = settings
        self.meter = meter
        self.clock = clock if clock is not None else (sm_clock(device.index or 0) if self.cuda else None)
        self._last_state = -1e9
        self._state = {}
        self.state_every_s = state_every_s
        # The unit's run so far (a Timer is one unit's): when its last settled point's window ended, and how long
        # the device had then been running the unit without an idle gap longer than settle_carry_gap_s.
        self._hot: tuple[float, float] | None = None

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def run(self, unit, region: str | None = None) -> dict:
        """Times `unit`; with a region name (EnergyBatch.next_region) its warm-up and timed window are that batch's
        regions, and the batch adds the energy when it closes."""
        with self._region(region, WARM_SUFFIX):
            replay, graphed, per, (settled_s, held, carried) = self._warm_up(unit)
        if self.cuda and time.perf_counter() - self._last_state > self.state_every_s:
            self._state = gpu_state(self.device)
            self._last_state = time.perf_counter()
        w0 = time.perf_counter()
        with self._region(region, ""):
            samples, capped = self._sample(replay, per, w0)
        window_s = time.perf_counter() - w0
        self._hot = (time.perf_counter(), settled_s + window_s) if settled_s > 0 else None
        mean = statistics.fmean(samples)
        return {
            "repetitions": len(samples) * per,
            "latency_s": {"mean": mean, "median": statistics.median(samples), "min": min(samples), "max": max(samples),
                          "std": statistics.stdev(samples) if len(samples) > 1 else 0.0},
            "energy": None,
            "busy_s": sum(samples) * per,
            "extra": {"samples": len(samples), "calls_per_sample": per, "cuda_graph": graphed,
                      "settle_s": round(settled_s, 4), "settle_clock_held": held,
                      **({"settle_carried_s": round(carried, 4)} if carried else {}),
                      "ci95_rel": _ci_half_width(samples) / mean if mean > 0 else None, "capped": capped,
                      "window_s": window_s, **self._state},
        }

    @contextlib.contextmanager
    def _region(self, region: str | None, suffix: str):
        """One of the point's regions in the batch's engine run (nothing without a region); closed on any exit."""
        if region is None or self.meter is None:
            yield
            return
        dev = (self.device.index or 0) if self.cuda else -1
        self.meter.begin(region + suffix, dev)
        try:
            yield
        finally:
            self.meter.end(region + suffix, dev)

    def _warm_up(self, unit):
        """At least 3 calls and warmup_s, then the replayer of `per` calls (a CUDA graph when it captures)."""
        t0 = time.perf_counter()
        n = 0
        while n < 3 or time.perf_counter() - t0 < self.s.warmup_s:
            unit.call()
            n += 1
            if n % 8 == 0:
                self._sync()
        self._sync()
        est = (time.perf_counter() - t0) / n
        per = max(1, min(64 if self.cuda else 1000, math.ceil((2e-3 if self.cuda else 1e-3) / max(est, 1e-9))))
        replay, graphed = self.replayer(unit, per)
        return replay, graphed, per, self._settle(replay, per, t0)

    def _settle(self, replay, per, started: float) -> tuple[float, bool, float]:
        """Replays for settle_s when one call takes settle_min_latency_s or more (timed on a replay, since the
        warm-up's first calls include one-off setup; a replay that says long is timed once more, so a host preempted
        during it does not settle a short unit), then on to capped_settle_s while the clock is held down;
        synchronising every few replays. A point that follows the unit's previous settled point within
        settle_carry_gap_s starts its settle clock at the unit's run so far (the device has not been idle since):
        usually nothing more to replay, unless the clock is held down and the run is shorter than capped_settle_s.
        `started`: when the point's warm-up began. Returns (seconds settled, carried ones included; whether the clock
        was held down; seconds carried over)."""
        if self.s.settle_s <= 0:
            return 0.0, False, 0.0

        def per_call() -> float:
            t = time.perf_counter()
            replay()
            self._sync()
            return (time.perf_counter() - t) / per

        self._sync()
        t0 = time.perf_counter()
        if per_call() < self.s.settle_min_latency_s or per_call() < self.s.settle_min_latency_s:
            return 0.0, False, 0.0
        carried = 0.0
        if self._hot is not None and started - self._hot[0] <= self.s.settle_carry_gap_s:
            carried = self._hot[1]
            t0 = started - carried  # the warm-up, its capture and the timing replays ran the unit too
        held = False
        while True:
            elapsed = time.perf_counter() - t0
            if elapsed >= self.s.settle_s:
                held = held or bool(self.clock is not None and self.clock.held_down())
                if not held or elapsed >= self.s.capped_settle_s:
                    break
            for _ in range(4):
                replay()
            self._sync()
        return time.perf_counter() - t0, held, carried

    def _sample(self, replay, per: int, w0: float) -> tuple[list[float], bool]:
        """Per-call times of replays (of `per` calls each) until the noise criterion holds, or the cap (then True)."""
        s = self.s
        samples: list[float] = []
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
                return samples, False
            if elapsed >= s.max_time_s:
                return samples, True
            batch = min(256, batch * 2)

    def replayer(self, unit, per):
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


def point_energy(rep: dict, region: str, calls: int, busy_s: float, cuda: bool,
                 baseline_w: float | None) -> dict | None:
    """J per call of the point measured as `region` of an engine report (EnergyMeter.stop's JSON, parsed)."""
    for ch in rep.get("channels", []):
        for r in ch.get("regions", []):
            if r.get("name") != region or not r.get("calls"):
                continue
            model_j = r.get("model_energy_j")
            total_j = model_j if model_j is not None else r.get("energy_j")
            if total_j is None:
                continue
            idle_w = baseline_w if baseline_w is not None else ch.get("baseline_w", 0.0) or 0.0
            # On a GPU the gaps between event-timed samples are the device idling while the host syncs: charge
            # them at the idle baseline, not to the unit. On a CPU the loop between samples is host work like
            # the unit's, at its power: no correction.
            gaps_s = max(0.0, r.get("time_s", busy_s) - busy_s) if cuda else 0.0
            j = (total_j - idle_w * gaps_s) / calls
            if j <= 0:
                return {"j": None, "below_floor": True, "note": f"below the resolution floor (window {total_j:.4g} J, idle over gaps "
                                           f"{idle_w * gaps_s:.4g} J)"}
            hw = r.get("model_energy_hw_j")
            trap_j = (r.get("energy_j", 0.0) - idle_w * gaps_s) / calls  # both figures kept: they are checked
            return {"j": j, "hw_j": hw / calls if hw is not None else None, "trapezoid_j": trap_j,
                    "readings": ch.get("model_fit", {}).get("samples"),
                    "avg_power_w": j * calls / busy_s if busy_s > 0 else None,
                    "method": "model" if model_j is not None else "trapezoid",
                    "channel": ch.get("name", ""), "window_s": r.get("time_s"), "idle_w": idle_w}
    return None


class EnergyBatch:
    """Points measured back to back in one run of the energy engine. next_region() names the next point's region
    (starting the run when none is open); add() keeps its timing result; full() says when to close; close() stops
    the run and returns the kept (payload, result) pairs with each result's "energy" filled in."""

    def __init__(self, meter, cuda: bool, baseline_w: float | None, max_points: int = 24, max_window_s: float = 3.0):
        # 24 points = 48 regions: within the engine's 64 fitted columns for which it keeps the jackknife's blocks.
        self.meter, self.cuda, self.baseline_w = meter, cuda, baseline_w
        self.max_points, self.max_window_s = max_points, max_window_s
        self.kept: list[tuple[object, dict, str]] = []
        self.running = False
        self.window_s = 0.0
        self.n = 0

    def next_region(self) -> str:
        if not self.running:
            self.meter.start()
            self.running, self.window_s, self.n = True, 0.0, 0
        self.n += 1
        return f"p{self.n - 1}"  # names repeat from batch to batch: the engine's key table stays small

    def add(self, region: str, payload, result: dict) -> None:
        self.kept.append((payload, result, region))
        self.window_s += result["extra"].get("window_s", 0.0)

    def full(self) -> bool:
        return self.running and (self.n >= self.max_points or self.window_s >= self.max_window_s)

    def close(self) -> list[tuple[object, dict]]:
        if not self.running:
            return []
        import json

        self.running = False
        rep = json.loads(self.meter.stop())
        out = []
        for payload, result, region in self.kept:
            result["energy"] = point_energy(rep, region, result["repetitions"], result["busy_s"], self.cuda,
                                            self.baseline_w)
            if result["energy"] is not None:
                result["energy"]["batch_points"] = len(self.kept)
            out.append((payload, result))
        self.kept = []
        return out
