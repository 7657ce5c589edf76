"""What the KMD remembers of a client's past jobs is bounded by the file, not by its
contexts times theirs.

A context keeps the errors of its latest 1,024 failed jobs (WAIT_CS reports them after the
jobs are gone) and the ring of its latest 1,024 jobs (a dependency on a finished job is
checked against it). A file may hold 4,095 contexts, so a client that only submits made the
driver keep 4 M records: about 2.6 GB of failed-job errors (625 bytes each, measured with
tracemalloc), cheap to make as jobs cancelled by a failed dependency. Now a file's contexts
share a budget (kmd_model.core.ctx.Kept.PER_FILE, 16,384 of each kind), the file's oldest
record going first; a freed context gives its records back.
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.core.ctx import Context, Kept
from kmd_model.uapi import CsChunkDep, CtxOp, HwIp, KmdError, Request
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(Kept, "PER_FILE", 5)


def _error(seq: int) -> KmdError:
    return KmdError(errno.ECANCELED, f"job {seq}")


def test_a_files_contexts_share_one_budget_of_failed_job_errors_oldest_first(small_budget):
    kmd_model.bind(RefModel())
    c = Client()
    a, b, d = (Context(90 + i, c.f, 0, 2) for i in range(3))
    for seq in range(3):
        a.job_failed(seq, _error(seq))
    for seq in range(3):
        b.job_failed(seq, _error(100 + seq))
    # six records, a budget of five: the file's oldest (a's first) goes, not b's
    assert list(a.failed) == [1, 2] and list(b.failed) == [0, 1, 2]
    assert c.f.kept_failed.live == 5
    b.forget_records()  # (a freed context's records stop counting)
    assert c.f.kept_failed.live == 2 and not b.failed
    for seq in range(6):
        d.job_failed(seq, _error(200 + seq))
    assert not a.failed and list(d.failed) == [1, 2, 3, 4, 5] and d.failed[5].message == "job 205"
    assert c.f.kept_failed.live == 5
    # a context's own limit still holds inside the file's
    e = Context(99, c.f, 0, 2)
    e.FAILED_KEPT = 2
    for seq in range(3):
        e.job_failed(seq, _error(300 + seq))
    assert list(e.failed) == [1, 2] and list(d.failed) == [3, 4, 5] and c.f.kept_failed.live == 5


def test_another_files_records_do_not_count_against_this_ones(small_budget):
    kmd_model.bind(RefModel())
    c1, c2 = Client(), Client()
    x, y = Context(90, c1.f, 0, 2), Context(90, c2.f, 0, 2)
    for seq in range(5):
        x.job_failed(seq, _error(seq))
        y.job_failed(seq, _error(seq))
    assert list(x.failed) == list(y.failed) == [0, 1, 2, 3, 4]


def test_the_rings_of_a_files_jobs_are_kept_within_its_budget(small_budget):
    """Jobs that ran well: each context's ring_of (a dependency's ring check) shares the
    file's budget; a CTX FREE gives its share back."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    ctxs = [c.ctx] + [c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id for _ in range(2)]
    for k, ctx in enumerate(ctxs):
        for i in range(3):
            assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x800 + 4 * i, [i]), 0x40 * (3 * k + i)),
                                   ctx=ctx), ctx=ctx)
    kept = {ctx: list(c.f.contexts[ctx].ring_of) for ctx in ctxs}
    assert sum(len(v) for v in kept.values()) == 5 == c.f.kept_ring_of.live
    assert kept[ctxs[0]] == [] and len(kept[ctxs[1]]) == 2 and len(kept[ctxs[2]]) == 3, kept
    c.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, ctxs[2]))
    assert c.f.kept_ring_of.live == 2


def test_jobs_cancelled_by_a_failed_dependency_keep_at_most_the_files_budget(small_budget):
    """End to end: a context's job fails on the GPU (an unknown opcode); a chain of jobs on
    the file's other contexts, each depending on the one before, is cancelled job by job,
    each an error to remember. However many, the file remembers its latest five: the latest
    job's WAIT_CS says why it failed; the first one's error is forgotten, and its WAIT_CS says
    done, as amdgpu's for a seqno older than the context's ring of fences."""
    kmd_model.bind(RefModel(), cs_check=False)  # (the checker would refuse it at the CS)
    c = Client()
    bo = c.bo(0x1000)
    bad = c.submit(c.ib(bo, [pm4.header(0x99, 1), 0]))  # (no such opcode: the job fails)
    with pytest.raises(KmdError):
        c.wait(bad)
    others = [c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id for _ in range(3)]
    chain = [(c.ctx, bad)]
    for ctx in others:
        for i in range(4):
            dep = CsChunkDep(HwIp.GFX, 0, *chain[-1])
            chain.append((ctx, c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x800, [i]), 0x100), dep, ctx=ctx)))
    assert sum(len(x.failed) for x in c.f.contexts.values()) == 5
    assert c.f.kept_failed.live == 5
    assert not any(bo.u32[0x800 // 4: 0x804 // 4])  # (no job of the chain ran)
    ctx, seq = chain[-1]
    with pytest.raises(KmdError) as ei:
        c.wait(seq, ctx=ctx)
    assert ei.value.errno == errno.ECANCELED and "failed" in ei.value.message, ei.value.message
    ctx, seq = chain[1]
    assert c.wait(seq, ctx=ctx)


def test_a_contexts_own_limit_on_its_rings_holds_inside_the_files(small_budget):
    """ring_of keeps a context's latest RING_KEPT jobs, as failed keeps its latest
    FAILED_KEPT: the older one goes though the file's budget has room."""
    kmd_model.bind(RefModel())
    c = Client()
    a = Context(90, c.f, 0, 2)
    a.RING_KEPT = 2
    for seq in range(3):
        a.submitted_on(seq, "gfx")
    assert list(a.ring_of) == [1, 2] and c.f.kept_ring_of.live == 2


def test_the_files_book_of_its_records_stays_bounded(small_budget):
    """What the file keeps to find its oldest record (Kept.order) is bounded by its budget
    too, not by the records it ever had: a context that keeps its latest two, and contexts
    freed one after another, leave entries of records gone. However many jobs, the book
    stays within a few times the budget, and the records kept are still the latest."""
    kmd_model.bind(RefModel())
    c = Client()
    kept = c.f.kept_failed
    a = Context(90, c.f, 0, 2)
    a.FAILED_KEPT = 2
    for seq in range(1000):
        a.job_failed(seq, _error(seq))
        assert len(kept.order) <= 3 * Kept.PER_FILE
    assert list(a.failed) == [998, 999] and kept.live == 2
    for n in range(200):  # (contexts freed with their records: their entries go too)
        b = Context(100 + n, c.f, 0, 2)
        for seq in range(3):
            b.job_failed(seq, _error(seq))
        b.forget_records()
        assert len(kept.order) <= 3 * Kept.PER_FILE
    assert kept.live == 2 and list(a.failed) == [998, 999]
    b = Context(99, c.f, 0, 2)
    for seq in range(4):  # (the budget of five still takes the file's oldest first)
        b.job_failed(seq, _error(seq))
    assert list(a.failed) == [999] and list(b.failed) == [0, 1, 2, 3] and kept.live == 5
