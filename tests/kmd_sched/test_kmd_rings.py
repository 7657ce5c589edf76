"""The extra rings' driver side (kmd_model/sched/sdma_ring.py, ring.HqdRing, their paths through
kmd.py): how each ring is programmed and wraps, how its fences signal (from its own
interrupt, or by polling where the interrupt cannot say), how its errors are counted,
attributed and recovered, and what observers and logs are told. Reference-model backend:
the RTL has neither engine yet (tests/kmd_sched/test_kmd_queues.py holds the igt-shaped scenarios)."""

from __future__ import annotations

import errno
import logging
import re
import signal
import threading
import time

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkDep, CtxPriority, HwIp, Request
from spec import packets as pm4_packets
from spec import pm4, sdma
from spec.sdma import packets as sdma_packets
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from .test_kmd_queues import HANG, NoQueue0Reset, new_ctx, query, sdma_ib

DMA = HwIp.DMA


class Recorder:
    """An observer: every (event, fields) the driver announced."""

    def __init__(self):
        self.events: list[tuple[str, dict]] = []

    def __call__(self, event, fields):
        self.events.append((event, dict(fields)))

    def of(self, event: str) -> list[dict]:
        return [f for e, f in self.events if e == event]


# ------------------------------------------------------------------------------ programming, wrap

@pytest.mark.parametrize("ring", ["sdma0", "gfx_high"])
def test_each_extra_ring_wraps_many_times(ring):
    """A small ring wrapped many times over: the engine reads the size the KMD programmed,
    writes its rptr back where the KMD reads it (in the ring's own units), and every job's
    data lands. A size or rptr the two sides disagree on stalls or corrupts the ring."""
    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, sdma_ring_log2_dw=6, cs_check=False)
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


def test_seqnos_wrap_on_every_ring():
    """Issue 16's "seqno wrap on each ring": every ring's fences and every context's seqnos
    start just below 2^32. On gfx, gfx_high and sdma0 a job waits on a flag and 30 more queue
    behind it, their seqnos crossing 2^32; released, they all finish before the driver looks,
    so one read of each ring's fence memory (past 0) must signal the fences from before the
    wrap too. Each wait returns, every job's data lands, nothing resets. (Submitted one at a
    time, each job would finish before the next CS on the model, and a compare that is not
    wrap-safe would still see fence == memory each time: test_kmd_fence's reasoning.)"""
    start = 2**32 - 12
    kmd = kmd_model.bind(RefModel(), initial_seq=start, cs_check=False)
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
    kmd = kmd_model.bind(RefModel())
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


# ------------------------------------------------------------------------------ fences

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
    kmd = kmd_model.bind(RefModel(queues=queues, sdma=queues), cs_check=False)
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
    kmd = kmd_model.bind(RefModel(ih=False, queues=queues, sdma=queues), job_timeout=50_000, cs_check=False)
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

    kmd = kmd_model.bind(Deaf(), job_timeout=10**9, cs_check=False)
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


# ------------------------------------------------------------------------------ errors, recovery

def test_errors_are_counted_per_engine():
    """An SDMA error counts in sdma_errors, an error of the CP's second queue in cp_errors;
    neither is a VM fault unless it is one."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    c = Client()
    bo = c.bo()
    bad = c.submit(sdma_ib(bo, [0x23DECD3D]))
    with pytest.raises(uapi.KmdError):
        c.wait(bad, 1_000_000)
    assert (kmd.stats["sdma_errors"], kmd.stats["cp_errors"], kmd.stats["vm_faults"]) == (1, 0, 0)
    hi = new_ctx(c, CtxPriority.HIGH)
    bad = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], 0x400), ctx=hi)
    with pytest.raises(uapi.KmdError):
        c.wait(bad, 1_000_000, ctx=hi)
    assert (kmd.stats["sdma_errors"], kmd.stats["cp_errors"], kmd.stats["vm_faults"]) == (1, 1, 0)
    assert kmd.stats["queue_resets"] == 2 and kmd.stats["resets"] == 0


def test_a_queue_reset_spares_the_guilty_contexts_work_on_other_rings():
    """After a queue reset only the guilty context's jobs of that ring fail: its gfx job,
    held in the CP meanwhile, completes."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x8000)
    gfx = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ")
                        + pm4.write_data(bo.addr + 0x100, [0x61]), 0x400))
    bad = c.submit(sdma_ib(bo, [0x23DECD3D]))
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and not c.wait(gfx, 0)
    bo.u32[0x7000 // 4] = 1
    assert c.wait(gfx) and bo.u32[0x40] == 0x61
    assert kmd.stats["queue_resets"] == 1 and kmd.stats["resets"] == 0


def test_an_sdma_timeout_is_counted_reported_and_announced():
    """One hung SDMA job: one job timeout; the error it fails with has the timeout's fields,
    the POLL_REGMEM it is stuck in found as the gfx ring's timer finds its WAIT_REG_MEM (its
    place in them: the UMD names the call that recorded it; they were 0, "nothing failed at
    a packet"); observers see gpu_error with that error before recovery, then the reset of
    that ring with what it resubmitted."""
    rec = Recorder()
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, observers=[rec])
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(sdma_ib(abo, HANG(abo.addr + 0x3000)))
    nice = b.submit(sdma_ib(bbo, sdma.fence(bbo.addr + 0x100, 4)))
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(bad, 1_000_000)
    info = ei.value.info
    assert (info.code, info.level, info.opcode_name, info.offset, info.addr, info.seq, info.ctx_id) == \
        ("TIMEOUT", "IB1", "POLL_REGMEM", 0, abo.addr, bad, a.ctx)
    assert info.opcode == sdma_packets.POLL_REGMEM.op != pm4_packets.WAIT_REG_MEM.opcode  # (the SDMA's opcode)
    assert ("on sdma0: no progress for " in info.message and f", stuck in POLL_REGMEM at IB+0x0 ({abo.addr:#x}): "
            f"*{abo.addr + 0x3000:#x} & 0xffffffff = 0x0, waits for != 0x0, context {a.ctx}" in info.message)
    assert b.wait(nice) and bbo.u32[0x40] == 4
    assert kmd.stats["job_timeouts"] == 1 and kmd.stats["queue_resets"] == 1
    errs = rec.of("gpu_error")
    assert len(errs) == 1 and errs[0]["info"] == info and errs[0]["state"] is None and errs[0]["job"].seq == bad
    assert errs[0]["ring"] == "sdma0"  # (which ring's job: an observer tells the SDMA's from the gfx ring's)
    assert rec.of("reset") == [{"resubmitted": 1, "ring": "sdma0"}]


