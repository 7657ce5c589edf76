"""The driver's lock (Kmd.lock): every ioctl and every close of a file holds it, whichever
thread makes it, as a kernel driver serialises what its state needs.

A wait for the GPU inside an ioctl (a CS waiting for a slot of its context, WAIT_CS,
GEM_WAIT_IDLE) must not hold it all along: a client whose job holds the CP would stop every
other client's ioctls, INFO and GEM_CREATE too, until the reset a `job_timeout` later
(amdgpu waits on a fence with no global lock held). `yield_to_waiters` lets the threads
waiting for the lock in between the steps of such a wait: it hands the lock to one of them
and takes it back after (the waiting ioctl then checks again what it had looked up: the
driver never trusts its state across a wait).
"""

from __future__ import annotations

import sys
import threading
import time


class DriverLock:
    """A re-entrant lock that knows who waits for it. `with lock:` as for an RLock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._count = threading.Lock()  # guards `waiters` (+= is not atomic across threads)
        self.waiters = 0  # threads blocked in __enter__
        self.entries = 0  # times a thread got the lock from outside (not re-entrantly)
        self.depth = 0  # how deep the holder has entered it (1: one ioctl, not re-entered)

    def __enter__(self) -> "DriverLock":
        if not self._lock.acquire(blocking=False):
            with self._count:
                self.waiters += 1
            try:
                self._lock.acquire()
            finally:
                with self._count:
                    self.waiters -= 1
        if self.depth == 0:
            self.entries += 1
        self.depth += 1
        return self

    def owned(self) -> bool:
        """Whether the calling thread holds it: code of the client's (a signal handler, a
        garbage collector callback) run in the middle of an ioctl or a close."""
        return self._lock._is_owned()

    def __exit__(self, *exc) -> None:
        self.depth -= 1
        self._lock.release()

    def yield_to_waiters(self) -> None:
        """Let one thread that waits for the lock have it, then take it back; nothing when
        nobody waits, or when the holder entered it more than once (a hook inside an ioctl
        making another: the outer ioctl is in the middle of its work)."""
        if self.depth != 1 or not self.waiters:
            return
        seen = self.entries
        self.depth = 0
        self._lock.release()
        try:
            # until a waiter has taken it (or none waits any more): the lock is not fair, so
            # taking it back at once could starve them
            while self.entries == seen and self.waiters:
                time.sleep(0.0001)
        finally:
            self.__enter__()


# ------------------------------------------------------------------ the driver's own stack

KMD_STACK = 400
"""Frames the driver may use below an ioctl's, close's or open's entry (its deepest paths,
a recovery inside a CS's wait, use well under 100)."""

# (re-entrant: client code run inside it, a signal handler or a gc callback, may make an ioctl)
_stack_lock = threading.RLock()
_stack = {"holders": 0, "before": None}  # threads in the driver; the limit before it was raised


class kernel_stack:
    """`with kernel_stack():` runs the block (an ioctl, a close, an open) with room for
    KMD_STACK more frames, however deep the client called from. A kernel runs on a stack of
    its own; here the driver ran on the client's, and a client that recursed to a few frames
    below Python's recursion limit before an ioctl had it raise RecursionError wherever the
    driver's calls ran out, in the middle of its change (a GEM_VA UNMAP's page-table update
    done, its TLB flush not, so the VMID kept the page, which went to another client after
    GEM_CLOSE). The recursion limit is raised while any thread is in the driver and set back
    when the last one leaves. (The `with` itself, a frame, may fail at the very limit:
    before the driver has done anything.) Each step holds for client code run between any
    two of them that enters and leaves the driver too: counted in first, out last."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _stack_lock:
            _stack["holders"] += 1
            try:
                limit = sys.getrecursionlimit()
                try:
                    sys._getframe(max(0, limit - KMD_STACK))  # are there that many frames below?
                except ValueError:
                    return
                if _stack["before"] is None:
                    _stack["before"] = limit
                sys.setrecursionlimit(max(sys.getrecursionlimit(), limit + KMD_STACK))
            except BaseException:  # (at the very limit: no __exit__ will count it out, nor may a call)
                _stack["holders"] -= 1
                raise

    def __exit__(self, *exc) -> None:
        with _stack_lock:
            _stack["holders"] -= 1
            while _stack["holders"] == 0 and _stack["before"] is not None:
                before, _stack["before"] = _stack["before"], None
                try:
                    sys.setrecursionlimit(before)
                except RecursionError:  # (this thread is deeper than that now: a later exit sets it back)
                    _stack["before"] = before
                    return
