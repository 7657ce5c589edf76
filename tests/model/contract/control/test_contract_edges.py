"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the edges a driver meets first and the other checks pass over. Every
register's value after reset as registers.md's reset column and hardware.md's "After reset"
give it (the hardware-driven ones: the build's CAPS, idle status, every pointer, error,
fault and counter 0); the R registers ignore whole writes while they hold latched values;
the W registers read 0; doorbells that move nothing (v = wptr, on an idle ring and on a
busy one) and rejected ones (RB_WPTR keeps its value, on the three rings); CONTROL.SOFT_RESET
returning the hardware-driven registers to their reset values; ring bases and write-back
addresses reaching the bus up to bit 47; rings moved and resized while disabled (the
packets' edges: engines/test_contract_packet_edges.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IB1B, IB2, IH_BASE, IH_WB, M32, OUT, RING, RING1, RPTR1_WB,
                                                  RPTR_WB, SRING, SRPTR_WB, Gpu, Ring, SdmaRing, bring_up,
                                                  expect_error, expect_sdma_error, ib, lo_hi, pm4, pm4_packets,
                                                  registers, release_mem, sdma, sdma_packets, wait_mem, write_data)

# Registers a running device changes by itself (the clock), skipped where a value must hold.
LIVE = ("TIMESTAMP_LO", "TIMESTAMP_HI")


def _state_after_reset(g: Gpu) -> dict[str, int]:
    """What hardware.md's "After reset" and registers.md say each hardware-driven register
    reads on a reset device of the default build (docs/hardware.md: IB levels ring → IB1 →
    IB2, 48-bit addresses, DMA_DATA up to 2^20 bytes, VM_CAPS 2 levels, 16 VMIDs, a TLB of
    16; two CP queues and one SDMA engine)."""
    bus = g.fields("CAPS")["BUS_BYTES_LOG2"]
    assert 2 <= bus <= 5, f"CAPS.BUS_BYTES_LOG2 {bus}: 32 to 256 bits"
    idle = g.value("STATUS", IDLE=1, RB_EMPTY=1)
    want = {n: 0 for n, r in registers().items() if r.reset is None and n not in LIVE}
    want.update(CAPS=g.value("CAPS", VM=1, DMA_MAX_LOG2=20, IH=1, DMA=1, IB_LEVELS=2, ADDR_BITS=48,
                             BUS_BYTES_LOG2=bus),
                VM_CAPS=g.value("VM_CAPS", TLB_LOG2=4, VMIDS=16, LEVELS=2),
                QUEUE_CAPS=g.value("QUEUE_CAPS", CP_QUEUES=2, SDMA=1),
                STATUS=idle, CP_HQD1_STATUS=g.value("CP_HQD1_STATUS", IDLE=1, RB_EMPTY=1),
                SDMA_STATUS=g.value("SDMA_STATUS", IDLE=1, RB_EMPTY=1))
    return want