def test_a_gfx_high_timeout_names_its_wait_by_the_clients_address():
    """The CP's second queue's timer diagnoses as ring 0's: the WAIT_REG_MEM its job is stuck
    in, found in the checked copies the CP runs, is named in the message and the error's
    fields by the client's address (the UMD looks its call up by it), not the copy's."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    hi = new_ctx(c, CtxPriority.HIGH)
    bo = c.bo()
    bad = c.submit(c.ib(bo, pm4.nop(2) + pm4.wait_reg_mem(bo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ"), 0x100), ctx=hi)
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000, ctx=hi)
    info = ei.value.info
    at = bo.addr + 0x100 + 0xC
    assert (info.code, info.level, info.opcode_name, info.offset, info.addr, info.seq) == \
        ("TIMEOUT", "IB1", "WAIT_REG_MEM", 0xC, at, bad)
    assert ("on gfx_high: no progress for " in info.message and f", stuck in WAIT_REG_MEM at IB+0xc ({at:#x}): "
            f"*{bo.addr + 0x3000:#x} & 0xffffffff = 0x0, waits for == 0x1, context {hi}" in info.message), info.message
    assert kmd.stats["job_timeouts"] == 1


def test_a_lost_doorbell_times_out_as_an_engine_that_is_not_polling():
    """An SDMA job whose doorbell the engine never saw: no progress, no poll; the job timer
    catches it, says the engine was not polling, and the queue reset runs it again."""

    class DropsOneDoorbell(RefModel):
        drop = False

        def _poke(self, offset, value, bytemask):
            if self.drop and offset == regs.SDMA_DOORBELL.addr():
                self.drop = False
                return
            super()._poke(offset, value, bytemask)

    dev = DropsOneDoorbell()
    kmd = kmd_model.bind(dev, job_timeout=20_000)
    c = Client()
    bo = c.bo()
    dev.drop = True
    seq = c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 6)))
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(seq, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert f"the SDMA engine busy at RING (SDMA_STATUS {kmd.mmio.read(regs.SDMA_STATUS):#x})" in ei.value.message and ei.value.info.level == "RING"
    info = ei.value.info  # not polling: no packet named, no place in an IB
    assert (info.opcode, info.opcode_name, info.offset, info.addr) == (0, None, 0, 0), info
    assert kmd.stats["job_timeouts"] == 1 and kmd.recovery_log == [("sdma0", "timeout"), ("sdma0", "queue_reset")]


def test_a_long_sdma_job_that_moves_is_not_timed_out():
    """The job timer restarts while the SDMA engine makes progress (its rptr, fetches or
    bytes move): a job that runs longer than job_timeout, moving on every so often (polls
    released one after another), runs to its end; only a stretch without progress counts."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    flags = [bo.addr + 0x3000 + 4 * k for k in range(3)]
    words = sum((sdma.poll_regmem(a, 1, 0xFFFFFFFF, "EQ", interval=4) for a in flags), []) + sdma.fence(bo.addr + 0x100, 8)
    seq = c.submit(sdma_ib(bo, words))
    for k in range(3):  # 15,000 cycles per step: 45,000 in all, > 2 * job_timeout
        assert not kmd.wait_for(lambda: False, 15_000)
        bo.u32[0x3000 // 4 + k] = 1
    assert c.wait(seq) and bo.u32[0x40] == 8
    assert kmd.stats["job_timeouts"] == 0 and kmd.recovery_log == []


def test_doorbells_of_every_ring_are_announced_with_their_ring_and_wptr():
    rec = Recorder()
    kmd = kmd_model.bind(RefModel(), observers=[rec])
    c = Client()
    bo = c.bo()
    hi = new_ctx(c, CtxPriority.HIGH)
    assert c.wait(c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x100, 1))))
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x200, [1]), 0x400), ctx=hi), ctx=hi)
    for r in (kmd.sdma_ring, kmd.hqd_ring):
        d = [f for f in rec.of("doorbell") if f["ring"] is r]
        assert d and d[-1]["wptr"] == r.committed and d[-1]["start"] < d[-1]["wptr"]
    assert all(f["ring"] is not None for f in rec.of("doorbell"))


def test_a_failed_queue_reset_says_which_queue_did_not_come_back(caplog):
    class StuckSdma(RefModel):
        def _poke(self, offset, value, bytemask):
            if offset == regs.SDMA_CNTL.addr():
                value &= ~regs.SDMA_CNTL.QUEUE_RESET.mask
            super()._poke(offset, value, bytemask)

    kmd = kmd_model.bind(StuckSdma(), job_timeout=10_000)
    c = Client()
    bo = c.bo()
    bad = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000)))
    with caplog.at_level(logging.ERROR, logger="gpucosim"), pytest.raises(uapi.KmdError):
        c.wait(bad, 1_000_000)
    msgs = [r.getMessage() for r in caplog.records]
    t = kmd.params.hw_timeout
    assert any(f"sdma0 queue reset failed (sdma0 queue reset: not idle after {t} cycles (SDMA_STATUS 0x" in m
               for m in msgs), msgs
    assert kmd.stats["resets"] == 1



