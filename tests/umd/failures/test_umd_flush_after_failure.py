"""What a flush does with the commands recorded since the last one when it raises an
earlier job's failure or an earlier refused flush: it submits them first, as finish()
always has, then raises, the exception's last note saying what it submitted (the calls up
to which, as which flush). Before, finish() submitted and raised, but a plain flush() (an
explicit one, or the one a recording call makes at the flush threshold) raised and
submitted nothing: the commands stayed recorded for whichever call came next, so the same
error meant "your work was submitted" at one call and "it was not" at the other, and the
exception did not say which (docs/architecture.md, "The UMD's API rules").
"""

from __future__ import annotations

import re

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from testbench.refmodel import RefModel

from .test_umd_lost_failures import JOB_TIMEOUT, KINDS, _bad_job, _model
from .test_umd_pending_errors import _close_refusing, _refuse_next, _settle

# queue kind -> how an earlier job fails while its context runs on (every ring's own bad job
# resets its queue alone; where the full reset follows, gfx_full, the context is guilty:
# every later flush is refused, test_the_guilty_context's)
RUNS_ON = {"gfx": "packet", "gfx_high": "packet", "copy": "packet", "gfx_full": "dep"}
SUBMITTED = r"^flush: the commands recorded since the last flush \(the queue's calls up to #{call}\) were {how} " \
            r"all the same, as the queue's flush #{n}"


@pytest.mark.parametrize("how", ["flush", "threshold", "finish"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_flush_that_raises_an_earlier_failure_submits_what_was_recorded(kind, how):
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT, hw_timeout=2_000,
                                           cap_sys_nice=True))  # (gfx_high asks for HIGH)
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    what, _ = _bad_job(gpu, q, RUNS_ON[kind], buf)
    flushes = q.flushes
    if how == "threshold":
        q.flush_threshold = 2  # (the write's own flush, as the second command since the last)
        q.write(buf, 4, 5)
    with pytest.raises(umd.GpuError) as ei:
        q.write(buf, 0, 9)
        if how != "threshold":
            (q.flush if how == "flush" else q.finish)()
    assert str(ei.value).startswith(what), str(ei.value)
    assert not q.cmdbuf.ibs and q.flushes == flushes + 1  # submitted, not left recorded
    if how != "finish":  # (finish waits for what it submitted: nothing to tell of)
        assert re.match(SUBMITTED.format(call=q.calls, how="submitted", n=q.flushes), ei.value.__notes__[-1]), \
            ei.value.__notes__
        assert f"seqno {q.last_seq:#x}" in ei.value.__notes__[-1]
    q.finish()  # once: nothing more to raise, nothing left to submit
    assert buf.u32[:2].tolist() == [9, 5 if how == "threshold" else 0]
    gpu.close()


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_async_flush_that_raises_a_refusal_queues_what_was_recorded(kind):
    kmd = kmd_model.bind(_model(kind), hw_timeout=2_000, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    _refuse_next(gpu, q)
    q.flush()
    _settle(kmd, q)
    q.write(buf, 0, 9)
    with pytest.raises(umd.SubmitError, match=r"^flush \(asynchronous submission #1 of") as ei:
        q.flush()
    assert not q.cmdbuf.ibs and q.flushes == 2
    assert re.match(SUBMITTED.format(call=q.calls, how="queued for submission", n=2), ei.value.__notes__[-1]), \
        ei.value.__notes__
    q.finish()
    assert buf.u32[0] == 9
    q.close()
    _close_refusing(q)
    gpu.close()


def test_the_guilty_contexts_flush_raises_its_own_refusal_with_the_failure():
    """A normal gfx queue whose job failed and took the full reset (a CP without
    CP_QUEUE_RESET): its context is guilty and refuses the flush's CS. The flush raises the
    failure and, as its note, its own refusal (the commands did not run: their events are
    lost), not "submitted"."""
    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    full_reset_for_ring_0(kmd_model.bind(RefModel(), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT)))
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue()
    what, _ = _bad_job(gpu, q, "packet", None)
    q.write(buf, 0, 9)
    ev = q.signal()
    with pytest.raises(umd.GpuError) as ei:
        q.flush()
    assert str(ei.value).startswith(what) and ev.lost and not q.cmdbuf.ibs
    assert not any("were submitted" in n for n in getattr(ei.value, "__notes__", ()))
    gpu.close()


def test_a_flush_that_cannot_submit_says_the_commands_stay_recorded():
    """A flush whose wait for room (max_inflight) times out submits nothing: its note says
    so, and the next flush submits them."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    buf, flag = gpu.alloc(256), gpu.alloc(64)
    q = gpu.queue(max_inflight=1, ib_size_dw=64)
    for _ in range(3):  # (an IB each, back in the pool after: the write below needs no wait)
        q.write(buf, 0, [0] * 40)
    q.finish()
    q.wait_mem(flag, 0, 1)  # (held until the CPU writes the flag)
    q.flush()
    q.timeout = 1_000
    q.write(buf, 0, 9)
    with pytest.raises(umd.GpuTimeout) as ei:
        q.flush()
    assert ei.value.__notes__ == ["flush: the commands recorded since the last flush (the queue's calls up to #5) "
                                  "stay recorded: the next flush submits them"]
    assert q.cmdbuf.ibs
    flag.u32[0] = 1
    q.finish()
    assert buf.u32[0] == 9
    gpu.close()


@pytest.mark.parametrize("how", ["flush", "finish"])
def test_a_throttled_flush_raises_its_oldest_jobs_failure_once(how):
    """A queue at max_inflight whose oldest job was cancelled for its dependency (never run:
    its fence not passed) flushes: the flush's look raises that job's error, and its wait for
    room met the same job's error again; raised twice, as its own note ('and: GpuError: ...'
    the same error), against "none twice" (umd/failures/failed_jobs.py). Raised once now, the new
    commands submitted all the same; finish, which looks after its flush, raises it once too."""
    from spec import pm4
    from tests.umd.drive import run_device

    kmd_model.bind(RefModel(), KmdParams(cs_check=False, hw_timeout=2_000))
    gpu = umd.open()
    buf = gpu.alloc(256)
    q = gpu.queue(max_inflight=1, ib_size_dw=64)
    for _ in range(3):  # (an IB each, back in the pool after: the write below needs no wait)
        q.write(buf, 0, [0] * 40)
    q.finish()
    other = gpu.queue()
    other.emit_raw([pm4.header(0x7B, 0), 0])
    ev = other.signal()
    other.flush()
    q.wait_event(ev)
    q.write(buf, 12, 1)  # (cancelled with its dependency: never runs)
    q.flush()
    run_device(kmd_model.bound(), 2_000)
    with pytest.raises(umd.GpuError):
        other.finish()
    q.write(buf, 0, 9)
    with pytest.raises(umd.GpuError, match="^GPU error in a job this queue waited for") as ei:
        q.finish() if how == "finish" else q.flush()
    notes = getattr(ei.value, "__notes__", [])
    assert not any(n.startswith("and: ") for n in notes), notes  # (once)
    assert notes and "were submitted all the same" in notes[-1], notes
    q.finish()  # (nothing more to raise)
    assert buf.u32[0] == 9 and buf.u32[3] == 0
    gpu.close()
