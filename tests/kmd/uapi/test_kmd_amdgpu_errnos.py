"""The KMD's ioctl errors where a driver writer who knows amdgpu would look twice: each
test names the amdgpu function it follows, or says why this KMD differs (the list is in
kmd_model/uapi.py's docstring).
"""

from __future__ import annotations

import errno

import numpy as np

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkIb, CtxOp, CtxPriority, HwIp, Request, VmFlags
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, Umd, ib, refused


# ------------------------------------------------------------------------------ CS: the IB's address

def test_an_ib_outside_the_mappings_is_einval_as_amdgpu_cs_find_mapping():
    """amdgpu_cs_patch_ibs (the rings whose IBs the kernel parses, as this KMD's checker
    does the GFX ring's): amdgpu_cs_find_mapping finds no mapping at the IB's start: -EINVAL
    ("IB va_start is invalid"); the IB starts in one and runs past its end: -EINVAL ("IB
    va_start+ib_bytes is invalid"). A packet's operand outside the mappings is EINVAL too,
    as amdgpu's parsers answer (amdgpu_vce_cs_reloc: "Can't find BO for addr", "BO too small for addr")."""
    kmd_model.bind(RefModel())
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    _, _, rw = u.bo(PAGE, vm_flags=VmFlags.READABLE | VmFlags.WRITEABLE)
    hole = va + 0x4000  # the page of VA left free after the BO
    e = refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, gpu_addr=hole))
    assert e.message == f"CS: IB at {hole:#x}+0x20 is outside every mapping of context {ctx}"
    e = refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, gpu_addr=va + 0x3FF0))
    assert e.message == (f"CS: IB at {va + 0x3ff0:#x}+0x20 runs past the end of its mapping of context {ctx} "
                         f"at {va + 0x4000:#x}")
    e = refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, gpu_addr=rw))
    assert e.message == f"CS: IB at {rw:#x}+0x20 is in a mapping of context {ctx} without EXECUTABLE"
    e = refused(errno.EINVAL, "CS", u.cs, ctx, ib(u32, pm4.write_data(hole, [1]), handle=h))
    assert e.message == (f"CS: WRITE_DATA at IB+0x0 ({va:#x}) writes [{hole:#x}, {hole + 4:#x}), outside "
                         f"every mapping of context {ctx}")
    e = refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, gpu_addr=u.info.va_end))
    assert "reaches into the kernel's range" in e.message
    assert u.wait(ctx, u.cs(ctx, ib(u32, pm4.nop(6), handle=h)))  # none took a seqno: this is the first


# ------------------------------------------------------------------------------ WAIT_CS on a guilty context

def test_wait_cs_on_a_guilty_context_reports_each_rings_own_state():
    """amdgpu_cs_wait_ioctl never reads ctx->guilty: it asks amdgpu_ctx_get_entity for the
    ring's entity, which fails with drm_sched_entity_error (the error of the entity's last
    scheduled job: Linux 6.5's "add entity error check in amdgpu_ctx_get_entity"), then
    waits for the job's own fence and returns its error. So after a full reset, on the ring
    whose latest job of the context failed, every seqno gets that job's error; on a ring
    whose latest job ended well before the reset, a job that ended well succeeds. (CS on the
    guilty context is ECANCELED first, amdgpu_cs_parser_init's guilty check.) The full reset
    here: ring 0's recovery as on a CP without CP_QUEUE_RESET."""
    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    full_reset_for_ring_0(kmd_model.bind(RefModel(), job_timeout=20_000))
    u = Umd()
    assert u.info.sdma_rings == 1  # (the model's copy engine: a second ring to tell apart)
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    u32[0x900:0x908] = sdma.pad(8)
    copy = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA))
    done = u.cs(ctx, ib(u32, pm4.nop(6), offset=0x100, handle=h))
    assert u.wait(ctx, copy) and u.wait(ctx, done)
    hang = u.cs(ctx, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ"), offset=0x200, handle=h))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 400_000)
    assert (e.info.code, e.info.seq, e.info.ctx_id) == ("TIMEOUT", hang, ctx)
    assert u.query(ctx).reset_status == uapi.ResetStatus.GUILTY
    refused(errno.ECANCELED, "CS", u.cs, ctx, ib(u32, pm4.nop(6), offset=0x300, handle=h))
    # the DMA ring's latest job of the context ended well before the reset: its own state
    assert u.wait(ctx, copy, 0)
    # the gfx ring's latest job failed: a job there that ended well before gets its error
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, done, 0)
    assert e.info.seq == hang and e.message == (
        f"WAIT_CS: context {ctx}'s latest job on gfx, seqno {hang:#x}, failed: {e.info.message}")
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 0)
    assert e.message == f"WAIT_CS: {e.info.message}"  # its own error, as before


