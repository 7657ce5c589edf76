"""The interrupt handler's bookkeeping, seen from the hardware's side.

Fences signal by reading fence memory, so a job finishes even when the IH handler is
wrong (a lost interrupt only costs a fallback poll). What a wrong handler leaves behind
is in the registers: IH_RPTR behind IH_WPTR, INT_STATUS.IH_PENDING stuck high (the line
never drops), entries never dispatched, events never cleared. These tests check those
directly: every entry the hardware wrote was handled once, and the line is low after.
Bodies are `check_*(dev)`, as in test_kmd_ioctl.py.
"""

from __future__ import annotations

import logging

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CsChunkFence, CtxArgs, CtxOp, Request
from spec import ih, pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client

M32 = 0xFFFF_FFFF


def ih_settled(kmd, entries: int) -> None:
    """The hardware wrote `entries` IH entries since the bind, the driver handled every one
    of them (and told the hardware so), and nothing is pending or latched. (One more
    service() first: a line still high calls the handler again, as a level-triggered
    interrupt would; it must then find a reason, not count a spurious interrupt.)"""
    kmd.service()
    m = kmd.mmio
    wptr, rptr = m.read(regs.IH_WPTR), m.read(regs.IH_RPTR)
    assert wptr == ih.ENTRY_BYTES * entries & M32, (wptr, entries)
    assert rptr == wptr, f"IH_RPTR {rptr:#x} left behind IH_WPTR {wptr:#x}"
    assert kmd.ih.rptr == wptr and kmd.ih.get_wptr() == wptr  # the driver's pointer and the write-back
    assert kmd.ih.entries == entries
    st = m.read(regs.INT_STATUS)  # (EOP is latched but not enabled: the IH ring reports it)
    assert not regs.INT_STATUS.IH_PENDING.get(st) and not regs.INT_STATUS.IH_OVERFLOW.get(st), hex(st)
    assert not kmd.dev.irq_level()
    assert kmd.stats["spurious_interrupts"] == 0


