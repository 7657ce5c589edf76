"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the SDMA engine's errors and control. What SDMA_ERROR* latch and their IH
entries (no INT_STATUS event bit), its VM and address rules, POLL_REGMEM's timeouts and
TRAP, queue resets and doorbells, its rptr write-back failing as the packet, SDMA_CNTL.HALT
inside an IB (its ring and packets: test_contract_sdma_packets.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IB2, IH_BASE, IH_WB, M32, OUT, PA_CODE, PA_OUT, RING, RPTR_WB, SRING,
                                         SRPTR_WB, VA_CODE, VA_OUT, VA_RO, Gpu, IhRing, Ring, SdmaRing,
                                         expect_sdma_error, lo_hi, map_vmid1, sdma, sdma_packets, write_data)


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
    g.w32(IB1, sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2)))
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=3))  # the FENCE runs past the IB
    expect_sdma_error(s, ih, "BAD_COUNT", "IB1", S["FENCE"].opcode, IB1, 0)
    # RB_SIZE 2 acts as 4 (16 dwords, 64 bytes) and reads back 2; it is written with the
    # ring disabled (a write while RB_ENABLE is set leaves it alone)
    g.set("SDMA_RB_CNTL", RB_SIZE=2, RB_ENABLE=1)
    assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == 4
    g.set("SDMA_RB_CNTL", RB_SIZE=2, RB_ENABLE=0)
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
    g.write("SDMA_DOORBELL", 7)  # bits 1:0 ignored: the checks and SDMA_ERROR_ADDR see 4
    expect_sdma_error(s, ih, "DOORBELL_BACKWARDS", "RING", 0, 4, 2)


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
    # COPY_LINEAR faults as DMA_DATA does: at its first byte in the page that refuses it.
    body = sdma("COPY_LINEAR", COUNT=15, **lo_hi("SRC_ADDR", VA_CODE + 0x40), **lo_hi("DST_ADDR", VA_RO - 8))
    g.w32(PA_CODE, body)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE, 5), IB_SIZE=len(body), VMID=1))
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", S["COPY_LINEAR"].opcode, VA_RO, 0)
    # ... and past memory's end (64 MiB): a read at the first byte it needed in the faulting beat,
    # a write at the first byte of the faulting burst.
    end = 64 << 20
    s.submit(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", end - 0x1E), **lo_hi("DST_ADDR", 0x300000)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["COPY_LINEAR"].opcode, end, 0)
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=1, COUNT=15, **lo_hi("DST_ADDR", end - 8)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["CONSTANT_FILL"].opcode, end, 0)
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


