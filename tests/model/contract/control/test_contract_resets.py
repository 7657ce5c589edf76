"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): what the driver's control registers do to work in flight. Resets and
counters: CONTROL.SOFT_RESET and the per-queue resets (what they keep: settings, registers,
SDMA_CNTL, the counters; what goes with the error), CONTROL.PERF_CLEAR, TIMESTAMP running on
through both, the TLB and DMA busy counters, the whole register map read around each reset and
control write (halts and doorbells: test_contract_halts.py;
the rings' enables and locked registers: test_contract_rings.py; the IH ring:
test_contract_ih_ring.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IH_BASE, IH_WB, M32, OUT, PA_CODE, PA_OUT, PA_OUT2, PT_L1,
                                         RING1, RPTR1_WB, RPTR_WB, SRING, SRPTR_WB, VA_CODE, VA_HOLE, VA_OUT,
                                         VA_RO, VALID, WRITEABLE, Gpu, Ring, SdmaRing, bring_up, dma_data, ib,
                                         lo_hi, map_vmid1, registers, release_mem, sdma, wait_mem, write_data)


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


def check_soft_reset_with_ih_rptr_left_ahead_drops_every_entry(dev):
    """docs/hardware.md (Errors: CONTROL.SOFT_RESET; Interrupts): SOFT_RESET sets IH_WPTR to
    0 and keeps IH_RPTR, so until the driver writes IH_RPTR = 0 its IH_RPTR is ahead of
    IH_WPTR and the ring counts as full: the CP's and the SDMA's entries are dropped
    (IH_OVERFLOW set, IH_WPTR still 0, its write-back dword and the ring's slots untouched),
    the packets that raised them finish and the CP's EOP event bit is still set; IH_PENDING
    reads 1 (IH_WPTR != IH_RPTR). Once IH_RPTR = 0 entries land at the ring's start again."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    ring.run(release_mem(OUT, 1, INT_SEL="SEND_INT", INT_CTXID=1), release_mem(OUT, 2, INT_SEL="SEND_INT"))
    ih.pop()
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1))
    assert (g.read("IH_RPTR"), g.r32(IH_WB), g.r32(IH_BASE + 16)) == (64, 64, 1)
    g.set("CONTROL", SOFT_RESET=1)
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        g.idle(st)
    assert (g.read("IH_WPTR"), g.read("IH_RPTR")) == (0, 64)
    ring.wptr = s.wptr = 0
    ring.run(release_mem(OUT + 4, 5, INT_SEL="SEND_INT", INT_CTXID=5))
    s.run(sdma("TRAP", INT_CONTEXT=6), sdma("FENCE", DATA=7, **lo_hi("ADDR", OUT + 8, 2)))
    st = g.fields("INT_STATUS")
    assert g.r32(OUT + 4, 2) == [5, 7], "the packets that raised the dropped entries finished"
    assert (g.read("IH_WPTR"), g.r32(IH_WB), g.r32(IH_BASE + 16)) == (0, 64, 1), \
        (g.read("IH_WPTR"), g.r32(IH_WB), g.r32(IH_BASE + 16))
    assert (st["IH_OVERFLOW"], st["EOP"], st["IH_PENDING"]) == (1, 1, 1), st
    g.write("IH_RPTR", 0)
    g.write("INT_STATUS", g.value("INT_STATUS", IH_OVERFLOW=1, EOP=1))
    assert g.fields("INT_STATUS") == {**g.fields("INT_STATUS"), "IH_OVERFLOW": 0, "EOP": 0, "IH_PENDING": 0}
    ih.rptr = 0
    s.run(sdma("TRAP", INT_CONTEXT=8))
    ring.run(release_mem(OUT, 9, INT_SEL="SEND_INT", INT_CTXID=9))
    assert [(ih.source(e), e["DATA0"]) for e in ih.pop()] == [("SDMA_TRAP", 8), ("EOP", 9)]
    assert (g.read("IH_WPTR"), g.r32(IH_WB), g.r32(IH_BASE + 16), g.field("INT_STATUS", "IH_OVERFLOW")) == \
        (64, 64, 8, 0)


def check_each_reset_changes_only_what_it_resets_in_the_whole_register_map(dev):
    """Every register of registers.md (every element of an array), read before and after each
    reset, changes only as the docs say: CP_QUEUE_RESET.Q1 (registers.md: "pointers, IB state,
    poll and error of that queue go to a clean idle state; its ring registers keep their
    values; the other queue, the SDMA queue and the IH ring are untouched") clears
    CP_HQD1_RB_RPTR/WPTR and CP_HQD1_ERROR* and leaves CP_HQD1_STATUS IDLE and RB_EMPTY alone;
    SDMA_CNTL.QUEUE_RESET the SDMA's likewise; CP_QUEUE_RESET.Q0 queue 0's and VM_FAULT_*
    (queue 0's fault: "0 once neither is"); CONTROL.SOFT_RESET all three and IH_WPTR, leaving
    every setting ("Configuration registers keep their values"), IH_RPTR, INT_STATUS's sticky
    bits, VM_INVALIDATE_ACK and the counters. Each reset is taken with the three queues
    stopped by errors (a VM fault, an illegal opcode, a DECERR), entries left in the IH ring,
    every INT_STATUS bit set and the settings away from their reset values, so nothing moves
    but what the reset moves; the counters of time only go on (never back). Then, the engines
    idle, the other control writes alike: CONTROL.HALT sets STATUS.HALTED alone, SDMA_CNTL.HALT
    SDMA_STATUS.HALTED, CONTROL.PERF_CLEAR zeroes every PERF_* counter (every element, the
    counters of time too: nothing runs) and nothing else, each INT_STATUS event bit written 1
    clears itself alone (written 0, nothing) and each INT_FORCE bit sets its own alone,
    IH_RPTR = IH_WPTR clears IH_PENDING alone, and VM_INVALIDATE_REQ moves VM_INVALIDATE_ACK
    alone. Last, each queue reset while CONTROL.HALT and SDMA_CNTL.HALT hold work given to all
    three queues: the reset queue's work is dropped (its pointers 0, IDLE and RB_EMPTY, HALTED
    kept), the other queues keep theirs, and nothing runs once the halts end."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    regs = registers()
    time = ("PERF_BUSY_CYCLES", "PERF_STALL_CYCLES", "PERF_DMA_BUSY_CYCLES", "PERF_SDMA_BUSY_CYCLES",
            "PERF_WALK_CYCLES")
    # settings away from their reset values (VMIDs 2-15 programmed, not enabled)
    g.write("SCRATCH", 0x5AA5_C33C)
    g.set("CP_QUEUE_PRIORITY", Q0=2, Q1=1)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    for i in range(2, 16):
        g.write("VM_CONTEXT_PT_BASE_LO", 0x10_0000 * i, i)
        g.write("VM_CONTEXT_PT_BASE_HI", i, i)
    map_vmid1(g)
    g.write("VM_INVALIDATE_ADDR_LO", 0x12345)
    g.write("VM_INVALIDATE_ADDR_HI", 0x7)
    g.set("VM_INVALIDATE_REQ", PER_VMID=0x8006, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0x8006, "VM_INVALIDATE_ACK = VMIDs 1, 2 and 15")
    g.set("INT_ENABLE", IH_PENDING=1, EOP=1, CP_ERROR=1, IH_OVERFLOW=1)

    def stop_all(entries):
        """Work on each queue, then an error stopping it: queue 0 a VM fault in an IB of VMID 1,
        queue 1 an illegal opcode, the SDMA a FENCE beyond memory (DECERR)."""
        g.w32(PA_CODE, write_data(VA_OUT, [1]) + write_data(VA_HOLE, [9]))
        q0.run(write_data(OUT, [0x10]))
        q0.submit(ib(VA_CODE, 10, VMID=1))
        q1.run(write_data(OUT + 4, [0x11]))
        q1.submit([0xFFFF1000], [0xC000FF00, 0])
        s.run(sdma("FENCE", DATA=0x12, **lo_hi("ADDR", OUT + 8, 2)))
        s.submit(sdma("FENCE", DATA=0x13, **lo_hi("ADDR", (1 << 40) + 0x40, 2)))
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            assert g.idle(st)["ERROR"] == 1, st
        g.until(lambda: g.read("IH_WPTR") == 32 * entries, f"{entries} IH entries")
        assert g.fields("VM_FAULT_STATUS")["VMID"] == 1 and g.read("VM_FAULT_ADDR_LO") == VA_HOLE
        g.set("INT_FORCE", EOP=1, IH_OVERFLOW=1)
        assert g.read("INT_STATUS") == 0xF, hex(g.read("INT_STATUS"))

    def snapshot():
        return {(n, i): g.read(n, i) for n, r in regs.items() if n not in ("TIMESTAMP_LO", "TIMESTAMP_HI")
                for i in range(r.count)}

    idle = g.value("STATUS", IDLE=1, RB_EMPTY=1)
    cleared = {
        "Q1": dict.fromkeys(("CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "CP_HQD1_ERROR", "CP_HQD1_ERROR_ADDR_LO",
                             "CP_HQD1_ERROR_ADDR_HI", "CP_HQD1_ERROR_OFFSET"), 0)
        | {"CP_HQD1_STATUS": g.value("CP_HQD1_STATUS", IDLE=1, RB_EMPTY=1)},
        "SDMA": dict.fromkeys(("SDMA_RB_RPTR", "SDMA_RB_WPTR", "SDMA_ERROR", "SDMA_ERROR_ADDR_LO",
                               "SDMA_ERROR_ADDR_HI", "SDMA_ERROR_OFFSET"), 0)
        | {"SDMA_STATUS": g.value("SDMA_STATUS", IDLE=1, RB_EMPTY=1)},
        "Q0": dict.fromkeys(("RB_RPTR", "RB_WPTR", "CP_ERROR", "CP_ERROR_ADDR_LO", "CP_ERROR_ADDR_HI",
                             "CP_ERROR_OFFSET", "VM_FAULT_STATUS", "VM_FAULT_ADDR_LO", "VM_FAULT_ADDR_HI"), 0)
        | {"STATUS": idle}}

    def step(what, write, statuses, changes, moved=()):
        """`write`, then wait for each of `statuses` ((register, field)) to read 1; every
        register (every element of an array) then reads what it read before but for `changes`,
        the counters of time not in `changes` only going on; each of `moved` read otherwise
        before."""
        before = snapshot()
        for n in moved:
            assert before[(n, 0)] != changes[n], f"{what}: {n} already reads {changes[n]:#x}: nothing to see"
        write()
        for st, f in statuses:
            g.until(lambda: g.fields(st)[f], f"{st}.{f}")
        after = snapshot()
        want = {**before, **{(n, i): v for n, v in changes.items() for i in range(regs[n].count)}}
        bad = [f"{n}[{i}] {before[(n, i)]:#x} -> {after[(n, i)]:#x} (expected {want[(n, i)]:#x})"
               for (n, i) in before if (n not in time or n in changes) and after[(n, i)] != want[(n, i)]]
        back = [f"{n} {before[(n, 0)]} -> {after[(n, 0)]}" for n in time
                if n not in changes and (after[(n, 0)] - before[(n, 0)]) & M32 >= 1 << 31]
        assert not bad, f"{what} changed what it does not reset, or not what it does:\n" + "\n".join(bad)
        assert not back, f"{what}: counters of time went back: {back}"

    ptrs = ("RB_RPTR", "RB_WPTR", "CP_ERROR", "CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "CP_HQD1_ERROR", "SDMA_RB_RPTR",
            "SDMA_RB_WPTR", "SDMA_ERROR", "VM_FAULT_STATUS", "VM_FAULT_ADDR_LO", "CP_ERROR_ADDR_LO",
            "CP_HQD1_ERROR_ADDR_LO", "SDMA_ERROR_ADDR_LO", "SDMA_ERROR_ADDR_HI", "STATUS", "CP_HQD1_STATUS",
            "SDMA_STATUS")
    stop_all(3)
    g.write("IH_RPTR", 32)  # one entry read, two left: IH_PENDING
    for what, field, status, key in (("CP_QUEUE_RESET.Q1", "Q1", "CP_HQD1_STATUS", "Q1"),
                                     ("SDMA_CNTL.QUEUE_RESET", None, "SDMA_STATUS", "SDMA"),
                                     ("CP_QUEUE_RESET.Q0", "Q0", "STATUS", "Q0")):
        write = (lambda f=field: g.set("CP_QUEUE_RESET", **{f: 1})) if field else \
            (lambda: g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1))
        step(what, write, [(status, "IDLE")], cleared[key], [n for n in cleared[key] if n in ptrs])
    # the driver starts its rings again at 0, write-back dwords zeroed, and stops them again
    q0.wptr = q1.wptr = s.wptr = 0
    g.w32(RPTR_WB, [0]), g.w32(RPTR1_WB, [0]), g.w32(SRPTR_WB, [0])
    g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, CP_ERROR=1, IH_OVERFLOW=1))
    stop_all(6)
    g.write("IH_RPTR", 64)  # IH_WPTR 192: still pending after SOFT_RESET's IH_WPTR 0
    every = {**cleared["Q1"], **cleared["SDMA"], **cleared["Q0"], "IH_WPTR": 0}
    step("CONTROL.SOFT_RESET", lambda: g.set("CONTROL", SOFT_RESET=1),
         [("STATUS", "IDLE"), ("CP_HQD1_STATUS", "IDLE"), ("SDMA_STATUS", "IDLE")], every,
         [n for n in every if n in ptrs + ("IH_WPTR",)])
    # the halts, on idle engines: each sets its HALTED alone (queue 1 has none: STATUS shows both)
    step("CONTROL.HALT", lambda: g.set("CONTROL", HALT=1), [("STATUS", "HALTED")],
         {"CONTROL": 1, "STATUS": g.value("STATUS", IDLE=1, RB_EMPTY=1, HALTED=1)}, ["CONTROL", "STATUS"])
    step("SDMA_CNTL.HALT", lambda: g.set("SDMA_CNTL", HALT=1, TRAP_ENABLE=1), [("SDMA_STATUS", "HALTED")],
         {"SDMA_CNTL": g.value("SDMA_CNTL", HALT=1, TRAP_ENABLE=1),
          "SDMA_STATUS": g.value("SDMA_STATUS", IDLE=1, RB_EMPTY=1, HALTED=1)}, ["SDMA_CNTL", "SDMA_STATUS"])
    g.set("CONTROL", HALT=0)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    # CONTROL.PERF_CLEAR, every engine idle: every PERF_* counter reads 0 (nothing runs to
    # count again), everything else as it was
    perf = {n: 0 for n in regs if n.startswith("PERF_")}
    packets = {(n, i) for n in ("PERF_PACKETS", "PERF_SDMA_PACKETS") for i in range(regs[n].count)}
    assert sum(g.read(n, i) for n, i in packets) and g.read("PERF_DWORDS_FETCHED"), "no counter to clear"
    step("CONTROL.PERF_CLEAR", lambda: g.set("CONTROL", PERF_CLEAR=1), [], perf)
    # the interrupt bits by hand: INT_STATUS's RW1C bits each cleared alone by a 1 (a 0 clears
    # nothing), INT_FORCE's pulses each setting one alone; IH_RPTR = IH_WPTR ends IH_PENDING
    # alone; a TLB invalidation request moves VM_INVALIDATE_ACK alone
    status = g.read("INT_STATUS")
    assert status == 0xF, hex(status)
    step("INT_STATUS written 0", lambda: g.write("INT_STATUS", 0), [], {})
    for bit in ("EOP", "CP_ERROR", "IH_OVERFLOW"):
        one = g.value("INT_STATUS", **{bit: 1})
        step(f"INT_STATUS.{bit} written 1", lambda b=one: g.write("INT_STATUS", b), [], {"INT_STATUS": status & ~one},
             ["INT_STATUS"])
        step(f"INT_FORCE.{bit}", lambda b=bit: g.set("INT_FORCE", **{b: 1}), [], {"INT_STATUS": status}, ["INT_STATUS"])
    step("IH_RPTR = IH_WPTR", lambda: g.write("IH_RPTR", g.read("IH_WPTR")), [],
         {"IH_RPTR": 0, "INT_STATUS": status & ~g.value("INT_STATUS", IH_PENDING=1)}, ["IH_RPTR", "INT_STATUS"])
    step("VM_INVALIDATE_REQ", lambda: g.set("VM_INVALIDATE_REQ", PER_VMID=0x0400, ALL_ADDR=1),
         [("VM_INVALIDATE_ACK", "PER_VMID")], {"VM_INVALIDATE_ACK": 0x0400}, ["VM_INVALIDATE_ACK"])
    # each queue reset while the CP and the SDMA are halted with work given to all three
    # (hardware.md: "A queue reset while CONTROL.HALT holds the CP drops the work the queue had
    # not started (RB_RPTR = RB_WPTR = 0, HALTED stays 1)"): the other queues keep their
    # pending work and status, nothing runs
    q0.wptr = q1.wptr = s.wptr = 0
    g.set("CONTROL", HALT=1)
    g.set("SDMA_CNTL", HALT=1, TRAP_ENABLE=1)
    g.until(lambda: g.fields("STATUS")["HALTED"] and g.fields("SDMA_STATUS")["HALTED"], "both HALTED")
    q0.submit(write_data(OUT + 0x20, [0x20]))
    q1.submit(write_data(OUT + 0x24, [0x24]))
    s.submit(sdma("FENCE", DATA=0x28, **lo_hi("ADDR", OUT + 0x28, 2)))
    g.dev.delay(100)
    pending = {st: g.fields(st) for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS")}
    assert [(f["IDLE"], f["RB_EMPTY"]) for f in pending.values()] == [(0, 0)] * 3, pending
    assert (pending["STATUS"]["HALTED"], pending["SDMA_STATUS"]["HALTED"]) == (1, 1), pending
    halted_idle = {"STATUS": g.value("STATUS", IDLE=1, RB_EMPTY=1, HALTED=1),
                   "CP_HQD1_STATUS": g.value("CP_HQD1_STATUS", IDLE=1, RB_EMPTY=1),
                   "SDMA_STATUS": g.value("SDMA_STATUS", IDLE=1, RB_EMPTY=1, HALTED=1)}
    for what, write, status, wptr in (
            ("CP_QUEUE_RESET.Q1 while halted", lambda: g.set("CP_QUEUE_RESET", Q1=1), "CP_HQD1_STATUS",
             "CP_HQD1_RB_WPTR"),
            ("SDMA_CNTL.QUEUE_RESET while halted", lambda: g.set("SDMA_CNTL", QUEUE_RESET=1, HALT=1, TRAP_ENABLE=1),
             "SDMA_STATUS", "SDMA_RB_WPTR"),
            ("CP_QUEUE_RESET.Q0 while halted", lambda: g.set("CP_QUEUE_RESET", Q0=1), "STATUS", "RB_WPTR")):
        step(what, write, [(status, "IDLE")], {wptr: 0, status: halted_idle[status]}, [wptr, status])
    g.set("CONTROL", HALT=0)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    g.dev.delay(200)
    assert g.r32(OUT + 0x20, 3) == [0, 0, 0], "work a queue reset dropped ran"
    assert {st: g.read(st) for st in halted_idle} == \
        {st: v & ~g.value("STATUS", HALTED=1) for st, v in halted_idle.items()}, "idle, empty, not halted"

CHECKS = [check_soft_reset_keeps_settings, check_resets_keep_registers, check_perf_clear_clears_every_counter,
          check_error_address_and_offset_clear_with_the_error, check_tlb_and_dma_busy_counters,
          check_timestamp_runs_on_through_perf_clear_and_soft_reset,
          check_soft_reset_leaves_sdma_cntl_a_halted_sdma_stays_halted,
          check_counters_survive_every_reset_but_perf_clear,
          check_tlb_counters_count_a_faulting_walk_and_no_faulting_hit,
          check_soft_reset_with_ih_rptr_left_ahead_drops_every_entry,
          check_each_reset_changes_only_what_it_resets_in_the_whole_register_map]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
