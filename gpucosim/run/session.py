"""One run of an app, inside the process that runs it (this one for the reference model,
the simulator's Python for the RTL).

`Session.run(dev, main)` binds the KMD to the device with the run's observers, runs the
app's `main()`, and on the way:
- keeps the last ioctls and writes a crash report on a GPU error, a job timeout or an
  exception in the app (always on: it costs one small record per ioctl);
- feeds the timeline when `--trace` was given (UMD calls, ioctls, KMD events);
- counts ioctls per request for the exit report (buffers left allocated, IB pools,
  fences), printed with `--stats` and whenever buffers leaked;
- tells the launcher how far the run is (cycles, ioctls, and what the app reports
  through `gpucosim.progress()`), for its progress line.

`RunOptions` travel from the launcher to the simulator's process as one JSON
environment variable.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from testbench.pipes import write_whole

from .stops import _ENDINGS, RunTimeout, Terminated, stop_seen, stopped_code


ENV = "GPUCOSIM_RUN"


def default_build_dir() -> Path:
    # (set but empty is unset: "" was the current folder, where crash reports then went)
    return Path(os.environ.get("GPUCOSIM_BUILD") or Path(__file__).resolve().parents[2] / "build")


class _AppArgv(list):
    """The app's sys.argv, which remembers whether the app looked past argv[0] (argparse
    names its program after argv[0] alone). Every way of reading a list counts, and taking
    an argument off it: `print(sys.argv)`, `sys.argv.copy()`, `sys.argv.pop(1)` and
    `sys.argv == [...]` were not seen, and an app that had read its arguments so ended
    with "reads no arguments", exit status 2 (_READS)."""

    read = False

    def __getitem__(self, i):
        if i != 0:
            self.read = True
        return super().__getitem__(i)

    def __radd__(self, other):  # (`[...] + sys.argv`: list's own __add__ reads it without a call of ours)
        self.read = True
        return NotImplemented


# list's methods that read its items or take them off (not append, extend, insert, which add)
_READS = ("__iter__", "__len__", "__contains__", "__repr__", "__reversed__", "__eq__", "__ne__", "__lt__",
          "__le__", "__gt__", "__ge__", "__add__", "__mul__", "__rmul__", "__iadd__", "__imul__", "__setitem__",
          "__delitem__", "copy", "pop", "index", "count", "remove", "clear", "sort", "reverse")


def _reading(name: str):
    method = getattr(list, name)

    def read(self, *args, **kwargs):
        self.read = True
        return method(self, *args, **kwargs)

    read.__name__ = read.__qualname__ = name
    return read


for _name in _READS:
    setattr(_AppArgv, _name, _reading(_name))


# A timeline this long is said before it is written (about 10 s of writing on this machine)
SLOW_TIMELINE_EVENTS = 100_000


def unknown_arguments(opts: "RunOptions") -> str:
    """The usage error of arguments gpucosim does not know, given to an app that reads none:
    before the run when the app's source shows it cannot (launch.run_app), else after it."""
    from ..checks import option_hint

    hint = option_hint(opts.args)
    return (f"neither gpucosim nor the app knows {' '.join(opts.args)}{': ' + hint if hint else ''} "
            f"({opts.shown(opts.app)} reads no arguments; {opts.prog} --help lists the options)")


