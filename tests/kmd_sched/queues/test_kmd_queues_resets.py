"""Recovery per ring with many rings, in the shapes of igt's amd_queue_reset, gem_reset_stats
and gem_exec_whisper: queue resets of each CP queue and of the SDMA (behind the other
engine's long work too), the ladder's full reset and what it takes with it, the guilty and
the innocent, bans (reference-model backend; the `check_*` bodies run on the RTL too,
tests/cosim/test_rtl_drivers.py). The ladder's last steps, the full reset:
test_kmd_queues_full_reset.py; the job timer that finds the hangs: test_kmd_queues_stuck.py."""

from __future__ import annotations

import errno
import random

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkDep, CtxOp, CtxPriority, Request, ResetStatus
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import DMA, GFX, sdma_ib, query, new_ctx, HANG


def check_amd_queue_reset_malformed(dev):
    amd_queue_reset(dev, "malformed")


def check_amd_queue_reset_hang(dev):
    amd_queue_reset(dev, "hang")


def check_amd_queue_reset_bus_error(dev):
    amd_queue_reset(dev, "bus_error")


def check_gem_reset_stats_innocent_work_on_the_reset_ring_is_resubmitted(dev):
    """gem_reset_stats: only the guilty context reads guilty; another context's job queued on
    the same SDMA ring is innocent, resubmitted, and completes with its data."""
    kmd = kmd_model.bind(dev, job_timeout=20_000)
    a, b, idle = Client(), Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(sdma_ib(abo, HANG(abo.addr + 0x3000)))
    nice = b.submit(sdma_ib(bbo, sdma.constant_fill(bbo.addr + 0x1000, 0xAB, 64)))
    assert b.wait(nice, 1_000_000)
    assert bytes(bbo.u32[0x400:0x410].view("u1")) == bytes([0xAB, 0, 0, 0] * 16)
    with pytest.raises(uapi.KmdError):
        a.wait(bad)
    qa, qb, qi = query(a), query(b), query(idle)
    assert (qa.ring_status, qb.ring_status, qi.ring_status) == (
        {"sdma0": ResetStatus.GUILTY}, {"sdma0": ResetStatus.INNOCENT}, {})
    assert (qa.reset_status, qb.reset_status, qi.reset_status) == (
        ResetStatus.GUILTY, ResetStatus.INNOCENT, ResetStatus.NO_RESET)
    assert qa.resets == qb.resets == qi.resets == 1 and kmd.stats["queue_resets"] == 1


def check_a_vm_fault_on_the_cps_second_queue_resets_that_queue_and_is_reported(dev):
    """A high-priority job that writes where its VM maps nothing: the UTCL2 entry names
    queue 1, so that queue alone is reset, and the fault (address, VMID, access) is kept for
    INFO VM_FAULT and the file's VM as any fault is."""
    kmd = kmd_model.bind(dev, cs_check=False, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    assert kmd.last_vm_fault is None and kmd.stats["vm_faults"] == 0  # nothing kept before a fault
    hole = 0x3F00_0000
    bad = c.submit(c.ib(bo, pm4.write_data(hole, [1])), ctx=hi)
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000, ctx=hi)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT"
    assert "gfx_high" in ei.value.message
    assert kmd.recovery_log == [("gfx_high", "error"), ("gfx_high", "queue_reset")]
    assert kmd.stats["resets"] == 0 and kmd.stats["vm_faults"] == 1 and kmd.stats["cp_errors"] == 1
    f = c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.VM_FAULT))
    assert (f.addr, f.vmid, f.access) == (hole, c.f.vm.vmid, "WRITE") and kmd.last_vm_fault == f
    assert kmd.ih.by_source.get("VM_FAULT", 0) >= 1


