"""dooly profile when things go wrong, end to end through the real code path (the helpers are test_profile's):
the whole run killed at random moments and resumed, a unit that hangs or raises. Apart from test_profile.py so
that pytest-xdist (one file per worker) runs these minute-long waits beside the rest."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from test_profile import GRID, LLAMA, env, exe, planned_points, profile, rows


def _measured(db) -> int:
    """Measurements committed so far; 0 while the store or its tables do not exist yet (or a write holds the lock)."""
    try:
        return rows(db, "SELECT count(*) FROM measurements")[0][0]
    except sqlite3.Error:
        return 0


def test_killed_runs_resume_without_measuring_a_point_twice(tmp_path):
    """kill -9 of the whole run (supervisor and worker) at 20 random moments: the store stays intact, no point is
    measured twice, and the run that finally completes leaves every point measured once. Half the kills fall at a
    random time after the start (start-up, tracing, planning, the baseline, or measuring, as the machine's speed
    decides); the other half a random time after the run's first commit, while points are being measured, however
    long a loaded machine takes to get there (CI's 2 cores took longer than 4 s for every start-up)."""
    db = tmp_path / "k.sqlite"
    total = planned_points(db)
    rnd = random.Random(11)
    committed = []
    for i in range(20):
        before = _measured(db)
        p = subprocess.Popen([exe(), "profile", str(LLAMA), "--db", str(db), "--grid", str(GRID), "--device", "cpu"],
                             env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        if i % 2 == 0:
            time.sleep(rnd.uniform(0.3, 4.0))
        else:
            deadline = time.monotonic() + 300
            while _measured(db) <= before and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert p.poll() is None, f"kill {i}: the run ended by itself (status {p.returncode}) before measuring"
            assert _measured(db) > before, f"kill {i}: no point measured in 300 s"
            time.sleep(rnd.uniform(0.0, 0.5))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        if not db.exists():
            continue
        assert rows(db, "PRAGMA integrity_check") == [("ok",)], f"kill {i}"
        dup = rows(db, "SELECT signature_id, point_key, count(*) FROM measurements WHERE status = 'ok' "
                       "GROUP BY signature_id, point_key HAVING count(*) > 1")
        assert dup == [], f"kill {i}: measured twice: {dup}"
        committed.append(rows(db, "SELECT count(*) FROM measurements")[0][0])
    # The kills fell while points were being measured: runs committed some and were cut short of the rest.
    assert len(set(committed)) > 3 and 0 < committed[-1] < total, (committed, total)
    profile(db)
    ok = rows(db, "SELECT count(*), count(DISTINCT signature_id || point_key) FROM measurements WHERE status = 'ok'")
    assert ok == [(total, total)]


def _doctored_trace(tmp_path, changes: dict) -> Path:
    """A copy of tiny Llama whose ops of the given names call something else."""
    t = json.loads(LLAMA.read_text())
    for step in t["steps"]:
        for op in step["ops"]:
            if op["op"] in changes:
                op["fn"], op["call_args"] = changes[op["op"]]
    path = tmp_path / LLAMA.name
    path.write_text(json.dumps(t))
    return path


def test_a_unit_that_hangs_or_raises_is_recorded_and_the_run_goes_on(tmp_path):
    # silu sleeps (a hang, stopped at the point timeout); rsqrt raises (a view that does not fit): the finder walks
    # up to the RMSNorm module, which runs and absorbs it.
    trace = _doctored_trace(tmp_path, {
        "silu": ("time.sleep", {"args": [120], "kwargs": {}}),
        "rsqrt": ("torch.Tensor.view", {"args": [{"in": 0}, 7, 7, 7], "kwargs": {}}),
    })
    grid = tmp_path / "grid.json"
    g = json.loads(GRID.read_text())
    g["measure"]["point_timeout_s"] = 5
    grid.write_text(json.dumps(g))
    db = tmp_path / "h.sqlite"
    r = profile(db, traces=(trace,), grid=grid, env={"DOOLY_PROFILE_ALLOW_FN": "time.sleep"})
    assert "Timeout: still running after 5 s" in r.stderr, r.stderr[-2000:]
    res = rows(db, "SELECT s.name, r.status, r.level, u.name, r.attempts_json FROM resolutions r "
                   "JOIN signatures s ON s.id = r.signature_id LEFT JOIN signatures u ON u.id = r.unit_signature_id")
    by = {name: (st, lvl, unit, json.loads(att)) for name, st, lvl, unit, att in res}
    assert by["silu"][0] == "unrunnable" and "Timeout" in by["silu"][3][0]["error"]
    st, lvl, unit, att = by["rsqrt"]
    assert (st, lvl, unit) == ("absorbed", 1, "LlamaRMSNorm"), by["rsqrt"]
    assert att[0]["level"] == 0 and att[0]["error"].startswith("RuntimeError")
    norm = rows(db, "SELECT count(*) FROM measurements m JOIN signatures s ON s.id = m.signature_id "
                    "WHERE s.name = 'LlamaRMSNorm' AND m.status = 'ok'")[0][0]
    assert norm > 0  # the module is measured in rsqrt's place
    report = profile(db, "--report", traces=(trace,), grid=grid).stdout
    assert "uncovered: 1 signatures" in report and "silu" in report and "Timeout" in report, report