def check_every_register_reads_its_reset_value(dev):
    """After reset every register reads registers.md's reset value (every element of an
    array: 16 VMIDs' VM_CONTEXT_*, the packet counters), and the registers the hardware
    drives read what hardware.md's "After reset" says: the build in CAPS, VM_CAPS and
    QUEUE_CAPS, the three queues IDLE and RB_EMPTY with nothing else, every pointer, error
    register, fault register, VM_INVALIDATE_ACK and counter 0; TIMESTAMP runs. A register
    written and reset by nothing but the device's reset (VM_CONTEXT_PT_BASE_*, a memory with
    a valid bit per entry on the RTL) reads 0 as well, whatever an earlier session wrote, and
    its first write in part after reset writes 0 to the bytes it does not strobe."""
    g = Gpu(dev)
    want = _state_after_reset(g)
    bad = []
    for n, r in registers().items():
        if n in LIVE:
            continue
        for i in range(r.count):
            exp = r.reset if r.reset is not None else want[n]
            got = g.read(n, i)
            if got != exp:
                bad.append(f"{n}[{i}] after reset: {got:#010x}, registers.md/hardware.md say {exp:#010x}")
    t0 = g.timestamp()
    g.dev.delay(100)
    assert g.timestamp() - t0 >= 100, "TIMESTAMP does not run"
    assert not dev.irq_level(), "the irq line is high after reset"
    assert not bad, "\n".join(bad)
    # the first write after reset of an element in part: the bytes it does not strobe read 0,
    # whatever an earlier session left in the RTL's table (hardware.md, Virtual memory)
    for i in range(16):
        dev.mmio_write_bytes(g.regs["VM_CONTEXT_PT_BASE_LO"].addr(i) + 3, bytes([0x5A]))
        dev.mmio_write_bytes(g.regs["VM_CONTEXT_PT_BASE_HI"].addr(i) + 1, bytes([0xA5]))
    assert [(g.read("VM_CONTEXT_PT_BASE_LO", i), g.read("VM_CONTEXT_PT_BASE_HI", i)) for i in range(16)] == \
        [(0x5A00_0000, 0xA500)] * 16, "a first write in part kept bytes it did not strobe"
    # the VM_CONTEXT_* registers written, then read back through every element
    for i in range(16):
        g.write("VM_CONTEXT_PT_BASE_LO", (0x1000 * (i + 1)) | 0xFFF, i)
        g.write("VM_CONTEXT_PT_BASE_HI", 0xF0000 | i, i)
    assert [g.read("VM_CONTEXT_PT_BASE_LO", i) for i in range(16)] == [0x1000 * (i + 1) for i in range(16)], \
        "VM_CONTEXT_PT_BASE_LO: bits 11:0 read 0, each element its own"
    assert [g.read("VM_CONTEXT_PT_BASE_HI", i) for i in range(16)] == [i for i in range(16)], \
        "VM_CONTEXT_PT_BASE_HI: bits 15:0, each element its own"
    for i in range(16):
        g.write("VM_CONTEXT_PT_BASE_LO", 0, i)
        g.write("VM_CONTEXT_PT_BASE_HI", 0, i)


