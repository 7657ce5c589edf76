"""Many rings: the SDMA ring beside the gfx ring and the CP's second queue, the drm_sched-like
scheduler (priorities, dependencies from any ring, hw_submission_limit), CS ring choice and
dependency chunks with their errnos (reference-model backend; `check_copy_ring_on_this_backend`
runs on the RTL's copy engine too, tests/cosim/test_rtl_drivers.py). Recovery per ring:
test_kmd_queues_resets.py; the job timer's stuck or not: test_kmd_queues_stuck.py."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkDep, CsChunkIb, CtxOp, CtxPriority, HwIp, Request, ResetStatus
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import DMA, GFX, sdma_ib, query, new_ctx, HANG


def check_copy_ring_on_this_backend(dev):
    """The DMA ring runs on a device with an SDMA engine (the RTL has one), and is refused with
    EINVAL naming the backend where there is none: never run anywhere else."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    bo.u32[0:64] = range(1, 65)
    chunk = sdma_ib(bo, sdma.copy_linear(bo.addr + 0x1000, bo.addr, 256), 0x800)
    if kmd.sdma_sched is None:
        rings_before = kmd.ring.doorbells
        expect(errno.EINVAL, f"CS: chunk 0: HW IP DMA ring 0: this device has no SDMA engine (QUEUE_CAPS.SDMA "
               f"is 0 on the {dev.name} backend)", c.submit, chunk)
        assert kmd.ring.doorbells == rings_before and not bo.u32[0x400:0x440].any()
        assert c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.DEV_INFO)).sdma_rings == 0
    else:
        assert c.wait(c.submit(chunk))
        assert bo.u32[0x400:0x440].tolist() == list(range(1, 65))
        assert c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.DEV_INFO)).sdma_rings == 1
    assert c.wait(c.run(bo, pm4.write_data(bo.addr + 0x2000, [5]), 0xC00))  # gfx runs either way


