"""The contract, checked by an outside driver writer: tests/model/contract_driver.py programs
the device from docs/registers.md, docs/packets.md and docs/hardware.md alone (no project
driver or spec code), and each check below asserts the numbers those pages state as exact:
bit positions, reset values, IH entry dwords, error codes and what they latch, wrap rules,
"ignored while ...".

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract_driver import Gpu, IhRing, Ring, SdmaRing, lo_hi, pm4, pm4_packets, sdma, sdma_packets

RING, RING1, SRING = 0x10000, 0x11000, 0x12000
RPTR_WB, RPTR1_WB, SRPTR_WB, IH_WB = 0x8000, 0x8040, 0x8080, 0x80C0
IH_BASE = 0x20000
OUT = 0x40000
IB1, IB1B, IB2 = 0x50000, 0x51000, 0x52000
M32 = 0xFFFF_FFFF


def write_data(addr, data, **kw):
    return pm4("WRITE_DATA", data, **lo_hi("ADDR", addr, 2), DST_SEL=kw.pop("DST_SEL", "MEMORY"), **kw)


def release_mem(addr, data=0, **kw):
    kw.setdefault("DATA_SEL", "DATA_32")
    return pm4("RELEASE_MEM", **lo_hi("ADDR", addr, 2), DATA_LO=data & M32, DATA_HI=data >> 32,
               EVENT_TYPE=0x14, EVENT_INDEX="END_OF_PIPE", **kw)


def ib(base, size, **kw):
    return pm4("INDIRECT_BUFFER", **lo_hi("IB_BASE", base, 2), IB_SIZE=size, **kw)


def wait_mem(addr, ref, mask, function, interval=4):
    return pm4("WAIT_REG_MEM", **lo_hi("ADDR", addr, 2), REFERENCE=ref, MASK=mask, FUNCTION=function,
               MEM_SPACE="MEMORY", POLL_INTERVAL=interval)


def dma_data(dst, src, n, **kw):
    return pm4("DMA_DATA", **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst), BYTE_COUNT=n, **kw)


def bring_up(dev, ring_log2=8, ih_log2=6):
    """docs/hardware.md's order: the IH ring, then the ring (base, size, write-back, ENABLE)."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, ih_log2, IH_WB)
    return g, Ring(g, RING, ring_log2, RPTR_WB), ih


