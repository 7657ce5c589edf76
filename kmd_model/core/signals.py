"""Signals and client code during an ioctl: held until it returns, as the kernel does.

In a kernel no client code runs while an ioctl is in progress: a signal is delivered on the
way back to user space, and a file closed by another thread is released only once the
ioctl holding it returns (fdget/fdput). In this model the client is Python in the same
process, and two things run its code in the middle of the driver's work:

- a signal handler, between any two bytecodes of the main thread: one that made another
  ioctl (GEM_CLOSE of the BO a CS was checking) or raised (KeyboardInterrupt between an
  UNMAP's page-table update and its TLB flush) left the driver's state half-changed, and
  another client's memory reachable (a fence write into a freed page, a stale TLB entry);
- the garbage collector (`gc.callbacks`, a `__del__`), at any allocation of the thread: a
  close of the file whose CS was under way released its page tables under the job.

So each ioctl runs with every Python signal handler replaced by one that notes the signal
(`hold`); the handlers run, in the order their signals came, once the driver's lock is
released. A wait for the GPU inside an ioctl (WAIT_CS, a CS waiting for its context's
slot, GEM_WAIT_IDLE) ends early with EINTR when a signal is held, as an interruptible
wait does, so ^C and `gpucosim run --timeout` still end an unbounded wait. An ioctl or an
open made from inside another ioctl by the same thread is refused (EDEADLK) and a close is
deferred to the end of the ioctl (core/file.py, core/clients.py).

Only the main thread runs signal handlers in Python (SIG_IGN and SIG_DFL are the kernel's
business and left alone), so elsewhere `hold` does nothing.
"""

from __future__ import annotations

import _signal  # (signal's C functions: its wrappers' enum conversions made this 50 us an ioctl)
import signal
import threading

# every signal a Python handler can be set for (SIGKILL and SIGSTOP have none)
_SIGNALS = tuple(int(s) for s in sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))


class Held:
    """The signals that came while an ioctl held them: (signum, frame), each signal once."""

    def __init__(self) -> None:
        self.came: list = []

    def note(self, signum, frame) -> None:
        if all(signum != s for s, _ in self.came):
            self.came.append((signum, frame))


_held = threading.local()  # .now: the Held of the ioctl the main thread is in, if any
_MAIN = threading.main_thread()


class hold:
    """`with hold():` runs the block (an ioctl) with the process's Python signal handlers
    held; those whose signal came run after it, in the order they came, each even when one
    before raised. (A class, not a generator: it runs for every ioctl.)"""

    __slots__ = ("prevs", "held")

    def __enter__(self) -> None:
        self.prevs = None
        if threading.current_thread() is not _MAIN or getattr(_held, "now", None) is not None:
            return
        get = _signal.getsignal
        prevs = {s: h for s in _SIGNALS if callable(h := get(s))}
        held = Held()
        try:
            set_handlers([(s, held.note) for s in prevs])
        except BaseException:  # (a client handler raised between two of the calls: none left held)
            try:
                set_handlers(list(prevs.items()))
            finally:
                deliver(prevs, held.came)
            raise
        # (from here on every Python handler is the note-taker, which raises nothing)
        self.prevs, self.held = prevs, held
        _held.now = held

    def __exit__(self, *exc) -> None:
        prevs = self.prevs
        if prevs is None:
            return
        _held.now = None
        try:
            set_handlers(list(prevs.items()))
        finally:  # (the signals held, and any that came while the handlers went back, run now)
            deliver(prevs, self.held.came)


def set_handlers(pairs: list, set_one=None) -> None:
    """`signal.signal(signum, handler)` for each pair, every one of them even when a signal
    comes between two of the calls and its handler (one already set back) raises: Python runs
    it between any two bytecodes, and `signal.signal` runs a pending one's first, setting
    nothing if it raises. Raised out of a plain loop, the handlers after it in the loop stayed
    the driver's note-taker for good (every later such signal noted, never delivered: ^C or
    `gpucosim run --timeout` then did nothing). The loop is made again when one raised, and
    the exception raised after (a second signal in that short window is not covered).
    `set_one`: the call that sets one (`_signal.signal` unless given)."""
    set_one = set_one or _signal.signal
    try:
        for s, h in pairs:
            set_one(s, h)
    except BaseException:
        for s, h in pairs:
            set_one(s, h)
        raise


def pending() -> bool:
    """Whether a signal came during the ioctl this thread is in (a wait ends with EINTR)."""
    held = getattr(_held, "now", None)
    return bool(held is not None and held.came)


def deliver(handlers: dict, came: list) -> None:
    """Run held signals' handlers in the order they came, each even when one before it
    raised (as Python runs a second pending signal's handler while the first's exception
    unwinds: the later exception wins)."""
    if came:
        (signum, frame), rest = came[0], came[1:]
        try:
            handlers[signum](signum, frame)
        finally:
            deliver(handlers, rest)
