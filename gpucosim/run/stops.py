"""Stopping a run: --timeout (SIGALRM) and the signals (Ctrl-C, SIGTERM, SIGHUP), raised in
the app's code where it is (`stop_on_signals`), held where they would break the driver
(`_not_now`), raised again when the app catches them, and as a last resort the process
ended with its outputs written (`hard_stop`). Light to import: cli.main installs
`terminate` before it imports anything of a run.

SIGTERM (`kill PID`, timeout(1), a service manager) and SIGHUP (the terminal closed) stop
a run as a Ctrl-C does: the app is stopped where a ^C would be (umd/signals.py holds them
through a flush), the timeline, the figures and the exit report are written, and the status
is 128 + the signal's number (143, 129). By their default action they killed the launcher
alone: a simulator it had started ran on (100 % of a core, for ever when the app spins),
and nothing was written.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from greenlet import GreenletExit

if TYPE_CHECKING:
    from .session import RunOptions

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """A run stopped by SIGTERM or SIGHUP: a KeyboardInterrupt, so that every place that
    stops a run on ^C stops it on these too."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def terminate(signum: int, frame=None) -> None:
    """SIGTERM's and SIGHUP's handler in the launcher, as Python's own is for SIGINT."""
    raise Terminated(signum)


def stop_words(e: BaseException) -> str:
    """How gpucosim says it was stopped: "interrupted", "terminated (SIGTERM)"."""
    return f"terminated ({signal.Signals(e.signum).name})" if isinstance(e, Terminated) else "interrupted"


def _session():
    """The session module (its current run), imported when a stop needs it: it imports this."""
    from . import session

    return session


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


STOP_GRACE_ENV = "GPUCOSIM_STOP_GRACE"


def _seconds(env: str, default: float) -> float:
    """$`env` as a number of seconds, `default` when unset or empty; ValueError for a
    setting that is no positive number."""
    text = os.environ.get(env, "")
    if not text:
        return default
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v <= 1_000_000:
        raise ValueError(f"{env}={text!r}: give a number of seconds above 0, at most 1000000")
    return v


def stop_grace() -> float:
    """How long a stopped run has to end itself before it is ended (seconds, default 60;
    $GPUCOSIM_STOP_GRACE): on a simulator the launcher kills it, on the model a watchdog
    ends the process. ValueError for a setting that is no positive number."""
    return _seconds(STOP_GRACE_ENV, 60.0)


RETRY_S = 0.02  # how soon a stop that could not be raised where it came is tried again
REFIRE_S = 2.0  # how soon a stop the app caught is raised again (the default of:)
STOP_REFIRE_ENV = "GPUCOSIM_STOP_REFIRE"


def stop_refire() -> float:
    """How soon a stop the app caught is raised again, and after as long again the process
    ended (seconds, default REFIRE_S; $GPUCOSIM_STOP_REFIRE: the tests of apps that catch
    every stop wait less). ValueError for a setting that is no positive number."""
    return _seconds(STOP_REFIRE_ENV, REFIRE_S)
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
    s = _session()._current
    lock = getattr(getattr(getattr(s, "kmd", None), "lock", None), "_lock", None)
    try:
        return bool(lock is not None and lock._is_owned())
    except AttributeError:
        return False