class SlowSdmaReset(RefModel):
    """The RTL's SDMA queue reset behind the CP's long packet (docs/hardware.md, SDMA "Queue
    reset"): it ends only once the queue's IH entry, waiting for the CP's IH writer, is
    written. Here it ends `done_after` cycles after SDMA_CNTL.QUEUE_RESET (None: never), while
    the CP's DMA byte counter moves if `cp_moves` (its packet in hand runs). CAPS advertises
    4 KiB DMA_DATAs, so the longest wait the KMD allows is short."""

    def __init__(self, done_after: int | None, cp_moves: bool):
        super().__init__()
        self.done_after, self.cp_moves, self.asked = done_after, cp_moves, None
        written = self._hw_read["PERF_DMA_BYTES_WRITTEN"]
        self._hw_read["PERF_DMA_BYTES_WRITTEN"] = lambda i: (self._t // 4 if self.cp_moves else written(i)) & 0xFFFF_FFFF

    def _caps(self, i: int) -> int:
        return regs.CAPS.DMA_MAX_LOG2.put(12) | (super()._caps(i) & ~regs.CAPS.DMA_MAX_LOG2.mask)

    def _poke(self, offset, value, bytemask):
        if offset == regs.SDMA_CNTL.addr() and value & regs.SDMA_CNTL.QUEUE_RESET.mask:
            value &= ~regs.SDMA_CNTL.QUEUE_RESET.mask
            self.asked = self._t
        super()._poke(offset, value, bytemask)

    def delay(self, cycles: int) -> None:
        super().delay(cycles)
        if self.asked is not None and self.done_after is not None and self._t >= self.asked + self.done_after:
            self.asked = None
            super()._poke(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.TRAP_ENABLE.mask | regs.SDMA_CNTL.QUEUE_RESET.mask,
                          0xF)

    def _soft_reset(self) -> None:
        self.asked = None
        super()._soft_reset()


@pytest.mark.parametrize("case", ["behind_a_moving_cp_packet", "cp_not_moving", "cp_moving_for_ever"])
def test_an_sdma_queue_reset_waits_while_the_cps_packet_moves_on_and_no_longer(case, caplog):
    """An SDMA queue reset that takes longer than hw_timeout: while the CP's packet in hand
    moves bytes (the reset waits for an IH entry behind it) the KMD waits, each move another
    hw_timeout, and the reset stays a queue reset: the other client's context sees no reset. A reset that does not end while nothing moves falls to
    the full reset after hw_timeout, as before; one that the CP's moves keep extending is given
    up at hw_timeout + 16 times the longest CP_SYNC copy (each beat read and written), its
    message saying so."""
    t = 2_000
    dev = SlowSdmaReset(None if case == "cp_moving_for_ever" else 3 * t, case != "cp_not_moving")
    kmd = kmd_model.bind(dev, job_timeout=10_000, hw_timeout=t)
    most = t + 16 * 2 * (4096 // kmd.info.bus_bytes)
    c, good = Client(), Client()
    bo, gbo = c.bo(), good.bo()
    assert good.run(gbo, pm4.write_data(gbo.addr, [7]))
    bad = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000)))
    with caplog.at_level(logging.ERROR, logger="gpucosim"), pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    msgs = " ".join(r.getMessage() for r in caplog.records)
    if case == "behind_a_moving_cp_packet":
        assert kmd.stats["queue_resets"] == 1 and kmd.stats["resets"] == 0, (kmd.stats, kmd.recovery_log)
        assert query(good).reset_status == uapi.ResetStatus.NO_RESET
        assert "queue reset failed" not in msgs
    else:
        assert kmd.stats["resets"] == 1, (kmd.stats, kmd.recovery_log)
        if case == "cp_not_moving":
            assert f"sdma0 queue reset: not idle after {t} cycles (SDMA_STATUS 0x" in msgs, msgs
        else:
            m = re.search(rf"sdma0 queue reset: not idle after (\d+) cycles \({t} since the last progress, "
                          rf"{most} at most\) \(SDMA_STATUS 0x", msgs)
            assert m and most <= int(m.group(1)) <= most + 8, msgs
    e2 = good.submit(sdma_ib(gbo, sdma.fence(gbo.addr + 0x2000, 0xE2), 0x400))  # the SDMA works again
    assert good.wait(e2) and gbo.u32[0x800] == 0xE2


class SlowQueue0Start(RefModel):
    """The RTL's CP after CP_QUEUE_RESET.Q0 while queue 1 runs a long packet (docs/hardware.md,
    "CP hardware queues"): queue 0's doorbell is taken only once the CP switches to it, here
    `start_after` cycles after the reset (None: never), while queue 1's fetched dwords move
    if `q1_moves`. CAPS advertises 4 KiB DMA_DATAs, so the longest wait the KMD allows is
    short."""

    def __init__(self, start_after: int | None, q1_moves: bool):
        super().__init__()
        self.start_after, self.q1_moves, self.reset_at, self.held = start_after, q1_moves, None, None
        fetched = self._hw_read["PERF_Q1_DWORDS_FETCHED"]
        self._hw_read["PERF_Q1_DWORDS_FETCHED"] = lambda i: (self._t // 4 if self.q1_moves else fetched(i)) & 0xFFFF_FFFF

    def _caps(self, i: int) -> int:
        return regs.CAPS.DMA_MAX_LOG2.put(12) | (super()._caps(i) & ~regs.CAPS.DMA_MAX_LOG2.mask)

    def _poke(self, offset, value, bytemask):
        if offset == regs.CP_QUEUE_RESET.ADDR and value & regs.CP_QUEUE_RESET.Q0.mask:
            self.reset_at = self._t
        elif offset == regs.RB_DOORBELL.ADDR and self.reset_at is not None:
            self.held = (value, bytemask)  # (not taken yet: the CP is the other queue's)
            return
        super()._poke(offset, value, bytemask)

    def delay(self, cycles: int) -> None:
        super().delay(cycles)
        if (self.reset_at is not None and self.start_after is not None
                and self._t >= self.reset_at + self.start_after):
            self.reset_at, held, self.held = None, self.held, None
            if held is not None:
                super()._poke(regs.RB_DOORBELL.ADDR, *held)

    def _soft_reset(self) -> None:
        self.reset_at = self.held = None
        super()._soft_reset()


@pytest.mark.parametrize("case", ["behind_a_moving_queue_1", "queue_1_not_moving", "queue_1_moving_for_ever"])
def test_the_ring_test_after_queue_0_s_reset_waits_while_queue_1_moves_on_and_no_longer(case, caplog):
    """Queue 0's ring test after its reset, taken only 3 x hw_timeout later: while queue 1
    moves on (it holds the CP: its packet in hand, its higher priority) the KMD waits, each
    move another hw_timeout, and the recovery stays queue 0's reset (it fell to the full
    reset on the RTL behind a long fill on queue 1: tests/kmd_sched/test_kmd_queues.py,
    check_a_cp_queue_reset_behind_the_other_queues_long_packet_stays_a_queue_reset). A ring
    test that does not pass while nothing moves falls to the full reset after hw_timeout; one
    that queue 1's moves keep extending is given up at hw_timeout + 16 times the longest
    CP_SYNC copy, its message saying so."""
    t = 2_000
    dev = SlowQueue0Start(None if case == "queue_1_moving_for_ever" else 3 * t, case != "queue_1_not_moving")
    kmd = kmd_model.bind(dev, job_timeout=10_000, hw_timeout=t, cs_check=False)
    most = t + 16 * 2 * (4096 // kmd.info.bus_bytes)
    c, good = Client(), Client()
    bo = c.bo()
    hi = new_ctx(good, CtxPriority.HIGH)
    gbo = good.bo()
    bad = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0]))
    with caplog.at_level(logging.ERROR, logger="gpucosim"), pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE"
    msgs = " ".join(r.getMessage() for r in caplog.records)
    if case == "behind_a_moving_queue_1":
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0), (kmd.stats, kmd.recovery_log)
        assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]
        assert "queue reset failed" not in msgs
    else:
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 1), (kmd.stats, kmd.recovery_log)
        assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset"), ("gfx", "full_reset")]
        if case == "queue_1_not_moving":
            assert f"gfx queue reset failed (ring test failed: scratch 0xcafedead after {t} cycles (rptr" in msgs, msgs
        else:
            m = re.search(rf"gfx queue reset failed \(ring test failed: scratch 0xcafedead after (\d+) cycles "
                          rf"\({t} since the last progress, {most} at most\) \(rptr", msgs)
            assert m and most <= int(m.group(1)) <= most + 16, msgs
        # the full reset's lasting guilt, the queue reset having found the context before it
        # failed: its CS refused from then on (it was taken, the guilt lost with the fall)
        with pytest.raises(uapi.KmdError) as ei:
            c.submit(c.ib(bo, pm4.nop(2), 0x300))
        assert ei.value.errno == errno.ECANCELED and "was reset: illegal opcode" in str(ei.value), ei.value
        c.ctx = new_ctx(c)
    assert c.wait(c.run(bo, pm4.write_data(bo.addr + 0x100, [3]), 0x200)) and bo.u32[0x40] == 3  # gfx works again
    seq = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x100, [4])), ctx=hi)  # and queue 1
    assert good.wait(seq, 100_000, hi) and gbo.u32[0x40] == 4


