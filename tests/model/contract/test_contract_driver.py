"""The contract, checked by an outside driver writer: tests/model/contract/contract_driver.py programs
the device from docs/registers.md, docs/packets.md and docs/hardware.md alone (no project
driver or spec code), and each check asserts numbers those pages state as exact: bit
positions, reset values, IH entry dwords, error codes and what they latch, wrap rules,
"ignored while ...". This module: the CP's ring, packets, IH ring and DMA engine;
tests/model/contract/engines/test_contract_sdma_packets.py and test_contract_sdma_errors.py: the SDMA;
tests/model/contract/engines/test_contract_cp_queues.py: the second CP queue; test_contract_both_engines.py:
the CP and the SDMA side by side; tests/model/contract/test_contract_vm.py: the MMU;
tests/model/contract/control/test_contract_resets.py, test_contract_halts.py, test_contract_rings.py and
test_contract_ih_ring.py: resets and counters, halts, the rings' ENABLE and locks, the IH
ring; tests/model/contract/test_contract_csr.py: the CSR block over AXI4-Lite.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IB1B, IB2, IH_BASE, IH_WB, M32, OUT, RING, RPTR_WB, SRING, IhRing, Ring,
                                         SdmaRing, bring_up, dma_data, expect_error, ib, lo_hi, pm4, pm4_packets,
                                         release_mem, sdma, wait_mem, write_data)


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
    st = g.waiting()
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
        g.waiting()
        g.dev.delay(100)
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
    # DATA1/DATA2 are the packet's DATA_LO/DATA_HI whatever DATA_SEL wrote (none, or the low half).
    g.w32(fence, [0xAAAA, 0xBBBB])
    ring.run(release_mem(fence, 0xB_0000_000A, DATA_SEL="NONE", INT_SEL="SEND_INT", INT_CTXID=10),
             release_mem(fence, 0xD_0000_000C, DATA_SEL="DATA_32", INT_SEL="SEND_INT", INT_CTXID=12))
    got = [(e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) for e in ih.pop()]
    assert got == [(10, 0xA, 0xB, fence), (12, 0xC, 0xD, fence)], got
    assert g.r32(fence, 2) == [0xC, 0xBBBB]


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
    # LOG2_DWORDS below 3 acts as 3 (one entry); the register reads back what was written,
    # with the ring disabled (a write while IH_CNTL.ENABLE is set leaves it alone).
    g.set("IH_SIZE", LOG2_DWORDS=1)
    assert g.read("IH_SIZE") == 4
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.set("IH_SIZE", LOG2_DWORDS=1)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
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
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    ring.run(eop(9))
    assert g.read("IH_WPTR") == 192 and g.field("INT_STATUS", "EOP") == 1
    # IH_WPTR_ADDR_LO's bits 1:0 are ignored: the write-back lands on the dword.
    g.write("IH_RPTR", 192)
    g.write("IH_WPTR_ADDR_LO", IH_WB | 3)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    ring.run(eop(10))
    assert g.r32(IH_WB) == 224 and g.r32(IH_WB + 4) == 0


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
    # The fence after DMA work (no CP_SYNC) is written after the data: once the CPU sees the
    # fence, the copy is complete.
    g.w32(src, [(k * 0x9E3779B1) & M32 for k in range(4096)])
    ring.submit(dma_data(dst + 0x4000, src, 0x4000), release_mem(OUT + 8, 0xFEED))
    g.until(lambda: g.r32(OUT + 8) == 0xFEED, "the fence")
    assert bytes(g.dev.mem[dst + 0x4000:dst + 0x8000]) == bytes(g.dev.mem[src:src + 0x4000])



# ------------------------------------------------------------------ the CP's own writes, DMA errors, INT_FORCE

def check_cp_own_writes_fail_as_the_packet(dev):
    """An error on the rptr write-back is a bus error of the packet it follows (OPCODE that
    packet's, INDIRECT_BUFFER after an IB; ADDR the address written); so is one on the IH
    wptr write-back; a failing IH entry leaves IH_WPTR and sets INT_STATUS.CP_ERROR alone.
    A ring fetch past memory is BUS_DECERR at that dword, OPCODE 0."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    bad = 0x1000_0000  # beyond the 64 MiB of memory: DECERR
    ring.set_rptr_wb(bad)
    ring.submit(pm4("NOP", [0]), write_data(OUT, [0x31]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["NOP"].opcode, bad, 0)
    g.w32(IB1, write_data(OUT, [0x32]))
    ring.submit(ib(IB1, 5))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["INDIRECT_BUFFER"].opcode, bad, 0)
    assert g.r32(OUT) == 0x32
    ring.set_rptr_wb(RPTR_WB + 3)  # bits 1:0 are ignored
    ring.run(write_data(OUT, [0x33]))
    assert g.r32(RPTR_WB) == 5 and g.r32(OUT) == 0x33
    ih.set_wptr_wb(bad)
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
    ih.set_wptr_wb(IH_WB)
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1, EOP=1))
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)  # (the base is written with the IH ring disabled)
    g.write("IH_BASE_LO", bad >> 8)  # the entry itself fails: no CP_ERROR entry can be written
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    ring.submit(release_mem(OUT + 4, 1, INT_SEL="SEND_INT"))
    st = g.idle()
    err, addr, off = ring.error_regs()
    assert (st["ERROR"], err["CODE"], err["OPCODE"], addr >> 8) == \
        (1, g.err["BUS_DECERR"], P["RELEASE_MEM"].opcode, bad >> 8), (st, err, hex(addr))
    assert g.read("IH_WPTR") == w and g.field("INT_STATUS", "CP_ERROR") == 1
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.write("IH_BASE_LO", IH_BASE >> 8)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    # A ring whose base is past memory: the header fetch fails, OPCODE 0. (The base is
    # changed with ENABLE clear: a write while it is set is ignored.)
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
    assert g.fields("CAPS")["DMA_MAX_LOG2"] == 20
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(0x200003, 0x100001, 101, CP_SYNC=1))
    assert g.read("PERF_DMA_BYTES_READ") == g.beats_bytes(0x100001, 101) and g.read("PERF_DMA_BYTES_WRITTEN") == 101
    at = ring.wptr + 2
    ring.submit(pm4("NOP", [0]), dma_data(0x200000, end - 0x1E, 64, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, at)
    ring.submit(dma_data(end - 8, 0x100000, 16, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    # Without CP_SYNC: the transfer queued behind a failing one writes nothing, and a
    # WRITE_DATA after them (it waits for every transfer) never runs.
    g.w32(0x100000, [0xC0DE] * 64)
    ring.submit(dma_data(0x200000, end - 0x100, 0x200), dma_data(0x240000, 0x100000, 256),
                write_data(OUT + 0x300, [0x301]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    assert g.r32(0x240000, 64) == [0] * 64 and g.r32(OUT + 0x300) == 0
    ring.submit(dma_data(0x200000, 0x100000, (1 << 20) + 1, SRC_SEL="GDS"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["DMA_DATA"].opcode, RING, 0)
    # A packet that fails its checks is not counted in PERF_PACKETS.
    n = g.read("PERF_PACKETS", P["WRITE_DATA"].index)
    at = ring.wptr
    ring.submit(write_data(OUT, [1], DST_SEL="REGISTER"))
    expect_error(ring, ih, "UNSUPPORTED", "RING", P["WRITE_DATA"].opcode, RING + 4 * at, at)
    assert g.read("PERF_PACKETS", P["WRITE_DATA"].index) == n



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


# ---------------------------------------------------------------------------- finer packet rules

def check_packet_rules_in_ibs(dev):
    """BAD_COUNT inside an IB (past IB_SIZE) and for a WRITE_DATA without data; check 6's
    order (IB_SIZE_ZERO, then IB_NESTING, then the base beyond the bus); a CHAIN runs at the
    same level (STATUS.LEVEL); rptr stays at a ring packet that has not finished; the
    reference of a wait is compared unmasked."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    wd, ibop = P["WRITE_DATA"].opcode, P["INDIRECT_BUFFER"].opcode
    g.w32(IB1, pm4("NOP", [0]) + write_data(OUT, [1, 2]))
    ring.submit(ib(IB1, 2 + 5))  # the WRITE_DATA runs past IB_SIZE
    expect_error(ring, ih, "BAD_COUNT", "IB1", wd, IB1 + 8, 2)
    ring.submit(pm4("WRITE_DATA", [], **lo_hi("ADDR", OUT, 2), DST_SEL="MEMORY"))  # no data dword
    expect_error(ring, ih, "BAD_COUNT", "RING", wd, RING, 0)
    g.w32(IB1, ib(IB2, 4))
    g.w32(IB2, ib(IB1B, 0))  # an IB3 of size 0: IB_SIZE_ZERO comes before IB_NESTING
    ring.submit(ib(IB1, 4))
    expect_error(ring, ih, "IB_SIZE_ZERO", "IB2", ibop, IB2, 0)
    g.w32(IB2, ib(IB1B | 1 << 48, 4))  # an IB3 beyond the bus: IB_NESTING first
    ring.submit(ib(IB1, 4))
    expect_error(ring, ih, "IB_NESTING", "IB2", ibop, IB2, 0)
    # CHAIN keeps the level: a wait in the chained IB of an IB2 shows LEVEL IB2.
    flag = OUT + 0x40
    g.w32(flag, [0])
    g.w32(IB1B, wait_mem(flag, 1, 1, "EQ") + write_data(OUT + 0x44, [0x45]))
    g.w32(IB2, ib(IB1B, 12, CHAIN=1))
    g.w32(IB1, ib(IB2, 4) + write_data(OUT + 0x48, [0x49]))
    ring.submit(ib(IB1, 9))
    st = g.waiting()
    assert (st["WAITING"], st["LEVEL"]) == (1, g.level["IB2"]), st
    assert g.read("RB_RPTR") == 0 == g.r32(RPTR_WB), "rptr stays at the IB packet until it finishes"
    g.w32(flag, [1])
    g.idle()
    assert g.r32(OUT + 0x44, 2) == [0x45, 0x49] and g.read("RB_RPTR") == 4
    # A wait in the ring: rptr shows the packet before it until the wait ends.
    g.w32(flag, [0x131])
    ring.submit(pm4("NOP", [0]), wait_mem(flag, 0x131, 0xF0, "EQ"))  # (0x131 & 0xF0) != 0x131
    g.waiting()
    g.dev.delay(100)
    assert g.fields("STATUS")["WAITING"] == 1, "the reference is not masked"
    assert g.read("RB_RPTR") == 6 == g.r32(RPTR_WB)
    g.w32(flag, [0x30])  # still not 0x131
    g.dev.delay(200)
    assert g.fields("STATUS")["WAITING"] == 1
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    assert g.fields("STATUS")["WAITING"] == 0 and g.read("RB_RPTR") == 0


def check_ih_overflow_of_an_error_entry(dev):
    """An error whose entry finds the IH ring full: the entry is dropped, IH_OVERFLOW and
    CP_ERROR are set; with IH_CNTL.ENABLE clear an EOP still sets INT_STATUS.EOP."""
    g, ring, ih = bring_up(dev, ih_log2=3)  # one entry
    ring.run(release_mem(OUT, 1, INT_SEL="SEND_INT"))
    assert g.read("IH_WPTR") == 32
    g.write("INT_STATUS", M32)
    ring.submit([0xC0002A00])
    st = g.idle()
    assert st["ERROR"] == 1 and g.read("IH_WPTR") == 32
    got = g.fields("INT_STATUS")
    assert (got["CP_ERROR"], got["IH_OVERFLOW"], got["EOP"], got["IH_PENDING"]) == (1, 1, 0, 1), got
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    ih.pop()
    g.write("INT_STATUS", M32)
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    ring.run(release_mem(OUT, 2, INT_SEL="SEND_INT"))
    got = g.fields("INT_STATUS")
    assert (got["EOP"], got["IH_PENDING"], got["IH_OVERFLOW"]) == (1, 0, 0) and g.read("IH_WPTR") == 32


# ---------------------------------------------------------------------------- every value the tables list

def _reserved(pkt, n_dwords: int) -> list[int]:
    """Per packet dword (0 = the header), the bits no field of docs/packets.md names, less
    the bits below an *_LO address field (alignment, checked) and the header's TYPE/COUNT/
    OPCODE: what the CP must ignore."""
    from tests.model.contract.contract_driver import pm4_header

    used = [sum(f.mask for f in pm4_header().values())] + [0] * (n_dwords - 1)
    for f in pkt.fields.values():
        d = 0 if f.dword == "hdr" else f.dword + 1
        used[d] |= f.mask | (((1 << f.lsb) - 1) if f.name.endswith("_LO") else 0)
    return [~u & M32 for u in used]


def check_every_listed_value_and_reserved_bit(dev):
    """Each value docs/packets.md lists for a field runs, but those it marks not supported,
    which stop the CP with UNSUPPORTED, as a value it does not list does (a closed list);
    an open list (EVENT_TYPE) takes any value; fields the CP ignores and reserved bits
    (every bit no field names, but the alignment bits below an *_LO field) change nothing."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    src, dst, fence = 0x100000, 0x200000, OUT + 0x200
    g.w32(src, [0x5EED, 0x5EED])
    g.w32(IB1, [0xFFFF1000])
    base = {"WRITE_DATA": lambda **kw: write_data(fence, [0x77], **kw),
            "INDIRECT_BUFFER": lambda **kw: ib(IB1, 1, **kw),
            "WAIT_REG_MEM": lambda **kw: pm4("WAIT_REG_MEM", **lo_hi("ADDR", fence, 2), MASK=0,
                                             **{"FUNCTION": "ALWAYS", "MEM_SPACE": "MEMORY", **kw}),
            "RELEASE_MEM": lambda **kw: release_mem(fence, 0x66, **kw),
            "DMA_DATA": lambda **kw: dma_data(dst, src, 8, **{"CP_SYNC": 1, **kw})}
    checked = 0
    for name, make in base.items():
        for f in P[name].fields.values():
            if not f.values or f.name == "FUNCTION":
                continue
            listed = set(f.values.values())
            unlisted = [v for v in range(1 << f.width) if v not in listed][:2]
            for v in sorted(listed) + unlisted:
                fields = {f.name: v}
                if name == "RELEASE_MEM" and f.name != "DATA_SEL":
                    fields["DATA_SEL"] = "DATA_32"
                bad = v in {f.values[u] for u in f.unsupported} or (v not in listed and not f.open_values)
                at = ring.wptr
                ring.run(make(**fields))
                checked += 1
                if bad:
                    expect_error(ring, ih, "UNSUPPORTED", "RING", P[name].opcode, RING + 4 * at, at)
                else:
                    st = g.fields("STATUS")
                    assert st["ERROR"] == 0, f"{name}.{f.name} = {v}: {ring.error_regs()}"
                    ih.pop()
    assert checked >= 60
    # Every ignored field at its largest value, every reserved bit set: each packet does what
    # it does without them.
    ignored = {"WRITE_DATA": ("CACHE_POLICY", "WR_CONFIRM"),
               "INDIRECT_BUFFER": ("PRIV", "PRE_RESUME", "CACHE_POLICY", "VALID", "PRE_ENB"),
               "WAIT_REG_MEM": ("CACHE_POLICY", "OPTIMIZE_ACE_OFFLOAD_MODE"),
               "RELEASE_MEM": ("EXEC", "CACHE_POLICY", "TC_MD_ACTION_EN", "TC_WC_ACTION_EN", "TC_NC_ACTION_EN",
                               "TC_ACTION_EN", "TCL1_ACTION_EN", "TC_WB_ACTION_EN", "TC_VOL_ACTION_EN",
                               "TCL1_VOL_ACTION_EN"),
               "DMA_DATA": ("SRC_CACHE_POLICY", "DST_CACHE_POLICY", "DIS_WC", "RAW_WAIT")}
    for name, make in base.items():
        pkt = P[name]
        p = make(**{n: (1 << pkt.fields[n].width) - 1 for n in ignored[name]})
        n = 1 + pkt.fixed  # (the data dwords after the fixed ones have no reserved bits)
        p = [d | r for d, r in zip(p[:n], _reserved(pkt, n))] + p[n:]
        g.w32(fence, [0])
        g.w32(dst, [0, 0])
        ring.run(p)
        assert g.fields("STATUS")["ERROR"] == 0, f"{name} with ignored fields and reserved bits: {ring.error_regs()}"
        want = {"WRITE_DATA": (g.r32(fence), 0x77), "RELEASE_MEM": (g.r32(fence), 0x66),
                "DMA_DATA": (g.r32(dst, 2), [0x5EED, 0x5EED])}.get(name)
        assert want is None or want[0] == want[1], f"{name}: {want}"



# ------------------------------------------------------------- the DMA engine's edges, counters and time (round 3)

def check_dma_data_edges_and_counters(dev):
    """DMA_DATA across 4 KiB pages at odd alignments (copy and fill), BYTE_COUNT at
    2^DMA_MAX_LOG2 and one more (DMA_BYTE_COUNT at the header), errors of a read and of a write
    starting beyond memory at an odd byte (ADDR that byte), and exactly what the counters count:
    PERF_DWORDS_FETCHED the ring's dwords, PERF_PACKETS the packets by kind, the DMA byte
    counters whole beats read and bytes written (a fill reads nothing), a DMA_DATA cancelled
    behind a failing one not counted."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    end = 64 << 20
    src, dst = 0x100000, 0x300000
    words = [((k + 7) * 0x9E3779B1) & M32 for k in range(0x1000)]
    g.w32(src, words)
    pat = b"".join(w.to_bytes(4, "little") for w in words)
    g.dev.mem[dst:dst + 0x6000] = [0xEE] * 0x6000
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.run(dma_data(dst + 0xFF9, src + 0xFF3, 0x2011), dma_data(dst + 0x3FFE, 0xA1B2C3D4, 0x1003, SRC_SEL="DATA"),
             dma_data(dst + 0x5FFF, src, 1, CP_SYNC=1), pm4("NOP", [0, 0]))
    assert bytes(g.dev.mem[dst + 0xFF8:dst + 0x300B]) == bytes([0xEE]) + pat[0xFF3:0x3004] + bytes([0xEE])
    fill = bytes([0xD4, 0xC3, 0xB2, 0xA1][x % 4] for x in range(dst + 0x3FFE, dst + 0x5001))
    assert bytes(g.dev.mem[dst + 0x3FFD:dst + 0x5002]) == bytes([0xEE]) + fill + bytes([0xEE])
    assert bytes(g.dev.mem[dst + 0x5FFE:dst + 0x6001]) == bytes([0xEE, pat[0], 0])
    counted = {k: g.read("PERF_PACKETS", P[k].index) for k in P}
    assert counted == {k: {"DMA_DATA": 3, "NOP": 1}.get(k, 0) for k in P}, counted
    assert g.read("PERF_DWORDS_FETCHED") == 3 * 7 + 3 == g.read("PERF_Q0_DWORDS_FETCHED")
    assert g.read("PERF_DMA_BYTES_WRITTEN") == 0x2011 + 0x1003 + 1
    assert g.read("PERF_DMA_BYTES_READ") == g.beats_bytes(src + 0xFF3, 0x2011) + g.beats_bytes(src, 1)
    # BYTE_COUNT 2^20 is taken (a 1 MiB fill on the model and Verilator; on Icarus, about 2,300
    # cycles/s, one that meets memory's end 0x100 bytes in); 2^20 + 1 is DMA_BYTE_COUNT at the
    # packet's header
    big = 0x1000000
    if g.dev.name != "icarus":
        ring.submit(dma_data(big + 3, 0x5A5A5A5A, 1 << 20, SRC_SEL="DATA"), write_data(OUT, [0x61]))
        g.until(lambda: g.r32(OUT) == 0x61, "a 1 MiB fill", cycles=1_000_000, step=2000)
        assert g.read("PERF_DMA_BYTES_WRITTEN") == 0x2011 + 0x1003 + 1 + (1 << 20)
        assert g.r32(big) == 0x5A000000 and g.r32(big + (1 << 20)) == 0x5A5A5A and g.r32(big + (1 << 20) + 4) == 0
        g.idle()
    else:
        at = ring.wptr
        ring.submit(dma_data(end - 0x100, 0x5A5A5A5A, 1 << 20, SRC_SEL="DATA", CP_SYNC=1))
        expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, at)
    at = ring.wptr
    ring.submit(dma_data(big, 0x5A5A5A5A, (1 << 20) + 1, SRC_SEL="DATA"))
    expect_error(ring, ih, "DMA_BYTE_COUNT", "RING", P["DMA_DATA"].opcode, RING + 4 * at, at)
    # a read starting beyond memory at an odd byte: ADDR that byte; a write likewise
    ring.submit(dma_data(dst, end + 0x25, 0x40, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end + 0x25, 0)
    ring.submit(dma_data(end + 0x13, src, 0x40, CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end + 0x13, 0)
    ring.submit(dma_data(end + 0x7, 0x1, 0x40, SRC_SEL="DATA", CP_SYNC=1))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end + 0x7, 0)
    # PERF_PACKETS counts the failing DMA_DATA, not the one cancelled behind it (the RTL has
    # parsed it: its PERF_DWORDS_FETCHED depends on timing, this count does not)
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    ring.submit(dma_data(0x200000, end - 0x100, 0x200), dma_data(0x240000, src, 256), write_data(OUT, [0x63]))
    expect_error(ring, ih, "BUS_DECERR", "RING", P["DMA_DATA"].opcode, end, 0)
    assert [g.read("PERF_PACKETS", P[k].index) for k in ("DMA_DATA", "WRITE_DATA")] == [1, 0]
    ring.run(write_data(OUT, [0x62]))
    assert g.r32(OUT) == 0x62


def check_timestamp_and_busy_counters(dev):
    """TIMESTAMP counts cycles (HI, LO, HI); RELEASE_MEM's TIMESTAMP and an IH entry's
    TIMESTAMP lie between the reads before and after; a WAIT_REG_MEM (a POLL_REGMEM) held for
    N cycles adds at least N to PERF_BUSY_CYCLES (PERF_SDMA_BUSY_CYCLES) and no more than the
    time that passed; PERF_STALL_CYCLES ≤ PERF_BUSY_CYCLES; a wait that yields to the other
    queue is counted once, its dwords too."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 8)

    t0 = g.timestamp()
    g.dev.delay(1000)
    t1 = g.timestamp()
    assert 1000 <= t1 - t0 < 1000 + 200, (t0, t1)
    ring.run(release_mem(OUT, DATA_SEL="TIMESTAMP", INT_SEL="SEND_INT"))
    t2 = g.timestamp()
    stamp = g.r32(OUT) | g.r32(OUT + 4) << 32
    (e,) = ih.pop()
    entry = e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
    assert t1 <= stamp <= entry <= t2 and stamp >> 48 == 0, (t1, stamp, entry, t2)
    flag = OUT + 0x40
    g.w32(flag, [0])
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    a = g.timestamp()
    ring.submit(wait_mem(flag, 1, 1, "EQ", interval=4))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1))
    g.waiting()
    g.waiting("SDMA_STATUS")
    g.dev.delay(3000)
    g.w32(flag, [1])
    g.idle()
    g.idle("SDMA_STATUS")
    b = g.timestamp()
    busy, sbusy, stall = (g.read(r) for r in ("PERF_BUSY_CYCLES", "PERF_SDMA_BUSY_CYCLES", "PERF_STALL_CYCLES"))
    assert 3000 <= busy <= b - a and 3000 <= sbusy <= b - a and stall <= busy, (busy, sbusy, stall, b - a)
    g.dev.delay(500)
    assert (g.read("PERF_BUSY_CYCLES"), g.read("PERF_SDMA_BUSY_CYCLES")) == (busy, sbusy), "idle: no more"
    # a WAIT_REG_MEM of queue 1 that yields (the RTL parks it and parses it again) while queue
    # 0 runs 20 packets: its packet and its dwords are counted once, the queues' parts add up
    from tests.model.contract.contract_driver import RING1, RPTR1_WB, Ring
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    P = pm4_packets()
    g.w32(flag, [0])
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    q1.submit(wait_mem(flag, 1, 1, "EQ", interval=1))
    g.waiting("CP_HQD1_STATUS")
    for k in range(20):
        ring.submit(write_data(OUT + 0x100 + 4 * (k % 8), [k]))
    g.idle()
    g.w32(flag, [1])
    g.idle("CP_HQD1_STATUS")
    assert (g.read("PERF_Q0_DWORDS_FETCHED"), g.read("PERF_Q1_DWORDS_FETCHED"), g.read("PERF_DWORDS_FETCHED")) == \
        (20 * 5, 7, 20 * 5 + 7)
    assert [g.read("PERF_PACKETS", P[k].index) for k in ("WAIT_REG_MEM", "WRITE_DATA")] == [1, 20]


def check_release_mem_without_data_and_a_fill_value(dev):
    """RELEASE_MEM with DATA_SEL NONE accesses nothing: an address beyond the bus's 48 bits
    is no BUS_DECERR (the rule is for a RELEASE_MEM with data) and one 4 mod 8 is no
    FENCE_MISALIGNED (8-byte alignment is for 64-bit data), but ADDR_LO's bits 1:0 are still
    checked (check 5); its EOP entry carries DATA_LO, DATA_HI and the ADDR_LO dword all the
    same. A DMA_DATA fill takes its value from SRC_ADDR_LO alone: SRC_ADDR_HI is not used."""
    g, ring, ih = bring_up(dev)
    g.w32(OUT, [0x11] * 4)
    ring.run(release_mem(OUT + 4 | 1 << 48, 0x1_0000_0002, DATA_SEL="NONE", INT_SEL="SEND_INT", INT_CTXID=5),
             release_mem(OUT + 4, 0x3_0000_0004, DATA_SEL="NONE", INT_SEL="SEND_INT_ON_CONFIRM", INT_CTXID=6))
    st = g.idle()
    assert st["ERROR"] == 0 and g.read("CP_ERROR") == 0, st
    got = [(ih.source(e), e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) for e in ih.pop()]
    assert got == [("EOP", 5, 2, 1, OUT + 4), ("EOP", 6, 4, 3, OUT + 4)], got
    assert g.r32(OUT, 4) == [0x11] * 4, "DATA_SEL NONE wrote memory"
    p = release_mem(OUT, 3, DATA_SEL="NONE", INT_SEL="SEND_INT")
    p[3] |= 2  # ADDR_LO's dword: bits 1:0 set
    at = ring.wptr + 2
    ring.submit(pm4("NOP", [0]), p)
    expect_error(ring, ih, "FENCE_MISALIGNED", "RING", pm4_packets()["RELEASE_MEM"].opcode, RING + 4 * at, at)
    assert g.r32(OUT, 4) == [0x11] * 4
    ring.run(dma_data(OUT + 1, 0xAABBCCDD | 0x1234 << 32, 9, SRC_SEL="DATA", CP_SYNC=1))
    assert g.read("CP_ERROR") == 0
    assert g.r32(OUT, 4) == [0xAABBCC11, 0xAABBCCDD, 0xCCDD, 0x11], [hex(v) for v in g.r32(OUT, 4)]


def check_chain_at_the_deepest_level_and_its_vmid(dev):
    """A CHAIN is no nesting: from IB2 (CAPS.IB_LEVELS deep) it runs the new IB at IB2, and
    check 6 gives a CHAIN there IB_SIZE_ZERO or, with a base beyond the bus, BUS_DECERR at the
    base's low 48 bits (never IB_NESTING), LEVEL IB2; a misaligned base is IB_MISALIGNED. A
    CHAIN's VMID field is ignored: the chained IB keeps the VMID the ring's packet named (its
    EOP entry says so), IB1's chain and IB2's alike. The ring packet finishes (rptr passes
    it) when the last chained IB does."""
    g, ring, ih = bring_up(dev)
    assert g.fields("CAPS")["IB_LEVELS"] == 2
    P = pm4_packets()
    op = P["INDIRECT_BUFFER"].opcode
    eop = lambda k: release_mem(OUT + 4 * k, 0x100 + k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731
    tail1, tail2 = eop(3), eop(4)
    g.w32(IB1B, tail2)
    g.w32(0x53000, eop(2) + ib(IB1B, len(tail2), CHAIN=1, VMID=9))  # chained from IB2: still IB2
    g.w32(IB2, eop(1) + ib(0x53000, 8 + 4, CHAIN=1, VMID=7))
    g.w32(0x54000, tail1)
    g.w32(IB1, eop(0) + ib(IB2, 8 + 4) + ib(0x54000, len(tail1), CHAIN=1, VMID=5))
    ring.run(ib(IB1, 8 + 4 + 4, VMID=3), eop(5))
    got = [(e["DATA0"], e["VMID"]) for e in ih.pop()]
    assert got == [(0, 3), (1, 3), (2, 3), (4, 3), (3, 3), (5, 0)], got
    assert g.r32(OUT, 6) == [0x100 + k for k in range(6)] and g.read("RB_RPTR") == 4 + 8 == g.r32(RPTR_WB)
    for low, base, size, code, addr in ((0, IB1B, 0, "IB_SIZE_ZERO", IB2 + 8),
                                        (0, IB1B | 1 << 48, 4, "BUS_DECERR", IB1B),
                                        (2, IB1B, 4, "IB_MISALIGNED", IB2 + 8)):
        chain = ib(base, size, CHAIN=1)
        chain[1] |= low  # IB_BASE_LO's bits 1:0
        g.w32(IB2, pm4("NOP", [0]) + chain)
        g.w32(IB1, ib(IB2, 6))
        ring.submit(ib(IB1, 4))
        expect_error(ring, ih, code, "IB2", op, addr, 2)


def check_count_0x3fff_is_the_one_dword_form_of_nop_alone(dev):
    """COUNT 0x3FFF is the header-only form of NOP alone (docs/hardware.md): a WRITE_DATA with
    COUNT 0x3FFF is the longest one, 16381 data dwords (16385 in all), written whole, the
    packet after it run (in an IB of 16385 + 5 dwords); fixed-size packets with COUNT 0x3FFF
    are BAD_COUNT (not a one-dword form)."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    big, dst = 0x300000, 0x400000
    data = [0xA0000000 + k for k in range(16381)]
    wd = write_data(dst, data)
    assert wd[0] >> 16 & 0x3FFF == 0x3FFF and len(wd) == 16385
    body = wd + write_data(dst + 4 * 16381, [0x5A])
    raw = lambda words: list(b"".join(w.to_bytes(4, "little") for w in words))  # noqa: E731
    g.dev.mem[dst:dst + 4 * 16384] = [0] * (4 * 16384)  # (one slice each: 16 K dwords one by one are slow)
    g.dev.mem[big:big + 4 * len(body)] = raw(body)
    ring.submit(ib(big, len(body)))
    st = g.idle(cycles=400000)
    assert st["ERROR"] == 0, ring.error_regs()
    got = bytes(g.dev.mem[dst:dst + 4 * 16382])
    assert got == bytes(raw(data + [0x5A])), "the longest WRITE_DATA or the packet after it"
    for name in ("INDIRECT_BUFFER", "WAIT_REG_MEM", "RELEASE_MEM", "DMA_DATA"):
        hdr = 0xC0000000 | 0x3FFF << 16 | P[name].opcode << 8
        g.w32(IB1, [hdr] + [0] * 7)
        ring.submit(ib(IB1, 8))
        expect_error(ring, ih, "BAD_COUNT", "IB1", P[name].opcode, IB1, 0)


def check_slverr_and_decerr_inside_memory_for_every_access(dev):
    """A memory that answers SLVERR (the testbench memory's error window, inside memory, 4 KiB
    at ERR) gives BUS_SLVERR, not BUS_DECERR, with what each access's error latches: a
    WRITE_DATA running into it has written every dword before it (ADDR its first byte); a
    WAIT_REG_MEM poll, a RELEASE_MEM's write, an IB header fetched there (OPCODE 0, LEVEL
    IB1, OFFSET the header's), while an IB that ends right before it runs clean (nothing
    after IB_SIZE is read); a DMA_DATA read needing it mid-transfer (ADDR the first byte
    needed in the faulting beat) and a write starting in it (the burst's first byte); the
    rptr write-back; the SDMA's FENCE and COPY_LINEAR. The same window answering DECERR gives
    BUS_DECERR: the code is the memory's answer, not where the address lies. PERF_PACKETS
    counts every packet that started, its access failing or not, and nothing past its kinds."""
    from tests.model.contract.contract_driver import SRING, SdmaRing, expect_sdma_error, sdma_packets

    g, ring, ih = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    err = 0x70000
    dev.mem_model.configure(error_window=(err, err + 0x1000, "SLVERR"))
    try:
        g.w32(err - 8, [0xAA, 0xBB])
        ring.submit(write_data(err - 8, [1, 2, 3, 4]))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["WRITE_DATA"].opcode, err, 0)
        assert g.r32(err - 8, 2) == [1, 2], "the dwords before the failing one are written"
        ring.submit(pm4("NOP", [0]), wait_mem(err + 0x40, 0, 0, "ALWAYS"))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["WAIT_REG_MEM"].opcode, err + 0x40, 2)
        ring.submit(release_mem(err + 0x10, 5, INT_SEL="SEND_INT"))
        entries = expect_error(ring, ih, "BUS_SLVERR", "RING", P["RELEASE_MEM"].opcode, err + 0x10, 0)
        assert len(entries) == 1, "no EOP entry for a fence whose write failed"
        g.w32(err - 8, pm4("NOP", [0]))
        ring.run(ib(err - 8, 2))
        assert g.fields("STATUS")["ERROR"] == 0, "an IB ending right before the window reads nothing of it"
        ring.submit(ib(err - 8, 4))
        expect_error(ring, ih, "BUS_SLVERR", "IB1", 0, err, 2)
        ring.submit(dma_data(OUT, err - 0x13, 0x40))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, err, 0)
        ring.submit(dma_data(OUT, err + 0x105, 0x40))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, err + 0x105, 0)
        ring.submit(dma_data(err + 0x203, 0, 0x40, SRC_SEL="DATA"))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, err + 0x203, 0)
        ring.set_rptr_wb(err + 0x20)
        ring.submit(pm4("NOP", [0]), write_data(OUT, [0x31]))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["NOP"].opcode, err + 0x20, 0)
        ring.set_rptr_wb(RPTR_WB)
        s = SdmaRing(g, SRING, 6)
        s.submit(sdma("FENCE", **lo_hi("ADDR", err + 0x30, 2), DATA=7))
        expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["FENCE"].opcode, err + 0x30, 0)
        s.submit(sdma("COPY_LINEAR", COUNT=0x1F, **lo_hi("SRC_ADDR", err + 0x300), **lo_hi("DST_ADDR", OUT)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["COPY_LINEAR"].opcode, err + 0x300, 0)
        dev.mem_model.configure(error_window=(err, err + 0x1000, "DECERR"))
        ring.submit(write_data(err + 0x44, [9]))
        expect_error(ring, ih, "BUS_DECERR", "RING", P["WRITE_DATA"].opcode, err + 0x44, 0)
        ring.run(write_data(OUT, [0x77]))
        assert g.r32(OUT) == 0x77 and g.fields("STATUS")["ERROR"] == 0
        # PERF_PACKETS counts a packet that passed its checks and started, whether its access
        # then failed or not (not the WRITE_DATA behind the failing write-back: never started);
        # its indices past the last kind count nothing.
        want = {"NOP": 4, "WRITE_DATA": 3, "INDIRECT_BUFFER": 2, "WAIT_REG_MEM": 1, "RELEASE_MEM": 1, "DMA_DATA": 3}
        counted = [g.read("PERF_PACKETS", i) for i in range(g.regs["PERF_PACKETS"].count)]
        assert counted == [want.get(k, 0) for k in sorted(P, key=lambda k: P[k].index)] + \
            [0] * (len(counted) - len(P)), f"PERF_PACKETS {counted}, expected {want}"
    finally:
        dev.mem_model.configure(error_window=None)


def check_dma_errors_name_the_faulting_burst_and_beat_at_every_bus_width(dev):
    """A DMA_DATA error in the middle of a transfer, where the memory answers SLVERR for 64
    bytes that lie inside a burst (not at its start): a write names the first byte of the
    faulting burst, bursts being split at 16-beat boundaries (16 · 2^CAPS.BUS_BYTES_LOG2
    bytes, below 4 KiB), so that byte moves with the bus width (the transfer's first byte when
    its first burst faults); a read names the first byte it needed in the faulting beat; the
    SDMA's CONSTANT_FILL and COPY_LINEAR report as DMA_DATA does; a transfer queued before
    the failing one is complete."""
    from tests.model.contract.contract_driver import SRING, SdmaRing, expect_sdma_error, sdma_packets

    g, ring, ih = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    burst = 16 << g.fields("CAPS")["BUS_BYTES_LOG2"]
    w = 0x70000
    bad = w + 0x140  # 64-byte aligned: whole beats at every width up to 512 bits
    first_of_burst = lambda dst: max(dst, bad // burst * burst)  # noqa: E731
    dev.mem_model.configure(error_window=(bad, bad + 0x40, "SLVERR"))
    try:
        g.w32(0x100000, list(range(1, 0x101)))
        ring.submit(dma_data(OUT, 0x100000, 0x400), dma_data(w + 3, 0x1234_5678, 0x400, SRC_SEL="DATA"))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, first_of_burst(w + 3), 7)
        assert g.r32(OUT, 0x100) == list(range(1, 0x101)), "the transfer before the failing one is complete"
        for dst in (w + 0x105, w + 0x13F, w + 0x140, w + 0x15D):
            ring.submit(dma_data(dst, 0x100000, 0x200, CP_SYNC=1))
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, first_of_burst(dst), 0)
        for src, at in ((w + 0x101, bad), (w + 0x13F, bad), (w + 0x147, w + 0x147)):
            ring.submit(dma_data(OUT + 0x1000, src, 0x200, CP_SYNC=1))
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, at, 0)
        s = SdmaRing(g, SRING, 6)
        s.submit(sdma("CONSTANT_FILL", SRC_DATA=7, COUNT=0x3FF, **lo_hi("DST_ADDR", w + 0x21)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["CONSTANT_FILL"].opcode, first_of_burst(w + 0x21), 0)
        s.submit(sdma("COPY_LINEAR", COUNT=0x1FF, **lo_hi("SRC_ADDR", w + 0x11), **lo_hi("DST_ADDR", OUT + 0x2000)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["COPY_LINEAR"].opcode, bad, 0)
    finally:
        dev.mem_model.configure(error_window=None)


def check_the_smallest_ring_of_two_dwords(dev):
    """RB_SIZE.LOG2_QWORDS 0: a ring of 2 dwords, its dword i at base + 4·(i mod 2) (nothing
    after it is ever fetched), a packet of 2 dwords fills it, one crossing its end runs, the
    rptr write-back follows; a doorbell more than 2 dwords ahead of rptr is DOORBELL_OVERFLOW,
    OFFSET rptr mod 2."""
    g, _, ih = bring_up(dev)
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.w32(RING, [0xC000FF00] * 8)  # an ILLEGAL_OPCODE after the ring's two dwords
    ring = Ring(g, RING, 1, RPTR_WB)
    assert g.fields("RB_SIZE") == {"LOG2_QWORDS": 0}
    ring.run(pm4("NOP", [0x1234]))
    ring.run([0xFFFF1000], [0x8000_0000])
    ring.run([0xFFFF1000])
    ring.run(pm4("NOP", [0x5678]))  # dwords 5 and 6: at offsets 4 and 0
    st = g.fields("STATUS")
    assert (st["ERROR"], g.read("RB_RPTR"), g.r32(RPTR_WB)) == (0, 7, 7), (st, g.read("RB_RPTR"))
    assert g.read("PERF_PACKETS", pm4_packets()["NOP"].index) == 5 and g.read("PERF_DWORDS_FETCHED") == 7
    assert g.r32(RING + 8, 6) == [0xC000FF00] * 6
    ring.doorbell(10)
    expect_error(ring, ih, "DOORBELL_OVERFLOW", "RING", 0, 10, 1)


def check_fetch_errors_only_where_the_parser_needs_a_dword(dev):
    """A fetch error is reported when the parser reaches the faulting dword: dwords of an IB
    that are fetched (inside IB_SIZE) but never needed do not fault, in memory answering
    SLVERR right after a CHAIN or after a packet that fails its own checks (ILLEGAL_OPCODE,
    not a bus error); a payload dword there faults at that dword with the packet's OPCODE;
    a NOP's payload there faults too (the CP reads the dwords it skips); the SDMA's too, in
    an IB: its burst NOP's payload faults, an unknown packet before the window is
    ILLEGAL_OPCODE, a FENCE's address dword there a bus error of the FENCE."""
    from tests.model.contract.contract_driver import sdma_packets

    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    w = 0x70000
    dev.mem_model.configure(error_window=(w, w + 0x1000, "SLVERR"))
    try:
        g.w32(IB1B, write_data(OUT, [0x61]))
        g.w32(w - 16, ib(IB1B, 5, CHAIN=1))
        ring.run(ib(w - 16, 12))
        assert g.fields("STATUS")["ERROR"] == 0 and g.r32(OUT) == 0x61, "dwords after a CHAIN are not needed"
        g.w32(w - 8, [0xC000FF00, 0])
        ring.submit(ib(w - 8, 10))
        expect_error(ring, ih, "ILLEGAL_OPCODE", "IB1", 0xFF, w - 8, 0)
        g.w32(w - 8, write_data(OUT, [1])[:2])
        ring.submit(ib(w - 8, 5))
        expect_error(ring, ih, "BUS_SLVERR", "IB1", P["WRITE_DATA"].opcode, w, 0)
        g.w32(w - 8, [0xFFFF1000, pm4("NOP", [0] * 4)[0]])
        ring.submit(ib(w - 8, 6))
        expect_error(ring, ih, "BUS_SLVERR", "IB1", P["NOP"].opcode, w, 1)
        # The SDMA alike, in an IB (32-byte aligned) whose dword 7 is the last before the window.
        s = SdmaRing(g, SRING, 6)
        S = sdma_packets()
        for last, code, op, at in ((sdma("NOP", [])[0] | 4 << 16, "BUS_SLVERR", S["NOP"].opcode, w),
                                   (0x0000_FFFF, "ILLEGAL_OPCODE", 0xFF, w - 4),
                                   (sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2))[0], "BUS_SLVERR", S["FENCE"].opcode,
                                    w)):
            g.w32(w - 32, [0] * 7 + [last])
            s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", w - 32, 5), IB_SIZE=16))
            st = g.idle("SDMA_STATUS")
            err = g.fields("SDMA_ERROR")
            got = (st["ERROR"], err["CODE"], err["OP"], err["LEVEL"], g.read("SDMA_ERROR_ADDR_LO"),
                   g.read("SDMA_ERROR_OFFSET"))
            assert got == (1, g.err[code], op, g.level["IB1"], at, 7), f"SDMA {code}: {got}"
            g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
            g.set("SDMA_CNTL", QUEUE_RESET=1)
            g.idle("SDMA_STATUS")
            s.wptr = 0
    finally:
        dev.mem_model.configure(error_window=None)


def check_write_data_error_inside_a_block(dev):
    """A WRITE_DATA writes its data in blocks, the 32-byte-aligned pieces of it (8 dwords at
    most, in order); when memory refuses a dword in the middle of a block (an SLVERR window
    from byte 8 of a block), ADDR is the first byte the packet writes in that block, every
    dword before ADDR is written and none of the window's; a packet that ends before the
    window runs clean. On a 32-bit bus, a RELEASE_MEM's 64-bit data whose high dword is
    refused names the fence's address. (The testbench's memory refuses a whole bus beat whose
    address is in the window: the window starts at byte 8 of the block, or at its second beat
    on a 128-bit bus; on a 256-bit bus, where a block is one beat, at the next block.)"""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    w = 0x70000
    beat = 1 << g.fields("CAPS")["BUS_BYTES_LOG2"]
    cut = 0x140 + max(8, beat)  # (0x148; 0x150 on 128 bits, 0x160 on 256)
    dev.mem_model.configure(error_window=(w + cut, w + 0x188, "SLVERR"))
    try:
        for start, at in ((0x100, 0x140), (0x104, 0x140), (0x13C, 0x140), (0x144, 0x144), (0xC4, None)):
            at = at if at is None else max(at, cut & ~31)  # (the first byte written in the failing block)
            g.w32(w + 0xC0, [0] * 0x80)
            ring.submit(write_data(w + start, list(range(1, 33))))
            if at is None:
                assert g.idle()["ERROR"] == 0 and g.r32(w + start, 32) == list(range(1, 33)), hex(start)
                continue
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["WRITE_DATA"].opcode, w + at, 0)
            got = g.r32(w + start, 32)
            n = (at - start) // 4
            assert got[:n] == list(range(1, n + 1)), f"from {start:#x}: not every dword before ADDR: {got}"
            assert not any(got[(cut - start) // 4:]), f"from {start:#x}: a dword of the window written: {got}"
        if g.fields("CAPS")["BUS_BYTES_LOG2"] == 2:  # (a wider beat holds both dwords: the
            # testbench memory refuses whole beats whose address is in the window)
            # RELEASE_MEM's 64-bit data is one block too: its high dword refused, ADDR is the fence's.
            dev.mem_model.configure(error_window=(w + 0x24C, w + 0x250, "SLVERR"))
            at = ring.wptr
            ring.submit(release_mem(w + 0x248, 0x1111_2222_3333_4444, DATA_SEL="DATA_64"))
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["RELEASE_MEM"].opcode, w + 0x248, at)
    finally:
        dev.mem_model.configure(error_window=None)


def check_ih_entry_write_refused_in_its_middle(dev):
    """An IH entry is one 32-byte write: memory refusing a dword in its middle (an SLVERR
    window from byte 8 of the third entry) fails the entry as a whole, a bus error of the
    packet that raised it at the entry's first byte (OPCODE RELEASE_MEM), IH_WPTR left at
    that entry and INT_STATUS.CP_ERROR the only sign; the two entries before it are in; an
    SDMA TRAP's entry failing so is the SDMA's BUS_SLVERR at the same address. (The testbench's
    memory refuses a whole bus beat whose address is in the window: on a 128-bit bus the
    window is the entry's second beat; on a 256-bit bus, where the entry is one beat, all of it.)"""
    from tests.model.contract.contract_driver import SRING, SdmaRing, sdma_packets

    g, ring, _ = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    w = 0x70000
    g.set("IH_CNTL", ENABLE=0)  # (the base is written while the ring is disabled)
    ih = IhRing(g, w, 6, IH_WB)  # 8 entries at w
    g.w32(IH_WB, [0])
    beat = 1 << g.fields("CAPS")["BUS_BYTES_LOG2"]
    cut = 0x40 + (max(8, beat) if beat < 32 else 0)
    dev.mem_model.configure(error_window=(w + cut, w + cut + max(8, beat), "SLVERR"))
    try:
        ring.submit(release_mem(OUT, 1, INT_SEL="SEND_INT", INT_CTXID=1),
                    release_mem(OUT, 2, INT_SEL="SEND_INT", INT_CTXID=2),
                    release_mem(OUT, 3, INT_SEL="SEND_INT", INT_CTXID=3))
        st = g.idle()
        err, addr, off = ring.error_regs()
        assert (st["ERROR"], err["CODE"], err["OPCODE"], addr, off) == \
            (1, g.err["BUS_SLVERR"], P["RELEASE_MEM"].opcode, w + 0x40, 16), (st, err, hex(addr), off)
        assert (g.read("IH_WPTR"), g.r32(IH_WB), g.field("INT_STATUS", "CP_ERROR")) == (64, 64, 1)
        assert [e["DATA0"] for e in ih.pop()] == [1, 2]
        g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, CP_ERROR=1))
        g.set("CP_QUEUE_RESET", Q0=1)
        g.idle()
        s = SdmaRing(g, SRING, 6)
        g.set("SDMA_CNTL", TRAP_ENABLE=1)
        s.submit(sdma("TRAP", INT_CONTEXT=4))
        st = g.idle("SDMA_STATUS")
        e = g.fields("SDMA_ERROR")
        got = (st["ERROR"], e["CODE"], e["OP"], g.read("SDMA_ERROR_ADDR_LO"), g.read("IH_WPTR"))
        assert got == (1, g.err["BUS_SLVERR"], S["TRAP"].opcode, w + 0x40, 64), got
    finally:
        dev.mem_model.configure(error_window=None)


def check_poll_interval_0_acts_as_1_and_counts_from_each_answer(dev):
    """WAIT_REG_MEM's POLL_INTERVAL 0 acts as 1 (docs/hardware.md, packets.md): the wait polls
    back to back, about as often as with 1, and finishes when the value comes; the CP's
    interval runs from each read's answer to the next read's request, so on the RTL reads are
    POLL_INTERVAL plus the read's latency apart (PERF_Q0_POLLS over a TIMESTAMP-measured
    window stays at most one more than the window / (interval + 3)), where the reference
    model, without latency, reads every interval."""
    g, ring, ih = bring_up(dev)
    flag = OUT + 0x40
    rtl = dev.name != "model"
    counts = {}
    for k, iv in enumerate((0, 1, 4, 30)):
        g.w32(flag, [0])
        ring.submit(wait_mem(flag, 1, 1, "EQ", interval=iv), write_data(OUT + 4 * k, [0x100 + iv]))
        g.waiting()
        t0 = g.timestamp()
        a = g.read("PERF_Q0_POLLS")
        g.dev.delay(600)
        n = g.read("PERF_Q0_POLLS") - a
        t = g.timestamp() - t0
        counts[iv] = n
        period = max(1, iv) + (3 if rtl else 0)
        assert 1 <= n <= t // period + 1, f"POLL_INTERVAL {iv}: {n} reads in {t} cycles, one per {period} at most"
        assert g.fields("STATUS")["WAITING"] == 1 and g.r32(OUT + 4 * k) == 0
        g.w32(flag, [1])
        g.idle()
        assert g.r32(OUT + 4 * k) == 0x100 + iv, f"POLL_INTERVAL {iv}: the wait ended"
    assert abs(counts[0] - counts[1]) <= max(2, counts[1] // 4), f"0 acts as 1: {counts}"
    # (a read's latency adds to every interval: on slow memory, GPUCOSIM_DRIVER_MEM=slow, tens
    # of cycles, and 30 is then less than twice 0's period)
    assert counts[0] > 2 * counts[30] or (rtl and counts[0] > counts[30] and 600 // counts[1] > 15), counts


def check_a_transfer_whose_reads_and_writes_both_fail_reports_one(dev):
    """A copy whose source and destination both meet an error (the testbench memory's SLVERR
    window at ERR) reports one error, the one answered first (docs/hardware.md, the DMA
    engine): the read's (its faulting beat's first needed byte) or the write's (its burst's
    first byte). A source failing at its first byte is reported whatever the destination
    does, as no write goes out before its data is read; a destination failing at once with
    the source failing 256 bytes on can report either on the RTL, whose reads run ahead of its
    writes (on Verilator, 64-bit bus, default memory, the read's), while the reference model, without
    time, reports the error at the lower offset into the transfer (there the write's). The
    CP's DMA_DATA and the SDMA's COPY_LINEAR alike."""
    from tests.model.contract.contract_driver import SRING, SdmaRing, expect_sdma_error, sdma_packets

    g, ring, ih = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    err = 0x70000
    model = dev.name == "model"
    s = SdmaRing(g, SRING, 8)
    dev.mem_model.configure(error_window=(err, err + 0x1000, "SLVERR"))
    try:
        def cp(dst, src, n):
            ring.submit(dma_data(dst, src, n, CP_SYNC=1))
            g.idle()
            addr = g.read("CP_ERROR_ADDR_LO") | g.read("CP_ERROR_ADDR_HI") << 32
            expect_error(ring, ih, "BUS_SLVERR", "RING", P["DMA_DATA"].opcode, addr, 0)
            return addr

        def sd(dst, src, n):
            s.submit(sdma("COPY_LINEAR", COUNT=n - 1, **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst)))
            g.idle("SDMA_STATUS")
            addr = g.read("SDMA_ERROR_ADDR_LO") | g.read("SDMA_ERROR_ADDR_HI") << 32
            expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["COPY_LINEAR"].opcode, addr, 0)
            return addr

        for run in (cp, sd):
            # the source fails at its first byte, the destination 256 bytes on: the read's
            assert run(err - 0x100, err + 0x805, 0x200) == err + 0x805, "the first byte it needed"
            # the destination fails at once, the source 256 bytes on: either
            got = run(err + 0x800, err - 0x100, 0x200)
            assert got == (err + 0x800 if model else got) and got in (err, err + 0x800), \
                f"{run.__name__}: {got - err:+#x} from ERR"
    finally:
        dev.mem_model.configure(error_window=None)



# ------------------------------------------------------------- what the irq finds done (driver-writer-9)

def check_the_packet_of_an_interrupt_finishes_after_its_entry(dev):
    """A RELEASE_MEM with an interrupt (queue 0, queue 1) and an SDMA TRAP finish after their
    IH entry: when the irq line rises the fence (the FENCE before the TRAP) is in memory and
    the entry is whole, but on the RTL the IH_WPTR write-back lands a few cycles later and
    the ring's rptr write-back after that, so at the irq the rptr write-back still names the
    packet itself; RB_RPTR (CP_HQD1_RB_RPTR, SDMA_RB_RPTR) then passes it and the queue's
    IDLE reads 1 with no more doorbells. The model, without time, has the packet finished
    when the line is seen. Either way the IH write-back lands no later than the rptr's."""
    from tests.model.contract.contract_driver import RING1, RPTR1_WB

    rtl = dev.name != "model"
    g, ring, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    swb = OUT + 0x800
    s = SdmaRing(g, SRING, 8, swb)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    g.set("INT_ENABLE", IH_PENDING=1)
    fence, sfence = OUT, OUT + 0x40
    for name, r, wb, status, rptr in (("queue 0", ring, RPTR_WB, "STATUS", "RB_RPTR"),
                                      ("queue 1", q1, RPTR1_WB, "CP_HQD1_STATUS", "CP_HQD1_RB_RPTR"),
                                      ("the SDMA", s, swb, "SDMA_STATUS", "SDMA_RB_RPTR")):
        for k in range(2):
            ihw = g.read("IH_WPTR")
            before = r.wptr
            if r is s:
                s.submit(sdma("FENCE", DATA=0x70 + k, **lo_hi("ADDR", sfence, 2)), sdma("TRAP", INT_CONTEXT=k + 1))
                at = before + 4 * 4  # (bytes: the TRAP after the 4-dword FENCE)
            else:
                r.submit(write_data(OUT + 0x80, [k]), release_mem(fence, 0x100 + k, INT_SEL="SEND_INT"))
                at = before + 5  # (dwords: the RELEASE_MEM after the 5-dword WRITE_DATA)
            assert dev.wait_irq(5000), f"{name}: no interrupt"
            # the line is high: the packet's data and its entry are in memory
            assert (g.r32(sfence) == 0x70 + k) if r is s else (g.r32(fence) == 0x100 + k), name
            e = ih.entry(ihw)
            assert ih.source(e) == ("SDMA_TRAP" if r is s else "EOP") and e["DATA0"] == (k + 1 if r is s else 0), e
            first_ih = first_rptr = None
            t0 = dev.now()
            seen = g.r32(wb)
            assert seen == (at if rtl else r.wptr), f"{name}: rptr write-back {seen} at the irq"
            while first_rptr is None or first_ih is None:
                if first_ih is None and g.r32(IH_WB) == ihw + 32:
                    first_ih = dev.now() - t0
                if first_rptr is None and g.r32(wb) == r.wptr:
                    first_rptr = dev.now() - t0
                assert dev.now() - t0 < 2000, f"{name}: write-backs {first_ih}, {first_rptr}"
                if first_rptr is None or first_ih is None:
                    dev.delay(1)
            assert first_ih <= first_rptr and (first_ih < first_rptr) == rtl, (name, first_ih, first_rptr)
            assert g.read(rptr) == r.wptr and g.idle(status)["IDLE"] == 1
            ih.pop()
    g.write("INT_ENABLE", 0)


def check_rptr_passes_a_transfer_before_its_data_idle_waits_for_it(dev):
    """A DMA_DATA without CP_SYNC (an SDMA CONSTANT_FILL or COPY_LINEAR) is passed once its
    transfer is queued: on the RTL RB_RPTR (SDMA_RB_RPTR), the rptr write-back and RB_EMPTY
    show the ring drained while the transfer still writes, IDLE reads 0 (and STATUS.DMA_BUSY
    1) until its last byte is answered; so a driver that reads the destination waits for IDLE
    (or a fence written after the transfer), not for the rptr. The model, without time, has
    the transfer done when the rptr passes it."""
    rtl = dev.name != "model"
    g, ring, ih = bring_up(dev)
    swb = OUT + 0x800
    s = SdmaRing(g, SRING, 8, swb)
    big, n = 0x400000, 0x10000  # 64 KiB: 8,192 cycles at least on a 64-bit bus
    for engine in ("CP", "SDMA"):
        g.dev.mem[big:big + n] = [0] * n
        if engine == "CP":
            ring.submit(dma_data(big, 0x5A5A5A5A, n, SRC_SEL="DATA"))
            r, wb, status, rptr = ring, RPTR_WB, "STATUS", "RB_RPTR"
        else:
            s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x5A5A5A5A, COUNT=n - 1, **lo_hi("DST_ADDR", big)))
            r, wb, status, rptr = s, swb, "SDMA_STATUS", "SDMA_RB_RPTR"
        g.until(lambda: g.r32(wb) == r.wptr, f"{engine}: the rptr write-back past the fill")
        st = g.fields(status)
        assert g.read(rptr) == r.wptr and st["RB_EMPTY"] == 1, (engine, st)
        last = g.r32(big + n - 4)
        if rtl:
            assert st["IDLE"] == 0 and last == 0, f"{engine}: the ring drained, the fill still running: {st} {last:#x}"
            if engine == "CP":
                assert st["DMA_BUSY"] == 1, st
        # (a bound: 64 KiB on a 32-bit bus is 16,384 beats, several times that on slow memory)
        st = g.until(lambda: (lambda f: f if f["IDLE"] else None)(g.fields(status)), f"{engine}: {status}.IDLE",
                     cycles=2_000_000, step=200)
        assert (st["IDLE"], st["RB_EMPTY"], g.r32(big + n - 4), g.r32(big)) == (1, 1, 0x5A5A5A5A, 0x5A5A5A5A), \
            (engine, st)
        if engine == "CP":
            assert st["DMA_BUSY"] == 0, st
    assert not ih.pop()


