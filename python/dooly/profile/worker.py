"""The measuring process: plans through the core, resolves each unit (the finest level that runs alone), measures
its points and commits each one. Run by the supervisor (__main__.py), which stops it when a point hangs."""

from __future__ import annotations

import json
import math
import os
import sys
import time

EXIT_GPU_FAULT = 3


def _say(msg: str) -> None:
    print(f"dooly profile: {msg}", file=sys.stderr, flush=True)


def pick_device(name: str):
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("dooly profile: --device cuda but torch sees no GPU — use --device cpu")
        if dev.index is None:
            dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
    return dev


def is_gpu_fault(e: BaseException) -> bool:
    text = str(e)
    return any(s in text for s in ("illegal memory access", "device-side assert", "unspecified launch failure",
                                   "CUDA error: an illegal", "misaligned address", "uncorrectable ECC"))


def is_oom(e: BaseException) -> bool:
    import torch

    text = str(e).lower()
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in text or "can't allocate memory" in text


class Deadline(Exception):
    """DOOLY_PROFILE_DEADLINE_S passed: stop before the next point (everything measured is committed)."""


class Heartbeat:
    """The point in flight, in a file the supervisor watches (written whole, then renamed)."""

    def __init__(self, path: str | None):
        self.path = path

    def set(self, state: dict) -> None:
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self.path)


class Progress:
    """A bar with ETA on a terminal; one line per minute otherwise."""

    def __init__(self, total_points: int, estimated_s: float):
        self.total = total_points
        self.done = 0
        self.estimated_s = estimated_s
        self.est_done = 0.0
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.tty = sys.stderr.isatty()

    def step(self, est_s: float) -> None:
        self.done += 1
        self.est_done += est_s
        now = time.monotonic()
        spent = now - self.t0
        rate = spent / self.est_done if self.est_done > 0 else 1.0
        eta = max(0.0, (self.estimated_s - self.est_done) * rate)
        text = f"{self.done}/{self.total} points, {spent / 60:.1f} min, ETA {eta / 60:.1f} min"
        if self.tty:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}   ")
            sys.stderr.flush()
        elif now - self.last_line >= 60 or self.done == self.total:
            _say(text)
            self.last_line = now

    def close(self) -> None:
        if self.tty and self.done:
            sys.stderr.write("\n")


def _dominated(bindings: dict, ooms: list[dict]) -> dict | None:
    """The out-of-memory point this one is at least as large as in every swept quantity, if any."""
    for o in ooms:
        if o and all(bindings.get(k, 0) >= v for k, v in o.items()):
            return o
    return None


