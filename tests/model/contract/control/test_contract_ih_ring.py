"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): what the driver's control registers do to work in flight. The IH
ring: an entry in hand when IH_CNTL.ENABLE is cleared finishes, the ring with both engines'
entries (odd rptrs, enable), IH_RPTR written in part and ahead of the wptr, the ring moved
and resized keeping its pointers (its locked registers and largest size:
test_contract_rings.py), the SDMA's POLL_TIMEOUT and SDMA_ERROR entries lost while the ring is
disabled and dropped when it is full.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IH_BASE, IH_WB, M32, OUT, RING, RPTR_WB, SRING, Gpu, IhRing, Ring, SdmaRing,
                                         bring_up, lo_hi, release_mem, sdma)
from tests.model.contract.control.test_contract_rings import WB_ELSEWHERE


IH_SENTINEL = 0x5A5A_5A5A  # what an IH slot holds until an entry is written over it


def check_ih_entry_in_hand_when_enable_is_cleared_finishes(dev):
    """docs/hardware.md ("To move a ring's write-backs"): an IH entry in hand when
    IH_CNTL.ENABLE is cleared still finishes, its wptr write-back going to IH_WPTR_ADDR as it
    is when the entry's write is answered; the entries after it are dropped whole. A doorbell
    rings 16 interrupting RELEASE_MEMs, ENABLE is cleared some cycles later (or once the first
    entry is in) and IH_WPTR_ADDR moved at once, while the stream runs: every RELEASE_MEM's
    data is written (the CP runs on), IH_WPTR counts whole entries only (the slots past it
    untouched), and the last write-back, to the old address or the new, holds IH_WPTR (to
    the new one only for the last entry: the one in hand). Returns {when: (entries, moved)}.
    (The model writes a doorbell's entries before the next MMIO: all 16, at the old address;
    the RTL cuts the stream where the clear lands.)"""
    g, q0, ih = bring_up(dev, ring_log2=10, ih_log2=9)  # (64 entries: 16 a round never wrap onto unread ones)
    n, size = 16, 4 << 9
    seen = {}
    for tag, when in enumerate((0, 3, 6, 10, 14, 20, 30, 45, 70, "mid"), 1):
        where = f"IH_CNTL.ENABLE cleared {when}{'' if when == 'mid' else ' cycles'} after the doorbell"
        start = g.read("IH_WPTR")
        slots = [IH_BASE + (start + 32 * k) % size for k in range(n)]
        for a in slots:
            g.w32(a, [IH_SENTINEL] * 8)
        g.w32(IH_WB, [start])
        g.w32(WB_ELSEWHERE, [0xDEAD])
        g.w32(OUT, [0] * n)
        q0.emit(*[release_mem(OUT + 4 * k, tag << 8 | k, INT_SEL="SEND_INT") for k in range(n)])
        q0.doorbell()
        if when == "mid":
            g.until(lambda: g.read("IH_WPTR") != start, "the first entry")
        else:
            g.dev.delay(when)
        g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
        g.write("IH_WPTR_ADDR_LO", WB_ELSEWHERE)  # (taken: ENABLE is clear)
        g.idle()
        assert g.r32(OUT, n) == [tag << 8 | k for k in range(n)], f"{where}: the CP did not run on"
        wptr = g.read("IH_WPTR")
        k = ((wptr - start) & M32) // 32
        assert (wptr - start) & M32 == 32 * k and k <= n, f"{where}: IH_WPTR {wptr:#x} from {start:#x}"
        got = [g.r32(a, 8) for a in slots]
        assert all(IH_SENTINEL not in e and ih.source(ih.entry((start + 32 * j) & M32)) == "EOP"
                   for j, e in enumerate(got[:k])), f"{where}: an entry before IH_WPTR is not whole"
        assert got[k:] == [[IH_SENTINEL] * 8] * (n - k), f"{where}: a slot past IH_WPTR was written"
        old, new = g.r32(IH_WB), g.r32(WB_ELSEWHERE)
        moved = new != 0xDEAD
        if moved:
            assert (new, old) == (wptr, (wptr - 32) & M32), \
                f"{where}: write-backs {old:#x} (old address), {new:#x} (new), IH_WPTR {wptr:#x}"
        else:
            assert old == wptr, f"{where}: the write-back {old:#x} is not IH_WPTR {wptr:#x}"
        seen[when] = (k, moved)
        g.write("IH_WPTR_ADDR_LO", IH_WB)  # (back, for the next round)
        g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
        assert len(ih.pop()) == k
    return seen