# ------------------------------------------------------------------------------ scheduler

@pytest.mark.parametrize("failed_first", [False, True], ids=["fails_later", "failed_before_its_cs"])
def test_a_job_whose_dependency_fails_is_cancelled_with_its_reason(failed_first):
    """A job queued behind a dependency on another ring that then fails is cancelled with
    ECANCELED naming the dependency and its error, without running; so is one whose
    dependency had failed before its CS (gone from the scheduler by then: it must not run
    as if the dependency had succeeded). Its context carries on."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    b = new_ctx(c)
    bad = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000)))

    def wait_bad():
        with pytest.raises(uapi.KmdError):
            c.wait(bad, 1_000_000)
    if failed_first:
        wait_bad()
    dep = c.submit(CsChunkDep(DMA, 0, c.ctx, bad), c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]), 0x400), ctx=b)
    if not failed_first:
        wait_bad()
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(dep, 1_000_000, ctx=b)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert e.message.startswith(f"WAIT_CS: Job(ctx {b} seq {dep:#x}) on gfx: its dependency "
                                f"Job(ctx {c.ctx} seq {bad:#x}) failed: job {bad:#x} timed out on sdma0")
    assert bo.u32[0x40] == 0
    good = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [2]), 0x800), ctx=b)
    assert c.wait(good, ctx=b) and bo.u32[0x40] == 2


@pytest.mark.parametrize("failed_first", [False, True], ids=["fails_later", "failed_before_their_cs"])
def test_a_chain_of_jobs_cancelled_by_their_dependencies_names_the_first_error_once(failed_first):
    """Each job cancelled for its dependency's failure had the dependency's whole message
    inside its own, so a chain of N such jobs made messages of N levels: 1,000 CSs in a
    chain (0.3 s of one client's time) left 36 MB of messages in one context's record of
    failed jobs, the last WAIT_CS answer 72,578 characters on one line, and the chain could
    go on (quadratic memory for the driver). A cancelled job now names its dependency and
    the first error of the chain, its message the same length at any depth."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    b = new_ctx(c)
    bad = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000)))
    if failed_first:
        with pytest.raises(uapi.KmdError):
            c.wait(bad, 1_000_000)
    dep_ctx, dep, seqs = c.ctx, bad, []
    for _ in range(300):
        chunk = c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]), 0x400)
        seqs.append(c.submit(CsChunkDep(DMA if dep_ctx == c.ctx else HwIp.GFX, 0, dep_ctx, dep), chunk, ctx=b))
        dep_ctx, dep = b, seqs[-1]
    messages = []
    for seq in seqs:
        with pytest.raises(uapi.KmdError) as ei:
            c.wait(seq, 1_000_000, ctx=b)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
        messages.append(ei.value.message)
    root = f"job {bad:#x} timed out on sdma0"
    assert messages[0].startswith(f"WAIT_CS: Job(ctx {b} seq {seqs[0]:#x}) on gfx: its dependency "
                                  f"Job(ctx {c.ctx} seq {bad:#x}) failed: {root}")
    assert messages[-1].startswith(f"WAIT_CS: Job(ctx {b} seq {seqs[-1]:#x}) on gfx: its dependency "
                                   f"Job(ctx {b} seq {seqs[-2]:#x}) failed: {root}"), messages[-1][:300]
    assert all(m.count("its dependency") == 1 for m in messages)
    assert max(map(len, messages)) < len(messages[0]) + 8  # (the seqnos' digits alone differ)
    assert bo.u32[0x40] == 0


HELD = dict(job_timeout=2_000_000, fallback_poll=1_000)  # a held job outlasts a FREE's first waits by far


class _Free(threading.Thread):
    """CTX FREE from a thread of its own: it waits while the context has jobs queued
    (drm_sched_entity_flush), and other ioctls and the CPU carry on meanwhile."""

    def __init__(self, kmd, c: Client, ctx: int):
        super().__init__(daemon=True)
        self.c, self.ctx, self.out, self.error = c, ctx, None, None
        since = kmd.dev.now()
        self.start()
        for _ in range(2000):  # until it waits inside the driver: simulated time moves under it
            if kmd.dev.now() > since or not self.is_alive():
                break
            time.sleep(0.005)
        assert self.is_alive() and kmd.dev.now() > since, "CTX FREE did not wait"

    def run(self):
        try:
            self.out = self.c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, self.ctx))
        except BaseException as e:  # (raised in the test's thread: done())
            self.error = e

    def done(self):
        self.join(30)
        assert not self.is_alive(), "CTX FREE did not return"
        if self.error is not None:
            raise self.error
        return self.out


def test_ctx_free_returns_once_the_contexts_jobs_left_its_queue():
    """CTX FREE waits until none of the context's jobs is queued any more: each is in the ring
    or has run (amdgpu_ctx_fini_entity's drm_sched_entity_flush). It returned at once, so a
    client that allocated a context, queued `sched_jobs` jobs on it and freed it, over and
    over, queued jobs without bound behind a job holding the ring: 200 here with 4 a context
    and one context alive, every freed context's entity a turn of its own ahead of every
    other client's job."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False, sched_jobs=4)
    c = Client()
    bo = c.bo(0x10000)
    c.submit(sdma_ib(bo, HANG(bo.addr + 0x8000)))  # holds the DMA ring until the job timer
    ib = sdma_ib(bo, sdma.write_linear(bo.addr + 0x9000, [1]), 0x100)
    most = 0
    for _ in range(50):
        x = new_ctx(c)
        for _ in range(4):
            c.submit(ib, ctx=x)
            most = max(most, len(kmd.sdma_sched.queue))
        c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, x))
        assert not kmd.sdma_sched.queue  # (its jobs are in the ring or done)
    # (the hold's timeout, once: a reset of the SDMA queue alone)
    assert most <= 4 and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0), kmd.recovery_log


def test_close_returns_once_the_files_jobs_left_its_queues():
    """close(2) of the fd waits, as CTX FREE does, until none of the file's jobs is queued
    (amdgpu_flush: amdgpu_ctx_mgr_entity_flush). It returned at once, so a client opening a
    file, queueing jobs on it and closing it, over and over, queued jobs without bound behind
    a job holding the ring (96,000 from 3,000 files, with one file open at a time)."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False)
    c = Client()
    bo = c.bo(0x1000)
    c.submit(sdma_ib(bo, HANG(bo.addr + 0x800)))  # holds the DMA ring until the job timer
    most = 0
    for _ in range(20):
        h = Client()
        h.next_va = 0x200000  # (every file's VM is its own)
        hb = h.bo(0x1000)
        ib = sdma_ib(hb, sdma.write_linear(hb.addr + 0x800, [1]))
        for _ in range(8):
            h.submit(ib)
        most = max(most, len(kmd.sdma_sched.queue))
        h.f.close()
        assert not kmd.sdma_sched.queue  # (its jobs are in the ring or done)
    # (the hold's timeout, once: a reset of the SDMA queue alone)
    assert most <= 8 and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0), kmd.recovery_log
    assert kmd.wait_for(lambda: not kmd.sdma_sched.pending, 1_000_000)
    assert kmd.kmd_stats()["files"] == 1 and kmd.kmd_stats()["live_bos"] == 1


