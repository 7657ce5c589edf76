"""^C (KeyboardInterrupt) raised inside a wait of the KMD or the model: a fence wait
(finish, Event.wait), a flush waiting for room (the UMD's max_inflight, the KMD's
sched_jobs inside the CS), a write waiting for an IB, Device.alloc waiting for memory.
Raised here from the model's own wait (RefModel.wait_irq, once), as a ^C arriving where
the UMD holds no SIGINT (umd/signals.py holds it only around a flush's bookkeeping, on the
main thread with a Python handler). After it: no lock is left held (the UMD's, the KMD's),
nothing is half-submitted (what was recorded is either submitted and tracked or still
recorded), the same call again works, and close() works (docs/architecture.md, "^C").
"""

from __future__ import annotations

import threading

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from testbench.refmodel import RefModel
from umd.winsys import KMD_LOCK
from umd.winsys.cmdbuf import Label

from tests.umd.memory.test_umd_memory import fill_gtt_behind_a_held_submission

SYNC_ASYNC = pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])


def _ctrl_c_in_the_next_wait(monkeypatch, dev, then=None) -> list:
    """The model's next wait for time to pass raises KeyboardInterrupt (once, after calling
    `then`, if given); returns a list that holds True once it has."""
    fired: list = []
    wait = dev.wait_irq

    def wait_irq(cycles):
        if cycles > 0 and not fired:
            fired.append(True)
            if then is not None:
                then()
            raise KeyboardInterrupt
        return wait(cycles)

    monkeypatch.setattr(dev, "wait_irq", wait_irq)
    return fired


def _locks_free(kmd) -> None:
    """Another thread can take the UMD's lock and the KMD's at once."""
    got: list = []

    def take():
        for lock in (KMD_LOCK, kmd.lock._lock):
            if lock.acquire(timeout=5):
                lock.release()
                got.append(lock)

    t = threading.Thread(target=take)
    t.start()
    t.join()
    assert len(got) == 2 and kmd.lock.depth == 0


@SYNC_ASYNC
@pytest.mark.parametrize("how", ["finish", "event"])
def test_ctrl_c_in_a_fence_wait(monkeypatch, async_submit, how):
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=async_submit)
    gate, out = gpu.alloc(64), gpu.alloc(64)
    q.wait_mem(gate, 0, 1)
    q.write(out, 0, 5)
    ev = q.signal()
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        q.finish() if how == "finish" else ev.wait(None)
    assert fired and not q.cmdbuf.ibs
    _locks_free(kmd)
    gate.u32[0] = 1
    assert ev.wait()
    q.finish()
    assert out.u32[0] == 5
    q.close()
    gpu.close()


