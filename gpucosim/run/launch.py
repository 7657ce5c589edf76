"""Run an app on the backend one flag picks: the reference model in this process, or the
RTL under cocotb (Verilator or Icarus) in the simulator's process.

    code = run_app(RunOptions("examples/memcpy.py", backend="model", dma=True, trace="t.json"))

For the RTL: the design is built once per configuration (cached, a waves build apart),
then the simulator runs `gpucosim.run.app_runner`, which recreates the `Session` from the
options in $GPUCOSIM_RUN. The simulator's log is copied to stdout as it grows, minus
the simulator's own chatter, so the app's output reads as its own; the app's exit code
comes back through a file.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from testbench.simnames import BACKENDS, unknown_simulator

from .app import AppNotFound, apply_app_log, find_app, load_main, reads_no_arguments, report_load_error
from .console import Console, file_status
from .console import enabled as console_enabled
from .outputs import relay, to_relay
from .session import RunOptions, Session, app_failed, default_build_dir, unknown_arguments
from .stops import (INTERRUPT_EXIT, TIMEOUT_EXIT, RunTimeout, Terminated, disarm_stops, hard_stop, stop_grace,
                    stop_on_signals, stop_words, stopped_code, timeout_message)

# Lines of the simulator's log that are not the app's
SIM_NOISE = ("Verilog $finish", "VPI: ", "Simulation Report", "cocotb.regression", "** TEST", "*****",
             "** TESTS=", "gpucosim.run.app_runner.app", "Running on ", "Running tests", "Seeding Python",
             "Initialized cocotb", "- :0: ", "cocotb.regression",
             # Icarus with waves: its FST writer says hello, cocotb finds no vpiInstance to list
             "FST info: dumpfile", "vpi_iterate returned NULL")


class LaunchError(RuntimeError):
    """Something the user can fix: the message says what (exit code 2)."""


def check_app(target: str) -> None:
    """Before any backend starts (a simulator build takes a while): the app is there."""
    if not target.endswith(".py") and (not target or target.startswith("-")):
        raise LaunchError(f"{target!r} is not an app: give a .py file, a module or module:function")
    try:
        find_app(target)
    except AppNotFound as e:
        raise LaunchError(str(e)) from None


def _build_times() -> Path:
    return default_build_dir() / "sim" / "build-times.json"


def _estimate(key: str) -> float | None:
    try:
        return json.loads(_build_times().read_text()).get(key)
    except (OSError, ValueError):
        return None


def _record(key: str, seconds: float) -> None:
    p = _build_times()
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        data = {}
    data[key] = round(seconds, 1)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data))


def first_build_words(backend: str, cores: int | None = None, load: float | None = None) -> str:
    """What a first build costs, with nothing measured here yet. A Verilator build is some two
    minutes of C++ compiling (2 min 14 s of CPU for gpu-dw64): its wall time is that spread on
    the cores there are, and those the machine's other work leaves (it said "1-3 minutes" and
    took 5 min 18 s on a shared 2-core machine). `cores`, `load`: this machine's, by default."""
    if backend != "verilator":
        return "under a minute"
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = None
    busy = f", load {load:.1f}" if load is not None else ""
    return (f"about 2 minutes of CPU time; the wait depends on the cores free: {cores} core{'s' if cores != 1 else ''} "
            f"here{busy} (a shared 2-core machine took 5 minutes)")


def run_app(opts: RunOptions) -> int:
    """Run `opts.app`; returns its exit code (2: it could not be started)."""
    if opts.backend not in BACKENDS:
        raise LaunchError(unknown_simulator(opts.backend, BACKENDS))
    check_app(opts.app)
    if opts.args and reads_no_arguments(opts.app):
        # (found after the run, the whole run first: minutes on the RTL for a mistyped option)
        raise LaunchError(unknown_arguments(opts))
    # the outputs go where the user asked, from where they ran gpucosim: the app may change
    # directory before they are written (and the simulator runs elsewhere)
    for attr in ("trace", "waves", "crash_dir", "stats_json"):
        v = getattr(opts, attr)
        if v:
            # (absolute, not resolved: /dev/stdout resolved to /proc/PID/fd/pipe:[N], a name no
            # file has, and the figures "could not be written")
            setattr(opts, attr, os.path.abspath(v))
    if opts.log:
        os.environ["GPUCOSIM_LOG"] = opts.log  # apps that set up logging themselves defer to it
    to_relay(opts)
    try:
        if opts.backend == "model":
            return _run_model(opts)
        return _run_rtl(opts)
    finally:
        relay(opts)