def check_read_only_registers_ignore_whole_writes(dev):
    """Every R register ("a write is answered OKAY and changes nothing") ignores a whole
    write of ones and of zeros while it holds a latched, non-zero value: the three queues'
    pointers after work, CP_ERROR*, CP_HQD1_ERROR*, SDMA_ERROR* and VM_FAULT_* with their
    errors latched, the counters after work, IH_WPTR, the CAPS; and every W register reads 0
    after a write (the doorbells, VM_INVALIDATE_REQ, INT_FORCE, CP_QUEUE_RESET)."""
    from tests.model.contract.contract_driver import VA_HOLE, VA_CODE, PA_CODE, map_vmid1

    g, ring, ih = bring_up(dev)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    ring.run(write_data(OUT, [1, 2, 3]), pm4("NOP", [0] * 3))
    q1.run(write_data(OUT + 16, [4]))
    s.run(sdma("FENCE", DATA=5, **lo_hi("ADDR", OUT + 32, 2)), sdma("TRAP", INT_CONTEXT=7))
    g.until(lambda: g.read("IH_WPTR") == 32, "the TRAP's entry")
    # Errors latched on the three queues: a VM fault on queue 0, an illegal opcode on queue 1
    # and the SDMA.
    map_vmid1(g)
    g.w32(PA_CODE, [0xFFFF1000] + write_data(VA_HOLE, [9]))  # the fault at IB offset 1
    ring.submit(ib(VA_CODE, 6, VMID=1))
    q1.submit([0xC000FF00, 0])
    s.submit([0x00000307])
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        assert g.idle(st)["ERROR"] == 1, st
    g.until(lambda: g.read("IH_WPTR") == 4 * 32, "the three error entries")
    regs = registers()
    ro = [n for n, r in regs.items() if n not in LIVE and r.fields
          and all(f.access == "R" for f in r.fields.values())]
    before = {(n, i): g.read(n, i) for n in ro for i in range(regs[n].count)}
    latched = ("RB_RPTR", "RB_WPTR", "CP_HQD1_RB_RPTR", "CP_HQD1_RB_WPTR", "SDMA_RB_RPTR", "SDMA_RB_WPTR",
               "IH_WPTR", "CP_ERROR", "CP_ERROR_ADDR_LO", "CP_ERROR_OFFSET", "CP_HQD1_ERROR",
               "CP_HQD1_ERROR_ADDR_LO", "CP_HQD1_ERROR_OFFSET", "SDMA_ERROR", "SDMA_ERROR_ADDR_LO", "VM_FAULT_STATUS",
               "VM_FAULT_ADDR_LO", "PERF_DWORDS_FETCHED", "PERF_Q0_DWORDS_FETCHED", "PERF_Q1_DWORDS_FETCHED",
               "PERF_SDMA_DWORDS_FETCHED", "CAPS", "VM_CAPS", "QUEUE_CAPS", "ID", "VERSION")
    zero = [n for n in latched if before[(n, 0)] == 0]
    assert not zero, f"expected latched non-zero values in {zero}"
    assert len(ro) >= 40, ro
    for v in (M32, 0):
        for n in ro:
            for i in range(regs[n].count):
                g.write(n, v, i)
    after = {(n, i): g.read(n, i) for n in ro for i in range(regs[n].count)}
    changed = {f"{n}[{i}]": (hex(before[(n, i)]), hex(after[(n, i)])) for (n, i) in before
               if before[(n, i)] != after[(n, i)]}
    assert not changed, f"whole writes to R registers changed them: {changed}"
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        assert g.fields(st)["ERROR"] == 1, f"a write to an R register ended {st}'s error"
    # W registers read 0 after a write (a doorbell ignored while its queue is stopped).
    for n, v in (("RB_DOORBELL", 0x1234), ("CP_HQD1_RB_DOORBELL", 0x1234), ("SDMA_DOORBELL", 0x1234),
                 ("VM_INVALIDATE_REQ", g.value("VM_INVALIDATE_REQ", PER_VMID=0x8000, ALL_ADDR=1))):
        g.write(n, v)
        assert g.read(n) == 0, f"{n} (W) reads {g.read(n):#x} after a write"
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0x8000, "VM_INVALIDATE_ACK = VMID 15")
    assert (g.read("RB_WPTR"), g.read("CP_HQD1_RB_WPTR"), g.read("SDMA_RB_WPTR")) == \
        (before[("RB_WPTR", 0)], before[("CP_HQD1_RB_WPTR", 0)], before[("SDMA_RB_WPTR", 0)])
    g.set("INT_FORCE", EOP=1)
    assert g.read("INT_FORCE") == 0 and g.fields("INT_STATUS")["EOP"] == 1
    g.set("CP_QUEUE_RESET", Q0=1, Q1=1)
    assert g.read("CP_QUEUE_RESET") == 0
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    assert g.fields("SDMA_CNTL") == {"QUEUE_RESET": 0, "HALT": 0, "TRAP_ENABLE": 1}
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        assert g.idle(st)["ERROR"] == 0, st
    assert (g.read("VM_FAULT_STATUS"), g.read("CP_ERROR"), g.read("CP_HQD1_ERROR"), g.read("SDMA_ERROR")) == \
        (0, 0, 0, 0)