def check_release_mem_timestamp_is_taken_after_earlier_transfers(dev):
    """RELEASE_MEM's DATA_SEL TIMESTAMP is the GPU clock as the packet starts, which is once
    every earlier packet is done and every earlier transfer answered (a DMA_DATA without
    CP_SYNC too): on the RTL no earlier than the doorbell plus the DMA engine's busy cycles
    of a 64 KiB fill before it; the EOP entry's TIMESTAMP is taken when the fence write is
    answered, so it is no earlier than the data's; a second RELEASE_MEM's stamp is later
    still. The model, where a transfer takes no time, stamps in the same order."""
    rtl = dev.name != "model"
    g, ring, ih = bring_up(dev)
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    t0 = g.timestamp()
    ring.run(dma_data(0x400000, 0x11223344, 0x10000, SRC_SEL="DATA"),
             release_mem(OUT, DATA_SEL="TIMESTAMP", INT_SEL="SEND_INT"),
             release_mem(OUT + 8, DATA_SEL="TIMESTAMP"))
    t1 = g.timestamp()
    first, second = (g.r32(a) | g.r32(a + 4) << 32 for a in (OUT, OUT + 8))
    (e,) = ih.pop()
    entry = e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
    busy = g.read("PERF_DMA_BUSY_CYCLES")
    assert busy >= 0x10000 // (1 << g.fields("CAPS")["BUS_BYTES_LOG2"]), busy
    assert t0 <= first <= entry <= second <= t1, (t0, first, entry, second, t1)
    if rtl:
        assert first - t0 >= busy, f"the stamp {first - t0} cycles after the doorbell, the fill busy {busy}"


