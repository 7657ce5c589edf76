"""A failed job's error reaches the app once, at its first flush, finish, Event.wait or
close after the failure, on every kind of queue, whatever made the job fail.

It was lost where the kernel does not refuse the whole context after the failure: a queue
whose ring is reset alone, every queue now that ring 0 has CP_QUEUE_RESET.Q0 (the context
runs on, its later jobs end well and the user fence passes the failed job's seqno), and any
queue whose
job was cancelled because a job it waited for (wait_event) failed. `q.emit_raw(bad);
q.flush(); q.write(...); q.finish()` returned normally there (umd/failures/failed_jobs.py says how
the queue finds them now). And close() swallowed every finish error, so a failed job
nobody waited for was lost on every queue, the normal gfx queue's too.

`check_*(dev)` run on the RTL too (tests/cosim/test_rtl_drivers.py).
"""

from __future__ import annotations

import contextlib
import errno
import time

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from spec import pm4, sdma
from testbench.refmodel import RefModel
from tests.umd.drive import run_device

JOB_TIMEOUT = 20_000
# queue kind -> Device.queue() arguments ("gfx_full": a normal gfx queue on a model where queue
# 0's reset does not come back, so its failure ends in the full reset: the context stays guilty)
KINDS = {"gfx": {}, "gfx_high": {"priority": "high"}, "copy": {"engine": "copy"}, "gfx_full": {}}


def _model(kind: str) -> RefModel:
    from tests.kmd_sched.sched_helpers import NoQueue0Reset
    return NoQueue0Reset() if kind == "gfx_full" else RefModel()
UNMAPPED = 0x7000_0000  # (beyond the page tables: a VM fault)