def expect_error(ring: Ring, ih: IhRing, code: str, level: str, opcode: int, addr: int, offset: int):
    """The queue stopped with exactly this CP_ERROR; its IH entry carries the registers; then
    CP_QUEUE_RESET of that queue clears it and the driver starts again at wptr 0."""
    g = ring.gpu
    st = g.idle(ring.status)
    assert st["ERROR"] == 1, f"{ring.status} {st}: expected a stop with {code}"
    err, got_addr, got_off = ring.error_regs()
    want = {"CODE": g.err[code], "LEVEL": g.level[level], "OPCODE": opcode}
    assert (err, got_addr, got_off) == (want, addr, offset), \
        f"{code}: {ring.error}={err} addr={got_addr:#x} offset={got_off}, expected {want} {addr:#x} {offset}"
    assert g.field("INT_STATUS", "CP_ERROR") == 1
    entries = ih.pop()
    q = 0 if ring.p == "RB_" else 1
    if code != "VM_FAULT":
        assert len(entries) == 1 and ih.source(entries[0]) == "CP_ERROR", entries
        e = entries[0]
        raw_err = g.read(ring.error)
        assert (e["RING_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
            (q, raw_err, addr & M32, addr >> 32, offset), e
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    g.set("CP_QUEUE_RESET", **{f"Q{q}": 1})
    st = g.idle(ring.status)
    assert st["ERROR"] == 0 and g.read(ring.error) == 0 and g.read(ring.p + "RPTR") == 0 \
        and g.read(ring.p + "WPTR") == 0, f"CP_QUEUE_RESET.Q{q} left {st}"
    ring.wptr = 0
    return entries


# ---------------------------------------------------------------------------- ring, doorbell, write-back

def check_ring_doorbell_and_writeback(dev):
    """Ring units (base >> 8, log2 qwords, dword pointers), the write-back, the wrap, the
    doorbell ignored while ENABLE is clear, pads, and the counters that count them."""
    g, ring, ih = bring_up(dev, ring_log2=5)  # 32 dwords: LOG2_QWORDS 4
    assert g.fields("RB_SIZE") == {"LOG2_QWORDS": 4}
    assert (g.read("RB_RPTR"), g.read("RB_WPTR")) == (0, 0)
    g.w32(RPTR_WB, [0xDEAD])
    nops = pm4_packets()["NOP"].index
    # WRITE_DATA: consecutive dwords; NO_INCREMENT writes only the last dword, to addr.
    g.w32(OUT, [0x11] * 8)
    ring.run(write_data(OUT, [1, 2, 3]), write_data(OUT + 16, [7, 8, 9], ADDR_INCR="NO_INCREMENT"),
             [0xFFFF1000], [0x80000000 | 0x1234], pm4("NOP", [5, 6]))
    assert g.r32(OUT, 8) == [1, 2, 3, 0x11, 9, 0x11, 0x11, 0x11]
    want = 7 + 7 + 1 + 1 + 3
    assert (g.read("RB_RPTR"), g.read("RB_WPTR"), g.r32(RPTR_WB)) == (want, want, want)
    st = g.fields("STATUS")
    assert (st["IDLE"], st["RB_EMPTY"], st["ERROR"], st["WAITING"], st["LEVEL"]) == (1, 1, 0, 0, 0), st
    assert g.read("PERF_PACKETS", pm4_packets()["WRITE_DATA"].index) == 2
    assert g.read("PERF_PACKETS", nops) == 3, "NOP_PAD and a type-2 dword count as NOPs"
    assert g.read("PERF_DWORDS_FETCHED") == want
    # PREDICATE and SHADER_TYPE (header bits 0 and 1) are ignored.
    p = write_data(OUT + 20, [0x77])
    ring.run([p[0] | 3] + p[1:])
    assert g.r32(OUT + 20) == 0x77
    # The wrap: a packet crossing the ring's end continues at its start (dword i at i mod 32).
    ring.run(*[pm4("NOP", [0] * 2)] * ((32 - ring.wptr % 32 - 2) // 3))
    ring.run(write_data(OUT + 24, [0xA, 0xB, 0xC, 0xD, 0xE]))
    assert g.r32(OUT + 24, 5) == [0xA, 0xB, 0xC, 0xD, 0xE] and ring.wptr % 32 < 9
    assert g.r32(RPTR_WB) == ring.wptr == g.read("RB_RPTR")
    # A doorbell while RB_CNTL.ENABLE is clear is ignored: RB_WPTR keeps its value.
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    before = g.read("RB_WPTR")
    ring.submit(write_data(OUT + 48, [0x99]))
    g.dev.delay(200)
    assert g.read("RB_WPTR") == before and g.r32(OUT + 48) != 0x99
    assert g.fields("STATUS")["ERROR"] == 0
    g.set("RB_CNTL", ENABLE=1, RPTR_WB=1)
    ring.doorbell()
    g.idle()
    assert g.r32(OUT + 48) == 0x99
    # The base's high register holds address bits 47:40: it reads back what was written.
    assert g.read("RB_BASE_LO") == RING >> 8 and g.read("RB_BASE_HI") == 0
    assert ih.pop() == [], "nothing here raises an interrupt"


def check_doorbell_errors(dev):
    """DOORBELL_BACKWARDS / DOORBELL_OVERFLOW latch ADDR = the value, OFFSET = rptr masked,
    LEVEL RING, OPCODE 0; a doorbell while stopped is ignored (no second error); a wptr
    exactly `size` ahead of rptr is accepted."""
    g, ring, ih = bring_up(dev, ring_log2=4)  # 16 dwords
    ring.run(*[pm4("NOP", [0] * 4)] * 3)  # rptr = wptr = 15: masked offset 15
    assert g.read("RB_RPTR") == 15
    ring.doorbell(14)
    g.dev.delay(50)
    ring.doorbell(40)  # ignored: the queue is stopped
    assert g.read("RB_WPTR") == 15
    expect_error(ring, ih, "DOORBELL_BACKWARDS", "RING", 0, 14, 15)
    ring.run(*[pm4("NOP", [0] * 4)] * 2)  # rptr 10
    ring.doorbell(10 + 17)
    expect_error(ring, ih, "DOORBELL_OVERFLOW", "RING", 0, 27, 10)
    ring.emit(*[pm4("NOP", [0] * 2)] * 5, [0xFFFF1000])  # exactly 16 dwords ahead: accepted
    ring.doorbell()
    assert g.idle()["ERROR"] == 0 and g.read("RB_RPTR") == 16
    # The wrap of the free-running 32-bit pointers: (int32)(v - wptr) < 0 is backwards.
    ring.doorbell(16 + 0x8000_0000)
    expect_error(ring, ih, "DOORBELL_BACKWARDS", "RING", 0, 0x8000_0010, 0)


# ---------------------------------------------------------------------------- packets and their errors

def check_ib_levels_and_chain(dev):
    """ring -> IB1 -> IB2, CHAIN inside an IB, VALID ignored; rptr moves past the IB packet
    only when the whole IB has run; IB errors with their order and what they latch."""
    g, ring, ih = bring_up(dev)
    ib2 = write_data(OUT + 8, [0x22])
    chained = write_data(OUT + 4, [0x1B])
    ib1 = write_data(OUT, [0x1A]) + ib(IB2, len(ib2)) + ib(IB1B, len(chained), CHAIN=1, VALID=1)
    g.w32(IB2, ib2)
    g.w32(IB1B, chained)
    g.w32(IB1, ib1 + write_data(OUT + 12, [0xBAD]))  # after the CHAIN: never runs
    ring.run(ib(IB1, len(ib1) + 5), write_data(OUT + 16, [0x55]))
    assert g.r32(OUT, 5) == [0x1A, 0x1B, 0x22, 0, 0x55]
    assert g.read("PERF_PACKETS", pm4_packets()["INDIRECT_BUFFER"].index) == 3
    # Errors in IBs: LEVEL where the packet was fetched, OFFSET from its IB's start, ADDR its header.
    g.w32(IB2, [0xC0000000 | 0x2A << 8, 0])  # opcode 0x2A is not implemented
    g.w32(IB1, pm4("NOP", [0]) + ib(IB2, 2))
    ring.submit(ib(IB1, 6))
    expect_error(ring, ih, "ILLEGAL_OPCODE", "IB2", 0x2A, IB2, 0)
    g.w32(IB1, [0xFFFF1000] + ib(IB2, 4) + ib(IB2, 4))
    g.w32(IB2, ib(IB1B, 1) * 2)  # an IB3
    ring.submit(ib(IB1, 9))
    expect_error(ring, ih, "IB_NESTING", "IB2", pm4_packets()["INDIRECT_BUFFER"].opcode, IB2, 0)
    op = pm4_packets()["INDIRECT_BUFFER"].opcode
    ring.submit(ib(IB1, 4, CHAIN=1))  # CHAIN in the ring
    expect_error(ring, ih, "UNSUPPORTED", "RING", op, RING, 0)
    ring.submit(ib(IB1, 0))
    expect_error(ring, ih, "IB_SIZE_ZERO", "RING", op, RING, 0)
    p = ib(IB1, 0)
    p[1] |= 1  # IB_BASE_LO bits 1:0: alignment, checked before IB_SIZE
    ring.submit(p)
    expect_error(ring, ih, "IB_MISALIGNED", "RING", op, RING, 0)
    ring.submit(ib(IB1 | 0x1_0000 << 32, 4))  # IB_BASE_HI beyond the bus's 48 bits
    expect_error(ring, ih, "BUS_DECERR", "RING", op, IB1, 0)
    # rptr passes an IB only when it has finished: an IB that waits keeps rptr at the packet.
    g.w32(OUT + 32, [0])
    g.w32(IB1, wait_mem(OUT + 32, 1, 1, "EQ") + write_data(OUT + 36, [0x66]))
    ring.submit(pm4("NOP", [0]), ib(IB1, 12))
    g.dev.delay(300)
    st = g.fields("STATUS")
    assert (st["WAITING"], st["LEVEL"], st["IDLE"]) == (1, g.level["IB1"], 0), st
    assert g.read("RB_RPTR") == 2 == g.r32(RPTR_WB), "rptr moved past an IB still running"
    g.w32(OUT + 32, [1])
    g.idle()
    assert g.r32(OUT + 36) == 0x66 and g.read("RB_RPTR") == 6 == g.r32(RPTR_WB)


def check_packet_checks(dev):
    """The check order of docs/hardware.md (opcode, COUNT, fits, field values, alignment)
    and what each error latches, on the ring."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    ring.submit([0x00001234])  # a type-0 header
    expect_error(ring, ih, "ILLEGAL_OPCODE", "RING", 0, RING, 0)
    ring.submit(pm4("NOP", [0]), [0xC0002A00 | 0x3FFF << 16])  # unknown opcode before any COUNT check
    expect_error(ring, ih, "ILLEGAL_OPCODE", "RING", 0x2A, RING + 8, 2)
    w = wait_mem(OUT, 0, 0, "ALWAYS")
    ring.submit([w[0] + (1 << 16)] + w[1:] + [0])  # COUNT 6 for a 7-dword packet
    expect_error(ring, ih, "BAD_COUNT", "RING", P["WAIT_REG_MEM"].opcode, RING, 0)
    ring.emit(write_data(OUT, [1, 2]))
    ring.doorbell(ring.wptr - 1)  # the packet runs past wptr
    expect_error(ring, ih, "BAD_COUNT", "RING", P["WRITE_DATA"].opcode, RING, 0)
    ring.submit(write_data(OUT, [1], DST_SEL="REGISTER"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["WRITE_DATA"].opcode, RING, 0)
    # UNSUPPORTED (check 4) comes before alignment (check 5).
    p = write_data(OUT, [1], DST_SEL="GDS")
    p[2] |= 2
    ring.submit(p)
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["WRITE_DATA"].opcode, RING, 0)
    p = write_data(OUT, [1])
    p[2] |= 2
    ring.submit(p)
    expect_error(ring, ih, "FENCE_MISALIGNED", "RING", P["WRITE_DATA"].opcode, RING, 0)
    ring.submit(release_mem(OUT + 4, 1, DATA_SEL="DATA_64"))
    expect_error(ring, ih, "FENCE_MISALIGNED", "RING", P["RELEASE_MEM"].opcode, RING, 0)
    ring.submit(dma_data(OUT, OUT + 0x1000, (1 << 20) + 1))
    expect_error(ring, ih, "DMA_BYTE_COUNT", "RING", P["DMA_DATA"].opcode, RING, 0)
    # An address with bits above 47: BUS_DECERR at its low 48 bits, when the access is made.
    far = 0x0001_0000_0000_0000 | OUT
    ring.submit(pm4("NOP", [0]), write_data(far, [1]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["WRITE_DATA"].opcode, OUT, 2)
    assert g.read("VM_FAULT_STATUS") == 0
    ring.submit(wait_mem(far, 0, 0, "ALWAYS"))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["WAIT_REG_MEM"].opcode, OUT, 0)
    ring.submit(release_mem(far, 5))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["RELEASE_MEM"].opcode, OUT, 0)
    assert g.r32(OUT) == 0, "nothing was written"
    # A DMA_DATA drops its address bits above 47.
    g.w32(OUT + 0x100, [0xD1, 0xD2])
    ring.run(dma_data(far + 0x200, far + 0x100, 8, CP_SYNC=1))
    assert g.r32(OUT + 0x200, 2) == [0xD1, 0xD2]


def check_wait_reg_mem(dev):
    """(value & mask) FUNCTION ref, unsigned, polled until it holds; STATUS.WAITING meanwhile."""
    g, ring, ih = bring_up(dev)
    flag = OUT + 0x80
    cases = [("LT", M32, 5, [6, 4]), ("LE", 0xFF, 5, [6, 0x105]), ("EQ", 0xF0, 0x30, [0x20, 0x131]),
             ("NE", M32, 7, [7, 8]), ("GE", M32, 0x8000_0000, [0x7FFF_FFFF, 0x8000_0000]),
             ("GT", M32, 1, [1, 0x8000_0000])]
    for k, (fn, mask, ref, (hold, go)) in enumerate(cases):
        g.w32(flag, [hold])
        ring.submit(wait_mem(flag, ref, mask, fn), write_data(OUT + 4 * k, [0x100 + k]))
        g.dev.delay(200)
        assert g.fields("STATUS")["WAITING"] == 1 and g.r32(OUT + 4 * k) == 0, f"{fn} passed on {hold:#x}"
        g.w32(flag, [go])
        st = g.idle()
        assert st["WAITING"] == 0 and g.r32(OUT + 4 * k) == 0x100 + k, f"{fn} did not pass on {go:#x}"
    ring.run(wait_mem(flag, 0, 0, "ALWAYS"))
    assert g.read("PERF_PACKETS", pm4_packets()["WAIT_REG_MEM"].index) == 7


# ---------------------------------------------------------------------------- RELEASE_MEM and the IH ring

def check_release_mem_and_eop_entry(dev):
    """Each DATA_SEL writes what docs/hardware.md says; INT_SEL 1 and 2 append an EOP entry
    (client 0x14, source 181, DATA0-3 = INT_CTXID, DATA_LO, DATA_HI, the ADDR_LO dword) and set
    INT_STATUS.EOP; INT_SEL 0 and 3 do not."""
    g, ring, ih = bring_up(dev)
    fence = OUT + 0x100
    g.w32(fence, [0xAAAA, 0xBBBB])
    ring.run(release_mem(fence, 0x1_0000_0002, DATA_SEL="NONE", INT_SEL="NONE"))
    assert g.r32(fence, 2) == [0xAAAA, 0xBBBB] and ih.pop() == []
    ring.run(release_mem(fence, 0x3_0000_0004, DATA_SEL="DATA_32", INT_SEL="SEND_DATA_ON_CONFIRM"))
    assert g.r32(fence, 2) == [4, 0xBBBB], "DATA_32 writes DATA_LO alone"
    assert ih.pop() == [] and g.field("INT_STATUS", "EOP") == 0
    t0 = g.read("TIMESTAMP_LO") | g.read("TIMESTAMP_HI") << 32
    ring.run(release_mem(fence, 0x5_0000_0006, DATA_SEL="DATA_64", INT_SEL="SEND_INT", INT_CTXID=0xC0FFEE))
    assert g.r32(fence, 2) == [6, 5]
    assert g.field("INT_STATUS", "EOP") == 1 and g.field("INT_STATUS", "IH_PENDING") == 1
    (e,) = ih.pop()
    t1 = g.read("TIMESTAMP_LO") | g.read("TIMESTAMP_HI") << 32
    assert ih.source(e) == "EOP" and (e["CLIENT_ID"], e["SOURCE_ID"]) == (0x14, 181)
    assert (e["RING_ID"], e["VMID"], e["VMID_SRC"], e["PASID"]) == (0, 0, 0, 0)
    assert (e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == (0xC0FFEE, 6, 5, fence), e
    ts = e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
    assert t0 <= ts <= t1, f"entry timestamp {ts} outside [{t0}, {t1}]"
    raw = e["raw"]
    assert raw[0] >> 28 & 7 == 0 and raw[2] & 0x7FFF_0000 == 0 and raw[3] >> 16 == 0, \
        f"bits no field names are 0: {[hex(x) for x in raw]}"
    assert g.field("INT_STATUS", "IH_PENDING") == 0, "IH_PENDING = IH_WPTR != IH_RPTR"
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    ring.run(release_mem(fence, 0x7_0000_0008, DATA_SEL="TIMESTAMP", INT_SEL="SEND_INT_ON_CONFIRM", INT_CTXID=9))
    t2 = g.read("TIMESTAMP_LO") | g.read("TIMESTAMP_HI") << 32
    clock = g.r32(fence) | g.r32(fence + 4) << 32
    assert t1 <= clock <= t2 and clock >> 48 == 0, f"TIMESTAMP wrote {clock:#x}, not the clock in [{t1}, {t2}]"
    (e,) = ih.pop()
    assert ih.source(e) == "EOP" and (e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == (9, 8, 7, fence)
    assert g.field("INT_STATUS", "EOP") == 1
    # The ADDR_LO dword, all 32 bits: a 64-bit address's high half is not in DATA3.
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))


def check_ih_ring_wrap_and_overflow(dev):
    """IH pointers in bytes, 32 per entry, the entry at base + (IH_WPTR mod bytes), the
    write-back, a full ring drops the entry and sets IH_OVERFLOW, the irq with IH_PENDING
    only, and IH_SIZE below 3 acting as 3."""
    g, ring, ih = bring_up(dev, ih_log2=4)  # 16 dwords: two entries
    assert g.read("IH_SIZE") == 4 and g.read("IH_WPTR") == 0
    g.set("INT_ENABLE", IH_PENDING=1)
    eop = lambda k: release_mem(OUT, k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731
    ring.run(eop(1))
    assert (g.read("IH_WPTR"), g.r32(IH_WB)) == (32, 32) and g.dev.irq_level()
    ring.run(eop(2), eop(3))  # the third finds the ring full (64 - 0 >= 64)
    assert g.read("IH_WPTR") == 64 and g.r32(IH_WB) == 64
    st = g.fields("INT_STATUS")
    assert (st["IH_OVERFLOW"], st["IH_PENDING"], st["EOP"]) == (1, 1, 1), st
    assert [e["DATA0"] for e in ih.pop()] == [1, 2], "the third entry was dropped"
    assert g.read("IH_RPTR") == 64 and g.field("INT_STATUS", "IH_PENDING") == 0
    assert not g.dev.irq_level(), "irq with only IH_PENDING enabled is high exactly while entries are pending"
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1, EOP=1))
    ring.run(eop(4), eop(5))  # wptr 64, 96: at ring offsets 0 and 32
    assert g.r32(IH_BASE + 16) == 4 and g.r32(IH_BASE + 48) == 5
    assert [e["DATA0"] for e in ih.pop()] == [4, 5] and g.field("INT_STATUS", "IH_OVERFLOW") == 0
    # LOG2_DWORDS below 3 acts as 3 (one entry); the register reads back what was written.
    g.set("IH_SIZE", LOG2_DWORDS=1)
    assert g.read("IH_SIZE") == 1
    ring.run(eop(6), eop(7))
    assert g.read("IH_WPTR") == 160 and g.field("INT_STATUS", "IH_OVERFLOW") == 1
    assert g.r32(IH_BASE + 16) == 6 and g.r32(IH_BASE + 32 + 16) == 5, "entry at base + (wptr mod 32)"
    # Without WPTR_WB the write-back dword stays; without ENABLE no entry is written.
    g.write("IH_RPTR", 160)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=0)
    ring.run(eop(8))
    assert g.read("IH_WPTR") == 192 and g.r32(IH_WB) == 160
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    ring.run(eop(9))
    assert g.read("IH_WPTR") == 192 and g.field("INT_STATUS", "EOP") == 1


# ---------------------------------------------------------------------------- the DMA engine

def check_dma_data(dev):
    """Copies at any alignment, fills (byte a gets byte a mod 4), zero length, the fence after
    DMA work sees the data, the byte counters."""
    g, ring, ih = bring_up(dev)
    src, dst = 0x100000, 0x200000
    pattern = [(0x01020304 * k) & M32 for k in range(64)]
    g.w32(src, pattern)
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(dst + 3, src + 1, 101), release_mem(OUT, 0xF00D, INT_SEL="SEND_INT"))
    want = bytes(g.dev.mem[src + 1:src + 102])
    assert bytes(g.dev.mem[dst + 3:dst + 104]) == want and g.dev.mem[dst + 2] == 0 and g.dev.mem[dst + 104] == 0
    assert g.r32(OUT) == 0xF00D and len(ih.pop()) == 1
    assert g.read("PERF_DMA_BYTES_WRITTEN") == 101
    ring.run(dma_data(dst + 0x1001, 0x11223344, 10, SRC_SEL="DATA"), dma_data(dst + 0x2000, src, 0))
    got = bytes(g.dev.mem[dst + 0x1000:dst + 0x100C])
    assert got == bytes([0, 0x33, 0x22, 0x11, 0x44, 0x33, 0x22, 0x11, 0x44, 0x33, 0x22, 0]), got.hex()
    assert g.r32(dst + 0x2000) == 0, "a zero-length transfer moves nothing"
    assert g.read("PERF_DMA_BYTES_WRITTEN") == 111
    assert g.read("PERF_PACKETS", pm4_packets()["DMA_DATA"].index) == 3
    st = g.fields("STATUS")
    assert (st["DMA_BUSY"], st["IDLE"]) == (0, 1)


# ---------------------------------------------------------------------------- the SDMA engine

def check_sdma_ring_and_packets(dev):
    """Byte pointers, RB_SIZE clamping, every packet, TRAP with and without TRAP_ENABLE,
    POLL_REGMEM's timeout entry, the counters by packet index."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    assert g.read("SDMA_RB_CNTL") == 0x8 and g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 4
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    S = sdma_packets()
    src, dst = 0x100000, 0x200000
    g.w32(src, list(range(100, 140)))
    s.run(sdma("WRITE_LINEAR", [5, 6, 7], **lo_hi("DST_ADDR", OUT, 2), COUNT=2),
          sdma("COPY_LINEAR", COUNT=37, **lo_hi("SRC_ADDR", src + 2), **lo_hi("DST_ADDR", dst + 1)),
          sdma("CONSTANT_FILL", SRC_DATA=0xA1B2C3D4, COUNT=5, **lo_hi("DST_ADDR", dst + 0x101)),
          sdma("NOP", [0, 0], COUNT=2), [0],
          sdma("FENCE", DATA=0xFE, **lo_hi("ADDR", OUT + 12, 2)))
    assert g.r32(OUT, 4) == [5, 6, 7, 0xFE]
    assert bytes(g.dev.mem[dst + 1:dst + 39]) == bytes(g.dev.mem[src + 2:src + 40])
    assert bytes(g.dev.mem[dst + 0x100:dst + 0x108]) == bytes([0, 0xC3, 0xB2, 0xA1, 0xD4, 0xC3, 0xB2, 0])
    n = 4 * (7 + 7 + 5 + 3 + 1 + 4)
    assert (g.read("SDMA_RB_RPTR"), g.read("SDMA_RB_WPTR"), g.r32(SRPTR_WB)) == (n, n, n)
    assert [g.read("PERF_SDMA_PACKETS", S[k].index) for k in ("NOP", "COPY_LINEAR", "WRITE_LINEAR",
                                                              "CONSTANT_FILL", "FENCE")] == [2, 1, 1, 1, 1]
    assert (g.read("PERF_SDMA_BYTES_WRITTEN"), g.read("PERF_SDMA_DWORDS_FETCHED")) == (38 + 6, n // 4)
    # TRAP: an entry only while SDMA_CNTL.TRAP_ENABLE is set.
    s.run(sdma("TRAP", INT_CONTEXT=0x123))
    assert ih.pop() == []
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.run(sdma("TRAP", INT_CONTEXT=0xABCDEF1))
    (e,) = g.until(lambda: ih.pop() or None, "the TRAP entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 224, 0xABCDEF1, 0, 0, 0), e
    # POLL_REGMEM with RETRY_COUNT 2: gives up at the third failing read, entry 246, moves on.
    flag = OUT + 0x40
    g.w32(flag, [0x1234])
    s.run(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
               RETRY_COUNT=2, INTERVAL=1), sdma("FENCE", DATA=0xAF, **lo_hi("ADDR", OUT + 16, 2)))
    (e,) = g.until(lambda: ih.pop() or None, "the POLL_TIMEOUT entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 246, flag, 0, 0x1234, 0), e
    assert g.r32(OUT + 16) == 0xAF and g.fields("SDMA_STATUS")["ERROR"] == 0
    # A poll in progress shows SDMA_STATUS.WAITING; it ends when the value holds.
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1))
    g.dev.delay(200)
    assert g.fields("SDMA_STATUS")["WAITING"] == 1
    g.w32(flag, [0x1235])
    assert g.idle("SDMA_STATUS")["WAITING"] == 0
    # Doorbell bits 1:0 are ignored.
    s.emit(sdma("FENCE", DATA=0xB0, **lo_hi("ADDR", OUT + 20, 2)))
    g.write("SDMA_DOORBELL", s.wptr | 3)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 20) == 0xB0 and g.read("SDMA_RB_WPTR") == s.wptr


def expect_sdma_error(s: SdmaRing, ih: IhRing, code: str, level: str, op: int, addr: int, offset: int):
    g = s.gpu
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1, st
    err = g.fields("SDMA_ERROR")
    got = (err["CODE"], err["LEVEL"], err["OP"], err["SUB_OP"],
           g.read("SDMA_ERROR_ADDR_LO") | g.read("SDMA_ERROR_ADDR_HI") << 32, g.read("SDMA_ERROR_OFFSET"))
    assert got == (g.err[code], g.level[level], op, 0, addr, offset), f"{code}: {got}"
    (e,) = g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 241, g.read("SDMA_ERROR"), addr & M32, addr >> 32, offset), e
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 0 and g.read("SDMA_ERROR") == 0 and g.read("SDMA_RB_RPTR") == 0 == g.read("SDMA_RB_WPTR")
    s.wptr = 0


def check_sdma_errors(dev):
    """The SDMA queue's own errors: what SDMA_ERROR* latch, the 241 entry, QUEUE_RESET,
    RB_SIZE outside 4..20 acting as the bound, IB rules; the CP runs on meanwhile."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    ring = Ring(g, RING, 8, RPTR_WB)
    s = SdmaRing(g, SRING, 4)
    S = sdma_packets()
    s.submit([0x0000_0003])  # OP 3 is not in the table
    expect_sdma_error(s, ih, "ILLEGAL_OPCODE", "RING", 3, SRING, 0)
    ring.run(write_data(OUT, [0xC9]))
    assert g.r32(OUT) == 0xC9 and g.fields("STATUS")["ERROR"] == 0, "the CP is untouched"
    s.emit(sdma("NOP", [0]), sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2), MTYPE=0))
    g.w32(SRING + 12, [OUT | 2])  # ADDR_LO bits 1:0
    g.write("SDMA_DOORBELL", s.wptr)
    expect_sdma_error(s, ih, "FENCE_MISALIGNED", "RING", S["FENCE"].opcode, SRING + 8, 2)
    s.emit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=4))
    g.w32(SRING + 4, [IB1 + 0x10])  # IB_BASE_LO bits 4:0
    g.write("SDMA_DOORBELL", s.wptr)
    expect_sdma_error(s, ih, "IB_MISALIGNED", "RING", S["INDIRECT_BUFFER"].opcode, SRING, 0)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=0))
    expect_sdma_error(s, ih, "IB_SIZE_ZERO", "RING", S["INDIRECT_BUFFER"].opcode, SRING, 0)
    inner = sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB2, 5), IB_SIZE=1)
    g.w32(IB1, [0] + inner)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=7))
    expect_sdma_error(s, ih, "IB_NESTING", "IB1", S["INDIRECT_BUFFER"].opcode, IB1 + 4, 1)
    # RB_SIZE 2 acts as 4 (16 dwords, 64 bytes) and reads back 2.
    g.set("SDMA_RB_CNTL", RB_SIZE=2, RB_ENABLE=1)
    assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 2
    g.w32(SRING, [0] * 16)
    g.write("SDMA_DOORBELL", 64)  # 16 NOPs (zeros) are ring space exactly: accepted
    assert g.idle("SDMA_STATUS")["ERROR"] == 0 and g.read("SDMA_RB_RPTR") == 64
    g.write("SDMA_DOORBELL", 64 + 68)
    expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, 132, 0)
    g.write("SDMA_DOORBELL", 0)
    g.dev.delay(20)
    g.write("SDMA_DOORBELL", 8)
    g.idle("SDMA_STATUS")
    g.write("SDMA_DOORBELL", 4)
    expect_sdma_error(s, ih, "DOORBELL_BACKWARDS", "RING", 0, 4, 2)


# ---------------------------------------------------------------------------- the second CP queue

def check_cp_queue_priority(dev):
    """CP_QUEUE_PRIORITY decides which queue's packet runs next (seen in the order of EOP
    entries); a polling queue never blocks the other; errors are per queue with RING_ID."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    assert g.fields("CP_QUEUE_PRIORITY") == {"Q0": 1, "Q1": 2} and g.read("CP_QUEUE_PRIORITY") == 0x9
    eop = lambda k: release_mem(OUT + 4 * k, k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731

    def order(p0, p1):
        g.set("CP_QUEUE_PRIORITY", Q0=p0, Q1=p1)
        g.set("CONTROL", HALT=1)
        g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
        q0.submit(eop(0x00), eop(0x01))
        q1.submit(eop(0x10), eop(0x11))
        g.set("CONTROL", HALT=0)
        g.idle()
        g.idle("CP_HQD1_STATUS")
        seen = []
        g.until(lambda: seen.extend(ih.pop()) or len(seen) >= 4, "four EOP entries")
        assert all(ih.source(e) == "EOP" for e in seen) and len(seen) == 4, seen
        return [e["DATA0"] for e in seen]

    assert order(1, 2) == [0x10, 0x11, 0x00, 0x01]
    assert order(2, 0) == [0x00, 0x01, 0x10, 0x11]
    assert order(3, 2) in ([0x00, 0x10, 0x01, 0x11], [0x10, 0x00, 0x11, 0x01]), "3 acts as 2: turns"
    # A queue polling a WAIT_REG_MEM never blocks the other, whatever its priority.
    g.set("CP_QUEUE_PRIORITY", Q0=2, Q1=0)
    flag = OUT + 0x100
    g.w32(flag, [0])
    q0.submit(wait_mem(flag, 1, 1, "EQ"), write_data(OUT + 0x104, [0x0A]))
    q1.run(write_data(OUT + 0x108, [0x1A]))
    assert g.r32(OUT + 0x108) == 0x1A and g.fields("STATUS")["WAITING"] == 1
    g.w32(flag, [1])
    g.idle()
    assert g.r32(OUT + 0x104) == 0x0A
    # Errors are per queue: queue 1's stops queue 1 alone, RING_ID 1 in its entry.
    at = q1.wptr
    q1.submit([0xC0002A00])
    q0.run(write_data(OUT + 0x10C, [0x0B]))
    assert g.r32(OUT + 0x10C) == 0x0B and g.fields("STATUS")["ERROR"] == 0
    expect_error(q1, ih, "ILLEGAL_OPCODE", "RING", 0x2A, RING1 + 4 * at, at)
    q1.run(write_data(OUT + 0x110, [0x1C]))
    assert g.r32(OUT + 0x110) == 0x1C


# ---------------------------------------------------------------------------- virtual memory

PT_ROOT, PT_L1 = 0x80000, 0x81000
VALID, EXECUTABLE, READABLE, WRITEABLE, PDE_PTE = 1 << 0, 1 << 4, 1 << 5, 1 << 6, 1 << 54
VA_CODE, VA_OUT, VA_RO, VA_HOLE, VA_HUGE = 0x100000, 0x101000, 0x102000, 0x103000, 0x200000
PA_CODE, PA_OUT, PA_RO, PA_OUT2, PA_HUGE = 0x90000, 0x91000, 0x92000, 0x93000, 0x400000


def map_vmid1(g: Gpu) -> None:
    """Two levels of 512 8-byte entries: the root indexed by VA bits 29:21, a page table by
    20:12; addresses in entry bits 47:12; a root entry with PDE_PTE maps 2 MiB."""
    g.w64(PT_ROOT + 8 * (VA_CODE >> 21), PT_L1 | VALID)
    g.w64(PT_ROOT + 8 * (VA_HUGE >> 21), PA_HUGE | VALID | PDE_PTE | READABLE | WRITEABLE)
    for va, pa, bits in ((VA_CODE, PA_CODE, EXECUTABLE | READABLE), (VA_OUT, PA_OUT, WRITEABLE | READABLE),
                         (VA_RO, PA_RO, READABLE)):
        g.w64(PT_L1 + 8 * (va >> 12 & 511), pa | VALID | bits)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT, 1)
    g.write("VM_CONTEXT_PT_BASE_HI", 0, 1)
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=1)


