"""What becomes of what a UMD lets go of while the GPU still works on it, and how long the
waits wait, as docs/uapi.md (kmd_model/uapi.py's comments) states it to an outside UMD
writer: a BO closed while a job uses it, a mapping unmapped, cleared or replaced under a
job already submitted, a context freed with jobs queued, a failed job's error kept for the
context's latest failures only; WAIT_CS's and GEM_WAIT_IDLE's timeouts (cycles from the
call, 0, 2**64 - 1) and a signal ending a wait (EINTR). The helpers are
test_kmd_uapi_contract.py's; each test drives render nodes through their ioctls alone.
"""

from __future__ import annotations

import errno
import signal

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import (CsChunkDep, CsChunkFence, CsChunkIb, CtxOp, Domain, GemWaitIdleArgs, HwIp, InfoQuery,
                            Request, VaOp, WaitCsArgs)
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, RW, Umd, ib, refused

W, I = Request.WAIT_CS, Request.GEM_WAIT_IDLE
FOREVER = (1 << 64) - 1  # WaitCsArgs.timeout: "no bound but the job timer"


def now(u: Umd) -> int:
    """The device's clock, as any file reads it (INFO COUNTERS' timestamp)."""
    return u.io(Request.INFO, uapi.InfoArgs(InfoQuery.COUNTERS)).hw["timestamp"]