def _bad_job(gpu, q, failure: str, flag) -> tuple[str, str | None]:
    """Record a job on `q` that fails by `failure`, flush it and let the failure happen
    before anything else of `q` is submitted. Returns the start of its error's message and
    the API call the error names."""
    copy = q.engine == "copy"
    if failure == "packet":
        q.emit_raw([0xFFFF_FFF0] if copy else [pm4.header(0x7B, 0), 0])
        what = "GPU error: illegal opcode " + ("0xf0" if copy else "0x7b")
        command = "Queue.emit_raw() #1"
    elif failure == "fault":
        q.emit_raw(sdma.write_linear(UNMAPPED, [1]) if copy else pm4.write_data(UNMAPPED, [1]))
        what, command = f"GPU error: VM fault{'' if copy else ': WRITE'} at {UNMAPPED:#x}", "Queue.emit_raw() #1"
    elif failure == "hang":
        q.wait_mem(flag, 0, 1)  # nobody writes the flag: the job timer ends it
        what, command = "GPU error: job 0x1 timed out", "Queue.wait_mem() #1"
    else:  # a job of another queue, which this one waits for, fails: this one's is cancelled
        other = gpu.queue()
        other.emit_raw([pm4.header(0x7B, 0), 0])
        ev = other.signal()
        other.flush()
        q.wait_event(ev)
        q.write(flag, 12, 1)  # (cancelled: never written)
        what, command = "GPU error in a job this queue waited for (wait_event): illegal opcode 0x7b", None
    q.flush()
    kmd = kmd_model.bound()
    for _ in range(12 if failure == "hang" else 1):  # (the job timer looks at the ring now and then)
        run_device(kmd, JOB_TIMEOUT // 4 if failure == "hang" else 2_000)
    if failure == "dep":
        with pytest.raises(umd.GpuError):
            other.finish()  # (its own error, told to its own queue)
    return what, command


def _learn(q, how: str, buf) -> None:
    """What the app does next, through which it must learn of the failure."""
    q.write(buf, 0, 9)
    if how == "finish":
        q.finish()
    elif how == "event":
        q.signal().wait()
    elif how == "flush":
        q.flush()
    else:
        q.close()


@pytest.mark.parametrize("how", ["finish", "event", "flush", "close"])
@pytest.mark.parametrize("failure", ["packet", "fault", "hang", "dep"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_failed_job_is_raised_at_the_next_call_once(kind, failure, how):
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT, hw_timeout=2_000,
                                           cap_sys_nice=True))  # (gfx_high asks for HIGH)
    gpu = umd.open()
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    what, command = _bad_job(gpu, q, failure, flag)
    with pytest.raises(umd.GpuError) as ei:
        _learn(q, how, buf)
    e = ei.value
    assert str(e).startswith(what), str(e)
    assert e.command == command and e.waited_for == (failure == "dep")
    runs_on = kind != "gfx_full" or failure == "dep"  # (the full reset leaves the context guilty)
    if runs_on and how != "close":
        # once: the queue runs on, what it had recorded (submitted by the raising call) included
        q.write(buf, 4, 5)
        q.finish()
        assert buf.u32[:2].tolist() == [9, 5]
        if how == "event":
            assert q.signal().wait()
    elif not runs_on and how != "close":
        with pytest.raises(umd.GpuError) as again:  # the guilty context refuses its work (as before)
            q.flush() if q.cmdbuf.ibs else (q.write(buf, 4, 5), q.flush())
        assert again.value.refused
    gpu.queue(**KINDS[kind]).finish()  # (the device runs on)
    gpu.close()  # nothing more to raise: each error was raised once


@pytest.mark.parametrize("kind", list(KINDS))
def test_closing_a_queue_raises_a_failure_nobody_waited_for(kind):
    """bad; flush; close: close() finished the queue and swallowed the finish's error, on
    every kind of queue. It raises it now, once the context is released; Device.close()
    does not raise it again."""
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, hw_timeout=2_000, cap_sys_nice=True))
    gpu = umd.open()
    q = gpu.queue(**KINDS[kind])
    what, command = _bad_job(gpu, q, "packet", None)
    with pytest.raises(umd.GpuError, match="^" + what) as ei:
        q.close()
    assert ei.value.command == command and q.closed
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx", "gfx_high", "copy"])
def test_an_event_before_the_failed_job_does_not_raise_it(kind):
    """A wait on an event the queue signalled before the failed job ends well, and leaves
    the error to the first call that covers the failed job (here finish)."""
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    q.write(buf, 0, 1)
    ok = q.signal()
    q.flush()
    _bad_job(gpu, q, "packet", None)
    assert ok.wait()  # (its job and the failed one, which the fence has passed, leave the queue's in-flight list)
    with pytest.raises(umd.GpuError, match="illegal opcode") as ei:
        q.finish()
    assert ei.value.command == "Queue.emit_raw() #3"  # (found in the failed submission all the same)
    q.finish()
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx", "gfx_high", "copy"])
def test_an_async_queue_raises_it_at_finish(kind):
    """An async queue's flush makes no ioctl on the app's thread: the error comes at the
    next finish (or Event.wait, close) instead, once."""
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    what, command = _bad_job(gpu, q, "packet", None)
    q.write(buf, 0, 9)
    q.flush()
    with pytest.raises(umd.GpuError, match="^" + what) as ei:
        q.finish()
    assert ei.value.command == command
    q.write(buf, 4, 5)
    q.finish()
    assert buf.u32[:2].tolist() == [9, 5]
    gpu.close()