# (on the RTL too: tests/cosim/test_rtl_drivers.py runs every check here on each simulator)
def check_sdma_queue_reset_behind_the_cps_long_packet_stays_a_queue_reset(dev):
    """A hostile SDMA job's error while an innocent client's gfx job runs a large CP_SYNC
    DMA_DATA fill: on the RTL the error's IH entry waits for the CP's IH writer, which takes
    it only after the fill, and SDMA_CNTL.QUEUE_RESET is done only once the entry is written
    (docs/hardware.md). The job timer finds the SDMA stopped by its error first, and the SDMA
    queue reset waits as long as the CP's packet moves on: it ended in the full reset (the
    innocent gfx job stopped and run again, its context told of a reset) when the reset gave
    up after hw_timeout. hw_timeout and the job timeout are bound small so a 128 KiB fill
    (about 16,000 cycles on a 64-bit bus) is longer than both: the same bug as 20,000 cycles
    behind a 1 MiB fill, in an eighth of the time."""
    from kmd_model import regs
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000)
    good, evil = Client(), Client()
    fill = 128 << 10
    gbo, ebo = good.bo(fill + 0x1000), evil.bo()
    g = good.submit(good.ib(gbo, pm4.dma_data(gbo.addr + 0x1000, 0x5A5A5A5A, fill, src_sel="DATA", cp_sync=1)
                            + pm4.write_data(gbo.addr, [0x600D]), 0x100))
    for _ in range(100):  # the CP is in the fill (the model's was at once)
        if kmd.mmio.read(regs.PERF_DMA_BYTES_WRITTEN) or gbo.u32[0] == 0x600D:
            break
        kmd.dev.delay(50)
    e = evil.submit(sdma_ib(ebo, [0x23DECD3D]))  # amd_deadlock's corrupted SDMA header
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE"
    assert good.wait(g, 1_000_000) and gbo.u32[0] == 0x600D
    assert gbo.u32[0x400] == gbo.u32[(fill + 0xFFC) // 4] == 0x5A5A5A5A
    assert kmd.stats["queue_resets"] == 1 and kmd.stats["resets"] == 0, (kmd.stats, kmd.recovery_log)
    assert [s for r, s in kmd.recovery_log] in (["error", "queue_reset"], ["timeout", "queue_reset"])
    assert {r for r, s in kmd.recovery_log} == {"sdma0"}
    qg, qe = query(good), query(evil)
    assert qg.reset_status == ResetStatus.NO_RESET and qg.ring_status == {}
    assert qe.ring_status == {"sdma0": ResetStatus.GUILTY}
    e2 = evil.submit(sdma_ib(ebo, sdma.fence(ebo.addr + 0x2000, 0xE2), 0x400))  # the SDMA works again
    assert evil.wait(e2) and ebo.u32[0x800] == 0xE2


def check_a_cp_queue_reset_behind_the_other_queues_long_packet_stays_a_queue_reset(dev):
    """A hang on one CP queue (parked in its WAIT_REG_MEM) is found while another client's job
    on the other CP queue runs a long CP_SYNC DMA_DATA fill. The queue's reset is done at
    once (the other queue holds the CP), but the ring test after it needs its queue to run,
    and on the RTL the CP switches to it only once the fill's transfers are answered (and,
    for queue 0, only while queue 1, of higher priority, has nothing to run). A flat
    hw_timeout gave the test up behind the fill and fell to the full reset, which stopped
    and ran the innocent fill again (on the RTL only: the model's CP runs a packet at once).
    hw_timeout and the job timeout are bound small so a 128 KiB fill (about 16,000 cycles
    on a 64-bit bus) is longer than both (as 20,000 cycles are behind a 1 MiB fill). Both
    ways: the gfx ring hung (the fill on gfx_high), then gfx_high (the fill on gfx)."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000, cap_sys_nice=True)
    good, evil = Client(), Client()
    fill = 128 << 10
    gbo, ebo = good.bo(fill + 0x1000), evil.bo(0x2000)
    for n, hung in enumerate(("gfx", "gfx_high")):
        gctx = new_ctx(good, CtxPriority.HIGH if hung == "gfx" else CtxPriority.NORMAL)
        ectx = new_ctx(evil, CtxPriority.HIGH if hung == "gfx_high" else CtxPriority.NORMAL)
        gbo.u32[0] = 0
        e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x1800, 1, 1, "EQ"), 0x100 * n), ctx=ectx)
        kmd.dev.delay(2_500)  # (the hang's timer has taken its first look)
        g = good.submit(good.ib(gbo, pm4.dma_data(gbo.addr + 0x1000, 0x5A5A5A50 + n, fill, src_sel="DATA",
                                                  cp_sync=1) + pm4.write_data(gbo.addr, [0x600D]), 0x100), ctx=gctx)
        job = next(j for s in kmd.scheds for j in s.pending if j.ctx.id == gctx and j.ctx.file is good.f)
        with pytest.raises(uapi.KmdError) as ei:
            evil.wait(e, 1_000_000, ectx)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
        assert good.wait(g, 1_000_000, gctx) and gbo.u32[0] == 0x600D
        assert gbo.u32[0x400] == gbo.u32[(fill + 0xFFC) // 4] == 0x5A5A5A50 + n and job.runs == 1
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (n + 1, 0), (kmd.stats, kmd.recovery_log)
        assert kmd.recovery_log[-2:] == [(hung, "timeout"), (hung, "queue_reset")]
        assert query(good, gctx).reset_status == ResetStatus.NO_RESET
        ok = evil.submit(evil.ib(ebo, pm4.write_data(ebo.addr + 0x1000 + 4 * n, [0xE2]), 0x400 + 0x100 * n), ctx=ectx)
        assert evil.wait(ok, 100_000, ectx) and ebo.u32[0x400 + n] == 0xE2


def check_a_queue_0_reset_while_queue_1_fills_keeps_queue_1s_transfers(dev):
    """Queue 0 stopped by a VM fault is reset (CP_QUEUE_RESET.Q0) while queue 1 holds the CP
    with DMA_DATA fills without CP_SYNC in flight (released, as a late interrupt would let
    them, after the fault and before the reset: the test sets their flag as the KMD requests
    the reset, and lets 2,000 cycles pass). On the RTL the reset of the running queue aborts
    the DMA engine's queued transfers: queue 0 is not the running one then, and queue 1's
    transfers must all land (its fence comes after them), its job run once, nothing reset
    but queue 0."""
    kmd = kmd_model.bind(dev, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    n, size = 4, 16 << 10
    bo, victim = c.bo(n * size + 0x4000), c.bo()
    hi, bad = new_ctx(c, CtxPriority.HIGH), new_ctx(c)
    fills = sum((pm4.dma_data(bo.addr + 0x4000 + k * size, 0x11110000 + k, size, src_sel="DATA")
                 for k in range(n)), [])
    g = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x1000, 1, 1, "EQ", poll_interval=4) + fills
                      + pm4.write_data(bo.addr, [0x600D]), 0x100), ctx=hi)
    job = kmd.hqd_sched.pending[0]
    e = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(victim.addr, [1]), 0x2000),
                 ctx=bad)
    c.io(Request.GEM_VA, uapi.GemVaArgs(victim.handle, uapi.VaOp.UNMAP, victim.addr, 0, victim.size, 0))
    seen, request = [], kmd.ring.request_reset

    def late_reset():
        bo.u32[0x1000 // 4] = 1  # queue 1 runs on, queue 0 stopped: the fills start
        kmd.dev.delay(2_000)
        seen.append(kmd.mmio.read(regs.PERF_DMA_BYTES_WRITTEN))
        request()
    kmd.ring.request_reset = late_reset
    bo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(e, 2_000_000, bad)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert c.wait(g, 2_000_000, hi) and bo.u32[0] == 0x600D and job.runs == 1
    assert len(seen) == 1  # (on the RTL, Icarus: 15,784 of the 65,536 bytes were written at the reset)
    for k in range(n):
        w = bo.u32[(0x4000 + k * size) // 4:(0x4000 + (k + 1) * size) // 4]
        assert (w == 0x11110000 + k).all(), (k, int((w == 0x11110000 + k).sum()), size // 4)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")], kmd.recovery_log
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    assert query(c, hi).reset_status == ResetStatus.NO_RESET

def check_a_queue_0_reset_while_the_sdma_copies_stays_a_queue_reset(dev):
    """Queue 0 faults while another client's SDMA job copies 256 KiB (some 64,000 cycles of
    bus traffic on a 64-bit bus, longer than hw_timeout): CP_QUEUE_RESET.Q0 waits for the
    CP's own bus traffic to end, not for the SDMA's, so it is done within hw_timeout, the copy
    runs once and lands whole, and nothing but queue 0 is reset."""
    kmd = kmd_model.bind(dev, hw_timeout=5_000)
    good, evil = Client(), Client()
    size = 256 << 10
    gbo, ebo, victim = good.bo(2 * size + 0x2000), evil.bo(0x4000), evil.bo()
    gbo.u32[0x2000 // 4: (0x2000 + size) // 4] = range(size // 4)
    s = good.submit(sdma_ib(gbo, sdma.copy_linear(gbo.addr + 0x2000 + size, gbo.addr + 0x2000, size)
                            + sdma.fence(gbo.addr + 0x100, 0x5E), 0x200))
    job = kmd.sdma_sched.pending[0]
    e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
                            + pm4.write_data(victim.addr, [1])))
    # (unmapped after the CS, the checker passed it: the write faults)
    evil.io(Request.GEM_VA, uapi.GemVaArgs(victim.handle, uapi.VaOp.UNMAP, victim.addr, 0, victim.size, 0))
    seen, request = [], kmd.ring.request_reset
    kmd.ring.request_reset = lambda: (seen.append(int(gbo.u32[0x40])), request())[1]
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert good.wait(s, 2_000_000) and gbo.u32[0x40] == 0x5E and job.runs == 1
    assert len(seen) == 1  # (on Icarus the copy's fence was still 0 at the reset: the copy under way)
    assert gbo.u32[(0x2000 + size) // 4: (0x2000 + 2 * size) // 4].tolist() == list(range(size // 4))
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")], kmd.recovery_log
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    assert query(good).reset_status == ResetStatus.NO_RESET


CHECKS = [check_amd_queue_reset_malformed, check_amd_queue_reset_hang, check_amd_queue_reset_bus_error,
          check_gem_reset_stats_innocent_work_on_the_reset_ring_is_resubmitted,
          check_a_vm_fault_on_the_cps_second_queue_resets_that_queue_and_is_reported,
          check_sdma_queue_reset_behind_the_cps_long_packet_stays_a_queue_reset,
          check_a_cp_queue_reset_behind_the_other_queues_long_packet_stays_a_queue_reset,
          check_a_queue_0_reset_while_queue_1_fills_keeps_queue_1s_transfers,
          check_a_queue_0_reset_while_the_sdma_copies_stays_a_queue_reset]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def amd_queue_reset(dev, bad):
    """amd_queue_reset: a bad job on the SDMA ring, good jobs on the gfx ring (another
    context) before, during and after: the SDMA queue alone is reset (no full reset), the
    guilty job fails with ECANCELED, the gfx jobs complete, the SDMA ring works again."""
    kmd = kmd_model.bind(dev, job_timeout=20_000)
    good, evil = Client(), Client()
    gbo, ebo = good.bo(0x8000), evil.bo()
    g1 = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x7000, 1, 1, "EQ")
                             + pm4.write_data(gbo.addr + 0x1000, [1])))
    stream = {"malformed": [0x23DECD3D],  # amd_deadlock's corrupted SDMA header
              "hang": HANG(ebo.addr + 0x3000),  # never released
              "bus_error": sdma.copy_linear(ebo.addr, 0x7F_0000_0000, 64)}[bad]  # unmapped: a VM fault
    e0 = evil.submit(sdma_ib(ebo, HANG(ebo.addr + 0x3800), 0xC00))  # holds the SDMA ring until released
    e1 = evil.submit(sdma_ib(ebo, stream))
    e2 = evil.submit(sdma_ib(ebo, sdma.fence(ebo.addr + 0x2000, 0xE2), 0x400))
    gbo.u32[0x7000 // 4] = 1
    ebo.u32[0x3800 // 4] = 1
    assert good.wait(g1) and evil.wait(e0)
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e1, 1_000_000)
    assert ei.value.errno == errno.ECANCELED
    code = {"malformed": "ILLEGAL_OPCODE", "hang": "TIMEOUT", "bus_error": "VM_FAULT"}[bad]
    assert ei.value.info.code == code and "sdma0" in ei.value.message
    expect(errno.ECANCELED, ei.value.message, evil.wait, e2)  # same context, same ring: the same error
    assert ebo.u32[0x800] == 0
    assert kmd.stats["queue_resets"] == 1 and kmd.stats["resets"] == 0
    assert [s for r, s in kmd.recovery_log] == ["timeout" if bad == "hang" else "error", "queue_reset"]
    assert good.wait(good.run(gbo, pm4.write_data(gbo.addr + 0x1004, [2]), 0x800))
    # the context was hit once: it may submit again (not banned), and its copy runs
    e3 = evil.submit(sdma_ib(ebo, sdma.fence(ebo.addr + 0x2004, 0xE3), 0x600))
    assert evil.wait(e3) and ebo.u32[0x801] == 0xE3
    qe, qg = query(evil), query(good)
    assert qe.reset_status == ResetStatus.GUILTY and qe.ring_status == {"sdma0": ResetStatus.GUILTY}
    assert qg.reset_status == ResetStatus.NO_RESET and qg.ring_status == {}


def test_context_banned_after_repeated_hangs():
    """A context whose SDMA jobs hang ban_after_hangs times is banned: its CS fails with EIO;
    other contexts of the same file carry on."""
    kmd = kmd_model.bind(RefModel(), job_timeout=10_000, ban_after_hangs=2)
    c = Client()
    bo = c.bo()
    other = new_ctx(c)
    for k in range(2):
        s = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000), 0x100 * k))
        with pytest.raises(uapi.KmdError) as ei:
            c.wait(s, 1_000_000)
        assert ei.value.errno == errno.ECANCELED
    expect(errno.EIO, f"CS: context {c.ctx} is banned: it caused 2 resets (ban_after_hangs 2)",
           c.submit, sdma_ib(bo, sdma.fence(bo.addr + 0x2000, 1), 0x400))
    assert c.wait(c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x2000, 7), 0x400), ctx=other), ctx=other)
    assert bo.u32[0x800] == 7 and kmd.stats["queue_resets"] == 2
    # CTX QUERY_STATE says so (amdgpu's QUERY2 flags, and this KMD's BANNED): the UMD tells a
    # banned queue from a lost device by it, the errno being EIO for both
    F = uapi.CtxQueryFlags
    assert c.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, c.ctx)).flags == F.RESET | F.GUILTY | F.BANNED
    assert c.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, other)).flags == F.RESET


def test_whisper_chain_across_rings_and_contexts_with_hangs():
    """gem_exec_whisper, hang mode: a value is passed down a chain of 16 jobs, each on a
    random ring (gfx or SDMA) of a random one of 4 contexts, each depending on the one
    before; meanwhile a hanging context keeps resetting the SDMA queue. The result is exact
    and only the hanging context's jobs carry errors."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, ban_after_hangs=100)
    rng = random.Random(16)
    c = Client()
    ctxs = [c.ctx] + [new_ctx(c) for _ in range(3)]
    bo = c.bo(0x10000)
    evil = Client()
    ebo = evil.bo()
    slot = lambda i: bo.addr + 0x8000 + 4 * i  # noqa: E731
    for p in range(3):  # passes
        bo.u32[0x8000 // 4: 0x8000 // 4 + 17] = 0
        bo.u32[0x8000 // 4] = 0x100 + p  # the value whispered down the chain
        prev = None
        bads = [evil.submit(sdma_ib(ebo, HANG(ebo.addr + 0x3000), 0x100 * p))]
        for i in range(16):
            ctx, ring = rng.choice(ctxs), rng.choice([GFX, DMA])
            dep = [] if prev is None else [CsChunkDep(prev[1], 0, prev[0], prev[2])]
            off = 0x200 * i
            if ring == DMA:
                ib = sdma_ib(bo, sdma.copy_linear(slot(i + 1), slot(i), 4), off)
            else:  # the CP copies a dword with DMA_DATA
                ib = c.ib(bo, pm4.dma_data(slot(i + 1), slot(i), 4, cp_sync=1, raw_wait=1), off)
            prev = (ctx, ring, c.submit(*dep, ib, ctx=ctx))
        assert c.wait(prev[2], 2_000_000, ctx=prev[0])
        assert bo.u32[0x8000 // 4 + 16] == 0x100 + p, p
        for s in bads:
            with pytest.raises(uapi.KmdError) as ei:
                evil.wait(s)
            assert ei.value.errno == errno.ECANCELED
    assert kmd.stats["queue_resets"] == 3 and kmd.stats["resets"] == 0
    assert all(query(c, x).reset_status != ResetStatus.GUILTY for x in ctxs)


@pytest.mark.parametrize("limit", [2, 64])
def test_a_job_resubmitted_after_a_queue_reset_runs_before_jobs_queued_after_it(limit):
    """An innocent client's job G is next in ring 0, behind a hostile client's job that faults;
    the hostile client then queues jobs (from contexts it used before, their entities older
    in the round robin than G's) while the ring is full. After queue 0's reset the resubmitted
    jobs went back into their entities and the round robin chose: the older entities' jobs,
    submitted after G, went into the ring ahead of it, and G waited behind them (here for
    ever: they hold the ring), a new queue 0 reset each time they fault (amdgpu's default
    hw_submission_limit is 2; with 64, 62 cheap jobs fill the ring). drm_sched runs its
    pending jobs again first, in their order (drm_sched_resubmit_jobs): so does the KMD now."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=limit)
    good, evil = Client(), Client()
    gbo, ebo, victim = good.bo(0x4000), evil.bo(0x8000), evil.bo()
    later = [new_ctx(evil) for _ in range(4)]
    for c in later:  # their entities: served once, before G
        assert evil.wait(evil.submit(evil.ib(ebo, pm4.nop(2), 0x100), ctx=c), ctx=c)
    e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(victim.addr, [1]),
                            0x200))
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    for _ in range(limit - 2):  # (the ring full: what comes next is queued)
        evil.submit(evil.ib(ebo, pm4.nop(2), 0x300), ctx=new_ctx(evil))
    assert len(kmd.sched.pending) == limit
    held = [evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3100, 1, 1, "EQ"), 0x400), ctx=c) for c in later]
    assert kmd.sched.has_queued()
    evil.io(Request.GEM_VA, uapi.GemVaArgs(victim.handle, uapi.VaOp.UNMAP, victim.addr, 0, victim.size, 0))
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 100_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert good.wait(g, 100_000), "the innocent job waits behind jobs submitted after it"  # (else ETIME)
    assert gbo.u32[4] == 0x600D and kmd.stats["queue_resets"] == 1
    ebo.u32[0x3100 // 4] = 1
    for c, s in zip(later, held):
        assert evil.wait(s, 100_000, c)
