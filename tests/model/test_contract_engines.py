"""The contract, checked by an outside driver writer (tests/model/contract_driver.py, from
the docs alone; tests/model/test_contract_driver.py has the CP's ring and packets): the SDMA
engine, the second CP queue and its priorities, virtual memory (page tables, faults, TLB
which queue and VMID the IH entries name (virtual memory: tests/model/test_contract_vm.py;
resets, halts, counters: tests/model/test_contract_control.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract_driver import (IB1, IB1B, IB2, IH_BASE, IH_WB, M32, OUT, PA_CODE, PA_OUT, RING, RING1, RPTR1_WB,
                                         RPTR_WB, SRING, SRPTR_WB, VA_CODE, VA_OUT, VA_RO, Gpu, IhRing, Ring,
                                         SdmaRing, bring_up, dma_data, expect_error, expect_sdma_error, ib, lo_hi,
                                         map_vmid1, pm4, pm4_packets, release_mem, sdma, sdma_packets, wait_mem,
                                         write_data)


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
    assert g.read("PERF_SDMA_BYTES_READ") == g.beats_bytes(src + 2, 38), "whole bus beats"
    # FILLSIZE DWORDS (Mesa's) fills as BYTES does; FENCE after a copy is written after its data.
    g.w32(src, [(k * 0x9E3779B1) & M32 for k in range(4096)])
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x01020304, COUNT=7, **lo_hi("DST_ADDR", dst + 0x201), FILLSIZE="DWORDS"),
             sdma("COPY_LINEAR", COUNT=0x3FFF, **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst + 0x4000)),
             sdma("FENCE", DATA=0xFD, **lo_hi("ADDR", OUT + 8, 2)))
    g.until(lambda: g.r32(OUT + 8) == 0xFD, "the SDMA fence")
    assert bytes(g.dev.mem[dst + 0x4000:dst + 0x8000]) == bytes(g.dev.mem[src:src + 0x4000])
    assert bytes(g.dev.mem[dst + 0x200:dst + 0x20A]) == bytes([0, 3, 2, 1, 4, 3, 2, 1, 4, 0])
    g.idle("SDMA_STATUS")
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
    g.waiting("SDMA_STATUS")
    g.w32(flag, [0x1235])
    assert g.idle("SDMA_STATUS")["WAITING"] == 0
    # Doorbell bits 1:0 are ignored.
    s.emit(sdma("FENCE", DATA=0xB0, **lo_hi("ADDR", OUT + 20, 2)))
    g.write("SDMA_DOORBELL", s.wptr | 3)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 20) == 0xB0 and g.read("SDMA_RB_WPTR") == s.wptr


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

# ---------------------------------------------------------------------------- the second CP queue

def _halted_turns(g, q0, q1, ih, eop):
    """Both queues given two EOPs while the CP is halted, then let go: the order their
    entries come in (DATA0: queue 0's 0x00, 0x01, queue 1's 0x10, 0x11)."""
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


def check_cp_queue_priority(dev):
    """CP_QUEUE_PRIORITY decides which queue's packet runs next (seen in the order of EOP
    entries); a polling queue never blocks the other; errors are per queue with RING_ID."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    assert g.fields("CP_QUEUE_PRIORITY") == {"Q0": 1, "Q1": 2} and g.read("CP_QUEUE_PRIORITY") == 0x9
    eop = lambda k: release_mem(OUT + 4 * k, k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731

    def order(p0, p1):
        g.set("CP_QUEUE_PRIORITY", Q0=p0, Q1=p1)
        return _halted_turns(g, q0, q1, ih, eop)

    assert order(1, 1) == [0x10, 0x00, 0x11, 0x01], "equal priorities take turns, queue 1 first after a reset"
    # An INDIRECT_BUFFER is a packet of its own: entering it is a turn (docs/hardware.md's example).
    body = eop(0xA) + eop(0xB) + eop(0xC)
    g.w32(IB1, body)
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
    q0.submit(ib(IB1, len(body), VMID=3), eop(0xD))
    q1.submit(eop(0x1), eop(0x2), eop(0x3))
    g.set("CONTROL", HALT=0)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    seen = []
    g.until(lambda: seen.extend(ih.pop()) or len(seen) >= 7, "seven EOP entries")
    got = [(e["DATA0"], e["RING_ID"], e["VMID"]) for e in seen]
    assert got == [(1, 1, 0), (2, 1, 0), (0xA, 0, 3), (3, 1, 0), (0xB, 0, 3), (0xC, 0, 3), (0xD, 0, 0)], got
    # A low-priority IB waiting in a WAIT_REG_MEM yields; it resumes inside its IB, VMID kept.
    g.set("CP_QUEUE_PRIORITY", Q0=2, Q1=0)
    flag = OUT + 0x100
    g.w32(flag, [0])
    body = eop(0xA) + wait_mem(flag, 1, 1, "EQ") + eop(0xB)
    g.w32(IB1, body)
    q0.submit(ib(IB1, len(body), VMID=3), eop(0xD))
    g.waiting()
    q1.run(eop(0x1))
    st = g.fields("STATUS")
    assert (st["WAITING"], st["LEVEL"]) == (1, g.level["IB1"]), st
    g.w32(flag, [1])
    g.idle()
    seen = []
    g.until(lambda: seen.extend(ih.pop()) or len(seen) >= 4, "four EOP entries")
    got = [(e["DATA0"], e["RING_ID"], e["VMID"]) for e in seen]
    assert got == [(0xA, 0, 3), (1, 1, 0), (0xB, 0, 3), (0xD, 0, 0)], got
    assert order(1, 2) == [0x10, 0x11, 0x00, 0x01]
    assert order(2, 0) == [0x00, 0x01, 0x10, 0x11]
    # 3 acts as 2: turns, queue 0 first (queue 1 ran the last packet: docs/hardware.md)
    assert order(3, 2) == [0x00, 0x10, 0x01, 0x11], "3 acts as 2: turns, the queue that did not run last first"
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
    q1.set_rptr_wb(RPTR1_WB | 3)  # bits 1:0 ignored, as queue 0's
    q1.run(write_data(OUT + 0x110, [0x1C]))
    assert g.r32(OUT + 0x110) == 0x1C and g.r32(RPTR1_WB) == q1.wptr
    q1.doorbell(q1.wptr - 1)  # DOORBELL_BACKWARDS on queue 1: its registers, RING_ID 1
    expect_error(q1, ih, "DOORBELL_BACKWARDS", "RING", 0, q1.wptr - 1, 5)

# ------------------------------------------------------- which queue and VMID, the SDMA's VM and addresses

def check_entries_name_their_queue_and_vmid(dev):
    """RING_ID is the CP queue (0 or 1) of every CP entry, EOP included; VMID is the IB's
    for a packet of an IB (a translated VMID or not; IB2 keeps IB1's whatever its own VMID
    field says), 0 in the ring; SDMA entries are ring 0 and carry the SDMA IB's VMID; a
    doorbell error's entry is the ring's, VMID 0, on both engines, whatever IB is in hand (the
    SDMA's carried that IB's VMID)."""
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
    # A doorbell error is the ring's (LEVEL RING, OP 0), not the work of the IB in hand: its
    # entry's VMID is 0 on either engine, while an IB of VMID 6 (the SDMA) or 4 (queue 1) polls.
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    g.w32(OUT + 16, [0])
    poll = sdma("POLL_REGMEM", **lo_hi("ADDR", OUT + 16, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                RETRY_COUNT=0xFFF, INTERVAL=1)
    g.w32(IB1, poll + [0] * (8 - len(poll)))
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=8, VMID=6))
    assert g.waiting("SDMA_STATUS")["LEVEL"] == g.level["IB1"]
    g.write("SDMA_DOORBELL", s.wptr - 4)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1 and g.fields("SDMA_ERROR")["CODE"] == g.err["DOORBELL_BACKWARDS"], st
    (e,) = g.until(lambda: ih.pop() or None, "the doorbell error's entry")
    assert (ih.source(e), e["RING_ID"], e["VMID"], e["DATA0"]) == ("SDMA_ERROR", 0, 0, g.read("SDMA_ERROR")), e
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    q1.wptr = 0
    wait = wait_mem(OUT + 16, 1, 1, "EQ")
    g.w32(IB2, wait)
    q1.submit(ib(IB2, len(wait), VMID=4))
    assert g.waiting("CP_HQD1_STATUS")["LEVEL"] == g.level["IB1"]
    q1.doorbell(q1.wptr - 1)
    assert g.idle("CP_HQD1_STATUS")["ERROR"] == 1
    (e,) = ih.pop()
    assert (ih.source(e), e["RING_ID"], e["VMID"]) == ("CP_ERROR", 1, 0), e


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