def check_soft_reset_returns_the_hardware_registers_to_their_reset_state(dev):
    """CONTROL.SOFT_RESET ("a clean idle state": rptr = wptr = 0, IH_WPTR = 0, error latches
    cleared) taken while every queue is inside an IB (queue 0 at IB2, queue 1 and the SDMA at
    IB1, each polling: LEVEL and WAITING set), and again while each is stopped by an error (a
    VM fault on queue 0: VM_FAULT_* set): once the three IDLE bits read 1, every register the
    hardware drives reads as after reset (_state_after_reset: STATUS IDLE and RB_EMPTY alone,
    LEVEL RING), but for what hardware.md says outlives it: the counters (PERF_CLEAR only),
    TIMESTAMP, VM_INVALIDATE_ACK (the MMU is not reset: it keeps the last request's VMIDs)
    and INT_STATUS's sticky bits."""
    from tests.model.contract.contract_driver import PA_CODE, VA_CODE, VA_HOLE, map_vmid1

    g, ring, ih = bring_up(dev)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    want = _state_after_reset(g)
    kept = [n for n in want if n.startswith("PERF_") or n in ("VM_INVALIDATE_ACK", "INT_STATUS")]
    flag = OUT + 0x40
    regs = registers()

    def compare(when):
        bad = {f"{n}[{i}]": hex(g.read(n, i)) for n in want if n not in kept for i in range(regs[n].count)
               if g.read(n, i) != want[n]}
        assert not bad, f"after SOFT_RESET {when}, expected as after reset: {bad}"

    def soft_reset(when):
        ack = g.read("VM_INVALIDATE_ACK")
        assert ack
        g.set("CONTROL", SOFT_RESET=1)
        for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
            g.idle(st)
        compare(when)
        assert g.read("VM_INVALIDATE_ACK") == ack, "CONTROL.SOFT_RESET changed VM_INVALIDATE_ACK"
        g.write("IH_RPTR", 0)
        ih.rptr = 0
        ring.wptr = q1.wptr = s.wptr = 0
        g.write("INT_STATUS", g.value("INT_STATUS", EOP=1, CP_ERROR=1, IH_OVERFLOW=1))

    g.w32(flag, [0])
    g.w32(IB2, wait_mem(flag, 1, 1, "EQ"))
    g.w32(IB1, [0xFFFF1000] + ib(IB2, 7))
    g.w32(IB1B, [0xFFFF1000] + wait_mem(flag, 1, 1, "EQ"))
    g.w32(IB1B + 0x100, sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                             RETRY_COUNT=0xFFF, INTERVAL=1))
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    ring.submit(release_mem(OUT, 1, INT_SEL="SEND_INT"), ib(IB1, 5))
    q1.submit(write_data(OUT + 4, [2]), ib(IB1B, 8))
    s.submit(sdma("TRAP", INT_CONTEXT=3), sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB1B + 0x100, 5), IB_SIZE=6))
    for st, level in (("STATUS", "IB2"), ("CP_HQD1_STATUS", "IB1"), ("SDMA_STATUS", "IB1")):
        f = g.waiting(st)
        assert f["LEVEL"] == g.level[level], (st, f)
    assert g.read("IH_WPTR") == 64
    g.set("VM_INVALIDATE_REQ", PER_VMID=0x30, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0x30, "VM_INVALIDATE_ACK = VMIDs 4 and 5")
    soft_reset("while the three queues poll inside IBs")
    # each queue stopped by an error, queue 0's a VM fault
    map_vmid1(g)
    g.w32(PA_CODE, [0xFFFF1000] + write_data(VA_HOLE, [9]))
    ring.submit(ib(VA_CODE, 6, VMID=1))
    q1.submit([0xFFFF1000], [0xC000FF00, 0])
    s.submit([0], sdma("FENCE", DATA=3, **lo_hi("ADDR", 1 << 40, 2)))
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        assert g.idle(st)["ERROR"] == 1, st
    assert g.read("VM_FAULT_STATUS") and g.read("VM_FAULT_ADDR_LO") == VA_HOLE
    g.until(lambda: g.read("IH_WPTR") == 96, "the three error entries")
    soft_reset("while the three queues are stopped by errors")
    ring.run(write_data(OUT + 8, [0x88]))
    assert g.r32(OUT + 8) == 0x88