def held(u: Umd, ctx: int, u32, h: int, va: int, then=(), offset=0) -> int:
    """A gfx job that waits for the dword at va + 0x3000 to be 1 (the CPU's to release), then
    runs `then`; its seqno."""
    return u.cs(ctx, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ") + list(then), offset=offset, handle=h))


def held_writing_a_page(at: int = 0) -> tuple:
    """A client of a new reference-model device (job_timeout 20,000) with a held gfx job
    (`held`) that writes 0x77 at `at` in a page mapped read-write after its hold, a page's
    gap below it: (u, ctx, u32, h, va, the page's handle, its address, the job's seqno)."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    t, tva = mapped_page(u)
    job = held(u, ctx, u32, h, va, pm4.write_data(tva + at, [0x77]))
    return u, ctx, u32, h, va, t, tva, job


def mapped_page(u: Umd) -> tuple[int, int]:
    """A new page mapped read-write at the client's next address, a page's gap after it:
    its handle and address."""
    t = u.create(PAGE)
    tva = u.va
    u.va += 2 * PAGE
    u.map(t, tva, PAGE, flags=RW)
    return t, tva


# ------------------------------------------------------------------------------ the waits' timeouts

def test_wait_timeouts_are_cycles_from_the_call():
    """WaitCsArgs / GemWaitIdleArgs.timeout: simulated cycles counted from the call (amdgpu's
    are an absolute time): the same timeout twice waits twice as long, a timeout far below the
    device's clock still waits; 0 asks and returns at once; 2**64 - 1 has no bound but the job
    timer: WAIT_CS ends with the hung job's ECANCELED, GEM_WAIT_IDLE with the BO idle."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    hang = held(u, ctx, u32, h, va)
    for timeout in (4000, 1000, 1000):  # (after the first, an absolute 1000 would be over already)
        t0 = now(u)
        assert t0 > 1000 or timeout == 4000
        e = refused(errno.ETIME, "WAIT_CS", u.io, W, WaitCsArgs(ctx, hang, timeout))
        assert e.message == f"WAIT_CS: seqno {hang:#x} of context {ctx} not signalled after {timeout} cycles"
        assert timeout <= now(u) - t0 < timeout + 200
        t0 = now(u)
        assert u.io(I, GemWaitIdleArgs(h, timeout)).busy
        assert timeout <= now(u) - t0 < timeout + 200
    t0 = now(u)
    assert u.io(W, WaitCsArgs(ctx, hang, 0)).busy and u.io(I, GemWaitIdleArgs(h, 0)).busy
    assert now(u) - t0 < 200  # just asked
    e = refused(errno.ECANCELED, "WAIT_CS", u.io, W, WaitCsArgs(ctx, hang, FOREVER))
    assert (e.info.code, e.info.seq) == ("TIMEOUT", hang)
    hang2 = held(u, ctx, u32, h, va, offset=0x100)
    t0 = now(u)
    assert not u.io(I, GemWaitIdleArgs(h, FOREVER)).busy  # the reset ended the job: nothing holds the BO
    assert now(u) - t0 >= 20_000
    assert refused(errno.ECANCELED, "WAIT_CS", u.io, W, WaitCsArgs(ctx, hang2, 0)).info.seq == hang2


@pytest.mark.parametrize("how", ["WAIT_CS", "GEM_WAIT_IDLE", "CTX FREE", "CS", "GEM_VA"])
def test_a_signal_ends_a_wait_with_eintr_and_changes_nothing(how):
    """docs/uapi.md, EINTR: a signal that comes while an ioctl waits for the GPU ends the wait
    with EINTR; its handler runs as the ioctl returns, nothing was changed, and the same call
    made again waits again (as libdrm's drmIoctl does). CTX FREE waits while the context has
    jobs queued (here behind another context's held job, one job in the ring at a time); a
    CS for its context's oldest job (sched_jobs 1 here, for 32); a GEM_VA MAP over a range
    a closed BO's job still holds for that job."""
    kmd_model.bind(RefModel(), job_timeout=1 << 40, hw_submission_limit=1, sched_jobs=1)
    u = Umd()
    ctx, other = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    t = u.create(PAGE)
    tva = u.va
    u.va += 0x2000
    u.map(t, tva, PAGE)
    hold = held(u, ctx, u32, h, va, pm4.write_data(va + 0x2000, [1]))
    queued = u.cs(other, ib(u32, pm4.write_data(va + 0x2004, [2]), offset=0x100, handle=h))
    u.close_bo(t)  # (the hold holds it: still mapped)
    again = ib(u32, pm4.write_data(va + 0x2008, [3]), offset=0x200, handle=h)
    call = {"WAIT_CS": (W, WaitCsArgs(ctx, hold, FOREVER)), "GEM_WAIT_IDLE": (I, GemWaitIdleArgs(h, FOREVER)),
            "CTX FREE": (Request.CTX, uapi.CtxArgs(CtxOp.FREE, other)),
            "CS": (Request.CS, uapi.CsArgs(ctx, [again])),
            "GEM_VA": (Request.GEM_VA, uapi.GemVaArgs(u.create(PAGE), VaOp.MAP, tva, 0, PAGE))}[how]
    came = []
    prev = signal.signal(signal.SIGALRM, lambda *_: came.append(now(u)))
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        e = refused(errno.EINTR, how.split()[0], u.io, *call)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    assert "interrupted by a signal" in e.message and len(came) == 1
    # nothing changed: both jobs still wait, the context is still there, the range still taken
    assert u.io(W, WaitCsArgs(ctx, hold, 0)).busy and u.io(W, WaitCsArgs(other, queued, 0)).busy
    assert u.query(other).ctx_id == other
    refused(errno.EINVAL, "WAIT_CS", u.io, W, WaitCsArgs(ctx, hold + 1, 0))  # (the CS took no seqno)
    u32[0x3000 // 4] = 1
    out = u.io(*call)  # made again, it waits and ends
    assert u.wait(ctx, hold, 0) and u32[0x800:0x802].tolist() == [1, 2]
    if how == "CTX FREE":
        assert out.ctx_id == other
        refused(errno.EINVAL, "WAIT_CS", u.io, W, WaitCsArgs(other, queued, 0))
    else:
        assert u.wait(other, queued, 0)
    if how == "CS":
        assert out.seq == hold + 1 and u.wait(ctx, out.seq) and u32[0x802] == 3
    if how == "GEM_VA":
        refused(errno.EINVAL, "GEM_VA", u.map, u.create(PAGE), tva, PAGE)  # the new BO is there


# ------------------------------------------------------------------------------ a BO closed, a range unmapped

def test_a_bo_closed_while_a_job_uses_it_lives_until_the_job_ends():
    """GemCloseArgs: the handle goes at once (ENOENT, GEM_CLOSE again EINVAL), the BO is freed
    once no job uses it: a job submitted before reads what the BO held after the close, its
    memory is counted in INFO MEMORY until then, a gfx CS after the close naming its range is
    EINVAL, and a GEM_VA MAP over the range waits for the job (here a hang: the job timer's
    reset ends it)."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    t = u.create(0x2000, Domain.VRAM)
    tva = u.va
    u.va += 0x3000
    u.map(t, tva, 0x2000, flags=RW)
    u.mmap(t).view("<u4")[:4] = [0xC0, 0xFF, 0xEE, 0x11]
    before = u.heaps()
    copy = held(u, ctx, u32, h, va, pm4.dma_data(va + 0x2000, tva, 16, cp_sync=1))
    u.close_bo(t)
    assert u.heaps() == before  # still the job's
    refused(errno.ENOENT, "GEM_WAIT_IDLE", u.io, I, GemWaitIdleArgs(t, 0))
    refused(errno.ENOENT, "GEM_MMAP", u.mmap, t)
    refused(errno.ENOENT, "GEM_VA", u.map, t, tva, 0x2000, 0, RW, VaOp.UNMAP)
    refused(errno.EINVAL, "GEM_CLOSE", u.close_bo, t)
    e = refused(errno.EINVAL, "CS", u.cs, ctx, ib(u32, pm4.write_data(tva + 4, [1]), offset=0x100, handle=h))
    assert "outside every mapping" in e.message
    u32[0x3000 // 4] = 1
    assert u.wait(ctx, copy) and u32[0x800:0x804].tolist() == [0xC0, 0xFF, 0xEE, 0x11]
    assert u.heaps() == (before[0] - 0x2000, before[1])  # freed with its last job
    u.map(u.create(0x2000), tva, 0x2000)  # the range is free again
    # a MAP over a closed BO's range that a job still holds waits for the job
    t2 = u.create(PAGE)
    t2va = tva + 0x4000
    u.map(t2, t2va, PAGE, flags=RW)
    u32[0x3000 // 4] = 0
    hang = held(u, ctx, u32, h, va, pm4.write_data(t2va, [5]), offset=0x200)
    u.close_bo(t2)
    t0 = now(u)
    u.map(u.create(PAGE), t2va, PAGE)
    assert now(u) - t0 > 10_000  # (the hang's job timeout, from its CS)
    assert refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 0).info.code == "TIMEOUT"


@pytest.mark.parametrize("ring", ["gfx", "sdma0"])
@pytest.mark.parametrize("op", [VaOp.UNMAP, VaOp.CLEAR, VaOp.REPLACE], ids=lambda op: op.name)
def test_a_range_taken_away_under_a_submitted_job_is_gone_for_it_too(op, ring):
    """VaOp: UNMAP, CLEAR and REPLACE change the range at once, for the jobs already submitted
    too (the page tables are updated at once: amdgpu instead orders an unmap behind the VM's
    submitted jobs, amdgpu_vm_update_range's implicit sync): a job that reaches the range
    afterwards faults (WAIT_CS ECANCELED, a VM fault at that address, a queue reset making its
    context GUILTY on that ring, which submits on), or, after a REPLACE, writes the new BO.
    The BO taken away stays allocated while the job may run (GEM_WAIT_IDLE: busy)."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    t, new = u.create(PAGE), u.create(PAGE)
    t32, new32 = u.mmap(t).view("<u4"), u.mmap(new).view("<u4")
    tva = u.va
    u.va += 0x2000
    u.map(t, tva, PAGE, flags=RW)
    if ring == "gfx":
        chunk = ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ") + pm4.write_data(tva, [0x77]), handle=h)
    else:  # (the copy engine's job, which no checker reads: the same)
        words = sdma.poll_regmem(va + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.write_linear(tva, [0x77])
        words += sdma.pad(-len(words) % 8)
        u32[0x900:0x900 + len(words)] = words
        chunk = CsChunkIb(len(words), handle=h, offset=0x2400, ip_type=HwIp.DMA)
    job = u.cs(ctx, chunk, CsChunkFence(h, 0x3800))
    if op == VaOp.UNMAP:
        u.map(t, tva, 0, op=VaOp.UNMAP)
    elif op == VaOp.CLEAR:
        u.io(Request.GEM_VA, uapi.GemVaArgs(0, VaOp.CLEAR, tva, 0, PAGE, 0))
    else:
        u.map(new, tva, PAGE, flags=RW, op=VaOp.REPLACE)
    assert u.io(I, GemWaitIdleArgs(t, 0)).busy  # the job still holds the BO it no longer reaches
    u32[0x3000 // 4] = 1
    if op == VaOp.REPLACE:
        assert u.wait(ctx, job) and (t32[0], new32[0]) == (0, 0x77)
    else:
        e = refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, job)
        assert e.info.addr == tva and "VM fault" in e.info.message and t32[0] == 0 and u32[0x3800 // 4] == 0
        assert u.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)).addr == tva
        st = u.query(ctx)
        assert (st.reset_status, st.ring_status) == (uapi.ResetStatus.GUILTY, {ring: uapi.ResetStatus.GUILTY})
        assert u.wait(ctx, u.cs(ctx, ib(u32, pm4.write_data(va + 0x2000, [1]), offset=0x100, handle=h)))
    assert not u.io(I, GemWaitIdleArgs(t, 0)).busy


def test_clear_takes_a_closed_bos_range_from_the_job_that_holds_it_at_once():
    """A BO closed while a job holds it stays mapped for that job (GemCloseArgs); a CLEAR of
    its range removes whatever is mapped there (VaOp.CLEAR) without waiting, unlike a MAP or
    REPLACE: the job then faults."""
    u, ctx, u32, h, va, t, tva, job = held_writing_a_page()
    u.close_bo(t)
    t0 = now(u)
    u.io(Request.GEM_VA, uapi.GemVaArgs(0, VaOp.CLEAR, tva, 0, PAGE, 0))
    assert now(u) - t0 < 1000
    u32[0x3000 // 4] = 1
    assert refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, job).info.addr == tva


# ------------------------------------------------------------------------------ contexts, handles, errors kept

def test_a_context_freed_with_jobs_queued():
    """CtxOp.FREE: its jobs still run, in order, writing their memory and user fences, and a
    job of another context that depends on one of them waits for it; the context's id is
    gone at once (CTX, CS, a dependency, WAIT_CS: EINVAL) and not handed out again; the BOs
    its jobs use stay busy until they end. FREE answers the freed id."""
    kmd_model.bind(RefModel(), job_timeout=200_000)
    u = Umd()
    ctx, other = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    first = held(u, ctx, u32, h, va, pm4.write_data(va + 0x2000, [0x11]))
    second = u.cs(ctx, ib(u32, pm4.write_data(va + 0x2004, [0x22]), offset=0x100, handle=h), CsChunkFence(h, 0x3804))
    dep = u.cs(other, ib(u32, pm4.write_data(va + 0x2008, [0x33]), offset=0x200, handle=h),
               CsChunkDep(HwIp.GFX, 0, ctx, second))
    assert u.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, ctx)).ctx_id == ctx
    for call in ((Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, ctx)), (Request.CTX, uapi.CtxArgs(CtxOp.FREE, ctx)),
                 (W, WaitCsArgs(ctx, first, 0))):
        refused(errno.EINVAL, Request(call[0]).name, u.io, *call)
    refused(errno.EINVAL, "CS", u.cs, ctx, ib(u32, pm4.nop(6), offset=0x300, handle=h))
    refused(errno.EINVAL, "CS", u.cs, other, ib(u32, pm4.nop(6), offset=0x300, handle=h),
            CsChunkDep(HwIp.GFX, 0, ctx, second))
    assert u.io(I, GemWaitIdleArgs(h, 0)).busy and u.io(W, WaitCsArgs(other, dep, 0)).busy
    u32[0x3000 // 4] = 1
    assert u.wait(other, dep) and u32[0x800:0x803].tolist() == [0x11, 0x22, 0x33]
    assert u32[0x3804 // 4] == second
    assert not u.io(I, GemWaitIdleArgs(h, 0)).busy
    assert u.ctx() == other + 1  # the freed id is not handed out again


def test_a_closed_handle_is_not_handed_out_again():
    """GemCreateOut.handle: the file's own, > 0, never one it closed: a stale handle stays
    unknown (GEM_CLOSE EINVAL, the others ENOENT), not some new BO."""
    kmd_model.bind(RefModel())
    u = Umd()
    a, b = u.create(), u.create()
    u.close_bo(a)
    c = u.create()
    assert 0 < a < b < c
    refused(errno.EINVAL, "GEM_CLOSE", u.close_bo, a)
    refused(errno.ENOENT, "GEM_MMAP", u.mmap, a)


def test_a_failed_jobs_error_is_kept_for_the_contexts_latest_1024_failures():
    """WaitCsArgs: a failed job answers its error while it is among the context's latest
    1,024 failed jobs; older, its error is forgotten and it answers as ended well, WAIT_CS and
    a dependency alike (amdgpu_ctx_get_fence: a seqno older than the fences the context
    keeps is signalled). The jobs that fail here: one VM fault on the DMA ring, then 1,024 cancelled
    by a dependency on it."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    assert u.info.sdma_rings == 1  # (the model's copy engine)
    fault = u.cs(ctx, CsChunkIb(8, gpu_addr=va + 0x100_0000, ip_type=HwIp.DMA))
    refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, fault)
    nop = ib(u32, pm4.nop(6), handle=h)
    cancelled = [u.cs(ctx, nop, CsChunkDep(HwIp.DMA, 0, ctx, fault)) for _ in range(1024)]
    for seq in (cancelled[0], cancelled[-1]):
        assert refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, seq, 0).info.seq == fault
    assert u.wait(ctx, fault, 0)  # forgotten: ended well, as far as anyone can tell now
    u32[0x900:0x908] = sdma.pad(8)
    after = u.cs(ctx, CsChunkIb(8, handle=h, offset=0x2400, ip_type=HwIp.DMA), CsChunkDep(HwIp.DMA, 0, ctx, fault))
    assert u.wait(ctx, after)


def test_a_failed_job_never_writes_its_user_fence():
    """CsChunkFence: the seqno is written after the job, by a job that ended well only: the
    hung job, the job of its context behind it (its queue's reset cancels both) and another
    context's job that depends on the hang never write theirs (WAIT_CS says why: ECANCELED),
    as amdgpu skips a cancelled job's IBs and fence; an innocent job behind the hang, run
    again after the reset, writes its own."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx, other = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    f = u.create(PAGE)  # (the fences' BO: mapped nowhere, the kernel writes it)
    f32 = u.mmap(f).view("<u4")
    hang = held(u, ctx, u32, h, va)
    chunks = (CsChunkFence(f, 0), CsChunkFence(f, 4), CsChunkFence(f, 8), CsChunkFence(f, 12))
    jobs = [(ctx, u.cs(ctx, ib(u32, pm4.nop(6), offset=0x100, handle=h), chunks[1])),
            (other, u.cs(other, ib(u32, pm4.nop(6), offset=0x200, handle=h), chunks[2],
                         CsChunkDep(HwIp.GFX, 0, ctx, hang))),
            (other, u.cs(other, ib(u32, pm4.nop(6), offset=0x300, handle=h), chunks[3]))]
    refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 400_000)
    for c, seq in jobs[:2]:
        refused(errno.ECANCELED, "WAIT_CS", u.wait, c, seq)
    assert u.wait(*jobs[2])
    assert f32[:4].tolist() == [0, 0, 0, jobs[2][1]]


def test_gem_wait_idle_counts_the_jobs_that_may_use_the_bo():
    """GemWaitIdleOut.busy: a job submitted while the BO was mapped in the file's VM, or that
    names it in a fence chunk (mapped nowhere), holds it; a BO mapped after the job's CS does
    not, until its mapping goes while the job is in a ring (VaOp: the job may still have
    writes under way through it)."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    fence_only, mapped, later = u.create(), u.create(), u.create()
    mva = u.va
    u.va += 0x4000
    u.map(mapped, mva, PAGE)
    job = u.cs(ctx, ib(u32, pm4.wait_reg_mem(va + 0x3000, 1, 1, "EQ"), handle=h), CsChunkFence(fence_only, 0))
    u.map(later, mva + 0x2000, PAGE)

    def busy(handle):
        return u.io(I, GemWaitIdleArgs(handle, 0)).busy
    assert (busy(h), busy(fence_only), busy(mapped), busy(later)) == (True, True, True, False)
    u.map(later, mva + 0x2000, 0, op=VaOp.UNMAP)
    assert busy(later)
    u32[0x3000 // 4] = 1
    assert u.wait(ctx, job) and not any(busy(x) for x in (h, fence_only, mapped, later))


def test_counters_without_cap_perfmon_are_the_files_own():
    """Counters: a file without CAP_PERFMON gets the clock and its own counts: `ioctls` and
    `ioctl_errors` (the COUNTERS call itself counted), `contexts` and `live_bos` as they are
    now, `hangs` its contexts' jobs that timed out (a VM fault is no timeout); nothing of
    another file's work."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    u, other = Umd(), Umd()

    def own():
        c = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.COUNTERS))
        assert set(c.hw) == {"timestamp"} and c.packets == {}
        return c.kmd
    first = own()
    assert first == {"ioctls": 2, "ioctl_errors": 0, "contexts": 0, "live_bos": 0, "hangs": 0}  # DEV_INFO, this
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)  # GEM_CREATE, GEM_VA, GEM_MMAP
    refused(errno.EINVAL, "GEM_CLOSE", u.close_bo, 99)
    assert own() == {"ioctls": 8, "ioctl_errors": 1, "contexts": 1, "live_bos": 1, "hangs": 0}
    octx = other.ctx()
    other.bo()
    other.cs(octx, CsChunkIb(8, gpu_addr=other.va + 0x100_0000, ip_type=HwIp.DMA))  # a fault of the other's
    refused(errno.EINVAL, "CS", other.cs, octx, CsChunkIb(8))
    assert own() == {"ioctls": 9, "ioctl_errors": 1, "contexts": 1, "live_bos": 1, "hangs": 0}
    fault = u.cs(ctx, CsChunkIb(8, gpu_addr=va + 0x100_0000, ip_type=HwIp.DMA))
    refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, fault)
    assert own()["hangs"] == 0  # a fault, reset at once: no timeout
    hang = held(u, ctx, u32, h, va)
    refused(errno.ECANCELED, "WAIT_CS", u.wait, ctx, hang, 400_000)
    u.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, ctx))
    u.close_bo(h)
    assert own() == {"ioctls": 17, "ioctl_errors": 3, "contexts": 0, "live_bos": 0, "hangs": 1}