def check_every_sdma_listed_value_and_reserved_bit(dev):
    """Each value docs/packets.md lists for an SDMA field runs, but those marked not
    supported and those not listed (POLL_REGMEM FUNC 7) stop the queue with UNSUPPORTED;
    reserved bits (but those below an address's low field) and MTYPE / CSA_ADDR are ignored."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 6)
    S = sdma_packets()
    src = 0x100000
    g.w32(src, [0x5EED, 0x5EED])
    g.w32(IB1, [0])
    base = {"COPY_LINEAR": lambda **kw: sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", src),
                                             **lo_hi("DST_ADDR", OUT), **kw),
            "WRITE_LINEAR": lambda **kw: sdma("WRITE_LINEAR", [0x42, 0x43], COUNT=1, **lo_hi("DST_ADDR", OUT, 2), **kw),
            "POLL_REGMEM": lambda **kw: sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=0, MASK=0, RETRY_COUNT=0,
                                             INTERVAL=1, **{"FUNC": "ALWAYS", "MEM_POLL": "MEMORY", **kw}),
            "CONSTANT_FILL": lambda **kw: sdma("CONSTANT_FILL", SRC_DATA=0x0F0F0F0F, COUNT=7,
                                               **lo_hi("DST_ADDR", OUT), **kw),
            "FENCE": lambda **kw: sdma("FENCE", DATA=0x44, **lo_hi("ADDR", OUT, 2), **kw),
            "INDIRECT_BUFFER": lambda **kw: sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=1, **kw),
            "TRAP": lambda **kw: sdma("TRAP", INT_CONTEXT=1, **kw)}
    checked = 0
    for name, make in base.items():
        for f in S[name].fields.values():
            if not f.values:
                continue
            listed = set(f.values.values())
            for v in sorted(listed) + [v for v in range(1 << f.width) if v not in listed][:2]:
                bad = v in {f.values[u] for u in f.unsupported} or v not in listed
                at = s.wptr // 4
                s.run(make(**{f.name: v}))
                checked += 1
                if bad:
                    expect_sdma_error(s, ih, "UNSUPPORTED", "RING", S[name].opcode, SRING + 4 * (at % 64), at % 64)
                else:
                    assert g.fields("SDMA_STATUS")["ERROR"] == 0, f"{name}.{f.name} = {v}: {g.fields('SDMA_ERROR')}"
                    if name == "POLL_REGMEM" and f.name == "FUNC" and v in (1, 4, 6):  # LT, NE, GT fail on 0
                        (e,) = g.until(lambda: ih.pop() or None, "the POLL_TIMEOUT entry")
                        assert ih.source(e) == "SDMA_POLL_TIMEOUT", e
    assert checked >= 30
    ignored = {"FENCE": {"MTYPE": 7}, "INDIRECT_BUFFER": {"CSA_ADDR_LO": M32, "CSA_ADDR_HI": M32}}
    for name, make in base.items():
        pkt = S[name]
        p = make(**ignored.get(name, {}))
        used = [0] * (1 + pkt.fixed)
        for f in pkt.fields.values():
            d = 0 if f.dword == "hdr" else f.dword + 1
            used[d] |= f.mask | (((1 << f.lsb) - 1) if f.name.endswith("_LO") else 0)
        p = [d | (~u & M32) for d, u in zip(p, used)] + p[len(used):]
        g.w32(OUT, [0, 0])
        s.run(p)
        assert g.fields("SDMA_STATUS")["ERROR"] == 0, f"{name} with reserved bits: {g.fields('SDMA_ERROR')}"
        want = {"COPY_LINEAR": [0x5EED, 0x5EED], "WRITE_LINEAR": [0x42, 0x43], "CONSTANT_FILL": [0x0F0F0F0F] * 2,
                "FENCE": [0x44, 0]}.get(name)
        assert want is None or g.r32(OUT, 2) == want, f"{name}: {g.r32(OUT, 2)}"


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



# ---------------------------------------------------------------------------- SDMA edges (round 3)

def _pattern(g, addr, n, seed):
    """n bytes of a pattern at addr (dword writes, n a multiple of 4); returns them."""
    words = [((k + seed) * 0x9E3779B1) & M32 for k in range(n // 4)]
    g.w32(addr, words)
    return b"".join(w.to_bytes(4, "little") for w in words)


def _bytes(g, addr, n):
    return bytes(g.dev.mem[addr:addr + n])


def check_sdma_copy_fill_write_edges(dev):
    """COPY_LINEAR, CONSTANT_FILL and WRITE_LINEAR at their smallest (COUNT 0: one byte, one
    dword), unaligned on both sides, across 4 KiB pages, at their largest (4 MiB: COUNT
    0x3FFFFF), and the bytes around each left alone; a copy whose source is an earlier copy's
    or fill's destination reads what it wrote (packets act in order); the byte counters. (The
    4 MiB transfers on the model and Verilator only: see below.)"""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 8, SRPTR_WB)
    src, dst = 0x100000, 0x300000
    pat = _pattern(g, src, 0x4000, 1)
    g.dev.mem[dst:dst + 0x8000] = [0xEE] * 0x8000
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    copy = lambda d, a, n: sdma("COPY_LINEAR", COUNT=n - 1, **lo_hi("SRC_ADDR", a), **lo_hi("DST_ADDR", d))  # noqa
    fill = lambda d, v, n: sdma("CONSTANT_FILL", SRC_DATA=v, COUNT=n - 1, **lo_hi("DST_ADDR", d))  # noqa
    # one byte each; unaligned across a 4 KiB page on both sides (src 3 bytes before its page's
    # end, dst 1 byte before another's), and a copy of exactly one page between two pages
    st = s.run(copy(dst + 3, src + 5, 1), fill(dst + 0x11, 0xA1B2C3D4, 1),
               copy(dst + 0x1FFF, src + 0xFFD, 0x2005), copy(dst + 0x4801, src + 0x2803, 0x1000))
    assert st["ERROR"] == 0, g.fields("SDMA_ERROR")
    assert _bytes(g, dst, 8) == bytes([0xEE] * 3 + [pat[5]] + [0xEE] * 4)
    assert _bytes(g, dst + 0x10, 3) == bytes([0xEE, 0xC3, 0xEE]), "byte a gets byte a mod 4 of the value"
    assert _bytes(g, dst + 0x1FFE, 0x2007) == bytes([0xEE]) + pat[0xFFD:0xFFD + 0x2005] + bytes([0xEE])
    assert _bytes(g, dst + 0x4800, 0x1002) == bytes([0xEE]) + pat[0x2803:0x3803] + bytes([0xEE])
    assert g.read("PERF_SDMA_BYTES_WRITTEN") == 1 + 1 + 0x2005 + 0x1000
    assert g.read("PERF_SDMA_BYTES_READ") == (g.beats_bytes(src + 5, 1) + g.beats_bytes(src + 0xFFD, 0x2005)
                                              + g.beats_bytes(src + 0x2803, 0x1000)), "whole beats; a fill reads none"
    # WRITE_LINEAR: one dword, and 6 across a page (dst 8 bytes before its end)
    s.run(sdma("WRITE_LINEAR", [0x11111111], **lo_hi("DST_ADDR", dst + 0x6000, 2), COUNT=0),
          sdma("WRITE_LINEAR", [1, 2, 3, 4, 5, 6], **lo_hi("DST_ADDR", dst + 0x6FF8, 2), COUNT=5))
    assert g.r32(dst + 0x5FFC, 3) == [0xEEEEEEEE, 0x11111111, 0xEEEEEEEE]
    assert g.r32(dst + 0x6FF4, 8) == [0xEEEEEEEE, 1, 2, 3, 4, 5, 6, 0xEEEEEEEE]
    # in order: a fill, then a copy of what it filled, then a copy of that copy, then the fence
    a, b, c = dst + 0x8000, dst + 0xA003, dst + 0xC001
    s.run(fill(a + 1, 0x04030201, 0x1801), copy(b, a, 0x1803), copy(c, b, 0x1803),
          sdma("FENCE", DATA=0x5A, **lo_hi("ADDR", OUT, 2)))
    want = bytes([0]) + bytes((x % 4) + 1 for x in range(a + 1, a + 0x1802)) + bytes([0])
    assert _bytes(g, a, 0x1803) == want and _bytes(g, c, 0x1803) == want and g.r32(OUT) == 0x5A
    # the largest: COUNT 0x3FFFFF is 4 MiB (a fill: no reads), then a 4 MiB copy of it; on the
    # model and Verilator (5 s): Icarus, about 2,300 cycles/s here, took 7.5 minutes for the
    # two (the same RTL as Verilator's)
    if g.dev.name == "icarus":
        return
    big, big2 = 0x1000000, 0x1800000
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    s.submit(fill(big, 0x5EED0000 | 0x77, 1 << 22), sdma("FENCE", DATA=0x5B, **lo_hi("ADDR", OUT, 2)))
    g.until(lambda: g.r32(OUT) == 0x5B, "the fence after 4 MiB", cycles=4_000_000, step=2000)
    g.idle("SDMA_STATUS")
    assert (g.read("PERF_SDMA_BYTES_WRITTEN"), g.read("PERF_SDMA_BYTES_READ")) == (1 << 22, 0)
    assert g.r32(big, 1) == 0x5EED0077 and g.r32(big + (1 << 22) - 4) == 0x5EED0077 and g.r32(big + (1 << 22)) == 0
    s.submit(copy(big2 + 1, big, 1 << 22))
    g.until(lambda: g.fields("SDMA_STATUS")["IDLE"], "4 MiB copied", cycles=4_000_000, step=2000)
    assert g.read("PERF_SDMA_BYTES_READ") == 1 << 22
    assert _bytes(g, big2, 8) == bytes([0, 0x77, 0, 0xED, 0x5E, 0x77, 0, 0xED])
    assert _bytes(g, big2 + (1 << 22) - 3, 5) == bytes([0x77, 0, 0xED, 0x5E, 0])
    assert ih.pop() == [] and g.fields("SDMA_STATUS")["ERROR"] == 0


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


def check_cp_and_sdma_side_by_side(dev):
    """Both engines faulting at once: each latches its own error and entry, and one's reset
    leaves the other stopped; a queue reset of one engine while the other runs a transfer;
    CONTROL.HALT stops the CP and not the SDMA (SDMA_CNTL.HALT the reverse), HALTED reading
    1 with the other engine busy; CONTROL.SOFT_RESET with both busy resets both."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 8, SRPTR_WB)
    # both stop: the CP at an opcode it does not know in an IB of VMID 3, the SDMA at one in its ring
    g.w32(IB1, [0xC0002A00])
    ring.submit(ib(IB1, 1, VMID=3))
    s.submit([0x0000_0003])
    g.until(lambda: g.fields("STATUS")["ERROR"] and g.fields("SDMA_STATUS")["ERROR"], "both engines stopped")
    entries = []
    g.until(lambda: entries.extend(ih.pop()) or len(entries) >= 2, "two error entries")
    got = sorted((ih.source(e), e["RING_ID"], e["VMID"], e["DATA0"]) for e in entries)
    assert got == [("CP_ERROR", 0, 3, g.read("CP_ERROR")), ("SDMA_ERROR", 0, 0, g.read("SDMA_ERROR"))], got
    assert (g.fields("CP_ERROR")["CODE"], g.fields("SDMA_ERROR")["CODE"]) == (g.err["ILLEGAL_OPCODE"],) * 2
    ih.rptr = g.read("IH_RPTR")
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    assert g.fields("STATUS")["ERROR"] == 1 and g.fields("CP_ERROR")["OPCODE"] == 0x2A, "the SDMA's reset is its own"
    s.wptr = 0
    s.run(sdma("FENCE", DATA=0x51, **lo_hi("ADDR", OUT, 2)))
    assert g.r32(OUT) == 0x51 and g.fields("STATUS")["ERROR"] == 1
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    # the SDMA's queue reset while the CP's DMA engine fills 128 KiB: the CP's transfer completes
    big, N = 0x1000000, 1 << 17
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x22222222, COUNT=N - 1, **lo_hi("DST_ADDR", big + (2 << 20))))
    ring.submit(dma_data(big, 0x33333333, N, SRC_SEL="DATA", CP_SYNC=1), write_data(OUT + 4, [0x52]))
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    g.until(lambda: g.r32(OUT + 4) == 0x52, "the CP's fill", cycles=1_000_000, step=2000)
    assert g.r32(big) == 0x33333333 and g.r32(big + N - 4) == 0x33333333 and g.fields("STATUS")["ERROR"] == 0
    s.wptr = 0
    # ... and CP_QUEUE_RESET.Q0 while the SDMA fills 128 KiB: the SDMA's completes
    ring.submit(dma_data(big, 0x44444444, N, SRC_SEL="DATA", CP_SYNC=1))
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x55555555, COUNT=N - 1, **lo_hi("DST_ADDR", big + (2 << 20))),
             sdma("FENCE", DATA=0x53, **lo_hi("ADDR", OUT + 8, 2)))
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    g.until(lambda: g.r32(OUT + 8) == 0x53, "the SDMA's fill", cycles=1_000_000, step=2000)
    assert g.r32(big + (2 << 20)) == 0x55555555 and g.r32(big + (2 << 20) + N - 4) == 0x55555555
    assert g.fields("SDMA_STATUS")["ERROR"] == 0
    g.idle("SDMA_STATUS")
    # CONTROL.HALT with the SDMA busy: the CP halts, the SDMA runs on to its fence
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
    ring.submit(write_data(OUT + 12, [0x54]))
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x66666666, COUNT=(1 << 16) - 1, **lo_hi("DST_ADDR", big)),
             sdma("FENCE", DATA=0x55, **lo_hi("ADDR", OUT + 16, 2)))
    assert g.fields("STATUS")["HALTED"] == 1 and g.fields("SDMA_STATUS")["HALTED"] == 0
    g.until(lambda: g.r32(OUT + 16) == 0x55, "the SDMA's fence while the CP is halted", cycles=400_000, step=1000)
    assert g.r32(OUT + 12) == 0 and g.fields("STATUS")["HALTED"] == 1
    # ... SDMA_CNTL.HALT: the SDMA stops before its next packet, the CP (released) runs
    g.set("SDMA_CNTL", HALT=1)
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED")
    s.submit(sdma("FENCE", DATA=0x56, **lo_hi("ADDR", OUT + 20, 2)))
    g.set("CONTROL", HALT=0)
    g.idle()
    assert g.r32(OUT + 12) == 0x54 and g.r32(OUT + 20) == 0 and g.fields("SDMA_STATUS")["HALTED"] == 1
    g.set("SDMA_CNTL", HALT=0)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 20) == 0x56
    # CONTROL.SOFT_RESET with both engines filling: every queue back to 0, done when all read IDLE
    ring.submit(dma_data(big, 0x77777777, N, SRC_SEL="DATA", CP_SYNC=1))
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=0x88888888, COUNT=N - 1, **lo_hi("DST_ADDR", big + (2 << 20))))
    g.set("CONTROL", SOFT_RESET=1)
    g.until(lambda: all(g.fields(r)["IDLE"] for r in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS")), "all idle")
    assert [g.read(r) for r in ("RB_RPTR", "RB_WPTR", "SDMA_RB_RPTR", "SDMA_RB_WPTR", "IH_WPTR")] == [0] * 5
    ring.wptr, s.wptr = 0, 0
    g.write("IH_RPTR", 0)
    ih.rptr = 0
    ring.run(write_data(OUT + 24, [0x57]))
    s.run(sdma("FENCE", DATA=0x58, **lo_hi("ADDR", OUT + 28, 2)))
    assert g.r32(OUT + 24, 2) == [0x57, 0x58]
    assert ih.pop() == []



def check_sdma_wrap_nop_halt_errors_and_cross_engine_waits(dev):
    """A burst NOP of the largest COUNT (16383) filling a ring of 2^14 dwords exactly;
    a packet straddling the ring's end; POLL_REGMEM ALWAYS still reads (and faults);
    SDMA_CNTL.HALT during a poll lets it finish first; a doorbell 2^31 bytes ahead is
    DOORBELL_BACKWARDS; a copy whose read starts beyond memory at an odd byte (ADDR that
    byte), a fill and a copy whose writes do, and the transfers queued behind a failing one
    writing nothing; the SDMA waiting on the CP's fence and the CP on the SDMA's, through memory."""
    g, ring, ih = bring_up(dev)
    S = sdma_packets()
    end = 64 << 20
    s = SdmaRing(g, SRING, 14, SRPTR_WB)  # 16384 dwords
    s.submit(sdma("NOP", [0] * 16383, COUNT=16383))
    g.until(lambda: g.fields("SDMA_STATUS")["IDLE"], "16384 dwords fetched", cycles=200_000, step=500)
    assert g.read("SDMA_RB_RPTR") == 1 << 16 == g.r32(SRPTR_WB) and g.fields("SDMA_STATUS")["ERROR"] == 0
    assert g.read("PERF_SDMA_PACKETS", S["NOP"].index) == 1
    # a WRITE_LINEAR across the ring's end (its first 3 dwords the ring's last), then a copy,
    # in a ring of 64 dwords (moved as docs/hardware.md says: RB_ENABLE clear, QUEUE_RESET)
    g.set("SDMA_RB_CNTL", RB_SIZE=14, RB_ENABLE=0)
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    s.run(*[[0]] * (64 - 3))
    g.w32(0x100000, [0x0BADF00D, 0x600DF00D])
    s.run(sdma("WRITE_LINEAR", [0x71, 0x72], **lo_hi("DST_ADDR", OUT, 2), COUNT=1), [0] * 7,
          sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", OUT + 8)))
    assert g.r32(OUT, 4) == [0x71, 0x72, 0x0BADF00D, 0x600DF00D] and g.fields("SDMA_STATUS")["ERROR"] == 0
    # ALWAYS reads once: beyond memory it faults
    at = (s.wptr // 4) % s.size
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", end + 0x40, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["POLL_REGMEM"].opcode, end + 0x40, at)
    # SDMA_CNTL.HALT during a poll: it polls on and finishes; the FENCE after waits for the halt's end
    flag = OUT + 0x40
    g.w32(flag, [0])
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1), sdma("FENCE", DATA=0x73, **lo_hi("ADDR", OUT + 16, 2)))
    g.waiting("SDMA_STATUS")
    g.set("SDMA_CNTL", HALT=1)
    g.dev.delay(100)
    st = g.fields("SDMA_STATUS")
    assert (st["WAITING"], st["HALTED"]) == (1, 0), st
    g.w32(flag, [1])
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED after the poll")
    assert g.r32(OUT + 16) == 0 and g.fields("SDMA_STATUS")["WAITING"] == 0
    g.set("SDMA_CNTL", HALT=0)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 16) == 0x73
    # 2^31 bytes ahead is backwards ((int32)(v − wptr) < 0)
    v = (s.wptr + (1 << 31)) & M32
    g.write("SDMA_DOORBELL", v)
    expect_sdma_error(s, ih, "DOORBELL_BACKWARDS", "RING", 0, v, (g.read("SDMA_RB_RPTR") // 4) % s.size)
    # transfer errors beyond memory's end at an odd byte; what is queued behind writes nothing
    g.w32(0x200000, [0] * 64)
    s.submit(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", end + 0x25), **lo_hi("DST_ADDR", 0x300000)),
             sdma("CONSTANT_FILL", SRC_DATA=0x74747474, COUNT=255, **lo_hi("DST_ADDR", 0x200000)),
             sdma("FENCE", DATA=0x75, **lo_hi("ADDR", OUT + 20, 2)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["COPY_LINEAR"].opcode, end + 0x25, 0)
    assert g.r32(0x200000, 64) == [0] * 64 and g.r32(OUT + 20) == 0
    s.submit(sdma("CONSTANT_FILL", SRC_DATA=1, COUNT=63, **lo_hi("DST_ADDR", end + 0x13)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["CONSTANT_FILL"].opcode, end + 0x13, 0)
    s.submit(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", end + 0x7)))
    expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["COPY_LINEAR"].opcode, end + 0x7, 0)
    # through memory: the SDMA polls the CP's fence, then copies; the CP waits for the SDMA's fence
    cp_fence, sdma_fence = OUT + 0x80, OUT + 0x84
    g.w32(cp_fence, [0, 0])
    g.w32(0x100000, list(range(0x500, 0x540)))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", cp_fence, 2), VALUE=7, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1),
             sdma("COPY_LINEAR", COUNT=255, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", 0x200000)),
             sdma("FENCE", DATA=8, **lo_hi("ADDR", sdma_fence, 2)))
    ring.submit(wait_mem(sdma_fence, 8, M32, "EQ"), write_data(OUT + 0x88, [0x76]))
    g.dev.delay(200)
    assert (g.fields("SDMA_STATUS")["WAITING"], g.fields("STATUS")["WAITING"], g.r32(0x200000)) == (1, 1, 0)
    ring.submit(release_mem(cp_fence, 7))  # behind its own wait: nobody moves
    g.dev.delay(200)
    assert g.r32(cp_fence) == 0, "the CP's queue is in order: its fence waits behind its wait"
    ring2 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    ring2.run(release_mem(cp_fence, 7))  # queue 1 writes it: the SDMA moves, then the CP
    g.idle("SDMA_STATUS")
    g.idle()
    assert g.r32(0x200000, 64) == list(range(0x500, 0x540)) and g.r32(OUT + 0x88) == 0x76



def check_transfers_keep_war_and_waw_order(dev):
    """On each engine (DMA_DATA's, the SDMA's), a copy, then a fill of the copy's source
    (WAR), then a fill over part of the copy's destination (WAW), with no wait between them:
    the copy carries the source as it was, and the later fill wins where both wrote. (Only a
    read of what an earlier transfer writes needs a wait: DMA_DATA's RAW_WAIT, the SDMA's
    own.)"""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 8)
    src, dst = 0x100000, 0x300000
    words = [((k + 3) * 0x9E3779B1) & M32 for k in range(0x1000)]
    want = list(words)
    want[0x200:0x600] = [0x11111111] * 0x400
    for engine in ("DMA_DATA", "SDMA"):
        g.w32(src, words)
        g.w32(dst, [0] * 0x1000)
        # 36 KiB moved: on slow, stalling memory at 32 bits (GPUCOSIM_DRIVER_MEM=slow:3) more
        # than the 20,000 cycles a ring's run() waits
        if engine == "DMA_DATA":
            ring.submit(dma_data(dst, src, 0x4000), dma_data(src, 0xFFFFFFFF, 0x4000, SRC_SEL="DATA"),
                        dma_data(dst + 0x800, 0x11111111, 0x1000, SRC_SEL="DATA"))
            g.idle("STATUS", 1_000_000)
        else:
            s.submit(sdma("COPY_LINEAR", COUNT=0x3FFF, **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst)),
                     sdma("CONSTANT_FILL", SRC_DATA=0xFFFFFFFF, COUNT=0x3FFF, **lo_hi("DST_ADDR", src)),
                     sdma("CONSTANT_FILL", SRC_DATA=0x11111111, COUNT=0xFFF, **lo_hi("DST_ADDR", dst + 0x800)))
            g.idle("SDMA_STATUS", 1_000_000)
        g.until(lambda: g.r32(src + 0x3FFC) == 0xFFFFFFFF, "the fill of the source")
        got = g.r32(dst, 0x1000)
        bad = [k for k in range(0x1000) if got[k] != want[k]]
        assert not bad, f"{engine}: {len(bad)} dwords differ, the first at {4 * bad[0]:#x}"


def check_queue_resets_at_once_halted_and_their_write_backs(dev):
    """CP_QUEUE_RESET with Q0 and Q1 in one write resets both polling queues; neither a CP
    queue reset nor SDMA_CNTL.QUEUE_RESET writes the rptr write-back dword (a reset is no
    packet: the dword keeps the last rptr written, and the driver rewrites it as after
    CONTROL.SOFT_RESET); the first packet after the reset writes the new rptr. A queue reset
    while CONTROL.HALT holds the CP drops the work not yet started."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    flag = OUT + 0x80
    g.w32(flag, [0])
    q0.run(write_data(OUT, [1]))
    q1.run(write_data(OUT + 4, [2]))
    s.run(sdma("FENCE", DATA=3, **lo_hi("ADDR", OUT + 8, 2)))
    assert (g.r32(RPTR_WB), g.r32(RPTR1_WB), g.r32(SRPTR_WB)) == (5, 5, 16)
    q0.submit(wait_mem(flag, 1, M32, "EQ"))
    q1.submit(wait_mem(flag, 1, M32, "EQ"))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1))
    g.waiting("SDMA_STATUS")
    g.until(lambda: g.fields("STATUS")["WAITING"] or g.fields("CP_HQD1_STATUS")["WAITING"], "a CP wait")
    g.dev.delay(100)
    wb = (g.r32(RPTR_WB), g.r32(RPTR1_WB), g.r32(SRPTR_WB))
    g.set("CP_QUEUE_RESET", Q0=1, Q1=1)
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    for status in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        st = g.idle(status)
        assert (st["WAITING"], st["ERROR"]) == (0, 0), (status, st)
    assert [g.read(r) for r in ("RB_RPTR", "RB_WPTR", "CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "SDMA_RB_RPTR",
                                "SDMA_RB_WPTR")] == [0] * 6, "both CP queues reset by one write"
    g.dev.delay(50)
    assert (g.r32(RPTR_WB), g.r32(RPTR1_WB), g.r32(SRPTR_WB)) == wb, \
        f"a queue reset writes no rptr write-back: {wb} then {(g.r32(RPTR_WB), g.r32(RPTR1_WB), g.r32(SRPTR_WB))}"
    q0.wptr = q1.wptr = s.wptr = 0
    g.w32(flag, [1])
    q0.run(write_data(OUT + 12, [4]))
    q1.run(write_data(OUT + 16, [5]))
    s.run(sdma("FENCE", DATA=6, **lo_hi("ADDR", OUT + 20, 2)))
    assert g.r32(OUT + 12, 3) == [4, 5, 6]
    assert (g.r32(RPTR_WB), g.r32(RPTR1_WB), g.r32(SRPTR_WB)) == (5, 5, 16), "the next packet writes the new rptr"
    assert ih.pop() == [], "a reset raises no entry"
    # A queue reset while the CP is halted: the work not started is dropped.
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "HALTED")
    assert g.read("CP_HQD1_STATUS") & 0x12 == 0, "CP_HQD1_STATUS has no HALTED (bit 1) nor DMA_BUSY (bit 4)"
    q0.submit(write_data(OUT + 24, [7]))
    g.dev.delay(50)
    assert g.read("RB_WPTR") == 10 and g.fields("STATUS")["IDLE"] == 0
    g.set("CP_QUEUE_RESET", Q0=1)
    st = g.idle()
    assert (st["HALTED"], st["ERROR"], g.read("RB_RPTR"), g.read("RB_WPTR")) == (1, 0, 0, 0), st
    g.set("CONTROL", HALT=0)
    g.dev.delay(100)
    assert g.r32(OUT + 24) == 0 and g.read("RB_RPTR") == 0, "the dropped packet never runs"
    q0.wptr = 0
    q0.run(write_data(OUT + 28, [8]))
    assert g.r32(OUT + 28) == 8 and g.r32(RPTR_WB) == 5


def check_equal_priority_turns_after_one_queue_ran_alone(dev):
    """Equal priorities take turns packet by packet, and the turn is the queue that did not
    run the last packet: when both get work, after queue 1 ran alone queue 0 goes first and
    after queue 0 ran alone queue 1; a CP_QUEUE_RESET of either queue does not change whose
    turn it is; CONTROL.SOFT_RESET gives queue 1 the first turn (docs/hardware.md, CP
    hardware queues; the model and the RTL agree)."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    eop = lambda k: release_mem(OUT + 4 * k, k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731
    g.set("CP_QUEUE_PRIORITY", Q0=1, Q1=1)

    def order():
        return _halted_turns(g, q0, q1, ih, eop)

    got = {}
    q1.run(eop(0x20))
    ih.pop()
    got["q1 alone"] = order()
    q0.run(eop(0x21))
    ih.pop()
    got["q0 alone"] = order()
    q1.run(eop(0x20))
    ih.pop()
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    q1.wptr = 0
    got["q1 alone, then Q1 reset"] = order()
    q1.run(eop(0x20))
    ih.pop()
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    q0.wptr = 0
    got["q1 alone, then Q0 reset"] = order()
    q1.run(eop(0x20))
    ih.pop()
    g.set("CONTROL", SOFT_RESET=1)
    for status in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(status)
    g.write("IH_RPTR", 0)
    ih.rptr = q0.wptr = q1.wptr = 0
    got["q1 alone, then SOFT_RESET"] = order()
    q1_first, q0_first = [0x10, 0x00, 0x11, 0x01], [0x00, 0x10, 0x01, 0x11]
    assert got == {"q1 alone": q0_first, "q0 alone": q1_first, "q1 alone, then Q1 reset": q0_first,
                   "q1 alone, then Q0 reset": q0_first, "q1 alone, then SOFT_RESET": q1_first}, got


def check_sdma_ring_size_above_20_and_the_longest_write_linear(dev):
    """SDMA_RB_CNTL.RB_SIZE above 20 acts as 20 (docs/registers.md) and reads back what was
    written: a doorbell 4·2^20 bytes ahead of rptr is ring space, one 4 more DOORBELL_OVERFLOW;
    WRITE_LINEAR's COUNT at its largest (0xFFFFF: 2^20 data dwords, packets.md's N ≤ 1048576)
    never fits a buffer (the ring holds at most 2^20 dwords, an IB at most IB_SIZE 0xFFFFF), so
    it is BAD_COUNT at its header, in the ring and in an IB, before a byte is written."""
    g, _, ih = bring_up(dev)
    S = sdma_packets()
    big = 0x100_0000  # a 4 MiB ring at 16 MiB
    s = SdmaRing(g, big, 20)
    for size in (21, 25, 31):
        g.set("SDMA_RB_CNTL", RB_SIZE=size, RB_ENABLE=0)
        g.set("SDMA_RB_CNTL", RB_SIZE=size, RB_ENABLE=1)
        assert g.fields("SDMA_RB_CNTL")["RB_SIZE"] == size, "RB_SIZE reads back what was written"
        g.write("SDMA_DOORBELL", (4 << 20) + 4)
        expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, (4 << 20) + 4, 0)
    wl = sdma("WRITE_LINEAR", **lo_hi("DST_ADDR", OUT, 2), COUNT=0xFFFFF)
    assert len(wl) == 4
    g.w32(OUT, [0xC0FFEE] * 4)
    g.w32(big, wl)
    g.write("SDMA_DOORBELL", 4 << 20)  # the whole ring, 2^20 dwords: accepted
    expect_sdma_error(s, ih, "BAD_COUNT", "RING", S["WRITE_LINEAR"].opcode, big, 0)
    g.w32(IB1, wl)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=0xFFFFF))
    expect_sdma_error(s, ih, "BAD_COUNT", "IB1", S["WRITE_LINEAR"].opcode, IB1, 0)
    assert g.r32(OUT, 4) == [0xC0FFEE] * 4, "nothing written"
    # the ring is still 2^20 dwords: a FENCE, then a doorbell that leaves rptr 4·2^20 − 16
    # behind, i.e. wptr exactly one ring ahead of where rptr stands
    s.run(sdma("FENCE", DATA=0x77, **lo_hi("ADDR", OUT, 2)))
    assert g.r32(OUT) == 0x77 and g.read("SDMA_RB_RPTR") == 16
    g.write("SDMA_DOORBELL", 16 + (4 << 20) + 4)
    expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, 16 + (4 << 20) + 4, 4)


