"""The extra rings' driver side (kmd_model/sched/sdma_ring.py, ring.HqdRing, their paths through
kmd.py): how each ring is programmed and wraps (seqnos too), what its listing and log say, and
how its fences signal: from its own interrupt, or by polling where the interrupt cannot say.
Reference-model backend (the igt-shaped scenarios: tests/kmd_sched/queues/test_kmd_queues_*.py)."""

from __future__ import annotations

import errno
import logging
import signal
import time

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkIb, CtxPriority
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import new_ctx, query, sdma_ib
from tests.kmd_sched.sched_helpers import Recorder


@pytest.mark.parametrize("ring", ["sdma0", "gfx_high"])
def test_each_extra_ring_wraps_many_times(ring):
    """A small ring wrapped many times over: the engine reads the size the KMD programmed,
    writes its rptr back where the KMD reads it (in the ring's own units), and every job's
    data lands. A size or rptr the two sides disagree on stalls or corrupts the ring."""
    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, sdma_ring_log2_dw=6, cs_check=False, cap_sys_nice=True)
    c = Client()
    ctx = new_ctx(c, CtxPriority.HIGH) if ring == "gfx_high" else c.ctx
    sched = kmd.sdma_sched if ring == "sdma0" else kmd.hqd_sched
    bo = c.bo(0x10000)
    seqs = []
    for k in range(40):  # each job takes 16+ of the ring's 64 dwords: ~10 wraps
        if ring == "sdma0":
            ib = sdma_ib(bo, sdma.write_linear(bo.addr + 0x8000 + 4 * k, [0x100 + k]), 0x40 * k)
        else:
            ib = c.ib(bo, pm4.write_data(bo.addr + 0x8000 + 4 * k, [0x100 + k]), 0x40 * k)
        seqs.append(c.submit(ib, ctx=ctx))
    assert c.wait(seqs[-1], 1_000_000, ctx=ctx)
    assert bo.u32[0x2000:0x2000 + 40].tolist() == [0x100 + k for k in range(40)]
    r = sched.ring
    assert r.committed > 8 * r.size_dw  # it did wrap
    assert r.get_rptr() == r.get_wptr() == r.committed  # both pointers read in the driver's dwords
    assert kmd.stats["resets"] == kmd.stats["queue_resets"] == kmd.stats["job_timeouts"] == 0


@pytest.mark.parametrize("ring", ["sdma0", "gfx"])
def test_rings_run_on_across_their_hardware_pointers_wrap(ring):
    """The SDMA's ring pointers are 32-bit byte counts (docs/hardware.md, "The SDMA copy
    engine": free running, as AMD's), so they wrap after 2^30 dwords, where the CP's dword
    pointers go on to 2^32: the KMD's dword pointers for each ring wrap where its engine's do.
    The SDMA ring's went on to 2^32: its wptr reached 0x40000000 while the write-back's rptr
    (>> 2) came back to 0, so the ring looked more than full and the next job never reached
    the engine (its WAIT_CS: ETIME), once 4 GiB of packets had gone through the ring. Nothing
    resets the pointers in between, so the model's engine and the KMD's ring start 512 bytes
    before the wrap here, as that many jobs would leave them (no simulation runs them); 40
    jobs then cross it, and a faulting job after it is found at the engine's rptr
    (Scheduler.job_at_ring) and blamed alone. The gfx ring (dword pointers, 2^32) alike."""
    dev = RefModel()
    kmd = kmd_model.bind(dev, sdma_ring_log2_dw=6, ring_log2_dw=6, cs_check=False, job_timeout=20_000)
    r = kmd.sdma_ring if ring == "sdma0" else kmd.ring
    unit = 4 if ring == "sdma0" else 1  # the engine's pointer units per dword
    start = (1 << 32) - 128 * unit
    if ring == "sdma0":
        assert dev.sdma.rptr == dev.sdma.wptr == 4 * r.committed == 4 * r.wptr  # (idle after its ring test)
        dev.sdma.rptr = dev.sdma.wptr = start  # (the engine's byte pointers)
    else:
        assert dev._rptr == dev._wptr == r.committed == r.wptr
        dev._rptr = dev._wptr = start  # (CP queue 0's dword pointers)
    kmd.wb32[r.rptr_wb_index] = start  # (its rptr write-back)
    r.wptr = r.committed = r.commit_start = start // unit
    c = Client()
    ctx = new_ctx(c)
    bo = c.bo(0x10000)

    def job(k, value, off):
        if ring == "sdma0":
            return sdma_ib(bo, sdma.write_linear(bo.addr + 0x8000 + 4 * k, [value]), off)
        return c.ib(bo, pm4.write_data(bo.addr + 0x8000 + 4 * k, [value]), off)

    seqs = [c.submit(job(k, 0x100 + k, 0x40 * k), ctx=ctx) for k in range(40)]
    assert c.wait(seqs[-1], 1_000_000, ctx=ctx), "the jobs after the wrap did not finish"
    assert bo.u32[0x2000:0x2000 + 40].tolist() == [0x100 + k for k in range(40)]
    hw_rptr = dev.sdma.rptr if ring == "sdma0" else dev._rptr
    assert hw_rptr < start and r.get_rptr() == r.get_wptr() == r.committed == hw_rptr // unit
    # a job that faults (an IB where nothing is mapped) is the one blamed, the context runs on
    other = new_ctx(c)
    ip = uapi.HwIp.DMA if ring == "sdma0" else uapi.HwIp.GFX
    bad = c.submit(CsChunkIb(8, gpu_addr=bo.addr + 0x100_0000, ip_type=ip), ctx=other)
    with pytest.raises(uapi.KmdError) as e:
        c.wait(bad, 1_000_000, ctx=other)
    assert e.value.errno == errno.ECANCELED
    assert query(c, other).reset_status == uapi.ResetStatus.GUILTY
    assert query(c, ctx).reset_status != uapi.ResetStatus.GUILTY
    after = c.submit(job(0x100, 0x77, 0x40), ctx=ctx)
    assert c.wait(after, 1_000_000, ctx=ctx) and bo.u32[0x2100] == 0x77

