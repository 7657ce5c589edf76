"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): what the driver's control registers do to work in flight. Halts and
doorbells: CONTROL.HALT and SDMA_CNTL.HALT stop at a packet boundary, STATUS.HALTED while
the other queue is stopped by an error or the halted CP works without a packet, doorbells
written in part or overflowing, STATUS.IDLE right after a doorbell, the SDMA's entry waiting
for the CP's packet in hand, doorbells written while a reset drains a fill, a halted SDMA stopped by
its doorbell's error (resets and counters: test_contract_resets.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IH_BASE, IH_WB, M32, OUT, RING, RING1, RPTR1_WB, RPTR_WB, SRING,
                                         SRPTR_WB, Gpu, IhRing,
                                         Ring, SdmaRing, bring_up, dma_data, lo_hi, release_mem, sdma, wait_mem,
                                         write_data)


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


def check_doorbells_during_a_reset_are_ignored(dev):
    """docs/hardware.md: a queue's reset (CP_QUEUE_RESET.Qn, SDMA_CNTL.QUEUE_RESET) is done
    when its IDLE reads 1, and its doorbells before that are ignored; CONTROL.SOFT_RESET's
    parts (the CP with both queues, the SDMA) each ignore their doorbells until their own
    bursts are done. Each reset here catches a 64 KiB fill under way, then the driver rings
    the queue for one packet at the ring's start. A driver cannot tell from outside when the
    reset ended, so the check holds what must hold either way: a doorbell written after IDLE
    read 1 is taken; one ignored leaves the wptr as the reset made it, 0 (not the value
    written, later dropped), and its packet never runs; one taken shows its wptr at once and
    runs its packet once; no doorbell error either way; and rung again after IDLE, the packet
    runs. Returns (IDLE read before the doorbell, taken) per reset: on the RTL with the
    default memory every doorbell came during the reset and was ignored (Verilator 64 and 32
    bits, 7 December 2026); with slow memory some resets end first (the fill not yet
    started); the model's resets are at once."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 8)
    fill = 1 << 16
    cp_fill = dma_data(0x1000000, 0x1, fill, SRC_SEL="DATA", CP_SYNC=1)
    sdma_fill = sdma("CONSTANT_FILL", SRC_DATA=0x2, COUNT=fill - 1, **lo_hi("DST_ADDR", 0x1000000))

    def ring_during(reset, ring, status, wptr_reg, marker, busy):
        """`reset()` with `busy` under way; then `ring`'s doorbell for a WRITE_DATA (an SDMA
        FENCE) of `marker` at its start, the IB-less packet `status`'s IDLE follows."""
        ring.wptr = 0
        busy()
        g.dev.delay(50)
        reset()
        ring.wptr = 0
        at = OUT + 4 * (marker & 0xF)
        g.w32(at, [0])
        if ring is s:
            ring.emit(sdma("FENCE", DATA=marker, **lo_hi("ADDR", at, 2)))
        else:
            ring.emit(write_data(at, [marker]))
        pre = g.fields(status)["IDLE"]
        bell = (lambda: g.write("SDMA_DOORBELL", ring.wptr)) if ring is s else ring.doorbell
        bell()
        wp = g.read(wptr_reg)
        g.until(lambda: g.fields(status)["IDLE"], f"{status}.IDLE after the reset", cycles=1_000_000, step=10)
        g.dev.delay(100)
        got = (g.read(wptr_reg), g.r32(at))
        taken = got == (ring.wptr, marker)
        assert taken or got == (0, 0), f"{marker:#x}: wptr, marker {got}: neither taken nor ignored"
        assert taken or pre == 0, f"{marker:#x}: a doorbell written after IDLE read 1 was ignored"
        assert (wp == ring.wptr) == taken, f"{marker:#x}: wptr {wp:#x} right after the doorbell, taken {taken}"
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            assert g.fields(st)["ERROR"] == 0, (marker, st, g.fields(st))
        if not taken:
            bell()
            g.until(lambda: g.r32(at) == marker, f"{marker:#x} rung again after IDLE")
        g.idle(status)
        reset()  # the pointers back to 0 for the next round
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            g.idle(st)
        q0.wptr = q1.wptr = s.wptr = 0
        return pre, taken

    seen = {}
    for name, reset, ring, status, wptr_reg, marker, busy in (
            ("CP_QUEUE_RESET.Q0", lambda: g.set("CP_QUEUE_RESET", Q0=1), q0, "STATUS", "RB_WPTR", 0xD0,
             lambda: q0.submit(cp_fill)),
            ("CP_QUEUE_RESET.Q1", lambda: g.set("CP_QUEUE_RESET", Q1=1), q1, "CP_HQD1_STATUS", "CP_HQD1_RB_WPTR",
             0xD1, lambda: q1.submit(cp_fill)),
            ("SDMA_CNTL.QUEUE_RESET", lambda: g.set("SDMA_CNTL", QUEUE_RESET=1), s, "SDMA_STATUS", "SDMA_RB_WPTR",
             0xD2, lambda: s.submit(sdma_fill))):
        seen[name] = ring_during(reset, ring, status, wptr_reg, marker, busy)
    # CONTROL.SOFT_RESET with each engine's fill under way: each part's own doorbell
    for name, ring, status, wptr_reg, marker, busy in (
            ("SOFT_RESET, queue 0", q0, "STATUS", "RB_WPTR", 0xD3, lambda: q0.submit(cp_fill)),
            ("SOFT_RESET, queue 1", q1, "CP_HQD1_STATUS", "CP_HQD1_RB_WPTR", 0xD4, lambda: q1.submit(cp_fill)),
            ("SOFT_RESET, SDMA", s, "SDMA_STATUS", "SDMA_RB_WPTR", 0xD5, lambda: s.submit(sdma_fill)),
            # the CP's part is both queues': queue 0's doorbell while queue 1's fill drains
            # (STATUS.IDLE may read 1 then: the one IDLE that tells is CP_HQD1_STATUS's)
            ("SOFT_RESET, queue 0 while queue 1 drains", q0, "CP_HQD1_STATUS", "RB_WPTR", 0xD6,
             lambda: q1.submit(cp_fill))):
        seen[name] = ring_during(lambda: g.set("CONTROL", SOFT_RESET=1), ring, status, wptr_reg, marker, busy)
    assert g.read("IH_WPTR") == 0, "no entry was raised"
    if g.dev.name == "model":
        assert all(v == (1, True) for v in seen.values()), seen
    return seen