def check_sdma_poll_reads_are_16_interval_cycles_apart(dev):
    """POLL_REGMEM reads at once, then every max(1, 16·INTERVAL) cycles, and gives up at its
    (RETRY_COUNT + 1)-th failing read (docs/hardware.md): between a TRAP's entry and the
    POLL_TIMEOUT entry of the poll right after it lie at least RETRY_COUNT intervals (the
    entries' TIMESTAMPs), and not many more (each read's latency, the IH write); INTERVAL 0
    polls as fast as its reads come back. (Measured, Verilator, default memory: 673/677
    cycles at INTERVAL 4, 353/357 at 1, 353/357 for 40 reads at 0, 64/32-bit bus; the model,
    whose reads take no time, 640, 320, 40.)"""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    flag = OUT + 0x80
    g.w32(flag, [0x55])
    stamp = lambda e: e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
    got = {}
    for interval, retries in ((4, 10), (1, 20), (0, 40)):
        s.run(sdma("TRAP", INT_CONTEXT=interval),
              sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                   RETRY_COUNT=retries, INTERVAL=interval))
        g.until(lambda: (g.read("IH_WPTR") - ih.rptr) & M32 >= 64, "both entries")
        t, p = ih.pop()
        assert (ih.source(t), t["DATA0"], ih.source(p), p["DATA2"]) == ("SDMA_TRAP", interval, "SDMA_POLL_TIMEOUT", 0x55)
        gap, least = stamp(p) - stamp(t), retries * max(1, 16 * interval)
        got[interval] = gap
        # (at most: each read's latency on slow, stalling memory and the IH writes on top)
        assert least <= gap <= least + 200 * (retries + 1) + 1000, \
            f"INTERVAL {interval}, RETRY_COUNT {retries}: {gap} cycles from the TRAP to the timeout, at least {least}"
    return got


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