def test_seqnos_wrap_on_every_ring():
    """Issue 16's "seqno wrap on each ring": every ring's fences and every context's seqnos
    start just below 2^32. On gfx, gfx_high and sdma0 a job waits on a flag and 30 more queue
    behind it, their seqnos crossing 2^32; released, they all finish before the driver looks,
    so one read of each ring's fence memory (past 0) must signal the fences from before the
    wrap too. Each wait returns, every job's data lands, nothing resets. (Submitted one at a
    time, each job would finish before the next CS on the model, and a compare that is not
    wrap-safe would still see fence == memory each time: test_kmd_fence's reasoning.)"""
    start = 2**32 - 12
    kmd = kmd_model.bind(RefModel(), initial_seq=start, cs_check=False, cap_sys_nice=True)
    c = Client()
    rings = {"gfx": (c.ctx, kmd.sched), "gfx_high": (new_ctx(c, CtxPriority.HIGH), kmd.hqd_sched),
             "sdma0": (new_ctx(c), kmd.sdma_sched)}
    bo = c.bo(0x20000)
    flag, jobs = bo.addr + 0x1F000, 30

    def ib(ring, words, off):
        return sdma_ib(bo, words(sdma), off) if ring == "sdma0" else c.ib(bo, words(pm4), off)

    holds = {}
    for j, (ring, (ctx, _)) in enumerate(rings.items()):
        wait = (lambda e: e.poll_regmem(flag, 0, 0xFFFFFFFF, "NE")) if ring == "sdma0" else \
            (lambda e: e.wait_reg_mem(flag, 1, 1, "EQ"))
        holds[ring] = c.submit(ib(ring, wait, 0x100 * j), ctx=ctx)
    seqs: dict[str, list[int]] = {r: [] for r in rings}
    for k in range(jobs):
        for j, (ring, (ctx, _)) in enumerate(rings.items()):
            addr, off = bo.addr + 0x10000 + 4 * (j * jobs + k), 0x400 + 0x40 * (j * jobs + k)
            write = (lambda e: e.write_linear(addr, [k + 1])) if ring == "sdma0" else \
                (lambda e: e.write_data(addr, [k + 1]))
            seqs[ring].append(c.submit(ib(ring, write, off), ctx=ctx))
    for ring, (_, sched) in rings.items():
        hw = [f.seq for f in sched.fence_drv.pending]
        assert hw[0] > hw[-1], ring  # the hardware fences wrap inside the held burst
    bo.u32[(flag - bo.addr) // 4] = 1
    for ring, (ctx, sched) in rings.items():
        assert c.wait(seqs[ring][-1], 1_000_000, ctx=ctx), ring
        assert all(c.wait(s, 0, ctx=ctx) for s in [holds[ring]] + seqs[ring]), ring
        # each context's seqnos crossed 2^32 (a context's first is `start`)
        assert 0 in seqs[ring] and seqs[ring][-1] == (holds[ring] + jobs) % 2**32
        fd = sched.fence_drv
        assert fd.sync_seq < start and not fd.pending and fd.signalled == fd.emitted, ring
    assert bo.u32[0x4000:0x4000 + 3 * jobs].tolist() == list(range(1, jobs + 1)) * 3
    assert kmd.stats["resets"] == kmd.stats["queue_resets"] == kmd.stats["job_timeouts"] == 0


def test_sdma_ib_packets_end_on_an_8_dword_boundary_and_ibs_pad_with_sdma_nops():
    """sdma_v4_0's rules: every INDIRECT_BUFFER in the SDMA ring ends on an 8-dword boundary
    whatever the ring's wptr before it, and an IB is padded to 8 dwords with the copy engine's
    NOPs (not the CP's)."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x8000)
    r = kmd.sdma_ring
    for k in range(12):  # fences of 0..n extra dwords move the wptr to every residue
        words = sdma.write_linear(bo.addr + 0x4000, list(range(k)) or [0])
        assert c.wait(c.submit(sdma_ib(bo, words, 0x200 * k)))
    ring = r.ring32[: r.committed].tolist()
    ibs = [p for p in sdma.decode_stream(ring) if p.ok and p.name == "INDIRECT_BUFFER"]
    assert len(ibs) == 12
    assert [(p.offset + p.length) % 8 for p in ibs] == [0] * 12
    for n in range(1, 17):
        padded = r.pad_ib([sdma.header(0)] * n)
        assert len(padded) % 8 == 0 and len(padded) - n < 8
        assert all(p.ok and p.name == "NOP" for p in sdma.decode_stream(padded))


def test_extra_rings_read_their_own_write_pointer():
    """Each ring's get_wptr reads its own engine's WPTR register, in the driver's dwords."""
    kmd = kmd_model.bind(RefModel(), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    assert c.wait(c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1))))
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x200, [1]), 0x400), ctx=hi), ctx=hi)
    for r in (kmd.sdma_ring, kmd.hqd_ring):
        assert r.get_wptr() == r.committed > 16
    assert kmd.mmio.read(regs.SDMA_RB_WPTR) == 4 * kmd.sdma_ring.committed  # the engine counts bytes


