"""A copy queue's flush past DEV_INFO.max_ib_chunks IBs takes several CS ioctls (SDMA IBs
do not chain: umd/submit.py cs_ioctls). When the kernel accepts the first and refuses a
later one, the first CS's job is queued and runs: its IBs stay busy until its fence passes
and its events signal; only the refused part's commands did not run, its events are lost,
and the exception says which part ran (docs/architecture.md, "A copy flush split into
several CS"). Before, every IB of the flush went back to the IB pool at once (the next
recording call wrote over an IB the engine had still to read), every event was lost, and
the accepted CS's seqno was not counted (seq_of, which the buffer pools' fences use, one
seqno behind from then on).
"""

from __future__ import annotations

import dataclasses
import errno

import pytest

import kmd_model
import umd
from kmd_model.uapi import CsChunkIb, KmdError
from testbench.refmodel import RefModel


def _refuse_second_cs(monkeypatch, gpu) -> list:
    """The device's CS ioctls: the second is refused (EINVAL, as the kernel refuses a bad
    chunk), once; returns the list of the CSs' IB addresses, the accepted ones' first."""
    made: list = []
    cs = gpu.ws.cs_submit

    def cs_submit(ctx_id, chunks):
        ibs = [c.gpu_addr for c in chunks if isinstance(c, CsChunkIb)]
        made.append(ibs)
        if len(made) == 3:  # (the gate's flush, then the split flush's first and second CS)
            raise KmdError(errno.EINVAL, "CS: chunk 0: refused for the test")
        return cs(ctx_id, chunks)

    monkeypatch.setattr(gpu.ws, "cs_submit", cs_submit)
    return made


@pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])
def test_a_later_cs_refused_keeps_the_first_ones_ibs_busy_and_its_events(monkeypatch, async_submit):
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000, async_submit=async_submit)
    gate, out, scratch = gpu.alloc(64), gpu.alloc(8192), gpu.alloc(8192)
    made = _refuse_second_cs(monkeypatch, gpu)
    q.wait_mem(gate, 0, 1)  # the split flush's first CS runs behind it: its IBs stay busy
    q.flush()
    k = gpu.dev_info.max_ib_chunks  # the first CS's IBs; one more IB goes in the second
    for i in range(k + 1):  # (40 dwords: an IB each)
        q.write(out, 4 * 40 * i, [i + 1] * 40)
        if i == 0:
            ran = q.signal()  # in the first CS
    lost = q.signal()  # in the second
    if async_submit:
        assert q.flush() is None
        q._drain()
    with pytest.raises(umd.SubmitError) as e:
        q.flush()
    assert e.value.errno == errno.EINVAL and len(made) == 3 and len(made[1]) == k and len(made[2]) == 1
    note = e.value.__notes__[-1]
    assert f"the first 1 of its 2 CS ioctls (IBs 1-{k} of {k + 1}" in note, note
    assert f"the queue's calls up to #{k + 2} run" in note and f"from IB {k + 1} on" in note, note
    # the first CS's job is still to run: none of its IBs may be handed out again
    busy = set(made[1])
    assert not busy & {b.gpu_addr for b in q.pool.free}
    assert not ran.lost and ran.seq is not None and lost.lost
    assert q.last_seq == ran.seq
    # the next commands take IBs from the pool: before, they wrote over the first CS's
    for j in range(k + 1):
        q.write(scratch, 4 * 40 * j, [0xBAD0 + j] * 40)
    q.flush()
    assert q.seq_of(q.submitted) == q.last_seq
    gate.u32[0] = 1
    assert ran.wait()
    with pytest.raises(umd.SubmitError, match="refused"):
        lost.wait()
    q.finish()
    assert [out.u32[40 * i] for i in range(k + 1)] == [*range(1, k + 1), 0]  # the first CS's ran, not the second's
    assert out.u32[:40 * k].tolist() == [v for i in range(k) for v in [i + 1] * 40]
    assert [scratch.u32[40 * j] for j in range(k + 1)] == [0xBAD0 + j for j in range(k + 1)]
    q.close()
    gpu.close()


