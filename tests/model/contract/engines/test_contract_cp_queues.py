"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone; tests/model/contract/test_contract_driver.py has the CP's ring and packets): the
CP's second queue. CP_QUEUE_PRIORITY (written under load too) and equal priorities' turns,
which queue and VMID the IH entries name, queue resets (at once, halted, while each packet
kind runs, during queue 1's DMA) and their write-backs, doorbell errors while an IB waits
or while the other queue runs, each queue's poll counters (the SDMA:
test_contract_sdma_packets.py and test_contract_sdma_errors.py; virtual memory:
test_contract_vm.py; resets, halts, counters: test_contract_resets.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IB1B, IB2, IH_BASE, IH_WB, M32, OUT, RING, RING1, RPTR1_WB, RPTR_WB,
                                         SRING, SRPTR_WB, Gpu, IhRing, Ring, SdmaRing, bring_up, dma_data,
                                         expect_error, ib, lo_hi, pm4, pm4_packets, release_mem, sdma, wait_mem,
                                         write_data)


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
            level = {"IB2": "IB2", "CHAIN": "IB1"}.get(name, "RING")
            if name in ("IB2", "CHAIN"):  # (on slow memory the IB's fetch may take longer than 60 cycles)
                g.until(lambda: g.read(ring.status) & 1 or g.fields(ring.status)["LEVEL"] == g.level[level],
                        f"queue {q} in its {level}", cycles=4000, step=4)
            run, st0 = g.read(ring.status), g.fields("STATUS")
            g.set("CP_QUEUE_RESET", **{f"Q{q}": 1})
            what = f"queue {q} reset during {name}"
            if not run & 1:  # (on the RTL; the model runs a doorbell's packets before the next MMIO)
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


def check_a_queue_stopped_at_any_point_of_its_parked_poll_shows_no_waiting(dev):
    """The doorbell error of check_doorbell_errors_while_an_ib_waits at every cycle of one
    park-and-poll period (on the RTL two polling queues yield to each other, each parked in
    turn, about 48 cycles a round on a 64-bit bus): wherever it lands, the stopped queue
    reads WAITING 0 beside ERROR. On the RTL a queue swapped back in with its poll parked,
    not yet polling again, kept its park with the error: WAITING 1 until its reset, in an
    8-cycle window of each round (delays 21-28 on Verilator at 64 bits; the check above hit
    it only at 128 and 256 bits), the model 0 (driver-writer-9). STATUS's WAITING now leaves
    out a queue's park once it is stopped by an error."""
    g, q0, ih = bring_up(dev, ring_log2=6)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    flag, flag1 = OUT + 0x40, OUT + 0x44
    g.w32(flag, [0])
    g.w32(flag1, [0])
    g.w32(IB1, wait_mem(flag, 1, 1, "EQ") + write_data(OUT, [0xAA]))
    g.w32(IB2, wait_mem(flag1, 1, 1, "EQ") + write_data(OUT + 4, [0xBB]))
    shown = []
    for d in range(56):  # (more than a round at every bus width the RTL is built for)
        q1.submit(ib(IB2, 12, VMID=5))
        g.waiting(q1.status)
        at = q0.wptr + 2
        q0.submit(pm4("NOP", [0]), ib(IB1, 12, VMID=3))
        g.waiting(q0.status)
        g.dev.delay(d)
        q0.doorbell(at + q0.size + 1)  # DOORBELL_OVERFLOW
        st = g.idle(q0.status)
        g.dev.delay(100)
        later = g.fields(q0.status)
        if st["WAITING"] or later["WAITING"] or not later["ERROR"]:
            shown.append((d, st, later))
        expect_error(q0, ih, "DOORBELL_OVERFLOW", "RING", 0, at + q0.size + 1, at % q0.size)
        g.set("CP_QUEUE_RESET", Q0=1, Q1=1)
        g.idle(q0.status)
        g.idle(q1.status)
        q0.wptr = q1.wptr = 0
        assert not ih.pop()
    assert not shown, f"a stopped queue showed WAITING (delay after WAITING, at once, 100 cycles later): {shown}"


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
    # (1 KiB each up to a 64-bit bus, a bus beat's share of it wider: at 256 bits 1 KiB
    # fills ran in under 400 cycles, and the check measured nothing)
    size = 0x400 * max(1, (1 << g.fields("CAPS")["BUS_BYTES_LOG2"]) // 8)
    fills = [dma_data(big + size * k, 0x5A5A0000 + k, size, SRC_SEL="DATA", CP_SYNC=1) for k in range(8)]
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
    assert g.r32(big + size * 8 - 4) == 0x5A5A0007
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


CHECKS = [check_cp_queue_priority, check_entries_name_their_queue_and_vmid,
          check_queue_resets_at_once_halted_and_their_write_backs,
          check_equal_priority_turns_after_one_queue_ran_alone, check_queue_1_dma_status_and_queue_resets_during_it,
          check_queue_reset_while_each_packet_kind_runs, check_doorbell_errors_while_an_ib_waits,
          check_a_queue_stopped_at_any_point_of_its_parked_poll_shows_no_waiting,
          check_priority_written_while_both_queues_have_work_and_a_fast_poll,
          check_doorbell_error_of_the_queue_not_running_is_taken_at_once,
          check_poll_counters_count_each_queue_s_reads]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
