"""cocotb side of the launcher: run one app against the RTL.

`gpucosim run` (launch.py) starts the simulator with this module as the cocotb
test and the run's options in $GPUCOSIM_RUN. The app's main() runs in a bridge thread on
a CocotbDevice inside a `session.Session` (crash reports, exit report, the
timeline's software half); the hardware monitors (`gpucosim.trace.hwtrace`) watch the CP, the
memory bus and the irq line when a timeline or the `cp` log was asked for. The exit code
goes to $GPUCOSIM_APP_RESULT for the launcher.
"""

import logging
import os
import sys
import warnings

import cocotb

from gpucosim.run.console import EscapedStdout, MarkedStderr
from testbench.pipes import lenient_stdout

STREAMS_ENV = "GPUCOSIM_APP_STREAMS"
lenient_stdout()  # (the log: a character its encoding lacks ended the app, "the simulator crashed or hung")
if os.environ.get(STREAMS_ENV) == "1":
    # what the app and gpucosim write to stderr reaches the user's stderr (console.py), not
    # the log's echo on stdout: set before the drivers' log handlers take sys.stderr
    sys.stderr = MarkedStderr(sys.stdout, sys.stderr)  # type: ignore[assignment]
    sys.stdout = EscapedStdout(sys.stdout)  # type: ignore[assignment]  (after: stderr writes the real one)

from gpucosim.run.app import apply_app_log, load_main, report_load_error  # noqa: E402
from gpucosim.run.session import RunOptions, Session, app_failed, exit_code  # noqa: E402
from gpucosim.run.stops import (RunTimeout, disarm_stops, stop_on_signals, stop_words,  # noqa: E402
                                stopped_code, timeout_message)
from kmd_model.log import get_logger  # noqa: E402
from testbench.sim import bridge  # noqa: E402
from testbench.sim.cocotb_device import run_driver  # noqa: E402

# cocotb shows every DeprecationWarning in a test; cocotbext-axi's are not the app's to fix.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.")


def run_bound(dev, main) -> int:
    """Bind the KMD to `dev`, run the app, unbind; the app's exit code (None -> 0).
    (The plain way, without a Session: for tests that need nothing else.)"""
    import kmd_model

    kmd_model.bind(dev)
    try:
        code = main()
    finally:
        kmd_model.unbind()
    return exit_code(code)


def _result(code: int, stopped: str = "") -> None:
    """The app's exit status for the launcher, and how the run was stopped ("interrupted",
    "terminated (SIGTERM)"), which the launcher says when the stop did not come through it
    (the app raised KeyboardInterrupt itself, a signal sent to the simulator alone)."""
    path = os.environ.get("GPUCOSIM_APP_RESULT")
    if path:
        with open(path, "w") as f:
            f.write(f"{code} {stopped}".rstrip())


LAUNCHER_ENV = "GPUCOSIM_LAUNCHER_PID"


def _end_with_the_launcher() -> None:
    """SIGTERM to this process when the launcher dies (`kill -9`, the OOM killer): a stop as
    any other, its outputs written; it ran on alone, for ever with an app that spins. Linux's
    PR_SET_PDEATHSIG; elsewhere nothing. A launcher already gone is a SIGTERM at once."""
    launcher = os.environ.get(LAUNCHER_ENV)
    if not launcher or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(launcher):  # (it died before the call: no signal would come)
        os.kill(os.getpid(), signal.SIGTERM)