def check_dependencies_bounce_between_rings_gpu_side(dev):
    """A copy on SDMA waits for a gfx job's fence and a gfx job for the copy, without the
    client waiting in between: the scheduler holds each job until its dependency finished."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x8000)
    gate = bo.addr + 0x7000
    # gfx job 1 waits for the CPU, then writes 0x1234 at +0x1000
    g1 = c.submit(c.ib(bo, pm4.wait_reg_mem(gate, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x1000, [0x1234])))
    # SDMA copies it to +0x2000 once g1 is done; gfx then adds a marker after the copy
    s1 = c.submit(CsChunkDep(GFX, 0, c.ctx, g1), sdma_ib(bo, sdma.copy_linear(bo.addr + 0x2000, bo.addr + 0x1000, 4),
                                                       0x400))
    g2 = c.submit(CsChunkDep(DMA, 0, c.ctx, 0xFFFFFFFF),
                  c.ib(bo, pm4.write_data(bo.addr + 0x2004, [0x5678]), 0x800))
    kmd.service()
    assert kmd.sdma_sched.queue and kmd.sched.queue  # both held back, not in a ring yet
    assert bo.u32[0x800] == 0
    bo.u32[0x7000 // 4] = 1  # release g1
    assert c.wait(g2)
    assert bo.u32[0x800:0x802].tolist() == [0x1234, 0x5678] and c.wait(s1, 0) and c.wait(g1, 0)


def check_high_priority_context_runs_on_the_cps_second_queue(dev):
    """A HIGH-priority context's gfx jobs go to the CP's high-priority hardware queue: one
    finishes while a normal job sits in a long IB (stopped in a WAIT_REG_MEM); a bad job
    there is reset on that queue alone (CP_QUEUE_RESET.Q1, no device reset) while the
    normal gfx ring keeps its job."""
    kmd = kmd_model.bind(dev, cs_check=False, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo(0x8000)
    hi = new_ctx(c, CtxPriority.HIGH)
    long_ib = pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ") + sum(
        (pm4.write_data(bo.addr + 0x1000 + 4 * k, [k]) for k in range(40)), [])
    slow = c.submit(c.ib(bo, long_ib, 0x2000))
    fast = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [0xF]), 0x4000), ctx=hi)
    assert c.wait(fast, ctx=hi) and bo.u32[0x40] == 0xF
    assert not c.wait(slow, 0)
    assert kmd.hqd_sched.fence_drv.signalled >= 1 and kmd.sched.pending
    bad = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], 0x5000), ctx=hi)
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, ctx=hi)
    assert ei.value.errno == errno.ECANCELED and "gfx_high" in ei.value.message
    assert [s for r, s in kmd.recovery_log] == ["error", "queue_reset"] and kmd.stats["resets"] == 0
    bo.u32[0x7000 // 4] = 1
    assert c.wait(slow) and bo.u32[0x400:0x428].tolist() == list(range(40))
    assert query(c, hi).ring_status == {"gfx_high": ResetStatus.GUILTY} and query(c).ring_status == {}


CHECKS = [check_copy_ring_on_this_backend, check_dependencies_bounce_between_rings_gpu_side,
          check_high_priority_context_runs_on_the_cps_second_queue]


@pytest.mark.parametrize("sdma_engine", [True, False], ids=["sdma", "no_sdma"])
def test_copy_ring_on_model(sdma_engine):
    check_copy_ring_on_this_backend(RefModel(sdma=sdma_engine))



def test_cs_ring_and_dependency_errors():
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    ok = sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1))
    w = "CS: chunk 0"
    for kw, msg in [
        (dict(ip_type=10), f"{w}: ip_type 10 is not a HW IP type (0..9)"),
        (dict(ip_type=-1), f"{w}: ip_type must be >= 0, not -1"),
        (dict(ip_type=DMA, ip_instance=1), f"{w}: ip_instance must be 0 (every HW IP has one instance), not 1"),
        (dict(ip_type=DMA, ring=1), f"{w}: HW IP DMA has 1 ring(s) (0..0), not ring 1"),
        (dict(ip_type=GFX, ring=2), f"{w}: HW IP GFX has 1 ring(s) (0..0), not ring 2"),
        (dict(ip_type=HwIp.COMPUTE), f"{w}: HW IP COMPUTE has no rings on this device"),
    ]:
        expect(errno.EINVAL, msg, c.submit, CsChunkIb(8, bo.handle, 0, **kw))
    expect(errno.EINVAL, "CS: chunk 1: the IB chunks aim at different rings (sdma0 and gfx): one CS runs on one ring",
           c.submit, ok, CsChunkIb(8, bo.handle, 0x400))
    first = c.submit(ok)
    for dep, msg in [
        (CsChunkDep(DMA, 0, 99, first), "CS: chunk 0: no context 99 on this file"),
        (CsChunkDep(DMA, 0, c.ctx, first + 5), f"CS: chunk 0: context {c.ctx} never submitted seqno "
                                                f"{first + 5:#x} (last is {first:#x})"),
        (CsChunkDep(7, 0, c.ctx, first), "CS: chunk 0: HW IP VCN_ENC has no rings on this device"),
        (CsChunkDep(DMA, 0, c.ctx, 1 << 32), "CS: chunk 0: handle must be 0x0 to 0xffffffff, not 0x100000000"),
    ]:
        expect(errno.EINVAL, msg, c.submit, dep, ok)
    # a dependency named on the wrong ring, while it still runs
    hold = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000), 0x200))  # polls until the CPU writes
    expect(errno.EINVAL, f"CS: chunk 0: seqno {hold:#x} of context {c.ctx} runs on sdma0, not on gfx",
           c.submit, CsChunkDep(GFX, 0, c.ctx, hold), ok)
    bo.u32[0xC00] = 1
    assert c.wait(hold)
    for prio, err, msg in [
        (5, errno.EINVAL, "CTX ALLOC: priority must be one of UNSET (-2048), VERY_LOW (-1023), LOW (-512), "
                          "NORMAL (0), HIGH (512), VERY_HIGH (1023), not 5"),
        (2048, errno.EINVAL, "CTX ALLOC: priority must be one of UNSET (-2048), VERY_LOW (-1023), LOW (-512), "
                             "NORMAL (0), HIGH (512), VERY_HIGH (1023), not 2048"),
        ("high", errno.EINVAL, "CTX: priority must be an int, not 'high'"),
    ]:
        expect(err, msg, c.io, Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=prio))
    # read by ALLOC alone (amdgpu_ctx_ioctl): QUERY_STATE answers as with 0
    assert c.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, c.ctx, priority=512)) == query(c)
    assert not c.f.cap_sys_nice  # (no file has CAP_SYS_NICE by default)
    expect(errno.EACCES, "CTX ALLOC: priority HIGH needs CAP_SYS_NICE (amdgpu_ctx_priority_permit)",
           c.io, Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH))
    assert new_ctx(c, CtxPriority.LOW)



def test_an_sdma_ib_off_its_32_byte_alignment_is_refused_at_cs():
    """SDMA's INDIRECT_BUFFER has no address bits below 5: an IB there that starts off a
    32-byte boundary is refused at CS (by BO offset or by address, every misalignment), before
    it takes a seqno, where it once reached the ring writer and raised a ValueError from the
    packet builder inside the ioctl. The gfx ring keeps taking dword-aligned IBs."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    first = c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1)))
    for off in (4, 8, 16, 28, 0x204):
        ib = sdma_ib(bo, sdma.fence(bo.addr + 0x100, 2), offset=off)
        expect(errno.EINVAL, f"CS: chunk 0: an IB on the sdma0 ring must start 32-byte aligned, not at "
               f"{bo.addr + off:#x}", c.submit, ib)
        expect(errno.EINVAL, f"CS: chunk 0: an IB on the sdma0 ring must start 32-byte aligned, not at "
               f"{bo.addr + off:#x}", c.submit, CsChunkIb(ib.size_dw, gpu_addr=bo.addr + off, ip_type=DMA))
    last = c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x104, 3), offset=0x220))
    assert last == first + 1  # the refused ones took no seqno
    assert c.wait(last) and bo.u32[0x41] == 3
    gfx = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x108, [4]), offset=0x404))  # 4-byte aligned: fine
    assert c.wait(gfx) and bo.u32[0x42] == 4
    assert kmd.stats["resets"] == 0