def expect_fault(ring, ih, va, access, level, cause, opcode, offset, hint):
    g = ring.gpu
    g.idle()
    vs = g.fields("VM_FAULT_STATUS")
    raw_vs, raw_err = g.read("VM_FAULT_STATUS"), g.read("CP_ERROR")
    assert vs == {"VMID": 1, "ACCESS": access, "LEVEL": level, "CAUSE": cause}, f"{va:#x}: VM_FAULT_STATUS {vs}"
    assert g.read("VM_FAULT_ADDR_LO") | g.read("VM_FAULT_ADDR_HI") << 32 == va
    (e,) = expect_error(ring, ih, "VM_FAULT", "IB1", opcode, va, offset)
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["RING_ID"], e["VMID"]) == (0x1B, 0, 0, 1), e
    assert (e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        ((va >> 12) & M32, (va >> 44) & 0xF | hint, raw_vs, raw_err), e
    assert g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0, "CP_QUEUE_RESET.Q0 clears the fault"


def check_vm_translation_faults_and_invalidate(dev):
    """A VMID's page tables as the docs lay them out, the IB's VMID in its entries, every
    fault cause and access kind with what VM_FAULT_* and the UTCL2 entry hold, and an
    invalidation that makes a changed PTE seen."""
    g, ring, ih = bring_up(dev)
    assert g.fields("VM_CAPS") == {"LEVELS": 2, "VMIDS": 16, "TLB_LOG2": 4}
    map_vmid1(g)
    assert g.read("VM_CONTEXT_PT_BASE_LO", 1) == PT_ROOT
    P = pm4_packets()
    code = write_data(VA_OUT + 8, [0x1111]) + write_data(VA_HUGE + 0x12344, [0x2222]) + \
        release_mem(VA_OUT + 16, 0x3333, INT_SEL="SEND_INT", INT_CTXID=1)
    g.w32(PA_CODE, code)
    ring.run(ib(VA_CODE, len(code), VMID=1))
    assert (g.r32(PA_OUT + 8), g.r32(PA_HUGE + 0x12344), g.r32(PA_OUT + 16)) == (0x1111, 0x2222, 0x3333)
    (e,) = ih.pop()
    assert (ih.source(e), e["VMID"], e["DATA3"]) == ("EOP", 1, VA_OUT + 16), "an IB's entry has its VMID"

    def run_ib(body, entry=VA_CODE):
        g.w32(PA_CODE, body)
        ring.submit(ib(entry, len(body), VMID=1))

    W, R, F, DR, DW = 1, 0, 2, 3, 4
    run_ib(pm4("NOP", [0]) + write_data(VA_RO + 4, [1]))  # a PTE without WRITEABLE
    expect_fault(ring, ih, VA_RO + 4, W, 1, 1, P["WRITE_DATA"].opcode, 2, 0x20)
    run_ib(wait_mem(VA_HOLE, 0, 0, "ALWAYS"))  # a page-table entry not VALID
    expect_fault(ring, ih, VA_HOLE, R, 1, 0, P["WAIT_REG_MEM"].opcode, 0, 0x40)
    run_ib(write_data(0x400000, [1]))  # a root entry not VALID
    expect_fault(ring, ih, 0x400000, W, 0, 0, P["WRITE_DATA"].opcode, 0, 0x20)
    far = 0x5000_0000_1000  # bits 47:44 = 5, beyond the 30-bit reach
    run_ib(release_mem(far, 1))
    expect_fault(ring, ih, far, W, 0, 2, P["RELEASE_MEM"].opcode, 0, 0x20)
    run_ib(dma_data(VA_OUT, VA_HOLE + 0x10, 16, CP_SYNC=1))
    expect_fault(ring, ih, VA_HOLE + 0x10, DR, 1, 0, P["DMA_DATA"].opcode, 0, 0x40)
    run_ib(dma_data(VA_RO + 0x20, VA_OUT, 16, CP_SYNC=1))
    expect_fault(ring, ih, VA_RO + 0x20, DW, 1, 1, P["DMA_DATA"].opcode, 0, 0x20)
    g.w32(PA_OUT, [0xFFFF1000] * 4)
    ring.submit(ib(VA_OUT, 4, VMID=1))  # a fetch from a page without EXECUTABLE: header, OPCODE 0
    expect_fault(ring, ih, VA_OUT, F, 1, 1, 0, 0, 0x10)
    # Invalidation: point VA_OUT at another page; after VM_INVALIDATE_ACK shows VMID 1, the
    # next translation reads the new entry.
    run_ib(write_data(VA_OUT + 0x40, [0x44]))
    g.idle()
    assert g.r32(PA_OUT + 0x40) == 0x44
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE)
    g.write("VM_INVALIDATE_ADDR_LO", VA_OUT >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    assert g.read("VM_INVALIDATE_REQ") == 0, "write-only"
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    run_ib(write_data(VA_OUT + 0x40, [0x55]))
    g.idle()
    assert g.r32(PA_OUT2 + 0x40) == 0x55 and g.r32(PA_OUT + 0x40) == 0x44
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=0xFFFF, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0xFFFF, "VM_INVALIDATE_ACK = every VMID")
    run_ib(write_data(VA_OUT + 0x40, [0x66]))
    g.idle()
    assert g.r32(PA_OUT + 0x40) == 0x66
    # VMID 0 (ENABLE clear) is physical.
    ring.run(write_data(PA_OUT + 0x44, [0x77]))
    assert g.r32(PA_OUT + 0x44) == 0x77