def check_ih_ring_wraps_many_times(dev):
    """1,101 jobs on the model, 133 on the RTL, each ending in an interrupting fence,
    through a 4-entry IH ring (the driver's rptr and the hardware's wptr wrap the ring 275
    and 33 times; 1,101 jobs took 80 s on Icarus, six times the next check): every EOP
    entry is handled, IH_RPTR follows IH_WPTR, the line is low at the end."""
    kmd = kmd_model.bind(dev, ih_log2_entries=2)
    assert kmd.ih.size_dw == 32
    c = Client()
    bo = c.bo(0x2000)
    n = 1101 if isinstance(dev, RefModel) else 133  # both 1 past a whole number of wraps
    last = 0
    for i in range(n):
        last = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000 + 4 * (i % 0x100), [i]), offset=0x40 * (i % 0x40)),
                        CsChunkFence(bo.handle, 0x1F00))
        if i % 3 == 2:  # some jobs complete before the next CS, some in bursts
            assert c.wait(last)
    assert c.wait(last)
    s = kmd.kmd_stats()
    assert s["fences_emitted"] == s["fences_signalled"] == n + 1  # and the IB test's
    assert s["ih_by_source"] == {"EOP": n + 1}
    assert s["spurious_interrupts"] == 0 and s["resets"] == 0
    assert bo.u32[0x1F00 // 4] == last
    ih_settled(kmd, n + 1)


def check_one_interrupt_per_entry_though_the_write_back_is_late(dev):
    """Five jobs, each waited for, each ending in an interrupting fence: every EOP entry is
    handled at the interrupt that announced it. On the RTL the irq line rises with IH_WPTR,
    a few cycles before the wptr write-back lands (docs/hardware.md, "The IH ring"): the
    handler that found no entry in the write-back returned and was called again by the line
    still high, two interrupts for every entry (`make sim` on Verilator: "interrupts 6,
    ih_entries 3"; the model, whose write-back lands at once, 3). It reads IH_WPTR then."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x2000)
    irqs, entries = kmd.stats["interrupts"], kmd.ih.entries
    for i in range(5):
        c.run(bo, pm4.write_data(bo.addr + 0x1000 + 4 * i, [i + 1]), offset=0x40 * i)
    assert bo.u32[0x400:0x405].tolist() == [1, 2, 3, 4, 5]
    assert kmd.ih.entries - entries == 5
    assert 1 <= kmd.stats["interrupts"] - irqs <= 5, (kmd.stats["interrupts"] - irqs, "interrupts for 5 entries")
    ih_settled(kmd, entries + 5)


def check_ih_overflow(dev):
    """Ten interrupting fences land while the driver is not looking, in a 4-entry IH ring:
    the hardware drops six and latches IH_OVERFLOW; the driver handles the four entries,
    clears the latch, finds the fences in fence memory, and the line drops."""
    kmd = kmd_model.bind(dev, ih_log2_entries=2)
    c = Client()
    bo = c.bo(0x2000)
    flag = bo.addr + 0x1800
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(flag, 1, 1, "EQ")))
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000 + 4 * i, [i + 1]), offset=0x100 + 0x40 * i))
            for i in range(10)]
    before = kmd.mmio.read(regs.IH_WPTR)
    irqs = kmd.stats["interrupts"]
    bo.u32[flag // 4 - bo.addr // 4] = 1  # release: eleven fences in a row, nobody servicing the IH
    kmd.dev.delay(20_000)
    assert kmd.stats["interrupts"] == irqs
    st = kmd.mmio.read(regs.INT_STATUS)
    assert regs.INT_STATUS.IH_OVERFLOW.get(st) and regs.INT_STATUS.IH_PENDING.get(st)
    wrote = (kmd.mmio.read(regs.IH_WPTR) - before) // ih.ENTRY_BYTES
    assert wrote == 4  # the ring's size: the rest were dropped
    assert c.wait(seqs[-1]) and c.wait(hold, 0)
    assert bo.u32[0x400:0x40A].tolist() == list(range(1, 11))
    s = kmd.kmd_stats()
    assert s["fences_signalled"] == s["fences_emitted"] == 12
    assert s["spurious_interrupts"] == 0
    ih_settled(kmd, before // ih.ENTRY_BYTES + wrote)
    # and the ring works on, every entry handled
    c.run(bo, pm4.write_data(bo.addr + 0x1100, [7]), offset=0x800)
    ih_settled(kmd, before // ih.ENTRY_BYTES + wrote + 1)


def check_int_status_without_ih_ring(dev):
    """No IH ring (CAPS.IH = 0): EOP and CP_ERROR come from INT_STATUS; each job's EOP is
    cleared (W1C) by the handler, so the line drops after every interrupt, and a CP error
    found there is recovered once, by a reset of queue 0 alone (CP_QUEUE_RESET.Q0)."""
    kmd = kmd_model.bind(dev, cs_check=False)
    assert kmd.ih is None and not kmd.info.has_ih
    c = Client()
    bo = c.bo(0x2000)
    for i in range(20):
        c.run(bo, pm4.write_data(bo.addr + 0x1000 + 4 * i, [i + 1]), offset=0x40 * i)
        assert kmd.mmio.read(regs.INT_STATUS) == 0 and not dev.irq_level()
    s = kmd.kmd_stats()
    assert s["fences_signalled"] == 21 and s["spurious_interrupts"] == 0 and s["interrupts"] >= 20
    assert s["ih_entries"] == 0 and s["ih_by_source"] == {}
    # a CP error: the interrupt names it through INT_STATUS.CP_ERROR and STATUS.ERROR
    bad = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], offset=0x800))
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(bad)
    assert ei.value.info.code == "ILLEGAL_OPCODE"
    s = kmd.kmd_stats()
    assert (s["cp_errors"], s["queue_resets"], s["resets"]) == (1, 1, 0)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]
    ctx = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1100, [9]), offset=0xC00), ctx=ctx), ctx=ctx)
    assert bo.u32[0x440] == 9 and kmd.mmio.read(regs.INT_STATUS) == 0 and not dev.irq_level()
    # (after a queue reset the guilty context submits on: only a full reset keeps it guilty)
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1104, [10]), offset=0xE00)))
    assert bo.u32[0x441] == 10 and kmd.kmd_stats()["cp_errors"] == 1



class _Storm(RefModel):
    """While `storming`, every IH_RPTR the handler writes is answered by one more EOP entry
    (an interrupt storm: a CHAIN loop around an interrupting RELEASE_MEM, checker off)."""

    storming = False

    def mmio_write32(self, offset: int, value: int) -> None:
        super().mmio_write32(offset, value)
        if self.storming and offset == regs.IH_RPTR.ADDR:
            self.raise_eop()

    def raise_eop(self) -> None:
        self._ih_append(ih.Source.EOP, 0, 0, 0, 0, event=regs.INT_STATUS.EOP.mask)


def test_a_storm_is_taken_two_rings_worth_per_interrupt_and_the_rest_at_the_next():
    """The handler's bound (IhRing.process, docs/architecture.md): one interrupt takes
    exactly twice the ring's entries (8 here: 16), no more, however fast they come, and
    returns with the line still high; the next interrupt takes what is left, and every
    entry the hardware wrote is handled once."""
    dev = _Storm()
    kmd = kmd_model.bind(dev, ih_log2_entries=3)
    assert kmd.ih.size_bytes // ih.ENTRY_BYTES == 8
    before = kmd.ih.entries
    dev.storming = True
    dev.raise_eop()
    kmd.service()
    assert kmd.ih.entries - before == 16
    assert regs.INT_STATUS.IH_PENDING.get(kmd.mmio.read(regs.INT_STATUS)) and dev.irq_level()
    dev.storming = False
    kmd.service()
    assert kmd.ih.entries - before == 17  # the one the last IH_RPTR write brought
    ih_settled(kmd, before + 17)


# On the model only, for now: tests/cosim/driver_checks.py's ELSEWHERE says why they fail on the RTL
CHECKS = [check_ih_ring_wraps_many_times, check_ih_overflow, check_one_interrupt_per_entry_though_the_write_back_is_late]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_int_status_without_ih_ring():
    check_int_status_without_ih_ring(RefModel(ih=False))


def test_a_corrupt_wptr_write_back_resyncs_at_the_hardware_wptr():
    """The IH wptr write-back reads as something that is not a whole number of entries
    ahead (memory corrupted under the driver): the handler says so, starts again at the
    hardware's IH_WPTR and tells the hardware (IH_RPTR), so IH_PENDING and the line drop;
    the entry in between is lost, its fence still signals (fence memory), and the next
    entries are handled as ever. (It used to resync to the corrupt value without writing
    IH_RPTR: the line stayed high and every later entry was skipped.)"""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    handled = kmd.ih.entries
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [2]), offset=0x100))
    kmd.dev.delay(2_000)  # the job's EOP entry is written, the line is high, nobody has looked
    assert kmd.dev.irq_level()
    kmd.wb32[kmd.ih.wptr_wb_index] = kmd.ih.get_wptr() + 5
    assert c.wait(seq) and bo.u32[0x41] == 2
    assert kmd.ih.rptr == kmd.mmio.read(regs.IH_RPTR) == kmd.mmio.read(regs.IH_WPTR) and not kmd.dev.irq_level()
    assert kmd.ih.entries == handled  # the one entry was skipped
    for i in range(3):
        c.run(bo, pm4.write_data(bo.addr + 0x108 + 4 * i, [3 + i]), offset=0x200 + 0x40 * i)
    kmd.service()
    assert kmd.ih.rptr == kmd.mmio.read(regs.IH_RPTR) == kmd.mmio.read(regs.IH_WPTR) and not kmd.dev.irq_level()
    assert kmd.ih.entries == handled + 3 and kmd.stats["spurious_interrupts"] == 0


def test_an_entry_whose_wptr_write_back_has_not_landed_is_taken_from_ih_wptr(caplog):
    """The line rises with IH_WPTR a few cycles before the hardware's wptr write-back lands
    (rtl/cp/ih.py writes the entry, moves IH_WPTR, then writes the pointer back): the handler
    finds no entry in the write-back, and IH_PENDING. It reads IH_WPTR and handles the entry
    in that interrupt: no spurious interrupt, no second call (it returned and was called
    again by the line, two interrupts per entry on the RTL). The write-back landing later,
    behind the driver's rptr until it does, is not taken for a corrupt one."""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    handled, irqs = kmd.ih.entries, kmd.stats["interrupts"]
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [2]), offset=0x100))
    kmd.dev.delay(2_000)  # the job's EOP entry is written, the line is high, nobody has looked
    landed = kmd.ih.get_wptr()
    assert kmd.dev.irq_level() and landed != kmd.ih.rptr
    before = kmd.ih.rptr
    kmd.wb32[kmd.ih.wptr_wb_index] = before  # the write-back has not landed yet
    spurious = kmd.stats["spurious_interrupts"]
    kmd.irq_handler()
    assert kmd.ih.entries == handled + 1 and kmd.ih.rptr == landed  # in this interrupt
    assert not kmd.dev.irq_level() and kmd.stats["spurious_interrupts"] == spurious
    assert bo.u32[0x41] == 2 and kmd.fence_drv.process() is not None
    assert kmd.ih.get_wptr() == landed  # the stale write-back reads as "nothing new"
    ih_log = logging.getLogger("gpucosim.ih")  # (the gpucosim tree may not propagate to caplog's)
    ih_log.addHandler(caplog.handler)
    try:
        assert kmd.ih.process() == 0
        kmd.wb32[kmd.ih.wptr_wb_index] = landed  # the write-back lands
        assert kmd.ih.process() == 0
        ih_log.error("(the handler sees this logger)")
    finally:
        ih_log.removeHandler(caplog.handler)
    errors = {r.getMessage() for r in caplog.records if r.levelname == "ERROR"}
    assert errors == {"(the handler sees this logger)"}, errors
    assert c.wait(seq)
    assert kmd.stats["interrupts"] == irqs + 1 and kmd.stats["spurious_interrupts"] == spurious
    # the next entry's write-back is taken as before
    c.run(bo, pm4.write_data(bo.addr + 0x108, [3]), offset=0x200)
    assert kmd.ih.entries == handled + 2 and kmd.ih.rptr == kmd.mmio.read(regs.IH_WPTR) == kmd.ih.get_wptr()
    assert kmd.ih.wb_stale is None