def test_the_sdma_ring_listing_is_its_packets_in_order(caplog):
    """The debug log's listing of an SDMA commit disassembles the ring's dwords in order."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    r = kmd.sdma_ring
    start = r.committed
    with caplog.at_level(logging.DEBUG, logger="gpucosim.ring"):
        assert c.wait(c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1))))
    text = "\n".join(m.getMessage() for m in caplog.records if m.getMessage().startswith("sdma ring writes"))
    want = sdma.disassemble(r.ring32[start: r.committed].tolist(), r.gpu_addr + 4 * start)
    assert "\n".join("  " + line for line in want) in text, text  # every line, in the ring's order
    assert "INDIRECT_BUFFER" in text and "FENCE" in text and "TRAP" in text



def test_an_sdma_fence_is_signalled_by_its_trap_interrupt():
    """An SDMA job's fence is signalled by the engine's TRAP interrupt the moment the
    handler runs, not only later by a poll reading fence memory."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    drv = kmd.sdma_fence_drv
    before = drv.signalled, kmd.ih.by_source.get("SDMA0_TRAP", 0)
    seq = c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 5)))
    assert kmd.dev.wait_irq(200_000)  # the line goes up
    kmd.irq_handler()  # no service(), no fallback poll
    assert drv.signalled == before[0] + 1 and not drv.pending and not kmd.sdma_sched.pending
    assert sum(kmd.ih.by_source.values()) > 0
    assert regs.SDMA_CNTL.TRAP_ENABLE.get(kmd.mmio.read(regs.SDMA_CNTL)) == 1
    assert c.wait(seq, 0) and bo.u32[0x40] == 5


