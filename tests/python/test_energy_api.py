"""dooly.energy, the Python API over the C++ energy engine, driven by the replay source in real time: a recording
whose power steps from 100 W to 300 W and back is replayed from the monitor's opening, and windows placed by the
clock inside each level must get that level's energy (trapezoid: power x time), through the real sampler thread,
the real attributor and the binding."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import dooly.energy as de

core = pytest.importorskip("dooly_core")

LOW_W, HIGH_W = 100.0, 300.0
HIGH_FROM_S, HIGH_TO_S = 1.0, 2.0  # the high level, from the recording's first sample
PERIOD_S = 0.005


def _level(t: float) -> float:
    return HIGH_W if HIGH_FROM_S <= t < HIGH_TO_S else LOW_W


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("energy_api") / "steps.recording"
    lines = ["# dooly-recording v1", "meta,recorded,synthetic: 100 W, 300 W from 1 s to 2 s, 100 W (test_energy_api)",
             "channel,0,gpu,0,0,0,5000000,gpu0,replayed step profile"]
    t0 = 1_000_000_000
    n = int(8.0 / PERIOD_S)
    for i in range(n):
        lines.append(f"s,0,{t0 + i * int(PERIOD_S * 1e9)},{_level(i * PERIOD_S):g}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _monitor(recording: Path, **kw) -> de.Monitor:
    kw.setdefault("baseline_w", LOW_W)
    kw.setdefault("fit", False)
    return de.Monitor("replay", replay_file=str(recording), **kw)


def _sleep_until(t_open: float, at_s: float) -> None:
    delay = t_open + at_s - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def test_windows_get_the_energy_of_the_power_they_ran_under(recording):
    mon = _monitor(recording)
    t_open = time.monotonic()  # the replay's first sample is at the engine's opening (within the constructor)
    with mon:
        _sleep_until(t_open, 0.2)
        mon.begin_window("low")
        _sleep_until(t_open, 0.7)
        mon.end_window("low")
        _sleep_until(t_open, 1.2)
        with mon.measure("high"):
            _sleep_until(t_open, 1.7)
    rep = mon.report
    assert rep.backend == "replay"
    low, high = rep["low"], rep["high"]
    assert low.calls == 1 and high.calls == 1
    assert low.time_s == pytest.approx(0.5, abs=0.1)  # sleeps overshoot on a loaded machine
    assert high.time_s == pytest.approx(0.5, abs=0.1)
    # power x the window's own measured time: the integral, whatever the sleeps' jitter
    assert low.energy_j == pytest.approx(LOW_W * low.time_s, rel=0.02)
    assert high.energy_j == pytest.approx(HIGH_W * high.time_s, rel=0.02)
    # J/call is above the given idle baseline: the low window costs nothing, the high one 200 W of its time
    assert abs(low.j_per_call) < 0.02 * LOW_W * low.time_s
    assert high.j_per_call == pytest.approx((HIGH_W - LOW_W) * high.time_s, rel=0.03)
    assert high.avg_power_w == pytest.approx(HIGH_W, rel=0.02)
    assert {r.kind for r in rep.rows if r.name == "low"} == {"section"}
    assert {r.kind for r in rep.rows if r.name == "high"} == {"region"}
    assert all(r.mode == "trapezoid" and r.j_per_call_hw is None for r in rep.rows)


def test_free_windows_overlap_and_end_in_any_order(recording):
    mon = _monitor(recording)
    t_open = time.monotonic()
    with mon:
        _sleep_until(t_open, 1.1)
        mon.begin_window("a")
        _sleep_until(t_open, 1.3)
        mon.begin_window("b")
        _sleep_until(t_open, 1.5)
        mon.end_window("a")  # a ends before b: not nested, and legal
        _sleep_until(t_open, 1.7)
        mon.end_window("b")
    rep = mon.report
    assert rep.raw["unmatched_events"] == 0
    a, b = rep["a"], rep["b"]
    assert a.time_s == pytest.approx(0.4, abs=0.1) and b.time_s == pytest.approx(0.4, abs=0.1)
    # both inside the high level: each gets 300 W over its own time, overlap counted in each (inclusive figures)
    assert a.energy_j == pytest.approx(HIGH_W * a.time_s, rel=0.02)
    assert b.energy_j == pytest.approx(HIGH_W * b.time_s, rel=0.02)


def test_measure_blocks_and_decorated_calls(recording):
    # No monitor open: the block gets one of its own, and its result is final at the block's end.
    with de.measure("alone", source="replay", replay_file=str(recording), baseline_w=LOW_W, fit=False) as m:
        time.sleep(0.1)
    assert m.result is not None and m.result.calls == 1
    assert m.result.energy_j == pytest.approx(LOW_W * m.result.time_s, rel=0.02)

    mon = _monitor(recording)

    @de.measure("step")
    def step(k: int) -> int:
        time.sleep(0.02)
        return k * 2

    inner = de.measure("block")
    with mon:
        assert [step(k) for k in range(5)] == [0, 2, 4, 6, 8]  # the decorator passes values through
        with inner:
            step(9)
        assert inner.result is None  # not final until the monitor stops
    rep = mon.report
    assert rep["step"].calls == 6
    assert 6 * 0.02 <= rep["step"].time_s < 6 * 0.02 + 0.2
    assert inner.result is not None and inner.result.calls == 1
    block_rows = [r for r in rep.raw["channels"][0]["regions"] if r["name"] == "block"]
    assert block_rows[0]["excl_time_s"] < block_rows[0]["time_s"]  # step ran nested inside block


def test_the_default_monitor_takes_decorated_calls_when_none_is_open(recording, monkeypatch):
    monkeypatch.setenv("DOOLY_POWER_SOURCE", "replay")
    monkeypatch.setenv("DOOLY_REPLAY_FILE", str(recording))
    assert de.report() is None  # nothing started it yet

    @de.measure("work")
    def work() -> None:
        time.sleep(0.01)

    for _ in range(3):
        work()
    rep = de.report()
    assert rep is not None and rep["work"].calls == 3
    assert de.report() is None  # report() stopped it


def test_report_faces_table_csv_json_and_pandas(recording, tmp_path):
    with _monitor(recording) as mon:
        for _ in range(2):
            with mon.measure("phase"):
                time.sleep(0.05)
    rep = mon.report
    table = rep.table()
    assert "phase" in table and "J/call" in table
    paths = rep.save(str(tmp_path / "run"))
    saved = json.loads(Path(paths[0]).read_text())
    assert saved["channels"][0]["regions"][0]["name"] == "phase"
    assert Path(paths[1]).read_text().startswith("# dooly-energy-csv")
    recs = rep.records()
    assert recs[0]["name"] == "phase" and recs[0]["calls"] == 2 and recs[0]["counted"] is True
    df = rep.to_pandas()
    assert list(df["name"]) == ["phase"] and df["energy_j"].iloc[0] == pytest.approx(recs[0]["energy_j"])
    with pytest.raises(KeyError, match="no window named 'nope'.*phase"):
        rep["nope"]


def test_model_mode_rows_carry_their_interval(recording):
    # Two windows of different power, many calls: the model fit separates them and gives each an interval.
    mon = _monitor(recording, fit=True)
    t_open = time.monotonic()
    with mon:
        _sleep_until(t_open, 0.1)
        while time.monotonic() - t_open < 0.9:
            with mon.measure("quiet"):
                time.sleep(0.03)
            time.sleep(0.01)
        _sleep_until(t_open, 1.1)
        while time.monotonic() - t_open < 1.9:
            with mon.measure("busy"):
                time.sleep(0.03)
            time.sleep(0.01)
    rep = mon.report
    busy = rep["busy"].rows[0]
    if busy.mode == "model":  # the report leads with the model where the fit resolved the row
        assert busy.j_per_call_hw is not None and busy.j_per_call_hw >= 0
        assert busy.model_j_per_call == busy.j_per_call
    assert busy.trapezoid_j_per_call == pytest.approx((HIGH_W - LOW_W) * busy.time_s / busy.calls, rel=0.05)
    assert rep["busy"].j_per_call > 5 * abs(rep["quiet"].j_per_call)


def test_bad_use_is_one_clear_error(recording):
    with pytest.raises(ValueError, match="(?i)period_ms"):
        de.Monitor("replay", replay_file=str(recording), period_ms=0)
    with pytest.raises(ValueError, match="source='wattmeter' is not one of nvml"):
        de.Monitor("wattmeter")
    with pytest.raises(ValueError, match="(?i)no_such"):
        de.Monitor("replay", replay_file=str(recording), settings={"NO_SUCH": 1})
    mon = _monitor(recording)
    with pytest.raises(RuntimeError, match="not running"):
        mon.begin_window("early")
    with mon:
        mon.begin_window("x")
        with pytest.raises(ValueError, match="already open"):
            mon.begin_window("x")
        with pytest.raises(ValueError, match="'y' is not open.*x"):
            mon.end_window("y")
        errors = []

        def end_elsewhere():
            try:
                mon.end_window("x")
            except ValueError as e:
                errors.append(str(e))

        t = threading.Thread(target=end_elsewhere)
        t.start()
        t.join()
        assert errors and "end it on the thread that began it" in errors[0]
        mon.end_window("x")
    assert mon.report.raw["events_dropped"] == 0 and mon.report["x"].calls == 1
    with pytest.raises(RuntimeError, match="already run"):
        mon.start()
