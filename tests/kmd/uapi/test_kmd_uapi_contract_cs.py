"""The KMD's uAPI as an outside UMD writer reads it, continued (tests/kmd/uapi/test_kmd_uapi_contract.py
has the helpers, open, INFO and GEM): CTX, CS with IB / fence / dependency chunks, WAIT_CS,
GEM_WAIT_IDLE, what a reset leaves for QUERY_STATE, and the DMA ring. Each check asserts a
number or an errno that kmd_model/uapi.py or docs/architecture.md states.
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import (CsChunkDep, CsChunkFence, CsChunkIb, CtxOp, CtxPriority, HwIp, InfoQuery,
                            MappingRevoked, Request, VaOp, VmFlags)
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_contract import LATEST, PAGE, RW, Umd, ib, refused


# ------------------------------------------------------------------------------ CTX

def check_ctx(dev):
    kmd_model.bind(dev)
    a, b = Umd(cap_sys_nice=True), Umd()  # (a asks for every priority)
    C = Request.CTX
    ids = [a.ctx() for _ in range(3)]
    assert ids == [1, 2, 3] and b.ctx() == 1  # the file's own ids, from 1
    a.io(C, uapi.CtxArgs(CtxOp.FREE, 2))
    assert a.ctx() == 4  # a freed id is not handed out again by that file
    st = a.query(1)
    assert (st.ctx_id, st.reset_status, st.resets, st.error, st.ring_status, st.flags) == (
        1, uapi.ResetStatus.NO_RESET, 0, None, {}, uapi.CtxQueryFlags(0))
    for op in (CtxOp.FREE, CtxOp.QUERY_STATE):  # an id the file does not hold: EINVAL
        for ctx_id in (0, 2, 5, -1, 1 << 32, "1", None):
            refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(op, ctx_id))
    b.ctx()  # b's 2 is b's: a's 2 stays freed
    refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(CtxOp.QUERY_STATE, 2))
    for op in (0, 5, -1, None, "ALLOC", 1.0):  # (4 is amdgpu's QUERY_STATE2: QUERY_STATE)
        refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(op))
    for flags in (1, -1, 1 << 31, None):  # no flags are defined (amdgpu's in.flags)
        refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(CtxOp.ALLOC, flags=flags))
        refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(CtxOp.QUERY_STATE, 1, flags=flags))
    for prio in (1, -1024, 1024, 1 << 31, 100, None, 0.0, "HIGH"):
        refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(CtxOp.ALLOC, priority=prio))
    before = a.ctx()
    for prio in CtxPriority:  # every priority with CAP_SYS_NICE (a file opened with it)
        a.ctx(prio)
    # without CAP_SYS_NICE (every file's default): above NORMAL is EACCES
    # (amdgpu_ctx_priority_permit), the rest fine
    n = Umd()
    for prio in (CtxPriority.HIGH, CtxPriority.VERY_HIGH):
        e = refused(errno.EACCES, "CTX ALLOC", n.io, C, uapi.CtxArgs(CtxOp.ALLOC, priority=prio))
        assert e.message == f"CTX ALLOC: priority {prio.name} needs CAP_SYS_NICE (amdgpu_ctx_priority_permit)"
    assert [n.ctx(p) for p in (CtxPriority.VERY_LOW, CtxPriority.LOW, CtxPriority.NORMAL)] == [1, 2, 3]
    assert a.ctx() == before + len(CtxPriority) + 1  # the refusals took no id
    a.io(C, uapi.CtxArgs(CtxOp.FREE, 1))
    refused(errno.EINVAL, "CTX", a.io, C, uapi.CtxArgs(CtxOp.FREE, 1))  # twice
    refused(errno.EINVAL, "CS", a.cs, 1, CsChunkIb(8, gpu_addr=a.va))
    refused(errno.EINVAL, "WAIT_CS", a.io, Request.WAIT_CS, uapi.WaitCsArgs(1, 1, 0))


# ------------------------------------------------------------------------------ CS

def check_cs(dev):
    kmd_model.bind(dev)
    u = Umd(cap_sys_nice=True)  # (it makes a HIGH context)
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    data = va + 0x2000
    first = u.cs(ctx, ib(u32, pm4.write_data(data, [0x11, 0x22]), handle=h),
                 ib(u32, pm4.write_data(data + 8, [0x33]), offset=0x100, va=va),  # by VA
                 CsChunkFence(h, 0x3000))
    assert u.wait(ctx, first)
    assert u32[0x800:0x803].tolist() == [0x11, 0x22, 0x33]
    assert u32[0x3000 // 4] == first  # the user fence: the job's seqno
    # a dependency on the context's latest GFX job, and on the first by its seqno
    dep = u.cs(ctx, ib(u32, pm4.write_data(data, [0x44]), offset=0x200, handle=h),
               CsChunkDep(HwIp.GFX, 0, ctx, LATEST), CsChunkDep(HwIp.GFX, 0, ctx, first))
    assert dep == first + 1 and u.wait(ctx, dep) and u32[0x800] == 0x44
    other_ctx = u.ctx()  # a dependency on another context of the file; LATEST with no job: none
    dep2 = u.cs(other_ctx, ib(u32, pm4.write_data(data, [0x55]), offset=0x300, handle=h),
                CsChunkDep(HwIp.GFX, 0, ctx, dep), CsChunkDep(HwIp.GFX, 0, u.ctx(), LATEST))
    assert u.wait(other_ctx, dep2) and u32[0x800] == 0x55
    assert u.wait(ctx, first, 0)  # long finished: signalled at once
    # a HIGH context's GFX jobs (gfx_high where the device has it) are named as GFX ring 0 all the same
    hi = u.ctx(CtxPriority.HIGH)
    hs = u.cs(hi, ib(u32, pm4.write_data(data + 16, [0x77]), offset=0x380, handle=h), CsChunkFence(h, 0x3004),
              CsChunkDep(HwIp.GFX, 0, other_ctx, dep2))
    after_hi = u.cs(ctx, ib(u32, pm4.write_data(data + 20, [0x78]), offset=0x3C0, handle=h),
                    CsChunkDep(HwIp.GFX, 0, hi, hs), CsChunkDep(HwIp.GFX, 0, hi, LATEST))
    assert u.wait(hi, hs) and u.wait(ctx, after_hi) and u32[0x804:0x806].tolist() == [0x77, 0x78]
    assert u32[0x3004 // 4] == hs
    nop = ib(u32, pm4.nop(6), offset=0x400, handle=h)

    def bad(err, *chunks, c=ctx):
        return refused(err, "CS", u.cs, c, *chunks)

    for c in (0, 99, -1, "1", None):
        bad(errno.EINVAL, nop, c=c)  # no such context
    bad(errno.EINVAL)  # no IB chunk
    bad(errno.EINVAL, CsChunkFence(h, 0))
    bad(errno.EINVAL, CsChunkDep(HwIp.GFX, 0, ctx, first))
    bad(errno.EINVAL, *[nop] * (u.info.max_ib_chunks + 1))
    refused(errno.EINVAL, "CS", u.io, Request.CS, uapi.CsArgs(ctx, "ib"))
    refused(errno.EINVAL, "CS", u.io, Request.CS, uapi.CsArgs(ctx, None))
    bad(errno.EINVAL, nop, 7)
    bad(errno.EINVAL, nop, uapi.GemCloseArgs(h))
    for size in (0, -8, 1 << 20, None, 8.0):
        bad(errno.EINVAL, CsChunkIb(size, handle=h, offset=0x400))
    bad(errno.ENOENT, CsChunkIb(8, handle=99))  # an unknown BO handle (drm_gem_object_lookup)
    for off in (2, -4, 0x4000, 0x3FE0, None, 4.0):  # misaligned, negative, past the end
        bad(errno.EINVAL, CsChunkIb(16, handle=h, offset=off))
    unmapped = u.create()
    bad(errno.EINVAL, CsChunkIb(8, handle=unmapped))  # by handle, a BO mapped nowhere names no address
    bad(errno.EINVAL, CsChunkIb(8))  # neither handle nor gpu_addr
    bad(errno.EINVAL, CsChunkIb(8, handle=h, gpu_addr=va))  # both
    for addr in (va + 2, -8, 1 << 64, "0x1000", 1.0):
        bad(errno.EINVAL, CsChunkIb(8, gpu_addr=addr))
    for flags in (1, -1, None):
        bad(errno.EINVAL, CsChunkIb(8, handle=h, offset=0x400, flags=flags))
    # the ring: an IP type beyond AMDGPU_HW_IP_NUM, one the device has no ring of, a second
    # instance, a ring past the last
    for ip, inst, ring in ((uapi.HW_IP_NUM, 0, 0), (-1, 0, 0), (HwIp.COMPUTE, 0, 0), (HwIp.UVD, 0, 0),
                           (HwIp.GFX, 1, 0), (HwIp.GFX, 0, 1), (HwIp.GFX, 0, -1), (None, 0, 0)):
        bad(errno.EINVAL, CsChunkIb(8, handle=h, offset=0x400, ip_type=ip, ip_instance=inst, ring=ring))
        bad(errno.EINVAL, nop, CsChunkDep(ip, ring, ctx, first, ip_instance=inst))
    if not u.info.sdma_rings:
        bad(errno.EINVAL, CsChunkIb(8, handle=h, offset=0x400, ip_type=HwIp.DMA))
    # the user fence: unknown or malformed is EINVAL (amdgpu_cs_p1_user_fence), one per CS
    for fh, off in ((99, 0), (h, 2), (h, 0x4000), (h, -4), (h, None), (None, 0)):
        bad(errno.EINVAL, nop, CsChunkFence(fh, off))
    bad(errno.EINVAL, nop, CsChunkFence(h, 0), CsChunkFence(h, 4))
    # dependencies: an unknown context, a seqno not handed out yet, a malformed handle
    for dctx, seq in ((99, first), (ctx, dep2 + 100), (ctx, 1 << 32), (ctx, -1), (ctx, None)):
        bad(errno.EINVAL, nop, CsChunkDep(HwIp.GFX, 0, dctx, seq))
    bad(errno.EINVAL, nop, *[CsChunkDep(HwIp.GFX, 0, ctx, first)] * (u.info.max_dep_chunks + 1))
    # the IB's memory: outside every mapping, or not EXECUTABLE, or the kernel's range: EINVAL
    hd, du32, dva = u.bo(PAGE, vm_flags=RW)
    ib(du32, pm4.nop(6))
    for chunk in (CsChunkIb(8, gpu_addr=dva), CsChunkIb(8, handle=hd), CsChunkIb(8, gpu_addr=u.info.va_end),
                  CsChunkIb(8, gpu_addr=u.info.va_start - PAGE), CsChunkIb(8, gpu_addr=dva + PAGE)):
        bad(errno.EINVAL, chunk)
    # a packet's memory: what its mapping does not permit, or no mapping, is EINVAL too
    ro, ro32, rova = u.bo(PAGE, vm_flags=VmFlags.READABLE)
    for target in (rova, dva + PAGE, u.info.va_end, va + 0x4000):
        bad(errno.EINVAL, ib(u32, pm4.write_data(target, [1]), offset=0x500, handle=h))
    bad(errno.EINVAL, ib(u32, pm4.wait_reg_mem(dva + PAGE, 1, 1, "EQ"), offset=0x500, handle=h))
    # an IB may come from a mapping that is EXECUTABLE alone; a READABLE one may be read
    xh, x32, xva = u.bo(PAGE, vm_flags=VmFlags.EXECUTABLE)
    xs = u.cs(ctx, ib(x32, pm4.write_data(data + 12, [0x66]), handle=xh),
              ib(u32, pm4.wait_reg_mem(rova, 0, 0xFFFF_FFFF, "EQ"), offset=0x600, handle=h))
    assert xs == after_hi + 1 and u.wait(ctx, xs) and u32[0x803] == 0x66
    # none of the refusals took a seqno: the next jobs are the ones after dep (on ctx)
    nxt = u.cs(ctx, nop)
    assert nxt == xs + 1 and u.wait(ctx, nxt)


def check_cs_other_files_objects(dev):
    """What another file holds is nothing to this one: its BOs, contexts and seqnos."""
    kmd_model.bind(dev)
    a, b = Umd(), Umd()
    actx, bctx = a.ctx(), b.ctx()
    ah, au32, ava = a.bo()
    seq = a.cs(actx, ib(au32, pm4.nop(6), handle=ah))
    assert a.wait(actx, seq)
    bh2, bu32, _ = b.bo()
    bnop = ib(bu32, pm4.nop(6), handle=bh2)
    unknown_to_b = max(ah, bh2) + 50
    refused(errno.ENOENT, "CS", b.cs, bctx, CsChunkIb(8, handle=unknown_to_b))
    refused(errno.EINVAL, "CS", b.cs, bctx, bnop, CsChunkFence(unknown_to_b, 0))
    refused(errno.EINVAL, "CS", b.cs, 2, bnop)  # a's contexts are not b's (a has none called 2 either)
    a.ctx()  # a's context 2
    refused(errno.EINVAL, "CS", b.cs, 2, bnop)
    refused(errno.EINVAL, "CS", b.cs, bctx, bnop, CsChunkDep(HwIp.GFX, 0, 2, 1))
    refused(errno.EINVAL, "WAIT_CS", b.io, Request.WAIT_CS, uapi.WaitCsArgs(2, 1, 0))
    # b's context 1 has no seqno a's context 1 handed out
    refused(errno.EINVAL, "WAIT_CS", b.io, Request.WAIT_CS, uapi.WaitCsArgs(bctx, seq, 0))
    only_a = ava + 0x100_0000  # a VA a maps and b does not: a hole in b's VM
    a.map(a.create(0x4000), only_a, 0x4000)
    refused(errno.EINVAL, "CS", b.cs, bctx, CsChunkIb(8, gpu_addr=only_a))
    assert b.wait(bctx, b.cs(bctx, bnop))


# ------------------------------------------------------------------------------ WAIT_CS, GEM_WAIT_IDLE

def check_waits(dev):
    kmd_model.bind(dev)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    flag = va + 0x3000
    W, I = Request.WAIT_CS, Request.GEM_WAIT_IDLE
    refused(errno.EINVAL, "WAIT_CS", u.io, W, uapi.WaitCsArgs(ctx, 1, 0))  # nothing submitted yet
    held = u.cs(ctx, ib(u32, pm4.wait_reg_mem(flag, 1, 1, "EQ") + pm4.write_data(va + 0x2000, [9]), handle=h))
    # asking (timeout 0) is busy, no error; a wait that runs out is ETIME (WaitCsOut)
    assert u.io(W, uapi.WaitCsArgs(ctx, held, 0)).busy
    refused(errno.ETIME, "WAIT_CS", u.io, W, uapi.WaitCsArgs(ctx, held, 1000))
    # GEM_WAIT_IDLE on a BO the job holds: busy, at 0 and after a timeout alike (amdgpu's status)
    assert u.io(I, uapi.GemWaitIdleArgs(h, 0)).busy
    assert u.io(I, uapi.GemWaitIdleArgs(h, 1000)).busy
    for args in ((ctx, held + 1, 0), (ctx, held, -1), (ctx, held, 1 << 64), (ctx, 1 << 32, 0), (ctx, -1, 0),
                 (ctx, held, None), (ctx, held, 1.5), (ctx, LATEST, 0), (99, held, 0), (None, held, 0)):
        refused(errno.EINVAL, "WAIT_CS", u.io, W, uapi.WaitCsArgs(*args))
    for args in ((h, -1), (h, 1 << 64), (h, None), (h, 0.5)):
        refused(errno.EINVAL, "GEM_WAIT_IDLE", u.io, I, uapi.GemWaitIdleArgs(*args))
    for handle in (0, 99, -1, "1"):
        refused(errno.ENOENT, "GEM_WAIT_IDLE", u.io, I, uapi.GemWaitIdleArgs(handle, 0))
    u32[0x3000 // 4] = 1  # the CPU releases the WAIT_REG_MEM
    assert u.wait(ctx, held) and u32[0x2000 // 4] == 9
    assert not u.io(I, uapi.GemWaitIdleArgs(h, 100_000)).busy
    assert not u.io(I, uapi.GemWaitIdleArgs(h, 0)).busy
    idle = u.create()  # never used by a job: idle
    assert not u.io(I, uapi.GemWaitIdleArgs(idle, 0)).busy
    # a BO closed while its job runs stays the job's; the handle is gone at once
    again = u.cs(ctx, ib(u32, pm4.wait_reg_mem(flag + 4, 1, 1, "EQ") + pm4.write_data(va + 0x2004, [10]),
                         offset=0x100, handle=h))
    view = u.mmap(h)
    u.close_bo(h)
    refused(errno.ENOENT, "GEM_WAIT_IDLE", u.io, I, uapi.GemWaitIdleArgs(h, 0))
    refused(errno.ENOENT, "GEM_VA", u.map, h, va + 0x10000, PAGE)
    with pytest.raises(MappingRevoked):
        view[0x3004] = 1
    # the job cannot be released from the CPU now; it is no one else's concern: WAIT_CS asks
    assert u.io(W, uapi.WaitCsArgs(ctx, again, 0)).busy


def check_gem_va_as_the_gpu_sees_it(dev):
    """MAP, REPLACE, CLEAR and UNMAP as the GPU's writes see them: each change holds for the
    next job (the TLB is invalidated before the ioctl returns), a split mapping's parts keep
    their offsets in the BO, and what is unmapped is refused at CS (EINVAL)."""
    kmd_model.bind(dev)
    u = Umd()
    ctx = u.ctx()
    ih, i32, _ = u.bo(PAGE)  # the IBs
    a, b = u.create(0x4000), u.create(0x4000)
    a32, b32 = u.mmap(a).view("<u4"), u.mmap(b).view("<u4")
    va = u.va + 0x10_0000
    u.map(a, va, 0x4000, flags=RW)

    def write(page, value, off=0x100):
        """A job writing `value` to `va` + page * PAGE + off; the CS's seqno."""
        return u.cs(ctx, ib(i32, pm4.write_data(va + page * PAGE + off, [value]), handle=ih))

    def page(u32, n):
        return int(u32[n * PAGE // 4 + 0x40])

    for n in range(4):
        assert u.wait(ctx, write(n, 0xA0 + n))
    assert [page(a32, n) for n in range(4)] == [0xA0, 0xA1, 0xA2, 0xA3]
    u.map(b, va + PAGE, 2 * PAGE, offset=PAGE, flags=RW, op=VaOp.REPLACE)  # a's pages 1, 2 -> b's 1, 2
    for n in range(4):
        assert u.wait(ctx, write(n, 0xB0 + n))
    assert [page(a32, n) for n in range(4)] == [0xB0, 0xA1, 0xA2, 0xB3]
    assert [page(b32, n) for n in range(4)] == [0, 0xB1, 0xB2, 0]
    u.io(Request.GEM_VA, uapi.GemVaArgs(0, VaOp.CLEAR, va + 2 * PAGE, 0, PAGE, 0))  # b's page 2 goes
    refused(errno.EINVAL, "CS", write, 2, 0xC2)
    u.map(a, va + 3 * PAGE, 0, op=VaOp.UNMAP)  # what REPLACE left of a at its end is a mapping of its own
    refused(errno.EINVAL, "CS", write, 3, 0xC3)
    for n in (0, 1):
        assert u.wait(ctx, write(n, 0xC0 + n))
    assert [page(a32, n) for n in range(4)] == [0xC0, 0xA1, 0xA2, 0xB3]
    assert [page(b32, n) for n in range(4)] == [0, 0xC1, 0xB2, 0]
    u.map(a, va, 0, op=VaOp.UNMAP)
    u.map(b, va + PAGE, 0, op=VaOp.UNMAP)
    for n in range(4):
        refused(errno.EINVAL, "CS", write, n, 0xD0)


# ------------------------------------------------------------------------------ resets, the DMA ring

def check_reset_status(dev):
    """A hang on the gfx ring, recovered by a reset of its queue alone (CP_QUEUE_RESET.Q0):
    the guilty context's hung job is ECANCELED, QUERY_STATE says GUILTY (flags RESET |
    GUILTY, amdgpu's bits 0 and 2; `error` names the hang, WAIT_CS's error: it was None, a
    guilty context naming nothing), the innocent context's job is resubmitted and QUERY_STATE says INNOCENT (flags
    RESET); a job that depended on the hung one is cancelled; the guilty context submits on.
    (After the full reset its CS is ECANCELED from then on: tests/kmd_sched/queues/test_kmd_queues_full_reset.py
    check_a_queue_0_reset_that_does_not_come_back_falls_to_the_full_reset.)"""
    kmd_model.bind(dev, job_timeout=20_000)
    u = Umd()
    bad, good = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    hang = u.cs(bad, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ"), handle=h))
    behind = u.cs(good, ib(u32, pm4.write_data(va + 0x2000, [7]), offset=0x100, handle=h))
    after = u.cs(good, ib(u32, pm4.write_data(va + 0x2004, [8]), offset=0x200, handle=h),
                 CsChunkDep(HwIp.GFX, 0, bad, hang))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, bad, hang, 400_000)
    assert isinstance(e.info, uapi.HwErrorInfo) and (e.info.code, e.info.seq, e.info.ctx_id) == ("TIMEOUT", hang, bad)
    assert u.wait(good, behind) and u32[0x800] == 7  # resubmitted after the reset
    refused(errno.ECANCELED, "WAIT_CS", u.wait, good, after)  # its dependency failed
    assert u32[0x801] == 0
    F, R = uapi.CtxQueryFlags, uapi.ResetStatus
    g = u.query(bad)
    assert (g.reset_status, g.flags, g.resets, g.ring_status) == (R.GUILTY, F.RESET | F.GUILTY, 1, {"gfx": R.GUILTY})
    assert int(g.flags) == 0b101 and g.error == e.info
    i = u.query(good)
    assert (i.reset_status, i.flags, i.resets, i.ring_status, i.error) == (R.INNOCENT, F.RESET, 1,
                                                                           {"gfx": R.INNOCENT}, None)
    assert refused(errno.ECANCELED, "WAIT_CS", u.wait, bad, hang, 0).info == e.info  # its own error, still
    # a later dependency on the failed job: the CS is taken, its job cancelled
    late = u.cs(good, ib(u32, pm4.write_data(va + 0x2004, [9]), offset=0x300, handle=h),
                CsChunkDep(HwIp.GFX, 0, bad, hang))
    refused(errno.ECANCELED, "WAIT_CS", u.wait, good, late)
    # the guilty context runs on: its queue was reset, not the context refused
    assert u.wait(bad, u.cs(bad, ib(u32, pm4.write_data(va + 0x2008, [11]), offset=0x500, handle=h)))
    assert u32[0x802] == 11
    fresh = u.ctx()  # a new context starts clean, but has seen no reset
    assert u.query(fresh).flags == F(0)
    assert u.wait(fresh, u.cs(fresh, ib(u32, pm4.write_data(va + 0x2004, [10]), offset=0x400, handle=h)))
    assert u32[0x801] == 10


def check_dma_ring(dev):
    """HW IP DMA (the SDMA copy engine) where DEV_INFO.sdma_rings says it is there: a CS names
    one ring, dependencies name the ring their job ran on, an IB there starts 32-byte aligned;
    with no checker, an IB outside the VM is the MMU's VM fault (ECANCELED), and INFO VM_FAULT
    keeps its address and VMID only."""
    kmd_model.bind(dev, job_timeout=20_000)
    u = Umd()
    if not u.info.sdma_rings:
        refused(errno.EINVAL, "CS", u.cs, u.ctx(), CsChunkIb(8, gpu_addr=u.va, ip_type=HwIp.DMA))
        return
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    u32[0:64] = range(1, 65)

    def dma_ib(words, offset):
        w = list(words) + sdma.pad(-len(words) % 8)
        u32[offset // 4: offset // 4 + len(w)] = w
        return CsChunkIb(len(w), handle=h, offset=offset, ip_type=HwIp.DMA)

    g = u.cs(ctx, ib(u32, pm4.write_data(va + 0x2000, [5]), offset=0x600, handle=h))
    copy = dma_ib(sdma.copy_linear(va + 0x1000, va, 256), 0x800)
    d = u.cs(ctx, copy, CsChunkDep(HwIp.GFX, 0, ctx, g), CsChunkDep(HwIp.DMA, 0, ctx, LATEST),
             CsChunkFence(h, 0x3000))
    assert d == g + 1 and u.wait(ctx, d)  # one sequence over the context's rings; WAIT_CS names no ring
    assert u32[0xC00] == d  # a user fence on the DMA ring too
    assert u32[0x400:0x440].tolist() == list(range(1, 65)) and u32[0x800] == 5
    for chunks in ((copy, ib(u32, pm4.nop(6), offset=0x600, handle=h)),  # two rings in one CS
                   (copy, CsChunkDep(HwIp.DMA, 0, ctx, g)),  # g ran on gfx, not on the DMA ring
                   (ib(u32, pm4.nop(6), offset=0x600, handle=h), CsChunkDep(HwIp.GFX, 0, ctx, d)),
                   (CsChunkIb(8, handle=h, offset=0x810, ip_type=HwIp.DMA),),  # 16-byte aligned only
                   (CsChunkIb(8, handle=h, offset=0x800, ip_type=HwIp.DMA, ring=1),)):
        refused(errno.EINVAL, "CS", u.cs, ctx, *chunks)
    refused(errno.EINVAL, "CS", u.cs, ctx, CsChunkIb(8, gpu_addr=u.info.va_end, ip_type=HwIp.DMA))
    hole = va + 0x100_0000
    f = u.cs(ctx, CsChunkIb(8, gpu_addr=hole, ip_type=HwIp.DMA))
    fe = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, f)
    fault = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT))
    assert fault.addr == hole and fault.vmid in range(1, 16)
    assert (fault.status, fault.access, fault.cause, fault.level) == (0, "", "", 0)
    st = u.query(ctx)  # a queue reset: GUILTY on sdma0, naming its fault, and the context runs on
    assert (st.reset_status, st.ring_status, st.error) == (uapi.ResetStatus.GUILTY,
                                                           {"sdma0": uapi.ResetStatus.GUILTY}, fe.info)
    assert u.wait(ctx, u.cs(ctx, copy)) and u.wait(ctx, u.cs(ctx, ib(u32, pm4.nop(6), offset=0x600, handle=h)))
    # ... until it has caused ban_after_hangs (3) resets: then its CS is EIO, QUERY_STATE says BANNED
    for _ in range(2):
        refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, u.cs(ctx, CsChunkIb(8, gpu_addr=hole, ip_type=HwIp.DMA)))
    refused(errno.EIO, "CS", u.cs, ctx, copy)
    refused(errno.EIO, "CS", u.cs, ctx, ib(u32, pm4.nop(6), offset=0x600, handle=h))
    F = uapi.CtxQueryFlags
    st = u.query(ctx)
    assert (st.flags, int(st.flags), st.resets) == (F.RESET | F.GUILTY | F.BANNED, 0x105, 3)
    fresh = u.ctx()  # the file is not banned: a new context runs
    assert u.wait(fresh, u.cs(fresh, copy))
    other = Umd()  # the fault is the file's: another file's VM_FAULT is all 0
    assert other.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)) == uapi.VmFaultInfo()