@dataclass
class RunOptions:
    app: str
    backend: str = "verilator"
    args: list[str] = field(default_factory=list)  # the app's sys.argv[1:]
    trace: str | None = None  # Chrome trace JSON to write
    waves: str | None = None  # FST/VCD file (RTL only)
    log: str | None = None  # GPUCOSIM_LOG syntax
    stats: bool = False  # print the exit report even without leaks
    stats_json: str | None = None  # where the run's figures go (Session.figures)
    crash_dir: str | None = None
    kmd: dict[str, Any] = field(default_factory=dict)  # KmdParams for bind()
    dma: bool = True  # the reference model with its DMA engine, as the RTL has
    data_width: int = 64
    queues: bool = True  # the reference model with CP queue 1, as the RTL has
    status_file: str | None = None  # where the simulator's process reports progress
    timeout: float | None = None  # wall-clock seconds the app may run (--timeout)
    cwd: str = field(default_factory=os.getcwd)  # the user's, where paths are shown from
    prog: str = "gpucosim run"  # the command the user typed (`gpucosim sim`), for its errors
    relayed: dict[str, str] = field(default_factory=dict)  # a file written in the place of a stream: the stream

    def shown(self, path: str | Path) -> str:
        """A path as the user would type it: relative to where they ran gpucosim when it
        lies below it (the simulator runs elsewhere and gets absolute paths); a stream's
        name for the file the launcher relays to it (launch._relay)."""
        if str(path) in self.relayed:
            return self.relayed[str(path)]
        try:
            return str(Path(path).resolve().relative_to(Path(self.cwd).resolve()))
        except ValueError:
            return str(path)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "RunOptions":
        return cls(**json.loads(text))

    @classmethod
    def from_env(cls) -> "RunOptions":
        if ENV in os.environ:
            return cls.from_json(os.environ[ENV])
        # the launcher of earlier versions: GPUCOSIM_APP only
        return cls(app=os.environ["GPUCOSIM_APP"], backend=os.environ.get("GPUCOSIM_SIM", "verilator"))

    @property
    def crash_path(self) -> Path:
        return Path(self.crash_dir) if self.crash_dir else default_build_dir() / "crash"


# ------------------------------------------------------------------------------ progress

_current: "Session | None" = None


def progress(done: float, total: float | None = None, label: str = "") -> None:
    """Tell the launcher how far the app is (its progress bar): `progress(3, 10, "run 3")`.
    Does nothing outside `gpucosim run`."""
    s = _current
    if s is not None:
        s.app_progress = (float(done), None if total is None else float(total), str(label))
        s.status_tick(force=True)


