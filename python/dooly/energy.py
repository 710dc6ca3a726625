"""Energy of Python code, measured by dooly's C++ engine (docs/python-energy.md).

The same engine as the Kokkos connector and libdooly_cupti.so (dooly_core.EnergyMeter): a background thread samples
the power source (NVML, Variorum, RAPL, or a replayed recording), the calls below only time-stamp window edges, and
at the end each window gets the integral of power over its calls (trapezoid) and the model mode's fit, with the idle
baseline subtracted for J/call and a 95 % interval on every model figure.

    import dooly.energy

    with dooly.energy.Monitor() as mon:             # starts the engine; stops it and attributes on exit
        mon.begin_window("prefill"); ...; mon.end_window("prefill")   # free windows: any order, any thread
        with mon.measure("decode"): ...                                 # nested windows (a region)
    print(mon.report.table())
    mon.report["decode"].energy_j, mon.report["decode"].j_per_call, mon.report.to_pandas()

    with dooly.energy.measure("step") as m:         # no monitor open: the block gets one of its own
        ...
    m.result.energy_j

    @dooly.energy.measure("forward")                # each call is a window of the innermost open monitor,
    def forward(x): ...                             # else of the process's default monitor (report() stops it)

Results are final when the monitor stops (the sensor lags the work, and the model mode fits every reading at once):
a window handle's `result` is None until then. Settings: keyword arguments for the common ones, `settings={...}` for
any DOOLY_* setting by name (docs/kokkos.md lists them), over the environment's DOOLY_* values.
"""

from __future__ import annotations

import atexit
import functools
import json
import math
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Monitor", "measure", "report", "Report", "Row", "Window", "WindowHandle", "counted_channels"]


def _core():
    import dooly_core  # the compiled binding; imported late so `import dooly.energy` alone never fails

    return dooly_core


def _num(v) -> float | None:
    """A JSON figure: None stays None, the string "inf" (an unbounded interval) becomes math.inf."""
    if v is None:
        return None
    return math.inf if v == "inf" else float(v)


def counted_channels(channels: list[dict], device: str | None = None) -> list[dict]:
    """The channels whose energy is the run's, so that totals count nothing twice: with `device` "cuda[:N]" that
    GPU's own channel; else every GPU channel; without GPU channels the host's packages and DRAM (RAPL sub-zones and
    the platform total contain them and are left out); else the node's total; else every channel the source has."""
    if device is not None and device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        gpu = [c for c in channels if c["domain"] == "gpu" and c["device"] == index]
        if gpu:
            return gpu
    elif device is None:
        gpu = [c for c in channels if c["domain"] == "gpu"]
        if gpu:
            return gpu
    host = [c for c in channels if c["domain"] in ("cpu", "dram")]
    if host:
        return host
    node = [c for c in channels if c["domain"] == "node"]
    return node or list(channels)


@dataclass(frozen=True)
class Row:
    """One window name on one power channel. `energy_j` and `j_per_call` are the figures the report leads with
    (the model mode's where it was fitted for this row, else the trapezoid's); both modes are kept."""

    channel: str
    domain: str
    device: int
    name: str
    kind: str
    calls: int
    time_s: float
    energy_j: float  # inclusive, idle included
    j_per_call: float  # above the channel's idle baseline
    j_per_call_hw: float | None  # half-width of the 95 % interval (model mode); None for the trapezoid
    mode: str  # "model" or "trapezoid": where energy_j and j_per_call come from
    avg_power_w: float
    baseline_w: float
    trapezoid_energy_j: float
    trapezoid_j_per_call: float
    model_energy_j: float | None
    model_j_per_call: float | None
    model_power_w: float | None
    flags: tuple[str, ...]  # what weakens the figure: inseparable, imprecise, sensor-sensitive, short, extrapolated,
    #                         never-alone (a kernel only seen overlapping others: its J/call alone was fitted on those)
    # Kernels that overlapped others on different streams (the model's split): calls and J/call over them.
    overlapped_calls: float | None = None
    overlapped_j_per_call: float | None = None


def _flags(r: dict) -> tuple[str, ...]:
    out = []
    if r.get("model_inseparable"):
        out.append("inseparable")
    if r.get("model_too_little_data"):
        out.append("too-little-data")
    if r.get("model_imprecise"):
        out.append("imprecise")
    if r.get("model_sensor_sensitive"):
        out.append("sensor-sensitive")
    if r["calls"] and r.get("short_windows", 0) * 2 > r["calls"]:
        out.append("short")
    if r.get("extrapolated_windows", 0):
        out.append("extrapolated")
    if r.get("model_never_alone"):
        out.append("never-alone")
    return tuple(out)


