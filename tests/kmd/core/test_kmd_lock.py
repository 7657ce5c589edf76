"""The driver's lock (kmd_model/core/lock.py, DriverLock): a re-entrant lock that counts the
threads waiting for it, and that an ioctl waiting for the GPU hands to one of them between
its steps (Kmd.wait_unlocked). tests/security/limits/test_security_contention.py checks what that
buys (another client's ioctls run while one waits); these pin the lock's own bookkeeping,
which those runs cannot see: a wrong count there only makes the hand-over late, or never."""

from __future__ import annotations

import os
import signal
import threading
import time

from kmd_model.core.lock import DriverLock


def _until(cond, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


class _Waiter(threading.Thread):
    """A thread that takes the lock, notes it, and lets it go; any exception is kept."""

    def __init__(self, lock: DriverLock, got: list):
        super().__init__(daemon=True)
        self.lock, self.got, self.error = lock, got, None

    def run(self) -> None:
        try:
            with self.lock:
                self.got.append(self.name)
        except BaseException as e:  # (reported by the test, not lost in the thread)
            self.error = e


def test_entries_count_outer_takes_and_depth_the_holders_nesting():
    lock = DriverLock()
    assert (lock.entries, lock.depth, lock.waiters) == (0, 0, 0)
    with lock as held:
        assert held is lock and (lock.entries, lock.depth) == (1, 1)
        with lock:  # a hook inside an ioctl making another: re-entered, not a new entry
            assert (lock.entries, lock.depth) == (1, 2)
        assert lock.depth == 1
    assert (lock.entries, lock.depth) == (1, 0)
    with lock:
        assert (lock.entries, lock.depth) == (2, 1)
    assert lock.depth == 0


def test_a_thread_blocked_on_the_lock_is_counted_until_it_has_it():
    lock, got = DriverLock(), []
    with lock:
        t = _Waiter(lock, got)
        t.start()
        _until(lambda: lock.waiters == 1, "the thread waits for the lock")
        assert not got
    t.join(10)
    assert not t.is_alive() and t.error is None and got == [t.name]
    assert (lock.waiters, lock.entries, lock.depth) == (0, 2, 0)


def _as_holder(fn) -> None:
    """Run `fn` (which takes the lock and hands it over) in a thread of its own: a hand-over
    that goes wrong can wait for ever (a lock let go while held twice stays held; a waiter
    that dies holding it never lets go), a failure after 5 s here, not a hung test run."""
    out: list = []

    def run() -> None:
        try:
            fn()
            out.append(None)
        except BaseException as e:
            out.append(e)

    h = threading.Thread(target=run, daemon=True)
    h.start()
    h.join(5)
    assert out, "the lock's holder did not get it back (yield_to_waiters did not return)"
    if out[0] is not None:
        raise out[0]


def test_yield_to_waiters_hands_the_lock_over_and_takes_it_back():
    """The waiter has had the lock (and let it go) when yield_to_waiters returns: taking it
    back at once would starve it, as the lock is not fair."""
    lock, got = DriverLock(), []

    def holder() -> None:
        with lock:
            t = _Waiter(lock, got)
            t.start()
            _until(lambda: lock.waiters == 1, "the thread waits for the lock")
            lock.yield_to_waiters()
            assert got == [t.name] and (lock.depth, lock.entries, lock.waiters) == (1, 3, 0)
            t.join(10)
            assert not t.is_alive() and t.error is None
        assert lock.depth == 0

    _as_holder(holder)


def test_yield_to_waiters_keeps_the_lock_when_nobody_waits_or_it_is_nested():
    lock, got = DriverLock(), []

    def holder() -> None:
        with lock:
            lock.yield_to_waiters()  # nobody waits: the lock is not let go and taken again
            assert (lock.entries, lock.depth) == (1, 1)
            t = _Waiter(lock, got)
            t.start()
            _until(lambda: lock.waiters == 1, "the thread waits for the lock")
            with lock:  # entered twice: the outer ioctl is in the middle of its work
                lock.yield_to_waiters()
                assert not got and (lock.entries, lock.depth, lock.waiters) == (1, 2, 1)
        t.join(10)
        assert not t.is_alive() and t.error is None and got == [t.name]

    _as_holder(holder)


def test_yield_to_waiters_lets_one_waiter_in_not_every_one():
    """The waiting ioctl goes on once one waiter has had the lock, though others still wait
    (they get it at its next step): waiting until nobody waits could hold it for ever under
    load. The second waiter is a count only, so that which thread gets the lock next is not
    left to the scheduler."""
    lock, got = DriverLock(), []

    def holder() -> None:
        with lock:
            t = _Waiter(lock, got)
            t.start()
            _until(lambda: lock.waiters == 1, "the thread waits for the lock")
            lock.waiters += 1  # another thread waiting
            try:
                lock.yield_to_waiters()
            finally:
                lock.waiters -= 1
            assert got == [t.name]
        t.join(10)

    _as_holder(holder)


def test_every_blocked_thread_is_counted():
    lock, got = DriverLock(), []
    with lock:
        ts = [_Waiter(lock, got) for _ in range(2)]
        for t in ts:
            t.start()
        _until(lambda: lock.waiters == 2, "both threads are counted waiting", seconds=5)
    for t in ts:
        t.join(10)
        assert not t.is_alive() and t.error is None
    assert lock.waiters == 0 and sorted(got) == sorted(t.name for t in ts)


def test_letting_go_with_a_thread_waiting_hands_it_the_lock_before_the_next_take():
    """An ioctl that ends while another thread waits for the lock: the waiter has it before
    the thread that let it go takes it again. Python's lock is not fair, and a client's next
    ioctl took it back at once (tests/security/limits/test_security_lock_work.py's other
    thread got in after two scheduler passes, not one, one run in four on a loaded machine)."""
    lock, got = DriverLock(), []

    def holder() -> None:
        for _ in range(20):  # (without the hand-over the holder's next take wins, nearly always)
            got.clear()
            with lock:
                t = _Waiter(lock, got)
                t.start()
                _until(lambda: lock.waiters == 1, "the thread waits for the lock")
            with lock:  # the same thread's next ioctl
                assert got == [t.name], "the holder took the lock back before the waiter had it"
            t.join(10)
            assert not t.is_alive() and t.error is None
        assert (lock.waiters, lock.depth) == (0, 0)

    _as_holder(holder)


def test_a_thread_that_comes_while_others_are_blocked_is_counted_and_goes_after_one():
    """A third thread that comes while one is blocked on the lock waits its turn (counted
    among the waiters from the start) and has the lock after the blocked one."""
    lock, got = DriverLock(), []

    def holder() -> None:
        with lock:
            first = _Waiter(lock, got)
            first.start()
            _until(lambda: lock.waiters == 1, "the first thread waits for the lock")
            second = _Waiter(lock, got)
            second.start()
            _until(lambda: lock.waiters == 2, "the second thread is counted too")
        for t in (first, second):
            t.join(10)
            assert not t.is_alive() and t.error is None
        assert got == [first.name, second.name] and lock.waiters == 0

    _as_holder(holder)


def test_a_signal_handler_taking_the_lock_while_its_thread_is_blocked_on_it():
    """The main thread blocks on the lock; a signal arrives and its handler makes an ioctl
    (takes the lock) above that block. The handler does not wait for its own thread's block
    to go first (it cannot): it has the lock once the holder lets go, then the block does."""
    lock, order = DriverLock(), []
    previous = signal.getsignal(signal.SIGUSR1)

    def handler(signum, frame) -> None:
        with lock:
            order.append("handler")

    signal.signal(signal.SIGUSR1, handler)
    holding, release, stuck = threading.Event(), threading.Event(), threading.Event()

    def other() -> None:
        with lock:
            holding.set()
            _until(lambda: lock.waiters >= 1, "the main thread is blocked on the lock")
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.2)  # (the handler runs in the main thread, blocked on the lock: it waits)
            release.set()
        deadline = time.monotonic() + 5
        while "handler" not in order and time.monotonic() < deadline:
            time.sleep(0.01)
        if "handler" not in order:  # the handler waits for its own thread's block: wake it (as an entry would)
            stuck.set()
            with lock._turn:
                lock.entries += 1
                lock._turn.notify_all()

    t = threading.Thread(target=other, daemon=True)
    try:
        t.start()
        assert holding.wait(10)
        with lock:
            order.append("main")
        t.join(10)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not stuck.is_set(), "the handler waited for its own thread's block on the lock"
    assert release.is_set() and order == ["handler", "main"]
    assert (lock.waiters, lock.depth) == (0, 0) and not lock._blocked
