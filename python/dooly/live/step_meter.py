"""A live run's energy through the project's energy engine (dooly_core.EnergyMeter: the connector's power source,
sampler thread and attributor; NVML's 50 Hz sample buffer on a GPU, DOOLY_POWER_SOURCE / DOOLY_REPLAY_FILE as
everywhere). One engine run covers the whole serving run; every scheduler step is one window of its own (a region
`w<k>`, opened and closed from the engine's thread, docs/simulate.md "Live runs"), so each step gets the trapezoid
integral of the power trace over its window. The model fit is off: a window seen once cannot be separated by it.

The engine reads the vendor's energy counter at its start and stop; the file compares the run's integrated power
with that counter (the conservation check), and the steps' energy plus what fell between steps with the run's.
"""

from __future__ import annotations

import json

from dooly.energy import counted_channels

__all__ = ["StepMeter", "counted_channels"]


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


class StepMeter:
    """Opens the energy engine if a power source is there; without one, `meter` is None and `why` says why."""

    def __init__(self, core):
        self.meter = None
        self.backend: str | None = None
        self.why: str | None = None
        try:
            self.meter = core.EnergyMeter(None, 0, fit=False)
            self.backend = self.meter.backend
        except Exception as e:  # noqa: BLE001 - no power source is a stated outcome, not a failure
            self.why = _one_line(e)
        self.report: dict | None = None

    def __bool__(self) -> bool:
        return self.meter is not None

    def start(self) -> None:
        if self.meter is not None:
            self.meter.start()

    # Windows are host windows (device -1): the engine charges them on every channel, and counted_channels picks
    # the ones that are the run's.
    def begin(self, name: str) -> None:
        self.meter.begin(name, -1)

    def end(self, name: str) -> None:
        self.meter.end(name, -1)

    def stop(self) -> dict | None:
        if self.meter is not None:
            self.report = json.loads(self.meter.stop())
        return self.report

    def window_energies(self, channels: list[dict]) -> dict[str, dict]:
        """{window name: {'energy_j', 'time_s', 'calls'}} summed over `channels` (trapezoid: integral of power)."""
        out: dict[str, dict] = {}
        for ch in channels:
            for r in ch.get("regions", []):
                w = out.setdefault(r["name"], {"energy_j": 0.0, "time_s": r["time_s"], "calls": r["calls"],
                                               "extrapolated_windows": 0})
                w["energy_j"] += r["energy_j"]
                w["extrapolated_windows"] += r.get("extrapolated_windows", 0)
        return out

    def describe(self, device: str) -> dict:
        """What the result file says about power: the source, its channels and the conservation figures."""
        if self.meter is None:
            return {"source": None, "why": f"no power source: {self.why}"}
        rep = self.report or {}
        channels = rep.get("channels", [])
        counted = counted_channels(channels, device)
        return {
            "source": rep.get("backend", self.backend),
            "counted_channels": [c["name"] for c in counted],
            "channels": [{
                "name": c["name"], "domain": c["domain"], "device": c["device"],
                "sensor": c["sensor"]["description"], "samples": c["samples"], "run_time_s": c["run_time_s"],
                "run_energy_j": c["conservation"]["run_energy_j"],
                "windows_energy_j": c["conservation"]["attributed_j"],
                "outside_windows_j": c["conservation"]["unattributed_j"],
                "counter_delta_j": c["conservation"]["counter_delta_j"],
                "counter_ratio": c["conservation"]["ratio"],
            } for c in channels],
            "events_dropped": rep.get("events_dropped", 0),
            "unmatched_events": rep.get("unmatched_events", 0),
            "meta": rep.get("meta", {}),
        }