def check_queue_1_dma_status_and_queue_resets_during_it(dev):
    """Queue 1's DMA_DATA runs on the CP's one DMA engine: while it moves data
    `STATUS.DMA_BUSY` shows it, `CP_HQD1_STATUS` (no HALTED, no DMA_BUSY: bits 1 and 4 read
    0) is not IDLE, and queue 0's `STATUS.IDLE` reads 1 (queue 0 has nothing to do); a
    `CP_QUEUE_RESET.Q0` then leaves queue 1's transfer and the fence after it whole (the
    other queue is untouched), and a `CP_QUEUE_RESET.Q1` cancels it: no fence, no entry, no
    error, the engine idle, and queue 1 runs again from wptr 0."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    n, dst, fence = 1 << 16, 0x1000000, OUT + 0x10

    def sample():
        seen = set()
        for _ in range(400):
            st, st1 = g.fields("STATUS"), g.read("CP_HQD1_STATUS")
            seen.add((st["DMA_BUSY"], st["IDLE"], st1 & 1, st1 & 0x12))
            if st1 & 1 and not st["DMA_BUSY"]:
                break
            g.dev.delay(20)
        return seen

    g.w32(fence, [0])
    q1.submit(dma_data(dst, 0x5, n, SRC_SEL="DATA"), release_mem(fence, 0x77))
    seen = sample()
    assert all(bits == 0 for *_, bits in seen), f"CP_HQD1_STATUS bits 1 or 4 set: {seen}"
    assert all(idle1 == 0 for busy, _, idle1, _ in seen if busy), f"queue 1 IDLE while its DMA runs: {seen}"
    assert all(idle0 == 1 for _, idle0, _, _ in seen), f"STATUS.IDLE (queue 0, no work) read 0: {seen}"
    g.idle("CP_HQD1_STATUS")
    assert g.r32(fence) == 0x77 and g.r32(dst) == 5 == g.r32(dst + n - 4)
    assert [ih.source(e) for e in ih.pop()] == []
    # CP_QUEUE_RESET.Q0 while queue 1's transfer runs: the transfer and its fence complete.
    q1.submit(dma_data(dst, 0x6, n, SRC_SEL="DATA"), release_mem(fence, 0x78))
    g.dev.delay(100)
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    assert g.read("CP_HQD1_ERROR") == 0 and g.read("CP_ERROR") == 0
    assert g.r32(fence) == 0x78 and g.r32(dst, n // 4) == [6] * (n // 4), "queue 0's reset touched queue 1's DMA"
    # CP_QUEUE_RESET.Q1 while its transfer runs: cancelled, no fence, no entry, no error.
    q1.submit(dma_data(dst, 0x7, n, SRC_SEL="DATA"), release_mem(fence, 0x79))
    g.dev.delay(100)
    busy = g.fields("STATUS")["DMA_BUSY"]
    g.set("CP_QUEUE_RESET", Q1=1)
    st1 = g.idle("CP_HQD1_STATUS")
    st = g.idle()
    assert (st1["ERROR"], st1["WAITING"], st["DMA_BUSY"], st["ERROR"]) == (0, 0, 0, 0), (st, st1)
    assert (g.read("CP_HQD1_RB_RPTR"), g.read("CP_HQD1_RB_WPTR"), g.read("CP_HQD1_ERROR")) == (0, 0, 0)
    done = g.r32(fence) == 0x79  # (the model moves a doorbell's transfer before the next MMIO)
    assert not (busy and done), "the fence after a transfer the reset found running was written"
    if done:
        assert g.r32(dst + n - 4) == 7, "the fence was written before the transfer's last dword"
    assert not ih.pop() and g.field("INT_STATUS", "CP_ERROR") == 0
    q1.wptr = 0
    q1.run(write_data(OUT + 0x20, [0x7A]), release_mem(fence, 0x7B))
    assert g.r32(fence) == 0x7B and g.r32(OUT + 0x20) == 0x7A
    assert g.read("CP_HQD1_RB_RPTR") == 13


def check_queue_reset_while_each_packet_kind_runs(dev):
    """CP_QUEUE_RESET.Qn while queue n runs each packet kind (a long WRITE_DATA, a long NOP,
    an IB2 of writes, a CHAIN, EOPs with their interrupts, a DMA_DATA with CP_SYNC): the
    queue comes back idle at the ring (`LEVEL` RING, no WAITING, no ERROR, `RB_RPTR` =
    `RB_WPTR` = 0), no error is latched and no CP_ERROR entry is written; what the queue had
    done is a prefix in packet order (the tag written after the packet only once the packet
    is whole; every EOP entry whole, after its fence); the other queue's work (of lower priority, waiting) all lands; the
    reset queue runs again from wptr 0."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 8, IH_WB)
    q0 = Ring(g, 0x100000, 14, RPTR_WB)  # 16384 dwords each: the long packets fit
    q1 = Ring(g, 0x120000, 14, RPTR1_WB, queue=1)
    tag, other, dma = OUT + 0x400, OUT + 0x600, 0x200000
    n_wd = 2000
    kinds = {
        "WRITE_DATA": lambda: [write_data(OUT + 0x1000, list(range(1, n_wd + 1)))],
        "NOP": lambda: [pm4("NOP", [0] * 8000)],
        "IB2": lambda: [ib(IB1, 4 + 5)],
        "CHAIN": lambda: [ib(IB1B, 4)],
        "EOP": lambda: [release_mem(OUT + 0x800 + 4 * k, 0x100 + k, INT_SEL="SEND_INT", INT_CTXID=k)
                        for k in range(24)],
        "DMA_DATA": lambda: [dma_data(dma, 0x5A, 1 << 15, SRC_SEL="DATA", CP_SYNC=1)],
    }
    body = sum((write_data(OUT + 0x3000 + 8 * k, [k + 1]) for k in range(64)), [])
    g.w32(IB2, body)
    g.w32(IB1, ib(IB2, len(body)) + write_data(OUT + 0x300, [0x31]))
    g.w32(IB1B, ib(IB2, len(body), CHAIN=1))
    for q, (ring, other_ring) in enumerate(((q0, q1), (q1, q0))):
        g.set("CP_QUEUE_PRIORITY", **{f"Q{q}": 2, f"Q{1 - q}": 1})  # the queue reset runs first
        for name, packets in kinds.items():
            g.w32(OUT + 0x800, [0] * 24)
            g.w32(OUT + 0x1000, [0] * n_wd)
            g.w32(OUT + 0x3000, [0] * 128)
            g.w32(dma, [0] * (1 << 13))
            g.w32(tag, [0])
            ring.submit(*packets(), write_data(tag, [0x7A6]))
            other_ring.submit(*[write_data(other + 4 * k, [q << 12 | k + 1]) for k in range(4)])
            g.dev.delay(60)
            run, st0 = g.read(ring.status), g.fields("STATUS")
            g.set("CP_QUEUE_RESET", **{f"Q{q}": 1})
            what = f"queue {q} reset during {name}"
            if not run & 1:  # (on the RTL; the model runs a doorbell's packets before the next MMIO)
                level = {"IB2": "IB2", "CHAIN": "IB1"}.get(name, "RING")
                st_run = g.regs[ring.status].fields
                assert (st_run["LEVEL"].get(run), st_run["WAITING"].get(run), st_run["ERROR"].get(run)) == \
                    (g.level[level], 0, 0), f"{what}: {ring.status} {run:#x} while it runs"
                assert q == 0 or run & 0x12 == 0, f"{what}: CP_HQD1_STATUS {run:#x} has bit 1 or 4 set"
                assert name != "DMA_DATA" or st0["DMA_BUSY"] == 1, f"{what}: STATUS {st0}"
            st = g.idle(ring.status)
            g.idle(other_ring.status)
            g.idle()
            assert (st["LEVEL"], st["WAITING"], st["ERROR"]) == (g.level["RING"], 0, 0), f"{what}: {st}"
            assert (g.read(ring.p + "RPTR"), g.read(ring.p + "WPTR"), g.read(ring.error)) == (0, 0, 0), what
            assert g.field("INT_STATUS", "CP_ERROR") == 0 and g.read("CP_ERROR") == 0 == g.read("CP_HQD1_ERROR"), what
            assert g.r32(other, 4) == [q << 12 | k + 1 for k in range(4)], f"{what}: the other queue's writes"
            entries = ih.pop()
            assert all(ih.source(e) == "EOP" and e["RING_ID"] == q for e in entries), f"{what}: {entries}"
            done = g.r32(tag) == 0x7A6
            if name == "WRITE_DATA":
                got = g.r32(OUT + 0x1000, n_wd)
                k = got.index(0) if 0 in got else n_wd
                assert got[:k] == list(range(1, k + 1)) and not any(got[k:]), f"{what}: not a prefix"
                assert not done or k == n_wd, f"{what}: the tag before the packet's last dword"
            elif name in ("IB2", "CHAIN"):
                got = g.r32(OUT + 0x3000, 128)[::2]
                k = got.index(0) if 0 in got else 64
                assert got[:k] == list(range(1, k + 1)) and not any(got[k:]), f"{what}: not a prefix"
                assert not done or k == 64, f"{what}: the tag before the IB's last packet"
                assert not done or name == "CHAIN" or g.r32(OUT + 0x300) == 0x31, what
            elif name == "EOP":
                fences = g.r32(OUT + 0x800, 24)
                k = fences.index(0) if 0 in fences else 24
                assert fences[:k] == [0x100 + j for j in range(k)] and not any(fences[k:]), f"{what}: {fences}"
                assert [e["DATA0"] for e in entries] == list(range(len(entries))) and len(entries) in (k, k - 1), \
                    f"{what}: {len(entries)} entries for {k} fences"
                assert not done or len(entries) == 24, what
            elif name == "DMA_DATA":
                assert not done or g.r32(dma + (1 << 15) - 4) == 0x5A, f"{what}: the tag before the data"
            g.w32(OUT + 0x300, [0])
            ring.wptr = 0
            ring.run(write_data(tag, [0x7A7]))
            assert g.r32(tag) == 0x7A7 and g.read(ring.p + "RPTR") == 5, f"{what}: the queue after its reset"