def test_the_round_robin_is_per_context_not_per_file():
    """drm_sched's round robin serves entities (one per context and ring), not files, and
    so does this scheduler: a file with 40 contexts, each with 4 jobs queued behind a held
    job, gets 40 turns ahead of an innocent file's one job, and no more (its 160 jobs do not
    all run first). The limitation is amdgpu's (its FIFO policy orders entities by their
    oldest job, no file either): documented, not given a policy of our own."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False)
    h, v = Client(), Client()
    hb, vb = h.bo(0x10000), v.bo(0x1000)
    hold = h.submit(sdma_ib(hb, sdma.poll_regmem(hb.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    for k in range(40):
        x = new_ctx(h)
        for j in range(4):
            n = 4 * k + j
            h.submit(sdma_ib(hb, sdma.write_linear(hb.addr + 0x9000 + 4 * n, [1]), 0x100 + 0x20 * n), ctx=x)
    mine = v.submit(sdma_ib(vb, sdma.write_linear(vb.addr + 0x800, [5])))
    runs = []
    kmd.observers.append(lambda ev, f: ev == "run_job" and runs.append((f["job"].ctx.file.fd, f["job"].seq)))
    hb.u32[0x8000 // 4] = 1
    assert h.wait(hold) and v.wait(mine, 1_000_000)
    at = runs.index((v.f.fd, mine))
    assert at == 40 and all(fd == h.f.fd for fd, _ in runs[:at])  # one job of each hostile context first
    assert vb.u32[0x800 // 4] == 5


def test_an_entity_whose_job_finds_no_ring_room_keeps_its_turn():
    """drm_sched keeps the round robin's place of an entity whose next job cannot go yet
    ("If we can't queue yet, preserve the current entity in terms of fairness",
    drm_sched_rq_select_entity_rr): its job goes first once there is room. Here the entity
    was sent to the back of its run queue when it was chosen, before the ring was asked for
    room, so a job bigger than what one job frees (the UMD's copy flush: 4 IB chunks and a
    user fence, 64 dwords of the 1,024-dword SDMA ring) lost its turn each time a hostile
    client's smaller jobs (2 IBs, 32 dwords) kept the ring full: the hostile job behind it
    took each room made, and the innocent job never went into the ring while the hostile
    client fed it (120 of its jobs, none hanging). amdgpu's ring fits every job of
    hw_submission_limit; this SDMA ring does not, so room is asked for as drm_sched asks
    for credits."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    h, v = Client(), Client()
    hb, vb = h.bo(0x40000), v.bo(0x4000)
    ctxs = [h.ctx] + [new_ctx(h) for _ in range(3)]
    flags = {}  # (ctx, seq) -> the dword its polls wait on

    def hostile_job(n: int) -> None:
        flag = 0x20000 + 4 * n
        ib = sdma_ib(hb, sdma.poll_regmem(hb.addr + flag, 1, 0xFFFF_FFFF, "EQ", interval=1), 0x40 * n)
        c = ctxs[n % len(ctxs)]
        flags[c, h.submit(ib, ib, ctx=c)] = flag

    n = 0
    for n in range(60):  # (the ring full: the rest queued)
        hostile_job(n)
    assert kmd.sdma_sched.has_queued() and kmd.sdma_ring.space() < 64
    mine = v.submit(*[sdma_ib(vb, sdma.fence(vb.addr + 0x800 + 4 * j, 0x70 + j), 0x100 * j) for j in range(4)],
                    uapi.CsChunkFence(vb.handle, 0x900))
    def release_oldest() -> None:
        """The hostile client lets its oldest job end (a producer feeding the copy engine)."""
        head = kmd.sdma_sched.pending[0]
        hb.u32[flags[head.ctx.id, head.seq] // 4] = 1
        assert h.wait(head.seq, ctx=head.ctx.id)

    released = 0
    while not any(j.ctx.file is v.f for j in kmd.sdma_sched.pending):
        # each job that ends makes room for one of the hostile client's; two, for the innocent one
        assert released < 8, (f"the innocent job still queued after {released} hostile jobs ran "
                              f"({len(kmd.sdma_sched.pending)} in the ring)")
        release_oldest()
        released += 1
        n += 1
        hostile_job(n)  # and feeds the ring another
    ring = kmd.sdma_sched.pending
    while any(j.ctx.file is v.f for j in ring) and ring[0].ctx.file is not v.f:  # (hostile jobs ahead of it)
        release_oldest()
    assert v.wait(mine) and vb.u32[0x900 // 4] == mine
    assert vb.u32[0x800 // 4: 0x810 // 4].tolist() == [0x70, 0x71, 0x72, 0x73]
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0)


def test_ctx_free_waits_for_queued_jobs_with_other_ioctls_let_in():
    """CTX FREE with jobs queued behind another context's job that waits for the CPU: FREE
    waits, the context still the file's (a CS on it is taken, a second FREE from another
    thread waits too), while the CPU releases the job; then both return, one freeing it
    and the other finding it gone (EINVAL, as amdgpu's second free)."""
    kmd = kmd_model.bind(RefModel(), **HELD, cs_check=False, hw_submission_limit=1)
    c = Client()
    bo = c.bo(0x10000)
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    x = new_ctx(c)
    c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x9000, [7]), 0x100), ctx=x)
    frees = [_Free(kmd, c, x), _Free(kmd, c, x)]
    # a CS on it meanwhile: still the file's (the lock is handed over while FREE waits)
    c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x9004, [8]), 0x200), ctx=x)
    assert all(f.is_alive() for f in frees) and x in c.f.contexts
    bo.u32[0x8000 // 4] = 1
    assert c.wait(hold)
    outcomes = []
    for f in frees:
        try:
            outcomes.append(f.done().ctx_id)
        except uapi.KmdError as e:
            outcomes.append(e.errno)
    assert sorted(outcomes, key=str) == sorted([x, errno.EINVAL], key=str)
    assert x not in c.f.contexts and kmd.stats["resets"] == 0
    assert kmd.wait_for(lambda: not kmd.sdma_sched.pending and not kmd.sdma_sched.queue, 1_000_000)
    assert bo.u32[0x9000 // 4: 0x9008 // 4].tolist() == [7, 8]
    assert not any(kmd.sdma_sched.rqs) and set(kmd.sdma_sched.entities) == {c.f.contexts[c.ctx]}


def test_a_signal_during_ctx_free_s_wait_leaves_the_context_as_it_was(monkeypatch):
    """A signal held while CTX FREE waits for the context's queued jobs ends the wait with
    EINTR (the UMD makes the call again) and changes nothing: the context is still the
    file's, its job still queued; the FREE made again after the hold ends frees it."""
    kmd = kmd_model.bind(RefModel(), **HELD, cs_check=False, hw_submission_limit=1)
    c = Client()
    bo = c.bo(0x10000)
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    x = new_ctx(c)
    seq = c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x9000, [7]), 0x100), ctx=x)
    came = []
    prev = signal.signal(signal.SIGUSR1, lambda *_: came.append(kmd.lock.owned()))
    wait = kmd.wait_unlocked

    def interrupted(done, timeout):
        signal.raise_signal(signal.SIGUSR1)  # held: it ends the wait, its handler runs as FREE returns
        return wait(done, timeout)
    monkeypatch.setattr(kmd, "wait_unlocked", interrupted)
    try:
        with pytest.raises(uapi.KmdError) as ei:
            c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, x))
    finally:
        signal.signal(signal.SIGUSR1, prev)
        monkeypatch.undo()
    assert ei.value.errno == errno.EINTR and str(ei.value).startswith("EINTR: CTX: interrupted by a signal"), ei.value
    assert came == [False] and x in c.f.contexts and [j.seq for j in kmd.sdma_sched.queue] == [seq]
    bo.u32[0x8000 // 4] = 1
    assert c.wait(hold) and c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, x)).ctx_id == x
    assert x not in c.f.contexts and not kmd.sdma_sched.queue


