"""A failed job's error reaches the app once, at its first flush, finish, Event.wait or
close after the failure, on every kind of queue, whatever made the job fail.

It was lost where the kernel does not refuse the whole context after the failure: a copy
queue and a high-priority gfx queue, whose ring is reset alone (the context runs on, its
later jobs end well and the user fence passes the failed job's seqno), and any queue whose
job was cancelled because a job it waited for (wait_event) failed. `q.emit_raw(bad);
q.flush(); q.write(...); q.finish()` returned normally there (umd/failed_jobs.py says how
the queue finds them now). And close() swallowed every finish error, so a failed job
nobody waited for was lost on every queue, the normal gfx queue's too.

`check_*(dev)` run on the RTL too (tests/cosim/test_rtl_drivers.py).
"""

from __future__ import annotations

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from spec import pm4, sdma
from testbench.refmodel import RefModel

JOB_TIMEOUT = 20_000
# queue kind -> Device.queue() arguments
KINDS = {"gfx": {}, "gfx_high": {"priority": "high"}, "copy": {"engine": "copy"}}
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
        kmd.dev.delay(JOB_TIMEOUT // 4 if failure == "hang" else 2_000)
        kmd.service()
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
    kmd_model.bind(RefModel(), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT))
    gpu = umd.open()
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    what, command = _bad_job(gpu, q, failure, flag)
    with pytest.raises(umd.GpuError) as ei:
        _learn(q, how, buf)
    e = ei.value
    assert str(e).startswith(what), str(e)
    assert e.command == command and e.waited_for == (failure == "dep")
    runs_on = kind != "gfx" or failure == "dep"  # (a gfx error resets the whole GPU: the context is guilty)
    if runs_on and how != "close":
        # once: the queue runs on, what it had recorded (a refused flush keeps it) included
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
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open()
    q = gpu.queue(**KINDS[kind])
    what, command = _bad_job(gpu, q, "packet", None)
    with pytest.raises(umd.GpuError, match="^" + what) as ei:
        q.close()
    assert ei.value.command == command and q.closed
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_an_event_before_the_failed_job_does_not_raise_it(kind):
    """A wait on an event the queue signalled before the failed job ends well, and leaves
    the error to the first call that covers the failed job (here finish)."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    q.write(buf, 0, 1)
    ok = q.signal()
    q.flush()
    _bad_job(gpu, q, "packet", None)
    assert ok.wait()
    with pytest.raises(umd.GpuError, match="illegal opcode"):
        q.finish()
    q.finish()
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_an_async_queue_raises_it_at_finish(kind):
    """An async queue's flush makes no ioctl on the app's thread: the error comes at the
    next finish (or Event.wait, close) instead, once."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
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
    kmd.dev.delay(5_000)
    kmd.service()
    before = kmd.stats["ioctls"]
    q.finish()
    assert kmd.stats["ioctls"] - before <= 2  # the CTX query, and a WAIT_CS only if the fence had not passed
    assert not q.watch.jobs
    before = kmd.stats["ioctls"]
    q.finish()
    assert kmd.stats["ioctls"] == before
    gpu.close()


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