class _Recorder:
    """The UMD API hook: notes the devices and queues an app creates (for the exit report)
    and hands the call to the tracer when there is one."""

    def __init__(self, tracer=None):
        self.tracer = tracer
        self.queues: list = []
        self.devices: list = []

    def __call__(self, name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        if self.tracer is not None:
            result = self.tracer.api(name, fn, args, kwargs)
        else:
            result = fn(*args, **kwargs)
        if name == "Device.queue":
            self.queues.append(result)
        elif name == "umd.open":
            self.devices.append(result)
        return result


class Session:
    def __init__(self, opts: RunOptions, *, probe: Callable[[], dict] | None = None):
        from ..trace.timeline import Timeline

        self.opts = opts
        self.probe = probe
        self.timeline = Timeline(opts.backend, app=opts.app) if opts.trace else None
        self.tracer = None
        self.kmd = None
        self.dev = None
        self.app_progress: tuple[float, float | None, str] | None = None
        self.ioctls = 0
        self.cycles = 0
        self.t0 = time.monotonic()
        self._last_status = 0.0
        self.status: dict = {}
        self.crash = None
        self.exit_text = ""
        self.leaks = 0
        self.app_wall: float | None = None  # seconds in the app's main(), for speed comparisons
        self.t_app = 0.0  # when main() started (perf_counter)
        self.figures_written = False
        self.finished = False  # (the timeline written)
        self.device_clock: DeviceClock | None = None
        self._report_from: tuple = ((), None)  # (the app's UMD recorder, the ioctl counts): Session.run sets them

    # ------------------------------------------------------------------ progress

    def status_tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_status < 0.2:
            return
        self._last_status = now
        if self.dev is not None:
            try:
                self.cycles = self.dev.now()
            except Exception:
                pass
        st = {"cycles": self.cycles, "ioctls": self.ioctls, "wall": now - self.t0}
        if self.app_progress is not None:
            st["done"], st["total"], st["label"] = self.app_progress
        self.status = st
        path = self.opts.status_file
        if path:
            write_whole(path, json.dumps(st))

    def _on_ioctl(self, rec) -> None:
        self.ioctls += 1
        self.status_tick()

    # ------------------------------------------------------------------ the run

    def run(self, dev, main: Callable[[], Any]) -> int:
        """Bind, run `main()`, report, unbind; the app's exit code."""
        global _current
        import kmd_model
        import umd.runtime as umd_rt
        import umd.submit as umd_submit
        from kmd_model import log as kmd_log
        from kmd_model.core.bind import claim as bind_claim
        from kmd_model.uapi import KmdError

        from ..crash import CrashReporter, IoctlStats, exit_report
        from ..trace.swtrace import Tracer

        opts = self.opts
        self.dev = dev
        self.device_clock = DeviceClock(dev)
        if opts.log:
            kmd_log.configure(opts.log)
        self.crash = crash = CrashReporter(opts.crash_path, opts.app, opts.backend, self.probe)
        crash.shown = opts.shown
        observers = [crash.observe]
        if self.timeline is not None:
            self.tracer = Tracer(self.timeline, dev.now)
            observers.append(self.tracer.observe)
        recorder = _Recorder(self.tracer)
        stats = IoctlStats()
        saved_argv = sys.argv
        _current = self
        code = 1
        try:
            try:
                self.kmd = kmd = kmd_model.bind(dev, observers=observers, **opts.kmd)
            except (TypeError, ValueError, KmdError) as e:
                print(f"gpucosim: cannot bind the driver: {e}", file=sys.stderr, flush=True)
                crash.report(f"driver bring-up failed: {e}", exc=e if isinstance(e, KmdError) else None)
                return 2
            crash.attach(kmd)
            bind_claim(f"gpucosim run --sim {opts.backend}")  # (the app's work runs on this device)
            crash.extra = lambda: exit_report(crash.kmd, recorder.queues, stats.by_request, at_exit=False,
                                              devices=recorder.devices, unloaded=crash.unloaded,
                                              loads=crash.loads)[0]
            kmd.trace_hooks += [stats, self._on_ioctl]
            if self.tracer is not None:
                self.tracer.attach(kmd)
            umd_rt.api_hook = recorder
            sys.argv = argv = _AppArgv([opts.app, *opts.args])
            self._report_from = (recorder, stats)
            self.t_app = t_app = time.perf_counter()
            stopped: BaseException | None = None
            raised = False  # (the app died of an exception: what it holds is no leak of its code)
            try:
                code = exit_code(main())
            except SystemExit as e:
                code = exit_code(e.code)
            except BaseException as e:
                if not app_failed(e):
                    if stopped_code(e) is None:
                        raise
                    code = stopped_code(e)  # (the figures' exit_code: 124, 130, 143)
                    stop_seen()
                    stopped = e  # (its exit report first, then it goes on up)
                else:
                    from .app import app_traceback  # (app.py imports this module)

                    print(app_traceback(e), end="", file=sys.stderr, flush=True)
                    prior = crash.report_of(e)
                    if prior is None:
                        crash.report(f"exception in the app: {described(e)}", exc=e)
                    else:  # (a GpuError whose failure has its report: a second one, after recovery, said less)
                        print(f"gpucosim: exception in the app: {type(e).__name__}, the GPU error above "
                              f"(its crash report: {opts.shown(prior)})", file=sys.stderr, flush=True)
                    code, raised = 1, True
            finally:
                self.app_wall = time.perf_counter() - t_app
                # flushes an async queue (umd/submit.py) still has queued, of a device the
                # app did not close, are submitted as a synchronous flush's would have been
                umd_submit.drain_all()
                umd_rt.api_hook = None
                sys.argv = saved_argv
            if stopped is not None:
                # what the run has, as far as it got: --stats asked for it (a stopped app's
                # buffers are no leaks: it never reached its cleanup)
                self.report(code, stopped=stopped)
                raise stopped
            if opts.args and not argv.read:
                # what gpucosim does not know goes to the app: one that never looks at its
                # arguments would let a mistyped option (--trce, --simm) pass unnoticed
                print(f"{opts.prog}: error: {unknown_arguments(opts)}", file=sys.stderr, flush=True)
                code = code or 2
            elif opts.args and code == 2:
                # (the app refused them in its own words, which know nothing of gpucosim's
                # options: `memcpy.py --trce x.json` said "unrecognized arguments: --trce x.json")
                from ..checks import option_hint

                if hint := option_hint(opts.args):
                    print(f"{opts.prog}: the app got what gpucosim does not know ({' '.join(opts.args)}): {hint}",
                          file=sys.stderr, flush=True)
            self.report(code, raised=raised)
            return code
        finally:
            if stopped_code(sys.exc_info()[1] or SystemExit()):  # (a stop before or after main())
                stop_seen()
                code = stopped_code(sys.exc_info()[1])  # (the figures': a stop in the bring-up said 1)
            _current = None
            self.status_tick(force=True)
            bind_claim(None)
            kmd_model.unbind()
            if opts.stats_json:
                self.write_figures(opts.stats_json, code)

    def report(self, code: int, stopped: BaseException | None = None, raised: bool = False) -> None:
        """The exit report: into the timeline, and to stderr with --stats, or whenever a run
        that ended by itself leaked. A `stopped` run's says how it was stopped, and counts
        what it still holds as allocated, not leaked; so does the report of an app that
        `raised` (its traceback is the error: its buffers, never freed because the exception
        skipped its cleanup, were reported as LEAK lines after it, a second bug that is not)."""
        from ..crash import exit_report

        recorder, stats = self._report_from
        self.kmd = kmd = self.crash.kmd  # the app may have reloaded the driver (kmd_model.rebind)
        at_exit = stopped is None and not raised
        self.exit_text, self.leaks = exit_report(kmd, recorder.queues, stats.by_request, at_exit=at_exit,
                                                 devices=recorder.devices, unloaded=self.crash.unloaded,
                                                 loads=self.crash.loads)
        if self.timeline is not None:
            self.timeline.metadata["exit_report"] = self.exit_text
        if self.opts.stats or (at_exit and (self.leaks or any(not d.closed for d in recorder.devices))):
            dc = self.device_clock
            by = ("--timeout" if isinstance(stopped, RunTimeout) else
                  signal.Signals(stopped.signum).name if isinstance(stopped, Terminated) else "Ctrl-C")
            how = ("" if at_exit else f"; the app raised (status {code}): what it held then" if raised else
                   f"; stopped by {by} (status {code}): what ran until then")
            print(f"gpucosim: exit report ({self.opts.backend}, {self.dev.now()} cycles; {self.app_wall * 1e3:.1f} ms "
                  f"in the app, {dc.seconds * 1e3:.1f} ms in {dc.calls} device call{'s' * (dc.calls != 1)}{how})\n{self.exit_text}",
                  file=sys.stderr, flush=True)

    def figures(self, code: int | None = None) -> dict:
        """What `--stats-json` writes. `app_s` is the wall time of the app's main();
        `device_s` the part of the whole run (driver bring-up included) spent inside the
        device's methods: MMIO, waits and delays, i.e. what the backend costs. The driver and
        the app are the same code on every backend, so `device_s` is what to compare when
        asking how much faster one backend is than another (`make bench`, model_speedup);
        `device_cpu_s` is the same calls' CPU time, which a loaded machine does not inflate."""
        dc = self.device_clock
        return {"app": self.opts.app, "backend": self.opts.backend, "exit_code": code,
                "cycles": self.cycles, "ioctls": self.ioctls,
                "app_s": self.app_wall, "device_s": dc.seconds if dc else None,
                "device_cpu_s": dc.cpu_seconds if dc else None, "device_calls": dc.calls if dc else 0}

    def write_figures(self, path: str, code: int | None) -> None:
        self.figures_written = True
        p = Path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(self.figures(code), indent=1) + "\n")
        except OSError as e:  # the run itself is done: say so, keep its exit code
            print(f"gpucosim: cannot write the run's figures to {self.opts.shown(p)}: {e.strerror or e}",
                  file=sys.stderr, flush=True)

    def finish(self) -> Path | None:
        """Write the timeline (after the hardware monitors have stopped), once."""
        if self.timeline is None or not self.opts.trace or self.finished:
            return None
        self.finished = True
        if len(self.timeline) >= SLOW_TIMELINE_EVENTS:
            # (a million events take some 2 minutes: after a long run's ^C and its exit
            # report nothing was said meanwhile, and a second ^C, to end what looked hung,
            # lost the timeline)
            print(f"gpucosim: writing the timeline to {self.opts.shown(self.opts.trace)} ({len(self.timeline)} "
                  "events: this takes a while)", file=sys.stderr, flush=True)
        try:
            path = self.timeline.write(self.opts.trace)
        except OSError as e:  # (a full disk, /dev/full: the run itself is done, as for the figures)
            print(f"gpucosim: cannot write the timeline to {self.opts.shown(self.opts.trace)}: {e.strerror or e}",
                  file=sys.stderr, flush=True)
            return None
        tl = self.timeline
        # (it said "(N events)" of the slices and instants alone: the file holds the
        # metadata events naming the processes and tracks too)
        dropped = (f"; the {tl.dropped} after them dropped: a timeline keeps the first {len(tl)}"
                   if tl.dropped else "")
        print(f"gpucosim: timeline written to {self.opts.shown(path)} ({len(tl) + tl.metadata_events} events: "
              f"{len(tl)} slices and instants, {tl.metadata_events} naming the processes and tracks{dropped}): "
              f"open it at https://ui.perfetto.dev", file=sys.stderr, flush=True)
        return path