def check_a_halted_sdma_stopped_by_its_doorbell_shows_error_not_halted(dev):
    """docs/hardware.md (The SDMA copy engine): "A halted SDMA still takes its doorbell's
    checks: stopped by an error, SDMA_STATUS shows ERROR and reads HALTED 0 (as STATUS does
    for queue 0), so a driver that halts the SDMA waits for HALTED or ERROR." A halted SDMA
    takes a good doorbell (SDMA_RB_WPTR moves, nothing runs: HALTED 1, IDLE 0); then a
    DOORBELL_BACKWARDS and, after a reset, a DOORBELL_OVERFLOW, each with that work pending:
    every read shows HALTED or ERROR (while the error drains, IDLE 0, both can: on the RTL the
    first read after the doorbell's response), and once SDMA_STATUS reads ERROR and IDLE
    (stopped) it reads HALTED 0 at every read; SDMA_ERROR holds the doorbell's code with LEVEL
    RING, OP 0, ADDR the value with bits 1:0 cleared and OFFSET the rptr in dwords, the
    SDMA_ERROR entry's VMID is 0, and the pending FENCE never runs. SDMA_CNTL.QUEUE_RESET written with HALT kept leaves the queue
    idle, empty and HALTED again (pointers 0); once HALT is cleared the work given after the
    reset runs."""
    g, q0, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)  # 64 dwords: 256 bytes
    s.run(sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2)))
    g.set("SDMA_CNTL", HALT=1)
    g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED")
    err = g.regs["SDMA_ERROR"]
    for k, code in enumerate(("DOORBELL_BACKWARDS", "DOORBELL_OVERFLOW")):
        fence = OUT + 0x10 + 4 * k
        s.submit(sdma("FENCE", DATA=0x20 + k, **lo_hi("ADDR", fence, 2)))
        g.dev.delay(100)
        st = g.fields("SDMA_STATUS")
        assert (g.read("SDMA_RB_WPTR"), st["HALTED"], st["IDLE"], st["ERROR"], g.r32(fence)) == \
            (s.wptr, 1, 0, 0, 0), f"a good doorbell of a halted SDMA: {st}"
        rptr = g.read("SDMA_RB_RPTR")
        bad = (s.wptr - 4 if code == "DOORBELL_BACKWARDS" else rptr + 4 * 64 + 4) | 3  # bits 1:0 ignored
        g.write("SDMA_DOORBELL", bad)
        seen = []  # (HALTED, ERROR, IDLE) at each read, until stopped and 20 reads more
        for _ in range(2000):  # (a bound: slow memory drains for longer)
            f = g.fields("SDMA_STATUS")
            seen.append((f["HALTED"], f["ERROR"], f["IDLE"]))
            if seen[-20:] == [(0, 1, 1)] * 20:
                break
        assert seen[-1] == (0, 1, 1), f"{code} of a halted SDMA: not stopped with ERROR, HALTED 0: {seen}"
        assert all(h or e for h, e, _ in seen), f"{code}: a read showed neither HALTED nor ERROR: {seen}"
        stopped = next(k for k, (_, e, i) in enumerate(seen) if e and i)
        assert all(x == (0, 1, 1) for x in seen[stopped:]), f"{code}: HALTED again once stopped: {seen}"
        e = err.fields
        word = g.read("SDMA_ERROR")
        got = (e["CODE"].get(word), e["LEVEL"].get(word), e["OP"].get(word), e["SUB_OP"].get(word),
               g.read("SDMA_ERROR_ADDR_LO"), g.read("SDMA_ERROR_ADDR_HI"), g.read("SDMA_ERROR_OFFSET"))
        assert got == (g.err[code], g.level["RING"], 0, 0, bad & ~3, 0, (rptr // 4) % 64), f"{code}: {got}"
        (entry,) = g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
        assert (entry["CLIENT_ID"], entry["SOURCE_ID"], entry["VMID"], entry["DATA0"], entry["DATA1"]) == \
            (0x08, 241, 0, word, bad & ~3), entry
        g.dev.delay(100)
        assert g.r32(fence) == 0 and g.fields("SDMA_STATUS")["ERROR"] == 1, "the pending FENCE ran"
        g.set("SDMA_CNTL", QUEUE_RESET=1, HALT=1)
        g.until(lambda: g.fields("SDMA_STATUS")["HALTED"], "SDMA_STATUS.HALTED after the reset")
        assert g.fields("SDMA_STATUS") == {**g.fields("SDMA_STATUS"), "IDLE": 1, "RB_EMPTY": 1, "ERROR": 0}
        assert (g.read("SDMA_RB_RPTR"), g.read("SDMA_RB_WPTR"), g.read("SDMA_ERROR")) == (0, 0, 0)
        s.wptr = 0
    s.submit(sdma("FENCE", DATA=0x30, **lo_hi("ADDR", OUT + 0x20, 2)))
    g.dev.delay(100)
    assert g.r32(OUT + 0x20) == 0 and g.fields("SDMA_STATUS")["HALTED"] == 1
    g.set("SDMA_CNTL", HALT=0)
    g.idle("SDMA_STATUS")
    assert (g.r32(OUT + 0x10, 2), g.r32(OUT + 0x20)) == ([0, 0], 0x30)


CHECKS = [check_halts_stop_at_a_packet_boundary, check_halted_shows_while_the_other_queue_is_stopped_by_an_error,
          check_partial_doorbells_overflow_and_control_writes, check_idle_reads_0_until_a_doorbell_is_taken,
          check_halted_holds_while_the_halted_cp_takes_a_doorbell_error_or_an_entry,
          check_sdma_entry_waits_for_the_cp_packet_in_hand, check_doorbells_during_a_reset_are_ignored,
          check_a_halted_sdma_stopped_by_its_doorbell_shows_error_not_halted]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