def check_only_a_reset_ends_a_stopped_queue(dev):
    """A queue stopped by an error stays stopped through everything but its reset: clearing
    and setting its enable (RB_CNTL, CP_HQD1_RB_CNTL, SDMA_RB_CNTL.RB_ENABLE), CONTROL.HALT
    (SDMA_CNTL.HALT) set and cleared, INT_STATUS.CP_ERROR cleared and doorbells leave ERROR,
    the error registers, VM_FAULT_* and the pointers as they were, and run nothing; there is
    no retry of the faulting packet. Its queue reset (CP_QUEUE_RESET.Qn, SDMA_CNTL.QUEUE_RESET)
    starts the ring again at 0: the work after the faulting packet is the driver's to submit
    again (here the faulting IB's page mapped, with no invalidation: a failed translation is
    not kept)."""
    from tests.model.contract.contract_driver import (PA_OUT, PT_L1, RING1, RPTR1_WB, VA_CODE, VA_HOLE, PA_CODE, map_vmid1,
                                             sdma_packets, VALID, WRITEABLE)

    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 8, OUT + 0x800)
    map_vmid1(g)
    P, S = pm4_packets(), sdma_packets()
    g.w32(PA_CODE, write_data(VA_HOLE + 0x40, [0x88]))  # queue 0: a VM fault in its IB
    q0.submit(ib(VA_CODE, 5, VMID=1), write_data(OUT + 0x10, [0x10]))
    q1.submit(pm4("NOP", [0]), [0xC000FF00, 0], write_data(OUT + 0x14, [0x14]))  # queue 1: ILLEGAL_OPCODE
    s.submit(sdma("FENCE", DATA=0x18, **lo_hi("ADDR", OUT + 0x18, 2)), [0x0000_0003],  # the SDMA: ILLEGAL_OPCODE
             sdma("FENCE", DATA=0x1C, **lo_hi("ADDR", OUT + 0x1C, 2)))
    queues = (("STATUS", "RB_", "RB_CNTL", "ENABLE", q0, ("CP_ERROR", "CP_ERROR_ADDR_LO", "CP_ERROR_OFFSET")),
              ("CP_HQD1_STATUS", "CP_HQD1_RB_", "CP_HQD1_RB_CNTL", "ENABLE", q1,
               ("CP_HQD1_ERROR", "CP_HQD1_ERROR_ADDR_LO", "CP_HQD1_ERROR_OFFSET")),
              ("SDMA_STATUS", "SDMA_RB_", "SDMA_RB_CNTL", "RB_ENABLE", s,
               ("SDMA_ERROR", "SDMA_ERROR_ADDR_LO", "SDMA_ERROR_OFFSET")))
    for status, *_ in queues:
        assert g.idle(status)["ERROR"] == 1, status
    before = {r: g.read(r) for *_, regs in queues for r in regs}
    before.update({r: g.read(r) for r in ("VM_FAULT_STATUS", "VM_FAULT_ADDR_LO", "RB_RPTR", "RB_WPTR",
                                          "CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "SDMA_RB_RPTR", "SDMA_RB_WPTR")})
    assert g.fields("VM_FAULT_STATUS")["VMID"] == 1 and g.field("CP_ERROR", "CODE") == g.err["VM_FAULT"]
    n_entries = len(ih.pop())
    assert n_entries == 3, n_entries
    g.w64(PT_L1 + 8 * (VA_HOLE >> 12 & 511), PA_OUT | VALID | WRITEABLE)  # the page the fault wanted
    for status, pre, cntl, enable, r, _ in queues:
        fields = g.fields(cntl)
        g.set(cntl, **{**fields, enable: 0})
        g.set(cntl, **fields)
        # a doorbell behind wptr: DOORBELL_BACKWARDS, were the queue running
        if r is s:
            g.write("SDMA_DOORBELL", s.wptr - 4)
        else:
            r.doorbell(r.wptr - 1)
    g.set("CONTROL", HALT=1)
    g.set("SDMA_CNTL", HALT=1, TRAP_ENABLE=0)
    g.dev.delay(50)
    g.set("CONTROL", HALT=0)
    g.set("SDMA_CNTL", HALT=0, TRAP_ENABLE=0)
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1, EOP=1))
    g.dev.delay(300)
    after = {r: g.read(r) for r in before}
    assert after == before, {r: (hex(before[r]), hex(after[r])) for r in before if before[r] != after[r]}
    for status, *_ in queues:
        st = g.fields(status)
        assert (st["ERROR"], st["IDLE"]) == (1, 1), (status, st)
    assert g.r32(OUT + 0x10, 4) == [0, 0, 0x18, 0] and g.r32(PA_OUT + 0x40) == 0, "nothing ran"
    assert not ih.pop() and g.field("INT_STATUS", "CP_ERROR") == 0, "no new error"
    # the resets: each ring from 0, the faulting work submitted again by the driver
    g.set("CP_QUEUE_RESET", Q0=1, Q1=1)
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=0)
    for status, pre, cntl, enable, r, regs in queues:
        st = g.idle(status)
        assert (st["ERROR"], g.read(pre + "RPTR"), g.read(pre + "WPTR"), g.read(regs[0])) == (0, 0, 0, 0), status
        r.wptr = 0
    assert g.read("VM_FAULT_STATUS") == 0
    q0.run(ib(VA_CODE, 5, VMID=1), write_data(OUT + 0x10, [0x10]))
    q1.run(write_data(OUT + 0x14, [0x14]))
    s.run(sdma("FENCE", DATA=0x1C, **lo_hi("ADDR", OUT + 0x1C, 2)))
    assert g.r32(OUT + 0x10, 4) == [0x10, 0x14, 0x18, 0x1C] and g.r32(PA_OUT + 0x40) == 0x88
    assert not ih.pop()