# ------------------------------------------------------------------------------ reference model

def _model_probe(dev) -> dict:
    """The reference model's CP position in queue 0 (its IB frames), for crash reports. The
    level of the packet in hand is queue 0's when queue 1 ran the last packet: its IB depth
    (the last packet's level was queue 1's: "RING" for a queue-0 timeout in IB1)."""
    frames = getattr(dev, "_frames", [])
    q1 = getattr(dev, "_hq1", None)
    last_was_q0 = q1 is None or not getattr(q1, "last", 0)
    return {"level": getattr(dev, "_cur_level", len(frames)) if last_was_q0 else len(frames),
            "ibs": [{"level": i + 1, "base": b, "size_dw": s, "pos_dw": p} for i, (b, s, p) in enumerate(frames)],
            "header_addr": None, "queue": 0}


def _run_model(opts: RunOptions) -> int:
    from kmd_model.log import get_logger
    from testbench.refmodel import RefModel

    from ..trace.swtrace import model_cp_hook

    before = set(threading.enumerate())  # (the app's threads: from its import on)
    # --timeout counts from the app's import on (an app may spin there too); Ctrl-C is
    # Python's own KeyboardInterrupt here
    session, timed_out = None, False
    interrupted: KeyboardInterrupt | None = None
    watchdog = None
    try:
        stop_on_signals(opts.timeout, _raise)
        if opts.timeout:
            # (an app that takes SIGALRM for itself, cancels the clock or sits in C: ended all the
            # same, as the simulator is killed on the RTL)
            grace = stop_grace()
            watchdog = threading.Timer(opts.timeout + grace, hard_stop, (RunTimeout(opts.timeout),),
                                       {"why": f"the app did not stop within {grace:g} s more", "opts": opts})
            watchdog.daemon = True
            watchdog.start()
        main = _load(opts.app)
        if main is None:
            return 2
        apply_app_log(main, opts)  # before the CP hook below looks at `cp`
        if opts.waves:
            print("gpucosim: --waves needs a simulator (--sim verilator or icarus); the model has no waveform",
                  file=sys.stderr)
        session = Session(opts)
        dev = RefModel(dma=opts.dma, data_width=opts.data_width, queues=opts.queues)
        session.probe = lambda: _model_probe(dev)
        hooks = []
        if session.timeline is not None:
            hooks.append(model_cp_hook(session.timeline, dev.now))
        cp_log, sdma_log = get_logger("cp"), get_logger("sdma")
        if cp_log.isEnabledFor(20) or sdma_log.isEnabledFor(20):
            # the copy engine's packets ("SDMA RING+...") are the sdma module's, the CP's queues' the cp module's
            hooks.append(lambda line: (sdma_log if line.startswith("SDMA ") else cp_log).info("%s", line))
        if hooks:
            dev.trace = hooks[0] if len(hooks) == 1 else (lambda line: [h(line) for h in hooks])
        with Console(f"model: {Path(opts.app).stem}", status=lambda: session.status, guard_stdout=True):
            code = session.run(dev, main)
    except RunTimeout:
        timed_out = True
    except KeyboardInterrupt as e:  # (Ctrl-C, SIGTERM: cli.main says so, after the app's leftovers below)
        interrupted = e
    finally:
        if watchdog is not None:
            watchdog.cancel()
        disarm_stops()  # (not while the timeline is written)
        if session is None and timed_out:  # (stopped as the app was imported: an empty timeline, still)
            session = Session(opts)
        if session is not None:
            session.finish()  # (the timeline of what ran, a Ctrl-C's run too, as on the RTL)
    if timed_out and opts.stats_json and not (session and session.figures_written):
        # (stopped before the app's run began, as it was imported or the model built: the
        # figures all the same, as the timeline is)
        (session or Session(opts)).write_figures(opts.stats_json, TIMEOUT_EXIT)
    if interrupted is not None:
        _leave_the_app(before, opts, stopped_code(interrupted), f"gpucosim: {stop_words(interrupted)}")
        raise interrupted
    if timed_out:  # (last, after the timeline's line, as "gpucosim: interrupted" is)
        _leave_the_app(before, opts, TIMEOUT_EXIT, timeout_message(opts, session.cycles if session else 0))
        print(timeout_message(opts, session.cycles if session else 0), file=sys.stderr, flush=True)
        return TIMEOUT_EXIT
    _wait_for_app_threads(before)
    return code


