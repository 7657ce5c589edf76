"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone; split by concept from test_contract_driver.py, which has the CP's ring and
packets): memory that answers SLVERR or DECERR. The CP's own writes failing as the packet
that made them, an error answer inside memory for every kind of access, fetch errors reported
only where the parser needs the dword, a WRITE_DATA refused inside one of its blocks, and an
IH entry write refused in its middle (the DMA engine's errors: test_contract_dma.py).

The `check_*(dev)` bodies run here on the reference model at 64-, 32- and 256-bit buses and,
through CHECKS and tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus (as
contract_driver__check_*, the name of the file they were split from).
"""

from __future__ import annotations

from tests.model.contract.contract_driver import (IB1, IB1B, IH_BASE, IH_WB, OUT, RPTR_WB, SRING, IhRing, SdmaRing,
                                                  bring_up, dma_data, expect_error, ib, lo_hi, pm4, pm4_packets,
                                                  release_mem, sdma, wait_mem, write_data)
from tests.model.contract.on_the_model import on_the_model


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



def check_poll_counters_count_a_faulting_read_and_none_beyond_the_bus(dev):
    """PERF_Q0_POLLS / PERF_Q1_POLLS count each WAIT_REG_MEM read as the bus takes it, "held
    or not, faulting or not; one beyond the bus's 48 bits, answered by the CP itself, is none"
    (docs/hardware.md, CP hardware queues): a poll of an address with bit 48 set stops its
    queue with BUS_DECERR at the address's low 48 bits and counts no read, a poll beyond
    memory's end (DECERR from the memory) and a poll of a page VMID 1 does not map (VM_FAULT
    from the MMU) count one; on either queue, the other's counter still."""
    from tests.model.contract.contract_driver import (PA_CODE, RING1, RPTR1_WB, VA_CODE, VA_HOLE, Ring,
                                                      expect_fault, map_vmid1)
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    op = pm4_packets()["WAIT_REG_MEM"].opcode
    end = 64 << 20  # the testbench memory's end: DECERR from there on
    for q, mine, other in ((q0, "PERF_Q0_POLLS", "PERF_Q1_POLLS"), (q1, "PERF_Q1_POLLS", "PERF_Q0_POLLS")):
        for addr, code, at, reads in (((1 << 48) | 0x40, "BUS_DECERR", 0x40, 0), (end, "BUS_DECERR", end, 1)):
            g.set("CONTROL", PERF_CLEAR=1)
            off = q.wptr % q.size
            q.submit(wait_mem(addr, 1, 1, "EQ"))
            expect_error(q, ih, code, "RING", op, at, off)
            assert (g.read(mine), g.read(other)) == (reads, 0), (q.p, hex(addr), g.read(mine), g.read(other))
    # a poll the MMU refuses (VM_FAULT: VMID 1's hole), queue 0's IB
    g.set("CONTROL", PERF_CLEAR=1)
    g.w32(PA_CODE, wait_mem(VA_HOLE, 1, 1, "EQ"))
    q0.submit(ib(VA_CODE, 7, VMID=1))
    expect_fault(q0, ih, VA_HOLE, 0, 1, 0, op, 0, 0x40)
    assert (g.read("PERF_Q0_POLLS"), g.read("PERF_Q1_POLLS")) == (1, 0)


CHECKS = [check_cp_own_writes_fail_as_the_packet, check_slverr_and_decerr_inside_memory_for_every_access,
          check_fetch_errors_only_where_the_parser_needs_a_dword, check_write_data_error_inside_a_block,
          check_ih_entry_write_refused_in_its_middle, check_poll_counters_count_a_faulting_read_and_none_beyond_the_bus]


test_contract_on_the_model = on_the_model(CHECKS, data_widths=(64, 32, 256))