def test_an_async_queues_job_cancelled_for_its_dependency_after_a_look_is_raised_at_finish():
    """A job of an async queue cancelled because the job it waited for (wait_event) failed
    moves no reset counter: the queue's look after the reset saw the count it sees at
    finish, so only asking the kernel about that job (it carries a dependency) finds its
    error; taken for ended well (the fence passed its seqno), the error was lost."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(async_submit=True)
    other = gpu.queue()
    other.emit_raw([pm4.header(0x7B, 0), 0])
    ev = other.signal()
    other.flush()
    run_device(kmd_model.bound(), 2_000)
    with pytest.raises(umd.GpuError, match="illegal opcode"):
        other.finish()
    q.write(buf, 0, 1)
    q.finish()  # (a look after the reset: the count it sees from now on)
    q.wait_event(ev)
    q.write(buf, 12, 1)  # (cancelled with its dependency: never written)
    q.flush()
    q.write(buf, 0, 9)
    q.flush()
    with pytest.raises(umd.GpuError, match="^GPU error in a job this queue waited for") as ei:
        q.finish()
    assert ei.value.waited_for and buf.u32[0] == 9 and buf.u32[3] == 0
    q.finish()  # (once)
    gpu.close()


def test_proving_a_copy_queues_jobs_costs_one_ioctl_per_look():
    """With no reset since the queue last looked (CTX QUERY_STATE's reset count), the jobs
    the user fence has passed ended well: one ioctl however many flushes were in flight,
    and none when nothing new was flushed."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    buf = gpu.alloc(4096)
    q = gpu.queue(engine="copy")
    q.write(buf, 0, 1)
    q.finish()  # the first look asks about each job (no count seen yet)
    for i in range(8):
        q.write(buf, 4 * i, i)
        q.flush()
    run_device(kmd, 5_000)
    before = kmd.stats["ioctls"]
    q.finish()
    assert kmd.stats["ioctls"] - before <= 2  # the CTX query, and a WAIT_CS only if the fence had not passed
    assert not q.watch.jobs
    before = kmd.stats["ioctls"]
    q.finish()
    assert kmd.stats["ioctls"] == before
    gpu.close()


# ---------------------------------------------------------------------------- found by the mutation campaign

def test_jobs_proven_good_cost_no_wait_and_are_forgotten():
    """A copy queue's first look asks about each job (no reset count seen yet) and forgets
    the ones that ended well; later looks, with no reset since, ask the kernel about none
    (no WAIT_CS: the user fence proves them), however many flushes come."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    buf = gpu.alloc(4096)
    q = gpu.queue(engine="copy")
    for i in range(3):
        q.write(buf, 4 * i, i)
        q.flush()
        run_device(kmd_model.bound(), 2_000, service=False)
        assert len(q.watch.jobs) == 1  # (the one just flushed: the look before it proved the last)
    q.finish()
    assert not q.watch.jobs
    waits, wait_cs = [], q.ws.wait_cs
    q.ws.wait_cs = lambda *a: waits.append(a) or wait_cs(*a)
    for i in range(8):
        q.write(buf, 4 * i, i)
        q.flush()
    run_device(kmd_model.bound(), 5_000, service=False)
    q.write(buf, 0, 1)
    q.flush()
    q.finish()
    assert len(waits) <= 1 and not q.watch.jobs  # (finish's own wait, if the fence had not passed)
    # jobs flushed while the first of them still runs are kept, then all forgotten at one look
    flag = gpu.alloc(64)
    q.wait_mem(flag, 0, 1)
    q.flush()
    for i in range(3):
        q.write(buf, 4 * i, i)
        q.flush()
    assert len(q.watch.jobs) == 4
    flag.u32[0] = 1
    q.finish()
    assert len(waits) <= 2 and not q.watch.jobs
    gpu.close()


def test_a_job_still_running_at_a_look_is_asked_again_and_its_failure_raised():
    """A look while a job still runs keeps it (its WAIT_CS asks without waiting: no ETIME),
    and the look after its hang raises its error."""
    kmd_model.bind(RefModel(), KmdParams(job_timeout=JOB_TIMEOUT))
    gpu = umd.open()
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(engine="copy")
    q.wait_mem(flag, 0, 1)  # nobody writes the flag: the job timer ends it
    q.flush()
    q.write(buf, 0, 1)
    q.flush()  # a look: the first job still runs
    assert len(q.watch.jobs) == 2
    kmd = kmd_model.bound()
    for _ in range(12):
        run_device(kmd, JOB_TIMEOUT // 4)
    with pytest.raises(umd.GpuError, match="timed out") as ei:
        q.finish()
    assert ei.value.command == "Queue.wait_mem() #1"
    q.finish()
    gpu.close()


def test_two_jobs_failed_between_looks_are_raised_together():
    """An async queue's flushes make no look (the thread makes the CS): two jobs may fail,
    each resetting the ring, before the app's next call. That call's look asks about every
    job (the reset count moved) and raises both, the first with the second as its note,
    each naming its call (raised one a call after the other before:
    tests/umd/failures/test_umd_several_failures.py)."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(engine="copy", async_submit=True)
    kmd = kmd_model.bound()
    for n in (1, 2):
        q.emit_raw([0xFFFF_FFF0])
        q.flush()
        deadline = time.monotonic() + 10
        while kmd.stats["cs"] < n and time.monotonic() < deadline:  # (the thread's CS)
            time.sleep(0.001)
        # it fails, and its ring is reset, before the next is submitted (the KMD counts the CS
        # before the job is on the ring: run the device until the reset, bounded, not 4 rounds)
        while kmd.stats["queue_resets"] < n and time.monotonic() < deadline:
            run_device(kmd, 2_000)
        assert kmd.stats["queue_resets"] == n
    q.write(buf, 0, 9)  # (a job that ends well last: finish's own wait raises nothing)
    with pytest.raises(umd.GpuError, match="illegal opcode 0xf0") as ei:
        q.finish()
    assert ei.value.command == "Queue.emit_raw() #1"
    assert [n.endswith("(recorded by Queue.emit_raw() #2)") for n in ei.value.__notes__] == [True]
    q.finish()
    assert buf.u32[0] == 9
    gpu.close()


def test_a_flush_of_two_cs_whose_second_failed_is_raised():
    """A copy flush past max_ib_chunks IBs takes several CS: each is asked about, the last
    too (its job failed here, the first ended well)."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False, max_ib_chunks=1))
    gpu = umd.open()
    buf = gpu.alloc(4096)
    q = gpu.queue(engine="copy", ib_size_dw=64)
    for i in range(12):  # the first IB
        q.write(buf, 4 * i, i)
    q.emit_raw([0xFFFF_FFF0] * 8)  # the second
    q.flush()
    assert len(q.cmdbuf.ibs) == 0 and q.inflight[-1].ncs == 2
    kmd = kmd_model.bound()
    for _ in range(4):
        run_device(kmd, 2_000)
    q.write(buf, 0, 9)
    with pytest.raises(umd.GpuError, match="illegal opcode 0xf0") as ei:
        q.finish()
    assert ei.value.command == "Queue.emit_raw() #13"
    gpu.close()


def test_a_look_that_finds_the_device_lost_raises_device_lost(monkeypatch):
    """A look whose kernel answers EIO (the device lost) raises DeviceLost for the call that
    looked, not an AttributeError for the error's missing job."""
    from kmd_model.uapi import KmdError

    kmd_model.bind(RefModel())
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(engine="copy")
    q.write(buf, 0, 1)
    q.flush()

    def lost(*args):
        raise KmdError(errno.EIO, "the device is wedged")

    monkeypatch.setattr(q.ws, "wait_cs", lost)
    monkeypatch.setattr(q.ws, "ctx_query", lost)
    q.write(buf, 0, 2)
    with pytest.raises(umd.DeviceLost, match="^flush: the device is wedged$"):
        q.flush()


def test_a_wait_whose_look_finds_the_device_lost_names_the_wait(monkeypatch):
    """Event.wait's looks (on an event signalled in memory, and after its own wait) and its
    question about a job that ended without signalling: a kernel answering EIO there is
    DeviceLost naming the wait."""
    from kmd_model.uapi import KmdError

    def lost(*args):
        raise KmdError(errno.EIO, "the device is wedged")

    kmd = kmd_model.bind(RefModel(), KmdParams(cs_check=False))

    def settle():
        for _ in range(4):
            run_device(kmd, 2_000)

    for case in ("signalled", "waited", "unsignalled"):
        gpu = umd.open()
        buf = gpu.alloc(64)
        q = gpu.queue(engine="copy")
        if case == "unsignalled":  # its job fails (raised already), one flushed after it ends well
            q.emit_raw([0xFFFF_FFF0])
            ev = q.signal()
            q.flush()
            settle()
            q.write(buf, 4, 2)
            with pytest.raises(umd.GpuError):
                q.flush()
            q.flush()
        else:  # two jobs, the event on the last, which the look asks about
            q.wait_mem(buf, 60, 1)  # (neither runs before both are flushed: the second flush's look sees none end)
            q.write(buf, 0, 1)
            q.flush()
            q.write(buf, 4, 2)
            ev = q.signal()
            q.flush()
            buf.u32[15] = 1  # (waited: they run during the wait's own WAIT_CS)
        if case != "waited":
            settle()
        real, calls = q.ws.wait_cs, []
        # (waited: the wait's own WAIT_CS answers, the look's ioctls after it fail)
        monkeypatch.setattr(q.ws, "wait_cs", lambda *a: calls.append(a) or (real(*a) if case == "waited" and
                                                                            len(calls) == 1 else lost()))
        monkeypatch.setattr(q.ws, "ctx_query", lost)
        # (memory's answer alone: a public look that finds it unsignalled lets the GPU run)
        assert ev._signalled() == (case == "signalled") and q.seq_done(ev.seq) == (case != "waited")
        with pytest.raises(umd.DeviceLost, match="^wait: the device is wedged$"):
            ev.wait()
        monkeypatch.undo()
        gpu.close()


def test_a_timestamp_of_a_job_cancelled_for_its_dependency_is_not_read():
    """A job cancelled because the job it waited for failed never wrote its timestamp, and
    the fence passes it once a later job ends: from the queue's first suspect job on
    (Queue.failed_from) the wait asks the kernel, and raises. A dependency's error names the
    other context's seqno, which says nothing of this queue's: taken for this queue's first
    suspect job, it put the cancelled job before it, and its timestamp read as the GPU's (0)."""
    kmd = kmd_model.bind(RefModel(), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(64)
    other, q = gpu.queue(), gpu.queue(priority="high")
    for i in range(5):  # (the other queue's seqnos run ahead of this one's)
        other.write(buf, 0, i)
        other.flush()
    other.emit_raw([pm4.header(0x7B, 0), 0])
    ev = other.signal()
    other.flush()
    q.wait_event(ev)
    ts = q.timestamp()  # (its job is cancelled: never written)
    q.flush()
    for _ in range(4):
        run_device(kmd, 2_000)
    with pytest.raises(umd.GpuError):
        other.finish()
    q.write(buf, 4, 1)
    with pytest.raises(umd.GpuError, match="waited for") as ei:
        q.flush()  # (the cancelled job's error; the write is submitted all the same)
    assert ei.value.info.seq > ts.seq
    q.finish()  # the fence passes the cancelled job
    assert ts.signalled()
    with pytest.raises(umd.GpuError, match="waited for"):
        ts.wait()
    gpu.close()


def test_the_errors_raised_are_remembered_up_to_a_bound():
    """The (context, seqno) of the last REPORTED_KEPT errors raised are kept, the oldest
    dropped first, so a long-running queue's memory of them stays bounded."""
    from types import SimpleNamespace

    from kmd_model.uapi import HwErrorInfo, KmdError
    from umd.failures import failed_jobs

    q = SimpleNamespace(watch=failed_jobs.Watch())
    n = failed_jobs.REPORTED_KEPT + 1
    for seq in range(1, n + 1):
        info = HwErrorInfo("ILLEGAL_OPCODE", "IB1", 0x7B, None, 0, 0, seq, 1, "illegal opcode")
        failed_jobs.mark_reported(q, KmdError(errno.ECANCELED, "CS", info))
    failed_jobs.mark_reported(q, KmdError(errno.EIO, "the device is wedged"))  # (no job: nothing kept)
    assert list(q.watch.reported) == [(1, seq) for seq in range(2, n + 1)]


# ---------------------------------------------------------------------------- on the RTL too

def check_a_copy_queues_failed_job_reaches_finish(dev):
    """The brief's program on the copy engine: a bad packet flushed, the engine's ring reset
    alone, a write flushed after it; finish raises the bad job's error, naming emit_raw,
    once, and the queue runs on."""
    kmd_model.bind(dev, cs_check=False)
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(engine="copy")
    what, command = _bad_job(gpu, q, "packet", None)
    q.write(buf, 0, 9)
    with pytest.raises(umd.GpuError, match="^" + what) as ei:
        q.finish()
    assert ei.value.command == command
    q.write(buf, 4, 5)
    q.finish()
    assert buf.u32[:2].tolist() == [9, 5]
    gpu.close()


CHECKS = [check_a_copy_queues_failed_job_reaches_finish]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_job_its_files_ban_cancelled_is_device_lost(kind):
    """A job waiting (wait_event) for another queue's job that hangs is cancelled when that
    hang bans the whole file (file_ban_after_hangs): the KMD's ECANCELED carries no GPU
    error then, and came out as SubmitError('ECANCELED: WAIT_CS: fd N is banned'), where
    errors.py says a banned file is DeviceLost (its next CS's EIO says so)."""
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT, file_ban_after_hangs=1,
                                                 hw_timeout=2_000, cap_sys_nice=True))
    gpu = umd.open()
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    hangs, q = gpu.queue(), gpu.queue(**KINDS[kind])
    q.write(buf, 4, 7)
    q.flush()
    hangs.wait_mem(flag, 0, 1)  # nobody writes the flag
    ev = hangs.signal()
    hangs.flush()
    q.wait_event(ev)
    q.write(buf, 0, 9)
    q.flush()
    for _ in range(12):
        run_device(kmd, JOB_TIMEOUT // 4)
    with pytest.raises(umd.DeviceLost, match=r"^finish: its job was cancelled: WAIT_CS: fd \d+ is banned") as ei:
        q.finish()
    assert type(ei.value) is umd.DeviceLost  # (not QueueBanned: no new queue of this file runs)
    assert buf.u32[:2].tolist() == [0, 7]  # (the job before the wait ran, the cancelled one did not)
    with pytest.raises(umd.DeviceLost, match=r"^flush: .*fd \d+ is banned"):  # (and so is what follows)
        q.write(buf, 0, 9)
        q.flush()


def test_a_lost_device_refuses_memory_with_device_lost():
    """A reset that fails loses the device, and the KMD then refuses new device memory
    (GEM_CREATE and GEM_VA MAP: EIO with the reason; the engine that never went idle may still
    reach what was freed, which is never handed out again: kmd_model/reset/recovery.py wedge).
    The app's alloc, a new queue and a queue's own memory (a new IB) raise DeviceLost naming
    the call and the kernel's words, in one line; they raised the raw KmdError."""
    import re

    from tests.kmd.test_kmd_ioctl import Client
    from tests.kmd_sched.reset.test_kmd_recovery import StuckResetModel

    dev = StuckResetModel()
    kmd = kmd_model.bind(dev, cs_check=False, hw_timeout=2000)
    gpu = umd.open(pools=False)
    buf = gpu.alloc(0x1000)
    q = gpu.queue(flush_threshold=1 << 20, ib_size_dw=64)
    bad = Client()
    seq = bad.submit(bad.ib(bad.bo(), [pm4.header(0x7B, 0), 0]))
    dev.stuck = True
    with pytest.raises(kmd_model.uapi.KmdError):
        bad.wait(seq)  # the CP error's reset fails
    lost = re.escape(f"GEM_CREATE: {kmd.wedged}")
    with pytest.raises(umd.DeviceLost, match=f"^alloc: {lost}$"):
        gpu.alloc(0x1000)
    with pytest.raises(umd.DeviceLost, match=f"^queue: {lost}$"):
        gpu.queue()
    with pytest.raises(umd.DeviceLost, match=f"^write \\(a new IB\\): {lost}$"):
        for i in range(100):  # more than the first IB holds: a new IB
            q.write(buf, 4 * (i % 0x400), i)