def check_doorbells_that_move_nothing_and_rejected_ones(dev):
    """A doorbell of the value RB_WPTR already holds (v = wptr) is no error and moves
    nothing, on an idle ring (v = rptr = wptr: nothing is fetched, the queue stays IDLE) and
    on a busy one (the work in hand goes on); a rejected doorbell leaves RB_WPTR (and
    CP_HQD1_RB_WPTR, SDMA_RB_WPTR) at its value: wptr = v only when neither check fails;
    the SDMA's a byte pointer, its bits 1:0 dropped."""
    g, ring, ih = bring_up(dev, ring_log2=5)
    q1 = Ring(g, RING1, 5, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 5, SRPTR_WB)
    ring.run(write_data(OUT, [1]))
    q1.run(write_data(OUT + 4, [2]))
    s.run(sdma("FENCE", DATA=3, **lo_hi("ADDR", OUT + 8, 2)))
    fetched = (g.read("PERF_DWORDS_FETCHED"), g.read("PERF_SDMA_DWORDS_FETCHED"))
    for _ in range(3):  # v = rptr = wptr
        ring.doorbell()
        q1.doorbell()
        g.write("SDMA_DOORBELL", s.wptr)
        g.write("SDMA_DOORBELL", s.wptr | 3)  # bits 1:0 ignored: the same pointer
    for st in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS"):
        f = g.idle(st)
        assert (f["ERROR"], f["RB_EMPTY"]) == (0, 1), (st, f)
    assert (g.read("PERF_DWORDS_FETCHED"), g.read("PERF_SDMA_DWORDS_FETCHED")) == fetched, \
        "a doorbell of the current wptr fetched something"
    assert (g.read("RB_WPTR"), g.read("CP_HQD1_RB_WPTR"), g.read("SDMA_RB_WPTR")) == (5, 5, 16)
    assert ih.pop() == []
    # v = wptr while the ring is busy (a WAIT_REG_MEM in hand, work behind it): no error, the
    # work goes on and runs once the wait ends.
    flag = OUT + 0x40
    g.w32(flag, [0])
    ring.submit(wait_mem(flag, 1, 1, "EQ"), write_data(OUT + 0x44, [0x44]))
    s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ", MEM_POLL="MEMORY",
                  RETRY_COUNT=0xFFF, INTERVAL=1), sdma("FENCE", DATA=0x48, **lo_hi("ADDR", OUT + 0x48, 2)))
    g.waiting()
    g.waiting("SDMA_STATUS")
    ring.doorbell()
    g.write("SDMA_DOORBELL", s.wptr)
    g.dev.delay(50)
    assert g.fields("STATUS")["ERROR"] == 0 and g.fields("SDMA_STATUS")["ERROR"] == 0
    g.w32(flag, [1])
    g.idle()
    g.idle("SDMA_STATUS")
    assert g.r32(OUT + 0x44, 2) == [0x44, 0x48]
    assert (g.read("RB_RPTR"), g.read("RB_WPTR")) == (5 + 7 + 5,) * 2
    # Rejected doorbells: wptr keeps its value, on each of the three rings.
    for q in (ring, q1):
        w = g.read(q.p + "WPTR")
        q.doorbell(w + 33)  # more than 32 dwords ahead of rptr (= wptr)
        expect_error(q, ih, "DOORBELL_OVERFLOW", "RING", 0, w + 33, w % 32)
        assert g.read(q.p + "WPTR") == 0, "the queue's reset clears wptr"
        q.run(write_data(OUT + 0x50, [0x50]))
        q.doorbell(q.wptr - 1)
        st = g.idle(q.status)
        assert st["ERROR"] == 1 and g.read(q.p + "WPTR") == q.wptr == 5, \
            f"{q.p}WPTR {g.read(q.p + 'WPTR')} after DOORBELL_BACKWARDS: the rejected value was taken"
        expect_error(q, ih, "DOORBELL_BACKWARDS", "RING", 0, 4, 5)
    w = g.read("SDMA_RB_WPTR")
    g.write("SDMA_DOORBELL", w + 4 * 32 + 4)
    g.idle("SDMA_STATUS")
    assert g.read("SDMA_RB_WPTR") == w, "the SDMA took the value its DOORBELL_OVERFLOW rejected"
    expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, w + 4 * 32 + 4, (w // 4) % 32)
    s.run(sdma("FENCE", DATA=6, **lo_hi("ADDR", OUT + 0x54, 2)))
    g.write("SDMA_DOORBELL", 8)
    g.idle("SDMA_STATUS")
    assert g.read("SDMA_RB_WPTR") == 16, "the SDMA took the value its DOORBELL_BACKWARDS rejected"
    expect_sdma_error(s, ih, "DOORBELL_BACKWARDS", "RING", 0, 8, 4)


# Address bits above the testbench memory's 64 MiB (hardware.md "Errors": it answers DECERR
# past its end), up to the bus's 48th: an address with one of them set is beyond memory.
# The first and last of them and those on each side of a register's split (a base's LO/HI at
# bit 40, a write-back address's at 32): all 22 took 17 s on Icarus.
HIGH_BITS = (26, 31, 32, 39, 40, 47)


def check_ring_bases_and_write_back_addresses_reach_the_bus(dev):
    """The address bits of a ring's base (>> 8: LO bits 39:8, HI bits 47:40) and of a
    write-back address (LO bits 31:0, HI bits 47:32) reach the bus: with one bit above the
    64 MiB of memory set (HIGH_BITS), queue 0's, queue 1's and the SDMA's first fetch is BUS_DECERR at
    exactly that address (LEVEL RING, OPCODE 0, OFFSET 0), an IH entry's write is the
    RELEASE_MEM's BUS_DECERR at the IH ring's address (IH_WPTR stays, no EOP), and a failing
    rptr or IH wptr write-back is the packet's BUS_DECERR at the address written."""
    g, ring, ih = bring_up(dev)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    P = pm4_packets()
    S = sdma_packets()

    def reprogram(cntl, on, regs):
        g.write(cntl, g.read(cntl) & ~on)
        for name, v in regs:
            g.write(name, v)
        g.write(cntl, g.read(cntl) | on)

    def base_regs(p, a):
        return ((p + "BASE_LO", (a >> 8) & M32), (p + "BASE_HI", a >> 40))

    def addr_regs(p, a):
        return ((p + "ADDR_LO", a & M32), (p + "ADDR_HI", a >> 32))

    en = g.value("RB_CNTL", ENABLE=1)
    sen = g.value("SDMA_RB_CNTL", RB_ENABLE=1)
    ien = g.value("IH_CNTL", ENABLE=1)
    for bit in HIGH_BITS:
        a = 1 << bit
        for q, ring_base in ((ring, RING), (q1, RING1)):
            reprogram(q.p + "CNTL", en, base_regs(q.p, a))
            q.submit(write_data(OUT, [bit]))
            expect_error(q, ih, "BUS_DECERR", "RING", 0, a, 0)
            reprogram(q.p + "CNTL", en, base_regs(q.p, ring_base))
            reprogram(q.p + "CNTL", en, addr_regs(q.p + "RPTR_", a | 0x40))
            q.submit(write_data(OUT, [bit]))
            expect_error(q, ih, "BUS_DECERR", "RING", P["WRITE_DATA"].opcode, a | 0x40, 0)
            reprogram(q.p + "CNTL", en, addr_regs(q.p + "RPTR_", RPTR_WB if q is ring else RPTR1_WB))
        reprogram("SDMA_RB_CNTL", sen, base_regs("SDMA_RB_", a))
        s.submit(sdma("FENCE", DATA=bit, **lo_hi("ADDR", OUT, 2)))
        expect_sdma_error(s, ih, "BUS_DECERR", "RING", 0, a, 0)
        reprogram("SDMA_RB_CNTL", sen, base_regs("SDMA_RB_", SRING) + addr_regs("SDMA_RB_RPTR_", a | 0x80))
        s.submit(sdma("FENCE", DATA=bit, **lo_hi("ADDR", OUT, 2)))
        expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["FENCE"].opcode, a | 0x80, 0)
        reprogram("SDMA_RB_CNTL", sen, addr_regs("SDMA_RB_RPTR_", SRPTR_WB))
        assert g.r32(OUT) == bit
        # the IH ring's base: the EOP entry cannot be written, nor the CP_ERROR entry
        w = g.read("IH_WPTR")
        reprogram("IH_CNTL", ien, base_regs("IH_", a))
        ring.submit(release_mem(OUT + 4, bit, INT_SEL="SEND_INT"))
        assert g.idle()["ERROR"] == 1
        err, addr, off = ring.error_regs()
        assert (err, addr, off) == ({"CODE": g.err["BUS_DECERR"], "LEVEL": 0, "OPCODE": P["RELEASE_MEM"].opcode},
                                    a + w % ih.bytes, 0), (bit, err, hex(addr), off)
        assert g.read("IH_WPTR") == w and g.fields("INT_STATUS")["EOP"] == 0 and g.r32(OUT + 4) == bit
        reprogram("IH_CNTL", ien, base_regs("IH_", IH_BASE) + addr_regs("IH_WPTR_", a | 0xC0))
        g.set("CP_QUEUE_RESET", Q0=1)
        g.idle()
        ring.wptr = 0
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
        # the IH wptr write-back: the EOP entry lands, its write-back fails
        ring.submit(release_mem(OUT + 4, bit + 1, INT_SEL="SEND_INT"))
        assert g.idle()["ERROR"] == 1
        err, addr, off = ring.error_regs()
        assert (err["CODE"], err["OPCODE"], addr) == (g.err["BUS_DECERR"], P["RELEASE_MEM"].opcode, a | 0xC0), \
            (bit, err, hex(addr))
        assert [ih.source(e) for e in ih.pop()] == ["EOP", "CP_ERROR"]
        reprogram("IH_CNTL", ien, addr_regs("IH_WPTR_", IH_WB))
        g.set("CP_QUEUE_RESET", Q0=1)
        g.idle()
        ring.wptr = 0
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1, EOP=1))
    ring.run(write_data(OUT + 8, [0x88]))
    assert g.r32(OUT + 8) == 0x88 and g.r32(RPTR_WB) == 5



