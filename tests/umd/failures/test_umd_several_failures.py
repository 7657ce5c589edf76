"""Several failed jobs before the app's next call: each is raised once, at that call.

A call raises every failed job it finds that the app was not told of, the oldest as the
exception and each other as a note of it ("and: GpuError: ..."), as close() raises several
errors (umd/errors.py: a failed job's error is raised once, at the queue's first call after
the failure). Before, each later call raised one of them, so an app that handled the first
and went on was told of the next one a call late; close() (of the queue or the Device),
with nothing after it, raised the first and lost the rest; and a wait on an event before
the failed jobs let them pass for ended well.

Built as tests/umd/failures/test_umd_lost_failures.py builds its failures, on every queue kind: jobs
waiting (wait_event) for two other queues' jobs that fail (every kind: a normal gfx
queue's context is not reset for them), and a queue's own bad jobs (a copy or
high-priority gfx queue, whose ring is reset alone and whose context runs on; async, so
that no flush looks in between).
"""

from __future__ import annotations

import re
import time

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from spec import pm4
from testbench.refmodel import RefModel

from ..drive import run_device
from .test_umd_lost_failures import KINDS, _model

BAD_SDMA = [0xFFFF_FFF0]  # an illegal SDMA opcode (0xf0)
WAITED = "GPU error in a job this queue waited for (wait_event): illegal opcode 0xf0"


def _settle(kmd, cs: int | None = None) -> None:
    """Let the submission thread make `cs` CS in all (async), then the GPU fail and reset."""
    deadline = time.monotonic() + 10
    while cs is not None and kmd.stats["cs"] < cs and time.monotonic() < deadline:
        time.sleep(0.001)
    run_device(kmd, 2_000, rounds=4)  # (the thread's CS, counted, may be pushing its job yet)


def _two_waited_for(gpu, q, buf):
    """Two jobs of `q`, each waiting for a job of another (copy) queue that fails once both
    are flushed: the two are cancelled for two distinct errors. Returns the two other
    queues, whose own errors are theirs to raise."""
    flag = gpu.alloc(64)
    others, events = [], []
    for _ in range(2):
        other = gpu.queue(engine="copy")
        other.wait_mem(flag, 0, 1)  # (both of q's jobs are flushed before either fails)
        other.emit_raw(BAD_SDMA)
        events.append(other.signal())
        other.flush()
        others.append(other)
    for i, ev in enumerate(events):
        q.wait_event(ev)
        q.write(buf, 4 * i, 1)  # (cancelled: never written)
        q.flush()
    flag.u32[0] = 1
    _settle(kmd_model.bound())
    return others


def _learn(q, how: str, buf) -> None:
    q.write(buf, 8, 9)
    if how == "finish":
        q.finish()
    elif how == "event":
        q.signal().wait()
    elif how == "flush":
        q.flush()
    else:
        q.close()


# the note a flush that raised earlier work's errors adds, saying what it submitted all the
# same (tests/umd/failures/test_umd_flush_after_failure.py)
SUBMITTED_NOTE = re.compile(r"^\w+: the commands recorded since the last flush \(")


def _notes(e) -> list[str]:
    """The errors raised with `e` (its notes), without the note of what its flush submitted."""
    return [n for n in getattr(e, "__notes__", []) if not SUBMITTED_NOTE.match(n)]


