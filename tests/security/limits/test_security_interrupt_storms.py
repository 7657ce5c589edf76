"""A hostile program against the KMD in time (split by concept from
test_security_time_and_state.py): interrupts. A client's interrupt storm that overflows the
IH ring loses no other client's fence (an overflow polls every ring's fences), a storm that
never ends does not keep the handler from the job timer (at most twice the IH ring's entries
a call), an SDMA poll storm loses no high-priority fence, a fence whose EOP entry was dropped
signals by the fallback poll, and the job timer reads the fence in memory before it blames.
"""

from __future__ import annotations

import errno
import threading

import pytest

import kmd_model
from kmd_model.uapi import CtxArgs, CtxOp, KmdError, Request
from spec import ih as ih_spec
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import sdma_ib

from ..security_helpers import EVIL


class StormingIhModel(RefModel):
    """An interrupt storm that outlasts the handler (on the RTL: a CHAIN loop around an
    interrupting RELEASE_MEM, with the checker off): while `storming`, every IH_RPTR the
    handler writes is answered by another EOP entry."""

    storming = False
    entries = 0

    def mmio_write32(self, offset: int, value: int) -> None:
        from kmd_model import regs
        super().mmio_write32(offset, value)
        if self.storming and offset == regs.IH_RPTR.ADDR:
            self.entries += 1
            self._ih_append(ih_spec.Source.EOP, 0, 0, 0, 0, event=regs.INT_STATUS.EOP.mask)


class SdmaStormIhModel(RefModel):
    """An SDMA interrupt storm that outlasts the handler (on the RTL: an SDMA job of
    POLL_REGMEMs giving up every few cycles, which no checker refuses) after an overflow:
    while `storming`, every IH_RPTR the handler writes is answered by another SDMA
    POLL_TIMEOUT entry, and the CP's EOP entries are dropped, as a full ring drops them."""

    storming = False

    def _ih_append(self, source, d0, d1, d2, d3, client=ih_spec.Client.GRBM_CP, vmid=0, event=0):
        from kmd_model import regs
        if self.storming and source == ih_spec.Source.EOP:
            self._store[self._off["INT_STATUS"]] |= regs.INT_STATUS.IH_OVERFLOW.mask
            return
        super()._ih_append(source, d0, d1, d2, d3, client=client, vmid=vmid, event=event)

    def mmio_write32(self, offset: int, value: int) -> None:
        from kmd_model import regs
        super().mmio_write32(offset, value)
        if self.storming and offset == regs.IH_RPTR.ADDR:
            self._ih_append(ih_spec.Source.SDMA_POLL_TIMEOUT, 0x1000, 0, 0, 0, client=ih_spec.Client.SDMA0)


@pytest.mark.parametrize("cs_check", [True, False])
def test_a_clients_interrupt_storm_overflows_the_ih_ring_without_losing_another_clients_fence(cs_check):
    """600 interrupting RELEASE_MEMs in one IB fill an 8-entry IH ring many times over; with the
    checker off the IB then faults, and its error entry is among the dropped ones: the driver
    finds the error by STATUS, blames the storm's context, and the other client's jobs complete."""
    kmd = kmd_model.bind(RefModel(), job_timeout=50_000, fallback_poll=1_000, cs_check=cs_check, ih_log2_entries=3)
    h, v = Client(), Client()
    hbo, vbo = h.bo(0x10000), v.bo(0x1000)
    words = [w for i in range(600) for w in pm4.release_mem(hbo.addr + 0x8000 + 4 * (i % 64), i, int_sel=2)]
    if not cs_check:
        words += pm4.write_data(0x3000_0000, [EVIL])  # unmapped: a VM fault after the storm
    seq = h.submit(h.ib(hbo, words))
    vseqs = [v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100 + 4 * i, [5 + i]), 0x200 * i)) for i in range(3)]
    if cs_check:
        assert h.wait(seq)
    else:
        with pytest.raises(KmdError) as ei:
            h.wait(seq)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT"
        assert ei.value.info.ctx_id == h.ctx and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
        assert set(kmd.ih.by_source) == {"EOP"}  # the fault's entry was dropped: found by STATUS
    assert all(v.wait(s) for s in vseqs) and vbo.u32[0x40:0x43].tolist() == [5, 6, 7]
    s = kmd.kmd_stats()
    assert s["ih_entries"] < 600 and s["spurious_interrupts"] == 0  # entries were dropped, and that was seen
    assert v.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, v.ctx)).error is None


def test_an_interrupt_storm_that_never_ends_does_not_keep_the_handler_from_the_job_timer():
    """The handler took entries until the IH ring was empty, re-reading the wptr: with entries
    coming as fast as it took them it never returned (198,670 in 5 s), the job timer never
    ran, and a WAIT_CS ran past its own timeout. Now it takes two rings' worth a call."""
    from kmd_model import regs
    dev = StormingIhModel()
    kmd = kmd_model.bind(dev, job_timeout=5_000, fallback_poll=1_000, ih_log2_entries=3)
    c = Client()
    bo = c.bo(0x1000)
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))  # held: only its timeout ends it
    dev.storming = True
    dev._ih_append(ih_spec.Source.EOP, 0, 0, 0, 0, event=regs.INT_STATUS.EOP.mask)
    out: list = []

    def wait() -> None:
        try:
            out.append(c.wait(seq, 200_000))
        except KmdError as e:
            out.append(e)
    t = threading.Thread(target=wait, daemon=True)
    t.start()
    t.join(timeout=10)
    hung = t.is_alive()
    dev.storming = False  # (so a handler that never returns does, and the thread ends)
    t.join(timeout=10)
    assert not hung, f"the handler took {dev.entries} entries and did not return"
    assert isinstance(out[0], KmdError) and out[0].info.code == "TIMEOUT" and kmd.stats["job_timeouts"] == 1
    other = Client()  # and the driver runs on
    obo = other.bo(0x1000)
    assert other.run(obo, pm4.write_data(obo.addr + 0x100, [5])) and obo.u32[0x40] == 5