def _state_names(opts: RunOptions) -> None:
    """The CP's and the copy engine's state names, which the timeline's and the `cp` log's
    monitors read, cached beside the design's Verilog as part of the build: made in the
    simulator's process, their first 5 s of Amaranth were counted in --timeout, which
    stopped the app before it ran ("at cycle 0") on the first --trace run of a design."""
    from testbench import sim

    from ..trace.hwtrace import fsm_states

    for block in ("cp", "sdma"):
        try:
            fsm_states(opts.data_width, sim.BUILD / "rtl", block)
        except RuntimeError:  # (a design without that engine: its monitor is not made either)
            pass


def _leave_the_app(before: set, opts: RunOptions, code: int, line: str) -> None:
    """After a stop, what the app started is not waited for: its processes (multiprocessing's)
    are terminated, and with threads of its own still running the process ends here, its
    outputs relayed and its last line said (the interpreter waited for them at exit: the
    stop's line, then a hang until killed)."""
    mp = sys.modules.get("multiprocessing")
    kids = mp.active_children() if mp is not None else []
    for k in kids:
        k.terminate()
    for k in kids:
        k.join(1.0)
        if k.is_alive():
            k.kill()
    if kids:
        print(f"gpucosim: the app's {len(kids)} process{'es' if len(kids) > 1 else ''} of its own ended with it",
              file=sys.stderr, flush=True)
    if any(t not in before and t.is_alive() and not t.daemon for t in threading.enumerate()):
        relay(opts)
        print(line, file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)


def _raise(e: BaseException) -> None:
    raise e


