"""python -m dooly.profile (run by `dooly profile`, which checked the arguments): a supervisor that runs the
worker in a child process, watches the point in flight, and stops a point that outlives its timeout (stored as
`timeout`) or a worker that died (the point in flight stored as `failed`), then starts the worker again: the
plan skips every committed point. A GPU fault ends the run."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

MAX_RESTARTS = 20


def parse(argv):
    p = argparse.ArgumentParser(prog="dooly profile", description="internal: use `dooly profile`")
    p.add_argument("--db", required=True)
    p.add_argument("--grid", required=True)
    p.add_argument("--shard", default="0/1")
    p.add_argument("--device", default="auto")
    p.add_argument("--retry-failed", action="store_true")
    p.add_argument("--provenance", type=int, default=0)
    p.add_argument("--plan-json", default="")
    p.add_argument("--heartbeat", default="")
    p.add_argument("--stop-at", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("traces", nargs="+")
    return p.parse_args(argv)


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def supervise(args, argv) -> int:
    import dooly_core

    with open(args.grid) as f:
        timeout_s = float(json.load(f).get("measure", {}).get("point_timeout_s", 60))
    hb = args.heartbeat or os.path.join(tempfile.mkdtemp(prefix="dooly-profile-"), "heartbeat.json")
    # The traces go into the store first (signatures, models, occurrences: idempotent), then the worker plans.
    dooly_core.ProfileStore(args.db).ingest(args.traces)
    child_argv = [sys.executable, "-m", "dooly.profile", "--worker", "--heartbeat", hb] + argv
    deadline = os.environ.get("DOOLY_PROFILE_DEADLINE_S")
    if deadline:  # a slice of GPU time: no point starts later than this many seconds from now
        child_argv[4:4] = ["--stop-at", str(time.time() + float(deadline))]
    restarts = 0
    store = None
    while True:
        if os.path.exists(hb):
            os.remove(hb)
        proc = subprocess.Popen(child_argv)
        killed_for = None
        while proc.poll() is None:
            time.sleep(0.5)
            state = _read(hb)
            busy = state.get("point") or state.get("resolve")
            if busy and time.time() - state.get("started", time.time()) > timeout_s:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed_for = state
                break
        code = proc.returncode
        if code == 0 and killed_for is None:
            return 0
        state = killed_for or _read(hb)
        if store is None and (state.get("point") or state.get("resolve")):
            store = dooly_core.ProfileStore(args.db)
        why = (f"Timeout: still running after {timeout_s:g} s (point_timeout_s)" if killed_for
               else f"WorkerDied: exit status {code}")
        if state.get("resolve"):  # the unit hung or crashed where it was first tried: it has no runnable level
            store.commit_resolution(json.dumps({
                "signature": state["unit"], "provenance_id": state["provenance_id"],
                "unit": None, "level": 0, "status": "unrunnable",
                "attempts": [{"unit": state["unit"], "level": 0, "error": why}]}))
            print(f"dooly profile: {state['unit'][:12]}: {why} where it was first tried; the worker restarts",
                  file=sys.stderr, flush=True)
        elif state.get("point"):
            status = "timeout" if killed_for else "failed"
            store.commit_point(json.dumps({"signature": state["unit"], "provenance_id": state["provenance_id"], "point": state["point"],
                                           "status": status, "reason": why}))
            print(f"dooly profile: {state['unit'][:12]} {state['point']['key']}: {why}; the worker restarts",
                  file=sys.stderr, flush=True)
        if code == 3:
            return 3
        restarts += 1
        if restarts > MAX_RESTARTS or not (state.get("point") or state.get("resolve")):
            if not (state.get("point") or state.get("resolve")):
                print(f"dooly profile: the worker stopped with status {code} outside a point", file=sys.stderr)
            return code or 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if args.worker:
        from .worker import main as worker_main

        return worker_main(args)
    return supervise(args, argv)


if __name__ == "__main__":
    sys.exit(main())
