"""Submission contexts as a hostile client uses them (kmd_model/core/ctx.py): how many one file
may hold, and what a dependency on another context's or ring's seqno means."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model.core.ctx import MAX_CONTEXTS
from kmd_model.sched.scheduler import Priority
from kmd_model.uapi import CsChunkDep, CtxArgs, CtxOp, CtxPriority, KmdError, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from ..test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import DMA, GFX, HANG, sdma_ib


def alloc(c: Client) -> int:
    return c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id


def test_a_file_holds_at_most_max_contexts_and_a_freed_one_makes_room():
    """A client allocating contexts in a loop would grow the driver without end; amdgpu's
    idr gives a file ids 1..AMDGPU_VM_MAX_NUM_CTX - 1 and answers ENOSPC past them. The
    refusal changes nothing, other files are not limited by it, and freeing one context
    lets the next ALLOC succeed."""
    kmd = kmd_model.bind(RefModel())
    c = Client()  # (its first context is one of them)
    ids = [c.ctx] + [alloc(c) for _ in range(MAX_CONTEXTS - 1)]
    assert MAX_CONTEXTS == 4095 and len(set(ids)) == MAX_CONTEXTS
    before = len(kmd.contexts)
    expect(errno.ENOSPC, f"CTX ALLOC: this file has {MAX_CONTEXTS} contexts, the most one file may have "
           "(free one first)", alloc, c)
    assert len(kmd.contexts) == before and len(c.f.contexts) == MAX_CONTEXTS
    other = Client()  # a limit per file, not per device; its ids are its own
    assert (other.ctx, alloc(other)) == (1, 2)
    c.io(Request.CTX, CtxArgs(CtxOp.FREE, ids[7]))
    new = alloc(c)
    assert len(c.f.contexts) == MAX_CONTEXTS
    bo = c.bo()
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr, [5])), ctx=new), ctx=new) and bo.u32[0] == 5
    expect(errno.ENOSPC, f"CTX ALLOC: this file has {MAX_CONTEXTS} contexts, the most one file may have "
           "(free one first)", alloc, c)
    c.f.close()
    assert not any(x.file is c.f for x in kmd.contexts.values())


def test_context_ids_are_per_file():
    """As amdgpu's (an idr per file): each file's ids start at 1, so a client's ids say
    nothing of how many contexts other clients hold; an id only this other file has is EINVAL
    in every ioctl that takes one (CTX FREE and QUERY_STATE, CS, a CS dependency, WAIT_CS),
    and an id both files have names the caller's own context, never the other's. A freed
    id is not handed out again by its file (a stale id is EINVAL, not someone new)."""
    kmd = kmd_model.bind(RefModel())
    a = Client()
    a2, a3 = alloc(a), alloc(a)
    b = Client()
    assert (a.ctx, a2, a3, b.ctx) == (1, 2, 3, 1)
    abo, bbo = a.bo(), b.bo()
    seq = a.run(abo, pm4.write_data(abo.addr, [1]), 0x800)
    a.submit(a.ib(abo, pm4.write_data(abo.addr + 4, [2]), 0x900), ctx=a3)
    for who, call in (("CTX FREE", lambda: b.io(Request.CTX, CtxArgs(CtxOp.FREE, a3))),
                      ("CTX QUERY_STATE", lambda: b.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, a3))),
                      ("CS", lambda: b.submit(b.ib(bbo, pm4.nop(1)), ctx=a3)),
                      ("CS: chunk 0", lambda: b.submit(CsChunkDep(GFX, 0, a3, 1), b.ib(bbo, pm4.nop(1)))),
                      ("WAIT_CS", lambda: b.wait(1, ctx=a3))):
        expect(errno.EINVAL, f"{who}: no context 3 on this file", call)
    # b's context 1 is b's: its seqnos, its jobs; a's context 1 is untouched by b's use of "1"
    before = a.f.contexts[1].last_seq
    bseq = b.run(bbo, pm4.write_data(bbo.addr, [7]), 0x800)
    assert bbo.u32[0] == 7 and a.f.contexts[1].last_seq == before
    expect(errno.EINVAL, f"CS: chunk 0: context 1 never submitted seqno {seq + 5:#x} (last is {bseq:#x})",
           b.submit, CsChunkDep(GFX, 0, 1, seq + 5), b.ib(bbo, pm4.nop(1)))
    assert set(kmd.contexts) == {(a.f.fd, 1), (a.f.fd, 2), (a.f.fd, 3), (b.f.fd, 1)}
    a.io(Request.CTX, CtxArgs(CtxOp.FREE, a2))
    assert alloc(a) == 4 and alloc(b) == 2
    expect(errno.EINVAL, "CTX QUERY_STATE: no context 2 on this file", a.io, Request.CTX,
           CtxArgs(CtxOp.QUERY_STATE, a2))


def test_a_dependency_names_its_job_on_the_ring_it_ran_on_finished_or_not():
    """amdgpu numbers a context's jobs per ring, so a seqno named on another ring is not
    that job (amdgpu_ctx_get_fence: -EINVAL for one the ring never had). Here seqnos are per
    context; a dependency that names a job's seqno on another ring was EINVAL only while
    the job ran: once it had finished it was taken as "nothing to wait for", once it had
    failed it cancelled the new job. Now it is EINVAL whatever the job's state."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x4000)
    ok = c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]), 0x800)
    done = c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x200, [2])))
    assert c.wait(done)
    failed = c.submit(sdma_ib(bo, [0x23DECD3D], 0x400))  # not an SDMA opcode: the engine stops
    with pytest.raises(KmdError) as ei:
        c.wait(failed, 1_000_000)
    assert ei.value.errno == errno.ECANCELED
    hold = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000), 0x600))
    for seq, verb in ((done, "ran"), (failed, "ran"), (hold, "runs")):
        expect(errno.EINVAL, f"CS: chunk 0: seqno {seq:#x} of context {c.ctx} {verb} on sdma0, not on gfx",
               c.submit, CsChunkDep(GFX, 0, c.ctx, seq), ok)
    # on the ring it ran on: a finished job is nothing to wait for, a failed one cancels
    assert c.wait(c.submit(CsChunkDep(DMA, 0, c.ctx, done), ok), 10_000)
    cancelled = c.submit(CsChunkDep(DMA, 0, c.ctx, failed), ok)
    with pytest.raises(KmdError) as ei:
        c.wait(cancelled)
    assert ei.value.errno == errno.ECANCELED
    bo.u32[0x3000 // 4] = 1
    assert c.wait(hold, 1_000_000)


def test_seqno_0xffffffff_is_a_job_once_the_context_has_handed_it_out():
    """Context seqnos are 32 bits and wrap; 0xffffffff is also amdgpu's "the context's latest
    job on that ring". Once the context has handed out 0xffffffff itself, a dependency on it
    names that job (the UMD names its events' jobs by the seqno CS returned): it waited for
    the context's latest job instead, here one held by the CPU, so the dependent job never
    ran. Seqnos not handed out yet (0x1 after 0x0) are EINVAL; old finished ones need no wait."""
    kmd_model.bind(RefModel(), initial_seq=2**32 - 2)
    c = Client()
    other = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    bo = c.bo(0x4000)
    first = c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x100, [6])))
    last = c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x104, [7]), 0x100))
    assert (first, last) == (0xFFFF_FFFE, 0xFFFF_FFFF) and c.wait(last)
    held = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000), 0x200))  # the latest on sdma0, until the CPU writes
    assert held == 0
    for k, seq in enumerate((0xFFFF_FFFF, first)):  # (the gfx ring is free: only the dependency could hold them)
        s = c.submit(CsChunkDep(DMA, 0, c.ctx, seq), c.ib(bo, pm4.write_data(bo.addr + 0x10 + 4 * k, [k + 1]),
                                                          0x400 + 0x100 * k), ctx=other)
        assert c.wait(s, 50_000, ctx=other) and bo.u32[4 + k] == k + 1
    expect(errno.EINVAL, f"CS: chunk 0: context {c.ctx} never submitted seqno 0x1 (last is 0x0)",
           c.submit, CsChunkDep(GFX, 0, c.ctx, 1), c.ib(bo, pm4.nop(2), 0x600))
    bo.u32[0x3000 // 4] = 1
    assert c.wait(held, 1_000_000)


@pytest.mark.parametrize("prio, why", [
    ((1 << 31) - 1, "CTX ALLOC: priority must be one of UNSET (-2048), VERY_LOW (-1023), LOW (-512), NORMAL (0), "
                    "HIGH (512), VERY_HIGH (1023), not 2147483647"),
    (1 << 31, "CTX: priority must be -0x80000000 to 0x7fffffff, not 0x80000000"),
    (-(1 << 31) - 1, "CTX: priority must be -0x80000000 to 0x7fffffff, not -0x80000001"),
])
def test_ctx_priority_is_an_int32_first_then_one_of_the_levels(prio, why):
    """drm_amdgpu_ctx_in's priority is an int32: a value outside it is refused as such (it
    could not have come through the real ioctl), one inside it by the list of levels."""
    kmd_model.bind(RefModel())
    c = Client()
    expect(errno.EINVAL, why, c.io, Request.CTX, CtxArgs(CtxOp.ALLOC, priority=prio))


def test_ctx_priority_unset_is_normal_as_amdgpu_reads_it():
    """amdgpu's AMDGPU_CTX_PRIORITY_UNSET (-2048) is what a client that sets no priority
    passes: amdgpu_ctx_ioctl makes it NORMAL, so it needs no CAP_SYS_NICE and its context
    is in the NORMAL run queue; -2047 is still no priority (EINVAL)."""
    kmd = kmd_model.bind(RefModel(), cap_sys_nice=False)
    c = Client()
    assert CtxPriority.UNSET == -2048
    ctx = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=-2048)).ctx_id
    assert kmd.contexts[c.f.fd, ctx].priority == Priority.NORMAL
    assert kmd.contexts[c.f.fd, c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.LOW)).ctx_id].priority \
        == Priority.LOW
    expect(errno.EINVAL, "CTX ALLOC: priority must be one of UNSET (-2048), VERY_LOW (-1023), LOW (-512), NORMAL (0), "
           "HIGH (512), VERY_HIGH (1023), not -2047", c.io, Request.CTX, CtxArgs(CtxOp.ALLOC, priority=-2047))


def test_ctx_query_state2_is_query_state_under_amdgpus_number():
    """amdgpu numbers QUERY_STATE2 4 (its 3 is the older QUERY_STATE); this KMD's one query
    answers both's fields, under either number: a client written to amdgpu_drm.h gets the
    same answer, and a wrong context is named by the op it asked for."""
    kmd_model.bind(RefModel())
    c = Client()
    assert CtxOp.QUERY_STATE2 == 4
    three = c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx))
    assert c.io(Request.CTX, CtxArgs(4, c.ctx)) == three
    expect(errno.EINVAL, "CTX QUERY_STATE2: no context 42 on this file", c.io, Request.CTX, CtxArgs(4, 42))
    expect(errno.EINVAL, "CTX: op must be ALLOC (1), FREE (2), QUERY_STATE (3) or QUERY_STATE2 (4), not 5",
           c.io, Request.CTX, CtxArgs(5))
