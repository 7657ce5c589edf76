"""The contract, checked by an outside driver writer (tests/model/contract_driver.py, from
the docs alone): what the driver's control registers do to work in flight. SOFT_RESET and
the per-queue resets (what they keep), CONTROL.HALT and SDMA_CNTL.HALT, a ring's ENABLE
cleared mid-stream, PERF_CLEAR, and STATUS.IDLE right after a doorbell.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract_driver import (IB1, IH_BASE, IH_WB, M32, OUT, PA_CODE, PA_OUT, PA_OUT2, PT_L1, RING, RING1,
                                         RPTR1_WB, RPTR_WB, SRING, SRPTR_WB, VA_CODE, VA_HOLE, VA_OUT, VA_RO, VALID,
                                         WRITEABLE, Gpu, IhRing, Ring, SdmaRing, bring_up, dma_data, ib, lo_hi,
                                         map_vmid1, release_mem, sdma, wait_mem, write_data)


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
    # The MMU is not reset: a translation cached before SOFT_RESET serves after it, so a PTE
    # changed without an invalidation still leads to the old page.
    g.w32(PA_CODE, write_data(VA_OUT + 0x60, [0x61]))
    ring.run(ib(VA_CODE, 5, VMID=1))
    assert g.r32(PA_OUT + 0x60) == 0x61
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE)
    g.set("CONTROL", SOFT_RESET=1)
    for s in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(s)
    g.write("IH_RPTR", 0)
    ih.rptr = ring.wptr = 0
    g.w32(PA_CODE, write_data(VA_OUT + 0x60, [0x62]))
    ring.run(ib(VA_CODE, 5, VMID=1))
    assert (g.r32(PA_OUT + 0x60), g.r32(PA_OUT2 + 0x60)) == (0x62, 0), "the TLB kept its entry"

def check_resets_keep_registers(dev):
    """SDMA_CNTL.QUEUE_RESET and CP_QUEUE_RESET.Qn keep the ring registers and leave the IH
    ring and the other queues alone; an SDMA doorbell while RB_ENABLE is clear or while the
    queue is stopped is ignored (SDMA_RB_WPTR keeps its value, no second error)."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.run(sdma("FENCE", DATA=0x91, **lo_hi("ADDR", OUT, 2)))
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0, RPTR_WRITEBACK_ENABLE=1)
    s.emit(sdma("FENCE", DATA=0x92, **lo_hi("ADDR", OUT, 2)))
    g.write("SDMA_DOORBELL", s.wptr)
    g.dev.delay(100)
    assert g.read("SDMA_RB_WPTR") == 16 and g.r32(OUT) == 0x91, "a doorbell with RB_ENABLE clear is ignored"
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
    s.submit([0x0000_0003])  # stops the queue
    g.idle("SDMA_STATUS")
    w, err = g.read("SDMA_RB_WPTR"), g.read("SDMA_ERROR")
    g.write("SDMA_DOORBELL", w - 4)  # would be DOORBELL_BACKWARDS: ignored while stopped
    g.dev.delay(50)
    assert (g.read("SDMA_RB_WPTR"), g.read("SDMA_ERROR")) == (w, err)
    ring_regs = ("SDMA_RB_BASE_LO", "SDMA_RB_CNTL", "SDMA_RB_RPTR_ADDR_LO", "SDMA_CNTL")
    before = {r: g.read(r) for r in ring_regs}
    g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
    q0.run(write_data(OUT + 4, [0xA0]))
    q1.run(write_data(OUT + 8, [0xA1]))
    ih_w = g.read("IH_WPTR")
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)  # (a write of SDMA_CNTL writes TRAP_ENABLE too)
    g.idle("SDMA_STATUS")
    assert {r: g.read(r) for r in ring_regs} == before and g.read("IH_WPTR") == ih_w
    assert (g.read("SDMA_RB_RPTR"), g.read("RB_RPTR"), g.read("CP_HQD1_RB_RPTR")) == (0, q0.wptr, q1.wptr)
    cp_regs = ("CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_SIZE", "CP_HQD1_RB_CNTL", "CP_HQD1_RB_RPTR_ADDR_LO")
    before = {r: g.read(r) for r in cp_regs}
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    assert {r: g.read(r) for r in cp_regs} == before and g.read("IH_WPTR") == ih_w
    assert (g.read("CP_HQD1_RB_RPTR"), g.read("CP_HQD1_RB_WPTR"), g.read("RB_RPTR")) == (0, 0, q0.wptr)