def test_observers_see_each_ih_entry():
    """"ih_entry" (gpucosim's timeline and crash reports): the source by name, the decoded
    entry and its raw dwords, once per entry handled."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    seen = []
    kmd.observers.append(lambda event, f: seen.append(f) if event == "ih_entry" else None)
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    fence = kmd.fence_drv.sync_seq  # the job's hardware fence, the last one emitted
    c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], offset=0x100))  # a CP error: its entry too
    kmd.dev.delay(1_000)
    c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx))
    assert [f["source"] for f in seen] == ["EOP", "CP_ERROR"]
    eop, err = seen[0]["entry"], seen[1]["entry"]
    assert (eop["SOURCE_ID"], eop["DATA1"], err["SOURCE_ID"]) == (ih.Source.EOP, fence, ih.Source.CP_ERROR)
    assert all(len(f["raw"]) == ih.ENTRY_DWORDS and ih.decode(f["raw"]) == f["entry"] for f in seen)


def test_an_ih_entry_is_amds_soc15_layout_and_each_field_holds_exactly_its_width():
    """Dword 0 is CLIENT_ID 7:0, SOURCE_ID 15:8, RING_ID 23:16, VMID 27:24 (amdgpu's
    amdgpu_ih_decode_iv_helper); a value one past a field's width is refused, not carried
    into the next field (VMID 16 would read as VMID 0 with VMID_SRC garbage)."""
    dw = ih.encode(CLIENT_ID=ih.Client.GRBM_CP, SOURCE_ID=ih.Source.EOP, RING_ID=0xFF, VMID=15, DATA0=0xFFFF_FFFF,
                   TIMESTAMP_HI=0xFFFF, PASID=0xFFFF)
    assert dw == [0x0FFF_B514, 0, 0xFFFF, 0xFFFF, 0xFFFF_FFFF, 0, 0, 0]
    assert ih.decode(dw)["VMID"] == 15 and ih.decode(dw)["RING_ID"] == 0xFF
    for name, width in (("VMID", 4), ("CLIENT_ID", 8), ("TIMESTAMP_HI", 16), ("DATA0", 32)):
        with pytest.raises(ValueError, match=rf"^IH {name}: {1 << width:#x} does not fit in {width} bits$"):
            ih.encode(**{name: 1 << width})
        with pytest.raises(ValueError, match=rf"^IH {name}: -0x1 does not fit in {width} bits$"):
            ih.encode(**{name: -1})
    for n in (7, 9):
        with pytest.raises(ValueError, match=rf"^an IH entry is 8 dwords, not {n}$"):
            ih.decode([0] * n)


class _StatusReads(_Storm):
    """_Storm that counts the handler's INT_STATUS reads (`status_reads`)."""

    status_reads = 0

    def mmio_read32(self, offset: int) -> int:
        if offset == regs.INT_STATUS.ADDR:
            self.status_reads += 1
        return super().mmio_read32(offset)