def test_a_device_without_queue_caps_binds_with_one_gfx_queue_and_no_copy_engine():
    """A device from before QUEUE_CAPS answers its read with DECERR: the KMD then assumes the
    first hardware's engines (one CP queue, no SDMA) and takes no rings for the rest: a CS
    to the copy ring gets its errno, and a HIGH-priority context's gfx job runs on the one
    gfx queue. CP_QUEUE_RESET came with the second queue: ring 0's error goes to the full
    reset there, the register never written."""
    from kmd_model import regs
    model = RefModel()
    # the register is not decoded: DECERR (the model's map is shared and read-only: a copy)
    model._slots = {off: s for off, s in model._slots.items() if off != regs.QUEUE_CAPS.addr()}
    kmd = kmd_model.bind(model, cs_check=False, cap_sys_nice=True)  # (a bad packet reaches the CP below)
    assert (kmd.sdma_engines, kmd.sdma_ring, kmd.hqd_ring, sorted(kmd.rings)) == (0, None, None, [(GFX, 0)])
    c = Client()
    bo = c.bo()
    expect(errno.EINVAL, "CS: chunk 0: HW IP DMA ring 0: this device has no SDMA engine (QUEUE_CAPS.SDMA is 0 on "
           f"the {model.name} backend)", c.submit, sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1)))
    hi = new_ctx(c, CtxPriority.HIGH)
    w = pm4.write_data(bo.addr + 0x40, [0x600DF00D]) + pm4.pad(6)
    bo.u32[0x100:0x100 + len(w)] = w
    assert c.wait(c.submit(CsChunkIb(len(w), bo.handle, 0x400), ctx=hi), ctx=hi)  # on the one gfx queue
    assert bo.u32[0x10] == 0x600DF00D
    assert not kmd.ring.has_queue_reset
    written = []
    poke = model._poke
    model._poke = lambda off, v, m: (written.append(off), poke(off, v, m))[1]
    bad = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], 0x800))
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE"
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "full_reset")] and kmd.stats["resets"] == 1
    assert regs.CP_QUEUE_RESET.ADDR not in written and regs.CONTROL.ADDR in written



@pytest.mark.parametrize("check", CHECKS[1:], ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_priorities_and_hw_submission_limit():
    """With one job in flight per ring, queued jobs go HIGH before NORMAL before LOW, round
    robin within a run queue; each entity's jobs in order."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo(0x8000)
    order = bo.addr + 0x6000
    hold = c.submit(sdma_ib(bo, HANG(bo.addr + 0x7000), 0))  # keeps the one slot busy
    ctxs = {p: new_ctx(c, p) for p in (CtxPriority.LOW, CtxPriority.NORMAL, CtxPriority.HIGH)}
    seqs, k = [], 0
    for p in (CtxPriority.LOW, CtxPriority.NORMAL, CtxPriority.HIGH, CtxPriority.NORMAL, CtxPriority.LOW):
        # each job appends its tag: a WRITE_LINEAR to a slot of its own, then a fence counter
        seqs.append((p, c.submit(sdma_ib(bo, sdma.write_linear(order + 4 * k, [int(p) & 0xFFFF]), 0x100 + 0x40 * k),
                                 ctx=ctxs[p])))
        k += 1
    assert len(kmd.sdma_sched.pending) == 1 and len(kmd.sdma_sched.queue) == 5
    run = []
    kmd.sdma_sched.ring.kmd.observers.append(lambda ev, f: ev == "run_job" and run.append(f["job"].ctx.id))
    bo.u32[0x7000 // 4] = 1
    for p, s in seqs:
        assert c.wait(s, ctx=ctxs[p])
    assert run == [ctxs[CtxPriority.HIGH], ctxs[CtxPriority.NORMAL], ctxs[CtxPriority.NORMAL],
                   ctxs[CtxPriority.LOW], ctxs[CtxPriority.LOW]]
    assert c.wait(hold)


def test_hw_submission_limit_holds_on_the_high_priority_queue():
    """hw_submission_limit is per ring, the CP's second queue (gfx_high) included: with a
    limit of 1, a HIGH context's second job waits in its entity while the first polls, and
    enters the ring when the first is done."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    held = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")), ctx=hi)
    nxt = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [5]), 0x400), ctx=hi)
    assert (len(kmd.hqd_sched.pending), len(kmd.hqd_sched.queue), len(kmd.sched.pending)) == (1, 1, 0)
    bo.u32[0x200] = 1
    assert c.wait(nxt, ctx=hi) and c.wait(held, 0, ctx=hi) and bo.u32[0x40] == 5
