"""Many rings: the SDMA ring beside the gfx ring, the drm_sched-like scheduler (entities,
priorities, dependencies from any ring, hw_submission_limit), CS ring choice and dependency
chunks with their errnos, and recovery per ring, in the shapes of igt's amd_queue_reset,
gem_reset_stats and gem_exec_whisper (reference-model backend; `check_copy_ring_on_this_backend`
runs on the RTL's copy engine too, tests/cosim/test_rtl_drivers.py)."""

from __future__ import annotations

import errno
import random
import re

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import (CsChunkDep, CsChunkIb, CtxOp, CtxPriority, HwIp, Request,
                            ResetStatus)
from spec import packets as pm4_spec
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect

DMA, GFX = HwIp.DMA, HwIp.GFX


def sdma_ib(bo, words, offset=0) -> CsChunkIb:
    """SDMA packets padded to 8 dwords (sdma_v4_0_ring_pad_ib) in `bo` at `offset`, on the DMA ring."""
    w = list(words) + sdma.pad(-len(words) % 8)
    bo.u32[offset // 4: offset // 4 + len(w)] = w
    return CsChunkIb(len(w), handle=bo.handle, offset=offset, ip_type=DMA)


def query(c: Client, ctx: int | None = None) -> uapi.CtxOut:
    return c.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, c.ctx if ctx is None else ctx))


def new_ctx(c: Client, priority: int = 0) -> int:
    return c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=priority)).ctx_id


HANG = lambda addr: sdma.poll_regmem(addr, 0, 0xFFFFFFFF, "NE", interval=4)  # noqa: E731 - igt's SDMA hang


def full_reset_for_ring_0(kmd) -> None:
    """Ring 0's recovery as on a device whose CP has no CP_QUEUE_RESET (one queue): the full
    reset, whose guilty context stays guilty (its CS: ECANCELED), on any backend."""
    kmd.ring.has_queue_reset = False


class NoQueue0Reset(RefModel):
    """A model whose CP ignores CP_QUEUE_RESET.Q0: queue 0's reset never comes back (STATUS
    keeps its ERROR, or its busy poll), so ring 0's recovery falls to the full reset."""

    def _poke(self, offset, value, bytemask):
        if offset == regs.CP_QUEUE_RESET.ADDR:
            value &= ~regs.CP_QUEUE_RESET.Q0.mask
        super()._poke(offset, value, bytemask)


# ------------------------------------------------------------------------------ both backends

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


def check_amd_queue_reset_malformed(dev):
    amd_queue_reset(dev, "malformed")


def check_amd_queue_reset_hang(dev):
    amd_queue_reset(dev, "hang")


def check_amd_queue_reset_bus_error(dev):
    amd_queue_reset(dev, "bus_error")


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


def check_high_priority_context_runs_on_the_cps_second_queue(dev):
    """A HIGH-priority context's gfx jobs go to the CP's high-priority hardware queue: one
    finishes while a normal job sits in a long IB (stopped in a WAIT_REG_MEM); a bad job
    there is reset on that queue alone (CP_QUEUE_RESET.Q1, no device reset) while the
    normal gfx ring keeps its job."""
    kmd = kmd_model.bind(dev, cs_check=False)
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


def check_a_vm_fault_on_the_cps_second_queue_resets_that_queue_and_is_reported(dev):
    """A high-priority job that writes where its VM maps nothing: the UTCL2 entry names
    queue 1, so that queue alone is reset, and the fault (address, VMID, access) is kept for
    INFO VM_FAULT and the file's VM as any fault is."""
    kmd = kmd_model.bind(dev, cs_check=False)
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