CHECKS = [check_ctx, check_cs, check_cs_other_files_objects, check_waits, check_gem_va_as_the_gpu_sees_it,
          check_reset_status, check_dma_ring]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_dependency_older_than_the_rings_kept_is_nothing_to_wait_for():
    """docs/architecture.md: the ring of a finished job is kept for the context's last 1,024
    jobs; an older one that ended well is nothing to wait for on any ring (amdgpu_ctx_get_fence
    takes a seqno too old to be kept as signalled), a newer one on the wrong ring is EINVAL."""
    kmd_model.bind(RefModel())
    u = Umd()
    ctx = u.ctx()
    h, u32, _ = u.bo(PAGE)
    nop = ib(u32, pm4.nop(6), handle=h)
    seqs = [u.cs(ctx, nop) for _ in range(1026)]
    assert u.wait(ctx, seqs[-1])
    copy = CsChunkIb(8, handle=h, ip_type=HwIp.DMA)
    u32[:8] = sdma.pad(8)
    for kept in (seqs[2], seqs[-1]):  # the last 1,024: they ran on gfx, not on the DMA ring
        refused(errno.EINVAL, "CS", u.cs, ctx, copy, CsChunkDep(HwIp.DMA, 0, ctx, kept))
    # 1,026 and 1,025 jobs ago: forgotten, nothing to wait for (each CS pushes one more out)
    assert u.wait(ctx, u.cs(ctx, copy, CsChunkDep(HwIp.DMA, 0, ctx, seqs[0]), CsChunkDep(HwIp.DMA, 0, ctx, seqs[1])))


def test_a_high_contexts_gfx_ring_is_named_gfx_high_in_ring_status():
    """CtxOut.ring_status names the ring a job ran on: a HIGH context's GFX jobs run on the
    CP's second queue where the device has it (the model does), so its hang's reset is
    "gfx_high" there and in WAIT_CS's message, though the CS named GFX ring 0."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd(cap_sys_nice=True)
    hi, normal = u.ctx(CtxPriority.HIGH), u.ctx()
    h, u32, va = u.bo(0x4000)
    hang = u.cs(hi, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ"), handle=h))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, hi, hang, 400_000)
    assert " on gfx_high: " in e.message
    st = u.query(hi)
    assert (st.reset_status, st.ring_status) == (uapi.ResetStatus.GUILTY, {"gfx_high": uapi.ResetStatus.GUILTY})
    assert u.wait(normal, u.cs(normal, ib(u32, pm4.nop(6), offset=0x100, handle=h)))
    assert u.query(normal).ring_status == {}  # (its gfx ring was not reset)