def test_an_interrupt_with_nothing_in_the_ih_ring_nor_at_ih_wptr_is_spurious():
    """The line is high (or the handler was called) but neither the write-back nor IH_WPTR
    shows an entry and INT_STATUS has no event: counted as a spurious interrupt, no entry
    taken. (IhRing.take_from_register answers 0 entries, and the handler reads INT_STATUS.)"""
    kmd = kmd_model.bind(RefModel())
    kmd.mmio.write(regs.INT_STATUS, kmd.mmio.read(regs.INT_STATUS))  # (W1C: the bind's EOP latch)
    entries, spurious = kmd.ih.entries, kmd.stats["spurious_interrupts"]
    assert kmd.mmio.read(regs.IH_WPTR) == kmd.ih.rptr and kmd.mmio.read(regs.INT_STATUS) == 0
    kmd.irq_handler()
    assert kmd.ih.entries == entries
    assert kmd.stats["spurious_interrupts"] == spurious + 1


def test_an_overflow_seen_at_the_first_look_of_a_storm_is_read_though_later_looks_find_the_ring_not_full():
    """IhRing.full_seen: a look that found the ring full is remembered for the whole
    interrupt, not only the last look's answer. An 8-entry ring overflows (IH_OVERFLOW
    latched), then a storm answers each IH_RPTR write with one entry: the handler's first
    look finds the ring full, the fifteen after one entry each. It reads INT_STATUS once and
    clears IH_OVERFLOW (the dropped entries' fences polled). The flag is then cleared: the
    next interrupt with an entry reads no INT_STATUS. A ring exactly full of entries that
    latch no event (an SDMA poll storm's POLL_TIMEOUTs) is read once and is no spurious
    interrupt."""
    dev = _StatusReads()
    kmd = kmd_model.bind(dev, ih_log2_entries=3)
    before = kmd.ih.entries
    spurious = kmd.stats["spurious_interrupts"]
    for _ in range(9):  # one more than the ring holds: dropped, IH_OVERFLOW latched
        dev.raise_eop()
    assert regs.INT_STATUS.IH_OVERFLOW.get(kmd.mmio.read(regs.INT_STATUS))
    dev.storming = True
    reads = dev.status_reads
    kmd.irq_handler()
    assert kmd.ih.entries - before == 16
    assert dev.status_reads == reads + 1
    assert not regs.INT_STATUS.IH_OVERFLOW.get(kmd.mmio.read(regs.INT_STATUS)), "the overflow was not read"
    dev.storming = False
    kmd.service()
    ih_settled(kmd, before + 17)
    # the flag was cleared with the read: an ordinary entry costs no INT_STATUS read
    dev.raise_eop()
    reads = dev.status_reads
    kmd.irq_handler()
    assert kmd.ih.entries - before == 18 and dev.status_reads == reads
    # exactly full, nothing dropped, no event latched: one read, not a spurious interrupt
    kmd.mmio.write(regs.INT_STATUS, kmd.mmio.read(regs.INT_STATUS))  # (W1C: the EOPs' latch)
    assert kmd.mmio.read(regs.INT_STATUS) & ~regs.INT_STATUS.IH_PENDING.mask == 0
    for _ in range(8):
        dev._ih_append(ih.Source.EOP, 0, 0, 0, 0, event=0)
    reads = dev.status_reads
    kmd.irq_handler()
    assert kmd.ih.entries - before == 26 and dev.status_reads == reads + 1
    assert kmd.stats["spurious_interrupts"] == spurious
    ih_settled(kmd, before + 26)