CHECKS = [check_ring_doorbell_and_writeback, check_doorbell_errors, check_ib_levels_and_chain, check_packet_checks,
          check_wait_reg_mem, check_release_mem_and_eop_entry, check_ih_ring_wrap_and_overflow, check_dma_data,
          check_cp_own_writes_fail_as_the_packet, check_dma_errors_and_counters,
          check_int_force_and_release_mem_alignment,
          check_packet_rules_in_ibs, check_ih_overflow_of_an_error_entry,
          check_every_listed_value_and_reserved_bit, check_dma_data_edges_and_counters,
          check_timestamp_and_busy_counters, check_release_mem_without_data_and_a_fill_value,
          check_chain_at_the_deepest_level_and_its_vmid, check_count_0x3fff_is_the_one_dword_form_of_nop_alone,
          check_slverr_and_decerr_inside_memory_for_every_access,
          check_dma_errors_name_the_faulting_burst_and_beat_at_every_bus_width, check_the_smallest_ring_of_two_dwords,
          check_fetch_errors_only_where_the_parser_needs_a_dword, check_write_data_error_inside_a_block,
          check_ih_entry_write_refused_in_its_middle, check_poll_interval_0_acts_as_1_and_counts_from_each_answer,
          check_a_transfer_whose_reads_and_writes_both_fail_reports_one,
          check_the_packet_of_an_interrupt_finishes_after_its_entry,
          check_rptr_passes_a_transfer_before_its_data_idle_waits_for_it,
          check_release_mem_timestamp_is_taken_after_earlier_transfers,
          check_only_a_reset_ends_a_stopped_queue]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