def test_ctrl_c_in_a_flush_waiting_for_room(monkeypatch):
    """max_inflight reached: the flush waits for the oldest submission; interrupted, its
    commands stay recorded, and the next flush submits them."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(max_inflight=1, ib_size_dw=64)
    gate, out = gpu.alloc(64), gpu.alloc(256)
    for _ in range(2):  # (IBs back in the pool: the write below takes one without a wait)
        q.write(out, 0, [0] * 40)
    q.finish()
    q.wait_mem(gate, 0, 1)
    q.flush()
    q.write(out, 0, 5)
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        q.flush()
    assert fired and q.cmdbuf.ibs and q.flushes == 2  # still recorded
    _locks_free(kmd)
    gate.u32[0] = 1
    q.flush()
    q.finish()
    assert out.u32[0] == 5
    gpu.close()


def test_ctrl_c_in_a_cs_the_kmd_makes_wait(monkeypatch):
    """The KMD's CS waits for the context's oldest job (sched_jobs on its ring): interrupted
    there, the job was never queued. The flush had already taken the commands out of the
    queue (its IBs, events and dependencies), so they were lost: never run, the events
    never signalled, finish() returning at once. They stay recorded now."""
    kmd = kmd_model.bind(RefModel(), KmdParams(sched_jobs=2))
    gpu = umd.open()
    q = gpu.queue()
    gate, out = gpu.alloc(64), gpu.alloc(64)
    q.wait_mem(gate, 0, 1)
    q.flush()
    q.write(out, 0, 1)
    q.flush()  # (two unfinished jobs of the context: the next CS waits)
    q.write(out, 4, 2)
    ev = q.signal()
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        q.flush()
    assert fired and q.flushes == 2 and q.cmdbuf.ibs and ev.seq is None and not ev.lost
    _locks_free(kmd)
    gate.u32[0] = 1
    assert ev.wait()  # (flushes it)
    q.finish()
    assert out.u32[:2].tolist() == [1, 2]
    gpu.close()


def test_ctrl_c_in_a_later_cs_of_a_copy_flush(monkeypatch):
    """A copy flush of more IBs than a CS takes makes several CS; its first is in when a
    later one waits for ring room (sched_jobs) and the ^C comes: the rest follow (as a held
    SIGINT lets them), the flush is recorded as submitted, whole, then KeyboardInterrupt is
    raised. (Not submitted, the commands kept for the next flush would run twice.)"""
    kmd = kmd_model.bind(RefModel(), KmdParams(sched_jobs=2))
    gpu = umd.open()
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000)
    gate, out = gpu.alloc(64), gpu.alloc(4096)
    q.wait_mem(gate, 0, 1)
    q.flush()
    n = gpu.dev_info.max_ib_chunks + 1  # (an IB each)
    for i in range(n):
        q.write(out, 4 * 40 * i, [i + 1] * 40)
    ev = q.signal()
    cs = kmd.stats["cs"]
    gate_cpu = gate.u32  # (mapped now: `then` runs inside the KMD's wait, where an ioctl is refused)
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev, then=lambda: gate_cpu.__setitem__(0, 1))
    with pytest.raises(KeyboardInterrupt):
        q.flush()
    assert fired and kmd.stats["cs"] == cs + 2 and q.flushes == 2 and not q.cmdbuf.ibs and ev.seq == q.last_seq
    _locks_free(kmd)
    assert ev.wait()
    q.finish()
    assert [out.u32[40 * i] for i in range(n)] == list(range(1, n + 1))
    gpu.close()


def test_ctrl_c_in_a_write_waiting_for_an_ib(monkeypatch):
    """A write needs a new IB and the queue is at max_inflight: it waits for the oldest
    submission; interrupted, it has recorded nothing, and the same write again works."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(max_inflight=1)
    gate, out = gpu.alloc(64), gpu.alloc(64)
    q.wait_mem(gate, 0, 1)
    q.flush()
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        q.write(out, 0, 5)
    assert fired and not q.cmdbuf.ibs and q.cmdbuf.commands == 0
    _locks_free(kmd)
    gate.u32[0] = 1
    q.write(out, 0, 5)
    q.finish()
    assert out.u32[0] == 5
    gpu.close()


@pytest.mark.parametrize("engine", ["gfx", "copy"])
def test_an_interrupted_write_after_an_event_leaves_it_the_last_thing_recorded(monkeypatch, engine):
    """A write interrupted while it waits for an IB records nothing, but it had taken a call
    number, and wait_event took that for a command recorded after the queue's last event:
    another queue's wait_event on it was a ValueError ("recorded commands after it and has
    not flushed it: flush that queue first"), though the event was the last thing recorded."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(engine=engine, max_inflight=1, ib_size_dw=64)
    gate, out = gpu.alloc(64), gpu.alloc(4096)
    n = q.max_write_dw
    q.write(out, 0, [0] * 3 * n)  # three IBs, back in the pool after
    q.finish()
    q.wait_mem(gate, 0, 1)  # one of them, held by the gate
    q.flush()
    ev = q.signal()  # the next: one left
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        q.write(out, 0, list(range(1, 2 * n + 1)))  # its first packet takes the last IB, the second waits
    assert fired
    gate.u32[0] = 1
    other = gpu.queue()
    other.wait_event(ev)  # flushes q up to ev, its last command
    other.write(out, 0x800, 9)
    other.finish()
    assert ev.signalled() and out.u32[0x200] == 9 and not out.u32[:2 * n].any()
    gpu.close()


@pytest.mark.parametrize("engine", ["gfx", "copy"])
def test_ctrl_c_in_a_write_waiting_for_its_second_ib_records_none_of_it(monkeypatch, engine):
    """A write of several packets whose second needs a new IB, and waits for one: interrupted
    there, its first packet stayed recorded, counted as no command, and ran at the next
    flush (the app, told the write raised, writing it again ran it twice). A recording call
    that raises now records nothing: the stream is as before the call, its IBs back in the
    pool."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue(engine=engine, max_inflight=1, ib_size_dw=64)
    gate, out = gpu.alloc(64), gpu.alloc(4096)
    n = q.max_write_dw  # (a packet of n dwords fills an IB: one per IB)
    q.write(out, 0, [0] * 3 * n)  # three IBs, back in the pool after
    q.finish()
    q.wait_mem(gate, 0, 1)  # one of them
    q.flush()
    q.write(out, 0x800, 1)  # the next: one left
    assert len(q.pool.free) == 1
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        q.write(out, 0, list(range(1, 2 * n + 1)))  # its first packet takes the last, the second waits
    assert fired and q.cmdbuf.commands == 1 and len(q.pool.free) == 1 and len(q.cmdbuf.ibs) == 1  # as before
    assert [*q.cmdbuf.labels.values(), *(lab for _, lab in q.cmdbuf._pending_labels)] == [Label("Queue.write() #3", 3)]
    _locks_free(kmd)
    gate.u32[0] = 1
    q.finish()
    assert out.u32[:2 * n].tolist() == [0] * 2 * n and out.u32[0x200] == 1  # (none of the interrupted write ran)
    q.write(out, 0, list(range(1, 2 * n + 1)))
    q.finish()
    assert out.u32[:2 * n].tolist() == list(range(1, 2 * n + 1))
    gpu.close()


