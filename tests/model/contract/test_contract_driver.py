"""The contract, checked by an outside driver writer: tests/model/contract/contract_driver.py programs
the device from docs/registers.md, docs/packets.md and docs/hardware.md alone (no project
driver or spec code), and each check asserts numbers those pages state as exact: bit
positions, reset values, IH entry dwords, error codes and what they latch, wrap rules,
"ignored while ...". This module: the CP's ring, doorbell and write-back, its packets and
their errors (IB levels and CHAIN, WAIT_REG_MEM, every listed value and reserved bit, the
one-dword NOP), and a stopped queue that only a reset ends. Split by concept from it:
test_contract_dma.py, the CP's DMA engine; test_contract_bus_errors.py, memory that answers
SLVERR or DECERR; test_contract_release_mem_and_ih.py, RELEASE_MEM, the IH ring, interrupts
and time. tests/model/contract/engines/test_contract_sdma_packets.py and
test_contract_sdma_errors.py: the SDMA; tests/model/contract/engines/test_contract_cp_queues.py:
the second CP queue; test_contract_both_engines.py: the CP and the SDMA side by side;
tests/model/contract/test_contract_vm.py, test_contract_vm_tlb.py and
test_contract_vm_sdma_and_vmid_0.py: the MMU; tests/model/contract/control/test_contract_resets.py,
test_contract_halts.py, test_contract_rings.py and test_contract_ih_ring.py: resets and
counters, halts, the rings' ENABLE and locks, the IH ring; tests/model/contract/test_contract_csr.py:
the CSR block over AXI4-Lite.

The `check_*(dev)` bodies run here on the reference model at 64-, 32- and 256-bit buses and,
through CHECKS and tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

from tests.model.contract.contract_driver import (IB1, IB1B, IB2, M32, OUT, RING, RPTR_WB, SRING, Ring, SdmaRing,
                                                  bring_up, dma_data, expect_error, ib, lo_hi, pm4, pm4_packets,
                                                  release_mem, sdma, wait_mem, write_data)
from tests.model.contract.on_the_model import on_the_model


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
          check_wait_reg_mem, check_packet_rules_in_ibs, check_every_listed_value_and_reserved_bit,
          check_chain_at_the_deepest_level_and_its_vmid,
          check_count_0x3fff_is_the_one_dword_form_of_nop_alone, check_the_smallest_ring_of_two_dwords,
          check_poll_interval_0_acts_as_1_and_counts_from_each_answer, check_only_a_reset_ends_a_stopped_queue]


test_contract_on_the_model = on_the_model(CHECKS, data_widths=(64, 32, 256))