def check_doorbell_errors_while_an_ib_waits(dev):
    """A doorbell error of a queue whose IB (VMID 3) is polling a WAIT_REG_MEM, the other
    queue idle or polling too (on the RTL two polling queues yield to each other, each parked
    in turn): a doorbell of the wptr it has is no error and the wait goes on; one behind it
    is DOORBELL_BACKWARDS, one more than `size` ahead of rptr DOORBELL_OVERFLOW, latched as
    in the ring (LEVEL RING, OPCODE 0, ADDR the value, OFFSET rptr masked: the IB packet's,
    not yet passed), the CP_ERROR entry's VMID 0 though the queue was in its IB; the stopped
    queue no longer polls (WAITING 0: "a WAIT_REG_MEM is polling") and its IB does not go
    on. The other queue is untouched. (With the other queue polling too, a queue stopped
    while its wait was parked read WAITING 1 beside ERROR and IDLE until its reset on the RTL
    before 6 December 2026, night, the model 0: rtl/cp/queues.py's resume() now clears the
    park with the error, driver-writer-5.)"""
    g, q0, ih = bring_up(dev, ring_log2=6)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    flag, flag1 = OUT + 0x40, OUT + 0x44
    g.w32(flag, [0])
    g.w32(flag1, [0])
    g.w32(IB1, wait_mem(flag, 1, 1, "EQ") + write_data(OUT, [0xAA]))
    g.w32(IB2, wait_mem(flag1, 1, 1, "EQ") + write_data(OUT + 4, [0xBB]))
    for q, (ring, other, ib_base) in enumerate(((q0, q1, IB1), (q1, q0, IB2))):
        for other_polls in (False, True):
            for code in ("DOORBELL_BACKWARDS", "DOORBELL_OVERFLOW"):
                what = f"queue {q}, {code}, the other queue {'polling' if other_polls else 'idle'}"
                g.w32(OUT, [0, 0])
                if other_polls:
                    other.submit(ib(IB2 if q == 0 else IB1, 12, VMID=5))
                    g.waiting(other.status)
                at = ring.wptr + 2  # rptr once the NOP is done: the IB packet's
                ring.submit(pm4("NOP", [0]), ib(ib_base, 12, VMID=3))
                st = g.waiting(ring.status)
                assert st["LEVEL"] == g.level["IB1"], st
                ring.doorbell(ring.wptr)  # the same wptr: nothing new, no error
                g.dev.delay(100)
                st = g.fields(ring.status)
                assert (st["WAITING"], st["ERROR"], g.read(ring.p + "RPTR")) == (1, 0, at), f"{what}: {st}"
                v = ring.wptr - 1 if code == "DOORBELL_BACKWARDS" else at + ring.size + 1
                ring.doorbell(v)
                st = g.idle(ring.status)
                assert st["ERROR"] == 1 and st["WAITING"] == 0, f"{what}: the stopped queue still shows WAITING: {st}"
                (e,) = expect_error(ring, ih, code, "RING", 0, v, at % ring.size)
                assert (e["RING_ID"], e["VMID"]) == (q, 0), e
                if other_polls:
                    ost = g.fields(other.status)
                    assert (ost["WAITING"], ost["ERROR"], ost["LEVEL"]) == (1, 0, g.level["IB1"]), \
                        f"{what}: the other queue {ost}"
                g.w32(flag if q == 0 else flag1, [1])  # the reset queue's IB is gone: its write never comes
                g.w32(flag1 if q == 0 else flag, [1])
                g.idle(other.status)
                g.dev.delay(100)
                want = [0, 0xBB] if q == 0 else [0xAA, 0]
                assert g.r32(OUT, 2) == (want if other_polls else [0, 0]), f"{what}: {g.r32(OUT, 2)}"
                assert not ih.pop()
                g.w32(flag, [0])
                g.w32(flag1, [0])

