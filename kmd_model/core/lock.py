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


class DriverLock:
    """A re-entrant lock that knows who waits for it. `with lock:` as for an RLock.

    Taken from outside while a thread is blocked waiting for it, it goes to that thread
    first: Python's lock is not fair, and a client whose ioctl ended took it back with its
    next one before the waiting thread woke, again and again (another client's ioctl waited
    through several scheduler passes, not one). A thread that comes while others are blocked
    waits until one of them has had it (it is counted among `waiters` meanwhile), then joins
    them. The hand-over is at the next take, not at the release: an ioctl returns as soon as
    it lets go (a client's ioctl that ended did not wait for the other thread's).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # guards the counts below and wakes the threads that wait for their turn; re-entrant,
        # as a signal handler or a garbage collector callback may make an ioctl from inside it
        self._turn = threading.Condition(threading.RLock())
        self.waiters = 0  # threads waiting to take it from outside (blocked, or waiting their turn)
        self._blocked: dict[int, int] = {}  # of them, those blocked on the lock itself (thread: how many times)
        self.entries = 0  # times a thread got the lock from outside (not re-entrantly)
        self._queued = 0  # threads waiting on `_turn` for an entry
        self.depth = 0  # how deep the holder has entered it (1: one ioctl, not re-entered)

    def __enter__(self) -> "DriverLock":
        if self._lock._is_owned():  # re-entered (a hook inside an ioctl making another)
            self._lock.acquire()
        elif self._blocked or not self._lock.acquire(blocking=False):  # (the dict read without the guard: a hint)
            self._take(after_the_blocked=True)
        if self.depth == 0:
            self._entered()
        self.depth += 1
        return self

    def _entered(self) -> None:
        """Count a take from outside (only the holder writes `entries`) and wake the threads
        waiting for their turn, if any (`_queued` is counted under the guard before such a
        thread looks at `entries`, so a take it has not seen finds it counted)."""
        self.entries += 1
        if self._queued:
            with self._turn:
                self._turn.notify_all()

    def _take(self, after_the_blocked: bool) -> None:
        """Take the lock from outside, counted among `waiters` until it is had; with
        `after_the_blocked`, once a thread blocked on it as this one came has had it. (Not
        behind the thread's own block: a signal handler that makes an ioctl while its thread
        is blocked on the lock runs above that block, which cannot go first.)"""
        me = threading.get_ident()
        with self._turn:
            self.waiters += 1
            try:
                seen = self.entries
                self._queued += 1
                try:
                    while after_the_blocked and self.entries == seen and any(t != me for t in self._blocked):
                        self._turn.wait()
                finally:
                    self._queued -= 1
            except BaseException:
                self.waiters -= 1
                raise
            self._blocked[me] = self._blocked.get(me, 0) + 1
        try:
            self._lock.acquire()
        finally:
            with self._turn:
                if self._blocked[me] == 1:
                    del self._blocked[me]
                else:
                    self._blocked[me] -= 1
                self.waiters -= 1
                self._turn.notify_all()

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
            # until a waiter has taken it (or none waits any more): taking it back at once
            # could starve them
            with self._turn:
                self._queued += 1
                try:
                    while self.entries == seen and self.waiters:
                        self._turn.wait(0.01)
                finally:
                    self._queued -= 1
        finally:
            # back with the threads blocked on it, not behind them: one waiter in, not every one
            if not self._lock.acquire(blocking=False):
                self._take(after_the_blocked=False)
            self._entered()
            self.depth = 1


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