def _wait_for_app_threads(before: set) -> None:
    """Threads the app started and left running when its main() returned: the interpreter
    waits for them at exit, which was a hang without a word, and its Ctrl-C a traceback
    ("Exception ignored in threading") and status 0. Named here, and Ctrl-C ends them."""
    left = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    if not left:
        return
    n = len(left)
    try:  # (a Ctrl-C as soon as this is said is the wait's too)
        print(f"gpucosim: the app's main() returned with {n} thread{'s' if n > 1 else ''} of its own still running "
              f"({', '.join(t.name for t in left)}): waiting for {'them' if n > 1 else 'it'} to end (Ctrl-C ends the "
              f"run)", file=sys.stderr, flush=True)
        for t in left:
            t.join()
    except KeyboardInterrupt as e:
        print(f"gpucosim: {stop_words(e)}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(stopped_code(e))  # (the interpreter's exit would wait for them again)


def _load(target: str):
    try:
        return load_main(target)
    except BaseException as e:
        if not app_failed(e):  # (Ctrl-C, sys.exit at import: as from main())
            raise
        report_load_error(target, e)
        return None



# ------------------------------------------------------------------------------ RTL

def _design(opts: RunOptions):
    from testbench.sim.design import gpu_design

    return gpu_design(opts.data_width)  # the RTL always has its DMA engine


def _say_what_logs_on_the_rtl(opts: RunOptions) -> None:
    """`--log sdma=...` on a simulator: the SDMA's packets are the reference model's log (the
    RTL has no monitor of the SDMA's parser), so say so once rather than log nothing."""
    from kmd_model.log import parse

    try:
        asked = [lv for mod, lv in parse(opts.log or "") if mod == "sdma"]
    except ValueError:
        return  # (a bad spec is reported where it is applied)
    if asked and asked[-1] <= logging.INFO:
        print(f"gpucosim: --log sdma: the SDMA engine's packets are logged on the reference model only "
              f"(--sim model); on {opts.backend}, --trace shows the bus traffic they make", file=sys.stderr)


def _run_rtl(opts: RunOptions) -> int:
    from testbench import sim

    reason = sim.unavailable_reason(opts.backend)
    if reason:
        print(f"gpucosim: {reason}", file=sys.stderr)
        return 2
    _say_what_logs_on_the_rtl(opts)
    app = opts.app
    if app.endswith(".py"):
        opts.app = str(Path(app).resolve())
    waves = bool(opts.waves)
    if waves:
        from ..trace.waves import unavailable_reason as waves_unavailable

        why = waves_unavailable(opts.backend)
        if why:
            raise LaunchError(why)
    design = _design(opts)
    key = f"{opts.backend}-{design.name}{'-waves' if waves else ''}"
    t0 = time.monotonic()
    label = f"building {opts.backend} {design.name}{' with waves' if waves else ''}"
    est = _estimate(key)
    if not console_enabled(sys.stderr) and not sim.is_built(design, opts.backend, waves=waves):
        # (no progress line off a terminal: say once what the wait is)
        print(f"gpucosim: {label}, once for this configuration ("
              + (f"about {est:.0f} s last time" if est else first_build_words(opts.backend)) + ")",
              file=sys.stderr, flush=True)
    try:
        with Console(label, status=lambda: {"estimate": est} if est else None):
            sim.build(design, opts.backend, waves=waves)  # before the app's output starts
            _state_names(opts)
    except sim.BuildError as e:  # (a toolchain's failure: its own words, then one line; no traceback)
        print(str(e).split("\n", 1)[-1].rstrip()[-2000:], file=sys.stderr)
        print(f"gpucosim: the {opts.backend} build of {design.name} failed (above: the end of its log, {e.log})",
              file=sys.stderr, flush=True)
        return 1
    took = time.monotonic() - t0
    if took > 3:
        _record(key, took)
    plusargs: list[str] = []
    if waves:
        Path(opts.waves).parent.mkdir(parents=True, exist_ok=True)
        if opts.backend == "verilator":
            plusargs += ["--trace-file", opts.waves]
        else:
            plusargs += [f"+dumpfile_path={opts.waves}"]
    with tempfile.TemporaryDirectory() as d:
        result = Path(d) / "exit_code"
        status = Path(d) / "status.json"
        opts.status_file = str(status)
        env = {"GPUCOSIM_RUN": opts.to_json(), "GPUCOSIM_APP_RESULT": str(result),
               "GPUCOSIM_APP_STREAMS": "1",  # (app_runner: its stderr marked in the log, for the echo)
               "GPUCOSIM_CWD": os.getcwd(),  # the app runs where it was started, as on the model
               "GPUCOSIM_LAUNCHER_PID": str(os.getpid()),  # (app_runner: it stops when this process dies)
               "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING"),
               "GPI_LOG_LEVEL": os.environ.get("GPI_LOG_LEVEL", "WARNING")}
        if opts.log:
            env["GPUCOSIM_LOG"] = opts.log
        log = sim.BUILD / "runs" / f"{opts.backend}-{design.name}" / f"app-{os.getpid()}" / "sim.log"
        # the simulator's own stderr (Verilator's messages) apart from its log, and echoed to
        # stderr: in the log it reached stdout, among the app's output
        err_log = log.with_name("sim-stderr.log")
        with Console(f"{opts.backend}: {Path(app).stem}", status=file_status(status), echo=log,
                     echo_err=err_log, noise=SIM_NOISE):
            try:
                res, stop, stopped_by = _supervised(
                    opts, lambda: sim.run(design, opts.backend, "gpucosim.run.app_runner", tag="app", extra_env=env,
                                          waves=waves, plusargs=plusargs, stderr_file=err_log),
                    status, result)
            except sim.SimulatorExit as e:
                if result.exists():  # (the app's status, written before the process ended)
                    return int(result.read_text().partition(" ")[0])
                # (an app's os._exit(5) was a traceback here, "RuntimeError: Command failed with
                # return code: 5"; on the model the run ends with the app's status)
                rc = e.returncode
                why = f"status {rc}" if rc > 0 else f"signal {signal.Signals(-rc).name}" if _signal_name(-rc) \
                    else f"status {rc}"
                print(f"gpucosim: the {opts.backend} simulator's process ended ({why}) before the app returned: "
                      f"an os._exit() in the app, or the simulator died (its log: {opts.shown(log)})",
                      file=sys.stderr, flush=True)
                return rc if 0 < rc < 256 else 128 - rc if rc < 0 else 1
        if waves and stop != "killed":
            _report_waves(opts)
        if stop == "interrupted":
            raise stopped_by  # (cli.main: "gpucosim: interrupted", 130; "terminated (SIGTERM)", 143)
        if stop == "killed":
            return INTERRUPT_EXIT
        if stop == "timeout":
            print(timeout_message(opts, (file_status(status)() or {}).get("cycles", 0))
                  + f" (the simulator did not stop within {stop_grace():g} s more: killed; no timeline)",
                  file=sys.stderr, flush=True)
            return TIMEOUT_EXIT
        if result.exists():
            code, _, words = result.read_text().partition(" ")
            if words and stop is None:  # (the app stopped itself: a ^C said so, as on the model)
                print(f"gpucosim: {words}", file=sys.stderr, flush=True)
            return int(code)
    if res is None:
        return 1
    print(f"gpucosim: the app did not finish on {opts.backend}: "
          + "; ".join(f"{n}: {m}" for n, m in res.failures), file=sys.stderr)
    return 1