def check_dma_raw_wait_and_reads_after_earlier_writes(dev):
    """RAW_WAIT makes a copy wait for every earlier transfer, for a read of what they wrote:
    a fill and a copy (none with CP_SYNC), each followed by a RAW_WAIT copy of the last bytes
    it wrote (which without RAW_WAIT the engine reads before they are written: its reads run
    ahead of its writes), at odd addresses and byte counts; a WRITE_DATA is answered before
    the next packet, so a copy after it reads its data without RAW_WAIT; a queue switch
    waits for every transfer queued, so queue 1's copy reads queue 0's fill; a zero-byte
    transfer with RAW_WAIT and CP_SYNC moves nothing and completes."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    src, a, b, c, n, t, fence = 0x1F0000, 0x200000, 0x210000, 0x220000, 0x1000 + 3, 61, OUT + 0x10
    mem = lambda addr, k: bytes(g.dev.mem[addr:addr + k])  # noqa: E731
    g.w32(src, [0x01010101 * (k & 0xFF) ^ 0x80402010 for k in range(n // 4 + 1)])
    for base in (a, b, c):
        g.w32(base, [0] * (n // 4 + 4))
    value = 0x11223344
    fill = bytes(value.to_bytes(4, "little")[(a + 1 + i) % 4] for i in range(n))
    q0.run(dma_data(a + 1, value, n, SRC_SEL="DATA"), dma_data(c + 1, a + 1 + n - t, t, RAW_WAIT=1),
           dma_data(b + 3, src + 2, n), dma_data(c + 0x101, b + 3 + n - t, t, RAW_WAIT=1), release_mem(fence, 1))
    assert g.r32(fence) == 1
    assert mem(a + 1, n) == fill and mem(b + 3, n) == mem(src + 2, n), "the fill and the copy"
    assert mem(c + 1, t) == fill[-t:], "a copy with RAW_WAIT read the fill's last bytes before they were written"
    assert mem(c + 0x101, t) == mem(src + 2 + n - t, t), \
        "a copy with RAW_WAIT read the copy's last bytes before they were written"
    assert mem(a, 1) == mem(a + 1 + n, 1) == mem(b + 2, 1) == mem(b + 3 + n, 1) == mem(c, 1) == \
        mem(c + 1 + t, 1) == b"\0", "a transfer wrote outside its bytes"
    # A WRITE_DATA is answered before the next packet: a copy after it reads its data.
    d, e = 0x230000, 0x231000
    data = [0xD0000000 + k for k in range(64)]
    q0.run(write_data(d, data), dma_data(e + 1, d, 256), release_mem(fence, 2))
    assert g.r32(fence) == 2 and mem(e + 1, 256) == mem(d, 256) == b"".join(v.to_bytes(4, "little") for v in data)
    # Across queues: queue 1's copy (no RAW_WAIT) runs after queue 0's fill is answered.
    a2, b2, n2 = 0x240000, 0x250000, 1 << 12
    g.w32(a2, [0] * (n2 // 4))
    g.w32(b2, [0] * (n2 // 4))
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
    g.set("CP_QUEUE_PRIORITY", Q0=2, Q1=1)
    q0.submit(dma_data(a2, 0x5A5A5A5A, n2, SRC_SEL="DATA"))
    q1.submit(dma_data(b2, a2, n2), release_mem(fence, 3))
    g.set("CONTROL", HALT=0)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    assert g.r32(fence) == 3 and mem(b2, n2) == b"\x5a" * n2, "queue 1's copy read before queue 0's fill wrote"
    # Zero bytes with RAW_WAIT and CP_SYNC: nothing moves, the queue goes on.
    g.w32(d, [0x77])
    q0.run(dma_data(d, e, 0, RAW_WAIT=1, CP_SYNC=1), dma_data(d, 0x1, 0, SRC_SEL="DATA", RAW_WAIT=1, CP_SYNC=1),
           release_mem(fence, 4))
    assert g.r32(fence) == 4 and g.r32(d) == 0x77 and g.read("CP_ERROR") == 0
    assert [ih.source(x) for x in ih.pop()] == []


def check_priority_written_while_both_queues_have_work_and_a_fast_poll(dev):
    """CP_QUEUE_PRIORITY is read at every packet boundary: written while both queues have
    work, the next packet is the new higher queue's, and it runs its work to the end before
    the other goes on (the EOPs come as a prefix of queue 0's, all of queue 1's, the rest of
    queue 0's); a high-priority queue polling with POLL_INTERVAL 0 starves nobody: the other
    queue's packets (in an IB too) all run while it polls (WAITING 1), and the wait then
    ends when its value comes."""
    g, q0, ih = bring_up(dev, ih_log2=8)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    eop = lambda k: release_mem(OUT + 4 * (k & 0x3F), k, INT_SEL="SEND_INT", INT_CTXID=k)  # noqa: E731
    g.set("CP_QUEUE_PRIORITY", Q0=2, Q1=1)
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
    q0.submit(*[eop(k) for k in range(16)])
    q1.submit(*[eop(0x20 + k) for k in range(16)])
    g.set("CONTROL", HALT=0)
    g.set("CP_QUEUE_PRIORITY", Q0=0, Q1=2)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    seen = []
    g.until(lambda: seen.extend(ih.pop()) or len(seen) >= 32, "32 EOP entries")
    got = [e["DATA0"] for e in seen]
    k = got.index(0x20)
    assert got == list(range(k)) + [0x20 + j for j in range(16)] + list(range(k, 16)), got
    assert all(e["RING_ID"] == (e["DATA0"] >> 5) for e in seen)
    # Queue 1, high, polls with POLL_INTERVAL 0; queue 0's 30 packets and an IB all run.
    flag = OUT + 0x200
    g.w32(flag, [0])
    q1.submit(wait_mem(flag, 1, 1, "EQ", interval=0), write_data(OUT + 0x204, [0x1F]))
    g.waiting("CP_HQD1_STATUS")
    body = sum((write_data(OUT + 0x300 + 4 * j, [0x300 + j]) for j in range(10)), [])
    g.w32(IB1, body)
    q0.submit(*[write_data(OUT + 0x400 + 4 * j, [0x400 + j]) for j in range(30)], ib(IB1, len(body)))
    st = g.idle(cycles=40000)
    assert st["ERROR"] == 0 and g.r32(OUT + 0x400, 30) == [0x400 + j for j in range(30)]
    assert g.r32(OUT + 0x300, 10) == [0x300 + j for j in range(10)]
    st1 = g.fields("CP_HQD1_STATUS")
    assert (st1["WAITING"], st1["IDLE"]) == (1, 0) and g.r32(OUT + 0x204) == 0, st1
    g.w32(flag, [1])
    g.idle("CP_HQD1_STATUS")
    assert g.r32(OUT + 0x204) == 0x1F


def check_doorbell_error_of_the_queue_not_running_is_taken_at_once(dev):
    """A doorbell error of the queue that is not running is latched at the next packet
    boundary, whatever the priorities (queue 1 low, queue 0 high and busy with a long stream):
    CP_HQD1_STATUS reads IDLE 0 from the doorbell until then, then ERROR (and IDLE once the
    error's IH entry is written), while
    queue 0 still has packets to run (on the RTL; the model runs a doorbell's packets before
    the next MMIO), and queue 0's work all completes, its own error registers clear."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    q0 = Ring(g, 0x100000, 14, RPTR_WB)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    q1.run(pm4("NOP", [0]))
    g.set("CP_QUEUE_PRIORITY", Q0=2, Q1=0)
    n, dst = 30, 0x200000
    g.w32(dst, [0] * (n * 200))
    q0.submit(*[write_data(dst + 800 * k, [k << 16 | j for j in range(200)]) for k in range(n)])
    busy = g.fields("STATUS")["IDLE"] == 0
    q1.doorbell(1)  # behind wptr 2
    st1 = g.fields("CP_HQD1_STATUS")
    assert st1["IDLE"] == 0 or st1["ERROR"] == 1, f"CP_HQD1_STATUS {st1} right after the doorbell error"
    st1 = g.until(lambda: (lambda f: f if f["ERROR"] and f["IDLE"] else None)(g.fields("CP_HQD1_STATUS")),
                  "queue 1 stopped (ERROR, then IDLE once drained)", cycles=2000, step=10)
    still = g.fields("STATUS")["IDLE"] == 0
    assert still or not busy, \
        f"queue 1's doorbell error waited for queue 0's work to end: {st1}, queue 0 busy at the doorbell {busy}"
    g.idle(cycles=100000)
    assert g.read("CP_ERROR") == 0 and g.r32(dst + 800 * (n - 1) + 4 * 199) == (n - 1) << 16 | 199
    expect_error(q1, ih, "DOORBELL_BACKWARDS", "RING", 0, 1, 2)


def check_poll_counters_count_each_queue_s_reads(dev):
    """PERF_Q0_POLLS / PERF_Q1_POLLS count the reads each queue's WAIT_REG_MEMs make: a queue
    polling alone reads every POLL_INTERVAL cycles or so (at most one read per interval),
    the other queue's counter still; a poll that holds at once is one read; a read that
    faults counts too; CONTROL.PERF_CLEAR zeroes both. And on the RTL a queue 0 parked in
    its failed poll while queue 1, which outranks it, keeps the CP reads nothing until queue
    1 lets go (the reference model polls on its grid whatever the other queue does): what a
    job timer needs to tell "had no turn" from "polled and failed"."""
    g, q0, ih = bring_up(dev, ring_log2=8)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    g.set("CP_QUEUE_PRIORITY", Q0=1, Q1=2)
    flag, big = OUT + 0x40, OUT + 0x1000
    g.w32(flag, [0])
    g.set("CONTROL", PERF_CLEAR=1)
    assert (g.read("PERF_Q0_POLLS"), g.read("PERF_Q1_POLLS")) == (0, 0)
    interval = 8
    q0.submit(wait_mem(flag, 1, 1, "EQ", interval=interval), write_data(OUT, [0xA0]))
    g.waiting()
    a = g.read("PERF_Q0_POLLS")
    g.dev.delay(800)
    n = g.read("PERF_Q0_POLLS") - a
    assert 800 // (interval + 64) <= n <= 800 // interval + 1, f"queue 0 alone polling every {interval}: {n} reads"
    assert g.read("PERF_Q1_POLLS") == 0, "queue 1 made no poll"
    # queue 1's long stream of fills, each waited for by the CP (CP_SYNC): on the RTL queue 0,
    # parked, reads nothing while queue 1 can run
    fills = [dma_data(big + 0x400 * k, 0x5A5A0000 + k, 0x400, SRC_SEL="DATA", CP_SYNC=1) for k in range(8)]
    q1.submit(*fills)
    rtl = g.dev.name != "model"  # (the model's CP runs a finite stream at once)
    if rtl:
        g.until(lambda: g.field("CP_HQD1_STATUS", "IDLE") == 0, "queue 1 runs", cycles=2000, step=4)
    g.dev.delay(64)  # (a read of queue 0's already on its way when queue 1 came is counted)
    a = g.read("PERF_Q0_POLLS")
    g.dev.delay(400)
    busy = g.field("CP_HQD1_STATUS", "IDLE") == 0
    n = g.read("PERF_Q0_POLLS") - a
    if rtl:
        assert busy, "queue 1's fills took less than 400 cycles: the check measures nothing"
        assert n == 0, f"queue 0, parked behind queue 1's fills, read {n} times"
    else:
        assert n > 0, "the reference model's queue 0 polls on its grid"
    g.idle("CP_HQD1_STATUS", cycles=100000)
    assert g.r32(big + 0x400 * 7 + 0x3FC) == 0x5A5A0007
    assert g.read("PERF_Q1_POLLS") == 0, "queue 1's fills made no poll"
    g.w32(flag, [1])
    g.idle()
    assert g.r32(OUT) == 0xA0
    # a poll that holds at once: one read, of queue 1's
    a0, a1 = g.read("PERF_Q0_POLLS"), g.read("PERF_Q1_POLLS")
    q1.run(wait_mem(flag, 1, 1, "EQ", interval=interval), write_data(OUT + 4, [0xA1]))
    assert g.r32(OUT + 4) == 0xA1
    assert (g.read("PERF_Q0_POLLS") - a0, g.read("PERF_Q1_POLLS") - a1) == (0, 1)
    g.set("CONTROL", PERF_CLEAR=1)
    assert (g.read("PERF_Q0_POLLS"), g.read("PERF_Q1_POLLS")) == (0, 0)
    # a read that faults (beyond memory: DECERR) is a read all the same
    bad = 0x1000_0000
    at = q0.wptr
    q0.submit(wait_mem(bad, 1, 1, "EQ"))
    g.idle()
    expect_error(q0, ih, "BUS_DECERR", "RING", pm4_packets()["WAIT_REG_MEM"].opcode, bad, at % q0.size)
    assert (g.read("PERF_Q0_POLLS"), g.read("PERF_Q1_POLLS")) == (1, 0)
def check_ih_entry_of_every_source_fills_its_fields_alone(dev):
    """docs/hardware.md's IH entry table, for every source at its widest values: an EOP of
    queue 1 from an IB of VMID 15 (INT_CTXID, DATA_LO, DATA_HI and an ADDR_LO dword of all
    ones: a RELEASE_MEM with DATA_SEL NONE), queue 1's CP_ERROR at an address of 48 ones
    (DATA2 0xFFFF), a VM_FAULT at a virtual address of 48 ones (DATA0 its bits 43:12, DATA1
    its bits 47:44 and the WRITE hint), a TRAP with a 28-bit INT_CONTEXT of ones, a
    POLL_TIMEOUT whose address has bits above 47 (dropped: DATA1 0) and whose last read is all
    ones, an SDMA_ERROR of OP and SUB_OP 0xFF in an IB of VMID 6: every field as the table
    says, VMID_SRC, PASID and TIMESTAMP_SRC 0, no bit set that no field names, and the
    TIMESTAMPs in the ring's order, within the clock read before and after."""
    from tests.model.contract_driver import ih_entry

    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 8, IH_WB)  # 32 entries: every one stays in the ring to be read again
    q0 = Ring(g, RING, 8, RPTR_WB)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6)
    P, S = pm4_packets(), sdma_packets()

    t0 = g.timestamp()
    got = []
    far = 0xFFFF_FFFF_FFFF_FFFC
    body = release_mem(far, (1 << 64) - 1, DATA_SEL="NONE", INT_SEL="SEND_INT", INT_CTXID=M32) + \
        write_data(0xFFFF_FFFF_FFFF_FFF0, [1])
    g.w32(IB1, body)
    q1.submit(ib(IB1, len(body), VMID=15))
    g.idle("CP_HQD1_STATUS")
    hqd1_error = g.read("CP_HQD1_ERROR")
    assert g.fields("CP_HQD1_ERROR") == {"OPCODE": P["WRITE_DATA"].opcode, "LEVEL": g.level["IB1"],
                                         "CODE": g.err["BUS_DECERR"]}
    got += [("EOP", 1, 15, [M32, M32, M32, far & M32]), ("CP_ERROR", 1, 15, [hqd1_error, 0xFFFF_FFF0, 0xFFFF, 8])]
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    map_vmid1(g)
    va = 0xFFFF_FFFF_FFF0  # bits above the tables' 30: RANGE, LEVEL 0
    g.w32(PA_CODE, write_data(va, [2]))
    q0.submit(ib(VA_CODE, 5, VMID=1))
    g.idle()
    vm_status, cp_error = g.read("VM_FAULT_STATUS"), g.read("CP_ERROR")
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 1, "ACCESS": 1, "LEVEL": 0, "CAUSE": 2}
    got += [("VM_FAULT", 0, 1, [0xFFFF_FFFF, 0xF | 0x20, vm_status, cp_error])]
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    flag = OUT + 0x40
    g.w32(flag, [M32])
    s.run(sdma("TRAP", INT_CONTEXT=0xFFF_FFFF),
          sdma("POLL_REGMEM", **lo_hi("ADDR", 0xFFFF_0000_0000_0000 | flag, 2), VALUE=0, MASK=M32, FUNC="EQ",
               MEM_POLL="MEMORY", RETRY_COUNT=0, INTERVAL=1))
    got += [("SDMA_TRAP", 0, 0, [0xFFF_FFFF, 0, 0, 0]), ("SDMA_POLL_TIMEOUT", 0, 0, [flag, 0, M32, 0])]
    g.w32(IB1, [0x0000_FFFF])  # OP 0xFF, SUB_OP 0xFF: not in the table
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=1, VMID=6))
    assert g.idle("SDMA_STATUS")["ERROR"] == 1
    sdma_error = g.read("SDMA_ERROR")
    assert g.fields("SDMA_ERROR") == {"SUB_OP": 0xFF, "OP": 0xFF, "LEVEL": g.level["IB1"],
                                      "CODE": g.err["ILLEGAL_OPCODE"]}
    got += [("SDMA_ERROR", 0, 6, [sdma_error, IB1, 0, 0])]
    g.until(lambda: g.read("IH_WPTR") == 32 * len(got), f"{len(got)} entries")
    t1 = g.timestamp()
    fields, _ = ih_entry()
    named = [sum(f.mask for f in fields.values() if f.dword == d) for d in range(8)]
    last = t0
    for k, (source, ring_id, vmid, data) in enumerate(got):
        e = ih.entry(32 * k)
        assert (ih.source(e), e["RING_ID"], e["VMID"], [e[f"DATA{i}"] for i in range(4)]) == \
            (source, ring_id, vmid, data), f"entry {k}: {e}"
        assert (e["VMID_SRC"], e["PASID"], e["TIMESTAMP_SRC"]) == (0, 0, 0), f"{source}: {e}"
        spare = [hex(w & ~named[d] & M32) for d, w in enumerate(e["raw"]) if w & ~named[d] & M32]
        assert not spare, f"{source}: bits no field names are set: {spare} in {[hex(w) for w in e['raw']]}"
        stamp = e["TIMESTAMP_LO"] | e["TIMESTAMP_HI"] << 32
        assert last <= stamp <= t1, f"{source}: TIMESTAMP {stamp} not in [{last}, {t1}]"
        last = stamp


