"""Every error pending at a call is raised by that call, together, oldest first (by the
order of the flushes they came from), none lost, none twice: the rule of
tests/umd/failures/test_umd_several_failures.py, for the paths it had left out.

- A write (or any recording call) that waits for room (max_inflight) and finds its oldest
  job failed raised that job's error only; another failed job came a call later.
- An async queue's refused flushes were raised one per call, and a refusal came a call
  before a failed job pending with it, whatever their order.
- An async refusal's QueueBanned (or a guilty gfx context's refused GpuError) was written
  when the submission thread's answer was collected: a file banned before the app saw it
  left it saying "make a new queue".
- Device.close() and a `with` block's close kept only the first line of a queue's error
  with notes: the notes (the queue's other failed jobs) were lost.
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
from umd.winsys import KMD_LOCK

from ..drive import run_device
from .test_umd_file_ban import JOB_TIMEOUT, NEW_DEVICE, _hang
from .test_umd_lost_failures import KINDS, _model
from .test_umd_several_failures import BAD_SDMA, WAITED, _notes

SYNC_ASYNC = pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])


def _bad(q) -> list[int]:
    return BAD_SDMA if q.engine == "copy" else [pm4.header(0x7B, 0), 0]


def _opcode(q) -> str:
    return "0xf0" if q.engine == "copy" else "0x7b"


def _settle(kmd, q=None) -> None:
    """Let the submission thread take every flush of `q` so far, then the GPU run."""
    deadline = time.monotonic() + 10
    while q is not None and q.pending and not all(j.done for j in q.pending) and time.monotonic() < deadline:
        time.sleep(0.001)
    run_device(kmd, 2_000, rounds=4)


def _two_bad_jobs(q) -> None:
    """Two bad jobs of async queue `q`, the first failing (and its ring reset) before the
    second is submitted: the reset cancels every job of the context on the ring, so two
    jobs in flight at once fail as one. (A sync queue's second flush would look first, and
    raise the first failure there.)"""
    for _ in range(2):
        q.emit_raw(_bad(q))
        q.flush()
        _settle(kmd_model.bound(), q)


# ---------------------------------------------------------------------------- a write waiting for room

@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_a_write_waiting_for_room_raises_every_failed_job(kind):
    kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], max_inflight=2, async_submit=True)
    _two_bad_jobs(q)
    with pytest.raises(umd.GpuError, match=f"^GPU error: illegal opcode {_opcode(q)}") as ei:
        q.write(buf, 0, 9)  # a new IB: two in flight, the limit: it waits for the oldest
    assert ei.value.command == "Queue.emit_raw() #1", str(ei.value)
    assert len(_notes(ei.value)) == 1 and _notes(ei.value)[0].endswith("(recorded by Queue.emit_raw() #2)"), \
        _notes(ei.value)
    q.write(buf, 0, 9)  # (not recorded: the write raised before its packet)
    q.finish()  # once: nothing more
    assert buf.u32[0] == 9
    gpu.close()


@SYNC_ASYNC
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_write_waiting_for_room_raises_every_job_cancelled_for_a_dependency(kind, async_submit):
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], max_inflight=2, async_submit=async_submit)
    others = []
    for i in range(2):
        other = gpu.queue(engine="copy")
        other.wait_mem(flag, 0, 1)  # (both of q's jobs are in before either fails)
        other.emit_raw(BAD_SDMA)
        ev = other.signal()
        other.flush()
        others.append(other)
        q.wait_event(ev)
        q.write(buf, 4 * i, 1)  # (cancelled: never written)
        q.flush()
        _settle(kmd, q)
    flag.u32[0] = 1
    _settle(kmd, q)
    with pytest.raises(umd.GpuError, match="^" + re.escape(WAITED)) as ei:
        q.write(buf, 8, 9)
    assert ei.value.context == others[0].ctx_id, str(ei.value)
    assert len(_notes(ei.value)) == 1 and _notes(ei.value)[0].endswith(f"context {others[1].ctx_id}"), \
        _notes(ei.value)
    q.write(buf, 8, 9)
    q.finish()  # once: nothing more
    assert buf.u32[:3].tolist() == [0, 0, 9]
    for other in others:
        with pytest.raises(umd.GpuError, match="illegal opcode 0xf0"):
            other.finish()  # (each its own queue's)
    gpu.close()


# ---------------------------------------------------------------------------- refusals of an async queue

def _refuse_next(gpu, q) -> None:
    """Record what makes the next flush of async queue `q` refused: a gfx queue's write of
    the kernel's fence page (the checker's EINVAL); a copy queue's wait_event on such a
    refused flush of a gfx queue (ECANCELED)."""
    kmd = kmd_model.bound()
    if q.engine != "copy":
        q.emit_raw(pm4.write_data(kmd.fence_addr, [0]))
        return
    other = gpu.queue(async_submit=True)
    other.emit_raw(pm4.write_data(kmd.fence_addr, [0]))
    ev = other.signal()
    other.flush()
    q.wait_event(ev)
    q._refusing = getattr(q, "_refusing", []) + [other]  # (its own refusal, raised at its close)


def _close_refusing(q) -> None:
    for other in getattr(q, "_refusing", []):
        with pytest.raises(umd.SubmitError):
            other.close()


def _learn(q, how, buf) -> None:
    q.write(buf, 8, 9)
    {"flush": q.flush, "finish": q.finish, "event": lambda: q.signal().wait(), "close": q.close}[how]()


@pytest.mark.parametrize("how", ["flush", "finish", "event", "close"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_two_refused_flushes_are_raised_together(kind, how):
    kmd = kmd_model.bind(_model(kind), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    with KMD_LOCK:  # (the thread takes neither flush before both are made: the second raises nothing)
        for _ in range(2):
            _refuse_next(gpu, q)
            q.flush()
    _settle(kmd, q)
    with pytest.raises(umd.SubmitError, match=r"^flush \(asynchronous submission #1 of") as ei:
        _learn(q, how, buf)
    assert [re.match(r"and: SubmitError: flush \(asynchronous submission #2 of", n) is not None
            for n in _notes(ei.value)] == [True], _notes(ei.value)
    if how != "close":
        q.finish()  # once; what was recorded runs (the raising flush submitted it all the same)
        assert buf.u32[2] == 9
        q.close()
    _close_refusing(q)
    gpu.close()


@pytest.mark.parametrize("refused_first", [False, True], ids=["failed_first", "refused_first"])
@pytest.mark.parametrize("how", ["flush", "finish", "event", "close"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_refusal_and_a_failed_job_are_raised_together_in_flush_order(kind, how, refused_first):
    """The failed job: a copy queue's own bad job (its context runs on); a gfx queue's job
    cancelled for another queue's failure (the checker refuses a bad gfx packet, and a
    normal gfx queue's own failure would make its context refuse every later flush with
    that same error)."""
    kmd = kmd_model.bind(_model(kind), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    if kind != "copy":  # the job q's will wait for, failed (a job waiting for it is cancelled)
        other = gpu.queue(engine="copy")
        other.emit_raw(BAD_SDMA)
        bad = other.signal()
        other.flush()
        _settle(kmd)
        with pytest.raises(umd.GpuError):
            other.finish()  # (its own error)
    with KMD_LOCK:  # (the thread takes neither flush before both are made: the second raises nothing)
        for step in (("refuse", "fail") if refused_first else ("fail", "refuse")):
            if step == "refuse":
                _refuse_next(gpu, q)
            elif kind != "copy":
                q.wait_event(bad)
                q.write(buf, 0, 1)  # (cancelled)
            else:
                q.emit_raw(BAD_SDMA)
            q.flush()
    _settle(kmd, q)
    failed = WAITED if kind != "copy" else "GPU error: illegal opcode 0xf0"
    refused = r"SubmitError: flush \(asynchronous submission #\d of"
    with pytest.raises(umd.UmdError) as ei:
        _learn(q, how, buf)
    said = [f"{type(ei.value).__name__}: {ei.value}", *(n.removeprefix("and: ") for n in _notes(ei.value))]
    assert len(said) == 2, said
    first, second = said if refused_first else said[::-1]
    assert re.match(refused, first) and second.startswith("GpuError: " + failed), said
    if how != "close":
        q.finish()  # once
        assert buf.u32[2] == 9
        q.close()
    _close_refusing(q)
    gpu.close()


# ---------------------------------------------------------------------------- a ban after the refusal was collected

@pytest.mark.parametrize("kind", list(KINDS))
def test_a_refusal_collected_before_the_files_ban_says_so_when_raised(kind):
    """The refusal is collected (here by another queue's wait_event on its flush's event)
    while only the queue is banned (or, on gfx_full, whose hang took the full reset, guilty);
    the file's ban follows (another queue's hang); the app's next call raises it saying to
    open a new Device."""
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT, ban_after_hangs=1,
                                                 file_ban_after_hangs=2, hw_timeout=2_000, cap_sys_nice=True))
    gpu = umd.open(api_version=3)
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    _hang(kmd, q, flag)
    with pytest.raises(umd.GpuError, match="timed out"):
        q.finish()
    q.write(buf, 0, 9)
    ev = q.signal()
    q.flush()  # refused: the context is banned (gfx_full: guilty)
    with pytest.raises(umd.SubmitError, match="refused"):
        gpu.queue().wait_event(ev)  # (waits for the thread, and collects the refusal)
    assert q.async_errors and not q.pending
    _hang(kmd, gpu.queue(**KINDS[kind]), flag)  # another queue's hang bans the file
    with pytest.raises(umd.DeviceLost if kind != "gfx_full" else umd.GpuError) as ei:
        q.finish()
    e = ei.value
    assert type(e) is (umd.GpuError if kind == "gfx_full" else umd.DeviceLost), repr(e)
    assert re.search(NEW_DEVICE, str(e)) and "make a new queue" not in str(e), str(e)
    if kind != "gfx_full":  # (the call it names: the refused flush's, as when it was collected)
        assert str(e).startswith(f"flush (asynchronous submission #2 of queue context {q.ctx_id}): "), str(e)
    with pytest.raises(umd.UmdError):
        gpu.close()  # (the second queue's hang, nobody told of it)


# ---------------------------------------------------------------------------- closes that gather queues' errors

def _queue_with_two_failures(gpu, kind):
    q = gpu.queue(**KINDS[kind], async_submit=True)
    kmd = kmd_model.bound()
    for _ in range(2):
        q.emit_raw(_bad(q))
        q.flush()
        _settle(kmd, q)
    return q


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_device_close_keeps_every_queues_notes(kind):
    kmd_model.bind(RefModel(), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    queues = [_queue_with_two_failures(gpu, kind) for _ in range(2)]
    with pytest.raises(umd.GpuError) as ei:
        gpu.close()
    said = [str(ei.value), *_notes(ei.value)]
    assert len(said) == 4, said
    for i, text in enumerate(said):
        q = queues[i // 2]
        assert f"context {q.ctx_id} (recorded by Queue.emit_raw() #{i % 2 + 1})" in text, said


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_a_with_blocks_close_keeps_the_queues_notes(kind):
    kmd_model.bind(RefModel(), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    with pytest.raises(KeyError) as ei:
        with _queue_with_two_failures(gpu, kind):
            raise KeyError("the app's own")
    said = _notes(ei.value)
    assert len(said) == 2 and said[0].startswith("and when the with block closed it: GpuError: "), said
    assert [s.endswith(f"(recorded by Queue.emit_raw() #{n})") for n, s in zip((1, 2), said)] == [True, True], said
    gpu.close()


# ---------------------------------------------------------------------------- an allocation waiting for memory

def _alloc_waiting_for_the_queues(kmd, gpu):
    """Device.alloc with GTT full behind a held submission (tests/umd/memory/test_umd_memory.py):
    ENOMEM, then the pools wait for every queue's last job and try again."""
    from tests.umd.memory.test_umd_memory import fill_gtt_behind_a_held_submission

    hold = fill_gtt_behind_a_held_submission(kmd, gpu, gpu.queue(flush_threshold=1 << 20))
    hold.bo.u32[0x200] = 1  # (the held job may end)
    return gpu.alloc(0x20_0000, "gtt")


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_allocation_waiting_for_memory_does_not_raise_a_failure_told_before(kind):
    """Its wait on a queue's last job, a failed one the app was told of (finish), raised
    that job's error a second time."""
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    q = gpu.queue(**KINDS[kind])
    q.emit_raw(_bad(q))
    q.flush()
    _settle(kmd)
    with pytest.raises(umd.GpuError, match="illegal opcode"):
        q.finish()
    _alloc_waiting_for_the_queues(kmd, gpu).free()
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_an_allocation_waiting_for_memory_raises_every_failed_job_of_the_queue(kind):
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    _two_bad_jobs(q)
    with pytest.raises(umd.GpuError, match="illegal opcode") as ei:
        _alloc_waiting_for_the_queues(kmd, gpu)
    assert ei.value.command == "Queue.emit_raw() #1", str(ei.value)
    assert [n.endswith("(recorded by Queue.emit_raw() #2)") for n in _notes(ei.value)] == [True], _notes(ei.value)
    gpu.alloc(0x20_0000, "gtt").free()  # (the memory came back: the retry finds it)
    q.finish()  # once: nothing more
    gpu.close()