def test_a_freed_contexts_entity_leaves_the_run_queue_once_its_jobs_ran():
    """CTX FREE with jobs queued: they run, then the context's entity is gone from the
    scheduler (run queues do not grow with every context freed while busy)."""
    kmd = kmd_model.bind(RefModel(), **HELD)
    c = Client()
    bo = c.bo(0x8000)
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ"), 0x400))
    ctxs = [new_ctx(c) for _ in range(3)]
    kmd.sched.hw_submission_limit = 1  # the others queue behind `hold`
    for k, x in enumerate(ctxs):
        c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100 + 4 * k, [k + 1]), 0x800 + 0x100 * k), ctx=x)
    frees = [_Free(kmd, c, x) for x in ctxs]  # (each waits while its job is queued)
    assert sum(len(rq) for rq in kmd.sched.rqs) == 3  # (`hold`'s, in the ring, not)
    bo.u32[0x7000 // 4] = 1
    assert c.wait(hold)
    for f in frees:
        f.done()
    assert kmd.wait_for(lambda: not kmd.sched.pending and not kmd.sched.queue, 1_000_000)
    assert bo.u32[0x40:0x43].tolist() == [1, 2, 3]
    assert not any(kmd.sched.rqs)  # (an entity is in its run queue only while it has jobs queued)
    assert set(kmd.sched.entities) == {c.f.contexts[c.ctx]}


@pytest.mark.parametrize("reset", ["full", "queue"])
def test_a_freed_contexts_jobs_keep_their_order_across_a_reset(reset):
    """CTX FREE with one job in the SDMA ring and one queued behind it (FREE waits, in a
    thread of its own), then another client's gfx error resets the device (full: queue 0's
    reset does not come back): the job in the ring is resubmitted ahead of the queued one,
    in the entity they share. It went to a new entity made for the freed
    context at the end of the run queue instead, so the later job ran first (its copy read
    what the earlier one had not written yet), and that entity stayed for good. With queue
    0's own reset (queue) the SDMA ring is not touched: its job is not run again."""
    dev = NoQueue0Reset() if reset == "full" else RefModel()
    kmd = kmd_model.bind(dev, **HELD, hw_submission_limit=1, cs_check=False, hw_timeout=2_000)
    x, g = Client(), Client()
    xbo, gbo = x.bo(), g.bo()
    first = sdma.poll_regmem(xbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.write_linear(
        xbo.addr + 0x3100, [1])
    x.submit(sdma_ib(xbo, first))
    x.submit(sdma_ib(xbo, sdma.copy_linear(xbo.addr + 0x3200, xbo.addr + 0x3100, 4), 0x400))  # queued
    assert len(kmd.sdma_sched.pending) == 1 and len(kmd.sdma_sched.queue) == 1
    free = _Free(kmd, x, x.ctx)
    runs = []
    kmd.observers.append(lambda ev, f: ev == "run_job" and runs.append(f["job"].seq))
    bad = g.submit(g.ib(gbo, [pm4.header(0x7B, 0), 0]))  # an illegal opcode
    with pytest.raises(uapi.KmdError):
        g.wait(bad)
    xbo.u32[0x3000 // 4] = 1
    free.done()
    assert kmd.wait_for(lambda: not kmd.sdma_sched.pending and not kmd.sdma_sched.queue, 1_000_000)
    assert runs == ([bad, 1, 2] if reset == "full" else [bad, 2]) and xbo.u32[0x3200 // 4] == 1
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == ((0, 1) if reset == "full" else (1, 0))
    assert not any(kmd.sdma_sched.rqs) and not kmd.sdma_sched.entities


def test_a_freed_contexts_entity_leaves_the_run_queue_when_a_reset_drops_its_jobs():
    """CTX FREE with a job in the ring and one queued, then the job in the ring fails: the
    reset cancels the queued one too, and the freed context's entity, empty now, leaves the
    run queue then (it stayed until some later job was scheduled on that ring)."""
    kmd = kmd_model.bind(RefModel(), **HELD, hw_submission_limit=1, cs_check=False)
    c = Client()
    bo = c.bo()
    x = new_ctx(c, CtxPriority.LOW)
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x3000, 1, 1, "EQ") + [pm4.header(0x7B, 0), 0]), ctx=x)
    c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x3100, [1]), 0x100), ctx=x)  # queued behind it
    good = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x3200, [2]), 0x200))  # NORMAL: first after the reset
    free = _Free(kmd, c, x)  # (it waits while the context's second job is queued)
    assert len(kmd.sched.pending) == 1 and len(kmd.sched.queue) == 2
    bo.u32[0x3000 // 4] = 1
    assert c.wait(good) and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    free.done()
    assert not kmd.sched.pending and not kmd.sched.queue and bo.u32[0x3100 // 4] == 0 and bo.u32[0x3200 // 4] == 2
    assert not any(kmd.sched.rqs)  # (an entity is in its run queue only while it has jobs queued)
    assert set(kmd.sched.entities) == {c.f.contexts[c.ctx]}


def test_ctx_query_names_the_context_and_waits_are_checked_against_what_it_submitted():
    kmd_model.bind(RefModel(), initial_seq=100)
    c = Client()
    bo = c.bo()
    other = new_ctx(c)
    out = c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, other))
    assert out.ctx_id == other != c.ctx
    s1 = c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    s2 = c.run(bo, pm4.write_data(bo.addr + 0x104, [2]), 0x100)
    assert (s1, s2) == (100, 101)
    expect(errno.EINVAL, f"WAIT_CS: context {c.ctx} never submitted seqno 0x63 (last is 0x65)", c.wait, 99)
    ctx = c.f.contexts[c.ctx]
    assert repr(ctx) == f"Context({c.ctx}, fd {c.f.fd})"
    ctx.guilty = object()
    assert repr(ctx) == f"Context({c.ctx}, fd {c.f.fd}, guilty)"