@pytest.mark.parametrize("which", ["ran", "lost"])
def test_an_async_wait_event_on_a_partly_refused_flush(monkeypatch, which):
    """An async queue's wait_event on an event whose flush the submission thread has not
    handed back yet is named by that thread (submit.EventDep): an event of the part that
    runs is waited for (its CS's seqno), one of the refused part refuses the waiter's flush
    (ECANCELED), as a refused event's."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000, async_submit=True)
    waiter = gpu.queue(async_submit=True)
    gate, out, flag = gpu.alloc(64), gpu.alloc(8192), gpu.alloc(64)
    _refuse_second_cs(monkeypatch, gpu)
    q.wait_mem(gate, 0, 1)
    q.flush()
    k = gpu.dev_info.max_ib_chunks
    for i in range(k + 1):
        q.write(out, 4 * 40 * i, [i + 1] * 40)
        if i == 0:
            ran = q.signal()
    lost = q.signal()
    q.flush()
    waiter.wait_event(ran if which == "ran" else lost)
    waiter.write(flag, 0, 1)
    waiter.flush()
    if which == "lost":
        with pytest.raises(umd.SubmitError, match="ECANCELED.*the submission carrying the event was refused"):
            waiter.finish()
        assert flag.u32[0] == 0
    else:  # the waiter's job waits for the first CS's job, which waits for the gate
        with pytest.raises(umd.GpuTimeout):
            waiter.finish(timeout=20_000)
        assert flag.u32[0] == 0
    gate.u32[0] = 1
    with pytest.raises(umd.SubmitError, match="refused for the test"):
        q.finish()
    waiter.finish()
    assert flag.u32[0] == (which == "ran")
    gpu.close()


def test_a_call_straddling_the_refused_cs_is_named_as_partly_run(monkeypatch):
    """A write whose packets fill the first CS's last IB and the refused CS's first: its
    first packet runs, the note says so."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000)
    out, big = gpu.alloc(8192), gpu.alloc(8192)
    _refuse_second_cs(monkeypatch, gpu)
    q.write(out, 0, 1)
    q.flush()  # (the refusal comes at the third CS)
    k, n = gpu.dev_info.max_ib_chunks, q.max_write_dw  # (a packet of n dwords fills an IB)
    for i in range(k - 1):
        q.write(out, 4 * 40 * (i + 1), [i + 2] * 40)
    q.write(big, 0, list(range(1, 2 * n + 1)))  # call #k + 1: IBs k and k + 1
    with pytest.raises(umd.SubmitError) as e:
        q.flush()
    note = e.value.__notes__[-1]
    assert f"the queue's calls up to #{k} run, their events signal (and #{k + 1}'s packets in those IBs)" in note
    assert f"the rest of #{k + 1} and the calls after it did not run" in note, note
    q.finish()
    assert big.u32[:2 * n].tolist() == [*range(1, n + 1), *[0] * n]
    assert [out.u32[40 * i] for i in range(k)] == list(range(1, k + 1))
    gpu.close()


def test_a_ctrl_c_then_a_refusal_in_the_later_cs(monkeypatch):
    """A ^C in the later CS's wait (umd/submit.py cs_ioctls tries it again, as a held SIGINT
    lets it), then the kernel refuses it: the KeyboardInterrupt is raised after the
    bookkeeping (the first part in flight), the refusal by the queue's next call."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000)
    out = gpu.alloc(8192)
    answers = iter([None, KeyboardInterrupt(), KmdError(errno.EINVAL, "CS: chunk 0: refused for the test")])
    cs = gpu.ws.cs_submit

    def cs_submit(ctx_id, chunks):
        a = next(answers, None)
        if a is not None:
            raise a
        return cs(ctx_id, chunks)

    monkeypatch.setattr(gpu.ws, "cs_submit", cs_submit)
    k = gpu.dev_info.max_ib_chunks
    for i in range(k + 1):
        q.write(out, 4 * 40 * i, [i + 1] * 40)
    with pytest.raises(KeyboardInterrupt):
        q.flush()
    assert q.flushes == q.submitted == 1 and not q.cmdbuf.ibs and q.last_seq == q.seq_of(1)
    with pytest.raises(umd.SubmitError, match="^flush: EINVAL: CS: chunk 0: refused for the test") as e:
        q.finish()  # (the flush's refusal, raised by the next call)
    assert f"the CS from IB {k + 1} on was refused" in e.value.__notes__[-1]
    assert [out.u32[40 * i] for i in range(k + 1)] == [*range(1, k + 1), 0]
    q.finish()  # (raised once)
    gpu.close()


def _reworded(label):
    """`label` in other words, as a message might want it: its number moved into the text,
    and a "#7" after it that is no call number of the queue's."""
    if label is None:
        return None
    text = str(label).replace("#", "call ") + ", after #7"
    return text if isinstance(label, str) else dataclasses.replace(label, text=text)


@pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])
def test_the_split_reads_each_packets_call_not_its_labels_wording(monkeypatch, async_submit):
    """Which part of a split flush a call's packets and events are in comes from the call
    each packet was recorded by, not from its label's text: labels worded otherwise split
    the same way and the note names the same calls. (Before, the split parsed the last "#n"
    out of the text: every call read as #7, and the events of the part that ran were lost.)"""

    def run(reword: bool):
        kmd_model.bind(RefModel())
        gpu = umd.open(api_version=3)
        q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000, async_submit=async_submit)
        out = gpu.alloc(8192)
        if reword:
            emit = q.cmdbuf.emit
            monkeypatch.setattr(q.cmdbuf, "emit", lambda dwords, label=None: emit(dwords, _reworded(label)))
        _refuse_second_cs(monkeypatch, gpu)
        q.write(out, 0, 1)  # call #1, the first flush (the refusal comes at the third CS)
        q.flush()
        k = gpu.dev_info.max_ib_chunks
        events = []
        for i in range(k + 1):  # write #2i+2 and its signal #2i+3 in IB i + 1 (40 dwords: an IB each)
            q.write(out, 4 * 40 * (i + 1), [i + 2] * 40)
            events.append(q.signal())
        if async_submit:
            q.flush()
            q._drain()
        with pytest.raises(umd.SubmitError) as e:
            q.flush()
        q.finish()
        got = e.value.__notes__[-1], [ev.lost for ev in events], [out.u32[40 * (i + 1)] for i in range(k + 1)]
        monkeypatch.undo()
        gpu.close()
        return got

    plain = run(False)
    note, lost, written = plain
    assert lost.count(True) == 1 and lost[-1], lost
    k = len(lost) - 1
    assert f"the queue's calls up to #{2 * k + 1} run, their events signal;" in note, note
    assert f"the calls from #{2 * k + 2} on did not run" in note, note
    assert written == [*range(2, k + 2), 0]
    assert run(True) == plain


def test_finish_whose_flushs_second_cs_is_refused_raises_the_refusal_with_an_earlier_failed_job(monkeypatch):
    """finish() flushes without raising what is pending first (umd/queue/flush.py _flush(check=False)):
    a failed job no call has raised yet and its own flush's refused second CS are raised
    together, oldest first (the failed job's error, the refusal as its note). Raised alone, the
    earlier error left the refusal untold: the app never learnt that the flush's later
    commands did not run."""
    from tests.umd.drive import run_device

    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=3)
    q = gpu.queue(engine="copy", ib_size_dw=64, flush_threshold=1000)
    out = gpu.alloc(8192)
    made = _refuse_second_cs(monkeypatch, gpu)
    q.emit_raw([0xFFFF_FFF0])  # an illegal SDMA opcode: the job fails, its queue's reset alone
    q.flush()
    run_device(kmd_model.bound(), 2_000)
    k = gpu.dev_info.max_ib_chunks
    for i in range(k + 1):  # (40 dwords: an IB each; the second CS is refused)
        q.write(out, 4 * 40 * i, [i + 1] * 40)
    with pytest.raises(umd.GpuError, match="^GPU error: illegal opcode 0xf0") as e:
        q.finish()
    assert len(made) == 3
    notes = "\n".join(e.value.__notes__)
    assert "and: SubmitError: " in notes and "CS: chunk 0: refused for the test" in notes, notes
    assert f"from IB {k + 1} on was refused" in notes, notes
    assert [out.u32[40 * i] for i in range(k + 1)] == [*range(1, k + 1), 0]
    q.close()
    gpu.close()
