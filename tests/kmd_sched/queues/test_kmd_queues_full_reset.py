"""Recovery per ring with many rings, its last steps: a queue reset that does not come back
(or whose ring test fails) falls to the full reset, which takes the other engines' pending
errors with its guilty job, runs no innocent job twice and wedges the device if it fails
itself; a hostile flood on the other CP queue does not turn a queue reset into it
(reference-model backend; the `check_*` bodies run on the RTL too,
tests/cosim/test_rtl_drivers.py). The queue resets themselves: test_kmd_queues_resets.py."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CtxOp, CtxPriority, Request, ResetStatus
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import sdma_ib, query, new_ctx, HANG, OnePacketACycle


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


def check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset(dev, fills: int = 8,
                                                                                fill: int = 16 << 10,
                                                                                packets: int | None = 1):
    """A hostile client (HIGH priority: cap_sys_nice, then every client's default) makes queue 0's
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
    kmd = kmd_model.bind(dev, hw_timeout=5_000, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
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


CHECKS = [check_a_gfx_vm_fault_resets_queue_0_alone_and_an_innocent_sdma_job_is_not_run_again,
          check_a_queue_0_reset_that_does_not_come_back_falls_to_the_full_reset,
          check_a_full_reset_takes_the_other_rings_pending_error_with_its_guilty_job,
          check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset():
    """The check on a model whose CP runs one packet a cycle: the flood on queue 1 takes
    time, as on the RTL."""
    check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset(OnePacketACycle(), 40_000, 64, None)


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