def hard_stop(e: BaseException, result: Callable[..., None] | None = None, *,
              why: str = "the app caught every stop", opts: "RunOptions | None" = None) -> None:
    """End the process: an app that catches every stop (from the signal handler), or one
    that --timeout did not stop within stop_grace() more (the model's watchdog). What the
    run has is written first (figures, timeline; `result` passes the exit status on: the
    simulator's launcher reads it), then its line."""
    code = stopped_code(e) or 1
    s = _session()._current
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
            print(f"gpucosim: the run's outputs could not all be written: {_session().described(err)}", file=sys.stderr)
    said = isinstance(e, KeyboardInterrupt) and result is not None
    if result is not None:
        # (a ^C's or a SIGTERM's words go to the launcher, which says them unless the signal
        # reached it too and it says so itself: both said "gpucosim: terminated (SIGTERM)")
        result(code, stop_words(e)) if said else result(code)
    elif s is not None:  # (in the launcher, the model's: the streams' copies, as its run's end would)
        from .outputs import relay

        relay(s.opts)
    if isinstance(e, RunTimeout):  # (with no run to name: "interrupted" was said of a --timeout)
        o = s.opts if s else opts
        line = (timeout_message(o, s.cycles if s else 0) if o is not None else
                f"gpucosim: the app did not finish within {e.seconds:g} s: stopped")
        print(line + f" ({why}: its process ended)", file=sys.stderr, flush=True)
    elif not said:
        print(f"gpucosim: {stop_words(e)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)


def stop_on_signals(timeout: float | None, throw: Callable[[BaseException], None], *,
                    sigint: bool = False, result: Callable[..., None] | None = None) -> Callable[[], None]:
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
    try:
        refire = stop_refire()
    except ValueError:  # (gpucosim run refused it before the run: checks.run_options)
        refire = REFIRE_S
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
        signal.setitimer(signal.ITIMER_REAL, refire)  # again, until the run sees it
        throw(e)

    held: list[BaseException] = []

    def seen() -> None:
        done.append(True)
        signal.setitimer(signal.ITIMER_REAL, 0)

    _seen = seen
    old = _ours(signal.SIGALRM, lambda _, frame: fire(held.pop() if held else None, frame))

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
        _ours(signum, lambda num, frame: fire(Terminated(num), frame))
    if sigint:
        _ours(signal.SIGINT, lambda _, frame: fire(KeyboardInterrupt(), frame))
        # (a system call the simulator's C++ makes goes on, not EINTR, when a signal arrives)
        signal.siginterrupt(signal.SIGINT, False)
        signal.siginterrupt(signal.SIGALRM, False)
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    return disarm


_disarm: Callable[[], None] | None = None  # what stop_on_signals armed last
_handlers: set = set()  # the handlers stop_on_signals installed


def _ours(signum: int, handler: Callable) -> Any:
    """signal.signal, remembering the handler as the run's (see _plain_in_child)."""
    _handlers.add(handler)
    return signal.signal(signum, handler)


def _leave_quietly(signum: int, frame: Any) -> None:
    """^C in a process the app forked: it leaves as SIGTERM's default would have it leave,
    without a word, but through Python's exit (its `finally` blocks run; multiprocessing
    takes SystemExit as the process's exit status). With Python's own handler, a ^C to the
    terminal's process group raised KeyboardInterrupt in the child too, and its traceback
    ("Process Process-1: Traceback ...") was cut off halfway by the run ending the app's
    processes, under the run's own "gpucosim: interrupted"."""
    raise SystemExit(128 + signum)


def _plain_in_child() -> None:
    """A process the app forks (multiprocessing) gets Python's own handlers back: with the
    run's, the stop that terminated it was raised in its code as the run's Terminated, a
    traceback ("Process Process-1: ... Terminated: SIGTERM"). ^C is the exception: the run's
    stop ends the app's processes anyway, and a child leaves it quietly (_leave_quietly)."""
    for signum in (signal.SIGALRM, *TERMINATING):
        if signal.getsignal(signum) in _handlers:
            signal.signal(signum, signal.SIG_DFL)
    # (SIGINT: the run's handler on a simulator, Python's own on the model, where the run
    # takes ^C as the KeyboardInterrupt it raises)
    if _disarm is not None and (signal.getsignal(signal.SIGINT) in _handlers
                                or signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        signal.signal(signal.SIGINT, _leave_quietly)


os.register_at_fork(after_in_child=_plain_in_child)


def disarm_stops() -> None:
    """Undo stop_on_signals, whether or not it returned: a --timeout shorter than its own
    setup (1e-6 s) raised the stop inside it, before the caller had its `disarm` (a
    traceback, and the clock left to fire again during the run's outputs)."""
    if _disarm is not None:
        _disarm()