# ---------------------------------------------------------------------------- SOFT_RESET

def check_soft_reset_keeps_settings(dev):
    """CONTROL.SOFT_RESET: IH_WPTR back to 0 while IH_RPTR, INT_STATUS, bases, sizes, enables,
    the VM_CONTEXT_* registers and the counters keep their values; the driver writes
    IH_RPTR = 0 and the next entry lands at the IH ring's start."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    ring.run(release_mem(OUT, 1, INT_SEL="SEND_INT", INT_CTXID=1), release_mem(OUT, 2, INT_SEL="SEND_INT"))
    ih.pop()
    keep = ("IH_RPTR", "INT_STATUS", "IH_BASE_LO", "IH_SIZE", "IH_CNTL", "RB_BASE_LO", "RB_SIZE", "RB_CNTL",
            "RB_RPTR_ADDR_LO", "PERF_PACKETS", "PERF_DWORDS_FETCHED", "INT_ENABLE", "CP_QUEUE_PRIORITY")
    before = {r: g.read(r) for r in keep}
    vm = (g.read("VM_CONTEXT_CNTL", 1), g.read("VM_CONTEXT_PT_BASE_LO", 1))
    assert before["IH_RPTR"] == 64 and before["INT_STATUS"] == g.value("INT_STATUS", EOP=1)
    g.set("CONTROL", SOFT_RESET=1)
    for s in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(s)
    assert {r: g.read(r) for r in keep} == {**before, "INT_STATUS": before["INT_STATUS"] | 1}, \
        "IH_PENDING follows IH_WPTR (0) != IH_RPTR (64)"
    assert (g.read("IH_WPTR"), g.read("RB_RPTR"), g.read("RB_WPTR")) == (0, 0, 0)
    assert (g.read("VM_CONTEXT_CNTL", 1), g.read("VM_CONTEXT_PT_BASE_LO", 1)) == vm
    g.write("IH_RPTR", 0)
    ih.rptr = ring.wptr = 0
    ring.run(release_mem(OUT, 3, INT_SEL="SEND_INT", INT_CTXID=3))
    (e,) = ih.pop()
    assert e["DATA0"] == 3 and g.r32(IH_BASE + 16) == 3


# ---------------------------------------------------------------------------- round 2: the finer claims

def check_entries_name_their_queue_and_vmid(dev):
    """RING_ID is the CP queue (0 or 1) of every CP entry, EOP included; VMID is the IB's
    for a packet of an IB (a translated VMID or not; IB2 keeps IB1's whatever its own VMID
    field says), 0 in the ring; SDMA entries are ring 0 and carry the SDMA IB's VMID."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    inner = release_mem(OUT + 8, 2, INT_SEL="SEND_INT", INT_CTXID=2)
    g.w32(IB2, inner)
    g.w32(IB1, release_mem(OUT + 4, 1, INT_SEL="SEND_INT", INT_CTXID=1) + ib(IB2, len(inner), VMID=7))
    q0.run(ib(IB1, 12, VMID=3), release_mem(OUT, 0, INT_SEL="SEND_INT"))  # VMID 3: not translated
    got = [(e["DATA0"], e["RING_ID"], e["VMID"]) for e in ih.pop()]
    assert got == [(1, 0, 3), (2, 0, 3), (0, 0, 0)], got
    q1.run(release_mem(OUT + 12, 5, INT_SEL="SEND_INT", INT_CTXID=5), ib(IB1, 12, VMID=4))
    got = [(e["DATA0"], e["RING_ID"], e["VMID"]) for e in ih.pop()]
    assert got == [(5, 1, 0), (1, 1, 4), (2, 1, 4)], f"queue 1's EOP entries: {got}"
    g.w32(IB2, [0xC0002A00])  # an error in IB2 of queue 1, VMID 4
    q1.submit(ib(IB1, 12, VMID=4))
    st = g.idle("CP_HQD1_STATUS")
    assert st["ERROR"] == 1
    entries = ih.pop()
    assert [(ih.source(e), e["RING_ID"], e["VMID"]) for e in entries] == [("EOP", 1, 4), ("CP_ERROR", 1, 4)], entries
    # The SDMA: an IB runs with the VMID its ring packet names; TRAP and POLL_TIMEOUT entries in it.
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    body = sdma("TRAP", INT_CONTEXT=0x77) + sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=9, MASK=M32, FUNC="EQ",
                                                  MEM_POLL="MEMORY", RETRY_COUNT=0, INTERVAL=1)
    g.w32(IB1, body + [0x0000_0003])
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=len(body) + 1, VMID=6))
    g.idle("SDMA_STATUS")
    entries = []
    g.until(lambda: entries.extend(ih.pop()) or len(entries) >= 3, "three SDMA entries")
    assert [(ih.source(e), e["RING_ID"], e["VMID"]) for e in entries] == \
        [("SDMA_TRAP", 0, 6), ("SDMA_POLL_TIMEOUT", 0, 6), ("SDMA_ERROR", 0, 6)], entries