@pytest.mark.parametrize("how", ["finish", "event", "flush", "close"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_two_jobs_cancelled_for_two_failures_are_raised_together(kind, how):
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    first, second = _two_waited_for(gpu, q, buf)
    with pytest.raises(umd.GpuError, match="^" + re.escape(WAITED)) as ei:
        _learn(q, how, buf)
    e = ei.value
    assert e.waited_for and e.context == first.ctx_id, str(e)
    assert len(_notes(e)) == 1 and _notes(e)[0].startswith("and: GpuError: " + WAITED), _notes(e)
    assert _notes(e)[0].endswith(f"context {second.ctx_id}"), _notes(e)
    if how != "close":  # once: the queue runs on, and the next calls raise nothing
        q.write(buf, 12, 5)
        q.finish()
        assert buf.u32[:4].tolist() == [0, 0, 9, 5]
        assert q.signal().wait()
    for other in (first, second):
        with pytest.raises(umd.GpuError, match="illegal opcode 0xf0"):
            other.finish()  # (each one's own error, its own queue's to raise)
    gpu.close()  # nothing more to raise: each error was raised once


def _two_own(gpu, q, buf) -> None:
    """Two bad jobs of async queue `q`, each failing (and its ring reset) before the next is
    submitted, with a good job after them."""
    kmd = kmd_model.bound()
    cs = kmd.stats["cs"]
    for n in (1, 2):
        q.emit_raw(BAD_SDMA if q.engine == "copy" else [pm4.header(0x7B, 0), 0])
        q.flush()
        _settle(kmd, cs + n)
    q.write(buf, 0, 9)  # (a job that ends well last: finish's own wait raises nothing)
    q.flush()
    _settle(kmd, cs + 3)


@pytest.mark.parametrize("how", ["finish", "event", "close", "device_close"])
@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_two_own_failed_jobs_are_raised_together(kind, how):
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    _two_own(gpu, q, buf)
    opcode = "0xf0" if kind == "copy" else "0x7b"
    with pytest.raises(umd.GpuError, match=f"^GPU error: illegal opcode {opcode}") as ei:
        {"finish": q.finish, "event": lambda: q.signal().wait(), "close": q.close, "device_close": gpu.close}[how]()
    assert ei.value.command == "Queue.emit_raw() #1"
    assert len(_notes(ei.value)) == 1 and _notes(ei.value)[0].startswith(f"and: GpuError: GPU error: illegal "
                                                                         f"opcode {opcode}"), _notes(ei.value)
    assert _notes(ei.value)[0].endswith("(recorded by Queue.emit_raw() #2)"), _notes(ei.value)
    if how in ("finish", "event"):
        q.finish()
        assert buf.u32[0] == 9
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_the_last_job_and_one_before_it_failed_are_raised_oldest_first(kind):
    """finish() waits for the last job, whose WAIT_CS raised its error first: the failed job
    before it came a call later, after it. Both at once now, in the order they ran."""
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    kmd = kmd_model.bound()
    for n in (1, 2):
        q.emit_raw(BAD_SDMA if kind == "copy" else [pm4.header(0x7B, 0), 0])
        q.flush()
        _settle(kmd, n)
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    assert ei.value.command == "Queue.emit_raw() #1", str(ei.value)
    assert [n.endswith("(recorded by Queue.emit_raw() #2)") for n in _notes(ei.value)] == [True], _notes(ei.value)
    q.finish()
    gpu.close()


@pytest.mark.parametrize("kind", list(KINDS))
def test_two_queues_of_one_device_each_raise_their_own(kind):
    """Bad jobs on two queues of one Device: each queue's next call raises its own job's
    error only, once; the Device's close raises nothing more. (Closed without those calls,
    the Device raises both, the second as a note.)"""
    for calls in (True, False):
        kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
        gpu = umd.open()
        buf = gpu.alloc(64)
        queues = [gpu.queue(**KINDS[kind]) for _ in range(2)]
        for q in queues:
            q.emit_raw(BAD_SDMA if kind == "copy" else [pm4.header(0x7B, 0), 0])
            q.flush()
            _settle(kmd_model.bound())
        if not calls:
            with pytest.raises(umd.GpuError) as ei:
                gpu.close()
            assert ei.value.context == queues[0].ctx_id and len(_notes(ei.value)) == 1, _notes(ei.value)
            assert _notes(ei.value)[0].endswith(f"context {queues[1].ctx_id} (recorded by Queue.emit_raw() #1)")
            continue
        for q in queues:
            q.write(buf, 0, 9)
            with pytest.raises(umd.GpuError) as ei:
                q.finish()
            assert ei.value.context == q.ctx_id and not _notes(ei.value), (str(ei.value), _notes(ei.value))
        gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_a_wait_on_an_event_before_two_failed_jobs_leaves_them_to_the_next_call(kind):
    """A wait on an event signalled before the failed job sees the reset count move and asks
    about the jobs up to its event only; the look after it (finish) found the count as seen
    and took the failed job, whose seqno the fence had passed, for ended well: its error was
    lost, close() too raising nothing."""
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    q.write(buf, 0, 1)
    ok = q.signal()
    q.flush()
    q.emit_raw(BAD_SDMA if kind == "copy" else [pm4.header(0x7B, 0), 0])
    q.flush()
    q.write(buf, 4, 2)
    q.flush()
    _settle(kmd_model.bound(), 3)
    # (nothing recorded: a flush takes in what the thread has submitted, and looks at nothing;
    # the KMD counts the third CS before the thread has handed it over, so take it in until then)
    deadline = time.monotonic() + 10
    q.flush()
    while len(q.watch.jobs) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
        q.flush()
    assert len(q.watch.jobs) == 3
    assert ok.wait()
    with pytest.raises(umd.GpuError, match="illegal opcode") as ei:
        q.finish()
    assert ei.value.command == "Queue.emit_raw() #3"
    assert buf.u32[:2].tolist() == [1, 2]
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_a_wait_raises_the_failures_up_to_its_event_only(kind):
    """An event of a failed job: its wait raises that job's error (and those of failed jobs
    before it), not a later job's, which is the next call's to raise."""
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    bad = BAD_SDMA if kind == "copy" else [pm4.header(0x7B, 0), 0]
    q.emit_raw(bad)
    ev = q.signal()
    q.flush()
    q.emit_raw(bad)
    q.flush()
    q.write(buf, 0, 9)
    q.flush()
    _settle(kmd_model.bound(), 3)
    for call, n in ((ev.wait, 1), (q.finish, 3)):
        with pytest.raises(umd.GpuError, match="illegal opcode") as ei:
            call()
        assert ei.value.command == f"Queue.emit_raw() #{n}" and not _notes(ei.value), (str(ei.value), _notes(ei.value))
    q.finish()
    gpu.close()
