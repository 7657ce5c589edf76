"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): what the driver's control registers do to work in flight. The rings'
enables and locked registers: a ring's ENABLE cleared between packets or mid-packet pauses
it at a packet boundary; its base, size and rptr write-back address (the IH ring's wptr
write-back address too) are locked while it is enabled; the rings' largest sizes (the IH
ring: test_contract_ih_ring.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IH_BASE, IH_WB, M32, OUT, RING, RING1, RPTR1_WB, RPTR_WB, SRING,
                                         SRPTR_WB, Gpu, IhRing, Ring, SdmaRing, bring_up, ib, lo_hi, release_mem, sdma,
                                         wait_mem, write_data)


def check_ring_enable_pauses_at_a_packet_boundary(dev):
    """Clearing RB_CNTL.ENABLE (SDMA_RB_CNTL.RB_ENABLE) pauses the ring before its next ring
    packet: the packet in hand finishes, an IB in hand runs to its end, RB_RPTR and RB_WPTR
    keep their values; setting it again resumes where the ring stood."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 6)
    flag = OUT + 0x40
    g.w32(flag, [0])
    g.w32(IB1, wait_mem(flag, 1, 1, "EQ") + write_data(OUT + 4, [0xB]))
    ring.submit(wait_mem(flag, 1, 1, "EQ"), write_data(OUT, [0xA]), ib(IB1, 12), write_data(OUT + 8, [0xC]))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1), sdma("FENCE", DATA=0xD, **lo_hi("ADDR", OUT + 12, 2)))
    g.waiting()
    g.waiting("SDMA_STATUS")
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0)
    g.w32(flag, [1])
    g.dev.delay(400)
    assert (g.read("RB_RPTR"), g.read("RB_WPTR"), g.read("SDMA_RB_RPTR")) == (7, 21, 24)
    assert g.r32(OUT, 4) == [0, 0, 0, 0] and not g.fields("STATUS")["IDLE"]
    g.set("RB_CNTL", ENABLE=1, RPTR_WB=1)
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=1)
    g.idle()
    g.idle("SDMA_STATUS")
    assert g.r32(OUT, 4) == [0xA, 0xB, 0xC, 0xD] and (g.read("RB_RPTR"), g.read("SDMA_RB_RPTR")) == (21, 40)
    # An IB in hand runs to its end; the ring packet after it waits.
    g.w32(flag, [0])
    g.w32(OUT, [0, 0, 0, 0])
    ring.submit(ib(IB1, 12), write_data(OUT + 8, [0xE]))
    g.waiting()
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.w32(flag, [1])
    g.dev.delay(400)
    assert g.r32(OUT, 3) == [0, 0xB, 0] and g.read("RB_RPTR") == 25 == g.r32(RPTR_WB)
    g.set("RB_CNTL", ENABLE=1, RPTR_WB=1)
    g.idle()
    assert g.r32(OUT + 8) == 0xE and g.read("RB_RPTR") == 30


def check_ring_base_and_size_are_locked_while_enabled(dev):
    """A ring's base and size written while its enable is set are ignored: they read back,
    and the ring runs, as before (queue 0, queue 1, the SDMA ring, the IH ring), so a
    careless driver cannot move a running ring; written while it is clear they take effect."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    elsewhere = 0x60000  # where a taken write would move a ring: type-0 headers, SDMA OP 3, both illegal
    g.w32(elsewhere, [0x0000_0003] * 256)
    locked = {"RB_": ("RB_BASE_LO", "RB_BASE_HI", "RB_SIZE"),
              "CP_HQD1_RB_": ("CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_BASE_HI", "CP_HQD1_RB_SIZE"),
              "SDMA_RB_": ("SDMA_RB_BASE_LO", "SDMA_RB_BASE_HI", "SDMA_RB_CNTL"),
              "IH_": ("IH_BASE_LO", "IH_BASE_HI", "IH_SIZE")}
    before = {r: g.read(r) for names in locked.values() for r in names}
    for names in locked.values():
        g.write(names[0], elsewhere >> 8)
        g.write(names[1], 1)
    g.set("RB_SIZE", LOG2_QWORDS=1)
    g.set("CP_HQD1_RB_SIZE", LOG2_QWORDS=1)
    g.set("SDMA_RB_CNTL", RB_SIZE=4, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
    g.set("IH_SIZE", LOG2_DWORDS=3)
    assert {r: g.read(r) for r in before} == before
    q0.run(write_data(OUT, [0xC0]), release_mem(OUT + 4, 0xE0, INT_SEL="SEND_INT", INT_CTXID=0xE0))
    q1.run(write_data(OUT + 8, [0xC1]))
    s.run(sdma("FENCE", DATA=0xC2, **lo_hi("ADDR", OUT + 12, 2)))
    assert g.r32(OUT, 4) == [0xC0, 0xE0, 0xC1, 0xC2]
    assert [g.fields(st)["ERROR"] for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS")] == [0, 0, 0]
    assert [e["DATA0"] for e in ih.pop()] == [0xE0], "the EOP entry in the IH ring where it was"
    # RB_SIZE of the SDMA follows RB_ENABLE as it was before the write: the write that clears
    # it keeps the size, the one that sets it (as amdgpu writes them) takes its size.
    g.set("SDMA_RB_CNTL", RB_SIZE=5, RB_ENABLE=0, RPTR_WRITEBACK_ENABLE=1)
    assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 6
    g.set("SDMA_RB_CNTL", RB_SIZE=5, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
    assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 5
    # Disabled, queue 0 moves: reset its pointers, program it elsewhere, and it runs there.
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    moved = Ring(g, elsewhere + 0x1000, 6, RPTR_WB)
    assert (g.read("RB_BASE_LO"), g.fields("RB_SIZE")["LOG2_QWORDS"]) == ((elsewhere + 0x1000) >> 8, 5)
    moved.run(write_data(OUT + 16, [0xC3]))
    assert g.r32(OUT + 16) == 0xC3 and g.r32(RPTR_WB) == moved.wptr


LONG = 300  # data dwords of the long packet: a WRITE_DATA (WRITE_LINEAR) of 304 dwords
ALT = 0x70000  # copies of the three rings (4 KiB each), where a paused ring is moved
OUT2 = OUT + 0x2000  # where the copies' long packets write


class _Queue:
    """One ring as check_ring_enable_cleared_mid_packet sees it: its registers, its packets
    (the long one, and the short marker after it) and its pointers' unit (CP dwords, SDMA
    bytes)."""

    def __init__(self, g, ring, cp: bool):
        self.g, self.ring, self.cp = g, ring, cp
        p = ring.p if cp else "SDMA_RB_"
        self.rptr, self.wptr = p + "RPTR", p + "WPTR"
        self.status = ring.status if cp else "SDMA_STATUS"
        self.unit = 1 if cp else 4
        self.name = {"RB_": "queue 0", "CP_HQD1_RB_": "queue 1"}.get(p, "the SDMA ring")
        self.alt = ALT + {"RB_": 0, "CP_HQD1_RB_": 0x1000}.get(p, 0x2000)  # where the ring moves

    def set_base(self, base: int) -> None:
        p = self.ring.p if self.cp else "SDMA_RB_"
        self.g.write(p + "BASE_LO", (base >> 8) & M32)
        self.g.write(p + "BASE_HI", base >> 40)

    def enable(self, on: int) -> None:
        if self.cp:
            self.g.set(self.ring.p + "CNTL", ENABLE=on, RPTR_WB=1)
        else:  # (the size with it: the write that sets RB_ENABLE takes its RB_SIZE)
            self.g.set("SDMA_RB_CNTL", RB_SIZE=10, RB_ENABLE=on, RPTR_WRITEBACK_ENABLE=1)

    def long(self, addr: int, data: list) -> list:
        if self.cp:
            return write_data(addr, data)
        return sdma("WRITE_LINEAR", data, **lo_hi("DST_ADDR", addr, 2), COUNT=len(data) - 1)

    def ib(self, base: int, size: int) -> list:
        return ib(base, size) if self.cp else sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", base, 5), IB_SIZE=size)

    def marker(self, addr: int, v: int) -> list:
        return write_data(addr, [v]) if self.cp else sdma("FENCE", DATA=v, **lo_hi("ADDR", addr, 2))

    def doorbell(self) -> None:
        if self.cp:
            self.ring.doorbell()
        else:
            self.g.write("SDMA_DOORBELL", self.ring.wptr)


def _pause_round(q: _Queue, when, in_ib: bool, tag: int) -> str:
    """Ring a long packet (in an IB when `in_ib`) and a marker after it, clear the ring's
    enable `when` (cycles after the doorbell's response, or "mid": once the packet's first
    data is in memory), and check that it paused at a packet boundary; set it again and check
    the rest ran. Returns what had run at the pause: "none", the "whole" long packet, or "all"."""
    g = q.g
    data = [tag << 16 | k for k in range(LONG)]
    mark = OUT + 4 * LONG
    g.w32(OUT, [0] * (LONG + 1))
    first = q.long(OUT, data)
    if in_ib:
        g.w32(IB1, first)
        first = q.ib(IB1, len(first))
    start = g.read(q.rptr)
    q.ring.emit(first, q.marker(mark, tag))
    after = (start + q.unit * len(first)) & M32
    q.doorbell()
    if when == "mid":
        g.until(lambda: g.r32(OUT) == data[0], f"{q.name}: the long packet's first data in memory")
    else:
        g.dev.delay(when)
    q.enable(0)
    where = f"{q.name}, ENABLE cleared {when}{' in an IB' if in_ib else ''}"
    end = q.ring.wptr
    # Wait for a boundary: RPTR past the packet, or nothing moving for 400 cycles (the ring
    # paused before it; a packet stuck half done stays so too, and fails below). A bound, not
    # a timing claim: slow, stalling memory answers within 60 cycles.
    last, still = None, 0
    for _ in range(300):
        now = (g.read(q.rptr), sum(v != 0 for v in g.r32(OUT, LONG + 1)))
        if now[0] in (after, end):
            g.dev.delay(200)  # and nothing more runs
            break
        still = still + 1 if now == last else 0
        if still == 8:
            break
        last = now
        g.dev.delay(50)
    r, out, st = g.read(q.rptr), g.r32(OUT, LONG + 1), g.fields(q.status)
    # (the model runs what a doorbell gives it at once: its ring has run to its end)
    ran = {start: "none", after: "whole", end: "all"}.get(r)
    assert ran, f"{where}: {q.rptr} {r:#x}, not a packet boundary ({start:#x}, {after:#x} or {end:#x})"
    want = {"none": [0] * (LONG + 1), "whole": data + [0], "all": data + [tag]}[ran]
    assert out == want, f"{where}: {q.rptr} {r:#x} but {sum(v != 0 for v in out)} of the {LONG + 1} dwords written"
    idle = int(ran == "all")
    assert (st["IDLE"], st["RB_EMPTY"], st["ERROR"]) == (idle, idle, 0), f"{where}: {q.status} {st}"
    assert g.read(q.wptr) == end
    if when == "mid":
        assert ran != "none", f"{where}: the packet in hand did not finish"
    moved = not in_ib and ran != "all"
    if moved:
        # Paused, the ring moves (its base is written while ENABLE is clear, no reset): the
        # rest runs from the new base at RPTR. The copy there holds two packets in the long
        # one's dwords, writing elsewhere: a header held back from before the pause would
        # take the copy's second header as data (the RTL took a header, its fetcher stopped
        # in the payload, and the rest came from the new base).
        other = [tag << 16 | 0x8000 | k for k in range(LONG - 4)]
        copy = q.long(OUT2, other[:150]) + q.long(OUT2 + 600, other[150:]) + q.marker(mark, tag)
        for k, d in enumerate(copy):
            at = (start + q.unit * k) % (q.unit * q.ring.size)
            g.w32(q.alt + at * 4 // q.unit, [d])
        q.set_base(q.alt)
    q.enable(1)
    st = g.idle(q.status)
    got = (g.read(q.rptr), g.r32(OUT, LONG + 1), st["RB_EMPTY"])
    if ran == "none" and moved:
        assert got == (end, [0] * LONG + [tag], 1) and g.r32(OUT2, LONG) == other + [0] * 4, f"{where}, moved"
    else:
        assert got == (end, data + [tag], 1), where
    if moved:  # (back where the ring was, for the next round)
        q.enable(0)
        q.set_base(q.ring.base)
        q.enable(1)
        g.w32(OUT2, [0] * LONG)
    return ran


def check_ring_enable_cleared_mid_packet_pauses_at_a_packet_boundary(dev):
    """A ring's enable cleared while a long packet is fetched or runs pauses the ring at a
    packet boundary, whenever it is cleared: right after the doorbell (before the doorbell is
    taken), some cycles on, once the packet's first data is in memory; on queue 0, queue 1, in
    an IB, and on the SDMA ring (a long WRITE_LINEAR). The packet has run whole or not begun,
    RPTR names that boundary, IDLE and RB_EMPTY read 0 while the next packet waits, and setting
    the enable again runs the rest from there (the previous helper's quick experiment saw the
    RTL keep a 304-dword WRITE_DATA half taken)."""
    g, q0, ih = bring_up(dev, ring_log2=10)
    queues = [_Queue(g, q0, True), _Queue(g, Ring(g, RING1, 10, RPTR1_WB, queue=1), True),
              _Queue(g, SdmaRing(g, SRING, 10, SRPTR_WB), False)]
    seen = {}
    tag = 1
    for q in queues:
        for in_ib in (False, True):
            for when in ((0, 5, 6, 40, "mid") if not in_ib else (0, "mid")):
                seen[q.name, in_ib, when] = _pause_round(q, when, in_ib, tag)
                tag += 1
    # An SDMA IB in hand runs to its end too (the model's SDMA paused inside it before, at its
    # next IB packet, and so did the RTL's): an IB waiting in a POLL_REGMEM when RB_ENABLE is
    # cleared, released later, writes its WRITE_LINEAR; the FENCE after it on the ring waits.
    s = queues[2]
    flag = OUT + 0x800
    g.w32(flag, [0])
    g.w32(OUT, [0, 0])
    inner = sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                 RETRY_COUNT=0xFFF, INTERVAL=1) + s.long(OUT, [0xAB])
    g.w32(IB1, inner)
    start = g.read(s.rptr)
    s.ring.emit(s.ib(IB1, len(inner)), s.marker(OUT + 4, 0xCD))
    s.doorbell()
    g.waiting("SDMA_STATUS")
    s.enable(0)
    g.w32(flag, [1])
    g.dev.delay(400)
    assert (g.r32(OUT, 2), g.read(s.rptr)) == ([0xAB, 0], start + 4 * len(s.ib(IB1, 1))), "the SDMA IB in hand"
    s.enable(1)
    g.idle("SDMA_STATUS")
    assert (g.r32(OUT, 2), g.read(s.rptr)) == ([0xAB, 0xCD], s.ring.wptr)
    return seen


WB_ELSEWHERE = 0x9000  # where a taken write-back address write would move the write-backs


def _wb_round(q: _Queue, prefix: str, old: int, when: str, tag: int) -> None:
    """Write q's rptr write-back address (both halves) while the ring runs, `when` "doorbell"
    (right after one that rings 16 packets) or "waiting" (while a poll holds the ring), and
    check the write is ignored: the register reads back `old`, the write-backs land there."""
    g = q.g
    where = f"{q.name}, written {when}"
    g.w32(WB_ELSEWHERE, [0xDEAD])
    flag = OUT + 0x800
    g.w32(flag, [0])
    if when == "doorbell":
        q.ring.emit(*[q.marker(OUT + 4 * k, tag << 8 | k) for k in range(16)])
    elif q.cp:
        q.ring.emit(wait_mem(flag, 1, 1, "EQ"), q.marker(OUT, tag))
    else:
        q.ring.emit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                         RETRY_COUNT=0xFFF, INTERVAL=1), q.marker(OUT, tag))
    q.doorbell()
    if when == "waiting":
        g.waiting(q.status)
    g.write(prefix + "LO", WB_ELSEWHERE)
    g.write(prefix + "HI", 1)  # (taken, with the LO, a write-back past memory: BUS_DECERR)
    assert (g.read(prefix + "LO"), g.read(prefix + "HI")) == (old, 0), f"{where}: the address took the write"
    g.w32(flag, [1])
    g.idle(q.status)
    assert (g.r32(old), g.r32(WB_ELSEWHERE)) == (q.ring.wptr, 0xDEAD), f"{where}: the write-backs moved"


def check_rptr_write_back_address_is_locked_while_enabled(dev):
    """A ring's rptr write-back address (RB_RPTR_ADDR_*, CP_HQD1_RB_RPTR_ADDR_*,
    SDMA_RB_RPTR_ADDR_*) written while its enable is set is ignored, as its base and size:
    it reads back as before and the write-backs land where they did, for a write right after
    a doorbell and one while a packet waits; written while the enable is clear it takes effect.
    (Before, both sides took the new address at the next write-back, but the model had run a
    doorbell's 16 packets before the write came and the RTL had not begun them: the model's
    write-backs all at the old address, the RTL's at the new.)"""
    g, q0, ih = bring_up(dev, ring_log2=10)
    queues = [(_Queue(g, q0, True), "RB_RPTR_ADDR_", RPTR_WB),
              (_Queue(g, Ring(g, RING1, 10, RPTR1_WB, queue=1), True), "CP_HQD1_RB_RPTR_ADDR_", RPTR1_WB),
              (_Queue(g, SdmaRing(g, SRING, 10, SRPTR_WB), False), "SDMA_RB_RPTR_ADDR_", SRPTR_WB)]
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    tag = 1
    for q, prefix, old in queues:
        for when in ("doorbell", "waiting"):
            _wb_round(q, prefix, old, when, tag)
            tag += 1
        # Disabled (nothing in flight), the address moves: the next write-back lands there.
        q.enable(0)
        g.write(prefix + "LO", WB_ELSEWHERE)
        g.write(prefix + "HI", 0)
        q.enable(1)
        g.w32(WB_ELSEWHERE, [0xDEAD])
        q.ring.emit(q.marker(OUT, tag))
        q.doorbell()
        g.idle(q.status)
        assert (g.r32(WB_ELSEWHERE), g.read(prefix + "LO")) == (q.ring.wptr, WB_ELSEWHERE), f"{q.name}: not moved"
        q.enable(0)  # (back, for the next ring's rounds at WB_ELSEWHERE)
        g.write(prefix + "LO", old)
        q.enable(1)


def check_ih_wptr_write_back_address_is_locked_while_enabled(dev):
    """The IH ring's wptr write-back address (IH_WPTR_ADDR_LO/HI) written while IH_CNTL.ENABLE
    is set is ignored, as IH_BASE_* and IH_SIZE: it reads back as before and the write-backs
    land where they did, for a write right after a doorbell of 16 interrupting packets and one
    while a poll holds the ring before one; written while ENABLE is clear it takes effect.
    (Before, both sides took the new address at the next write-back, but the model had
    written a doorbell's 16 entries before the write came and the RTL had not begun them: the
    model's write-back at the old address, the RTL's at the new.)"""
    g, q0, ih = bring_up(dev, ring_log2=10, ih_log2=9)  # (room for 64 entries)
    flag = OUT + 0x800
    for tag, when in enumerate(("doorbell", "waiting"), 1):
        where = f"IH_WPTR_ADDR, written {when}"
        g.w32(WB_ELSEWHERE, [0xDEAD])
        g.w32(flag, [0])
        if when == "doorbell":
            q0.emit(*[release_mem(OUT + 4 * k, tag << 8 | k, INT_SEL="SEND_INT") for k in range(16)])
        else:
            q0.emit(wait_mem(flag, 1, 1, "EQ"), release_mem(OUT, tag, INT_SEL="SEND_INT"))
        q0.doorbell()
        if when == "waiting":
            g.waiting("STATUS")
        g.write("IH_WPTR_ADDR_LO", WB_ELSEWHERE)
        g.write("IH_WPTR_ADDR_HI", 1)  # (taken, with the LO, a write-back past memory: BUS_DECERR)
        assert (g.read("IH_WPTR_ADDR_LO"), g.read("IH_WPTR_ADDR_HI")) == (IH_WB, 0), \
            f"{where}: the address took the write"
        g.w32(flag, [1])
        st = g.idle()
        assert (st["ERROR"], g.r32(IH_WB), g.r32(WB_ELSEWHERE)) == (0, g.read("IH_WPTR"), 0xDEAD), \
            f"{where}: the write-backs moved"
        assert len(ih.pop()) == (16 if when == "doorbell" else 1)
    # Disabled, the address moves: the next entry's write-back lands there.
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.write("IH_WPTR_ADDR_LO", WB_ELSEWHERE)
    g.write("IH_WPTR_ADDR_HI", 0)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    q0.run(release_mem(OUT, 3, INT_SEL="SEND_INT"))
    assert (g.r32(WB_ELSEWHERE), g.read("IH_WPTR_ADDR_LO")) == (g.read("IH_WPTR"), WB_ELSEWHERE), \
        "written while disabled: not moved"
    assert len(ih.pop()) == 1


def check_ring_and_ih_sizes_at_their_largest(dev):
    """The largest sizes the fields hold, as docs/hardware.md bounds them: RB_SIZE.LOG2_QWORDS
    31 is a ring of 2^32 dwords, the pointers' whole range, where no doorbell overflows (30:
    2^31 dwords, one that is more than that ahead of rptr does); IH_SIZE.LOG2_DWORDS 30 and 31
    are an IH ring of 2^32 bytes that is never full (an IH_RPTR ahead of IH_WPTR is not full
    there; at 29 it is); SDMA_RB_CNTL.RB_SIZE 31 acts as 20."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 31, IH_WB)
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
    for log2 in (31, 30):
        ring = Ring(g, RING, log2 + 1, RPTR_WB)
        assert g.fields("RB_SIZE")["LOG2_QWORDS"] == log2
        ring.doorbell(0x7FFF_FFF0)  # halted: nothing runs; rptr stays 0
        assert g.read("RB_WPTR") == 0x7FFF_FFF0 and g.fields("STATUS")["ERROR"] == 0
        ring.doorbell(0x8000_0008)  # 2^31 + 8 dwords ahead of rptr
        if log2 == 31:
            g.dev.delay(40)
            st = g.fields("STATUS")
            assert st["ERROR"] == 0 and g.read("RB_WPTR") == 0x8000_0008, "2^32 dwords: no overflow"
        else:
            st, err = g.idle(), g.fields("CP_ERROR")
            assert st["ERROR"] == 1 and err["CODE"] == g.err["DOORBELL_OVERFLOW"], (st, err)
            assert g.read("CP_ERROR_ADDR_LO") == 0x8000_0008 and g.read("RB_WPTR") == 0x7FFF_FFF0
        g.set("CP_QUEUE_RESET", Q0=1)
        st = g.until(lambda: (lambda f: f if f["IDLE"] else None)(g.fields("STATUS")), "queue 0 reset")
        assert (st["ERROR"], g.read("RB_RPTR"), g.read("RB_WPTR")) == (0, 0, 0), st
        g.set("RB_CNTL", ENABLE=0)
    g.set("CONTROL", HALT=0)
    ih.pop()
    g.write("INT_STATUS", M32)
    ring = Ring(g, RING, 32, RPTR_WB)
    ring.run(release_mem(OUT, 1, INT_SEL="SEND_INT", INT_CTXID=1), write_data(OUT + 4, [2]))
    assert g.r32(OUT, 2) == [1, 2] and g.read("RB_RPTR") == ring.wptr == g.r32(RPTR_WB)
    # the IH ring of 2^33 bytes (31) and 2^32 (30): an IH_RPTR ahead of IH_WPTR is not full
    for log2 in (31, 30, 29):
        g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
        g.set("IH_SIZE", LOG2_DWORDS=log2)
        g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
        w = g.read("IH_WPTR")
        g.write("IH_RPTR", w + 32)
        ring.run(release_mem(OUT, 0x10 + log2, INT_SEL="SEND_INT", INT_CTXID=log2))
        ovf = g.field("INT_STATUS", "IH_OVERFLOW")
        if log2 >= 30:
            assert (ovf, g.read("IH_WPTR"), g.r32(IH_BASE + w + 16)) == (0, w + 32, log2), \
                f"IH_SIZE {log2}: entry at base + IH_WPTR, never full"
        else:
            assert (ovf, g.read("IH_WPTR")) == (1, w), "IH_SIZE 29: an IH_RPTR ahead is full"
        g.write("IH_RPTR", g.read("IH_WPTR"))
        g.write("INT_STATUS", M32)
    # SDMA_RB_CNTL.RB_SIZE 31 acts as 20 (4 MiB of ring): 4 MiB ahead is taken, 4 more bytes not
    s = SdmaRing(g, SRING, 31)
    assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 31
    g.set("SDMA_CNTL", HALT=1)
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED")
    g.write("SDMA_DOORBELL", 4 << 20)
    g.dev.delay(20)
    assert g.read("SDMA_RB_WPTR") == 4 << 20 and g.fields("SDMA_STATUS")["ERROR"] == 0
    g.set("SDMA_CNTL", QUEUE_RESET=1, HALT=1)
    g.until(lambda: g.read("SDMA_RB_WPTR") == 0 and g.fields("SDMA_STATUS")["IDLE"], "the SDMA reset")
    g.write("SDMA_DOORBELL", (4 << 20) + 4)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1 and g.fields("SDMA_ERROR")["CODE"] == g.err["DOORBELL_OVERFLOW"], st
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    s.run(sdma("FENCE", DATA=0x99, **lo_hi("ADDR", OUT + 8, 2)))
    assert g.r32(OUT + 8) == 0x99



def check_errors_after_the_ring_wrapped_name_the_header_where_it_lies(dev):
    """A packet error in a ring whose pointers have passed its size (docs/hardware.md, Errors:
    ADDR the header's byte address, OFFSET its dword offset from the ring's start, masked):
    after a 16-dword ring has wrapped twice, an UNSUPPORTED WRITE_DATA whose header is the
    ring's dword 13 and whose payload runs on over the ring's end names RB_BASE + 52 and
    offset 13 (not the free-running 45 that RB_RPTR keeps), a BAD_COUNT at dword 14 and an
    ILLEGAL_OPCODE at dword 15 likewise; the IH entry carries the same; on queue 0, queue 1
    and the SDMA (its pointers in bytes, SDMA_ERROR_OFFSET the rptr in dwords, masked)."""
    from tests.model.contract.contract_driver import (expect_error, expect_sdma_error, pm4, pm4_packets,
                                                      sdma_packets)
    g, ring0, ih = bring_up(dev, ring_log2=4)
    ring1 = Ring(g, RING1, 4, RPTR1_WB, queue=1)
    P, S = pm4_packets(), sdma_packets()
    unsupported = write_data(OUT, [1], DST_SEL="REGISTER")
    too_long = write_data(OUT, [1])
    too_long[0] += 4 << 16  # COUNT 4 more than the dwords written
    cases = ((unsupported, "UNSUPPORTED", P["WRITE_DATA"].opcode, 13),
             (too_long, "BAD_COUNT", P["WRITE_DATA"].opcode, 14),
             ([0xC000_2A00, 0], "ILLEGAL_OPCODE", 0x2A, 15))
    for ring in (ring0, ring1):
        for words, code, opcode, at in cases:
            done = 0
            for n in (16, 16, at):  # NOPs up to the ring's dword `at`, twice round
                ring.run(pm4("NOP", [0] * (n - 1)))
                done += n
            assert g.read(ring.p + "RPTR") == done == 32 + at
            ring.submit(words)
            g.idle(ring.status)
            assert (g.read(ring.p + "RPTR"), g.read(ring.p + "WPTR")) == (done, done + len(words)), code
            expect_error(ring, ih, code, "RING", opcode, RING + 4 * at if ring is ring0 else RING1 + 4 * at, at)
    s = SdmaRing(g, SRING, 4, SRPTR_WB)
    fence = sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2))
    misaligned = [fence[0], fence[1] | 2] + fence[2:]
    wl = sdma("WRITE_LINEAR", [1], COUNT=0, **lo_hi("DST_ADDR", OUT, 2))
    wl_long = wl[:3] + [wl[3] | 4]  # COUNT 4: data dwords past the doorbell
    for words, code, op, at in ((misaligned, "FENCE_MISALIGNED", S["FENCE"].opcode, 13),
                                (wl_long, "BAD_COUNT", S["WRITE_LINEAR"].opcode, 14),
                                ([0x0000_0003], "ILLEGAL_OPCODE", 3, 15)):
        for n in (16, 16, at):
            s.run(sdma("NOP", [0] * (n - 1), COUNT=n - 1))
        assert g.read("SDMA_RB_RPTR") == 4 * (32 + at)
        s.submit(words)
        g.idle("SDMA_STATUS")
        assert g.read("SDMA_RB_RPTR") == 4 * (32 + at), code
        expect_sdma_error(s, ih, code, "RING", op, SRING + 4 * at, at)


CHECKS = [check_ring_enable_pauses_at_a_packet_boundary, check_ring_base_and_size_are_locked_while_enabled,
          check_ring_enable_cleared_mid_packet_pauses_at_a_packet_boundary,
          check_rptr_write_back_address_is_locked_while_enabled,
          check_ih_wptr_write_back_address_is_locked_while_enabled, check_ring_and_ih_sizes_at_their_largest,
          check_errors_after_the_ring_wrapped_name_the_header_where_it_lies]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
