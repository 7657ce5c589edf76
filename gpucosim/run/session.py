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

import inspect
import json
import keyword
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from greenlet import GreenletExit

from .stops import TERMINATING, Terminated, stop_words, terminate  # noqa: F401  (terminate: for the launchers)


class RunTimeout(BaseException):
    """`--timeout` ran out: raised in the app's code, wherever it is, as a Ctrl-C's
    KeyboardInterrupt is (a BaseException, so that an app's `except Exception` does not
    swallow it either)."""

    def __init__(self, seconds: float):
        super().__init__(f"no end within {seconds:g} s")
        self.seconds = seconds


# what ends a run, or closes a generator or the app's greenlet: never the app's failure
_ENDINGS = (SystemExit, KeyboardInterrupt, GeneratorExit, GreenletExit, RunTimeout)
# the exit status of a run stopped from outside: 124 as GNU timeout(1) has it, 130 as a shell
# reports SIGINT (and 143, 129 for SIGTERM, SIGHUP)
TIMEOUT_EXIT, INTERRUPT_EXIT = 124, 130


def stopped_code(e: BaseException) -> int | None:
    """The exit status of a run that `e` stopped (None: `e` stops no run)."""
    if isinstance(e, Terminated):
        return 128 + e.signum
    return TIMEOUT_EXIT if isinstance(e, RunTimeout) else INTERRUPT_EXIT if isinstance(e, KeyboardInterrupt) else None


def timeout_message(opts: "RunOptions", cycles: int) -> str:
    return f"gpucosim: {opts.shown(opts.app)} did not finish within {opts.timeout:g} s (at cycle {cycles}): stopped"


RETRY_S = 0.02  # how soon a stop that could not be raised where it came is tried again
REFIRE_S = 2.0  # how soon a stop the app caught is raised again
_seen: Callable[[], None] | None = None  # tells stop_on_signals the run has its stop


def stop_seen() -> None:
    """The run has the stop in hand (Session.run, the launchers): no more of them."""
    if _seen is not None:
        _seen()


def _not_now(frame) -> bool:
    """Whether a stop raised at `frame` (where the signal came) would be lost or would break
    the driver: inside a finalizer (`__del__`: Python prints the exception and drops it),
    or inside an ioctl (the KMD's lock held: the kernel too delivers a signal on the way
    back to user space; raised mid-ioctl it left the driver's state half-changed, and the
    app failed in its cleanup, exit status 1)."""
    f = frame
    while f is not None:
        if f.f_code.co_name == "__del__":
            return True
        f = f.f_back
    s = _current
    lock = getattr(getattr(getattr(s, "kmd", None), "lock", None), "_lock", None)
    try:
        return bool(lock is not None and lock._is_owned())
    except AttributeError:
        return False