def check_sdma_entries_raise_no_event_bit(dev):
    """The SDMA's entries set no INT_STATUS event bit (IH_PENDING only); one dropped by a
    full IH ring sets IH_OVERFLOW; a failing IH write is the SDMA's BUS_DECERR at the
    entry's address, with SDMA_STATUS.ERROR the only sign, and the CP runs on."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 3)  # one entry
    ring = Ring(g, RING, 8, RPTR_WB)
    s = SdmaRing(g, SRING, 6)
    S = sdma_packets()
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.run(sdma("TRAP", INT_CONTEXT=1))
    g.until(lambda: g.read("IH_WPTR") == 32, "the TRAP entry")
    assert g.fields("INT_STATUS") == {"IH_OVERFLOW": 0, "CP_ERROR": 0, "EOP": 0, "IH_PENDING": 1}
    s.run(sdma("TRAP", INT_CONTEXT=2), [0x0000_0003])  # the ring is full: both entries dropped
    g.dev.delay(100)
    assert g.read("IH_WPTR") == 32 and g.fields("SDMA_STATUS")["ERROR"] == 1
    assert g.fields("INT_STATUS") == {"IH_OVERFLOW": 1, "CP_ERROR": 0, "EOP": 0, "IH_PENDING": 1}
    assert ih.pop()[0]["DATA0"] == 1
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    g.write("INT_STATUS", M32)
    bad = 0x1000_0000
    g.set("IH_CNTL", ENABLE=0)  # (the base is written with the IH ring disabled)
    g.write("IH_BASE_LO", bad >> 8)
    g.set("IH_CNTL", ENABLE=1)
    s.submit(sdma("TRAP", INT_CONTEXT=3), sdma("FENCE", DATA=7, **lo_hi("ADDR", OUT, 2)))
    st = g.idle("SDMA_STATUS")
    g.dev.delay(100)
    err = g.fields("SDMA_ERROR")
    assert (st["ERROR"], err["CODE"], err["OP"], g.read("SDMA_ERROR_ADDR_LO"), g.read("SDMA_ERROR_OFFSET")) == \
        (1, g.err["BUS_DECERR"], S["TRAP"].opcode, bad, 0), (st, err)  # (IH_WPTR 32 mod 32 bytes: the base)
    assert g.fields("INT_STATUS") == {"IH_OVERFLOW": 0, "CP_ERROR": 0, "EOP": 0, "IH_PENDING": 0}
    assert g.read("IH_WPTR") == 32 and g.r32(OUT) == 0, "the FENCE after the failed TRAP never ran"
    ring.run(write_data(OUT + 4, [9]))
    assert g.r32(OUT + 4) == 9 and g.fields("STATUS")["ERROR"] == 0


def check_sdma_poll_trap_errors_resets_and_doorbells(dev):
    """POLL_REGMEM: RETRY_COUNT 0 gives up at its first failing read, FUNC ALWAYS reads once
    and never times out, INTERVAL 0 polls every cycle, a poll beyond memory is BUS_DECERR at
    its address; TRAP's entry comes after the FENCE and the fill before it are in memory; an
    error in the middle of an IB leaves what came before it done and the ring's rptr at the IB
    packet; QUEUE_RESET while polling or inside an IB; the doorbell's edges (the same value,
    a ring exactly full, ignored while disabled or stopped)."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)  # 64 dwords, 256 bytes
    S = sdma_packets()
    end = 64 << 20
    flag = OUT + 0x40
    g.w32(flag, [0x1234])
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    poll = lambda addr, value, func, retry, interval=1, mask=M32: sdma(  # noqa: E731
        "POLL_REGMEM", **lo_hi("ADDR", addr, 2), VALUE=value, MASK=mask, FUNC=func, MEM_POLL="MEMORY",
        RETRY_COUNT=retry, INTERVAL=interval)
    fence = lambda k, v: sdma("FENCE", DATA=v, **lo_hi("ADDR", OUT + 4 * k, 2))  # noqa: E731
    s.run(poll(flag, 1, "EQ", 0, interval=0), fence(0, 0xA0), poll(flag, 7, "ALWAYS", 0), fence(1, 0xA1),
          poll(flag, 0x34, "EQ", 5, mask=0xFF), fence(2, 0xA2))
    entries = g.until(lambda: ih.pop() or None, "the POLL_TIMEOUT entry")
    assert [(ih.source(e), e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) for e in entries] == \
        [("SDMA_POLL_TIMEOUT", flag, 0, 0x1234, 0)], "RETRY_COUNT 0: one read, then the entry; ALWAYS and a " \
        f"holding value time out never: {entries}"
    assert g.r32(OUT, 3) == [0xA0, 0xA1, 0xA2] and g.fields("SDMA_STATUS")["ERROR"] == 0
    # RETRY_COUNT 0xFFE gives up too (4095 reads), a poll at every cycle (INTERVAL 0)
    s.submit(poll(flag, 0, "EQ", 0xFFE, interval=0), fence(3, 0xA3))
    g.until(lambda: g.r32(OUT + 12) == 0xA3, "the fence after 4095 reads", cycles=2_000_000, step=1000)
    (e,) = g.until(lambda: ih.pop() or None, "the second POLL_TIMEOUT entry")
    assert ih.source(e) == "SDMA_POLL_TIMEOUT" and e["DATA2"] == 0x1234
    # a poll beyond memory: BUS_DECERR at its address, LEVEL RING
    at = s.wptr // 4
    s.submit(poll(end + 0x10, 0, "EQ", 0xFFF))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["POLL_REGMEM"].opcode, end + 0x10, at)
    # TRAP after a fill and a FENCE: when its entry is in, both are in memory
    g.w32(OUT, [0] * 8)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x01010101, COUNT=0x3FFF, **lo_hi("DST_ADDR", 0x400000)),
             fence(0, 0xB0), sdma("TRAP", INT_CONTEXT=0xB1))
    g.until(lambda: g.read("IH_WPTR") != ih.rptr, "the TRAP entry")
    assert g.r32(OUT) == 0xB0 and g.r32(0x400000) == 0x01010101 and g.r32(0x403FFC) == 0x01010101
    (e,) = ih.pop()
    assert (ih.source(e), e["DATA0"]) == ("SDMA_TRAP", 0xB1)
    g.idle("SDMA_STATUS")
    # an error in the middle of an IB: the packets before it ran, the rptr stays at the IB packet
    body = fence(4, 0xC0) + sdma("WRITE_LINEAR", [0xC1, 0xC2], **lo_hi("DST_ADDR", OUT + 20, 2), COUNT=1) \
        + [0x0000_0007] + fence(7, 0xC3)
    g.w32(IB1, body)
    rptr = g.read("SDMA_RB_RPTR")
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=len(body)), fence(8, 0xC4))
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1 and g.read("SDMA_RB_RPTR") == rptr and g.r32(SRPTR_WB) == rptr
    assert g.r32(OUT + 16, 5) == [0xC0, 0xC1, 0xC2, 0, 0], "before the bad packet: done; after it: nothing"
    # a doorbell while the queue is stopped by its error: ignored, no second error
    g.write("SDMA_DOORBELL", s.wptr + 8)
    g.dev.delay(20)
    assert g.read("SDMA_RB_WPTR") == s.wptr
    expect_sdma_error(s, ih, "ILLEGAL_OPCODE", "IB1", 7, IB1 + 4 * 10, 10)
    # QUEUE_RESET while a poll waits inside an IB: idle at once or soon, pointers 0, ring works again
    g.w32(flag, [0])
    g.w32(IB1, poll(flag, 1, "EQ", 0xFFF, interval=2) + [0, 0])
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=8, VMID=2))
    st = g.waiting("SDMA_STATUS")
    assert st["LEVEL"] == g.level["IB1"] and st["IDLE"] == 0
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    st = g.idle("SDMA_STATUS")
    assert (st["WAITING"], st["ERROR"], st["LEVEL"], g.read("SDMA_RB_RPTR"), g.read("SDMA_RB_WPTR")) == \
        (0, 0, g.level["RING"], 0, 0), st
    s.wptr = 0
    assert ih.pop() == [], "a reset raises no entry"
    # doorbells: the same value again is nothing; a ring exactly full (64 dwords) is taken;
    # while RB_ENABLE is clear a doorbell is ignored
    g.write("SDMA_DOORBELL", 0)
    g.dev.delay(20)
    assert g.fields("SDMA_STATUS")["ERROR"] == 0 and g.read("SDMA_RB_WPTR") == 0
    s.emit(*[fence(9, k) for k in range(16)])  # 16 × 4 dwords: the whole ring
    assert s.wptr == 256
    g.write("SDMA_DOORBELL", s.wptr)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 36) == 15 and g.read("SDMA_RB_RPTR") == 256 == g.r32(SRPTR_WB)
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0, RPTR_WRITEBACK_ENABLE=1)
    s.emit(fence(10, 0xD0))
    g.write("SDMA_DOORBELL", s.wptr)
    g.dev.delay(40)
    assert g.read("SDMA_RB_WPTR") == 256 and g.r32(OUT + 40) == 0, "ignored while RB_ENABLE is clear"
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
    g.write("SDMA_DOORBELL", s.wptr)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 40) == 0xD0 and g.fields("SDMA_STATUS")["ERROR"] == 0
    # one dword more than the ring holds (rptr 272, v − rptr = 260 > 256): DOORBELL_OVERFLOW
    g.write("SDMA_DOORBELL", s.wptr + 260)
    expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, s.wptr + 260, (272 // 4) % 64)


def check_sdma_rptr_write_back_fails_as_the_packet(dev):
    """The SDMA's rptr write-back fails as the CP's does (docs/hardware.md, Errors: "The CP's
    own writes fail like a packet's"): a write-back address beyond memory stops the queue with
    BUS_DECERR of the packet it follows (OP that packet's, INDIRECT_BUFFER for the write-back
    after an IB; LEVEL RING), ADDR the address written, OFFSET that packet's header, the packet
    done and SDMA_RB_RPTR past it, the next packet not run; SDMA_RB_RPTR_ADDR_LO's bits 1:0
    are ignored (the write-back lands on the dword) and read back as written."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    S = sdma_packets()
    end = 64 << 20  # beyond memory: DECERR
    s = SdmaRing(g, SRING, 6, SRPTR_WB | 3)
    g.w32(SRPTR_WB, [0xDEAD])
    s.run(sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2)))
    assert (g.r32(SRPTR_WB), g.read("SDMA_RB_RPTR_ADDR_LO")) == (16, SRPTR_WB | 3)
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0, RPTR_WRITEBACK_ENABLE=1)
    g.write("SDMA_RB_RPTR_ADDR_LO", end + 0x40)
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
    s.submit(sdma("FENCE", DATA=2, **lo_hi("ADDR", OUT + 4, 2)), sdma("FENCE", DATA=3, **lo_hi("ADDR", OUT + 8, 2)))
    g.idle("SDMA_STATUS")
    assert (g.read("SDMA_RB_RPTR"), g.r32(OUT + 4, 2)) == (32, [2, 0]), "the packet done, the next not run"
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["FENCE"].opcode, end + 0x40, 4)
    body = sdma("FENCE", DATA=4, **lo_hi("ADDR", OUT + 12, 2))
    g.w32(IB1, body)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=len(body)))
    g.idle("SDMA_STATUS")
    assert (g.read("SDMA_RB_RPTR"), g.r32(OUT + 12)) == (24, 4)
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["INDIRECT_BUFFER"].opcode, end + 0x40, 0)
    assert g.fields("STATUS")["ERROR"] == 0, "the CP untouched"


def check_sdma_halt_stops_inside_an_ib(dev):
    """SDMA_CNTL.HALT stops the engine before its next packet at any level: a HALT written
    while a POLL_REGMEM in an IB polls lets that poll finish, then the engine halts inside the
    IB (SDMA_STATUS.HALTED, LEVEL IB1, SDMA_RB_RPTR still before the IB's ring packet) with the
    IB's next FENCE not run; cleared, it resumes there. Unlike SDMA_RB_CNTL.RB_ENABLE cleared,
    whose pause lets the IB in hand run to its end (docs/hardware.md, Ring and doorbell). A
    halted SDMA stopped by an error reads ERROR, not HALTED."""
    g = Gpu(dev)
    IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 6)
    flag = OUT + 0x40
    body = sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                RETRY_COUNT=0xFFF, INTERVAL=1) + sdma("FENCE", DATA=0xA, **lo_hi("ADDR", OUT, 2)) \
        + sdma("FENCE", DATA=0xB, **lo_hi("ADDR", OUT + 4, 2))
    g.w32(IB1, body)
    for stop in ("HALT", "RB_ENABLE"):
        g.w32(flag, [0])
        g.w32(OUT, [0, 0, 0])
        start = s.wptr
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=len(body)),
                 sdma("FENCE", DATA=0xC, **lo_hi("ADDR", OUT + 8, 2)))
        g.waiting("SDMA_STATUS")
        if stop == "HALT":
            g.set("SDMA_CNTL", HALT=1)
        else:
            g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0)
        g.w32(flag, [1])
        g.dev.delay(300)
        st = g.fields("SDMA_STATUS")
        if stop == "HALT":
            assert (st["HALTED"], st["LEVEL"], st["IDLE"], st["WAITING"]) == (1, g.level["IB1"], 0, 0), st
            assert (g.r32(OUT, 3), g.read("SDMA_RB_RPTR")) == ([0, 0, 0], start), "halted before the IB's FENCE"
            g.set("SDMA_CNTL", HALT=0)
        else:
            assert (st["HALTED"], st["LEVEL"], st["IDLE"]) == (0, g.level["RING"], 0), st
            assert (g.r32(OUT, 3), g.read("SDMA_RB_RPTR")) == ([0xA, 0xB, 0], start + 24), "the IB ran to its end"
            g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=1)
        st = g.idle("SDMA_STATUS")
        assert (st["ERROR"], g.r32(OUT, 3), g.read("SDMA_RB_RPTR")) == (0, [0xA, 0xB, 0xC], start + 40), stop
    # halted and then stopped by an error (a doorbell overflow): ERROR shows, HALTED reads 0 (as
    # STATUS for queue 0), so a driver that halts waits for HALTED or ERROR; a QUEUE_RESET that
    # writes HALT too leaves it halted, and a FENCE waits for HALT's clear
    g.set("SDMA_CNTL", HALT=1)
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED")
    g.write("SDMA_DOORBELL", s.wptr + 4 * 64 + 4)
    st = g.idle("SDMA_STATUS")
    assert (st["ERROR"], st["HALTED"], g.fields("SDMA_ERROR")["CODE"]) == (1, 0, g.err["DOORBELL_OVERFLOW"]), st
    g.set("SDMA_CNTL", QUEUE_RESET=1, HALT=1)
    st = g.idle("SDMA_STATUS")
    assert (st["ERROR"], st["HALTED"]) == (0, 1), st
    s.wptr = 0
    g.w32(OUT, [0])
    s.submit(sdma("FENCE", DATA=0xD, **lo_hi("ADDR", OUT, 2)))
    g.dev.delay(200)
    assert g.r32(OUT) == 0 and g.fields("SDMA_STATUS")["HALTED"] == 1
    g.set("SDMA_CNTL", HALT=0)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT) == 0xD



def check_sdma_trap_enable_gates_the_trap_s_entry_alone(dev):
    """SDMA_CNTL.TRAP_ENABLE: "TRAP packets raise their IH entry" (registers.md); the engine's
    other entries do not depend on it: with it clear, a POLL_REGMEM that gives up still
    appends its POLL_TIMEOUT entry and an error its SDMA_ERROR entry, while a TRAP runs and
    raises none; with it set the TRAP's entry follows the POLL_TIMEOUT's. Either way each
    packet is counted once in PERF_SDMA_PACKETS and its dwords once in
    PERF_SDMA_DWORDS_FETCHED, however many reads the poll made, and a poll reads nothing
    PERF_SDMA_BYTES_READ counts."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 8)
    S = sdma_packets()
    flag = OUT + 0x40
    g.w32(flag, [5])
    poll = sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=7, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                RETRY_COUNT=3, INTERVAL=1)
    for enable, want in ((0, ["SDMA_POLL_TIMEOUT"]), (1, ["SDMA_POLL_TIMEOUT", "SDMA_TRAP"])):
        g.set("SDMA_CNTL", TRAP_ENABLE=enable)
        g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
        g.w32(OUT, [0])
        assert s.run(poll, sdma("TRAP", INT_CONTEXT=9), sdma("FENCE", DATA=enable + 1, **lo_hi("ADDR", OUT, 2)))["ERROR"] == 0
        entries = g.until(lambda: (lambda e: e if len(e) >= len(want) else None)(
            [ih.entry(p) for p in range(ih.rptr, g.read("IH_WPTR"), 32)]), f"{len(want)} entries")
        got = [ih.source(e) for e in ih.pop()]
        assert got == want and g.r32(OUT) == enable + 1, (enable, got, g.r32(OUT))
        counted = {k: g.read("PERF_SDMA_PACKETS", S[k].index) for k in S if g.read("PERF_SDMA_PACKETS", S[k].index)}
        assert counted == {"POLL_REGMEM": 1, "TRAP": 1, "FENCE": 1}, (enable, counted)
        assert (g.read("PERF_SDMA_DWORDS_FETCHED"), g.read("PERF_SDMA_BYTES_READ")) == (len(poll) + 2 + 4, 0), enable
    g.set("SDMA_CNTL", TRAP_ENABLE=0)
    s.submit([0x0000_0003])  # OP 3: no packet
    expect_sdma_error(s, ih, "ILLEGAL_OPCODE", "RING", 3, SRING + s.wptr - 4, s.wptr // 4 - 1)


CHECKS = [check_sdma_errors, check_sdma_vm_and_address_rules, check_sdma_entries_raise_no_event_bit,
          check_sdma_poll_trap_errors_resets_and_doorbells, check_sdma_rptr_write_back_fails_as_the_packet,
          check_sdma_halt_stops_inside_an_ib, check_sdma_trap_enable_gates_the_trap_s_entry_alone]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