def check_perf_clear_clears_every_counter(dev):
    """CONTROL.PERF_CLEAR: every PERF_* register docs/registers.md lists reads 0 after it, once
    the CP (both queues, DMA, a translated IB) and the SDMA (an IB polling, LEVEL IB1) have run;
    an SDMA rptr write-back address ignores its bits 1:0."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    s = SdmaRing(g, SRING, 6, SRPTR_WB | 3)  # (its write-back address with bits 1:0 set)
    g.w32(PA_CODE, write_data(VA_OUT, [1]))
    q0.run(ib(VA_CODE, 5, VMID=1), dma_data(0x200000, 0x100000, 64, CP_SYNC=1))
    q1.run(write_data(OUT, [2]))
    flag = OUT + 0x10
    g.w32(flag, [0])
    g.w32(IB1, sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                    RETRY_COUNT=0xFFF, INTERVAL=1))
    s.submit(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", 0x300000)),
             sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1, 5), IB_SIZE=6))
    st = g.waiting("SDMA_STATUS")
    assert (st["WAITING"], st["LEVEL"]) == (1, g.level["IB1"]), st
    g.w32(flag, [1])
    g.idle("SDMA_STATUS")
    assert g.r32(SRPTR_WB) == s.wptr == 4 * 13
    perf = [r for r in g.regs.values() if r.name.startswith("PERF_")]
    assert len(perf) >= 15
    assert any(g.read(r.name, i) for r in perf for i in range(r.count)), "nothing was counted"
    g.set("CONTROL", PERF_CLEAR=1)
    left = {f"{r.name}[{i}]": g.read(r.name, i) for r in perf for i in range(r.count)}
    assert not any(left.values()), {k: v for k, v in left.items() if v}

def check_halts_stop_at_a_packet_boundary(dev):
    """CONTROL.HALT and SDMA_CNTL.HALT stop their engine before its next packet: a wait in
    progress finishes first (HALTED 0 meanwhile, then 1, rptr past the wait), the next packet
    waits for the halt's end; CONTROL.HALT holds queue 1 too (its doorbell still counts)."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6)
    flag = OUT + 0x40
    g.w32(flag, [0])
    q0.submit(wait_mem(flag, 1, 1, "EQ"), write_data(OUT, [5]))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1), sdma("FENCE", DATA=6, **lo_hi("ADDR", OUT + 4, 2)))
    g.waiting()
    g.waiting("SDMA_STATUS")
    g.set("CONTROL", HALT=1)
    g.set("SDMA_CNTL", HALT=1)
    g.dev.delay(200)
    for status in ("STATUS", "SDMA_STATUS"):
        st = g.fields(status)
        assert (st["WAITING"], st["HALTED"], st["IDLE"]) == (1, 0, 0), f"{status} {st}"
    q1.submit(write_data(OUT + 8, [7]))  # queue 1 cannot run while the CP is halted:
    g.dev.delay(300)  # queue 0's wait must not yield to it (it did on the RTL, and stayed undone)
    assert g.fields("STATUS")["WAITING"] == 1
    g.w32(flag, [1])
    g.until(lambda: g.fields("STATUS")["HALTED"] and g.fields("SDMA_STATUS")["HALTED"], "both HALTED")
    g.dev.delay(200)
    assert (g.read("RB_RPTR"), g.read("SDMA_RB_RPTR")) == (7, 24), "rptr past the waits"
    assert g.r32(OUT, 3) == [0, 0, 0], "nothing after the halt"
    assert (g.read("CP_HQD1_RB_WPTR"), g.fields("CP_HQD1_STATUS")["IDLE"]) == (5, 0)
    g.set("CONTROL", HALT=0)
    g.set("SDMA_CNTL", HALT=0)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    g.idle("SDMA_STATUS")
    assert g.r32(OUT, 3) == [5, 6, 7]
    assert (g.fields("STATUS")["HALTED"], g.fields("SDMA_STATUS")["HALTED"]) == (0, 0)