def _row(ch: dict, r: dict, lead_model: bool) -> Row:
    model_e, model_jpc = _num(r.get("model_energy_j")), _num(r.get("model_j_per_call"))
    unresolved = r.get("model_inseparable") or r.get("model_imprecise")
    use_model = lead_model and model_e is not None and model_jpc is not None and not unresolved
    over_calls, over_e = _num(r.get("model_overlap_calls")), _num(r.get("model_overlap_energy_j"))
    over_jpc = over_e / over_calls if over_calls and over_e is not None else None
    return Row(channel=ch["name"], domain=ch["domain"], device=ch["device"], name=r["name"], kind=r["kind"],
               calls=r["calls"], time_s=r["time_s"],
               energy_j=model_e if use_model else r["energy_j"],
               j_per_call=model_jpc if use_model else r["j_per_call"],
               j_per_call_hw=_num(r.get("model_j_per_call_hw_j")) if use_model else None,
               mode="model" if use_model else "trapezoid", avg_power_w=r["avg_power_w"], baseline_w=ch["baseline_w"],
               trapezoid_energy_j=r["energy_j"], trapezoid_j_per_call=r["j_per_call"], model_energy_j=model_e,
               model_j_per_call=model_jpc, model_power_w=_num(r.get("model_power_w")), flags=_flags(r),
               overlapped_calls=over_calls, overlapped_j_per_call=over_jpc)


@dataclass(frozen=True)
class Window:
    """A window name over the channels that count (counted_channels): time is its wall time (the same on every
    channel), energy the sum over those channels, the interval their half-widths added in quadrature (None where a
    channel's figure is the trapezoid's). `rows` has the name's row on every channel, counted or not."""

    name: str
    calls: int
    time_s: float
    energy_j: float
    j_per_call: float
    j_per_call_hw: float | None
    rows: tuple[Row, ...]

    @property
    def avg_power_w(self) -> float:
        return self.energy_j / self.time_s if self.time_s > 0 else 0.0


@dataclass(frozen=True)
class Report:
    """What a monitor measured: every channel's rows, the report's own JSON (`raw`, the connector's format:
    `dooly plot` and `dooly analyze` read it), and the channels whose sum is a window's energy."""

    backend: str
    mode: str
    rows: tuple[Row, ...]
    counted: tuple[str, ...]  # channel names summed in windows
    raw: dict = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> "Report":
        raw = json.loads(text)
        lead_model = raw.get("mode") == "model"
        rows = []
        for ch in raw["channels"]:
            fitted = ch.get("model_fit", {}).get("fitted", False) and ch.get("model_fit", {}).get("nnls_converged", True)
            rows += [_row(ch, r, lead_model and fitted) for r in ch.get("regions", [])]
        counted = tuple(c["name"] for c in counted_channels(raw["channels"]))
        return cls(backend=raw["backend"], mode=raw["mode"], rows=tuple(rows), counted=counted, raw=raw)

    def names(self) -> list[str]:
        """Window names, in the order of their first row (rows are sorted by energy, descending)."""
        return list(dict.fromkeys(r.name for r in self.rows))

    def window(self, name: str) -> Window:
        rows = tuple(r for r in self.rows if r.name == name)
        if not rows:
            raise KeyError(f"no window named {name!r} in this report; it has: {', '.join(self.names()) or 'none'}")
        counted = [r for r in rows if r.channel in self.counted] or list(rows)
        hws = [r.j_per_call_hw for r in counted]
        hw = None if any(h is None for h in hws) else math.sqrt(sum(h * h for h in hws))
        return Window(name=name, calls=counted[0].calls, time_s=counted[0].time_s,
                      energy_j=sum(r.energy_j for r in counted), j_per_call=sum(r.j_per_call for r in counted),
                      j_per_call_hw=hw, rows=rows)

    __getitem__ = window

    def __contains__(self, name: str) -> bool:
        return any(r.name == name for r in self.rows)

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per row (pandas.DataFrame(report.records()) is the table)."""
        out = []
        for r in self.rows:
            d = {k: getattr(r, k) for k in Row.__dataclass_fields__}
            d["flags"] = ",".join(r.flags)
            d["counted"] = r.channel in self.counted
            out.append(d)
        return out

    def to_pandas(self):
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Report.to_pandas needs pandas: pip install pandas (or use report.records())") from e
        return pandas.DataFrame(self.records())

    def table(self) -> str:
        """The connector's terminal table, from the same writer."""
        return _core().report_table(json.dumps(self.raw))

    def to_csv(self) -> str:
        return _core().report_csv(json.dumps(self.raw))

    def save(self, prefix: str) -> list[str]:
        """Writes <prefix>.json and <prefix>.csv (each written whole, then renamed); returns the paths."""
        core = _core()
        text = json.dumps(self.raw, indent=2) + "\n"
        core.write_file_atomic(prefix + ".json", text)
        core.write_file_atomic(prefix + ".csv", core.report_csv(text))
        return [prefix + ".json", prefix + ".csv"]


