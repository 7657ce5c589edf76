"""The order of a CS's checks and waits (docs/uapi.md, CsArgs): a context has at most 32
unfinished jobs on a ring, and a CS past them waits for the oldest; as amdgpu_cs_ioctl checks
the chunks (amdgpu_cs_pass1, pass2) and the IBs (amdgpu_cs_patch_ibs) before
amdgpu_cs_sync_rings waits (amdgpu_ctx_wait_prev_fence), a bad CS is refused at once with
its errno, never after that wait. The checker's refusals (an IB outside the file's mappings
or in one without EXECUTABLE, a packet writing outside them) and the shadow pool's E2BIG came
only after the wait: behind a hung job, a job timeout later, the hung job reset for it.
"""

from __future__ import annotations

import errno

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkDep, CsChunkIb, HwIp, Request, WaitCsArgs
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, RW, Umd, ib, refused
from tests.kmd.uapi.test_kmd_uapi_lifetimes import held, now
from tests.security.limits.test_security_contention import _in_wait, _Waiter

W = Request.WAIT_CS
T = 20_000  # job_timeout


def _full_context(u: Umd, n: int):
    """A context with n unfinished gfx jobs: the first held (until the dword at va + 0x3000 is
    1), n - 1 small ones behind it. (ctx, BO handle, its dwords, its va, the seqnos)."""
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    seqs = [held(u, ctx, u32, h, va)]
    for i in range(1, n):
        seqs.append(u.cs(ctx, ib(u32, pm4.write_data(va + 0x2000 + 4 * i, [i]), offset=0x100 + 0x40 * i, handle=h)))
    return ctx, h, u32, va, seqs