def check_ih_ring_with_both_engines_odd_rptrs_and_enable(dev):
    """The IH ring (8 entries) wrapping with the CP's EOP and the SDMA's TRAP entries in
    turn; IH_RPTR written in the middle of an entry (the ring is full when IH_WPTR − IH_RPTR ≥
    bytes, whatever the remainder); IH_CNTL.ENABLE cleared with entries pending (IH_PENDING and
    the irq stay, new entries are dropped, the EOP bit still set, an error of either engine
    stops it with no entry) and set again (entries resume at IH_WPTR); an IH_RPTR ahead of IH_WPTR counts as full for both engines."""
    g, ring, ih = bring_up(dev, ih_log2=6)  # 256 bytes
    s = SdmaRing(g, SRING, 8)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    g.set("INT_ENABLE", IH_PENDING=1)
    eop = lambda k: release_mem(OUT, k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731

    def one(k):
        """Entry k: an EOP of the CP for even k, a TRAP of the SDMA for odd k, one at a time."""
        before = g.read("IH_WPTR")
        if k % 2:
            s.run(sdma("TRAP", INT_CONTEXT=k))
        else:
            ring.run(eop(k))
        g.until(lambda: g.read("IH_WPTR") != before or g.field("INT_STATUS", "IH_OVERFLOW"), f"entry {k}")

    seen = []
    for k in range(20):  # 20 entries through 8 slots, read back 3 or 5 at a time
        one(k)
        if k % 4 == 2 or k == 19:
            seen += [(ih.source(e), e["DATA0"]) for e in ih.pop()]
    assert seen == [("SDMA_TRAP" if k % 2 else "EOP", k) for k in range(20)], seen
    assert g.read("IH_WPTR") == 640 == g.r32(IH_WB) and g.field("INT_STATUS", "IH_OVERFLOW") == 0
    assert [g.r32(IH_BASE + 32 * j + 16) for j in range(8)] == [16, 17, 18, 19, 12, 13, 14, 15], \
        "entry k at base + (32·k mod 256)"
    # IH_RPTR in the middle of an entry: 640 − 50 − ... the ring takes entries while
    # IH_WPTR − IH_RPTR < 256: from IH_RPTR = 590 (50 used) seven more (to 864), the eighth dropped
    g.write("IH_RPTR", 590)
    assert g.field("INT_STATUS", "IH_PENDING") == 1 and g.dev.irq_level()
    for k in range(20, 28):
        one(k)
    assert g.read("IH_WPTR") == 864 and g.field("INT_STATUS", "IH_OVERFLOW") == 1
    g.write("IH_RPTR", 864)
    assert g.field("INT_STATUS", "IH_PENDING") == 0 and not g.dev.irq_level()
    ih.rptr = 640
    assert [(e["DATA0"]) for e in (ih.entry(p) for p in range(640, 864, 32))] == list(range(20, 27))
    ih.rptr = 864
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1, EOP=1))
    # ENABLE cleared with two entries pending: they stay pending, new ones are dropped
    one(28), one(29)
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    assert g.read("IH_WPTR") == 928 and g.field("INT_STATUS", "IH_PENDING") == 1 and g.dev.irq_level()
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    ring.run(eop(30))
    s.run(sdma("TRAP", INT_CONTEXT=31))
    g.dev.delay(100)
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), g.r32(IH_WB), st["EOP"], st["IH_OVERFLOW"], st["IH_PENDING"]) == (928, 928, 1, 0, 1), st
    assert [(ih.source(e), e["DATA0"]) for e in ih.pop()] == [("EOP", 28), ("SDMA_TRAP", 29)], \
        "the entries pending when ENABLE was cleared are read as ever"
    # errors while disabled: each engine stops as ever, no entry; the CP's sets its event bit
    s.submit([0x0000_0003])
    ring.submit([0xC0002A00])
    g.until(lambda: g.fields("SDMA_STATUS")["ERROR"] and g.fields("STATUS")["ERROR"], "both stopped")
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), st["CP_ERROR"], st["IH_OVERFLOW"], st["IH_PENDING"]) == (928, 1, 0, 0), st
    assert g.fields("SDMA_STATUS")["IDLE"] == 1 and g.fields("SDMA_ERROR")["CODE"] == g.err["ILLEGAL_OPCODE"]
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle("SDMA_STATUS")
    g.idle()
    s.wptr = ring.wptr = 0
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    assert g.field("INT_STATUS", "IH_PENDING") == 0 and not g.dev.irq_level()
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    one(33), one(32)
    assert [(ih.source(e), e["DATA0"]) for e in ih.pop()] == [("SDMA_TRAP", 33), ("EOP", 32)]
    assert g.read("IH_WPTR") == 992 == g.r32(IH_WB)
    # IH_RPTR ahead of IH_WPTR: full for the CP's entries and the SDMA's alike
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1, EOP=1))
    g.write("IH_RPTR", 992 + 32)
    ring.run(eop(34))
    g.until(lambda: g.field("INT_STATUS", "IH_OVERFLOW"), "IH_OVERFLOW")
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1))
    s.run(sdma("TRAP", INT_CONTEXT=35))
    g.until(lambda: g.field("INT_STATUS", "IH_OVERFLOW"), "IH_OVERFLOW of the SDMA's entry")
    assert g.read("IH_WPTR") == 992
    g.write("IH_RPTR", 992)
    ih.rptr = 992
    one(36)
    assert [e["DATA0"] for e in ih.pop()] == [36]