class WindowHandle:
    """A window measured by `measure`: a context manager and a decorator. `result` is its Window once the monitor
    that measured it has stopped, else None."""

    def __init__(self, name: str, monitor: "Monitor | None", options: dict):
        self.name = name
        self._monitor = monitor
        self._options = options
        self._owned: Monitor | None = None
        self._local = threading.local()  # the monitor each thread's open block records in
        self.result: Window | None = None

    def _target(self) -> "Monitor | None":
        return self._monitor if self._monitor is not None else Monitor._innermost()

    def __enter__(self) -> "WindowHandle":
        mon = self._target()
        if mon is None:  # nothing open: this block gets a monitor of its own
            self._owned = Monitor(**self._options)
            self._owned.start()
            mon = self._owned
        self._local.monitor = mon
        mon._begin_nested(self)
        return self

    def __exit__(self, *exc) -> None:
        mon = self._local.monitor
        mon._end_nested(self)
        if self._owned is not None and mon is self._owned:
            self._owned = None
            mon.stop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            mon = self._target() or _default_monitor(self._options)
            self._local.monitor = mon
            mon._begin_nested(self)
            try:
                return fn(*args, **kwargs)
            finally:
                mon._end_nested(self)

        return wrapped


class Monitor:
    """One run of the energy engine. Keyword settings (None: the environment's DOOLY_* value, else the default):
    source (POWER_SOURCE: nvml, variorum, rapl, replay), gpus (CUDA ordinals), period_ms, baseline_w (idle power to
    subtract; else measured), baseline_ms (measure idle this long at start), fit (the model mode), mode (which one
    leads), record (a recording for `dooly analyze`), trace (a Perfetto trace), replay_file, replay_realtime,
    sensor_window_ms, sensor_delay_ms; `settings` takes any other setting by its table name. A bad value raises
    ValueError naming the setting and what it accepts, before anything runs. `output`: a file prefix for the
    report's JSON and CSV at stop."""

    _stack: list["Monitor"] = []  # open monitors, innermost last
    _stack_lock = threading.Lock()

    _KEYWORDS = {"source": "POWER_SOURCE", "gpus": "GPUS", "period_ms": "PERIOD_MS", "mode": "MODE",
                 "record": "RECORD", "trace": "TRACE", "replay_file": "REPLAY_FILE",
                 "replay_realtime": "REPLAY_REALTIME", "sensor_window_ms": "SENSOR_WINDOW_MS",
                 "sensor_delay_ms": "SENSOR_DELAY_MS"}

    def __init__(self, source: str | None = None, *, gpus: list[int] | None = None, period_ms: float | None = None,
                 baseline_w: float | None = None, baseline_ms: float | None = None, fit: bool | None = None,
                 mode: str | None = None, record: str | None = None, trace: str | None = None,
                 replay_file: str | None = None, replay_realtime: bool | None = None,
                 sensor_window_ms: float | None = None, sensor_delay_ms: float | None = None,
                 settings: dict[str, Any] | None = None, output: str | None = None):
        given = dict(source=source, gpus=gpus, period_ms=period_ms, mode=mode, record=record, trace=trace,
                     replay_file=replay_file, replay_realtime=replay_realtime, sensor_window_ms=sensor_window_ms,
                     sensor_delay_ms=sensor_delay_ms)
        words = [f"{k}={_word(v)}" for k, v in (settings or {}).items()]
        words += [f"{self._KEYWORDS[k]}={_word(v)}" for k, v in given.items() if v is not None]
        ms = None if baseline_ms is None else int(round(baseline_ms))
        core = _core()
        try:
            self._meter = core.EnergyMeter(baseline_w, ms, fit, words)
        except core.InputError as e:  # name the keyword the caller used where it differs from the setting's name
            text = str(e)
            for k, setting in self._KEYWORDS.items():
                if k != setting.lower() and given.get(k) is not None:
                    text = text.replace(f"{setting.lower()}=", f"{k}=").replace(f"give {setting.lower()} ", f"give {k} ")
            raise ValueError(text) from e
        self.output = output
        self.report: Report | None = None
        self._lock = threading.Lock()
        self._open: dict[str, tuple[int, int]] = {}  # free windows open now: name -> (device, thread)
        self._handles: list[WindowHandle] = []  # measure() windows recorded here, resolved at stop
        self._started = False

    @property
    def backend(self) -> str:
        return self._meter.backend

    @property
    def channels(self) -> list[str]:
        return list(self._meter.channels)

    # -- run ---------------------------------------------------------------------------------------------------
    def start(self) -> "Monitor":
        if self._started:
            raise RuntimeError("this Monitor has already run; make a new one for another run")
        self._started = True
        self._meter.start()
        with Monitor._stack_lock:
            Monitor._stack.append(self)
        return self

    def stop(self) -> Report:
        """Stops the engine (waits out the sensor's lag, at most 0.2 s), attributes, and returns the report; every
        measure() handle that recorded here gets its result. Windows still open are reported as unmatched."""
        if self.report is not None:
            return self.report
        if not self._started:
            raise RuntimeError("stop() before start(): use `with Monitor() as m:` or call start() first")
        with Monitor._stack_lock:
            if self in Monitor._stack:
                Monitor._stack.remove(self)
        self.report = Report.from_json(self._meter.stop())
        for h in self._handles:
            if h.name in self.report:
                h.result = self.report.window(h.name)
        if self.output:
            self.report.save(self.output)
        return self.report

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @classmethod
    def _innermost(cls) -> "Monitor | None":
        with cls._stack_lock:
            return cls._stack[-1] if cls._stack else None

    # -- free windows (Zeus's shape) -----------------------------------------------------------------------------
    def begin_window(self, name: str, device: int = -1) -> None:
        """Opens a free window: windows of different names may overlap and end in any order. A name is open once at
        a time, and ends on the thread that began it (the engine buffers each thread's edges apart; an end from
        another thread raises). device: the CUDA ordinal the work runs on (-1: charged on every channel)."""
        self._check_running("begin_window")
        with self._lock:
            if name in self._open:
                raise ValueError(f"window {name!r} is already open; end it before beginning it again")
            self._open[name] = (device, threading.get_ident())
        self._meter.begin_free(name, device)

    def end_window(self, name: str) -> None:
        self._check_running("end_window")
        with self._lock:
            if name not in self._open:
                open_now = ", ".join(self._open) or "none"
                raise ValueError(f"window {name!r} is not open (open now: {open_now}); call begin_window first")
            device, thread = self._open[name]
            if thread != threading.get_ident():
                raise ValueError(f"window {name!r} began on another thread; end it on the thread that began it "
                                 "(or measure each thread's part as a window of its own)")
            del self._open[name]
        self._meter.end_free(name, device)

    # -- nested windows ----------------------------------------------------------------------------------------
    def measure(self, name: str) -> WindowHandle:
        """A nested window in this monitor: `with mon.measure("x"):` or `@mon.measure("x")`."""
        return WindowHandle(name, self, {})

    def _begin_nested(self, handle: WindowHandle) -> None:
        self._check_running("measure")
        with self._lock:
            if handle not in self._handles:
                self._handles.append(handle)
        self._meter.begin(handle.name, -1)

    def _end_nested(self, handle: WindowHandle) -> None:
        self._meter.end(handle.name, -1)

    def _check_running(self, what: str) -> None:
        if not self._started or self.report is not None:
            raise RuntimeError(f"{what}: this Monitor is not running (use `with Monitor() as m:` or m.start())")