def app_failed(e: BaseException) -> bool:
    """Is `e`, out of the app's code, the app's failure (a crash report's)? Any exception of
    its own is, a BaseException subclass too (one left the launcher as a traceback through
    its frames); not what ends a run (SystemExit, Ctrl-C) or closes a generator or greenlet
    (the simulator's bridge ends an app's greenlet with GreenletExit)."""
    return isinstance(e, Exception) or not isinstance(e, _ENDINGS)


def described(e: BaseException) -> str:
    """`Type: message`, as Python's traceback prints an exception, whose str() may raise (the
    app's own class): then traceback's own words for it."""
    try:
        text = str(e)
    except Exception:
        text = "<exception str() failed>"
    return f"{type(e).__name__}: {text}"


def exit_code(value: Any) -> int:
    """What main()'s return value (or a SystemExit's code) means as an exit status, as
    `sys.exit(value)` has it: None is 0, an int is itself, anything else is printed to stderr
    and is 1 (`return "no GPU"` is a message, not a crash of the launcher). An int no exit
    status can hold is 1, said so: the process's status is the low 8 bits, and `return 256`
    (a count of failures, say) was status 0, success, while --stats-json said 256."""
    if value is None:
        return 0
    if isinstance(value, int):
        if not 0 <= value <= 255:
            print(f"gpucosim: the app's exit status {int(value)} is not one a process can have (0 to 255): "
                  "status 1", file=sys.stderr, flush=True)
            return 1
        return int(value)
    print(value, file=sys.stderr, flush=True)
    return 1


class DeviceClock:
    """Wall time spent inside the device's methods (MMIO, waits, delays): the part of a run
    the backend pays for, as opposed to the driver and the app, which run the same code on
    every backend. Wraps the methods of this one device object. `cpu_seconds` is the
    process's CPU time in the same calls: the simulator runs in this process, so it counts
    the simulation too, and unlike the wall time it does not grow when other jobs share
    the machine's cores."""

    METHODS = ("mmio_read32", "mmio_write32", "wait_irq", "delay", "read_many", "mmio_write_bytes")

    def __init__(self, dev):
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.calls = 0
        for name in self.METHODS:
            fn = getattr(dev, name, None)
            if fn is not None:
                setattr(dev, name, self._timed(fn))

    def _timed(self, fn):
        clock, cpu = time.perf_counter, time.process_time

        def timed(*args, **kwargs):
            t0, c0 = clock(), cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += clock() - t0
                self.cpu_seconds += cpu() - c0
                self.calls += 1

        return timed