def test_an_sdma_poll_storm_that_overflows_the_ih_ring_loses_no_high_priority_fence():
    """An SDMA job of POLL_REGMEMs each giving up after one cycle raises a POLL_TIMEOUT entry a
    cycle: with a 4-entry IH ring, an innocent client's gfx_high job's EOP entry was dropped.
    The handler, finding the ring empty with IH_OVERFLOW set, polled the gfx and SDMA fences,
    not the CP's second queue's, and the storm kept the line high so the fallback poll never
    ran: the job had finished, and its WAIT_CS ran out (ETIME after 10,000 cycles). (The
    fallback poll is kept out of it here: the overflow alone must be enough.)"""
    kmd = kmd_model.bind(RefModel(), fallback_poll=1 << 40, ih_log2_entries=2, cap_sys_nice=True)
    h, v = Client(), Client()
    hbo, vbo = h.bo(0x100000), v.bo(0x1000)
    high = v.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=512)).ctx_id
    words = [w for _ in range(20_000) for w in sdma.poll_regmem(hbo.addr + 0xFF000, 1, 0xFFFF_FFFF, "EQ",
                                                                interval=0, retry_count=1)]
    h.submit(sdma_ib(hbo, words))
    t0 = kmd.dev.now()
    seq = v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5])), ctx=high)
    assert v.wait(seq, 10_000, ctx=high) and vbo.u32[0x40] == 5
    assert kmd.dev.now() - t0 < 2_000 and kmd.stats["job_timeouts"] == kmd.stats["resets"] == 0


@pytest.mark.parametrize("priority", [0, 512])
def test_a_fence_whose_eop_entry_was_dropped_signals_by_the_fallback_poll_through_an_interrupt_storm(priority):
    """The fallback poll (amdgpu's fence fallback timer) ran only when no interrupt came for
    `fallback_poll` cycles, and the handler polled fences only when it found the IH ring
    empty: with SDMA entries coming as fast as the handler took them, a gfx or gfx_high job
    whose EOP entry an overflow had dropped was never seen to finish. Its WAIT_CS ran out
    (ETIME), and then the job timer took the finished job for stuck and reset its ring.
    Now the fallback poll runs every `fallback_poll` cycles whatever the interrupts do."""
    dev = SdmaStormIhModel()
    kmd = kmd_model.bind(dev, job_timeout=50_000, fallback_poll=1_000, cap_sys_nice=True)
    v = Client()
    vbo = v.bo(0x1000)
    ctx = v.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=priority)).ctx_id
    dev.storming = True
    dev._ih_append(ih_spec.Source.SDMA_POLL_TIMEOUT, 0x1000, 0, 0, 0, client=ih_spec.Client.SDMA0)
    t0 = dev.now()
    try:
        seq = v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5])), ctx=ctx)
        assert v.wait(seq, 20_000, ctx=ctx) and vbo.u32[0x40] == 5
        # (each handler call takes its two rings' worth, 512 entries, 8 cycles each to ack)
        assert dev.now() - t0 < 3 * 512 * 8
    finally:
        dev.storming = False
    assert kmd.stats["job_timeouts"] == kmd.stats["resets"] == kmd.stats["queue_resets"] == 0
    assert kmd.ih.by_source.get("EOP", 0) == 1  # (the ring test's: the job's was dropped)


@pytest.mark.parametrize("priority", [0, 512])
def test_the_job_timer_does_not_reset_a_job_whose_fence_is_in_memory(priority):
    """A job whose EOP entry was dropped, its fence not polled yet (the storm above, a
    `fallback_poll` longer than `job_timeout`): the job timer found its ring still and took the
    finished job for stuck, a full reset of the device for a gfx job (every ring's jobs
    resubmitted), a queue reset for a gfx_high one. It reads the ring's fence memory first
    now: a job that has finished is retired, not reset."""
    dev = SdmaStormIhModel()
    kmd = kmd_model.bind(dev, job_timeout=5_000, fallback_poll=1 << 40, cap_sys_nice=True)
    v = Client()
    vbo = v.bo(0x1000)
    ctx = v.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=priority)).ctx_id
    dev.storming = True
    dev._ih_append(ih_spec.Source.SDMA_POLL_TIMEOUT, 0x1000, 0, 0, 0, client=ih_spec.Client.SDMA0)
    try:
        seq = v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5])), ctx=ctx)
        assert v.wait(seq, 100_000, ctx=ctx) and vbo.u32[0x40] == 5
    finally:
        dev.storming = False
    assert kmd.stats["job_timeouts"] == kmd.stats["resets"] == kmd.stats["queue_resets"] == 0