def test_a_context_keeps_the_errors_of_its_latest_failed_jobs_only():
    from kmd_model.core.ctx import Context
    kmd_model.bind(RefModel())
    c = Client()
    ctx = Context(99, c.f, 0, 2)
    ctx.FAILED_KEPT = 3
    for seq in range(5):
        ctx.job_failed(seq, uapi.KmdError(errno.ECANCELED, f"job {seq}"))
    assert list(ctx.failed) == [2, 3, 4] and ctx.failed[4].message == "job 4"


def test_an_sdma_vm_fault_is_described_by_what_the_engine_latches():
    """The SDMA latches a VM fault's code and address, not VM_FAULT_STATUS (that register
    stays the CP's, docs/hardware.md): the error names the address, the VMID its job ran
    with (the driver wrote it in the job's IB packet; INFO VM_FAULT reports the same one) and
    says access and cause are unknown, instead of decoding a status of 0 as "READ ... (VMID
    0, no valid entry at page-table level 0)" for what was an IB fetch from a page without
    EXECUTABLE."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    rw = c.bo(vm_flags=uapi.VmFlags.READABLE | uapi.VmFlags.WRITEABLE)  # not EXECUTABLE
    rw.u32[:8] = sdma.write_linear(bo.addr, [5]) + sdma.pad(3)
    seq = c.submit(uapi.CsChunkIb(8, rw.handle, ip_type=DMA))
    e = expect(errno.ECANCELED, f"WAIT_CS: VM fault at {rw.addr:#x} (VMID {c.f.vm.vmid}, its job's: the SDMA "
               f"engine latches no access or cause) at IB+0x0, sdma0, context {c.ctx}", c.wait, seq, 1_000_000)
    assert e.info.code == "VM_FAULT" and bo.u32[0] == 0
    # INFO VM_FAULT keeps it as it keeps the CP's: the address, and the VMID the job ran with;
    # what the engine does not latch stays empty
    f = c.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.VM_FAULT))
    assert f == uapi.VmFaultInfo(rw.addr, 0, c.f.vm.vmid, "", "", 0) and c.f.vm.vmid != 0
    assert kmd_model.bound().stats["vm_faults"] == 1 and kmd_model.bound().last_vm_fault == f


def test_files_that_keep_every_vmid_busy_do_not_keep_another_files_job_out():
    """A VMID is idle only when no job runs with it: 15 files (one for each VMID) that each
    keep a job in a ring at every moment, submitting the next before the last ends (none
    hanging, no reset, no ban), kept every VMID busy, and a 16th file's copy never ran (100
    rounds of their jobs in a probe). A VM whose job finds no idle VMID now waits first come,
    first served, and the least recently used VMID is drained for it: its owner starts no new
    job with it until the VMID has gone to the waiter."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    hs = [Client() for _ in kmd.vmids.ids]
    bos = [h.bo(0x10000) for h in hs]
    made = [0] * len(hs)
    jobs: list[list] = [[] for _ in hs]

    def submit(i: int) -> None:
        k = made[i]
        made[i] += 1
        flag = 0x8000 + 4 * k
        jobs[i].append((hs[i].submit(sdma_ib(bos[i], sdma.poll_regmem(bos[i].addr + flag, 1, 0xFFFF_FFFF, "EQ",
                                                                       interval=1), 0x40 * k)), flag))

    for i in range(len(hs)):
        submit(i)
    assert all(v.owner is not None and not kmd.vmids._idle(v) for v in kmd.vmids.ids)
    v = Client()
    vb = v.bo(0x1000)
    mine = v.submit(sdma_ib(vb, sdma.write_linear(vb.addr + 0x800, [0x77])))
    assert vb.u32[0x200] == 0 and kmd.sdma_sched.has_queued()  # (every VMID busy: it waits)
    vmids = kmd.vmids
    drained = vmids.ids[vmids.drain - 1].owner
    assert list(vmids.waiting) == [v.f.vm] and drained is not None
    # the drained VMID's owner starts no new job with it; a job a reset put back keeps it
    assert vmids.grab(drained) is None and vmids.grab(drained, resubmitted=True) == vmids.drain
    for _ in range(3):
        if vb.u32[0x200] == 0x77:
            break
        for i in range(len(hs)):  # each file: its next job in first, then its oldest let go
            submit(i)
            seq, flag = jobs[i].pop(0)
            bos[i].u32[flag // 4] = 1
            assert hs[i].wait(seq)
    assert v.wait(mine) and vb.u32[0x200] == 0x77, "the 16th file's job still waits for a VMID"
    for i, h in enumerate(hs):  # (every file's jobs still run: the drained one's waited its turn)
        for seq, flag in jobs[i]:
            bos[i].u32[flag // 4] = 1
            assert h.wait(seq)
    assert (kmd.stats["job_timeouts"], kmd.stats["resets"], kmd.stats["queue_resets"]) == (0, 0, 0)


def test_a_job_waiting_for_its_own_vms_later_job_is_not_reset_because_its_vmid_is_drained():
    """A gfx job of file A waits (WAIT_REG_MEM) for a flag A's own copy job sets next (the
    UMD's wait_mem on one queue, a write on another). Other files' small jobs queued behind
    it in the gfx ring take every other VMID, and a 16th file's job waits: the least recently
    used busy VMID, A's, is drained, so A's copy job waited for A's VMID to go idle, which it
    never did while A's gfx job waited for the copy. The job timer reset A's innocent job with
    TIMEOUT, its context guilty, a hang towards its file's ban (`file_ban_after_hangs` of them ban it)
    for nothing but other files' ordinary jobs. Now the timer lifts the drain (its job of the VM
    held back by it) and the drain moves to another VMID; the waiter still gets one."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    a = Client()
    abo = a.bo(0x4000)
    flag = abo.addr + 0x2000
    g = a.submit(a.ib(abo, pm4.wait_reg_mem(flag, 1, 0xFFFF_FFFF, "EQ") + pm4.write_data(abo.addr + 0x2004, [7])))
    others = [Client() for _ in range(len(kmd.vmids.ids) - 1)]
    jobs = []
    for c in others:
        b = c.bo(0x1000)
        jobs.append((c, b, c.submit(c.ib(b, pm4.write_data(b.addr + 0x800, [0x55])))))
    w = Client()
    wb = w.bo(0x1000)
    ws = w.submit(w.ib(wb, pm4.write_data(wb.addr + 0x800, [0x66])))
    vmids = kmd.vmids
    assert vmids.drain == a.f.vm.vmid and list(vmids.waiting) == [w.f.vm]  # (A's is the least recently used)
    s = a.submit(sdma_ib(abo, sdma.write_linear(flag, [1])))
    assert a.wait(g, 200_000) and a.wait(s) and abo.u32[0x2004 // 4] == 7
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0)
    assert query(a).reset_status == uapi.ResetStatus.NO_RESET and a.f.hangs == 0
    assert a.f.vm.vmid in vmids.spared  # (not drained again for this waiter)
    assert w.wait(ws) and wb.u32[0x200] == 0x66, "the waiting file's job never got a VMID"
    for c, b, seq in jobs:
        assert c.wait(seq) and b.u32[0x200] == 0x55


@pytest.mark.parametrize("held", [True, False])
def test_a_hung_job_whose_vmid_is_drained_is_spared_once_then_reset(held):
    """The other side of lifting the drain: a job that hangs for good (its poll never holds),
    its VMID drained and its file's next job held back, gets the drain lifted once (its next
    job goes, the timer starts again) and is then reset at the next look, its context guilty,
    one job timeout counted; the VMID is not drained again for that waiter, who runs. With no
    job of its VM held back by the drain, nothing is lifted: reset at job_timeout * 9/8."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    h = Client()
    hbo = h.bo(0x4000)
    t0 = kmd.dev.now()
    g = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x2000, 1, 0xFFFF_FFFF, "EQ")))
    others = [Client() for _ in range(len(kmd.vmids.ids) - 1)]
    for c in others:
        b = c.bo(0x1000)
        c.submit(c.ib(b, pm4.write_data(b.addr + 0x800, [0x55])))
    w = Client()
    wb = w.bo(0x1000)
    ws = w.submit(w.ib(wb, pm4.write_data(wb.addr + 0x800, [0x66])))
    mine = h.f.vm.vmid
    assert kmd.vmids.drain == mine
    if held:
        s = h.submit(sdma_ib(hbo, sdma.write_linear(hbo.addr + 0x2100, [1])))  # (sets nothing the poll reads)
    with pytest.raises(uapi.KmdError) as ei:
        h.wait(g, 500_000)
    assert ei.value.info.code == "TIMEOUT" and ei.value.info.ctx_id == h.ctx
    took = kmd.dev.now() - t0
    assert kmd.stats["job_timeouts"] == 1 and h.f.hangs == 1
    if held:
        assert h.wait(s) and hbo.u32[0x2100 // 4] == 1  # (the held job went when the drain was lifted)
        assert kmd.vmids.spared == {mine}
        assert 2 * 20_000 <= took < 2 * 20_000 + 20_000 // 8 + 5_000  # spared once: one job timeout later
    else:
        assert kmd.vmids.spared == set() and took < 20_000 + 20_000 // 8 + 5_000
    assert w.wait(ws) and wb.u32[0x200] == 0x66


@pytest.mark.parametrize("order", ["gfx_first", "sdma_first"])
def test_vms_waiting_for_a_vmid_are_served_first_come_first_served(order):
    """Two files find every VMID busy, one after the other: the drained VMID goes to the one
    that asked first, whichever ring its job is on and whichever job the driver tries first
    when the VMID goes idle; the other keeps its place and waits on. A waiter is forgotten
    only when it has a VMID, is closed, or has not asked for a job timeout: one that keeps
    asking keeps its place however long the device has been up."""
    kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=20_000)
    hs = [Client() for _ in kmd.vmids.ids]
    bos = [h.bo(0x10000) for h in hs]
    seqs = [h.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=1)))
            for h, bo in zip(hs, bos)]
    kmd.dev.delay(12_000)  # (past half a job timeout, short of a timeout of the jobs that hold the VMIDs)
    first, second = Client(), Client()
    fb, sb = first.bo(0x1000), second.bo(0x1000)
    # each asker's job waits for its flag, then writes: its VMID stays busy until the test lets it go
    gfx = lambda c, b: c.submit(c.ib(b, pm4.wait_reg_mem(b.addr + 0x400, 1, 1, "EQ")  # noqa: E731
                                     + pm4.write_data(b.addr + 0x800, [0x77]), 0x100))
    dma = lambda c, b: c.submit(sdma_ib(b, sdma.poll_regmem(b.addr + 0x400, 1, 1, "EQ", interval=1)  # noqa: E731
                                        + sdma.write_linear(b.addr + 0x800, [0x77])))
    # the first asker's job on the ring the driver tries second
    f_seq = (dma if order == "gfx_first" else gfx)(first, fb)
    kmd.dev.delay(2_000)
    s_seq = (gfx if order == "gfx_first" else dma)(second, sb)
    vmids = kmd.vmids
    assert list(vmids.waiting) == [first.f.vm, second.f.vm] and vmids.drain is not None
    drained = vmids.drain
    i = next(k for k, h in enumerate(hs) if h.f.vm.vmid == drained)
    given = []  # (VM, VMID) of each grab that gave one, in order
    grab = vmids.grab

    def recorded(vm, *a, **kw):
        n = grab(vm, *a, **kw)
        if n is not None:
            given.append((vm, n))
        return n

    vmids.grab = recorded
    bos[i].u32[0x8000 // 4] = 1  # the drained VMID's job ends: the VMID goes idle, to the first asker
    assert hs[i].wait(seqs[i])
    mine = [(vm, n) for vm, n in given if vm in (first.f.vm, second.f.vm)]
    assert mine and mine[0] == (first.f.vm, drained), "the second asker passed the first"
    # the VMID is the first asker's now, not drained any more: its next job would run with it
    # at once, while the second asker still waits (a VMID drained for it is another)
    assert list(vmids.waiting) == [second.f.vm] and vmids.drain != drained
    assert grab(first.f.vm) == drained
    for k, h in enumerate(hs):  # (the SDMA ring runs its jobs in order: the others end too)
        bos[k].u32[0x8000 // 4] = 1
        assert h.wait(seqs[k])
    fb.u32[0x100] = sb.u32[0x100] = 1
    assert first.wait(f_seq) and second.wait(s_seq) and fb.u32[0x200] == sb.u32[0x200] == 0x77
    assert (kmd.stats["job_timeouts"], kmd.stats["resets"], kmd.stats["queue_resets"]) == (0, 0, 0)