@pytest.mark.parametrize("queues", [True, False], ids=["queues", "no_queues"])
def test_a_gfx_fence_is_signalled_by_its_eop_interrupt(queues):
    """A gfx job's fence, on the CP's second queue (a HIGH-priority context) as on the
    first, is signalled by its EOP interrupt the moment the handler runs, not only later by
    a poll; on a device with an IH ring but no second queue, EOP entries are handled too."""
    kmd = kmd_model.bind(RefModel(queues=queues, sdma=queues), cs_check=False, cap_sys_nice=True)
    c = Client()
    bo = c.bo()
    ctx = new_ctx(c, CtxPriority.HIGH)
    sched = kmd.hqd_sched if queues else kmd.sched
    assert (kmd.hqd_sched is not None) == queues and kmd.ih is not None
    drv, eops = sched.fence_drv, kmd.ih.by_source.get("EOP", 0)
    before = drv.signalled
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [5])), ctx=ctx)
    assert kmd.dev.wait_irq(200_000)  # the line goes up
    kmd.irq_handler()  # no service(), no fallback poll
    assert kmd.ih.by_source.get("EOP", 0) == eops + 1
    assert drv.signalled == before + 1 and not drv.pending and not sched.pending
    assert c.wait(seq, 0, ctx=ctx) and bo.u32[0x40] == 5


@pytest.mark.parametrize("queues", [True, False], ids=["queues", "no_queues"])
def test_a_device_without_ih_ring_polls_every_engine(queues):
    """Without an IH ring the interrupt says only EOP/CP_ERROR: the handler and the fallback
    poll read every engine's fences and status themselves, with or without the extra rings;
    an SDMA error and an error on the CP's second queue are found by polling and reset
    that queue alone."""
    kmd = kmd_model.bind(RefModel(ih=False, queues=queues, sdma=queues), job_timeout=50_000, cs_check=False,
                         cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo(0x8000)
    c.run(bo, pm4.write_data(bo.addr + 0x100, [7]))
    assert bo.u32[0x40] == 7
    held = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ"), 0x400))
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(held, 30_000)  # the fallback poll runs meanwhile
    assert ei.value.errno == errno.ETIME
    assert kmd.stats["fallback_polls"] > 0
    bo.u32[0x7000 // 4] = 1
    assert c.wait(held)
    if not queues:
        assert kmd.sdma_sched is None and kmd.hqd_sched is None
        return
    assert c.wait(c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x200, 9), 0x800))) and bo.u32[0x80] == 9
    bad = c.submit(sdma_ib(bo, [0x23DECD3D], 0xC00))
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE"
    hi = new_ctx(c, CtxPriority.HIGH)
    badh = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], 0x1000), ctx=hi)
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(badh, 1_000_000, ctx=hi)
    assert ei.value.errno == errno.ECANCELED and "gfx_high" in ei.value.message
    assert [x for x in kmd.recovery_log] == [("sdma0", "error"), ("sdma0", "queue_reset"),
                                             ("gfx_high", "error"), ("gfx_high", "queue_reset")]
    assert kmd.stats["resets"] == 0


def test_a_lost_interrupt_on_the_cps_second_queue_is_caught_by_the_fallback_poll():
    """The high-priority queue's fences and errors are found by the fallback poll when their
    interrupts never come, while queue 0 is idle (nothing else would look)."""

    class Deaf(RefModel):
        """Raises no interrupt line at all."""

        def irq_level(self):
            return False

        def wait_irq(self, timeout_cycles):
            self.delay(timeout_cycles)
            return False

    kmd = kmd_model.bind(Deaf(), job_timeout=10**9, cs_check=False, cap_sys_nice=True)
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [3])), ctx=hi), 1_000_000, ctx=hi)
    assert bo.u32[0x40] == 3 and not kmd.sched.pending
    bad = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], 0x400), ctx=hi)
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000, ctx=hi)
    assert ei.value.errno == errno.ECANCELED and "gfx_high" in ei.value.message
    assert kmd.recovery_log == [("gfx_high", "error"), ("gfx_high", "queue_reset")]


def test_doorbells_of_every_ring_are_announced_with_their_ring_and_wptr():
    rec = Recorder()
    kmd = kmd_model.bind(RefModel(), observers=[rec], cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    assert c.wait(c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1))))
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x200, [1]), 0x400), ctx=hi), ctx=hi)
    for r in (kmd.sdma_ring, kmd.hqd_ring):
        d = [f for f in rec.of("doorbell") if f["ring"] is r]
        assert d and d[-1]["wptr"] == r.committed and d[-1]["start"] < d[-1]["wptr"]
    assert all(f["ring"] is not None for f in rec.of("doorbell"))