def test_an_allocation_waiting_for_memory_raises_the_failed_jobs_of_every_queue():
    """Two queues, each with a failed job the app was not told of: the allocation's wait for
    every queue's last job (MemoryManager._drain) raises the first queue's error, the second's
    as its note, none lost (the rule of tests/umd/failures/test_umd_several_failures.py)."""
    kmd = kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open(api_version=3)
    gfx, copy = gpu.queue(), gpu.queue(engine="copy")
    for q in (gfx, copy):
        q.emit_raw(_bad(q))
        q.flush()
        _settle(kmd)
    with pytest.raises(umd.GpuError, match=f"^GPU error: illegal opcode {_opcode(gfx)}") as ei:
        _alloc_waiting_for_the_queues(kmd, gpu)
    assert ei.value.command == "Queue.emit_raw() #1", str(ei.value)
    notes = _notes(ei.value)
    assert len(notes) == 1 and notes[0].startswith(f"and: GpuError: GPU error: illegal opcode {_opcode(copy)}"), notes
    gpu.alloc(0x20_0000, "gtt").free()  # (the memory came back: the retry finds it)
    for q in (gfx, copy):
        q.finish()  # once: nothing more
    gpu.close()


# ---------------------------------------------------------------------------- an Event.wait's reach

@pytest.mark.parametrize("kind", list(KINDS))
def test_a_wait_raises_the_refusals_up_to_its_event_only(kind):
    """A refusal of a flush after the event's is the next call's to raise, as a failed job
    after it is (the wait's drain raised any refusal before)."""
    kmd = kmd_model.bind(_model(kind), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=True)
    with KMD_LOCK:  # (the thread takes neither flush before the wait)
        q.write(buf, 0, 1)
        ev = q.signal()
        q.flush()
        _refuse_next(gpu, q)
        q.flush()
    assert ev.wait() and buf.u32[0] == 1
    with pytest.raises(umd.SubmitError, match=r"^flush \(asynchronous submission #2 of") as ei:
        q.finish()
    assert not _notes(ei.value)
    q.close()
    _close_refusing(q)
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_an_event_signalled_before_its_flushs_bad_packet_raises_it(kind):
    """The event's own job failed after signalling it: its wait (memory says signalled)
    raises that job's error, as the wait on an event after the failure would."""
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    q = gpu.queue(**KINDS[kind])
    ev = q.signal()
    q.emit_raw(_bad(q))
    q.flush()
    _settle(kmd)
    assert ev.signalled()
    with pytest.raises(umd.GpuError, match="illegal opcode") as ei:
        ev.wait()
    assert ei.value.command == "Queue.emit_raw() #2", str(ei.value)
    q.finish()  # once
    gpu.close()
