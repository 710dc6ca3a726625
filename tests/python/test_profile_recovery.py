"""dooly profile killed at random moments and resumed, end to end through the real code path (the helpers are
test_profile's). Apart from test_profile.py and test_profile_failures.py so that pytest-xdist (one file per worker)
runs this minute-long test beside the rest."""

import os
import random
import signal
import sqlite3
import subprocess
import time

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