def test_a_guilty_context_has_no_job_left_on_any_ring():
    """What WAIT_CS's entity error rests on: a context the full reset finds guilty has no
    unfinished job anywhere after it (so the latest job of a ring has always ended, and a
    failed one is the entity's error). Its jobs at the reset: the hang on gfx, one queued
    behind it, one on gfx waiting for its SDMA job, and that SDMA job polling on the SDMA
    ring with another queued behind: every one cancelled, none left in `ctx.jobs`, and
    every later CS refused, so none comes after. (The full reset: ring 0's recovery as on a
    CP without CP_QUEUE_RESET.)"""
    from spec.sdma import poll_regmem

    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    full_reset_for_ring_0(kmd)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    u32[0x900:0x908] = poll_regmem(va + 0x3004, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.pad(2)
    u32[0x908:0x910] = sdma.pad(8)
    poll = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA))
    after_poll = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2420, ip_type=HwIp.DMA))
    hang = u.cs(ctx, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ"), offset=0x200, handle=h))
    queued = u.cs(ctx, ib(u32, pm4.nop(6), offset=0x300, handle=h))
    dep = u.cs(ctx, ib(u32, pm4.nop(6), offset=0x400, handle=h),
               uapi.CsChunkDep(HwIp.DMA, 0, ctx, after_poll))
    c = u.f.contexts[ctx]
    assert len(c.jobs) == 5 and not kmd.stats["resets"]
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 400_000)
    assert e.info.code == "TIMEOUT" and kmd.stats["resets"] == 1 and not kmd.stats["queue_resets"]
    assert c.guilty and c.jobs == {}
    assert all(j.finished for s in kmd.scheds for j in (*s.pending, *s.queue) if j.ctx is c)
    for seq in (poll, after_poll, hang, queued, dep):
        refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, seq, 0)
    refused(errno.ECANCELED, "CS", u.cs, ctx, CsChunkIb(8, handle=h, offset=0x2420, ip_type=HwIp.DMA))
    assert c.jobs == {}



def test_a_copy_queue_reset_fails_only_the_guilty_entitys_unfinished_jobs():
    """A copy-ring (SDMA) queue reset, as amdgpu's since its ring reset helpers
    (amdgpu_job_timedout -> amdgpu_ring_reset -> amdgpu_ring_reset_helper_end ->
    amdgpu_fence_driver_guilty_force_completion): the guilty job fails, and so do the
    unsignalled jobs of its entity (the same context on the same ring: ECANCELED); the other
    contexts' jobs on that ring run again (re-emitted there, resubmitted here); a job that
    ended before the reset, on that ring or another, stays ended well; the other rings never
    stop. So the context's earlier CS on the copy ring is not cancelled when it ended first;
    only one still queued behind the hang is. (amdgpu's WAIT_CS then fails for any seqno of
    that ring with the entity's error, drm_sched_entity_error in amdgpu_ctx_get_entity; this
    KMD answers each job for itself: docs/architecture.md, "Recovery ladder".)"""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    u, other = Umd(), Umd()
    ctx, octx = u.ctx(), other.ctx()
    h, u32, va = u.bo(0x4000)
    oh, o32, _ = other.bo(0x4000)
    u32[0x900:0x908] = sdma.pad(8)
    u32[0x908:0x910] = sdma.poll_regmem(va + 0x3004, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.pad(2)
    o32[0x900:0x908] = sdma.pad(8)
    earlier = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA))
    assert u.wait(ctx, earlier)  # ended before the hang
    gfx = u.cs(ctx, ib(u32, pm4.nop(6), offset=0x100, handle=h))
    hang = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2420, ip_type=HwIp.DMA))
    behind = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA))
    innocent = other.cs(octx, CsChunkIb(8, handle=oh, offset=0x2400, ip_type=HwIp.DMA))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 400_000)
    assert e.info.code == "TIMEOUT" and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    assert refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, behind, 0).info.seq == hang
    assert u.wait(ctx, earlier, 0) and u.wait(ctx, gfx, 0) and other.wait(octx, innocent, 100_000)
    assert u.query(ctx).ring_status == {"sdma0": uapi.ResetStatus.GUILTY}
    assert other.query(octx).ring_status == {"sdma0": uapi.ResetStatus.INNOCENT}
    assert u.wait(ctx, u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA)), 100_000)