def check_cp_own_writes_fail_as_the_packet(dev):
    """An error on the rptr write-back is a bus error of the packet it follows (OPCODE that
    packet's, INDIRECT_BUFFER after an IB; ADDR the address written); so is one on the IH
    wptr write-back; a failing IH entry leaves IH_WPTR and sets INT_STATUS.CP_ERROR alone.
    A ring fetch past memory is BUS_DECERR at that dword, OPCODE 0."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    bad = 0x1000_0000  # beyond the 64 MiB of memory: DECERR
    g.write("RB_RPTR_ADDR_LO", bad)
    ring.submit(pm4("NOP", [0]), write_data(OUT, [0x31]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["NOP"].opcode, bad, 0)
    g.w32(IB1, write_data(OUT, [0x32]))
    ring.submit(ib(IB1, 5))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["INDIRECT_BUFFER"].opcode, bad, 0)
    assert g.r32(OUT) == 0x32
    g.write("RB_RPTR_ADDR_LO", RPTR_WB + 3)  # bits 1:0 are ignored
    ring.run(write_data(OUT, [0x33]))
    assert g.r32(RPTR_WB) == 5 and g.r32(OUT) == 0x33
    g.write("IH_WPTR_ADDR_LO", bad)
    w0 = g.read("IH_WPTR")
    ring.submit(pm4("NOP", [0]), release_mem(OUT + 4, 1, INT_SEL="SEND_INT"))
    st = g.idle()
    err, addr, off = ring.error_regs()
    assert (st["ERROR"], err["CODE"], err["OPCODE"], addr, off) == \
        (1, g.err["BUS_DECERR"], P["RELEASE_MEM"].opcode, bad, 7), (st, err, hex(addr), off)
    w = g.read("IH_WPTR")
    assert w == w0 + 64, "the EOP entry, then (its write-back failed) the CP_ERROR entry"
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    ih.pop()
    g.write("IH_WPTR_ADDR_LO", IH_WB)
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1, EOP=1))
    g.write("IH_BASE_LO", bad >> 8)  # the entry itself fails: no CP_ERROR entry can be written
    ring.submit(release_mem(OUT + 4, 1, INT_SEL="SEND_INT"))
    st = g.idle()
    err, addr, off = ring.error_regs()
    assert (st["ERROR"], err["CODE"], err["OPCODE"], addr >> 8) == \
        (1, g.err["BUS_DECERR"], P["RELEASE_MEM"].opcode, bad >> 8), (st, err, hex(addr))
    assert g.read("IH_WPTR") == w and g.field("INT_STATUS", "CP_ERROR") == 1
    g.write("IH_BASE_LO", IH_BASE >> 8)
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    # A ring whose base is past memory: the header fetch fails, OPCODE 0. (The base is
    # changed with ENABLE clear: a change while it is set is not defined.)
    g.set("RB_CNTL", ENABLE=0)
    g.write("RB_BASE_LO", bad >> 8)
    g.set("RB_CNTL", ENABLE=1)
    ring.wptr = 0
    ring.doorbell(4)
    st = g.idle()
    err, addr, off = ring.error_regs()
    assert (st["ERROR"], err, addr, off) == (1, {"CODE": g.err["BUS_DECERR"], "LEVEL": 0, "OPCODE": 0}, bad, 0)


def check_dma_errors_and_counters(dev):
    """A DMA read error names the first byte needed in the faulting beat, a write error the
    first byte of the faulting burst; PERF_DMA_BYTES_READ counts whole bus beats (64-bit bus);
    DMA_BYTE_COUNT comes after the field checks; a packet failing its checks is not counted."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    end = 64 << 20
    assert g.fields("CAPS")["DMA_MAX_LOG2"] == 20 and g.fields("CAPS")["BUS_BYTES_LOG2"] == 3
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(0x200003, 0x100001, 101, CP_SYNC=1))
    assert g.read("PERF_DMA_BYTES_READ") == 104 and g.read("PERF_DMA_BYTES_WRITTEN") == 101
    at = ring.wptr + 2
    ring.submit(pm4("NOP", [0]), dma_data(0x200000, end - 0x1E, 64, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, at)
    ring.submit(dma_data(end - 8, 0x100000, 16, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    ring.submit(dma_data(0x200000, 0x100000, (1 << 20) + 1, SRC_SEL="GDS"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["DMA_DATA"].opcode, RING, 0)
    # A packet that fails its checks is not counted in PERF_PACKETS.
    n = g.read("PERF_PACKETS", P["WRITE_DATA"].index)
    at = ring.wptr
    ring.submit(write_data(OUT, [1], DST_SEL="REGISTER"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["WRITE_DATA"].opcode, RING + 4 * at, at)
    assert g.read("PERF_PACKETS", P["WRITE_DATA"].index) == n


def check_sdma_vm_and_address_rules(dev):
    """An SDMA IB's VMID translates its packets; its VM fault is the SDMA's error (SDMA_ERROR
    VM_FAULT, its address, the 241 entry), VM_FAULT_STATUS stays the CP's; FENCE drops its
    address bits above 47, an IB base above them is BUS_DECERR; SUB_OP is latched; the
    check order UNSUPPORTED before alignment; WRITE_LINEAR past the ring space is BAD_COUNT."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    map_vmid1(g)
    s = SdmaRing(g, SRING, 6)
    S = sdma_packets()
    body = sdma("FENCE", DATA=0x51, **lo_hi("ADDR", VA_OUT + 0x20, 2))
    g.w32(PA_CODE, body)
    s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE, 5), IB_SIZE=len(body), VMID=1))
    assert g.r32(PA_OUT + 0x20) == 0x51
    body = sdma("FENCE", DATA=0x52, **lo_hi("ADDR", VA_RO + 0x20, 2))
    g.w32(PA_CODE, [0] + body)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE, 5), IB_SIZE=len(body) + 1, VMID=1))
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", S["FENCE"].opcode, VA_RO + 0x20, 1)
    assert g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0
    far = 0x0003_0000_0000_0000
    s.run(sdma("FENCE", DATA=0x53, **lo_hi("ADDR", far | OUT + 0x24, 2)))
    assert g.r32(OUT + 0x24) == 0x53 and g.fields("SDMA_STATUS")["ERROR"] == 0
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", far | IB1, 5), IB_SIZE=4))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["INDIRECT_BUFFER"].opcode, IB1, 4)
    s.submit([0x0000_0101])  # (OP 1, SUB_OP 1) is not in the table
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1 and g.fields("SDMA_ERROR") == {"SUB_OP": 1, "OP": 1, "LEVEL": 0,
                                                         "CODE": g.err["ILLEGAL_OPCODE"]}
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    ih.pop()
    s.emit(sdma("CONSTANT_FILL", SRC_DATA=1, COUNT=3, **lo_hi("DST_ADDR", OUT), FILLSIZE="WORDS"))
    s.emit(sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="REGISTER"))
    g.w32(SRING + 20 + 4, [OUT | 2])  # and misaligned: UNSUPPORTED comes first
    g.write("SDMA_DOORBELL", 20)
    expect_sdma_error(s, ih, "UNSUPPORTED", "RING", S["CONSTANT_FILL"].opcode, SRING, 0)
    assert g.r32(OUT) == 0
    g.w32(SRING, sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="REGISTER"))
    g.w32(SRING + 4, [OUT | 2])
    g.write("SDMA_DOORBELL", 24)
    expect_sdma_error(s, ih, "UNSUPPORTED", "RING", S["POLL_REGMEM"].opcode, SRING, 0)
    p = sdma("WRITE_LINEAR", [1, 2, 3], **lo_hi("DST_ADDR", OUT, 2), COUNT=2)
    s.emit(p)
    g.write("SDMA_DOORBELL", 4 * (len(p) - 1))
    expect_sdma_error(s, ih, "BAD_COUNT", "RING", S["WRITE_LINEAR"].opcode, SRING, 0)
    # SDMA_CNTL.HALT stops the engine before its next packet; SDMA_STATUS.HALTED shows it.
    g.set("SDMA_CNTL", HALT=1)
    s.submit(sdma("FENCE", DATA=0x54, **lo_hi("ADDR", OUT + 0x28, 2)))
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED")
    assert g.r32(OUT + 0x28) == 0 and g.fields("SDMA_STATUS")["IDLE"] == 0
    g.set("SDMA_CNTL", HALT=0)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 0x28) == 0x54 and g.fields("SDMA_STATUS")["HALTED"] == 0


def check_vm_fault_status_follows_the_stopped_queue(dev):
    """VM_FAULT_STATUS holds the fault of the queue it stopped, queue 0's when both are, 0
    once neither is; a far address in a translated IB is BUS_DECERR, nothing in VM_FAULT_*."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    P = pm4_packets()
    g.w32(PA_CODE, write_data(VA_RO, [1]) + wait_mem(VA_HOLE + 8, 0, 0, "ALWAYS"))
    q1.submit(ib(VA_CODE, 5, VMID=1))
    g.idle("CP_HQD1_STATUS")
    q1_fault = g.fields("VM_FAULT_STATUS")
    assert q1_fault == {"VMID": 1, "ACCESS": 1, "LEVEL": 1, "CAUSE": 1}, q1_fault
    assert g.read("VM_FAULT_ADDR_LO") == VA_RO
    g.w32(PA_CODE + 0x100, wait_mem(VA_HOLE + 8, 0, 0, "ALWAYS"))
    q0.submit(ib(VA_CODE + 0x100, 7, VMID=1))
    g.idle()
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 1, "ACCESS": 0, "LEVEL": 1, "CAUSE": 0}
    assert g.read("VM_FAULT_ADDR_LO") == VA_HOLE + 8, "queue 0's fault when both queues are stopped by one"
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    q0.wptr = 0
    assert g.fields("VM_FAULT_STATUS") == q1_fault and g.read("VM_FAULT_ADDR_LO") == VA_RO
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    q1.wptr = 0
    assert g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0
    ih.pop()
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    far = 0x0001_0000_0000_0000 | VA_OUT
    g.w32(PA_CODE, wait_mem(far, 0, 0, "ALWAYS"))
    q0.submit(ib(VA_CODE, 7, VMID=1))
    expect_error(q0, ih, "BUS_DECERR", "IB1", P["WAIT_REG_MEM"].opcode, VA_OUT, 0)
    assert g.read("VM_FAULT_STATUS") == 0


def check_int_force_and_release_mem_alignment(dev):
    """INT_FORCE raises event bits without an IH entry; RELEASE_MEM's ADDR_LO bits 1:0 are
    alignment bits whatever DATA_SEL says (check 5); the 64-bit rule needs 8-byte alignment
    for DATA_64 and TIMESTAMP only."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    g.set("INT_FORCE", EOP=1, CP_ERROR=1, IH_OVERFLOW=1)
    st = g.fields("INT_STATUS")
    assert (st["EOP"], st["CP_ERROR"], st["IH_OVERFLOW"], st["IH_PENDING"]) == (1, 1, 1, 0)
    assert g.read("IH_WPTR") == 0 and ih.pop() == []
    g.write("INT_STATUS", M32)
    ring.run(release_mem(OUT + 4, 1, DATA_SEL="DATA_32"))
    assert g.r32(OUT + 4) == 1
    ring.submit(release_mem(OUT + 4, 1, DATA_SEL="TIMESTAMP"))
    expect_error(ring, ih, "FENCE_MISALIGNED", "RING", P["RELEASE_MEM"].opcode, RING + 32, 8)
    p = release_mem(OUT, 1, DATA_SEL="NONE", INT_SEL="SEND_INT")
    p[3] |= 2
    ring.submit(p)
    expect_error(ring, ih, "FENCE_MISALIGNED", "RING", P["RELEASE_MEM"].opcode, RING, 0)



CHECKS = [check_ring_doorbell_and_writeback, check_doorbell_errors, check_ib_levels_and_chain, check_packet_checks,
          check_wait_reg_mem, check_release_mem_and_eop_entry, check_ih_ring_wrap_and_overflow, check_dma_data,
          check_sdma_ring_and_packets, check_sdma_errors, check_cp_queue_priority,
          check_vm_translation_faults_and_invalidate, check_soft_reset_keeps_settings,
          check_entries_name_their_queue_and_vmid, check_cp_own_writes_fail_as_the_packet,
          check_dma_errors_and_counters, check_sdma_vm_and_address_rules,
          check_vm_fault_status_follows_the_stopped_queue, check_int_force_and_release_mem_alignment]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