def test_a_bad_cs_past_its_contexts_32_jobs_is_refused_at_once():
    """32 unfinished jobs (the first hung): each bad CS is refused at once with its errno, the
    hung job untouched (not reset for it: still busy), and takes no seqno; then the hold
    ends and a good CS is the context's 33rd job."""
    kmd = kmd_model.bind(RefModel(), job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctx, h, u32, va, seqs = _full_context(u, 32)
    assert seqs == list(range(1, 33))
    ro = u.create(PAGE)  # a BO mapped without EXECUTABLE
    rva = u.va
    u.va += 2 * PAGE
    u.map(ro, rva, PAGE, flags=RW)
    u.mmap(ro).view("<u4")[:8] = pm4.pad(8)
    hole = u.va + 0x10_0000  # mapped by nothing
    bad = [
        (errno.EINVAL, [CsChunkIb(8, gpu_addr=hole)]),  # the checker: outside every mapping
        (errno.EINVAL, [CsChunkIb(8, handle=ro)]),  # the checker: without EXECUTABLE
        (errno.EINVAL, [ib(u32, pm4.write_data(hole, [1]), offset=0x1000, handle=h)]),  # a packet's operand
        (errno.EINVAL, [CsChunkIb(8, handle=h, offset=0x1000, flags=1)]),  # a chunk's field
        (errno.ENOENT, [CsChunkIb(8, handle=0x7777, offset=0x1000)]),  # an unknown handle
        (errno.EINVAL, [ib(u32, pm4.pad(8), offset=0x1400, handle=h),
                        CsChunkDep(HwIp.GFX, 0, ctx, 0x1000)]),  # a dependency never submitted
    ]
    for err, chunks in bad:
        t0 = now(u)
        e = refused(err, "CS", u.io, Request.CS, uapi.CsArgs(ctx, chunks))
        assert now(u) - t0 < 1_000, e  # at once: no wait for the hung job
        assert u.io(W, WaitCsArgs(ctx, seqs[0], 0)).busy, e  # not reset meanwhile
    assert kmd.stats["job_timeouts"] == 0
    u32[0x3000 // 4] = 1  # the hold ends
    seq = u.cs(ctx, ib(u32, pm4.write_data(va + 0x2F00, [33]), offset=0x1800, handle=h))
    assert seq == 33 and u.wait(ctx, seq) and u32[0x2F00 // 4] == 33


def test_a_cs_past_its_contexts_jobs_whose_copies_outgrow_the_shadow_pool_is_e2big_at_once():
    """E2BIG (a job whose checked copies take more than the whole pool: no wait makes room
    for it) is the CS's refusal too, before the wait for its context's oldest job."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, sched_jobs=4, job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctx, h, u32, va, seqs = _full_context(u, 4)
    # 100 one-dword IB2s: 500 dwords to run (max_job_dw is 512 with this pool), 32 bytes a copy
    u32[0x2800 // 4:0x2800 // 4 + 100] = pm4.TYPE2_FILLER
    calls = sum((pm4.indirect_buffer(va + 0x2800 + 4 * i, 1) for i in range(100)), [])
    u32[0x1000 // 4:0x1000 // 4 + 400] = calls
    t0 = now(u)
    e = refused(errno.E2BIG, "CS", u.cs, ctx, CsChunkIb(400, handle=h, offset=0x1000))
    assert e.message == ("CS: the job's checked copies take 0x12c0 bytes, more than the whole shadow pool "
                         "(0x1000 bytes)")
    assert now(u) - t0 < 1_000 and u.io(W, WaitCsArgs(ctx, seqs[0], 0)).busy
    assert kmd.stats["job_timeouts"] == 0


def test_a_cs_that_waited_for_its_slot_is_checked_again_when_the_mappings_changed():
    """CsArgs: the wait lets other ioctls run, so the CS looks at everything again after it.
    Its check is kept across the wait only while the file's mappings are the ones it read: a
    CS whose packet writes a BO's range waits behind its context's 4 jobs; another thread
    CLEARs that range; once the oldest job ends the CS is EINVAL (outside every mapping),
    taking no seqno, where the check made before the wait had found it good."""
    kmd = kmd_model.bind(RefModel(), sched_jobs=4, job_timeout=1 << 40, fallback_poll=1_000)
    u = Umd()
    ctx, h, u32, va, seqs = _full_context(u, 4)
    t = u.create(PAGE)
    tva = u.va
    u.va += 2 * PAGE
    u.map(t, tva, PAGE, flags=RW)
    chunk = ib(u32, pm4.write_data(tva, [0x5A]), offset=0x1000, handle=h)
    cs = _Waiter(lambda: u.cs(ctx, chunk))
    t0 = kmd.dev.now()
    cs.start()
    _in_wait(kmd, cs, t0)
    u.io(Request.GEM_VA, uapi.GemVaArgs(0, uapi.VaOp.CLEAR, tva, 0, PAGE, 0))
    u32[0x3000 // 4] = 1  # the oldest job may end
    cs.join(60)
    assert not cs.is_alive() and len(cs.out) == 1
    e = cs.out[0]
    assert isinstance(e, uapi.KmdError) and e.errno == errno.EINVAL, e
    assert e.message.startswith("CS: WRITE_DATA at ") and e.message.endswith(
        f" writes [{tva:#x}, {tva + 4:#x}), outside every mapping of context {ctx}"), e.message
    assert u.wait(ctx, seqs[-1])
    seq = u.cs(ctx, ib(u32, pm4.write_data(va + 0x2F00, [5]), offset=0x1800, handle=h))
    assert seq == 5 and u.wait(ctx, seq)  # the refused CS took no seqno


def test_a_job_whose_copies_fill_the_whole_shadow_pool_runs():
    """E2BIG is for copies larger than the pool: a job whose checked copies take exactly the
    whole pool (4 KiB here: a 384-dword IB calling 80 one-dword IB2s) runs, once the pool is
    free; 8 dwords more are E2BIG."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    u32[0x2800 // 4:0x2800 // 4 + 80] = pm4.TYPE2_FILLER
    calls = sum((pm4.indirect_buffer(va + 0x2800 + 4 * i, 1) for i in range(80)), [])
    u32[0x1000 // 4:0x1000 // 4 + 384] = calls + pm4.nop(64 - 1)
    u32[0x2000 // 4:0x2000 // 4 + 392] = calls + pm4.nop(72 - 1)
    seq = u.cs(ctx, CsChunkIb(384, handle=h, offset=0x1000))
    assert u.wait(ctx, seq) and kmd.stats["cs_shadow_bytes"] == 0x1000
    e = refused(errno.E2BIG, "CS", u.cs, ctx, CsChunkIb(392, handle=h, offset=0x2000))
    assert "more than the whole shadow pool (0x1000 bytes)" in e.message, e.message