class Worker:
    def __init__(self, args):
        import torch

        import dooly_core

        from .context import machine_context
        from .measure import Settings, Timer
        from .units import ModelCache

        self.torch = torch
        self.core = dooly_core
        self.args = args
        self.device = pick_device(args.device)
        self.store = dooly_core.ProfileStore(args.db)
        self.context = machine_context(self.device)
        inputs = json.loads(dooly_core.grid_measure(args.grid))["inputs"]
        if inputs != "cycled":  # a cycled run keeps the context it always had (the points measured that way)
            self.context["extra"]["inputs"] = f"{inputs}: activations made once, weights cycled past the L2"
        self.provenance = args.provenance or self.store.measurement_context(json.dumps(self.context))
        self.heartbeat = Heartbeat(args.heartbeat)
        self.traces: dict[int, dict] = {}
        self.models = ModelCache(self.device)
        self.meter, self.baseline_w = self._open_meter()
        self.Settings, self.Timer = Settings, Timer

    def _open_meter(self):
        try:
            probe = self.core.EnergyMeter(None, int(os.environ.get("DOOLY_PROFILE_BASELINE_MS", "1000")))
        except Exception as e:  # noqa: BLE001 - no power source: time only, said once
            why = " ".join(str(e).split())
            _say(f"no power source, measuring time only (energy columns stay empty): {why}")
            return None, None
        probe.start()
        rep = json.loads(probe.stop())
        baseline = None
        for ch in rep.get("channels", []):
            if ch.get("baseline_w"):  # the mean power of the quiet interval measured at start
                baseline = ch["baseline_w"]
        del probe
        meter = self.core.EnergyMeter(baseline, 0)
        _say(f"energy: {meter.backend}, idle baseline {baseline:.1f} W" if baseline is not None
             else f"energy: {meter.backend}, idle baseline not measured")
        return meter, baseline

    def trace(self, index: int) -> dict:
        if index not in self.traces:
            from .units import load_trace

            self.traces.clear()
            self.traces[index] = load_trace(self.args.traces[index])
        return self.traces[index]

    def plan(self) -> dict:
        return json.loads(self.core.profile_plan(self.args.db, self.args.traces, self.args.grid, self.provenance,
                                                 self.args.shard, self.args.retry_failed, self.meter is not None))

    # ---- the finder
    def unit_at_level(self, unit: dict, level: int):
        from .units import ModuleUnit, OpUnit, UnitError, find_call, find_op

        tr = self.trace(unit["trace"])
        if unit["kind"] == "op" and level == 0:
            return OpUnit(find_op(tr, unit["step"], unit["seq"]), self.device), unit["hash"]
        if unit["kind"] == "module" and level == 0:
            call = find_call(tr, unit["step"], unit["call"])
            return ModuleUnit(self._module(unit["trace"], tr, call), call, 0, self.device), unit["hash"]
        anc = unit["ancestors"][level - 1]
        call = find_call(tr, unit["step"], anc["call"])
        if not call.get("inputs"):
            raise UnitError("the trace records no inputs for this module call: re-create it with this build")
        return ModuleUnit(self._module(unit["trace"], tr, call), call, level, self.device), anc["hash"]

    def _module(self, index: int, tr: dict, call: dict):
        model = self.models.get(index, tr)
        return model.get_submodule(call["module"]) if call["module"] else model

    def try_run(self, runner, bindings) -> None:
        from .units import UnitError, output_shapes

        runner.prepare(bindings)
        with self.torch.no_grad():
            out = runner.call()
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)
        want = runner.expected_shapes(bindings)
        if want is not None:
            got = output_shapes(out)
            if got != want:
                raise UnitError(f"isolation does not reproduce the trace: outputs {got}, traced {want}")
        runner.kernel_check = None
        if self.device.type == "cuda" and isinstance(getattr(runner, "op", None), dict) and bindings is None:
            from .units import compare_kernels, launched_kernels

            status, detail = compare_kernels(runner.op.get("kernels", []), launched_kernels(runner.call))
            if status == "disjoint":
                raise UnitError(f"isolation launches other kernels than the trace: {detail}")
            runner.kernel_check = {"status": status, "detail": detail}

    def resolve(self, unit: dict) -> tuple[str, int, str | None, list, object]:
        """('runs'|'absorbed'|'unrunnable', level, unit hash, attempts, the runner that ran): the op at its traced
        sizes, then each enclosing module in turn."""
        from .units import describe_error

        attempts = []
        levels = 1 + (len(unit["ancestors"]) if unit["kind"] == "op" else 0)
        for level in range(levels):
            try:
                runner, h = self.unit_at_level(unit, level)
                # The clock of the hang check starts once the unit exists (building a model takes its own time).
                self.heartbeat.set({"unit": unit["hash"], "resolve": True, "started": time.time(),
                                    "provenance_id": self.provenance})
                self.try_run(runner, None)
                return "runs" if level == 0 else "absorbed", level, h, attempts, runner
            except Exception as e:  # noqa: BLE001 - every failure is recorded with its reason
                if is_gpu_fault(e):
                    raise
                self.heartbeat.set({})  # building the next level's module is not this attempt's time
                h = unit["hash"] if level == 0 else unit["ancestors"][level - 1]["hash"]
                attempts.append({"unit": h, "level": level, "error": describe_error(e)})
        return "unrunnable", 0, None, attempts, None

    # ---- the run
    def commit(self, unit_hash: str, point: dict, status: str, reason: str = "", result: dict | None = None,
               extra: dict | None = None) -> None:
        r = {"signature": unit_hash, "provenance_id": self.provenance, "point": point, "status": status,
             "reason": reason}
        if result:
            r.update(result)
        r.setdefault("extra", {}).update(extra or {})
        r["extra"]["grid_sha256"] = self.plan_json.get("grid_sha256", "")
        self.store.commit_point(json.dumps(r))

    def measure_unit(self, unit: dict, runner, unit_hash: str, progress: Progress, settings) -> None:
        """Every planned point of the unit, largest first, back to back in batches of the energy engine
        (measure.EnergyBatch); a point's row is committed when its batch closes, a failed point's at once."""
        from .measure import EnergyBatch

        timer = self.Timer(self.device, settings, self.meter)
        batch = EnergyBatch(self.meter, self.device.type == "cuda", self.baseline_w) if self.meter else None
        ooms: list[dict] = []
        try:
            for point in unit["points"]:
                if self.args.stop_at and time.time() > self.args.stop_at:
                    raise Deadline()
                self.measure_point(unit, runner, unit_hash, point, timer, batch, ooms)
                if batch is not None and batch.full():
                    self.commit_batch(unit_hash, batch)
                progress.step(point["estimated_s"])
        finally:
            if batch is not None:  # a deadline or a GPU fault still commits what the batch measured
                self.commit_batch(unit_hash, batch)
            self.heartbeat.set({})

    def commit_batch(self, unit_hash: str, batch) -> None:
        for (point, extra), result in batch.close():
            self.commit_ok(unit_hash, point, result, extra)

    def commit_ok(self, unit_hash: str, point: dict, result: dict, extra: dict) -> None:
        if result.get("energy"):  # the store's columns take the figure; the rest of it goes to extra
            result["extra"]["energy"] = {k: v for k, v in result["energy"].items() if k not in ("j", "hw_j")}
        result.pop("busy_s", None)
        self.commit(unit_hash, point, "ok", result=result, extra=extra)

    def measure_point(self, unit: dict, runner, unit_hash: str, point: dict, timer, batch, ooms: list) -> None:
        from .units import UnitError, describe_error, output_shapes, prepare_inputs

        swept = {k: point["bindings"][k] for k in unit["swept"]}
        self.heartbeat.set({"unit": unit_hash, "point": point, "started": time.time(),
                            "provenance_id": self.provenance})
        dom = _dominated(swept, ooms)
        if dom is not None:
            self.commit(unit_hash, point, "oom", f"trimmed: at least as large as out-of-memory point {json.dumps(dom)}")
            return
        t0 = time.perf_counter()
        try:
            copies = prepare_inputs(runner, point["bindings"], timer.s.inputs, self.device)
            with self.torch.no_grad():
                want = runner.expected_shapes(point["bindings"])
                if want is not None and output_shapes(runner.call()) != want:  # every point, not only the first
                    raise UnitError(f"outputs at this point are not the traced shapes evaluated here: {want}")
                region = batch.next_region() if batch is not None else None
                result = timer.run(runner, region)
            extra = {"copies": copies, "level": runner.level, "point_s": time.perf_counter() - t0,
                     "kernels": getattr(runner, "kernel_check", None)}
            if batch is not None:
                batch.add(region, (point, extra), result)
            else:
                self.commit_ok(unit_hash, point, result, extra)
        except Exception as e:  # noqa: BLE001 - a point's failure is stored with its reason; the run goes on
            if is_gpu_fault(e):
                self.commit(unit_hash, point, "failed", describe_error(e))
                raise
            status = "oom" if is_oom(e) else "failed"
            if status == "oom":
                ooms.append(swept)
            self.commit(unit_hash, point, status, describe_error(e), extra={"point_s": time.perf_counter() - t0})
            if isinstance(e, UnitError):
                _say(f"{unit['name']} {unit_hash[:12]} {point['key']}: {describe_error(e)}")
        finally:
            runner.copies = []
            runner._graph = None
            if ooms and self.device.type == "cuda":
                self.torch.cuda.empty_cache()  # after an out-of-memory point only: it costs a sync a point

    def run(self) -> int:
        passes = 0
        while True:
            self.plan_json = plan = self.plan()
            if self.args.plan_json and passes == 0:
                with open(self.args.plan_json, "w") as f:
                    json.dump(plan, f, indent=1)
            todo = plan["todo"]
            if passes == 0:
                _say(f"measurement context {self.provenance} ({self.context['gpu_name']}); {plan['op_occurrences']} op "
                     f"occurrences -> {plan['op_signatures']} signatures -> {plan['aware']['units']} units; "
                     f"{todo['points']} points to measure (est. {todo['estimated_s'] / 60:.1f} GPU-min)")
            settings = self.Settings(plan["measure"])
            progress = Progress(todo["points"], todo["estimated_s"])
            replan = False
            # Units never tried first (a slice of GPU time learns what runs, and measures new signatures, before
            # it refines old ones), then in trace order, so each trace file (tens of MB at real size) is read at
            # most twice a pass, not once a unit.
            for unit in sorted(plan["units"], key=lambda u: (u["resolution"] != "unresolved", u["trace"], u["step"])):
                if not unit["points"] and unit["resolution"] != "unresolved":
                    continue
                runner = None
                if unit["resolution"] == "unresolved":
                    status, level, unit_hash, attempts, runner = self.resolve(unit)
                    self.heartbeat.set({})
                    self.store.commit_resolution(json.dumps({
                        "signature": unit["hash"], "provenance_id": self.provenance, "unit": unit_hash,
                        "level": level, "status": status, "attempts": attempts}))
                    if status != "runs":
                        if status == "unrunnable":
                            _say(f"{unit['name']} {unit['hash'][:12]}: no level runs alone: "
                                 f"{attempts[-1]['error'] if attempts else ''}")
                        replan = True  # an absorbing module is planned as a unit of its own next pass
                        for p in unit["points"]:
                            progress.step(p["estimated_s"])
                        continue
                if runner is None:  # resolved by an earlier run; the one just resolved carries its kernel check
                    runner, unit_hash = self.unit_at_level(unit, 0)
                self.measure_unit(unit, runner, unit_hash, progress, settings)
            progress.close()
            passes += 1
            if not replan or passes >= 3:
                return 0


def main(args) -> int:
    try:
        return Worker(args).run()
    except Deadline:
        _say("deadline reached (DOOLY_PROFILE_DEADLINE_S): every measured point is committed; run again to go on")
        return 0
    except Exception as e:  # noqa: BLE001
        if is_gpu_fault(e):
            _say(f"GPU fault, run ended (every finished point is committed): {e}")
            return EXIT_GPU_FAULT
        raise
