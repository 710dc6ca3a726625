"""dooly profile when a unit hangs or raises, end to end through the real code path (the helpers are test_profile's):
recorded with its reason, and the run goes on. Apart from test_profile.py and test_profile_recovery.py so that
pytest-xdist (one file per worker) runs its half-minute wait beside the rest."""

import json
from pathlib import Path

from test_profile import GRID, LLAMA, profile, rows


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