def test_ctrl_c_in_alloc_waiting_for_memory(monkeypatch):
    """GTT full behind a held job: Device.alloc gives the cache back and waits for the
    queues; interrupted, the same alloc again works once the job ends, and every buffer
    and the device close."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=2)
    q = gpu.queue(flush_threshold=1 << 20)
    hold = fill_gtt_behind_a_held_submission(kmd, gpu, q)
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev)
    with pytest.raises(KeyboardInterrupt):
        gpu.alloc(0x20_0000, "gtt")
    assert fired
    _locks_free(kmd)
    hold.bo.u32[0x200] = 1
    again = gpu.alloc(0x20_0000, "gtt")
    again.u32[:2] = [7, 8]
    assert again.u32[:2].tolist() == [7, 8]
    q.finish()
    gpu.close()


@SYNC_ASYNC
@pytest.mark.parametrize("what", ["queue", "device"])
def test_ctrl_c_in_close_and_close_again(monkeypatch, async_submit, what):
    """close() waits for the queue's last job: interrupted there, nothing is released yet,
    and close() again finishes it (the job's writes done, the context freed)."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=async_submit)
    gate, out = gpu.alloc(64), gpu.alloc(64)
    q.wait_mem(gate, 0, 1)
    q.write(out, 0, 5)
    closing = q if what == "queue" else gpu
    gate_cpu = gate.u32  # (mapped now: `then` runs inside the KMD's wait, where an ioctl is refused)
    fired = _ctrl_c_in_the_next_wait(monkeypatch, kmd.dev, then=lambda: gate_cpu.__setitem__(0, 1))
    with pytest.raises(KeyboardInterrupt):
        closing.close()
    assert fired and not closing.closed
    _locks_free(kmd)
    if what == "queue":
        q.close()
        assert q.closed and out.u32[0] == 5
    gpu.close()
    assert gpu.closed and not kmd.files


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="Python runs signal handlers in the main thread only")
@pytest.mark.parametrize("where", ["end", "start"])
def test_a_signal_while_a_flush_swaps_the_handlers_leaves_none_held(monkeypatch, where):
    """umd/signals.py's deferred_stops holds SIGINT, SIGALRM, SIGTERM and SIGHUP around a
    flush's bookkeeping, one `signal.signal` call each to hold them and to give them back. A
    ^C coming after SIGINT's own handler was back, before SIGALRM's was, raised out of the
    loop: SIGALRM, SIGTERM and SIGHUP stayed held for good (noted into a list nobody read),
    so `gpucosim run --timeout`'s SIGALRM never stopped the run again. Likewise at the start
    (a signal whose handler raises, between two of the holding calls). Every handler is the
    app's again now, and the exception is raised after."""
    import signal
    from umd.signals import deferred_stops
    came: list = []
    raising = [where == "start"]

    def alarm(signum, frame):
        came.append(signum)
        if raising.pop() if raising else False:
            raise KeyboardInterrupt("alarm")

    def interrupt(signum, frame):
        raise KeyboardInterrupt("^C")

    prev = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGALRM)}
    real = signal.signal
    sent: list = []

    def signal_(signum, handler):  # the signal right after SIGINT's handler is set (back)
        out = real(signum, handler)
        if not sent and signum == signal.SIGINT and (handler is interrupt) == (where == "end"):
            sent.append(True)
            signal.raise_signal(signal.SIGINT if where == "end" else signal.SIGALRM)
        return out
    try:
        real(signal.SIGINT, interrupt)
        real(signal.SIGALRM, alarm)
        monkeypatch.setattr(signal, "signal", signal_)
        with pytest.raises(KeyboardInterrupt):
            with deferred_stops():
                pass
        monkeypatch.undo()
        assert sent
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGALRM)) == (interrupt, alarm)
        came.clear()
        signal.raise_signal(signal.SIGALRM)  # the app's handler runs, not a held note
        assert came == [signal.SIGALRM]
    finally:
        monkeypatch.undo()
        for s, h in prev.items():
            signal.signal(s, h)