def check_write_linear_is_counted_once_its_last_dword_is_read(dev):
    """PERF_SDMA_PACKETS counts a packet as it starts (docs/hardware.md), but for WRITE_LINEAR:
    it counts once its last data dword is read, after every block before it was written, so
    one whose write fails in a block before the one holding its last dword (or whose data
    cannot be fetched) is not counted, while one failing in its last block is; the CP's
    WRITE_DATA counts as it starts, its write or its data's fetch failing or not (the
    testbench memory answers SLVERR in a 4 KiB window at ERR). And after a transfer's error in
    an IB the queue's own STATUS (LEVEL, RB_EMPTY) moves with its rptr, which depends on
    timing: the error registers' LEVEL is the one that names the failing packet's level.
    (Until 7 December 2026 the reference model counted every WRITE_LINEAR whose data it had
    read, a write error in any block or not.)"""
    g, ring, ih = bring_up(dev)
    S, P = sdma_packets(), pm4_packets()
    err = 0x70000
    dev.mem_model.configure(error_window=(err, err + 0x1000, "SLVERR"))
    try:
        s = SdmaRing(g, SRING, 8, SRPTR_WB)
        wl = S["WRITE_LINEAR"].index
        # (dwords, first byte, counted): blocks are the 32-byte-aligned pieces of the data
        cases = [(16, err - 0x1C, 0),  # 7 dwords written, then the failing block of 8, one more after it
                 (16, err, 0),  # the first block fails
                 (9, err - 0x20, 1),  # 8 written, the failing block holds the last dword
                 (3, err - 8, 1),  # one block across the window's start: the last dword's
                 (16, err - 0x20, 1)]  # 8 written, the failing second block holds the last
        for n, dst, counted in cases:
            g.w32(dst - 0x20 if dst < err else OUT, [0] * 8)
            g.set("CONTROL", PERF_CLEAR=1)
            s.submit(sdma("WRITE_LINEAR", list(range(1, n + 1)), **lo_hi("DST_ADDR", dst, 2), COUNT=n - 1))
            expect_sdma_error(s, ih, "BUS_SLVERR", "RING", S["WRITE_LINEAR"].opcode, max(err, dst), 0)
            got = g.read("PERF_SDMA_PACKETS", wl)
            assert got == counted, f"WRITE_LINEAR of {n} dwords at ERR{dst - err:+#x}: PERF_SDMA_PACKETS {got}"
            if dst < err:
                k = (err - dst) // 4
                assert g.r32(dst, k) == list(range(1, k + 1)), "every block before the failing one is written"
        # its data fetched from an IB that runs into the window: not counted, a fetch error
        body = sdma("WRITE_LINEAR", list(range(1, 17)), **lo_hi("DST_ADDR", OUT, 2), COUNT=15)
        g.w32(err - 0x20, body[:8])
        g.set("CONTROL", PERF_CLEAR=1)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", err - 0x20, 5), IB_SIZE=len(body)))
        expect_sdma_error(s, ih, "BUS_SLVERR", "IB1", S["WRITE_LINEAR"].opcode, err, 0)
        assert g.read("PERF_SDMA_PACKETS", wl) == 0 and g.read("PERF_SDMA_PACKETS", S["INDIRECT_BUFFER"].index) == 1
        # the CP's WRITE_DATA counts as it starts: failing in its first of two blocks, and with
        # its data's fetch failing (in an IB that runs into the window)
        g.set("CONTROL", PERF_CLEAR=1)
        ring.submit(write_data(err - 0x1C, list(range(1, 17))))
        expect_error(ring, ih, "BUS_SLVERR", "RING", P["WRITE_DATA"].opcode, err, 0)
        body = write_data(OUT + 0x100, list(range(1, 17)))
        g.w32(err - 0x20, body[:8])
        ring.submit(ib(err - 0x20, len(body)))
        expect_error(ring, ih, "BUS_SLVERR", "IB1", P["WRITE_DATA"].opcode, err, 0)
        assert g.read("PERF_PACKETS", P["WRITE_DATA"].index) == 2
        # a transfer failing as the last packet of an IB: the error names IB1; the queue's
        # STATUS shows IB1 with RB_RPTR before the IB (the model, or an RTL still inside it),
        # or RING with RB_RPTR past it (the RTL, whose transfer packet finished once queued)
        body = dma_data(OUT, err + 0x100, 0x400)
        g.w32(IB1, body)
        ring.submit(ib(IB1, len(body)))
        g.idle()
        st, rptr = g.fields("STATUS"), g.read("RB_RPTR")
        assert (st["LEVEL"], st["RB_EMPTY"], rptr) in ((g.level["IB1"], 0, 0), (g.level["RING"], 1, 4)), (st, rptr)
        expect_error(ring, ih, "BUS_SLVERR", "IB1", P["DMA_DATA"].opcode, err + 0x100, 0)
        body = sdma("COPY_LINEAR", COUNT=0x3FF, **lo_hi("SRC_ADDR", err + 0x100), **lo_hi("DST_ADDR", OUT))
        g.w32(IB1, body)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=len(body)))
        g.idle("SDMA_STATUS")
        st, rptr = g.fields("SDMA_STATUS"), g.read("SDMA_RB_RPTR")
        assert (st["LEVEL"], st["RB_EMPTY"], rptr) in ((g.level["IB1"], 0, 0), (g.level["RING"], 1, 24)), (st, rptr)
        expect_sdma_error(s, ih, "BUS_SLVERR", "IB1", S["COPY_LINEAR"].opcode, err + 0x100, 0)
    finally:
        dev.mem_model.configure(error_window=None)