@pytest.mark.parametrize("data_width", [64, 32, 256])
def test_contract_on_the_model(check, data_width):
    from testbench.refmodel import RefModel

    check(RefModel(data_width=data_width))


def test_counters_wrap_at_32_bits_and_timestamp_at_48_on_the_model():
    """docs/hardware.md "Counters and time": every PERF_* counter wraps to 0 after 2^32 (no
    saturation, no flag) and TIMESTAMP after 2^48, RELEASE_MEM's 64-bit TIMESTAMP and an IH
    entry's with it. The RTL's are 32- and 48-bit registers counting `+ n` (rtl/cp/status.py,
    rtl/top.py); no simulation reaches their ends, so the model's, started near them, are the
    ones checked."""
    from testbench.refmodel import RefModel

    dev = RefModel()
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    dev._fetched = M32 - 1  # (PERF_DWORDS_FETCHED 2^32 - 2)
    dev._packets[P["NOP"].index] = M32
    dev._t = (1 << 48) - 100  # (TIMESTAMP 100 cycles before its end)
    ring.run(pm4("NOP", [0, 0]), release_mem(OUT, DATA_SEL="TIMESTAMP", INT_SEL="SEND_INT"))
    assert g.read("PERF_DWORDS_FETCHED") == (M32 - 1 + 3 + 8) & M32 == 9
    assert g.read("PERF_PACKETS", P["NOP"].index) == 0
    dev.delay(100)
    ring.run(release_mem(OUT + 8, DATA_SEL="TIMESTAMP", INT_SEL="SEND_INT"))
    t = g.timestamp()
    stamps = [g.r32(a) | g.r32(a + 4) << 32 for a in (OUT, OUT + 8)]
    entries = [e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32 for e in ih.pop()]
    end = 1 << 48
    assert end - 100 <= stamps[0] <= entries[0] < end and stamps[1] <= entries[1] <= t < 300, (stamps, entries, t)