def test_polling_a_user_fence_lets_the_device_run_with_elapse():
    """CsChunkFence: a UMD polling the user fence sees the GPU move only through
    `file.elapse(cycles)` between its looks: reads alone leave it where it was (the device's
    time passes inside the driver only); elapse takes an int in [0, 2**32] (ValueError
    otherwise) and does nothing on a closed file."""
    kmd_model.bind(RefModel())
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    seq = u.cs(ctx, ib(u32, pm4.wait_reg_mem(va + 0x3004, 1, 1, "EQ") + pm4.write_data(va + 0x2000, [0x5A]),
                       handle=h), CsChunkFence(h, 0x3000))
    u32[0x3004 // 4] = 1  # the CPU releases the job ...
    assert not any(u32[0x3000 // 4] == seq for _ in range(1000))  # ... but reads alone: the GPU stands still
    t0 = now(u)
    looks = 0
    while u32[0x3000 // 4] != seq:
        u.f.elapse(64)
        looks += 1
        assert looks < 10_000
    assert u32[0x800] == 0x5A and now(u) - t0 >= 64 * looks
    for bad in (-1, (1 << 32) + 1, 1.0, None, "64", True):
        with pytest.raises(ValueError, match=r"^elapse: cycles must be an integer in \[0, 2\*\*32\], not "):
            u.f.elapse(bad)
    u.f.elapse(1 << 20)
    u.f.close()
    u.f.elapse(1000)  # a closed file: nothing, no error


def test_a_dma_job_submitted_after_a_bos_close_still_reaches_it_while_a_job_holds_it():
    """GemCloseArgs: a closed BO's GPU mappings go once no job uses it; until then a later job
    no checker reads (the DMA ring's) still reaches it, where a later GFX CS naming its range is
    EINVAL. A held GFX job holds BO t; t is closed; an SDMA copy from t's range, submitted
    after, copies what t held into a live BO (no fault)."""
    kmd_model.bind(RefModel(), job_timeout=1 << 30)
    u = Umd()
    assert u.info.sdma_rings == 1  # (the model's copy engine)
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    t, tva = mapped_page(u)
    u.mmap(t).view("<u4")[:4] = [0xC0, 0xFF, 0xEE, 0x11]
    hold = held(u, ctx, u32, h, va)
    u.close_bo(t)
    refused(errno.EINVAL, "CS", u.cs, ctx, ib(u32, pm4.write_data(tva, [1]), offset=0x100, handle=h))
    words = sdma.copy_linear(va + 0x2000, tva, 16)
    words += sdma.pad(-len(words) % 8)
    u32[0x800 // 4:0x800 // 4 + len(words)] = words
    dma = u.cs(ctx, CsChunkIb(len(words), handle=h, offset=0x800, ip_type=HwIp.DMA))
    assert u.wait(ctx, dma) and u32[0x2000 // 4:0x2000 // 4 + 4].tolist() == [0xC0, 0xFF, 0xEE, 0x11]
    assert u.io(W, WaitCsArgs(ctx, hold, 0)).busy  # (t was held all along)
    u32[0x3000 // 4] = 1
    assert u.wait(ctx, hold)