def check_a_hang_on_one_cp_queue_is_found_while_the_other_queue_works(dev):
    """The CP's two queues share the fetch and DMA counters: a job stuck in a WAIT_REG_MEM
    on one queue is still timed out while another client keeps the other queue busy (a job,
    then 2,000 cycles, and again), between job_timeout and twice that after it started, and
    only its own queue's recovery runs (its queue reset, CP_QUEUE_RESET.Q1 or .Q0; the
    full reset, which ring 0's hang went to before, stopped the worker's queue too):
    the worker's jobs all complete. Both ways, gfx_high hung first. (Before the KMD read the
    queue's own STATUS.WAITING, neither hang was found in 10 job timeouts.)

    Nothing here counts on how fast a job runs: a worker's job took 1,100 cycles at 64 bits
    and 4,900 at 32 bits on slow, stalling memory, where the 10 jobs this asked for did not
    fit in the timeout. What it asks is that worker jobs completed while the hang could not
    yet have been found (before job_timeout), and that the first look after twice the
    timeout (and the worker's one job and pause) saw it."""
    t_out = 20_000
    kmd = kmd_model.bind(dev, job_timeout=t_out)
    bad_c, work_c = Client(), Client()
    bbo, wbo = bad_c.bo(), work_c.bo(0x8000)
    for n, hung in enumerate(("gfx_high", "gfx")):
        bad_ctx = new_ctx(bad_c, CtxPriority.HIGH) if hung == "gfx_high" else bad_c.ctx
        work_ctx = work_c.ctx if hung == "gfx_high" else new_ctx(work_c, CtxPriority.HIGH)
        start = kmd.dev.now()
        bad = bad_c.submit(bad_c.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ"), 0x100 * n), ctx=bad_ctx)
        done, failed, looked, finished = 0, None, 0, []  # looked: the last look that saw no failure
        while failed is None and kmd.dev.now() - start < 10 * t_out:
            words = sum((pm4.write_data(wbo.addr + 0x4000 + 4 * i, [done]) for i in range(16)), [])
            seq = work_c.submit(work_c.ib(wbo, words, 0x400 * (done % 8)), ctx=work_ctx)
            assert work_c.wait(seq, ctx=work_ctx)
            assert wbo.u32[0x100F] == done
            done += 1
            finished.append(kmd.dev.now() - start)
            kmd.dev.delay(2_000)
            try:
                bad_c.wait(bad, 0, ctx=bad_ctx)
                looked = kmd.dev.now() - start
            except uapi.KmdError as e:
                failed = (e, kmd.dev.now() - start)
        assert failed is not None, f"the hang on {hung} was not found in {kmd.dev.now() - start} cycles"
        e, when = failed
        assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
        assert t_out <= when and looked <= 2 * t_out + 5_000, (looked, when)
        assert (hung == "gfx_high") == ("gfx_high" in e.message), e.message
        assert kmd.stats["job_timeouts"] == n + 1
        # the other queue ran jobs to the end while this one was stuck, not after its recovery
        assert sum(t < t_out for t in finished) >= 2, finished
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (n + 1, 0)
        assert kmd.recovery_log[-2:] == [(hung, "timeout"), (hung, "queue_reset")]
        assert query(work_c, work_ctx).reset_status == ResetStatus.NO_RESET  # (its ring was never reset)


def check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works(dev):
    """The CP had one fetch counter for its two queues: while the other queue had work (a job
    in its ring since the timer's last look), the job timer could not tell a loop's dwords
    from the other queue's, and an unchecked CHAIN to itself ran until the time rule,
    unchecked_job_timeouts (64) job timeouts, every other client of its ring waiting behind
    it (32 M cycles with the default job_timeout). Each queue's own counter
    (PERF_Q0/Q1_DWORDS_FETCHED) now bounds it by its own dwords whatever the other queue
    does. Both ways round (gfx_high, then gfx): a hostile file's loop while an innocent
    client keeps the other CP queue busy, a job, then 500 cycles, and again (on gfx, behind
    the HIGH-priority loop, its job waits in the ring until the reset); the loop is reset
    once it fetched more than 2 * max_job_dw, long before the time rule, and the innocent
    jobs, the one queued behind the loop on its ring too, complete. (Before: 'ran 129,336
    cycles unchecked, more than 64 job timeouts' on the model, both ways.)"""
    # 256 job timeouts for the time rule: on slow, stalling memory at 32 bits the worker's
    # jobs on the HIGH queue leave the loop on gfx so little of the CP that at 64 the time
    # rule (128,000 cycles) came first (GPUCOSIM_DRIVER_MEM=slow:3)
    n, t_out, timeouts = 1 << 10, 2_000, 256
    kmd = kmd_model.bind(dev, cs_check=False, max_job_dw=n, job_timeout=t_out, fallback_poll=1_000,
                         unchecked_job_timeouts=timeouts)
    bad, work, behind = Client(), Client(), Client()
    hbo, wbo, bbo = bad.bo(0x1000), work.bo(0x8000), behind.bo(0x1000)
    for k, ring in enumerate(("gfx_high", "gfx")):
        other = "gfx" if ring == "gfx_high" else "gfx_high"
        ctx = {c: new_ctx(c, CtxPriority.HIGH) if r == "gfx_high" else c.ctx
               for c, r in ((bad, ring), (work, other), (behind, ring))}
        t0 = kmd.dev.now()
        seq = bad.submit(bad.ib(hbo, pm4.indirect_buffer(hbo.addr + 0x100 * k, 8, chain=1), 0x100 * k), ctx=ctx[bad])
        bseq = behind.submit(behind.ib(bbo, pm4.write_data(bbo.addr + 0x100 + 4 * k, [5 + k]), 0x200 * k),
                             ctx=ctx[behind])
        done, failed = 0, None
        while failed is None and kmd.dev.now() - t0 < 2 * timeouts * t_out:
            words = sum((pm4.write_data(wbo.addr + 0x4000 + 4 * i, [done]) for i in range(16)), [])
            wseq = work.submit(work.ib(wbo, words, 0x400 * (done % 8)), ctx=ctx[work])
            assert work.wait(wseq, 1 << 30, ctx=ctx[work]) and wbo.u32[0x100F] == done
            done += 1
            kmd.dev.delay(500)
            try:
                bad.wait(seq, 0, ctx=ctx[bad])
            except uapi.KmdError as e:
                failed = e, kmd.dev.now() - t0
        assert failed is not None, f"the loop on {ring} ran {kmd.dev.now() - t0} cycles"
        e, when = failed
        assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
        m = re.search(r"timed out on (gfx|gfx_high): fetched \d+ dwords unchecked \(cs_check off\), more than "
                      rf"twice max_job_dw \({2 * n}\), CP queue (0|1) ", e.message)
        assert m and m.groups() == (ring, "01"[ring == "gfx_high"]), e.message
        # before the time rule (512,000 cycles): the dwords' rule came at 31,000 or less on
        # fast memory; on slow, stalling memory at 32 bits at 40,800 with the loop on
        # gfx_high and 134,100 on gfx (the worker's HIGH jobs take most of the CP)
        assert when < timeouts * t_out // 2, (ring, when)
        assert behind.wait(bseq, 1 << 20, ctx=ctx[behind]) and bbo.u32[(0x100 + 4 * k) // 4] == 5 + k
        # the loop on gfx: the worker (gfx_high) ran beside it; on gfx_high: the worker's
        # first job (gfx) waited it out in the ring
        assert done >= (2 if ring == "gfx" else 1) and kmd.stats["job_timeouts"] == k + 1
        wseq = work.submit(work.ib(wbo, pm4.write_data(wbo.addr + 0x4000, [done])), ctx=ctx[work])
        assert work.wait(wseq, 1 << 20, ctx=ctx[work]) and wbo.u32[0x1000] == done


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


def check_an_sdma_job_behind_the_cps_long_packet_is_not_taken_for_stuck(dev):
    """On the RTL the SDMA's TRAP waits for the CP's IH writer, which takes an entry only
    between two CP packets, so an SDMA job behind the TRAP of the job before it stands still
    while the CP runs a long CP_SYNC DMA_DATA (docs/hardware.md, "Timing on the RTL"). The
    SDMA ring's timer took only the engine's own counters for progress: a hostile client's
    gfx fill (its own memory, a legal packet) longer than two job timeouts had an innocent
    client's SDMA job reset with TIMEOUT, its context guilty, a hang counted towards its
    file's ban. The CP's DMA bytes moving now count for an SDMA ring neither polling nor
    stopped by an error. A 128 KiB fill (about 16,000 cycles on a 64-bit bus) against a job
    timeout of 3,000: as a 1 MiB fill against 20,000."""
    from kmd_model import regs
    kmd = kmd_model.bind(dev, job_timeout=3_000)
    good, evil = Client(), Client()
    fill = 128 << 10
    ebo, gbo = evil.bo(fill + 0x1000), good.bo()
    e = evil.submit(evil.ib(ebo, pm4.dma_data(ebo.addr + 0x1000, 0x5A5A5A5A, fill, src_sel="DATA", cp_sync=1)
                            + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    for _ in range(100):  # the CP is in the fill (the model's was at once)
        if kmd.mmio.read(regs.PERF_DMA_BYTES_WRITTEN) or ebo.u32[0] == 0xE71:
            break
        kmd.dev.delay(50)
    a = good.submit(sdma_ib(gbo, sdma.write_linear(gbo.addr + 0x800, [0xA1])))
    b = good.submit(sdma_ib(gbo, sdma.write_linear(gbo.addr + 0x804, [0xB2]), 0x100))
    assert good.wait(a, 1_000_000) and good.wait(b, 1_000_000)
    assert (gbo.u32[0x200], gbo.u32[0x201]) == (0xA1, 0xB2)
    assert evil.wait(e, 1_000_000) and ebo.u32[0] == 0xE71 and ebo.u32[(fill + 0xFFC) // 4] == 0x5A5A5A5A
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), \
        (kmd.stats, kmd.recovery_log)
    q = query(good)
    assert q.reset_status == ResetStatus.NO_RESET and q.ring_status == {} and good.f.hangs == 0


def check_a_checked_job_of_long_fills_is_reset_by_the_time_rule(dev):
    """The checker bounds a job's dwords (max_job_dw), not its time, and a DMA_DATA of 7 dwords
    moves up to 1 MiB: the job timer, restarted by the DMA counters moving, let a hostile
    client's checked job of CP_SYNC fills of its own memory (legal packets) hold queue 0 for as
    long as its bytes took, every other client of the queue behind it (24 fills of 128 KiB, 168
    dwords, held it 394,188 cycles on Verilator, 131 job timeouts of 3,000; max_job_dw dwords of
    1 MiB fills some 4e10 cycles). A checked job is now reset once it has run
    `checked_job_timeouts` job timeouts (the time rule unchecked jobs have, further off): here 16
    of 3,000. The model's fills take no time, so there the job ends at once."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, checked_job_timeouts=16)
    evil, good = Client(), Client()
    fill = 128 << 10
    ebo, gbo = evil.bo(fill + 0x2000), good.bo()
    t0 = kmd.dev.now()
    e = evil.submit(evil.ib(ebo, pm4.dma_data(ebo.addr + 0x2000, 0x5A5A5A5A, fill, src_sel="DATA", cp_sync=1) * 24
                            + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x800, [0x600D])))
    assert good.wait(g, 1_000_000) and gbo.u32[0x200] == 0x600D
    waited = kmd.dev.now() - t0
    try:
        evil.wait(e, 1_000_000)
        assert dev.name == "model" and ebo.u32[0] == 0xE71, "the fills ran to their end"
    except uapi.KmdError as x:
        assert x.errno == errno.ECANCELED and x.info.code == "TIMEOUT", x
        assert re.search(r"job 0x1 timed out on gfx: ran \d+ cycles, more than 16 job timeouts \(checked_job_timeouts",
                         x.message), x.message
        assert ebo.u32[0] == 0 and 16 * 3_000 <= waited < 20 * 3_000 + 40_000, waited
        q = query(good)  # (its job, in the ring behind the fills, was run again after the queue reset)
        assert q.reset_status == ResetStatus.INNOCENT and q.ring_status == {"gfx": ResetStatus.INNOCENT}
        assert good.f.hangs == 0 and query(evil).reset_status == ResetStatus.GUILTY


def check_a_high_poll_held_off_by_queue_0_s_transfers_is_not_taken_for_stuck(dev):
    """Queue 1 outranks queue 0 and takes the CP back after one packet of queue 0's, but a
    switch waits until the DMA engine has answered every transfer queue 0 queued
    (docs/hardware.md, "CP hardware queues"): DMA_DATAs without CP_SYNC keep queue 1 off
    the CP for as long as their transfers run. An innocent HIGH job in a poll whose flag its
    client set meanwhile was parked there, its rptr, fetched dwords and poll reads still
    while queue 0's transfers moved the DMA counters, and the job timer took it for stuck
    (the parked rule was queue 0's alone): reset with TIMEOUT, its context guilty, a hang
    towards its file's ban (Verilator: four 128 KiB fills against a job timeout of 3,000,
    "job 0x1 timed out on gfx_high: no progress for 3030 cycles, CP queue 1 polling in a
    WAIT_REG_MEM"). Queue 1 may be parked too now, on the same proof: no poll read of its own
    since the last look, and a poll of its job holding."""
    from kmd_model import regs
    kmd = kmd_model.bind(dev, job_timeout=3_000)
    good, evil = Client(), Client()
    hi = new_ctx(good, CtxPriority.HIGH)
    fill = 128 << 10
    gbo, ebo = good.bo(0x2000), evil.bo(4 * fill + 0x2000)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x1000, 1, 1, "EQ")
                            + pm4.write_data(gbo.addr + 0x800, [0x600D])), ctx=hi)
    kmd.dev.delay(200)  # (its poll failed: queue 1 yields the CP)
    e = evil.submit(evil.ib(ebo, sum((pm4.dma_data(ebo.addr + 0x2000 + k * fill, 0x5A5A5A5A, fill, src_sel="DATA")
                                      for k in range(4)), []) + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    for _ in range(400):  # queue 0's transfers under way (the model's were at once)
        if kmd.mmio.read(regs.PERF_DMA_BYTES_WRITTEN) or ebo.u32[0] == 0xE71:
            break
        kmd.dev.delay(20)
    gbo.u32[0x400] = 1  # the flag, set by its client
    assert good.wait(g, 1_000_000, ctx=hi) and gbo.u32[0x200] == 0x600D
    assert evil.wait(e, 1_000_000) and ebo.u32[0] == 0xE71 and ebo.u32[(4 * fill + 0x1FFC) // 4] == 0x5A5A5A5A
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), \
        (kmd.stats, kmd.recovery_log)
    assert query(good, hi).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0


def _copy_clear_poll_behind_a_gfx_vm_fault(kmd, dev):
    """docs/architecture.md's measurement: an innocent client's SDMA job that is not
    idempotent, "copy A to B, clear A, then poll" (a flag the CPU sets), is in its poll when
    another client's gfx job (ring 0, CP queue 0) faults on a BO its file unmapped after the
    CS (checker on). Returns (good, evil, gbo, g, sdma_job, e, victim)."""
    good, evil = Client(), Client()
    gbo, ebo, victim = good.bo(0x8000), evil.bo(), evil.bo()
    A, B, FLAG = 0x1000, 0x2000, 0x3000
    gbo.u32[A // 4: A // 4 + 64] = range(1, 65)
    words = (sdma.copy_linear(gbo.addr + B, gbo.addr + A, 256) + sdma.constant_fill(gbo.addr + A, 0, 256)
             + sdma.poll_regmem(gbo.addr + FLAG, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.fence(gbo.addr + 0x3100, 0x5E))
    g = good.submit(sdma_ib(gbo, words, 0x4000))
    job = kmd.sdma_sched.pending[0]
    # in its poll: B copied, A cleared
    assert kmd.wait_for(lambda: gbo.u32[B // 4 + 63] == 64 and not gbo.u32[A // 4: A // 4 + 64].any(), 200_000)
    e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(victim.addr, [1])))
    evil.io(Request.GEM_VA, uapi.GemVaArgs(victim.handle, uapi.VaOp.UNMAP, victim.addr, 0, victim.size, 0))
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert not good.wait(g, 0)  # still polling
    gbo.u32[FLAG // 4] = 1
    return good, evil, gbo, g, job, e, victim


def check_a_gfx_vm_fault_resets_queue_0_alone_and_an_innocent_sdma_job_is_not_run_again(dev):
    """The scenario of _copy_clear_poll_behind_a_gfx_vm_fault. The full reset stopped the
    SDMA and ran the innocent job again from its start: it copied the cleared A, and its
    WAIT_CS succeeded with B zero. Ring 0 now climbs the ladder: CP_QUEUE_RESET.Q0 resets
    queue 0 alone, the SDMA runs on, its job runs once and B keeps A's data; the innocent
    context sees no reset, the guilty one is guilty on gfx, its fault kept for INFO VM_FAULT,
    and it submits on."""
    kmd = kmd_model.bind(dev)
    good, evil, gbo, g, job, e, victim = _copy_clear_poll_behind_a_gfx_vm_fault(kmd, dev)
    assert good.wait(g, 1_000_000) and gbo.u32[0x3100 // 4] == 0x5E
    assert gbo.u32[0x2000 // 4: 0x2000 // 4 + 64].tolist() == list(range(1, 65))  # B: A as it was
    assert job.runs == 1 and job.error is None
    assert (kmd.stats["queue_resets"], kmd.stats["resets"], kmd.stats["vm_faults"]) == (1, 0, 1)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]
    qg, qe = query(good), query(evil)
    assert (qg.reset_status, qg.ring_status) == (ResetStatus.NO_RESET, {})
    assert (qe.reset_status, qe.ring_status) == (ResetStatus.GUILTY, {"gfx": ResetStatus.GUILTY})
    f = evil.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.VM_FAULT))
    assert (f.addr, f.vmid, f.access) == (victim.addr, evil.f.vm.vmid, "WRITE")
    ebo2 = evil.bo()
    assert evil.wait(evil.run(ebo2, pm4.write_data(ebo2.addr + 0x10, [0xE2]))) and ebo2.u32[4] == 0xE2
    assert not regs.STATUS.ERROR.get(kmd.mmio.read(regs.STATUS)) and kmd.stats["cp_errors"] == 1


def check_a_queue_0_reset_that_does_not_come_back_falls_to_the_full_reset(dev):
    """The same scenario with queue 0's reset never requested (the KMD's request_reset a no-op:
    STATUS keeps its ERROR): after hw_timeout the ladder's last step, the full reset, runs;
    it stops every ring and runs the innocent SDMA job again from its start (what
    docs/architecture.md measured: B then holds the cleared A), the guilty context stays
    guilty (its CS: ECANCELED), and the device works on."""
    kmd = kmd_model.bind(dev, hw_timeout=5_000)
    kmd.ring.request_reset = lambda: None
    good, evil, gbo, g, job, e, victim = _copy_clear_poll_behind_a_gfx_vm_fault(kmd, dev)
    assert good.wait(g, 1_000_000) and gbo.u32[0x3100 // 4] == 0x5E
    assert job.runs == 2 and not gbo.u32[0x2000 // 4: 0x2000 // 4 + 64].any()  # run again: B is the cleared A
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 1)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset"), ("gfx", "full_reset")]
    qg, qe = query(good), query(evil)
    assert (qg.reset_status, qg.ring_status) == (ResetStatus.INNOCENT, {"sdma0": ResetStatus.INNOCENT})
    assert qe.reset_status == ResetStatus.GUILTY and qe.error is not None and qe.error.code == "VM_FAULT"
    ebo2 = evil.bo()
    expect(errno.ECANCELED, f"CS: context {evil.ctx} was reset: {qe.error.message}", evil.submit,
           evil.ib(ebo2, pm4.nop(2)))
    assert good.wait(good.run(gbo, pm4.write_data(gbo.addr + 0x10, [0x6D]), 0x6000)) and gbo.u32[4] == 0x6D


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
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000)
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


def _an_sdma_fault_and_a_gfx_fault_that_takes_the_full_reset(kmd, **poll):
    """Client A's SDMA job that polls its flag (POLL_REGMEM with `poll`), then writes a BO
    its file unmapped after the CS; client B's gfx job that does the same after a
    WAIT_REG_MEM; queue 0's reset made never to come back (the full reset follows B's
    fault). Returns (a, b, abo, bbo, sdma_seq, gfx_seq, sdma_job): the flags at 0x3000."""
    kmd.ring.request_reset = lambda: None
    a, b = Client(), Client()
    abo, av, bbo, bv = a.bo(0x4000), a.bo(), b.bo(0x4000), b.bo()
    s = a.submit(sdma_ib(abo, sdma.poll_regmem(abo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", **poll)
                         + sdma.write_linear(av.addr, [1]) + sdma.fence(abo.addr + 0x3100, 0x77), 0x1000))
    e = b.submit(b.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(bv.addr, [1])))
    job = kmd.sdma_sched.pending[0]
    for c, v in ((a, av), (b, bv)):
        c.io(Request.GEM_VA, uapi.GemVaArgs(v.handle, uapi.VaOp.UNMAP, v.addr, 0, v.size, 0))
    return a, b, abo, bbo, s, e, job

def check_a_full_reset_takes_the_other_rings_pending_error_with_its_guilty_job(dev):
    """Two clients' jobs fault in one pass of the interrupt handler: client B's on ring 0
    (its queue reset made to fail: the full reset follows), client A's on the SDMA ring,
    whose error waits for its own recovery. The full reset cleared every ring's pending error
    and ran A's guilty job again from its start as an innocent one (it faulted again, a
    second reset; with its BO mapped again in between it would have passed, its error
    lost). Now the full reset takes A's error too: A's job runs once and fails with its
    own fault, A is guilty on its ring (as its queue reset would have made it) and the
    other contexts innocent, one reset counted for everyone; the device works on."""
    kmd = kmd_model.bind(dev, hw_timeout=5_000)
    a, b, abo, bbo, s, e, job = _an_sdma_fault_and_a_gfx_fault_that_takes_the_full_reset(kmd, interval=4)
    good = Client()
    gbo = good.bo(0x4000)
    # both released in one MMIO-free step, and the driver away until both engines have
    # stopped: the two faults are in the IH ring together (on slow, stalling memory the
    # SDMA's fault came a handler's pass before the CP's, GPUCOSIM_DRIVER_MEM=slow:7)
    abo.u32[0x3000 // 4] = 1
    bbo.u32[0x3000 // 4] = 1
    for _ in range(200):
        if all(r.STATUS.ERROR.get(kmd.mmio.read(r.STATUS)) for r in (kmd.ring, kmd.sdma_ring)):
            break
        kmd.dev.delay(500)
    for c, j, ring in ((b, e, "gfx"), (a, s, "sdma0")):
        with pytest.raises(uapi.KmdError) as ei:
            c.wait(j, 1_000_000)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
        assert (ring != "gfx") == ("sdma0" in ei.value.info.message), ei.value.info.message
    assert job.runs == 1, f"the SDMA's guilty job ran {job.runs} times"
    assert ("gfx", "full_reset") in kmd.recovery_log and ("sdma0", "queue_reset") not in kmd.recovery_log, \
        kmd.recovery_log
    assert kmd.stats["resets"] == 1
    qa, qb, qg = query(a), query(b), query(good)
    assert (qa.reset_status, qa.ring_status, qa.resets) == (ResetStatus.GUILTY, {"sdma0": ResetStatus.GUILTY}, 1)
    assert qb.reset_status == ResetStatus.GUILTY and qb.ring_status == {"gfx": ResetStatus.GUILTY}
    assert qg.resets == 1
    assert good.wait(good.run(gbo, pm4.write_data(gbo.addr + 0x10, [0x6D]), 0x800)) and gbo.u32[4] == 0x6D
    assert a.wait(a.submit(sdma_ib(abo, sdma.fence(abo.addr + 0x3200, 0x78), 0x1800)))  # A submits on

def check_a_queue_0_reset_while_queue_1_fills_keeps_queue_1s_transfers(dev):
    """Queue 0 stopped by a VM fault is reset (CP_QUEUE_RESET.Q0) while queue 1 holds the CP
    with DMA_DATA fills without CP_SYNC in flight (released, as a late interrupt would let
    them, after the fault and before the reset: the test sets their flag as the KMD requests
    the reset, and lets 2,000 cycles pass). On the RTL the reset of the running queue aborts
    the DMA engine's queued transfers: queue 0 is not the running one then, and queue 1's
    transfers must all land (its fence comes after them), its job run once, nothing reset
    but queue 0."""
    kmd = kmd_model.bind(dev)
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


def check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset(dev, fills: int = 8,
                                                                                fill: int = 16 << 10,
                                                                                packets: int | None = 1):
    """A hostile client (HIGH priority: cap_sys_nice, so any client by default) makes queue 0's
    reset fail on purpose: its queue 0 job faults, and its queue 1 job, released as the KMD
    resets queue 0 (by a flag the job polls: here set by the test as the reset is requested,
    as a late interrupt lets it happen), runs `fills` DMA_DATA fills. Queue 1 is served first
    (CP_QUEUE_PRIORITY), so the ring test after queue 0's reset could run only once the
    flood had ended: past the test's bound (hw_timeout + 16 longest CP packets) it failed,
    and the ladder fell to the full reset, which stopped every ring and ran the other rings'
    innocent jobs again: another client's SDMA job, and its job on queue 1 behind the flood
    (on a model whose CP runs a packet a cycle, the flood some 40,000 cycles against a bound
    of 21,384: 1 full reset, 2 innocent jobs run twice). The KMD now raises the reset queue
    above the other for its ring test (as amdgpu sets a queue's CP_HQD_PIPE_PRIORITY at run
    time): the test waits for the other queue's packet in hand alone, and the recovery stays
    queue 0's reset, nothing else run again. On the RTL the fills have CP_SYNC, and the
    KMD's bound is scaled to them (`packets` times the longest packet, a `fill`-byte one):
    8 fills of 16 KiB, some 16,400 cycles on a 64-bit bus, against a bound of 9,096."""
    kmd = kmd_model.bind(dev, hw_timeout=5_000)
    if packets is not None:
        kmd.ring.RESET_PACKETS = packets
        kmd.ring.longest_cp_packet = lambda: 2 * (fill // kmd.info.bus_bytes)
    good, evil = Client(), Client()
    dst = 0x5000 + -(-(len(pm4.dma_data(0, 0, 4)) * fills + 0x40) * 4 // 0x1000) * 0x1000  # (after the flood's IB)
    gbo, ebo, victim = good.bo(0x4000), evil.bo(dst + max(fill, 0x1000)), evil.bo()
    ghi, ehi = new_ctx(good, CtxPriority.HIGH), new_ctx(evil, CtxPriority.HIGH)
    # the innocent client's SDMA job, in flight through the reset (it polls its flag)
    s = good.submit(sdma_ib(gbo, sdma.poll_regmem(gbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4)
                            + sdma.fence(gbo.addr + 0x3100, 0x5E), 0x1000))
    sjob = kmd.sdma_sched.pending[0]
    flood = pm4.wait_reg_mem(ebo.addr + 0x3004, 1, 1, "EQ", poll_interval=4)
    for k in range(fills):
        flood += pm4.dma_data(ebo.addr + dst, 0x0F100D00 + k, fill, src_sel="DATA", cp_sync=int(fill > 64))
    f = evil.submit(evil.ib(ebo, flood, 0x5000), ctx=ehi)
    # the innocent client's job on queue 1, behind the flood
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100), ctx=ghi)
    gjob = kmd.hqd_sched.pending[-1]
    e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(victim.addr, [1])))
    evil.io(Request.GEM_VA, uapi.GemVaArgs(victim.handle, uapi.VaOp.UNMAP, victim.addr, 0, victim.size, 0))
    request, seen = kmd.ring.request_reset, []
    under_way = len(pm4.wait_reg_mem(0, 1, 1, "EQ")) + 2 * len(pm4.dma_data(0, 0, 4))  # its wait and two fills

    def flood_then_reset():
        # (read before the flag: a model that runs the flood at once has it done by the read's
        # end, since its poll sees the flag at once; it saw it only 20,000 cycles later, the
        # model's skipped polls hiding the CPU's write)
        start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
        ebo.u32[0x3004 // 4] = 1  # the flood starts (queue 0 stopped by its fault)
        deadline = kmd.dev.now() + 100_000
        while kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start < under_way and kmd.dev.now() < deadline:
            kmd.dev.delay(16)
        seen.append(kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start)
        request()
    kmd.ring.request_reset = flood_then_reset
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 2_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert seen and seen[0] >= under_way, seen  # (the flood under way at the reset)
    gbo.u32[0x3000 // 4] = 1
    assert good.wait(g, 2_000_000, ghi) and gbo.u32[4] == 0x600D
    assert good.wait(s, 2_000_000) and gbo.u32[0x3100 // 4] == 0x5E
    assert evil.wait(f, 2_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + fills - 1
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0), (kmd.stats, kmd.recovery_log)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")], kmd.recovery_log
    assert (sjob.runs, gjob.runs) == (1, 1), "innocent jobs run again"
    assert query(good, ghi).reset_status == query(good).reset_status == ResetStatus.NO_RESET
    assert kmd.mmio.fields(regs.CP_QUEUE_PRIORITY) == {"Q0": 1, "Q1": 2}  # (as the KMD programs it)


def check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck(dev, fills: int = 8, fill: int = 16 << 10):
    """An innocent client's job on queue 0 polls a flag (WAIT_REG_MEM); a client of HIGH
    priority (any client by default) keeps queue 1 busy with fills longer than the job
    timeout. The flag is set meanwhile: the poll holds, but on the RTL queue 0 is parked
    (STATUS.WAITING) until it gets the CP to poll again, which queue 1, of higher priority,
    keeps. The job timer took the parked queue for stuck in its poll (its own counters still,
    the shared ones moved by the other queue): the innocent job was reset with TIMEOUT, its
    context guilty, a hang counted towards its file's ban (file_ban_after_hangs). Now a
    waiting queue whose poll holds in memory, the other CP queue having run since the last
    look, is waiting for the CP, not stuck."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000)
    good, evil = Client(), Client()
    dst = 0x5000 + -(-(len(pm4.dma_data(0, 0, 4)) * fills + 0x40) * 4 // 0x1000) * 0x1000
    gbo, ebo = good.bo(0x4000), evil.bo(dst + max(fill, 0x1000))
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    f = _the_flood(evil, ebo, ehi, dst, fills, fill)
    _release_the_flood_then_the_poll(kmd, ebo, gbo)
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert evil.wait(f, 2_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + fills - 1
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0

def check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck(
        dev, fills: int = 8, fill: int = 16 << 10):
    """An innocent client's job on queue 0 polls a flag (A), then a second one (B) that it is
    given only later (once the flood is over); a HIGH client floods queue 1 meanwhile, with
    fills longer than the job timeout. A is set during the flood: queue 0 is parked in it
    (on the RTL, and ParkedPolls) until queue 1 lets it poll again. The timer took the job
    for stuck because B did not hold in memory (which poll the queue is in is not known):
    the innocent job was reset with TIMEOUT, its context guilty, a hang counted towards its
    file's ban. Now a waiting queue that the other CP queue kept off the CP since the last
    look (a job in its ring all along, running at the look) is not stuck while any poll of
    its job holds: it may be parked in that one."""
    t_out = 3_000
    kmd = kmd_model.bind(dev, job_timeout=t_out, hw_timeout=5_000)
    good, evil = Client(), Client()
    dst = 0x5000 + -(-(len(pm4.dma_data(0, 0, 4)) * fills + 0x40) * 4 // 0x1000) * 0x1000
    gbo, ebo = good.bo(0x4000), evil.bo(dst + max(fill, 0x1000))
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.wait_reg_mem(gbo.addr + 0x3004, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    f = _the_flood(evil, ebo, ehi, dst, fills, fill)
    _release_the_flood_then_the_poll(kmd, ebo, gbo)  # (A holds from then on)
    t0 = kmd.dev.now()
    assert evil.wait(f, 2_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + fills - 1
    parked = kmd.dev.now() - t0
    assert not gjob.finished and kmd.stats["job_timeouts"] == 0, kmd.recovery_log
    gbo.u32[0x3004 // 4] = 1  # B, once the flood is over
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0
    return parked / t_out  # (job timeouts the flood lasted after A was set)

def check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone(
        dev, jobs: int = 4, fills: int = 1, fill: int = 16 << 10):
    """As check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck, the HIGH
    client's flood on queue 1 now `jobs` jobs, each starting with a WAIT_REG_MEM that holds at
    once (its flag set), then fills longer than the job timeout. The job timer took the
    innocent job, parked in its released poll, for stuck: a poll of queue 1 that fails yields
    the CP, so a WAIT_REG_MEM started on the CP since the last look (PERF_PACKETS) meant queue 0
    may have had its turn, and one that holds at once yields nothing (the innocent job reset
    with TIMEOUT, its context guilty, a hang towards its file's ban: what any client, HIGH by
    default, could do to another). The timer now asks the queue's own poll reads
    (PERF_Q0_POLLS): still since the last look, it had no turn."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000)
    good, evil = Client(), Client()
    per_job = len(pm4.wait_reg_mem(0, 1, 1, "EQ")) + len(pm4.dma_data(0, 0, 4)) * fills
    ib_bytes = -(-per_job * 4 // 0x100) * 0x100
    dst = 0x5000 + -(-(ib_bytes * jobs) // 0x1000) * 0x1000
    gbo, ebo = good.bo(0x4000), evil.bo(dst + fill)
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    seqnos = []
    for j in range(jobs):  # (the first job's poll is what starts the flood; the others' hold at once)
        words = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
        for k in range(fills):
            words += pm4.dma_data(ebo.addr + dst, 0x0F100D00 + j * fills + k, fill, src_sel="DATA", cp_sync=1)
        seqnos.append(evil.submit(evil.ib(ebo, words, 0x5000 + j * ib_bytes), ctx=ehi))
    waits = kmd.mmio.read(regs.PERF_PACKETS, pm4_spec.WAIT_REG_MEM.index)
    _release_the_flood_then_the_poll(kmd, ebo, gbo)
    assert evil.wait(seqnos[-1], 4_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + jobs * fills - 1
    assert kmd.mmio.read(regs.PERF_PACKETS, pm4_spec.WAIT_REG_MEM.index) - waits >= jobs - 1, "the flood's later polls started"
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0

CHECKS = [check_copy_ring_on_this_backend, check_dependencies_bounce_between_rings_gpu_side,
          check_amd_queue_reset_malformed, check_amd_queue_reset_hang, check_amd_queue_reset_bus_error,
          check_gem_reset_stats_innocent_work_on_the_reset_ring_is_resubmitted,
          check_high_priority_context_runs_on_the_cps_second_queue,
          check_a_vm_fault_on_the_cps_second_queue_resets_that_queue_and_is_reported,
          check_a_hang_on_one_cp_queue_is_found_while_the_other_queue_works,
          check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works,
          check_sdma_queue_reset_behind_the_cps_long_packet_stays_a_queue_reset,
          check_an_sdma_job_behind_the_cps_long_packet_is_not_taken_for_stuck,
          check_a_checked_job_of_long_fills_is_reset_by_the_time_rule,
          check_a_high_poll_held_off_by_queue_0_s_transfers_is_not_taken_for_stuck,
          check_a_gfx_vm_fault_resets_queue_0_alone_and_an_innocent_sdma_job_is_not_run_again,
          check_a_queue_0_reset_that_does_not_come_back_falls_to_the_full_reset,
          check_a_cp_queue_reset_behind_the_other_queues_long_packet_stays_a_queue_reset,
          check_a_full_reset_takes_the_other_rings_pending_error_with_its_guilty_job,
          check_a_queue_0_reset_while_queue_1_fills_keeps_queue_1s_transfers,
          check_a_queue_0_reset_while_the_sdma_copies_stays_a_queue_reset,
          check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset,
          check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck,
          check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck,
          check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone]


@pytest.mark.parametrize("sdma_engine", [True, False], ids=["sdma", "no_sdma"])
def test_copy_ring_on_model(sdma_engine):
    check_copy_ring_on_this_backend(RefModel(sdma=sdma_engine))


# ------------------------------------------------------------------------------ CS and CTX errors

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
    c.f.cap_sys_nice = False
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
    kmd = kmd_model.bind(model, cs_check=False)  # (a bad packet reaches the CP below)
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


# ------------------------------------------------------------------------------ scheduler

@pytest.mark.parametrize("check", CHECKS[1:], ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


class OnePacketACycle(RefModel):
    """The reference model whose CP runs one packet a cycle while it has work (cp_burst 1; the
    RTL's CP is no faster; RefModel runs a finite stream at once), so a long stream on one CP
    queue holds the CP for as many cycles as it has packets, as on the RTL. 4 KiB DMA_DATAs
    (CAPS), so the longest wait the KMD allows behind the other queue is short. (It replaced
    RefModel's budget, which gave a CP out of packets one burst per call, with one that ran
    everything a call's cycles had earned at its end.)"""

    def __init__(self):
        super().__init__(cp_burst=1, dma_max_bytes=4096)


class ParkedPolls(OnePacketACycle):
    """OnePacketACycle whose queue 0 polls as the RTL's (docs/hardware.md, "CP hardware
    queues"): a WAIT_REG_MEM that failed parks the queue (STATUS.WAITING), and it polls again
    only once the CP is its own, not while queue 1, of higher priority, can run. (The
    reference model polls on its grid whatever the other queue does.)"""

    def _cp_wait_due(self, token) -> bool:
        if self._ring_id == 0 and self._hq1 is not None and self._hq1.runnable1():
            self._wait.next_poll += self._wait.interval  # (queue 1 holds the CP: no poll now)
            return False
        return super()._cp_wait_due(token)


def test_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck():
    """The check on a model whose CP runs a packet a cycle and whose queue 0 polls again only
    when queue 1 lets it, as the RTL's: the flood some 40,000 cycles, the job timeout 3,000."""
    check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck(ParkedPolls(), 40_000, 64)


def test_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone():
    """The check on the model that parks as the RTL does (a packet a cycle): four HIGH jobs of
    10,000 fills each, each job's poll holding at once, the job timeout 3,000."""
    check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone(ParkedPolls(), 4, 10_000, 64)


def test_a_poll_that_does_not_hold_behind_queue_1_s_flood_is_still_stuck():
    """The other side of the rule: a job on queue 0 whose poll does not hold is reset by its
    timeout while queue 1 floods (the flood, queue 0's only hope of being moved on, is no
    reason to wait for it), queue 0 alone, the flood run once."""
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=3_000, hw_timeout=5_000)
    bad, evil = Client(), Client()
    bbo, ebo = bad.bo(0x4000), evil.bo(0x100000)
    ehi = new_ctx(evil, CtxPriority.HIGH)
    b = bad.submit(bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16), 0x100))
    flood = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
    for k in range(20_000):
        flood += pm4.dma_data(ebo.addr + 0xFF000, k, 64, src_sel="DATA")
    f = evil.submit(evil.ib(ebo, flood, 0x4000), ctx=ehi)
    fjob = kmd.hqd_sched.pending[0]
    kmd.dev.delay(1_000)
    request, seen = kmd.ring.request_reset, []
    kmd.ring.request_reset = lambda: (seen.append(kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start), request())[1]
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        bad.wait(b, 1_000_000)
    # reset during the flood (its timeout, not the flood's end): queue 1 had fetched a part of it
    assert len(seen) == 1 and 0 < seen[0] < len(flood) / 2, (seen, len(flood))  # (after it: 140,013)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT", ei.value
    assert "stuck in WAIT_REG_MEM" in ei.value.info.message, ei.value.info.message
    assert evil.wait(f, 1_000_000, ehi) and fjob.runs == 1
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0)


def test_an_unchecked_job_starved_by_queue_1_is_not_reset_for_the_time_it_could_not_run():
    """With cs_check off, an innocent client's one-packet job on queue 0 waits behind a HIGH
    client's jobs that keep queue 1 (which outranks it) busy longer than the time rule,
    unchecked_job_timeouts job timeouts. The time rule counted from when the job reached the
    head of its ring: the job, which had not run a packet, was reset as "ran N cycles
    unchecked (cs_check off), more than 4 job timeouts", its context guilty and a hang counted
    towards its file's ban. The checked path takes such a job as waiting for the CP, not
    stuck (its timer restarts); the time rule now counts only the intervals between the
    timer's looks in which the queue was served, so the job runs once the flood ends."""
    t_out, timeouts, jobs, fills = 2_000, 4, 24, 1_000
    kmd = kmd_model.bind(OnePacketACycle(), cs_check=False, job_timeout=t_out, hw_timeout=5_000,
                         unchecked_job_timeouts=timeouts)
    good, busy = Client(), Client()
    gbo, ebo = good.bo(0x1000), busy.bo(0x10000 * jobs)
    hi = new_ctx(busy, CtxPriority.HIGH)
    floods = []
    for j in range(jobs):  # (each shorter than the time rule: they are unchecked too)
        words = pm4.wait_reg_mem(ebo.addr + 0x7000, 1, 1, "EQ", poll_interval=4) if j == 0 else []
        words += sum((pm4.dma_data(ebo.addr + 0x8000 + 0x10000 * j, k, 64, src_sel="DATA") for k in range(fills)), [])
        floods.append(busy.submit(busy.ib(ebo, words, 0x10000 * j), ctx=hi))
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x7000 // 4] = 1  # the flood starts
    while kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start < 14:
        kmd.dev.delay(16)
    t0 = kmd.dev.now()
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert kmd.dev.now() - t0 > 2 * timeouts * t_out  # (starved twice the time rule and more)
    for f in floods:
        assert busy.wait(f, 2_000_000, hi)
    assert ebo.u32[(0x8000 + 0x10000 * (jobs - 1)) // 4 + 15] == fills - 1
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0


def test_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck():
    """The check on a model whose queue 0 polls again only when queue 1 lets it, as the RTL's:
    the flood lasts job timeouts after A is set, queue 0 parked in A all along."""
    assert check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck(
        ParkedPolls(), 40_000, 64) > 3


def _reset_at_the_look(kmd, bad, b: int, t0: int):
    """(the KmdError, cycles since t0) if job `b` was reset by the timer's look just made,
    else None (the look: a WAIT_CS of timeout 0 services the driver)."""
    try:
        bad.wait(b, 0)
    except uapi.KmdError as e:
        return e, kmd.dev.now() - t0
    return None


def _the_timers_next_look(kmd, t_out: int) -> int:
    """The cycle of the job timer's next look at ring 0 (a client can learn its phase)."""
    return kmd.sched.progress_at + (t_out if kmd.sched.progress_mark else max(1, t_out // 8))


def _the_flood(evil, ebo, ehi, dst: int, fills: int, fill: int) -> int:
    """A HIGH job that waits on ebo's flag at 0x3000, then fills `fills` times `fill` bytes
    at ebo + `dst` (CP_SYNC above 64 bytes): its seqno."""
    flood = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
    for k in range(fills):
        flood += pm4.dma_data(ebo.addr + dst, 0x0F100D00 + k, fill, src_sel="DATA", cp_sync=int(fill > 64))
    return evil.submit(evil.ib(ebo, flood, 0x5000), ctx=ehi)


def _release_the_flood_then_the_poll(kmd, ebo, gbo) -> None:
    """The victim's job polls, the timer's first look to come; then the flood on queue 1
    (waiting on ebo's flag at 0x3000) starts, and once it has fetched a few dwords the
    victim's poll (gbo's flag at 0x3000) holds from then on."""
    kmd.dev.delay(1_000)
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x3000 // 4] = 1  # the flood starts
    deadline = kmd.dev.now() + 100_000
    while kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start < 14 and kmd.dev.now() < deadline:
        kmd.dev.delay(16)
    gbo.u32[0x3000 // 4] = 1  # the poll holds from now on


def _past_a_into_b(bad, bbo, **kw) -> int:
    """A job that passes a poll that holds (A, its flag at 0x3000 set) and polls one that
    never will (B, at 0x3004), each every 16 cycles: its seqno."""
    bbo.u32[0x3000 // 4] = 1  # A holds
    return bad.submit(bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                             + pm4.wait_reg_mem(bbo.addr + 0x3004, 1, 1, "EQ", poll_interval=16), 0x100), **kw)


def _rounds_of_work_and_a_poll(client, wbo, rounds: int, **kw) -> int:
    """One long job: `rounds` times 300 DMA_DATA fills, then a poll of round k's flag (at
    wbo + 0xF8000 + 4k, every 4 cycles), which the test sets: its seqno."""
    words = []
    for k in range(rounds):
        words += sum((pm4.dma_data(wbo.addr + 0xF0000, j, 64, src_sel="DATA") for j in range(300)), [])
        words += pm4.wait_reg_mem(wbo.addr + 0xF8000 + 4 * k, 1, 1, "EQ", poll_interval=4)
    return client.submit(client.ib(wbo, words, 0x1000), **kw)


def test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_lets_it_poll():
    """The other side of the rule above: a hostile job on queue 0 passes a poll that holds
    (A) and then polls one that never will (B), while a client keeps queue 1 busy now and
    then, a job of some 1,000 cycles, then its ring empty for 500 (queue 0 polls, and fails,
    between them). Were the job taken as parked in A (some poll of it holds,
    queue 1 had work and moved the shared counters since the last look), it would hold ring
    0 for as long as queue 1 had such work, every other client's job on ring 0 behind it.
    It is reset by its timeout, and the innocent job behind it runs."""
    t_out = 3_000
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000)
    bad, busy, behind = Client(), Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), busy.bo(0x10000), behind.bo(0x1000)
    hi = new_ctx(busy, CtxPriority.HIGH)
    b = _past_a_into_b(bad, bbo)
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100))
    t0, done, failed = kmd.dev.now(), 0, None
    while failed is None and kmd.dev.now() - t0 < 20 * t_out:
        words = sum((pm4.dma_data(wbo.addr + 0xC000, k, 64, src_sel="DATA") for k in range(1_000)), [])
        w = busy.submit(busy.ib(wbo, words, 0x8000 * (done % 2)), ctx=hi)
        assert busy.wait(w, 1 << 20, ctx=hi)
        done += 1
        kmd.dev.delay(t_out // 6)
        try:
            bad.wait(b, 0)
        except uapi.KmdError as e:
            failed = e, kmd.dev.now() - t0
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles ({done} jobs on queue 1)"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    assert when <= 2 * t_out, when  # (its timeout: 9/8 of one, and the loop's step)
    assert behind.wait(n, 1 << 20) and nbo.u32[4] == 0x600D
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_polls_in_its_job():
    """As above, queue 1's work one long job this time, always in its ring, that runs some
    300 packets and then polls a flag its client sets 1,500 cycles later, and again: queue 1
    polling yields the CP, and queue 0 polls B, and fails, then. Queue 1 held the CP since
    the last look only if it is running at the look (not polling, its STATUS): the hostile
    job is reset by its timeout, the first look that finds queue 1 polling."""
    t_out, rounds = 3_000, 40
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000)
    bad, busy = Client(), Client()
    bbo, wbo = bad.bo(0x4000), busy.bo(0x100000)
    hi = new_ctx(busy, CtxPriority.HIGH)
    w = _rounds_of_work_and_a_poll(busy, wbo, rounds, ctx=hi)
    b = _past_a_into_b(bad, bbo)
    t0, failed = kmd.dev.now(), None
    for k in range(rounds):
        kmd.dev.delay(1_500)
        try:
            bad.wait(b, 0)  # (the look: queue 1 has polled its flag for some 1,200 cycles)
        except uapi.KmdError as e:
            failed = e, kmd.dev.now() - t0
            break
        # set after the look: set before it, queue 1 saw it at its next poll, 4 cycles on,
        # and ran at every look (the model saw it late: its skipped polls hid the CPU's write)
        wbo.u32[0xF8000 // 4 + k] = 1
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    assert when <= 2 * t_out, when  # (its timeout: 9/8 of one, and the loop's step)
    wbo.u32[0xF8000 // 4: 0xF8000 // 4 + rounds] = 1
    assert busy.wait(w, 1 << 20, ctx=hi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset():
    """The check on a model whose CP runs one packet a cycle: the flood on queue 1 takes
    time, as on the RTL."""
    check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset(OnePacketACycle(), 40_000, 64, None)


def test_priorities_and_hw_submission_limit():
    """With one job in flight per ring, queued jobs go HIGH before NORMAL before LOW, round
    robin within a run queue; each entity's jobs in order."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1)
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
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1)
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    held = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")), ctx=hi)
    nxt = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [5]), 0x400), ctx=hi)
    assert (len(kmd.hqd_sched.pending), len(kmd.hqd_sched.queue), len(kmd.sched.pending)) == (1, 1, 0)
    bo.u32[0x200] = 1
    assert c.wait(nxt, ctx=hi) and c.wait(held, 0, ctx=hi) and bo.u32[0x40] == 5


# ------------------------------------------------------------------------------ recovery (igt shapes)

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


def test_failed_queue_reset_falls_back_to_full_reset_and_wedged_device_fails_everything():
    """The ladder's last steps: a queue reset that does not bring the engine back goes to the
    full reset; a full reset that fails wedges the device: every unfinished job fails with
    EIO and so does every later CS."""

    class StuckSdma(RefModel):
        """Its SDMA queue ignores QUEUE_RESET (a queue that will not come back); with
        `dead` set, CONTROL.SOFT_RESET leaves the CP busy too."""
        dead = False

        def _poke(self, offset, value, bytemask):
            from kmd_model import regs
            if offset == regs.SDMA_CNTL.addr():
                value &= ~regs.SDMA_CNTL.QUEUE_RESET.mask
            super()._poke(offset, value, bytemask)

        def _idle(self):
            return False if self.dead else super()._idle()

    dev = StuckSdma()
    kmd = kmd_model.bind(dev, job_timeout=10_000)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(sdma_ib(abo, HANG(abo.addr + 0x3000)))
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(bad, 1_000_000)
    assert ei.value.errno == errno.ECANCELED
    assert [s for _, s in kmd.recovery_log] == ["timeout", "queue_reset", "full_reset"]
    assert kmd.stats["resets"] == 1 and kmd.stats["queue_resets"] == 0
    assert b.wait(b.submit(sdma_ib(bbo, sdma.fence(bbo.addr + 0x100, 3))))  # the device works after it
    # now the full reset itself fails: wedged
    dev.dead = True
    held = b.submit(b.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ"), 0x400))
    queued = b.submit(sdma_ib(bbo, HANG(bbo.addr + 0x3000), 0x800))
    with pytest.raises(uapi.KmdError):
        b.wait(queued, 2_000_000)
    assert kmd.wedged and kmd.wedged.startswith("GPU reset failed")
    for s in (held, queued):
        with pytest.raises(uapi.KmdError) as ei:
            b.wait(s)
        assert ei.value.errno == errno.EIO
    expect(errno.EIO, f"CS: {kmd.wedged}", b.submit, sdma_ib(bbo, sdma.fence(bbo.addr + 0x100, 4), 0xC00))
    # a wedged device's contexts are lost, not banned: BANNED is not set, whatever their hangs
    kmd.contexts[(a.f.fd, a.ctx)].banned = "context banned (as if)"
    assert not a.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, a.ctx)).flags & uapi.CtxQueryFlags.BANNED


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



def test_a_full_reset_takes_an_error_another_engine_latched_while_the_queue_reset_waited():
    """check_a_full_reset_takes_the_other_rings_pending_error_with_its_guilty_job with the
    SDMA's fault coming while queue 0's reset waits (its POLL_REGMEM gives up after about
    2,400 cycles, then writes the unmapped BO): nobody has seen it when the ladder reaches
    the full reset. The full reset reads the other rings' STATUS.ERROR first: the SDMA's
    guilty job fails with its own fault, once (it ran again from its start as an innocent
    job, its fault then a second reset)."""
    kmd = kmd_model.bind(RefModel(), hw_timeout=5_000)
    a, b, abo, bbo, s, e, job = _an_sdma_fault_and_a_gfx_fault_that_takes_the_full_reset(kmd, interval=10,
                                                                                         retry_count=14)
    bbo.u32[0x3000 // 4] = 1
    seen = []
    recover = kmd.gpu_recover

    def spy(*args, **kw):
        seen.append((kmd.sdma_sched.error is not None, regs.SDMA_STATUS.ERROR.get(kmd.mmio.read(regs.SDMA_STATUS))))
        return recover(*args, **kw)
    kmd.gpu_recover = spy
    with pytest.raises(uapi.KmdError) as ei:
        b.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert seen == [(False, 1)], seen  # (the case: latched, not seen yet)
    assert kmd.stats["resets"] == 1 and ("gfx", "full_reset") in kmd.recovery_log, kmd.recovery_log
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(s, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and "sdma0" in ei.value.info.message, ei.value
    assert job.runs == 1 and ("sdma0", "queue_reset") not in kmd.recovery_log, (job.runs, kmd.recovery_log)
    assert query(a).ring_status == {"sdma0": ResetStatus.GUILTY}


def test_a_full_reset_from_the_sdma_ladder_takes_a_cp_error_latched_while_its_queue_reset_waited():
    """The other way round: the SDMA's queue reset does not come back (its ladder falls to the
    full reset) and, while it waits, CP queue 0's job faults (its WAIT_REG_MEM let go by the
    CPU then): nobody has read queue 0's error when the full reset starts. The full reset
    reads STATUS.ERROR first and takes that error with its guilty job: the gfx job fails with
    its own fault, once, in that one reset (not run again from its start as an innocent job,
    its fault a second reset)."""
    kmd = kmd_model.bind(RefModel(), hw_timeout=5_000)
    a, b = Client(), Client()
    abo, av, bbo, bv = a.bo(0x4000), a.bo(), b.bo(0x4000), b.bo()
    e = b.submit(b.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(bv.addr, [1])))
    for c, v in ((a, av), (b, bv)):
        c.io(Request.GEM_VA, uapi.GemVaArgs(v.handle, uapi.VaOp.UNMAP, v.addr, 0, v.size, 0))
    job = kmd.sched.pending[0]

    def request_reset():  # (SDMA_CNTL.QUEUE_RESET never written: the wait gives up)
        bbo.u32[0x3000 // 4] = 1  # queue 0's job goes on, to its fault
    kmd.sdma_ring.request_reset = request_reset
    s = a.submit(sdma_ib(abo, sdma.write_linear(av.addr, [1]), 0x1000))
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(s, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and "sdma0" in ei.value.info.message, ei.value
    with pytest.raises(uapi.KmdError) as ei:
        b.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert ei.value.info.addr == bv.addr, ei.value
    assert kmd.stats["resets"] == 1 and ("sdma0", "full_reset") in kmd.recovery_log, kmd.recovery_log
    assert job.runs == 1 and ("gfx", "queue_reset") not in kmd.recovery_log, (job.runs, kmd.recovery_log)
    assert query(b).ring_status == {"gfx": ResetStatus.GUILTY}


def test_a_queue_0_reset_whose_ring_test_fails_makes_the_full_resets_guilt_lasting():
    """The ladder's queue reset can fail after it has found the guilty context: queue 0 came
    back, its jobs of that ring were cancelled, then its ring test did not pass (on the RTL:
    behind the other CP queue's work past the test's bound). The full reset that follows
    must treat the context as one that caused a full reset, as when the queue reset fails
    before (check_a_queue_0_reset_that_does_not_come_back_falls_to_the_full_reset): lasting
    guilt (its CS: ECANCELED), its jobs on every ring cancelled, the hang counted once. It
    went to the full reset with no guilty context: the context's CS was taken after the full
    reset, and its queued copy job on the SDMA ring ran on as an innocent one's."""
    kmd = kmd_model.bind(RefModel(), hw_timeout=5_000)

    def ring_test_fails(timeout):
        raise uapi.KmdError(errno.ETIMEDOUT, "ring test failed: (forced by the test)")
    kmd.ring.test_after_reset = ring_test_fails
    good, evil = Client(), Client()
    gbo, ebo, victim = good.bo(0x4000), evil.bo(0x4000), evil.bo()
    held = evil.submit(sdma_ib(ebo, sdma.poll_regmem(ebo.addr + 0x3200, 1, 0xFFFF_FFFF, "EQ", interval=4)
                               + sdma.fence(ebo.addr + 0x3100, 0x77), 0x1000))
    e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(victim.addr, [1])))
    evil.io(Request.GEM_VA, uapi.GemVaArgs(victim.handle, uapi.VaOp.UNMAP, victim.addr, 0, victim.size, 0))
    ebo.u32[0x3000 // 4] = 1  # the gfx job faults; the SDMA job polls on (a flag set later)
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", ei.value
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset"), ("gfx", "full_reset")]
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 1)
    qe = query(evil)
    assert qe.reset_status == ResetStatus.GUILTY and qe.error is not None and qe.error.code == "VM_FAULT"
    assert kmd.contexts[(evil.f.fd, evil.ctx)].hangs == 1  # one hang, counted once
    # and one reset, the full one, for every context: the queue reset that failed is none
    # (amdgpu counts a ring reset only once it succeeded); it was counted, 2 resets a context
    assert qe.resets == query(good).resets == 1 and qe.flags & uapi.CtxQueryFlags.RESET
    ebo.u32[0x3200 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:  # the full reset's guilt: every ring's job of the context goes
        evil.wait(held, 100_000)
    assert ei.value.errno == errno.ECANCELED, ei.value
    expect(errno.ECANCELED, f"CS: context {evil.ctx} was reset: {qe.error.message}", evil.submit,
           evil.ib(ebo, pm4.nop(2), 0x2000))
    assert good.wait(good.run(gbo, pm4.write_data(gbo.addr + 0x10, [0x6D]), 0x800)) and gbo.u32[4] == 0x6D


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


def test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_polls_only_between_looks():
    """The blind spot of the rule above (the look sees queue 1 only at that moment): a hostile
    client's job on queue 0 passes a poll that holds (A) and polls one that never will (B); its
    own HIGH context's job on queue 1 runs 300 packets, then polls a flag, and the client sets
    that flag just before each of the timer's looks (its period is job_timeout: the client can
    learn its phase), so queue 1 is running at every look and polling between them, where queue
    0 polls B, and fails, every 16 cycles. The job was taken as parked at every look and held
    ring 0 for as long as the client kept this up (120,000 cycles, 40 job timeouts, in this
    test), an innocent job behind it never run, where its timeout bounds it. The look asked
    next whether any WAIT_REG_MEM started since the last one (PERF_PACKETS), and now asks
    whether queue 0 made a poll read (PERF_Q0_POLLS): it polled B between the looks, and the
    hostile job is reset by its timeout."""
    t_out, rounds = 3_000, 40
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000)
    bad, behind = Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), bad.bo(0x100000), behind.bo(0x1000)
    hi = new_ctx(bad, CtxPriority.HIGH)
    w = _rounds_of_work_and_a_poll(bad, wbo, rounds, ctx=hi)
    b = _past_a_into_b(bad, bbo)
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100))
    t0, failed = kmd.dev.now(), None
    for k in range(rounds):
        look = _the_timers_next_look(kmd, t_out)
        kmd.dev.delay(max(0, look - 100 - kmd.dev.now()))  # queue 1 polls its flag meanwhile
        wbo.u32[0xF8000 // 4 + k] = 1  # queue 1 runs again from its next poll on
        kmd.dev.delay(max(0, look + 4 - kmd.dev.now()))
        failed = _reset_at_the_look(kmd, bad, b, t0)
        if failed:
            break
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    # (its last step, into B, came after the first look, queue 1 ahead of it: caught within
    # two job timeouts of that; before, 117,703 cycles, when queue 1's job ran out of rounds)
    assert when <= 3 * t_out, when
    assert behind.wait(n, 1 << 20) and nbo.u32[4] == 0x600D
    wbo.u32[0xF8000 // 4: 0xF8000 // 4 + rounds] = 1
    assert bad.wait(w, 1 << 20, ctx=hi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_high_job_in_a_poll_that_never_holds_after_one_that_does_is_stuck_while_queue_0_works():
    """The parked rule the other way round: a hostile client's HIGH job on queue 1 passes a
    poll that holds (A) and polls one that never will (B), while its own normal-priority jobs
    keep queue 0 busy (its ring never empty, running at every look). Queue 1 outranks queue 0:
    queue 0 never keeps it off the CP (one packet at most), it polls B, and fails, every few
    cycles. The rule that spares a queue the other kept off the CP took queue 0's work for
    holding the CP, and the job as parked in A: it held ring 1 for as long as queue 0 had
    work (all the test's 40 job timeouts), an innocent HIGH client's job behind it never run.
    A queue of higher priority than the other's is never parked behind it: reset by its
    timeout."""
    t_out, rounds = 3_000, 120
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000)
    bad, behind = Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), bad.bo(0x10000), behind.bo(0x1000)
    hi, nhi = new_ctx(bad, CtxPriority.HIGH), new_ctx(behind, CtxPriority.HIGH)
    b = _past_a_into_b(bad, bbo, ctx=hi)
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100), ctx=nhi)
    words = sum((pm4.dma_data(wbo.addr + 0xC000, k, 64, src_sel="DATA") for k in range(1_000)), [])
    t0, failed, last = kmd.dev.now(), None, []
    for k in range(rounds):
        while len(last) < 3:  # (queue 0's ring never empty: a job in it and two behind)
            last.append(bad.submit(bad.ib(wbo, words, 0x8000 * (k % 2))))
        kmd.dev.delay(t_out // 3)
        try:
            bad.wait(b, 0, ctx=hi)
        except uapi.KmdError as e:
            failed = e, kmd.dev.now() - t0
            break
        while last and bad.wait(last[0], 0):
            last.pop(0)
    assert failed is not None, f"the hostile job held ring 1 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    assert when <= 2 * t_out + t_out // 3, when  # (its timeout: 9/8 of one, and the loop's step)
    assert behind.wait(n, 1 << 20, ctx=nhi) and nbo.u32[4] == 0x600D
    for s in last:
        assert bad.wait(s, 1 << 20)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_poll_a_client_makes_hold_only_at_the_looks_is_stuck():
    """A hostile client's job on queue 0 polls a flag the client sets just before each of the
    timer's looks (its period is job_timeout: the client can learn its phase) and clears just
    after, while its own HIGH context's job, submitted then, runs on queue 1 through the look
    (queue 0 parked meanwhile); between the looks queue 1 is idle and queue 0 polls the flag,
    and fails. A job whose every poll held at the look was parked whatever queue 1 had done
    since the last one: it held ring 0 for as long as the client went on (all the test's 40
    job timeouts), an innocent job behind it never run. A queue is parked only when the
    other queue held the CP since the last look (it had no turn to poll): reset by its
    timeout."""
    t_out, rounds = 3_000, 40
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000)
    bad, behind = Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), bad.bo(0x10000), behind.bo(0x1000)
    hi = new_ctx(bad, CtxPriority.HIGH)
    flag = 0x3000 // 4
    b = bad.submit(bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16), 0x100))
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100))
    words = sum((pm4.dma_data(wbo.addr + 0xC000, k, 64, src_sel="DATA") for k in range(1_000)), [])
    t0, failed, runs = kmd.dev.now(), None, []
    for k in range(rounds):
        look = _the_timers_next_look(kmd, t_out)
        kmd.dev.delay(max(0, look - 60 - kmd.dev.now()))  # queue 0 polls, and fails, meanwhile
        runs.append(bad.submit(bad.ib(wbo, words, 0x8000 * (k % 2)), ctx=hi))  # queue 1 runs through the look
        bbo.u32[flag] = 1
        kmd.dev.delay(max(0, look + 4 - kmd.dev.now()))
        failed = _reset_at_the_look(kmd, bad, b, t0)
        bbo.u32[flag] = 0
        if failed:
            break
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "polling in a WAIT_REG_MEM" in e.message, e.message
    assert when <= 9 * t_out // 8 + t_out, when  # (its timeout: 9/8 of one, and a look's step)
    assert behind.wait(n, 1 << 20) and nbo.u32[4] == 0x600D
    for r in runs:
        assert bad.wait(r, 1 << 20, ctx=hi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_an_unchecked_job_parked_behind_queue_1_s_jobs_is_not_reset_for_the_time_it_was_parked():
    """The unchecked time rule (head_ran) leaves out the intervals in which the job's queue
    was parked in a poll that holds while queue 1 held the CP (_progressed: moved = unserved
    = True): an innocent job with the checker off, its poll released early in a HIGH
    client's flood of five jobs of 8,000 cycles each (each well under the rule's 4 job
    timeouts, the flood some 40,000 cycles, 13 of them), runs to its end, nobody reset."""
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=3_000, hw_timeout=5_000, cs_check=False,
                         unchecked_job_timeouts=4)
    good, evil = Client(), Client()
    fills, jobs = 8_000, 5
    gbo, ebo = good.bo(0x4000), evil.bo(0x80_000)
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    fill = []
    for k in range(fills):
        fill += pm4.dma_data(ebo.addr + 0x7F_000, 0x0F100D00 + k, 64, src_sel="DATA")
    first = evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4) + fill, 0x5000)
    more = evil.ib(ebo, fill, 0x40_000)  # (no poll: one would yield the CP)
    fs = [evil.submit(first, ctx=ehi)] + [evil.submit(more, ctx=ehi) for _ in range(jobs - 1)]
    _release_the_flood_then_the_poll(kmd, ebo, gbo)
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert all(evil.wait(f, 2_000_000, ehi) for f in fs)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0