def test_a_gfx_queue_reset_fails_only_the_guilty_entitys_unfinished_jobs():
    """The same on the gfx ring, whose CP queue 0 has its own reset (CP_QUEUE_RESET.Q0): the
    hang and the context's gfx job behind it fail (ECANCELED), its gfx and copy jobs that
    ended before stay ended well, the other context's gfx job behind the hang is resubmitted
    and ends well, the SDMA ring is not reset, and the context submits on. (An SDMA job in
    flight meanwhile is neither stopped nor run again: tests/kmd_sched/queues/test_kmd_queues_full_reset.py,
    check_a_gfx_vm_fault_resets_queue_0_alone_and_an_innocent_sdma_job_is_not_run_again.)"""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    u, other = Umd(), Umd()
    ctx, octx = u.ctx(), other.ctx()
    h, u32, va = u.bo(0x4000)
    oh, o32, ova = other.bo(0x4000)
    u32[0x900:0x908] = sdma.pad(8)
    earlier = u.cs(ctx, ib(u32, pm4.nop(6), offset=0x100, handle=h))
    copy = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA))
    assert u.wait(ctx, earlier) and u.wait(ctx, copy)  # ended before the hang
    hang = u.cs(ctx, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ"), offset=0x200, handle=h))
    behind = u.cs(ctx, ib(u32, pm4.nop(6), offset=0x300, handle=h))
    innocent = other.cs(octx, ib(o32, pm4.write_data(ova + 0x40, [0x1C]), offset=0x100, handle=oh))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 400_000)
    assert e.info.code == "TIMEOUT" and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    assert refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, behind, 0).info.seq == hang
    assert u.wait(ctx, earlier, 0) and u.wait(ctx, copy, 0)
    assert other.wait(octx, innocent, 100_000) and o32[0x10] == 0x1C
    assert kmd.recovery_log == [("gfx", "timeout"), ("gfx", "queue_reset")]
    assert u.query(ctx).ring_status == {"gfx": uapi.ResetStatus.GUILTY}
    assert other.query(octx).ring_status == {"gfx": uapi.ResetStatus.INNOCENT}
    assert u.wait(ctx, u.cs(ctx, ib(u32, pm4.nop(6), offset=0x400, handle=h)), 100_000)

# ------------------------------------------------------------------------------ CTX ALLOC: the priority

def test_every_invalid_priority_is_einval_with_one_precise_message():
    """amdgpu_ctx_ioctl reads a priority amdgpu_ctx_priority_is_valid refuses as NORMAL (for
    old clients that left garbage in the field); its one -EINVAL for an invalid priority is
    AMDGPU_SCHED's (amdgpu_sched_ioctl). This KMD has no old clients: CTX ALLOC refuses every
    value but amdgpu's six, EINVAL, naming them; a value wider than the field (an int32,
    drm_amdgpu_ctx_in's) or not an int is EINVAL naming that."""
    kmd_model.bind(RefModel(), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    u = Umd()
    names = ", ".join(f"{p.name} ({p.value})" for p in CtxPriority)
    for prio in (-1, -2, 1, 100, -511, -513, -1022, -1024, -2047, -2049, 511, 513, 1022, 1024, 4096,
                 -(1 << 31), (1 << 31) - 1, np.int64(7)):
        e = refused(errno.EINVAL, "CTX ALLOC", u.io, Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=prio))
        assert e.message == f"CTX ALLOC: priority must be one of {names}, not {int(prio)}"
    for prio in (1 << 31, -(1 << 31) - 1, 1 << 32, 1 << 64, -(1 << 64)):
        e = refused(errno.EINVAL, "CTX", u.io, Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=prio))
        sign = "-" * (prio < 0)
        assert e.message == f"CTX: priority must be -0x80000000 to 0x7fffffff, not {sign}{abs(prio):#x}"
    for prio in (None, 0.0, 1.5, "HIGH", True, [0]):
        e = refused(errno.EINVAL, "CTX", u.io, Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=prio))
        assert e.message == f"CTX: priority must be an int, not {prio!r}"
    assert [u.ctx(p) for p in CtxPriority] == [1, 2, 3, 4, 5, 6]  # the six are fine; no refusal took an id


def test_free_and_query_ignore_the_priority_as_amdgpu_does():
    """amdgpu_ctx_ioctl reads the priority for ALLOC alone: FREE, QUERY_STATE and QUERY_STATE2
    with any int32 there (a struct reused from an ALLOC, garbage) answer as with 0. They were
    EINVAL, "CTX: priority is for ALLOC only". The field is still an int32 for every op: a
    value no drm_amdgpu_ctx_in can hold, or not an int, is the copy-in's EINVAL."""
    kmd_model.bind(RefModel())
    u = Umd()
    C = Request.CTX
    for prio in (CtxPriority.HIGH, 100, -1, -(1 << 31), (1 << 31) - 1):
        ctx = u.ctx()
        for op in (CtxOp.QUERY_STATE, CtxOp.QUERY_STATE2):
            out = u.io(C, uapi.CtxArgs(op, ctx, priority=prio))
            assert out == u.io(C, uapi.CtxArgs(op, ctx)) and out.ctx_id == ctx
        assert u.io(C, uapi.CtxArgs(CtxOp.FREE, ctx, priority=prio)).ctx_id == ctx
        refused(errno.EINVAL, "CTX", u.io, C, uapi.CtxArgs(CtxOp.QUERY_STATE, ctx))  # freed
    ctx = u.ctx()
    for op in (CtxOp.FREE, CtxOp.QUERY_STATE):
        e = refused(errno.EINVAL, "CTX", u.io, C, uapi.CtxArgs(op, ctx, priority=1 << 31))
        assert e.message == "CTX: priority must be -0x80000000 to 0x7fffffff, not 0x80000000"
        e = refused(errno.EINVAL, "CTX", u.io, C, uapi.CtxArgs(op, ctx, priority="HIGH"))
        assert e.message == "CTX: priority must be an int, not 'HIGH'"
    assert u.io(C, uapi.CtxArgs(CtxOp.QUERY_STATE, ctx)).ctx_id == ctx  # (the refusals changed nothing)
