"""The extra rings' errors (kmd_model/sched/sdma_ring.py, ring.HqdRing, their paths through
kmd.py): how each is counted, attributed, diagnosed and announced (timeouts, VM faults, a
lost doorbell), and recovered by its queue reset, which waits as long as the other engine's
work moves and no longer. Reference-model backend (the igt-shaped scenarios:
tests/kmd_sched/queues/test_kmd_queues_*.py)."""

from __future__ import annotations

import errno
import logging
import re

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CtxPriority, Request
from spec import packets as pm4_packets
from spec import pm4, sdma
from spec.sdma import packets as sdma_packets
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import DMA, HANG, new_ctx, query, sdma_ib
from tests.kmd_sched.sched_helpers import Recorder


def test_errors_are_counted_per_engine():
    """An SDMA error counts in sdma_errors, an error of the CP's second queue in cp_errors;
    neither is a VM fault unless it is one."""
    kmd = kmd_model.bind(RefModel(), cs_check=False, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
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
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
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
    reset on the RTL behind a long fill on queue 1: tests/kmd_sched/queues/test_kmd_queues_resets.py,
    check_a_cp_queue_reset_behind_the_other_queues_long_packet_stays_a_queue_reset). A ring
    test that does not pass while nothing moves falls to the full reset after hw_timeout; one
    that queue 1's moves keep extending is given up at hw_timeout + 16 times the longest
    CP_SYNC copy, its message saying so."""
    t = 2_000
    dev = SlowQueue0Start(None if case == "queue_1_moving_for_ever" else 3 * t, case != "queue_1_not_moving")
    kmd = kmd_model.bind(dev, job_timeout=10_000, hw_timeout=t, cs_check=False, cap_sys_nice=True)
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