@cocotb.test()
async def app(dut):
    opts = RunOptions.from_env()
    # --timeout and Ctrl-C end the app, not the simulator: raised in the app's code (at its
    # next resumption when the simulator is busy), so that the timeline, the figures and the
    # exit report are written as when it ends by itself (the launcher waits for them)
    sessions: list[Session] = []
    stopped: BaseException | None = None
    code = 1
    try:
        bridge.direct = True  # (a stop that comes as the clock starts is raised right here)
        try:
            stop_on_signals(opts.timeout, bridge.interrupt, sigint=True, result=_result)
            _end_with_the_launcher()
        finally:
            bridge.direct = False
        code = await _app(dut, opts, sessions)
    except (KeyboardInterrupt, RunTimeout) as e:
        stopped = e
    finally:
        disarm_stops()
    # (a stop that came as the app ended, never raised in it: the run is stopped all the same)
    stopped = stopped or bridge.take_pending()
    if stopped is not None:
        code = stopped_code(stopped)
        # stopped before the app's run began (as it was imported): the figures and an empty
        # timeline all the same, as when it stops later
        session = sessions[0] if sessions else Session(opts)
        if opts.stats_json and not session.figures_written:
            session.write_figures(opts.stats_json, code)
        session.finish()
    if isinstance(stopped, RunTimeout):
        print(timeout_message(opts, sessions[0].cycles if sessions else 0), file=sys.stderr, flush=True)
    _result(code, stop_words(stopped) if isinstance(stopped, KeyboardInterrupt) else "")


STATUS_CYCLES = 10_000  # how often the status line's cycles move during a long device wait


async def _status_ticks(session: Session) -> None:
    """The run's status (the console's cycles) while the simulator runs inside one wait of
    the driver's: it moved at each ioctl's end, so an app's one long wait (an 8 MiB upload,
    a hang the job timer ends) showed the cycles of its start for all of it. A wake-up every
    STATUS_CYCLES cycles, ended with the test; status_tick writes at most 5 times a second."""
    from cocotb.triggers import Timer

    from testbench.sim.cocotb_device import PERIOD_PS

    while True:
        await Timer(STATUS_CYCLES * PERIOD_PS, "ps")
        session.status_tick()


async def _app(dut, opts: RunOptions, sessions: list) -> int:
    # the drivers' logs print through their own handler (--log), as on the model, not
    # through the handler cocotb puts on the root logger (which doubled the KMD's errors)
    logging.getLogger("gpucosim").propagate = False
    if opts.log:
        from kmd_model import log

        log.configure(opts.log)
    bridge.direct = True  # (plain code: a stop is raised in the app's import as it comes)
    try:
        main = load_main(opts.app)
    except SystemExit as e:  # sys.exit() as the app is imported: its status, as on the model
        return exit_code(e.code)
    except BaseException as e:
        if not app_failed(e):
            raise
        report_load_error(opts.app, e)
        return 2
    finally:
        bridge.direct = False
    # the run's setup is plain code too (the monitors' state names take some 5 s of Amaranth
    # the first time): a stop there was left for driver code that had not started, raised
    # again every 2 s, and the third time ended the process ("interrupted", no timeline)
    bridge.direct = True
    try:
        apply_app_log(main, opts)  # before the monitors below look at `cp`
        session = Session(opts)
        sessions.append(session)
        monitors = None
        if session.timeline is not None or get_logger("cp").isEnabledFor(logging.INFO):
            from gpucosim.trace.hwtrace import HwMonitors
            from testbench.sim import BUILD

            monitors = HwMonitors(dut, session.timeline, data_width=opts.data_width, cache_dir=BUILD / "rtl")
    finally:
        bridge.direct = False
    if monitors is not None:
        monitors.start()
    cocotb.start_soon(_status_ticks(session))

    # A crash report asks the CP where it is; its signals are read in the scheduler.
    from gpucosim.trace.hwtrace import cp_probe

    async def _probe():
        return cp_probe(dut)

    session.probe = bridge.resume(_probe)

    def driver(dev):
        if monitors is not None:
            from kmd_model.sched.ring import as_u32

            monitors.set_memory(as_u32(dev.mem))
        # the app's relative paths (its own arguments) are the caller's, as on the model
        here = os.getcwd()
        os.chdir(os.environ.get("GPUCOSIM_CWD", here))
        try:
            return session.run(dev, main)
        finally:
            os.chdir(here)

    try:
        return await run_driver(dut, driver)
    finally:
        if monitors is not None:
            monitors.stop()
        session.finish()