def check_ih_rptr_written_in_part_and_ahead_of_the_wptr(dev):
    """IH_RPTR written in part (byte strobes): only the bytes written change, and IH_PENDING
    and the irq line follow the new value at once (docs/hardware.md, Interrupts); an IH_RPTR
    ahead of IH_WPTR counts as full (an entry is dropped, IH_OVERFLOW set, EOP still set)
    until a byte write brings it back; with IH_CNTL.WPTR_WB clear nothing is written back."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6)  # 256 bytes, 8 entries, no write-back
    g.w32(IH_WB, [0xDEAD])
    ring = Ring(g, RING, 8, RPTR_WB)
    g.set("INT_ENABLE", IH_PENDING=1)
    eop = lambda k: release_mem(OUT + 4 * k, k, INT_SEL="SEND_INT", INT_CTXID=k)
    ring.run(eop(1), eop(2))
    assert g.read("IH_WPTR") == 64 and g.fields("INT_STATUS")["IH_PENDING"] == 1
    g.write("IH_RPTR", 0x0100_0020)  # ahead of IH_WPTR: 64 − rptr wraps to a large value
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    ring.run(eop(3))
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), st["IH_OVERFLOW"], st["EOP"], st["IH_PENDING"]) == (64, 1, 1, 1), st
    dev.mmio_write_bytes(g.regs["IH_RPTR"].addr() + 3, bytes([0]))  # byte 3 only: IH_RPTR = 0x20
    assert g.read("IH_RPTR") == 0x20, hex(g.read("IH_RPTR"))
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, IH_OVERFLOW=1))
    ring.run(eop(4))
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), st["IH_OVERFLOW"], st["EOP"]) == (96, 0, 1), st
    assert [ih.entry(p)["DATA0"] for p in (0, 32, 64)] == [1, 2, 4]
    assert dev.wait_irq(10), "IH_PENDING holds the line high"
    dev.mmio_write_bytes(g.regs["IH_RPTR"].addr(), bytes([0x60]))  # byte 0 only: IH_RPTR = IH_WPTR
    assert g.read("IH_RPTR") == 0x60 and g.fields("INT_STATUS")["IH_PENDING"] == 0
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    assert not dev.wait_irq(50), "no entry pending: the line is low"
    dev.mmio_write_bytes(g.regs["IH_RPTR"].addr() + 1, bytes([0x01]))  # IH_RPTR = 0x160: 256 ahead
    assert g.read("IH_RPTR") == 0x160 and g.fields("INT_STATUS")["IH_PENDING"] == 1
    assert dev.wait_irq(10), "IH_RPTR ≠ IH_WPTR: pending again, though no entry came"
    g.write("IH_RPTR", 0x60)
    assert g.r32(IH_WB) == 0xDEAD, "WPTR_WB clear: no write-back"


def check_ih_ring_moved_and_resized_keeps_its_pointers(dev):
    """The IH ring's base and size are written while IH_CNTL.ENABLE is clear and nothing else is
    reset (docs/hardware.md, Ring and doorbell; Interrupts): IH_WPTR and IH_RPTR keep their
    values, the next entry goes to the new base + (IH_WPTR mod the new size's bytes), and the
    full rule uses the new size at once: with IH_WPTR − IH_RPTR at the new size the entry is
    dropped (IH_OVERFLOW), also when the ring shrank below what was pending."""
    g, ring, ih = bring_up(dev, ih_log2=6)  # 256 bytes
    new_base = 0x30000
    eop = lambda k: release_mem(OUT + 4 * k, k, INT_SEL="SEND_INT", INT_CTXID=k)
    ring.run(eop(1), eop(2), eop(3))
    assert g.read("IH_WPTR") == 96
    g.write("IH_RPTR", 96)
    g.w32(new_base, [0] * 32)
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.write("IH_BASE_LO", new_base >> 8)
    g.set("IH_SIZE", LOG2_DWORDS=4)  # 64 bytes: two entries
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    assert (g.read("IH_WPTR"), g.read("IH_RPTR")) == (96, 96), "nothing else is reset"
    ring.run(eop(4))
    assert g.read("IH_WPTR") == 128 and g.r32(IH_WB) == 128
    assert g.r32(new_base + 32 + 16) == 4 and g.r32(new_base + 16) == 0, "at 96 mod 64 of the new base"
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    ring.run(eop(5), eop(6))  # 128 − 96 = 32: one more fits, the next is dropped
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), st["IH_OVERFLOW"], st["EOP"]) == (160, 1, 1), (g.read("IH_WPTR"), st)
    assert g.r32(new_base + 16) == 5
    # shrunk below what is pending: IH_WPTR − IH_RPTR (64) ≥ 32 bytes, so every entry is dropped
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, IH_OVERFLOW=1))
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.set("IH_SIZE", LOG2_DWORDS=3)  # 32 bytes: one entry
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    ring.run(eop(7))
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), st["IH_OVERFLOW"]) == (160, 1), (g.read("IH_WPTR"), st)
    g.write("IH_RPTR", 160)
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, IH_OVERFLOW=1))
    ring.run(eop(8))
    assert g.read("IH_WPTR") == 192 and g.r32(new_base + 16) == 8 and g.fields("INT_STATUS")["IH_OVERFLOW"] == 0



def check_a_dropped_entry_writes_no_wptr_write_back(dev):
    """An entry the IH ring drops, full (IH_WPTR − IH_RPTR ≥ bytes) or disabled (IH_CNTL.ENABLE
    clear, WPTR_WB set), is not written and neither is IH_WPTR written back (docs/hardware.md,
    Interrupts: the write-back follows an entry's write and IH_WPTR's move, which a dropped
    entry makes neither of): the write-back dword keeps what the driver put there, while the
    packet that raised the entry finishes as ever (the RELEASE_MEM's data written and the ring
    passed, the SDMA's TRAP passed and its FENCE after it written) and only IH_OVERFLOW (for a
    full ring) tells; the first entry the ring takes again writes IH_WPTR back."""
    g, ring, ih = bring_up(dev, ih_log2=4)  # 64 bytes: two entries
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    eop = lambda k: release_mem(OUT + 4 * k, k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731
    ring.run(eop(1), eop(2))
    assert (g.read("IH_WPTR"), g.r32(IH_WB)) == (64, 64)
    g.w32(IH_WB, [0xDEAD])
    ring.run(eop(3))  # full: dropped
    s.run(sdma("TRAP", INT_CONTEXT=4), sdma("FENCE", DATA=0x44, **lo_hi("ADDR", OUT + 0x10, 2)))  # dropped too
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), g.r32(IH_WB), st["IH_OVERFLOW"], st["EOP"]) == (64, 0xDEAD, 1, 1), \
        (g.read("IH_WPTR"), hex(g.r32(IH_WB)), st)
    assert (g.r32(OUT + 12), g.r32(OUT + 0x10), g.read("RB_RPTR"), g.read("SDMA_RB_RPTR")) == \
        (3, 0x44, ring.wptr, s.wptr), "the packets of the dropped entries ran to their end"
    assert [e["DATA0"] for e in ih.pop()] == [1, 2]
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1, EOP=1))
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)  # disabled: dropped without a trace
    ring.run(eop(5))
    s.run(sdma("TRAP", INT_CONTEXT=6))
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), g.r32(IH_WB), st["IH_OVERFLOW"], st["EOP"]) == (64, 0xDEAD, 0, 1), \
        (g.read("IH_WPTR"), hex(g.r32(IH_WB)), st)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    ring.run(eop(7))
    assert (g.read("IH_WPTR"), g.r32(IH_WB)) == (96, 96)
    assert [e["DATA0"] for e in ih.pop()] == [7]


def check_sdma_poll_timeout_and_error_entries_lost_disabled_dropped_full(dev):
    """docs/hardware.md (Interrupts and the IH ring; The SDMA copy engine): while
    IH_CNTL.ENABLE is clear the SDMA's POLL_TIMEOUT and TRAP entries are lost, not kept for
    later (none is written once ENABLE is set again), IH_WPTR unchanged and not written back,
    no IH_OVERFLOW, and the queue moves on past the POLL_REGMEM that gave up; an SDMA error
    then shows only in SDMA_STATUS (IDLE and ERROR 1) and SDMA_ERROR. On a full ring the
    SDMA's POLL_TIMEOUT and SDMA_ERROR entries are dropped and set IH_OVERFLOW "as any", no
    INT_STATUS event bit (EOP, CP_ERROR), and the packets after a dropped POLL_TIMEOUT run."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 3, IH_WB)  # 32 bytes: one entry
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    flag = OUT + 0x40
    g.w32(flag, [0x1234])
    g.w32(OUT, [0] * 4)
    poll = lambda: sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ",  # noqa: E731
                        MEM_POLL="MEMORY", RETRY_COUNT=0, INTERVAL=1)
    fence = lambda k, v: sdma("FENCE", DATA=v, **lo_hi("ADDR", OUT + 4 * k, 2))  # noqa: E731

    def int_status():
        st = g.fields("INT_STATUS")
        return st["IH_OVERFLOW"], st["IH_PENDING"], st["EOP"], st["CP_ERROR"]

    # disabled: lost without a trace, the queue runs on
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.w32(IH_WB, [0xDEAD])
    s.run(poll(), fence(0, 0xB0), sdma("TRAP", INT_CONTEXT=7), fence(1, 0xB1))
    assert g.r32(OUT, 2) == [0xB0, 0xB1], "the queue moved on past the POLL_REGMEM that gave up"
    assert (g.read("IH_WPTR"), g.r32(IH_WB), int_status()) == (0, 0xDEAD, (0, 0, 0, 0)), \
        (g.read("IH_WPTR"), hex(g.r32(IH_WB)), g.fields("INT_STATUS"))
    s.submit([0x0000_0003])  # ILLEGAL_OPCODE
    g.until(lambda: g.fields("SDMA_STATUS")["ERROR"], "the SDMA stopped")
    st = g.idle("SDMA_STATUS")
    assert (st["IDLE"], st["ERROR"], g.fields("SDMA_ERROR")["CODE"]) == (1, 1, g.err["ILLEGAL_OPCODE"]), st
    assert (g.read("IH_WPTR"), g.r32(IH_WB), int_status()) == (0, 0xDEAD, (0, 0, 0, 0)), g.fields("INT_STATUS")
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    g.dev.delay(200)
    assert (g.read("IH_WPTR"), g.r32(IH_WB), int_status()) == (0, 0xDEAD, (0, 0, 0, 0)), "nothing kept for later"
    # full (one entry pending): dropped, IH_OVERFLOW, no event bit, the queue runs on
    s.run(sdma("TRAP", INT_CONTEXT=9))
    g.until(lambda: g.read("IH_WPTR") == 32, "the TRAP's entry")
    s.run(poll(), fence(2, 0xB2))
    g.until(lambda: g.field("INT_STATUS", "IH_OVERFLOW"), "IH_OVERFLOW of the POLL_TIMEOUT entry")
    assert g.r32(OUT + 8) == 0xB2, "the packet after a dropped POLL_TIMEOUT ran"
    assert (g.read("IH_WPTR"), g.r32(IH_WB), int_status()) == (32, 32, (1, 1, 0, 0)), g.fields("INT_STATUS")
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1))
    s.submit([0x0000_0003])
    g.until(lambda: g.field("INT_STATUS", "IH_OVERFLOW"), "IH_OVERFLOW of the SDMA_ERROR entry")
    st = g.idle("SDMA_STATUS")
    assert (st["ERROR"], g.fields("SDMA_ERROR")["CODE"]) == (1, g.err["ILLEGAL_OPCODE"]), st
    assert (g.read("IH_WPTR"), g.r32(IH_WB), int_status()) == (32, 32, (1, 1, 0, 0)), g.fields("INT_STATUS")
    assert [(ih.source(e), e["DATA0"]) for e in ih.pop()] == [("SDMA_TRAP", 9)], "only the TRAP's entry"


CHECKS = [check_ih_entry_in_hand_when_enable_is_cleared_finishes,
          check_ih_ring_with_both_engines_odd_rptrs_and_enable, check_ih_rptr_written_in_part_and_ahead_of_the_wptr,
          check_ih_ring_moved_and_resized_keeps_its_pointers, check_a_dropped_entry_writes_no_wptr_write_back,
          check_sdma_poll_timeout_and_error_entries_lost_disabled_dropped_full]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())


def test_the_model_writes_a_doorbells_ih_entries_before_the_next_mmio():
    """The reference model runs what a doorbell gives it at once: every entry is in, its
    write-back at the old address, whenever ENABLE is cleared (the RTL, Verilator and Icarus
    alike, cuts the stream: no entry for a clear 0-14 cycles after the doorbell, one for 20-45
    with its write-back at the new address for 20, two for 70)."""
    from testbench.refmodel import RefModel

    seen = check_ih_entry_in_hand_when_enable_is_cleared_finishes(RefModel())
    assert set(seen.values()) == {(16, False)}
