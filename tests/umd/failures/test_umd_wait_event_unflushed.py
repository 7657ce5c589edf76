"""`waiter.wait_event(ev)` on an event its queue never flushed. It flushed that queue, all
of it (what was recorded after the event too, before the app's own flush of it), from a
call on another queue, and raised that queue's earlier failures and refusals, and the
flush's own refusal, from the waiter's call, naming neither the call nor the queue the
app made. Now (docs/architecture.md, "The UMD's API rules"):

- the event is the last thing its queue recorded: wait_event flushes that queue, which
  is flushing up to the event; that queue's errors stay its own, raised by its next
  call, the flush's own refusal named as the flush wait_event made ("flush (made by
  wait_event of <umd.Queue ...>)"); the wait_event raises only that the event's
  submission was refused (SubmitError ECANCELED);
- its queue recorded commands after it: ValueError, one line, nothing submitted and
  nothing recorded; the app flushes that queue itself.
"""

from __future__ import annotations

import errno
import re

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from spec import pm4
from testbench.refmodel import RefModel

from .test_umd_lost_failures import _bad_job
from .test_umd_pending_errors import _refuse_next, _settle

AFTER = (r"^wait_event: the event's queue \(<umd\.Queue{eng} ctx {ctx} api v3>\) recorded commands after it and "
         r"has not flushed it: flush that queue first \(flushed from here, they would be submitted before its own "
         r"flush\)$")
MODES = pytest.mark.parametrize("events_async,waiter_async", [(False, False), (False, True), (True, False),
                                                               (True, True)], ids=["sync-sync", "sync-async",
                                                                                   "async-sync", "async-async"])


@MODES
def test_a_wait_on_an_event_with_commands_after_it_is_refused(events_async, waiter_async):
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(async_submit=events_async, flush_threshold=1000)
    waiter = gpu.queue(async_submit=waiter_async, flush_threshold=1000)
    q.write(buf, 0, 1)
    ev = q.signal()
    q.write(buf, 4, 2)  # (recorded after the event)
    with pytest.raises(ValueError, match=AFTER.format(eng="", ctx=q.ctx_id)):
        waiter.wait_event(ev)
    assert q.cmdbuf.ibs and q.flushes == 0 and ev.seq is None and ev.pending is None  # nothing submitted
    assert waiter.calls == 0 and not waiter.deps  # nothing recorded
    q.flush()
    waiter.wait_event(ev)  # (flushed: taken)
    waiter.write(buf, 8, 3)
    waiter.finish()
    q.finish()
    assert buf.u32[:3].tolist() == [1, 2, 3]
    gpu.close()


@MODES
def test_a_wait_on_the_last_event_recorded_flushes_up_to_it(events_async, waiter_async):
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(async_submit=events_async, flush_threshold=1000)
    waiter = gpu.queue(async_submit=waiter_async, flush_threshold=1000)
    q.write(buf, 0, 1)
    ev = q.signal()
    waiter.wait_event(ev)
    assert not q.cmdbuf.ibs and q.flushes == 1
    waiter.write(buf, 4, 2)
    waiter.finish()
    assert buf.u32[:2].tolist() == [1, 2]
    gpu.close()


@pytest.mark.parametrize("waiter_async", [False, True], ids=["sync", "async"])
def test_the_events_queues_earlier_failure_stays_its_own(waiter_async):
    """A copy queue's failed job, not raised yet: a wait_event on its never-flushed event
    raised it from the waiter's call (as a flush of the copy queue's). Now the copy queue's
    own next call raises it, once."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(engine="copy")
    waiter = gpu.queue(async_submit=waiter_async)
    what, command = _bad_job(gpu, q, "packet", None)
    q.write(buf, 0, 9)
    ev = q.signal()
    waiter.wait_event(ev)
    waiter.write(buf, 4, 5)
    waiter.finish()
    with pytest.raises(umd.GpuError, match="^" + re.escape(what)) as ei:
        q.finish()
    assert ei.value.command == command
    q.finish()
    assert buf.u32[:2].tolist() == [9, 5]
    gpu.close()


@pytest.mark.parametrize("waiter_async", [False, True], ids=["sync", "async"])
def test_the_events_queues_earlier_refusal_stays_its_own(waiter_async):
    """An async queue's refused flush, not raised yet: a wait_event on its never-flushed
    event raised it from the waiter's call. Now the queue's own next call raises it."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(async_submit=True)
    waiter = gpu.queue(async_submit=waiter_async)
    _refuse_next(gpu, q)
    q.flush()
    _settle(kmd, q)
    q.write(buf, 0, 9)
    ev = q.signal()
    waiter.wait_event(ev)
    waiter.finish()
    with pytest.raises(umd.SubmitError, match=r"^flush \(asynchronous submission #1 of"):
        q.finish()
    assert buf.u32[0] == 9
    gpu.close()


@pytest.mark.parametrize("waiter_async", [False, True], ids=["sync", "async"])
def test_the_flush_a_wait_event_made_is_refused_for_its_own_queue(waiter_async):
    """The flush wait_event makes of a sync queue is refused (the checker's EINVAL, as
    amdgpu_cs_find_mapping answers): the wait_event raises that its event's submission was
    refused; the refusal itself is the queue's, raised by its next call, naming the flush
    wait_event made."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue()
    waiter = gpu.queue(async_submit=waiter_async)
    q.emit_raw(pm4.write_data(kmd.fence_addr, [0]))
    ev = q.signal()
    with pytest.raises(umd.SubmitError, match="^wait_event: the submission carrying this event was refused$") as ei:
        waiter.wait_event(ev)
    assert ei.value.errno == errno.ECANCELED and ev.lost and waiter.calls == 0
    with pytest.raises(umd.SubmitError, match=re.escape(f"flush (made by wait_event of {waiter!r}): EINVAL: CS: ")):
        q.finish()
    q.finish()
    waiter.finish()
    gpu.close()