def _signal_name(num: int) -> bool:
    """Whether `num` is a signal's number."""
    try:
        signal.Signals(num)
        return True
    except ValueError:
        return False


def _supervised(opts: RunOptions, run: Callable[[], Any], status: Path,
                result: Path) -> tuple[Any, str | None, KeyboardInterrupt | None]:
    """`run()` (the simulator's run) in a thread, while this one watches for Ctrl-C (and
    SIGTERM, SIGHUP: stops.Terminated) and the time: (its result, how it was stopped: None,
    "interrupted", "killed" or "timeout", and the KeyboardInterrupt that stopped it).

    The simulator's process stops the app itself (app_runner: a ^C or its --timeout is
    raised in the app's code) and writes the timeline, the figures and the exit report
    before it ends; this process must not kill it meanwhile, as the subprocess call it
    waits in did on a KeyboardInterrupt. A ^C sent to this process alone is passed on to
    the simulator's; a second one a second later kills it (its outputs are lost); so
    does --timeout plus stop_grace(), a simulator that cannot stop the app (stuck in C)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = run()
        except BaseException as e:  # (raised here, in the caller's thread)
            box["error"] = e
        finally:
            box["done"] = True

    t = threading.Thread(target=target, name="simulator", daemon=True)
    t0 = time.monotonic()
    t.start()
    stop: str | None = None
    first_int: float | None = None
    stopped_by: KeyboardInterrupt | None = None
    # (polled, not Thread.join: a KeyboardInterrupt in join's lock wait marks the thread as
    # ended in Python 3.11, bpo-45274's fix, and this process went on while it ran)
    while not box.get("done"):
        try:
            time.sleep(0.05)
            if opts.timeout and stop is None and time.monotonic() - t0 > opts.timeout + stop_grace():
                stop = "timeout"
                _signal_children(signal.SIGKILL)
        except KeyboardInterrupt as e:
            now = time.monotonic()
            if first_int is None:
                first_int, stop, stopped_by = now, "interrupted", e
                # (a terminal's ^C has reached it already: it takes one; SIGTERM is passed on as such)
                _signal_children(e.signum if isinstance(e, Terminated) else signal.SIGINT)
            elif now - first_int > 1.0:
                stop = "killed"
                print(f"gpucosim: {stop_words(e)} again: simulator killed (no timeline, no figures)",
                      file=sys.stderr, flush=True)
                _signal_children(signal.SIGKILL)
    # (stopped: a simulator that died of the signal is no news; nor one that ended itself with
    # the status in `result`, session.hard_stop)
    if "error" in box and stop is None and not result.exists():
        raise box["error"]
    return box.get("result"), stop, stopped_by


def _signal_children(sig: int) -> None:
    """Send `sig` to this process's children (the simulator: cocotb's runner started it)."""
    me = str(os.getpid())
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            # (the command may hold spaces and parentheses: the fields after its last ")")
            ppid = (d / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if ppid == me:
            try:
                os.kill(int(d.name), sig)
            except OSError:
                pass


def _report_waves(opts: RunOptions) -> None:
    from ..trace.waves import write_gtkw

    p = Path(opts.waves)
    if p.exists():
        gtkw, missing = write_gtkw(p)
        if missing:
            print(f"gpucosim: {len(missing)} signals the save file wants are not in {p.name}: "
                  + ", ".join(missing), file=sys.stderr)
        print(f"gpucosim: waveform written to {p} ({p.stat().st_size // 1024} KiB); `gtkwave {gtkw}` opens it "
              f"on the MMIO port, the CP's state (cp_state: the timeline's CP track names the states), "
              f"the memory bus and irq; the timeline's doorbell and fence events carry their wave_time",
              file=sys.stderr)
    else:
        print(f"gpucosim: the simulator wrote no waveform at {p}", file=sys.stderr)