def check_halted_shows_while_the_other_queue_is_stopped_by_an_error(dev):
    """CONTROL.HALT with queue 1 stopped by an error and queue 0 idle: STATUS.HALTED reads 1
    (the CP has stopped), as with queue 1 idle. On the RTL it stayed 0: the parser sat in its
    error state for queue 1, which never showed the halt, so a driver that halts the CP and
    waits for HALTED (as the checks above do) hung after any queue-1 error until queue 0 got
    work. A WAIT_REG_MEM of queue 1 in progress keeps HALTED 0 until it finishes (the model
    showed HALTED at once). Queue 0's own error shows ERROR, not HALTED (it is stopped by
    its error)."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    q1.submit([0xC0001100, 0])  # opcode 0x11: ILLEGAL_OPCODE stops queue 1
    assert g.idle("CP_HQD1_STATUS")["ERROR"] == 1
    g.set("CONTROL", HALT=1)
    st = g.until(lambda: (lambda s: s if s["HALTED"] else None)(g.fields("STATUS")), "STATUS.HALTED", cycles=2000)
    assert (st["ERROR"], st["IDLE"], st["RB_EMPTY"]) == (0, 1, 1), st
    q0.submit(write_data(OUT + 0x60, [0x61]))
    g.dev.delay(200)
    assert g.r32(OUT + 0x60) == 0 and g.fields("STATUS")["HALTED"] == 1, "nothing runs while halted"
    g.set("CONTROL", HALT=0)
    assert g.idle()["HALTED"] == 0 and g.r32(OUT + 0x60) == 0x61
    assert g.fields("CP_HQD1_STATUS")["ERROR"] == 1, "queue 1 stays stopped"
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    q1.wptr = 0
    # Queue 1's wait in progress is a packet in hand: HALTED reads 0 until it finishes (the
    # model showed HALTED at once, from queue 0's state alone).
    flag = OUT + 0x64
    g.w32(flag, [0])
    q1.submit(wait_mem(flag, 1, 1, "EQ"), write_data(OUT + 0x68, [0x69]))
    g.waiting("CP_HQD1_STATUS")
    g.set("CONTROL", HALT=1)
    g.dev.delay(200)
    assert (g.fields("STATUS")["HALTED"], g.fields("CP_HQD1_STATUS")["WAITING"]) == (0, 1), "a wait in hand"
    g.w32(flag, [1])
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED after queue 1's wait")
    assert g.r32(OUT + 0x68) == 0 and g.read("CP_HQD1_RB_RPTR") == 7, "the wait done, nothing after it"
    g.set("CONTROL", HALT=0)
    g.idle("CP_HQD1_STATUS")
    assert g.r32(OUT + 0x68) == 0x69
    # A bad doorbell while the CP is halted stops its queue at once (hardware.md: a doorbell
    # error is latched at once), whichever queue ran last: on the RTL the queue the parser
    # did not hold kept its error pending, IDLE 0 and no IH entry, until HALT was cleared.
    for bad, last in ((q1, q0), (q0, q1)):
        last.run(write_data(OUT + 0x6C, [0]))  # the parser holds `last`'s queue
        g.set("CONTROL", HALT=1)
        g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
        ih.pop()
        bad.doorbell(bad.wptr + 1000)  # more than the ring ahead: DOORBELL_OVERFLOW
        st = g.until(lambda: (lambda s: s if s["IDLE"] else None)(g.fields(bad.status)),
                     f"{bad.status}.IDLE while halted", cycles=2000)
        assert st["ERROR"] == 1 and g.fields(bad.error)["CODE"] == g.err["DOORBELL_OVERFLOW"], st
        (e,) = g.until(lambda: ih.pop() or None, "the CP_ERROR entry while halted", cycles=2000)
        assert (ih.source(e), e["RING_ID"]) == ("CP_ERROR", 0 if bad is q0 else 1), e
        g.set("CONTROL", HALT=0)
        g.set("CP_QUEUE_RESET", **{"Q0" if bad is q0 else "Q1": 1})
        g.idle(bad.status)
        bad.wptr = 0
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    q0.submit([0xC0001200, 0])
    assert g.idle()["ERROR"] == 1
    g.set("CONTROL", HALT=1)
    g.dev.delay(200)
    st = g.fields("STATUS")
    assert (st["ERROR"], st["HALTED"], st["IDLE"]) == (1, 0, 1), st
    g.set("CONTROL", HALT=0)
    ih.pop()


def check_partial_doorbells_overflow_and_control_writes(dev):
    """Corners docs/hardware.md spells out for a driver: a doorbell written in part takes its
    other bytes from the register's last write, which an ignored write sets and neither
    CP_QUEUE_RESET nor SOFT_RESET clears; an IH entry dropped by a full ring still sets its
    event bit (EOP, CP_ERROR), and an IH_RPTR ahead of IH_WPTR drops every entry until it is
    written back; the write that sets CONTROL.SOFT_RESET writes HALT too."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 3, IH_WB)  # one entry
    q0 = Ring(g, RING, 10, RPTR_WB)
    db = g.regs["RB_DOORBELL"].addr()
    q0.submit(*[[0xFFFF1000]] * 0x105)
    g.idle()
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    q0.wptr = 0
    q0.emit(*[[0xFFFF1000]] * 3)
    g.dev.mmio_write_bytes(db, bytes([3]))  # byte 1 comes from the last write, 0x105: 0x103
    st = g.idle()
    assert (g.read("RB_WPTR"), st["ERROR"]) == (0x103, 0), "a partial doorbell after CP_QUEUE_RESET"
    g.set("CONTROL", SOFT_RESET=1)
    g.idle()
    g.write("IH_RPTR", 0)
    g.set("RB_CNTL", ENABLE=0, RPTR_WB=1)
    g.write("RB_DOORBELL", 0x800)  # ignored, yet the register's last write
    g.set("RB_CNTL", ENABLE=1, RPTR_WB=1)
    assert g.read("RB_WPTR") == 0
    g.dev.mmio_write_bytes(db, bytes([3]))  # 0x803: more than the 1024-dword ring
    st = g.idle()
    assert (g.fields("CP_ERROR")["CODE"], g.read("CP_ERROR_ADDR_LO"), st["ERROR"]) == \
        (g.err["DOORBELL_OVERFLOW"], 0x803, 1), "an ignored write counts, and SOFT_RESET keeps it"
    g.write("RB_DOORBELL", 0)
    g.set("CONTROL", SOFT_RESET=1)
    g.idle()
    g.write("IH_RPTR", 0)
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, CP_ERROR=1, IH_OVERFLOW=1))
    q0.wptr = 0
    ih.rptr = 0
    q0.run(release_mem(OUT, 1, INT_SEL="SEND_INT", INT_CTXID=1))  # fills the one-entry ring
    g.until(lambda: g.read("IH_WPTR") == 32, "the first entry")
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    q0.run(release_mem(OUT, 2, INT_SEL="SEND_INT", INT_CTXID=2))
    g.dev.delay(100)
    f = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), f["IH_OVERFLOW"], f["EOP"]) == (32, 1, 1), "a dropped EOP entry still sets EOP"
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, IH_OVERFLOW=1))
    q0.submit([0xC0001100, 0])
    g.idle()
    g.dev.delay(100)
    f = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), f["IH_OVERFLOW"], f["CP_ERROR"]) == (32, 1, 1), "and a dropped error CP_ERROR"
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    q0.wptr = 0
    g.write("IH_RPTR", 0x1000)  # ahead of IH_WPTR: full
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, CP_ERROR=1, IH_OVERFLOW=1))
    q0.run(release_mem(OUT, 3, INT_SEL="SEND_INT", INT_CTXID=3))
    g.dev.delay(100)
    assert (g.read("IH_WPTR"), g.fields("INT_STATUS")["IH_OVERFLOW"]) == (32, 1)
    g.write("IH_RPTR", 32)
    q0.run(release_mem(OUT, 4, INT_SEL="SEND_INT", INT_CTXID=4))
    g.until(lambda: g.read("IH_WPTR") == 64, "the entry once IH_RPTR is back")
    assert ih.entry(32)["DATA0"] == 4
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")
    g.set("CONTROL", SOFT_RESET=1)  # HALT 0 in the same write
    g.idle()
    assert g.fields("CONTROL")["HALT"] == 0 and g.fields("STATUS")["HALTED"] == 0
    g.set("CONTROL", HALT=1, SOFT_RESET=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED after a reset that keeps HALT")
    assert g.fields("CONTROL")["HALT"] == 1
    g.set("CONTROL", HALT=0)


def check_idle_reads_0_until_a_doorbell_is_taken(dev):
    """A read of STATUS, CP_HQD1_STATUS or SDMA_STATUS right after its queue's doorbell sees
    IDLE 0 unless the new work is already done (a driver polling IDLE never sees its job as
    finished before it started), at every spacing from the previous job; a doorbell error
    reads IDLE 0 until ERROR is set."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6)
    queues = (("STATUS", lambda v: q0.submit(write_data(OUT, [v]))),
              ("CP_HQD1_STATUS", lambda v: q1.submit(write_data(OUT, [v]))),
              ("SDMA_STATUS", lambda v: s.submit(sdma("FENCE", DATA=v, **lo_hi("ADDR", OUT, 2)))))
    for k in range(1, 24):
        for i, (status, submit) in enumerate(queues):
            g.dev.delay(k)
            v = k << 8 | i
            submit(v)
            st = g.fields(status)
            assert not st["IDLE"] or g.r32(OUT) == v, f"{status} read IDLE before its job ran ({k} cycles apart)"
            g.idle(status)
    q0.doorbell(q0.wptr + 1000)
    st = g.fields("STATUS")
    assert not st["IDLE"] or st["ERROR"], st
    g.idle()
    assert g.fields("CP_ERROR")["CODE"] == g.err["DOORBELL_OVERFLOW"]

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



# ---------------------------------------------------------------------------- the IH ring (round 3)

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



def check_halted_holds_while_the_halted_cp_takes_a_doorbell_error_or_an_entry(dev):
    """While CONTROL.HALT holds and no packet is in hand, STATUS.HALTED reads 1 at every read,
    whatever the parser does meanwhile without a packet: latch a doorbell error of the queue
    it did not hold (a switch to that queue, the error's drain and its IH entry), switch to a
    queue given work while the other is stopped, or write the SDMA's IH entries. On the RTL it
    read 0 for each of those (about 18 cycles for the doorbell error, 6 reads back to back; 2-3
    for the switch; the IH write's time for each SDMA entry), so a driver that halts and then
    checks HALTED could find a CP that seemed to run. A doorbell error of queue 0 then shows
    ERROR (STATUS is queue 0's): HALTED or ERROR at every read, never neither."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 8)

    def reads(n=40):
        return [g.fields("STATUS") for _ in range(n)]

    def halt():
        g.set("CONTROL", HALT=1)
        g.until(lambda: g.fields("STATUS")["HALTED"], "STATUS.HALTED")

    # queue 0 ran last; queue 1's doorbell error while halted
    q0.run(write_data(OUT, [1]))
    halt()
    q1.doorbell(q1.wptr + 1000)
    seen = reads()
    assert all(st["HALTED"] for st in seen), [st["HALTED"] for st in seen]
    st1 = g.idle("CP_HQD1_STATUS")
    assert st1["ERROR"] == 1 and g.fields("STATUS")["HALTED"] == 1
    (e,) = g.until(lambda: ih.pop() or None, "the CP_ERROR entry")
    assert (ih.source(e), e["RING_ID"]) == ("CP_ERROR", 1)
    # queue 1 stopped, queue 0 given work while halted: the CP switches to it and starts nothing
    q0.submit(write_data(OUT + 4, [2]))
    seen = reads()
    assert all(st["HALTED"] for st in seen) and g.r32(OUT + 4) == 0, [st["HALTED"] for st in seen]
    # the SDMA's entries, written by the CP's IH writer while the CP is halted
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.submit(*[sdma("TRAP", INT_CONTEXT=k) for k in range(6)])
    seen = reads(60)
    assert all(st["HALTED"] for st in seen), [st["HALTED"] for st in seen]
    entries = []
    g.until(lambda: entries.extend(ih.pop()) or len(entries) >= 6, "six TRAP entries")
    assert [e["DATA0"] for e in entries] == list(range(6)) and g.r32(OUT + 4) == 0
    g.set("CONTROL", HALT=0)
    g.idle()
    assert g.r32(OUT + 4) == 2
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    q1.wptr = 0
    g.write("INT_STATUS", M32)
    # queue 1 ran last; queue 0's doorbell error while halted: HALTED until ERROR shows
    q1.run(write_data(OUT + 8, [3]))
    halt()
    q0.doorbell(q0.wptr + 1000)
    seen = reads()
    assert all(st["HALTED"] or st["ERROR"] for st in seen), [(st["HALTED"], st["ERROR"]) for st in seen]
    st = g.idle()
    assert (st["ERROR"], st["HALTED"]) == (1, 0), st
    g.set("CONTROL", HALT=0)
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()



def check_sdma_entry_waits_for_the_cp_packet_in_hand(dev):
    """docs/hardware.md (the SDMA's timing on the RTL): the CP's IH writer takes the SDMA's
    entries between CP packets, so a TRAP raised while the CP runs a DMA_DATA with CP_SYNC
    waits for it, and the SDMA with it (the FENCE after the TRAP is not written meanwhile); if
    IH_CNTL.ENABLE is cleared before the writer takes the entry, the entry is dropped as any
    entry that comes while the ring is disabled, though its TRAP ran while it was enabled. The
    model, without time, takes it at once. Returns what the driver saw."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 8)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    ring.submit(dma_data(0x1000000, 0x1, 1 << 16, SRC_SEL="DATA", CP_SYNC=1), write_data(OUT + 4, [0x65]))
    g.dev.delay(50)
    s.submit(sdma("TRAP", INT_CONTEXT=5), sdma("FENCE", DATA=0x64, **lo_hi("ADDR", OUT, 2)))
    g.dev.delay(200)
    taken = g.read("IH_WPTR") == 32
    waited = g.fields("SDMA_STATUS")["IDLE"] == 0 and g.r32(OUT) == 0
    assert taken != waited and (g.r32(OUT + 4) == 0) == waited, (taken, waited, g.r32(OUT + 4))
    assert taken == (g.dev.name == "model"), "the RTL's CP runs the fill for 8,192 cycles and more"
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.until(lambda: g.r32(OUT + 4) == 0x65, "the CP's fill", cycles=1_000_000, step=1000)
    g.until(lambda: g.r32(OUT) == 0x64, "the SDMA's fence", cycles=20000)
    g.idle()
    g.idle("SDMA_STATUS")
    assert g.read("IH_WPTR") == (32 if taken else 0) and g.fields("INT_STATUS")["IH_OVERFLOW"] == 0
    assert g.fields("SDMA_STATUS")["ERROR"] == 0
    # SDMA_CNTL.QUEUE_RESET while a TRAP's entry waits: the entry is not withdrawn, the reset
    # is done once the CP's writer has taken (and written) it, after the CP's packet in hand
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    ih.pop()
    g.w32(OUT, [0, 0])
    ring.submit(dma_data(0x1000000, 0x2, 1 << 16, SRC_SEL="DATA", CP_SYNC=1), write_data(OUT + 4, [0x66]))
    g.dev.delay(50)
    s.submit(sdma("TRAP", INT_CONTEXT=6), sdma("FENCE", DATA=0x67, **lo_hi("ADDR", OUT, 2)))
    g.dev.delay(100)
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    resetting = g.fields("SDMA_STATUS")["IDLE"] == 0
    s.wptr = 0
    s.emit(sdma("FENCE", DATA=0x68, **lo_hi("ADDR", OUT + 8, 2)))
    g.write("SDMA_DOORBELL", s.wptr)  # while the reset waits (the RTL): ignored
    g.until(lambda: g.fields("SDMA_STATUS")["IDLE"], "the SDMA's reset", cycles=1_000_000, step=10)
    assert g.r32(0x1000000 + (1 << 16) - 4) == 2, "the SDMA's reset was done before the CP's packet in hand"
    assert resetting == (g.dev.name != "model")
    g.dev.delay(50)
    assert (g.read("SDMA_RB_WPTR"), g.r32(OUT + 8)) == ((0, 0) if resetting else (16, 0x68))
    assert [(ih.source(e), e["DATA0"]) for e in ih.pop()] == [("SDMA_TRAP", 6)], "the entry, once"
    if not resetting:  # (the model: reset at once, the doorbell taken; start the ring again)
        g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
        g.idle("SDMA_STATUS")
    s.wptr = 0
    s.run(sdma("TRAP", INT_CONTEXT=7))
    (e,) = g.until(lambda: ih.pop() or None, "the next TRAP")
    assert e["DATA0"] == 7
    return {"taken_at_once": taken}


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


def check_error_address_and_offset_clear_with_the_error(dev):
    """Each queue's whole error state goes with its reset: CP_ERROR_ADDR_LO/HI and
    CP_ERROR_OFFSET (queue 1's CP_HQD1_*, the SDMA's SDMA_ERROR_*) read 0 again after the
    queue reset that clears CP_ERROR, and after CONTROL.SOFT_RESET, as the error register
    does: a driver reading them finds no stale address of an error already handled."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6)
    names = [f"{e}{r}" for e in ("CP_ERROR", "CP_HQD1_ERROR", "SDMA_ERROR") for r in ("", "_ADDR_LO", "_ADDR_HI",
                                                                                       "_OFFSET")]
    for reset in ("queue resets", "SOFT_RESET"):
        far = 0xABCD_0000_0010 if reset == "SOFT_RESET" else 0x1234_0000_0020  # beyond memory: DECERR
        q0.submit([0xFFFF1000, 0xFFFF1000], write_data(far, [1]))
        q1.submit([0xFFFF1000], write_data(far + 4, [2]))
        s.submit([0], sdma("FENCE", DATA=3, **lo_hi("ADDR", far + 8, 2)))
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            assert g.idle(st)["ERROR"] == 1, st
        got = {n: g.read(n) for n in names}
        assert [got[f"{e}_ADDR_HI"] << 32 | got[f"{e}_ADDR_LO"] for e in ("CP_ERROR", "CP_HQD1_ERROR", "SDMA_ERROR")] \
            == [far, far + 4, far + 8] and [got[f"{e}_OFFSET"] for e in ("CP_ERROR", "CP_HQD1_ERROR", "SDMA_ERROR")] \
            == [(q0.wptr - 5) % 256, (q1.wptr - 5) % 256, (s.wptr // 4 - 4) % 64], got
        g.until(lambda: g.read("IH_WPTR") - ih.rptr >= 96, "the three error entries")
        ih.pop()
        if reset == "SOFT_RESET":
            g.set("CONTROL", SOFT_RESET=1)
        else:
            g.set("CP_QUEUE_RESET", Q0=1, Q1=1)
            g.set("SDMA_CNTL", QUEUE_RESET=1)
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            g.idle(st)
        assert {n: g.read(n) for n in names} == dict.fromkeys(names, 0), f"after the {reset}: " + \
            str({n: hex(g.read(n)) for n in names if g.read(n)})
        q0.wptr = q1.wptr = s.wptr = 0
        if reset == "SOFT_RESET":
            g.write("IH_RPTR", 0)
            ih.rptr = 0


def check_tlb_and_dma_busy_counters(dev):
    """The counters of the TLB and of the DMA engine's time (docs/hardware.md, Counters and
    time; registers.md): on the RTL an IB of VMID 1 that fetches one page and writes another
    misses twice (PERF_TLB_MISSES 2, PERF_WALK_CYCLES > 0), the same IB again hits (HITS up,
    MISSES and WALK_CYCLES kept), after an invalidation of VMID 1 it misses twice again, and
    an untranslated VMID's work (VMID 3, the kernel ring) counts nothing; the model has no
    TLB and reads 0 for all three. PERF_DMA_BUSY_CYCLES grows by at least the bus beats a
    fill writes (the model: exactly ceil(bytes / bus bytes))."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    model = dev.name == "model"
    g.set("CONTROL", PERF_CLEAR=1)
    tlb = lambda: tuple(g.read(r) for r in ("PERF_TLB_HITS", "PERF_TLB_MISSES", "PERF_WALK_CYCLES"))  # noqa: E731
    g.w32(PA_CODE, write_data(VA_OUT + 0x10, [0x51]))
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0 and g.r32(PA_OUT + 0x10) == 0x51
    hits, misses, walk = first = tlb()
    if model:
        assert first == (0, 0, 0), first
    else:
        assert misses == 2 and walk > 0, f"two pages, two misses: HITS, MISSES, WALK_CYCLES {first}"
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
    again = tlb()
    assert again == first if model else (again[0] >= hits + 2 and again[1:] == (misses, walk)), (first, again)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK")
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
    third = tlb()
    assert third == first if model else (third[1] == misses + 2 and third[2] > walk), (again, third)
    g.w32(IB1, write_data(OUT, [0x52]))
    ring.run(ib(IB1, 5, VMID=3), write_data(OUT + 4, [0x53]))  # VMID 3: not translated
    assert tlb() == third and g.r32(OUT, 2) == [0x52, 0x53], (third, tlb())
    beat = 1 << g.fields("CAPS")["BUS_BYTES_LOG2"]
    busy = g.read("PERF_DMA_BUSY_CYCLES")
    assert busy == 0, "no transfer since PERF_CLEAR"
    ring.run(dma_data(0x200000, 0x55, 0x1000, SRC_SEL="DATA", CP_SYNC=1))
    busy = g.read("PERF_DMA_BUSY_CYCLES")
    assert busy == 0x1000 // beat if model else busy >= 0x1000 // beat, f"PERF_DMA_BUSY_CYCLES {busy}"
    g.set("CONTROL", PERF_CLEAR=1)
    assert tlb() == (0, 0, 0) and g.read("PERF_DMA_BUSY_CYCLES") == 0


def check_timestamp_runs_on_through_perf_clear_and_soft_reset(dev):
    """TIMESTAMP is the GPU clock, not a performance counter: CONTROL.PERF_CLEAR (which
    clears every PERF_* counter) and CONTROL.SOFT_RESET leave it running, so a driver's
    timestamps (RELEASE_MEM's, the IH entries') stay monotonic across both."""
    g = Gpu(dev)

    g.dev.delay(100)
    t0 = g.timestamp()
    assert t0 >= 100, t0
    g.set("CONTROL", PERF_CLEAR=1)
    t1 = g.timestamp()
    g.set("CONTROL", SOFT_RESET=1)
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(st)
    t2 = g.timestamp()
    g.dev.delay(10)
    t3 = g.timestamp()
    assert t0 <= t1 <= t2 and t3 - t2 >= 10, (t0, t1, t2, t3)


def check_soft_reset_leaves_sdma_cntl_a_halted_sdma_stays_halted(dev):
    """CONTROL.SOFT_RESET resets the SDMA queue (pointers, error) and, SDMA_CNTL being a
    control register it does not write, leaves its HALT and TRAP_ENABLE as they were
    (docs/hardware.md, registers.md): a halted SDMA is still halted after the reset (its
    STATUS reads HALTED and IDLE), takes a doorbell and runs nothing until HALT is cleared, and
    its TRAP still raises an entry. (CONTROL.HALT is written by the reset's own write.)"""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    s.run(sdma("FENCE", DATA=0x1, **lo_hi("ADDR", OUT, 2)))
    g.set("SDMA_CNTL", HALT=1, TRAP_ENABLE=1)
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED")
    g.set("CONTROL", SOFT_RESET=1)
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(st)
    assert g.fields("SDMA_CNTL") == {"QUEUE_RESET": 0, "HALT": 1, "TRAP_ENABLE": 1}, g.fields("SDMA_CNTL")
    st = g.fields("SDMA_STATUS")
    assert (st["HALTED"], st["IDLE"], st["ERROR"], g.read("SDMA_RB_RPTR"), g.read("SDMA_RB_WPTR")) == (1, 1, 0, 0, 0), st
    assert g.fields("CONTROL")["HALT"] == 0
    s.wptr = 0
    ih.rptr = 0
    g.write("IH_RPTR", 0)
    s.submit(sdma("FENCE", DATA=0x2, **lo_hi("ADDR", OUT + 4, 2)), sdma("TRAP", INT_CONTEXT=0x77))
    g.dev.delay(300)
    st = g.fields("SDMA_STATUS")
    assert (st["HALTED"], st["IDLE"], g.read("SDMA_RB_WPTR"), g.read("SDMA_RB_RPTR")) == (1, 0, s.wptr, 0), st
    assert g.r32(OUT + 4) == 0 and g.read("IH_WPTR") == 0, "the halted SDMA ran nothing"
    ring.wptr = 0
    ring.run(write_data(OUT + 8, [0x3]))
    assert g.r32(OUT + 8) == 0x3, "the CP runs beside the halted SDMA"
    g.set("SDMA_CNTL", HALT=0, TRAP_ENABLE=1)
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 4) == 0x2
    (e,) = g.until(lambda: ih.pop() or None, "the TRAP's entry")
    assert (ih.source(e), e["DATA0"]) == ("SDMA_TRAP", 0x77), e


def check_counters_survive_every_reset_but_perf_clear(dev):
    """The PERF_* counters are cleared by CONTROL.PERF_CLEAR only (docs/hardware.md, Errors):
    CP_QUEUE_RESET of both queues, SDMA_CNTL.QUEUE_RESET and CONTROL.SOFT_RESET leave every
    counter of events as it was (packets, dwords, bytes, polls, the TLB's), and the counters
    of time go on from where they were, never back."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    g.set("CONTROL", PERF_CLEAR=1)
    g.w32(PA_CODE, write_data(VA_OUT, [1]))
    flag = OUT + 0x10
    g.w32(flag, [1])
    q0.run(ib(VA_CODE, 5, VMID=1), dma_data(0x200000, 0x100000, 64, CP_SYNC=1), wait_mem(flag, 1, 1, "EQ"))
    q1.run(write_data(OUT, [2]), wait_mem(flag, 1, 1, "EQ"))
    s.run(sdma("COPY_LINEAR", COUNT=63, **lo_hi("SRC_ADDR", 0x100000), **lo_hi("DST_ADDR", 0x300000)),
          sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
               RETRY_COUNT=0xFFF, INTERVAL=1))
    perf = [(r.name, i) for r in g.regs.values() if r.name.startswith("PERF_") for i in range(r.count)]
    time = {"PERF_BUSY_CYCLES", "PERF_STALL_CYCLES", "PERF_DMA_BUSY_CYCLES", "PERF_SDMA_BUSY_CYCLES",
            "PERF_WALK_CYCLES"}
    before = {k: g.read(*k) for k in perf}
    assert before[("PERF_Q0_POLLS", 0)] == before[("PERF_Q1_POLLS", 0)] == 1 and before[("PERF_SDMA_BYTES_WRITTEN", 0)] == 64
    for reg, fields in (("CP_QUEUE_RESET", {"Q0": 1, "Q1": 1}), ("SDMA_CNTL", {"QUEUE_RESET": 1}),
                        ("CONTROL", {"SOFT_RESET": 1})):
        g.set(reg, **fields)
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            g.idle(st)
        after = {k: g.read(*k) for k in perf}
        changed = {f"{n}[{i}]": (before[(n, i)], v) for (n, i), v in after.items()
                   if (v < before[(n, i)] if n in time else v != before[(n, i)])}
        assert not changed, f"{reg} {fields} changed the counters: {changed}"
        before = after


def check_tlb_counters_count_a_faulting_walk_and_no_faulting_hit(dev):
    """PERF_TLB_MISSES counts every translation that walked, a walk ending in a fault too, and
    a failed translation is never kept, so the same faulting page walks and counts again;
    PERF_TLB_HITS counts the hits that passed, so a kept leaf lacking the permission (the
    PERMISSION fault's leaf, kept: docs/hardware.md, TLB) counts in neither, and neither does
    a RANGE fault (registers.md). Each IB of VMID 1 below is five dwords, its one access after
    one warm fetch; a reference IB writing a warm page gives the fetch's hits. On the RTL; the
    reference model has no TLB and reads 0."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    model = dev.name == "model"
    tlb = lambda: (g.read("PERF_TLB_HITS"), g.read("PERF_TLB_MISSES"))  # noqa: E731

    def run(va):
        g.w32(PA_CODE, write_data(va, [1]))
        a = tlb()
        ring.submit(ib(VA_CODE, 5, VMID=1))
        st = g.idle()
        b = tlb()
        if st["ERROR"]:
            g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
            g.set("CP_QUEUE_RESET", Q0=1)
            g.idle()
            ring.wptr = 0
            ih.pop()
        return (b[0] - a[0], b[1] - a[1]), g.fields("VM_FAULT_STATUS")["CAUSE"] if st["ERROR"] else None

    run(VA_OUT)  # VA_CODE and VA_OUT in the TLB
    (hits, misses), _ = run(VA_OUT)
    if model:
        assert tlb() == (0, 0)
        return
    assert misses == 0 and hits >= 2, (hits, misses)
    fetch = hits - 1
    cases = [("VA_RO, first", VA_RO, (fetch, 1)),  # walks, its leaf lacks WRITEABLE: a miss
             ("VA_RO, again", VA_RO, (fetch, 0)),  # the kept leaf: a hit that fails, neither
             ("VA_HOLE", VA_HOLE, (fetch, 1)),  # INVALID: walks
             ("VA_HOLE, again", VA_HOLE, (fetch, 1)),  # nothing kept: walks again
             ("beyond the reach", 1 << 31, (fetch, 0))]  # RANGE: neither
    for what, va, want in cases:
        got, cause = run(va)
        assert cause is not None, f"{what}: no fault"
        assert got == want, f"{what} (CAUSE {cause}): PERF_TLB_HITS, PERF_TLB_MISSES grew by {got}, expected {want}"
    assert run(VA_OUT)[0] == (hits, 0), "the warm page still hits"


CHECKS = [check_soft_reset_keeps_settings, check_resets_keep_registers, check_perf_clear_clears_every_counter,
          check_halts_stop_at_a_packet_boundary,
          check_halted_shows_while_the_other_queue_is_stopped_by_an_error,
          check_partial_doorbells_overflow_and_control_writes,
          check_idle_reads_0_until_a_doorbell_is_taken,
          check_ring_enable_pauses_at_a_packet_boundary, check_ring_base_and_size_are_locked_while_enabled,
          check_ring_enable_cleared_mid_packet_pauses_at_a_packet_boundary,
          check_rptr_write_back_address_is_locked_while_enabled,
          check_ih_wptr_write_back_address_is_locked_while_enabled,
          check_ih_entry_in_hand_when_enable_is_cleared_finishes,
          check_ih_ring_with_both_engines_odd_rptrs_and_enable, check_ring_and_ih_sizes_at_their_largest,
          check_halted_holds_while_the_halted_cp_takes_a_doorbell_error_or_an_entry,
          check_sdma_entry_waits_for_the_cp_packet_in_hand,
          check_ih_rptr_written_in_part_and_ahead_of_the_wptr,
          check_ih_ring_moved_and_resized_keeps_its_pointers,
          check_error_address_and_offset_clear_with_the_error, check_tlb_and_dma_busy_counters,
          check_timestamp_runs_on_through_perf_clear_and_soft_reset,
          check_soft_reset_leaves_sdma_cntl_a_halted_sdma_stays_halted,
          check_counters_survive_every_reset_but_perf_clear,
          check_tlb_counters_count_a_faulting_walk_and_no_faulting_hit]


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