def hard_stop(e: BaseException, result: Callable[[int], None] | None = None) -> None:
    """End the process from the signal handler: an app that catches every stop. What the
    run has is written first (figures, timeline; `result` passes the exit status on: the
    simulator's launcher reads it), then its line."""
    code = stopped_code(e) or 1
    s = _current
    if s is not None:
        try:
            s.status_tick(force=True)
            if s._report_from[1] is not None:  # (the app's main() had started)
                if s.app_wall is None:
                    s.app_wall = time.perf_counter() - s.t_app
                s.report(code, stopped=e)
            if s.opts.stats_json:
                s.write_figures(s.opts.stats_json, code)
            s.finish()
        except Exception as err:  # (the exit is what matters now)
            print(f"gpucosim: the run's outputs could not all be written: {described(err)}", file=sys.stderr)
    if result is not None:
        result(code)
    if isinstance(e, RunTimeout) and s is not None:
        print(timeout_message(s.opts, s.cycles) + " (the app caught every stop: its process ended)",
              file=sys.stderr, flush=True)
    else:
        print(f"gpucosim: {stop_words(e)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)


def stop_on_signals(timeout: float | None, throw: Callable[[BaseException], None], *,
                    sigint: bool = False, result: Callable[[int], None] | None = None) -> Callable[[], None]:
    """Arm `timeout` (wall-clock seconds; SIGALRM) and, with `sigint`, take over Ctrl-C:
    the first of them calls `throw(RunTimeout | KeyboardInterrupt)` in the signal handler
    (which raises it in the app's code, or has it raised there at its next chance: the
    simulator's process). Later signals do nothing: a terminal's ^C reaches the simulator
    both from the terminal and from the launcher that forwards it. Returns `disarm`, which
    stops the clock and, with `sigint`, ignores ^C from then on: a late one (the forwarded
    copy) ended the simulator's teardown with a KeyboardInterrupt in cocotb, or, once
    Python had finalized and put SIGINT back to its default, killed it (status -2)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # (signals reach the main thread only: run_app called from another has neither)
    global _seen
    stop: list[BaseException] = []  # the stop, once it came
    done: list[bool] = []  # the run has seen it, or is over

    def fire(e: BaseException | None, frame) -> None:
        """`e`: a ^C's KeyboardInterrupt, a held stop, or None: the clock's."""
        if done or (stop and isinstance(e, KeyboardInterrupt)):  # (the forwarded ^C's copy)
            return
        if stop:  # raised before and not seen: the app caught it (`except BaseException`)
            first = stop[0]
            e = (RunTimeout(timeout) if isinstance(first, RunTimeout) else
                 Terminated(first.signum) if isinstance(first, Terminated) else KeyboardInterrupt())
            if len(stop) > 1:  # twice: it catches every one, so no raise can end it
                hard_stop(e, result)
            stop.append(e)
        elif e is None:
            e = RunTimeout(timeout)
        if _not_now(frame):  # tried again shortly (SIGALRM), the stop held meanwhile
            held[:] = [e]
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            return
        if not stop:
            stop.append(e)
        signal.setitimer(signal.ITIMER_REAL, REFIRE_S)  # again, until the run sees it
        throw(e)

    held: list[BaseException] = []

    def seen() -> None:
        done.append(True)
        signal.setitimer(signal.ITIMER_REAL, 0)

    _seen = seen
    old = signal.signal(signal.SIGALRM, lambda _, frame: fire(held.pop() if held else None, frame))

    def disarm() -> None:
        global _seen, _disarm
        seen()
        _seen = _disarm = None
        signal.signal(signal.SIGALRM, old)
        for signum, handler in old_term.items():  # (in the simulator, a second one is the launcher's to act on)
            signal.signal(signum, signal.SIG_IGN if sigint else handler)
        if sigint:  # (the launcher kills the simulator on a second ^C)
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    global _disarm
    _disarm = disarm  # (before the clock starts: a stop may come before this returns)
    old_term = {signum: signal.getsignal(signum) for signum in TERMINATING}
    for signum in TERMINATING:  # (a stop as ^C, held where ^C is: umd/signals.py)
        signal.signal(signum, lambda num, frame: fire(Terminated(num), frame))
    if sigint:
        signal.signal(signal.SIGINT, lambda _, frame: fire(KeyboardInterrupt(), frame))
        # (a system call the simulator's C++ makes goes on, not EINTR, when a signal arrives)
        signal.siginterrupt(signal.SIGINT, False)
        signal.siginterrupt(signal.SIGALRM, False)
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    return disarm


_disarm: Callable[[], None] | None = None  # what stop_on_signals armed last


def disarm_stops() -> None:
    """Undo stop_on_signals, whether or not it returned: a --timeout shorter than its own
    setup (1e-6 s) raised the stop inside it, before the caller had its `disarm` (a
    traceback, and the clock left to fire again during the run's outputs)."""
    if _disarm is not None:
        _disarm()


ENV = "GPUCOSIM_RUN"


def default_build_dir() -> Path:
    # (set but empty is unset: "" was the current folder, where crash reports then went)
    return Path(os.environ.get("GPUCOSIM_BUILD") or Path(__file__).resolve().parents[2] / "build")


class _AppArgv(list):
    """The app's sys.argv, which remembers whether the app looked past argv[0] (argparse
    names its program after argv[0] alone)."""

    read = False

    def __getitem__(self, i):
        if i != 0:
            self.read = True
        return super().__getitem__(i)

    def __iter__(self):
        self.read = True
        return super().__iter__()

    def __len__(self):
        self.read = True
        return super().__len__()

    def __contains__(self, x):
        self.read = True
        return super().__contains__(x)


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

    def shown(self, path: str | Path) -> str:
        """A path as the user would type it: relative to where they ran gpucosim when it
        lies below it (the simulator runs elsewhere and gets absolute paths)."""
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
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(st, f)
            os.replace(tmp, path)

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
            crash.extra = lambda: exit_report(crash.kmd, recorder.queues, stats.by_request, at_exit=False,
                                              devices=recorder.devices)[0]
            kmd.trace_hooks += [stats, self._on_ioctl]
            if self.tracer is not None:
                self.tracer.attach(kmd)
            umd_rt.api_hook = recorder
            sys.argv = argv = _AppArgv([opts.app, *opts.args])
            self._report_from = (recorder, stats)
            self.t_app = t_app = time.perf_counter()
            stopped: BaseException | None = None
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
                    traceback.print_exc()
                    sys.stderr.flush()
                    crash.report(f"exception in the app: {described(e)}", exc=e)
                    code = 1
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
                print(f"{opts.prog}: error: neither gpucosim nor the app knows {' '.join(opts.args)} "
                      f"({opts.shown(opts.app)} reads no arguments; {opts.prog} --help lists the options)",
                      file=sys.stderr, flush=True)
                code = code or 2
            self.report(code)
            return code
        finally:
            if stopped_code(sys.exc_info()[1] or SystemExit()):  # (a stop before or after main())
                stop_seen()
                code = stopped_code(sys.exc_info()[1])  # (the figures': a stop in the bring-up said 1)
            _current = None
            self.status_tick(force=True)
            kmd_model.unbind()
            if opts.stats_json:
                self.write_figures(opts.stats_json, code)

    def report(self, code: int, stopped: BaseException | None = None) -> None:
        """The exit report: into the timeline, and to stderr with --stats, or whenever a run
        that ended by itself leaked. A `stopped` run's says how it was stopped, and counts
        what it still holds as allocated, not leaked."""
        from ..crash import exit_report

        recorder, stats = self._report_from
        self.kmd = kmd = self.crash.kmd  # the app may have reloaded the driver (kmd_model.rebind)
        at_exit = stopped is None
        self.exit_text, self.leaks = exit_report(kmd, recorder.queues, stats.by_request, at_exit=at_exit,
                                                 devices=recorder.devices)
        if self.timeline is not None:
            self.timeline.metadata["exit_report"] = self.exit_text
        if self.opts.stats or (at_exit and (self.leaks or any(not d.closed for d in recorder.devices))):
            dc = self.device_clock
            by = ("--timeout" if isinstance(stopped, RunTimeout) else
                  signal.Signals(stopped.signum).name if isinstance(stopped, Terminated) else "Ctrl-C")
            how = "" if at_exit else f"; stopped by {by} (status {code}): what ran until then"
            print(f"gpucosim: exit report ({self.opts.backend}, {self.dev.now()} cycles; {self.app_wall * 1e3:.1f} ms "
                  f"in the app, {dc.seconds * 1e3:.1f} ms in {dc.calls} device calls{how})\n{self.exit_text}",
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
            print(f"gpucosim: cannot write the run's figures to {p}: {e.strerror or e}", file=sys.stderr, flush=True)

    def finish(self) -> Path | None:
        """Write the timeline (after the hardware monitors have stopped), once."""
        if self.timeline is None or not self.opts.trace or self.finished:
            return None
        self.finished = True
        try:
            path = self.timeline.write(self.opts.trace)
        except OSError as e:  # (a full disk, /dev/full: the run itself is done, as for the figures)
            print(f"gpucosim: cannot write the timeline to {self.opts.shown(self.opts.trace)}: {e.strerror or e}",
                  file=sys.stderr, flush=True)
            return None
        print(f"gpucosim: timeline written to {self.opts.shown(path)} ({len(self.timeline)} events): "
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
    and is 1 (`return "no GPU"` is a message, not a crash of the launcher)."""
    if value is None:
        return 0
    if isinstance(value, int):
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


def apply_app_log(main: Callable[[], Any], opts: RunOptions) -> None:
    """An app may name the trace it is meant to be read with (`GPUCOSIM_LOG = "..."` at
    module level, as examples/demo.py does): the launcher applies it before the app starts,
    so what watches the hardware (`cp=info`) is on from the first cycle. `--log` and
    $GPUCOSIM_LOG win over it."""
    from kmd_model import log

    if opts.log or os.environ.get(log.ENV):
        return
    spec = getattr(sys.modules.get(getattr(main, "__module__", ""), None), "GPUCOSIM_LOG", None)
    if isinstance(spec, str) and spec:
        log.configure(spec, stream=sys.stdout)


class AppNotFound(LookupError):
    """The app a target names is not there (no file, no module, no such function), or is no
    app gpucosim can run (an async main()): the user's mistake, told in one line. An error
    raised by the app's own code is not this."""


def find_app(target: str) -> None:
    """Check that `target` names an app without running any of it (a module's parent
    packages are imported, as Python's own lookup does): AppNotFound says what is wrong."""
    import importlib.util

    if target.endswith(".py"):
        if not _is_file(target):
            raise AppNotFound(f"no app at {target}")
        return
    name, colon, func = target.partition(":")
    if not name or "/" in name or os.sep in name or _is_file(name):
        raise AppNotFound(f"{target!r} is not an app: give APP.py, a module (examples.demo) or module:function")
    # the target's form before any import (`examples.demo:` ran main(), `:1x` imported the
    # module and then found no function named so)
    if not all(part.isidentifier() for part in name.split(".")):
        raise AppNotFound(f"{target!r} is not an app: {name!r} is not a module name (dotted Python names, "
                          "as examples.demo)")
    if colon and not func:
        raise AppNotFound(f"{target!r} names no function after the colon: give module:function, or the module "
                          "alone for its main()")
    if colon and not (func.isidentifier() and not keyword.iskeyword(func)):
        raise AppNotFound(f"{target!r} is not an app: {func!r} is not a function name (give module:function, "
                          "one colon, a Python name after it)")
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, OSError):  # a parent package that is missing, a name like "a..b", or
        found = False  # one too long for a file name (ENAMETOOLONG from the path finder's stat)
    if not found:
        raise AppNotFound(f"no module named {name!r} (APP is APP.py, a module or module:function)")


def _is_file(path: str) -> bool:
    """Path.is_file, False for a name the system refuses (too long: pathlib raised)."""
    try:
        return Path(path).is_file()
    except OSError:
        return False


def load_main(target: str) -> Callable[[], Any]:
    """`pkg.module` or `pkg.module:function` or a path to a .py file -> its main function.
    AppNotFound when the target is not there; whatever the app's own code raises otherwise."""
    import importlib
    import importlib.util

    find_app(target)
    if target.endswith(".py"):
        path = Path(target)
        spec = importlib.util.spec_from_file_location("gpucosim_app", path)
        if spec is None or spec.loader is None:
            raise AppNotFound(f"cannot load app {target!r}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["gpucosim_app"] = mod
        d = str(path.resolve().parent)
        if d not in sys.path:
            sys.path.insert(0, d)  # an app may import modules beside it
        spec.loader.exec_module(mod)
        func = "main"
    else:
        name, _, func = target.partition(":")
        mod = importlib.import_module(name)
        func = func or "main"
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise AppNotFound(f"app {target!r} has no callable {func}()")
    try:  # (main(x) was a TypeError from the call, a crash report of gpucosim's making)
        inspect.signature(fn).bind()
    except TypeError:
        raise AppNotFound(f"its {func}{inspect.signature(fn)} takes arguments: gpucosim calls {func}() with none "
                          "(the app's arguments are in sys.argv)") from None
    except ValueError:
        pass  # (no signature to read: a builtin; the call says)
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):  # (its coroutine was the exit status)
        raise AppNotFound(f"its {func}() is async (a coroutine function): gpucosim calls {func}() and does not "
                          f"await it; make it a plain def")
    return fn

def report_load_error(target: str, e: BaseException) -> None:
    """One line for an app that is not there; the traceback first when the app's own code
    raised while it was imported (its bug, and where it is)."""
    if isinstance(e, AppNotFound):
        print(f"gpucosim: cannot load app {target!r}: {e}", file=sys.stderr, flush=True)
        return
    # the launcher's frames and importlib's are not the app's bug: the traceback starts at the
    # app's own code (a SyntaxError has none: its file, line and caret say where)
    here = str(Path(__file__).resolve().parents[1])  # the gpucosim package, not only run/
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename.startswith(("<frozen", here))):
        tb = tb.tb_next
    lines = traceback.format_exception(type(e), e, tb) if tb is not None else traceback.format_exception_only(type(e), e)
    print("".join(lines), end="", file=sys.stderr)
    print(f"gpucosim: cannot load app {target!r}: {described(e)}", file=sys.stderr, flush=True)