def _word(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def measure(name: str, monitor: Monitor | None = None, **options) -> WindowHandle:
    """A nested window named `name`, as a context manager or a decorator. It records in `monitor`, else in the
    innermost open Monitor; with none open, a `with` block gets a Monitor of its own (made with `options`, the
    Monitor's keywords) and its result is final at the block's end, and a decorated function records in the
    process's default Monitor (started at its first call with `options`; report() stops it)."""
    return WindowHandle(name, monitor, options)


_default: Monitor | None = None
_default_lock = threading.Lock()
_atexit_registered = False


def _default_monitor(options: dict) -> Monitor:
    global _default, _atexit_registered
    with _default_lock:
        if _default is None:
            _default = Monitor(**options).start()
            if not _atexit_registered:
                atexit.register(_stop_default_at_exit)
                _atexit_registered = True
        return _default


def _stop_default_at_exit() -> None:
    """At exit, as the connector does: the default monitor's table, on stderr (stdout may be the program's data)."""
    rep = report()
    if rep is not None:
        print(rep.table(), file=sys.stderr)


def report() -> Report | None:
    """Stops the default monitor (the one decorated functions record in when no Monitor is open) and returns its
    report; None if nothing started it. A later decorated call starts a new one."""
    global _default
    with _default_lock:
        mon, _default = _default, None
    return None if mon is None else mon.stop()