def check_rings_resized_and_moved_while_disabled_keep_their_pointers(dev):
    """A ring's base and size are written while its enable is clear, and nothing else is
    reset (hardware.md, Ring and doorbell): queue 0, queue 1 and the SDMA ring, their
    pointers at 40 dwords in a ring of 64, disabled, moved and shrunk to 16 dwords, enabled
    again, run their next packets from the new base + 4·(i mod 16) (RB_RPTR and RB_WPTR
    kept, dword i of the ring at (i mod size)), and the doorbell's overflow check uses the
    new size at once (more than 16 dwords ahead of rptr: DOORBELL_OVERFLOW, OFFSET rptr mod
    16)."""
    g, ring, ih = bring_up(dev, ring_log2=6)
    q1 = Ring(g, RING1, 6, RPTR1_WB, queue=1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    ring.run(*[pm4("NOP", [0] * 3)] * 10)
    q1.run(*[pm4("NOP", [0] * 3)] * 10)
    s.run(*[sdma("NOP", [0] * 3, COUNT=3)] * 10)
    assert (g.read("RB_RPTR"), g.read("CP_HQD1_RB_RPTR"), g.read("SDMA_RB_RPTR")) == (40, 40, 160)
    new = {ring: RING + 0x2000, q1: RING1 + 0x2000}
    for q in (ring, q1):
        g.set(q.p + "CNTL", ENABLE=0, RPTR_WB=1)
        g.write(q.p + "BASE_LO", new[q] >> 8)
        g.set(q.p + "SIZE", LOG2_QWORDS=3)
        g.set(q.p + "CNTL", ENABLE=1, RPTR_WB=1)
        q.base, q.size = new[q], 16
        g.w32(q.base, [0xC000FF00] * 16)  # anything fetched from elsewhere in the ring fails
    g.set("SDMA_RB_CNTL", RB_SIZE=6, RB_ENABLE=0, RPTR_WRITEBACK_ENABLE=1)
    g.write("SDMA_RB_BASE_LO", (SRING + 0x2000) >> 8)
    g.set("SDMA_RB_CNTL", RB_SIZE=4, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=1)
    s.base, s.size = SRING + 0x2000, 16
    g.w32(s.base, [0x00000007] * 16)
    for k, q in enumerate((ring, q1)):
        # dwords 40..49: at offsets 8..15 and 0..1 of the 16-dword ring
        q.run(write_data(OUT + 8 * k, [0x10 + k]), write_data(OUT + 8 * k + 4, [0x20 + k]))
        assert g.r32(OUT + 8 * k, 2) == [0x10 + k, 0x20 + k], q.p
        assert (g.read(q.p + "RPTR"), g.read(q.p + "WPTR"), g.r32(RPTR_WB if k == 0 else RPTR1_WB)) == (50,) * 3
        q.doorbell(50 + 17)
        expect_error(q, ih, "DOORBELL_OVERFLOW", "RING", 0, 67, 50 % 16)
    s.run(sdma("FENCE", DATA=0x30, **lo_hi("ADDR", OUT + 0x10, 2)),
          sdma("FENCE", DATA=0x31, **lo_hi("ADDR", OUT + 0x14, 2)),
          sdma("FENCE", DATA=0x32, **lo_hi("ADDR", OUT + 0x18, 2)))
    assert g.r32(OUT + 0x10, 3) == [0x30, 0x31, 0x32]
    assert (g.read("SDMA_RB_RPTR"), g.read("SDMA_RB_WPTR"), g.r32(SRPTR_WB)) == (160 + 48,) * 3
    g.write("SDMA_DOORBELL", 208 + 4 * 16 + 4)
    expect_sdma_error(s, ih, "DOORBELL_OVERFLOW", "RING", 0, 208 + 68, (208 // 4) % 16)





def check_every_vmid_has_its_own_tables(dev):
    """VM_CONTEXT_CNTL[i], VM_CONTEXT_PT_BASE_LO/HI[i] are VMID i's, for each of the 16: the
    same IB code (one physical page) run by an INDIRECT_BUFFER of each VMID 1 … 15 writes
    the page that VMID's own tables map; a VMID whose ENABLE is clear writes the physical
    address; a fault names its VMID in VM_FAULT_STATUS and in the entry (VMID, DATA2); an
    invalidation of every VMID's every address lets each see its remapped page."""
    from tests.model.contract.contract_driver import VALID, EXECUTABLE, READABLE, WRITEABLE

    g, ring, ih = bring_up(dev)
    tables, code, va_code, va_out, va_hole = 0x200000, 0x300000, 0x100000, 0x101000, 0x103000
    out = lambda v, k=0: 0x400000 + 0x2000 * v + 0x1000 * k  # noqa: E731
    g.w32(code, write_data(va_out + 0x10, [0xA0]))
    for v in range(1, 16):
        root, pt = tables + 0x2000 * v, tables + 0x2000 * v + 0x1000
        g.w64(root + 8 * (va_code >> 21), pt | VALID)
        g.w64(pt + 8 * (va_code >> 12 & 511), code | VALID | EXECUTABLE | READABLE)
        g.w64(pt + 8 * (va_out >> 12 & 511), out(v) | VALID | WRITEABLE | READABLE)
        g.write("VM_CONTEXT_PT_BASE_LO", root, v)
        g.write("VM_CONTEXT_PT_BASE_HI", 0, v)
        g.set("VM_CONTEXT_CNTL", v, ENABLE=v % 5 != 0)  # VMIDs 5, 10 and 15 untranslated
    g.w32(va_out + 0x10, [0])
    g.w32(va_code, write_data(va_out + 0x10, [0xA0]))  # what an untranslated VMID runs
    for v in range(1, 16):
        g.w32(code + 16, [v])  # the WRITE_DATA's data dword
        g.w32(va_code + 16, [v])
        assert ring.run(ib(va_code, 5, VMID=v))["ERROR"] == 0, (v, ring.error_regs())
        if v % 5:
            assert g.r32(out(v) + 0x10) == v, f"VMID {v} did not write through its own tables"
        else:
            assert g.r32(va_out + 0x10) == v, f"VMID {v}, untranslated, did not write the physical address"
    for v in (1, 7, 14):  # a fault names its VMID
        g.w32(code + 20, write_data(va_hole, [1]))
        ring.submit(ib(va_code + 20, 5, VMID=v))
        (e,) = expect_error(ring, ih, "VM_FAULT", "IB1", pm4_packets()["WRITE_DATA"].opcode, va_hole, 0)
        assert (e["VMID"], e["DATA2"] & 0xF) == (v, v), (v, e)
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    for v in range(1, 16):  # remapped, then one invalidation of every VMID's every address
        g.w64(tables + 0x2000 * v + 0x1000 + 8 * (va_out >> 12 & 511), out(v, 1) | VALID | WRITEABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=0xFFFF, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0xFFFF, "VM_INVALIDATE_ACK = every VMID")
    for v in [v for v in range(1, 16) if v % 5]:
        g.w32(code + 16, [0x100 + v])
        assert ring.run(ib(va_code, 5, VMID=v))["ERROR"] == 0, (v, ring.error_regs())
        assert (g.r32(out(v) + 0x10), g.r32(out(v, 1) + 0x10)) == (v, 0x100 + v), f"VMID {v} after the remap"

CHECKS = [check_every_register_reads_its_reset_value, check_read_only_registers_ignore_whole_writes,
          check_soft_reset_returns_the_hardware_registers_to_their_reset_state,
          check_doorbells_that_move_nothing_and_rejected_ones, check_ring_bases_and_write_back_addresses_reach_the_bus,
          check_rings_resized_and_moved_while_disabled_keep_their_pointers, check_every_vmid_has_its_own_tables]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