CHECKS = [check_sdma_ring_and_packets, check_sdma_errors, check_cp_queue_priority,
          check_entries_name_their_queue_and_vmid, check_sdma_vm_and_address_rules,
          check_every_sdma_listed_value_and_reserved_bit, check_sdma_entries_raise_no_event_bit,
          check_sdma_copy_fill_write_edges, check_sdma_poll_trap_errors_resets_and_doorbells,
          check_cp_and_sdma_side_by_side, check_sdma_wrap_nop_halt_errors_and_cross_engine_waits,
          check_transfers_keep_war_and_waw_order, check_queue_resets_at_once_halted_and_their_write_backs,
          check_equal_priority_turns_after_one_queue_ran_alone,
          check_sdma_ring_size_above_20_and_the_longest_write_linear,
          check_sdma_poll_reads_are_16_interval_cycles_apart, check_sdma_rptr_write_back_fails_as_the_packet,
          check_sdma_halt_stops_inside_an_ib, check_queue_1_dma_status_and_queue_resets_during_it,
          check_queue_reset_while_each_packet_kind_runs, check_doorbell_errors_while_an_ib_waits,
          check_dma_raw_wait_and_reads_after_earlier_writes,
          check_priority_written_while_both_queues_have_work_and_a_fast_poll,
          check_doorbell_error_of_the_queue_not_running_is_taken_at_once,
          check_ih_entry_of_every_source_fills_its_fields_alone, check_poll_counters_count_each_queue_s_reads,
          check_write_linear_is_counted_once_its_last_dword_is_read]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
