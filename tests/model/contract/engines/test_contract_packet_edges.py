"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the edges of the packets a driver meets first and the other checks pass
over. IB_SIZE decoded bit by bit up to its largest value, 0xFFFFF, on the CP (a CHAIN ends
the IB early, so no million dwords are fetched) and on the SDMA (an error ends it); COUNT
out of range for every fixed-size packet and DMA_DATA's BYTE_COUNT bits above the engine's
limit; every address a packet names reaching the bus up to bit 47; every header type and
unknown opcodes, on the CP and the SDMA (the registers' edges: control/test_contract_edges.py).

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IB1B, IB2, M32, OUT, PA_CODE, RING, RING1, RPTR1_WB, SRING,
                                                  SRPTR_WB, VA_CODE, VA_RO, Ring, SdmaRing, bring_up, dma_data,
                                                  expect_error, expect_sdma_error, ib, lo_hi, map_vmid1, pm4,
                                                  pm4_packets, release_mem, sdma, sdma_packets, wait_mem,
                                                  write_data)
from tests.model.contract.control.test_contract_edges import HIGH_BITS


def check_ib_size_every_bit_up_to_the_largest(dev):
    """IB_SIZE is 20 bits (packets.md): an IB of 2^b dwords for each b up to 19, and of
    0xFFFFF, the largest, runs its first packets and a CHAIN that ends it (CHAIN: "the current
    IB ends"), so a bit of IB_SIZE the CP dropped would make it IB_SIZE_ZERO or a packet past
    the IB's end (BAD_COUNT), and PERF_DWORDS_FETCHED counts the dwords the packets took, none of
    the IB after the CHAIN; at IB2 as at IB1. A 5-dword WRITE_DATA fits in an IB of 0x10003
    dwords, not in one of 3 (BAD_COUNT). The SDMA's IB_SIZE likewise, every bit: its IBs end
    at an unknown packet, after their first packets ran."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    tail = write_data(OUT + 0x100, [0x7A11])
    g.w32(IB1B, tail)
    sizes = [1 << b for b in range(4, 20)] + [0xFFFFF]
    for k, n in enumerate(sizes):
        body = write_data(OUT + 4 * k, [n]) + ib(IB1B, len(tail), CHAIN=1)
        g.w32(IB1, body)
        g.w32(OUT + 0x100, [0])
        before = g.read("PERF_DWORDS_FETCHED")
        st = ring.run(ib(IB1, n))
        assert st["ERROR"] == 0, (n, ring.error_regs())
        assert (g.r32(OUT + 4 * k), g.r32(OUT + 0x100)) == (n, 0x7A11), f"IB_SIZE {n:#x}"
        # the dwords the packets took, nothing of the IB after its CHAIN (the model's count is
        # the RTL's: hardware.md, Counters and time)
        assert g.read("PERF_DWORDS_FETCHED") - before == 4 + len(body) + len(tail), (n, g.read("PERF_DWORDS_FETCHED"))
    # at IB2: the IB1 calls a 0xFFFFF-dword IB2 which chains
    inner = write_data(OUT + 0x80, [0x22]) + ib(IB1B, len(tail), CHAIN=1)
    g.w32(IB2, inner)
    outer = ib(IB2, 0xFFFFF) + write_data(OUT + 0x84, [0x11])
    g.w32(IB1, outer)
    g.w32(OUT + 0x100, [0])
    assert ring.run(ib(IB1, len(outer)))["ERROR"] == 0
    assert (g.r32(OUT + 0x80, 2), g.r32(OUT + 0x100)) == ([0x22, 0x11], 0x7A11)
    # the packet's fit is checked against every bit: 0x10003 holds a 5-dword WRITE_DATA ...
    g.w32(IB1, write_data(OUT + 0x88, [0x88]) + ib(IB1B, len(tail), CHAIN=1))
    assert ring.run(ib(IB1, 0x10003))["ERROR"] == 0 and g.r32(OUT + 0x88) == 0x88
    # ... 3 does not.
    ring.submit(ib(IB1, 3))
    expect_error(ring, ih, "BAD_COUNT", "IB1", P["WRITE_DATA"].opcode, IB1, 0)
    # The SDMA has no CHAIN: an IB of 2^b dwords whose third packet is an unknown one stops
    # there, ILLEGAL_OPCODE at IB offset 8, after its FENCE ran and a 4-dword NOP was read; a
    # dropped bit would be IB_SIZE_ZERO (or BAD_COUNT), and nothing past offset 8 is needed.
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    bad = [0x00000007]  # OP 7, SUB_OP 0: not in the table
    for k, n in enumerate([1 << b for b in range(4, 20)] + [0xFFFFF]):
        g.w32(IB2, sdma("FENCE", DATA=n, **lo_hi("ADDR", OUT + 0x200 + 4 * k, 2)) + sdma("NOP", [0] * 3, COUNT=3)
              + bad)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", IB2, 5), IB_SIZE=n))
        expect_sdma_error(s, ih, "ILLEGAL_OPCODE", "IB1", 7, IB2 + 32, 8)
        assert g.r32(OUT + 0x200 + 4 * k) == n, f"SDMA IB_SIZE {n:#x}: the FENCE did not run"



def check_count_fields_out_of_range(dev):
    """Check 2 (COUNT matches the opcode) on its own: every fixed-size packet with each COUNT
    from 0 to two past its own, the packet's dwords all inside the IB (so check 3 cannot be
    what fails), is BAD_COUNT at its header, and its own COUNT runs; a WRITE_DATA with COUNT
    0, 1 or 2 (no data dword) likewise. DMA_DATA's BYTE_COUNT is 26 bits: 2^20 + 1 and each
    bit above 20 alone (2^21 ... 2^25) and all 26 bits set are DMA_BYTE_COUNT, not a transfer
    of the bits the engine keeps."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    flag = OUT + 0x80
    g.w32(flag, [1])
    g.w32(IB1B, write_data(OUT + 0x84, [0x84]))
    good = {"INDIRECT_BUFFER": ib(IB1B, 5), "WAIT_REG_MEM": wait_mem(flag, 1, 1, "EQ"),
            "RELEASE_MEM": release_mem(OUT + 0x88, 0x88), "DMA_DATA": dma_data(OUT + 0x8C, 0x8C, 4, SRC_SEL="DATA")}
    for name, pkt in good.items():
        count = pkt[0] >> 16 & 0x3FFF
        assert count == len(pkt) - 2 and count == P[name].fixed - 1, (name, count)
        for c in range(count + 3):
            g.w32(IB1, [pkt[0] & ~(0x3FFF << 16) | c << 16] + pkt[1:] + [0xFFFF1000] * 4)
            ring.submit(ib(IB1, len(pkt) + 4))
            if c == count:
                assert g.idle()["ERROR"] == 0, (name, ring.error_regs())
                continue
            expect_error(ring, ih, "BAD_COUNT", "IB1", P[name].opcode, IB1, 0)
    assert g.r32(OUT + 0x84, 3) == [0x84, 0x88, 0x8C]
    wd = write_data(OUT + 0x90, [0x90])
    for c in (0, 1, 2):
        g.w32(IB1, [wd[0] & ~(0x3FFF << 16) | c << 16] + wd[1:] + [0xFFFF1000] * 4)
        ring.submit(ib(IB1, 9))
        expect_error(ring, ih, "BAD_COUNT", "IB1", P["WRITE_DATA"].opcode, IB1, 0)
    assert g.r32(OUT + 0x90) == 0, "a WRITE_DATA without data wrote"
    for n in [(1 << 20) + 1] + [1 << b for b in range(21, 26)] + [(1 << 26) - 1, (1 << 25) | 4]:
        g.w32(OUT + 0x94, [0])
        at = ring.wptr
        ring.submit(dma_data(OUT + 0x94, 0x94, n, SRC_SEL="DATA", CP_SYNC=1))
        expect_error(ring, ih, "DMA_BYTE_COUNT", "RING", P["DMA_DATA"].opcode, RING + 4 * at, at)
        assert g.r32(OUT + 0x94) == 0, f"BYTE_COUNT {n:#x}: the fill wrote"



def check_packet_addresses_reach_the_bus(dev):
    """Every address a packet names reaches the bus with its bits up to 47 (ADDR_HI's bits
    47:32): with one bit above the 64 MiB of memory set (HIGH_BITS), each access is
    BUS_DECERR at exactly that address, never a write or read of memory below it: the CP's
    WRITE_DATA, WAIT_REG_MEM, RELEASE_MEM, DMA_DATA's source and destination and an
    INDIRECT_BUFFER's fetch (LEVEL IB1, OPCODE 0: its header), and the SDMA's FENCE,
    WRITE_LINEAR, POLL_REGMEM, COPY_LINEAR's two sides, CONSTANT_FILL and INDIRECT_BUFFER;
    and the root directory of a translated VMID (VM_CONTEXT_PT_BASE_LO/HI) is read there: the
    walk answers WALK_ERROR at level 0."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 8, SRPTR_WB)
    P = pm4_packets()
    S = sdma_packets()
    src = OUT + 0x100
    g.w32(src, [0x5A5A5A5A] * 4)
    g.w32(OUT, [0] * 4)
    for bit in HIGH_BITS:
        a = 1 << bit
        cp = ((write_data(a, [1]), "WRITE_DATA"), (wait_mem(a, 0, 0, "ALWAYS"), "WAIT_REG_MEM"),
              (release_mem(a, 1), "RELEASE_MEM"), (dma_data(OUT, a, 16, CP_SYNC=1), "DMA_DATA"),
              (dma_data(a, src, 16, CP_SYNC=1), "DMA_DATA"),
              (dma_data(a, 7, 16, SRC_SEL="DATA", CP_SYNC=1), "DMA_DATA"))
        for pkt, name in cp:
            ring.submit(pkt)
            expect_error(ring, ih, "BUS_DECERR", "RING", P[name].opcode, a, 0)
        ring.submit(ib(a, 8))
        expect_error(ring, ih, "BUS_DECERR", "IB1", 0, a, 0)
        sd = ((sdma("FENCE", DATA=1, **lo_hi("ADDR", a, 2)), "FENCE"),
              (sdma("WRITE_LINEAR", [1, 2], COUNT=1, **lo_hi("DST_ADDR", a, 2)), "WRITE_LINEAR"),
              (sdma("POLL_REGMEM", **lo_hi("ADDR", a, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="MEMORY",
                    RETRY_COUNT=0xFFF, INTERVAL=1), "POLL_REGMEM"),
              (sdma("COPY_LINEAR", COUNT=15, **lo_hi("SRC_ADDR", a), **lo_hi("DST_ADDR", OUT)), "COPY_LINEAR"),
              (sdma("COPY_LINEAR", COUNT=15, **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", a)), "COPY_LINEAR"),
              (sdma("CONSTANT_FILL", SRC_DATA=7, COUNT=15, **lo_hi("DST_ADDR", a)), "CONSTANT_FILL"))
        for pkt, name in sd:
            s.submit(pkt)
            expect_sdma_error(s, ih, "BUS_DECERR", "RING", S[name].opcode, a, 0)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", a, 5), IB_SIZE=8))
        expect_sdma_error(s, ih, "BUS_DECERR", "IB1", 0, a, 0)
        assert g.r32(OUT, 4) == [0] * 4, f"bit {bit}: an access went below memory's end"
        # the root directory of VMID 1 beyond memory: WALK_ERROR at level 0
        g.write("VM_CONTEXT_PT_BASE_LO", a & M32 & ~0xFFF, 1)
        g.write("VM_CONTEXT_PT_BASE_HI", a >> 32, 1)
        g.set("VM_CONTEXT_CNTL", 1, ENABLE=1)
        g.set("VM_INVALIDATE_REQ", PER_VMID=2, ALL_ADDR=1)
        g.until(lambda: g.read("VM_INVALIDATE_ACK") == 2, "VM_INVALIDATE_ACK = VMID 1")
        ring.submit(ib(0x10_0000, 4, VMID=1))  # the IB's first fetch walks VMID 1's tables
        (e,) = expect_error(ring, ih, "VM_FAULT", "IB1", 0, 0x10_0000, 0)
        assert ih.source(e) == "VM_FAULT" and e["DATA2"] == g.value("VM_FAULT_STATUS", VMID=1, ACCESS=2, LEVEL=0,
                                                                     CAUSE=3), (bit, e)
        g.set("VM_CONTEXT_CNTL", 1, ENABLE=0)



# Opcodes no packet of packets.md has: each side of every implemented one, the ends, and
# gfx9 packets a driver ported from amdgpu or Mesa might send (CLEAR_STATE 0x12, COND_EXEC
# 0x22, CONTEXT_CONTROL 0x28, DRAW_INDEX_AUTO 0x2D, INDIRECT_BUFFER_CONST 0x33, COPY_DATA 0x40,
# PFP_SYNC_ME 0x42, EVENT_WRITE 0x46, ACQUIRE_MEM 0x58, SET_SH_REG 0x76, SET_UCONFIG_REG 0x79).
UNKNOWN_OPCODES = (0x00, 0x01, 0x0F, 0x11, 0x12, 0x22, 0x28, 0x2D, 0x33, 0x36, 0x38, 0x3B, 0x3D, 0x3E, 0x40,
                   0x42, 0x46, 0x48, 0x4A, 0x4F, 0x51, 0x58, 0x76, 0x79, 0x7F, 0x80, 0xFE, 0xFF)


def check_every_header_type_and_unknown_opcodes(dev):
    """packets.md's header: a type-0 or type-1 dword is ILLEGAL_OPCODE with OPCODE 0 whatever
    its bits 15:8 hold (an implemented opcode's too), a type-2 dword with any PAD is a
    one-dword NOP, a type-3 header with reserved bits 7:2 set runs as without them; every
    opcode of UNKNOWN_OPCODES is ILLEGAL_OPCODE with that OPCODE, whatever its COUNT, in the
    ring and in an IB. The SDMA's (OP, SUB_OP) pairs not in its table (an implemented OP with
    another SUB_OP too) are ILLEGAL_OPCODE with that OP and SUB_OP in SDMA_ERROR; a TRAP with
    every reserved bit set (its header's 31:16, its dword's 31:28) runs, its entry's DATA0 the
    28-bit INT_CONTEXT alone."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    assert not set(UNKNOWN_OPCODES) & {p.opcode for p in P.values()}
    wd = P["WRITE_DATA"].opcode
    for hdr in (0x0000_0000, 0x0003_3700, 0x3FFF_FFFF, 0x4000_0000, 0x4003_3700 | wd << 8, 0x7FFF_FFFF,
                0x4000_1000):
        ring.submit(pm4("NOP", [0]), [hdr, 0, 0, 0, 0])
        expect_error(ring, ih, "ILLEGAL_OPCODE", "RING", 0, RING + 8, 2)
    for pad in (0x8000_0000, 0xBFFF_FFFF, 0x8003_3700 | wd << 8):
        p = write_data(OUT, [pad & 0xFF])
        ring.run([pad], [p[0] | 0xFC] + p[1:])  # a type-2 pad, then a WRITE_DATA with reserved header bits set
        assert g.fields("STATUS")["ERROR"] == 0 and g.r32(OUT) == pad & 0xFF, hex(pad)
    assert g.read("PERF_PACKETS", P["NOP"].index) == 7 + 3, "the 7 NOPs before the illegal headers and 3 pads"
    for k, op in enumerate(UNKNOWN_OPCODES):
        count = (0, 1, 5, 0x3FFF)[k % 4]
        hdr = 0xC000_0000 | count << 16 | op << 8
        if k % 2:
            ring.submit([hdr, 0])
            expect_error(ring, ih, "ILLEGAL_OPCODE", "RING", op, RING, 0)
        else:
            g.w32(IB1, [0xFFFF1000, hdr, 0])
            ring.submit(ib(IB1, 3))
            expect_error(ring, ih, "ILLEGAL_OPCODE", "IB1", op, IB1 + 4, 1)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    known = {(q.opcode, q.sub_op) for q in sdma_packets().values()}
    pairs = [(op, sub) for op in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 0x7F, 0xFF) for sub in (0, 1, 0xFF)
             if (op, sub) not in known]
    assert len(pairs) == 16 * 3 - len(known)
    for k, (op, sub) in enumerate(pairs):
        s.submit([0] * (k % 2), [sub << 8 | op] + [0] * 8)
        st = g.idle("SDMA_STATUS")
        err = g.fields("SDMA_ERROR")
        assert (st["ERROR"], err["CODE"], err["OP"], err["SUB_OP"], g.read("SDMA_ERROR_OFFSET")) == \
            (1, g.err["ILLEGAL_OPCODE"], op, sub, k % 2), (op, sub, err)
        g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
        g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
        g.idle("SDMA_STATUS")
        s.wptr = 0
    # reserved bits are ignored, in the header and beside a field: a TRAP's entry carries its
    # INT_CONTEXT (bits 27:0) alone
    t = sdma("TRAP", INT_CONTEXT=0xABC_DEF1)
    assert s.run([t[0] | 0xFFFF_0000, t[1] | 0xF000_0000])["ERROR"] == 0
    (e,) = g.until(lambda: ih.pop() or None, "the TRAP's entry")
    assert (ih.source(e), e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == ("SDMA_TRAP", 0xABC_DEF1, 0, 0, 0), e



def check_a_packet_whose_payload_cannot_be_fetched_is_not_counted(dev):
    """PERF_PACKETS counts a packet "when it passes its checks and starts executing": one
    whose header was read but whose fixed payload runs into memory's end (DECERR at the first
    dword past it, OPCODE the packet's, OFFSET its header's) never did, every kind, and a NOP
    is counted only once every dword it skips is read (one failing at its first or its last
    payload dword is not); a WRITE_DATA whose fixed payload was read and whose
    data dword fails is counted (counted as it starts, whatever its data's fetch then
    meets). The SDMA's likewise in PERF_SDMA_PACKETS (its burst NOP, a FENCE, a
    COPY_LINEAR, and a WRITE_LINEAR, counted only once its last data dword is read)."""
    g, ring, ih = bring_up(dev)
    P, S = pm4_packets(), sdma_packets()
    end = 64 << 20  # the testbench memory's end: DECERR from there on

    def counted(reg, table):
        return {k: g.read(reg, table[k].index) for k in table if g.read(reg, table[k].index)}

    cases = [(write_data(OUT, [1])[:2], "WRITE_DATA", {}), (write_data(OUT, [1])[:4], "WRITE_DATA", {"WRITE_DATA": 1}),
             (pm4("NOP", [0, 0])[:1], "NOP", {}), (pm4("NOP", [0] * 8)[:8], "NOP", {}),
             (ib(IB1, 4)[:2], "INDIRECT_BUFFER", {}),
             (wait_mem(OUT, 0, 0, "ALWAYS")[:3], "WAIT_REG_MEM", {}), (release_mem(OUT, 1)[:7], "RELEASE_MEM", {}),
             (dma_data(OUT, OUT + 0x100, 4)[:6], "DMA_DATA", {})]
    for words, name, want in cases:
        g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
        base = end - 4 * len(words)
        g.w32(base, words)
        ring.submit(ib(base, 12))
        expect_error(ring, ih, "BUS_DECERR", "IB1", P[name].opcode, end, 0)
        assert counted("PERF_PACKETS", P) == {"INDIRECT_BUFFER": 1, **want}, (name, len(words))
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    cases = [(sdma("NOP", [0, 0], COUNT=2)[:1], "NOP"), (sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2))[:2], "FENCE"),
             (sdma("WRITE_LINEAR", [1], COUNT=0, **lo_hi("DST_ADDR", OUT, 2))[:4], "WRITE_LINEAR"),
             (sdma("COPY_LINEAR", COUNT=3, **lo_hi("SRC_ADDR", OUT), **lo_hi("DST_ADDR", OUT + 64))[:6], "COPY_LINEAR")]
    for words, name in cases:
        g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
        pads = 8 - len(words)  # one-dword NOPs from a 32-byte aligned IB base up to the packet
        g.w32(end - 32, [0] * pads + words)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", end - 32, 5), IB_SIZE=12))
        expect_sdma_error(s, ih, "BUS_DECERR", "IB1", S[name].opcode, end, pads)
        assert counted("PERF_SDMA_PACKETS", S) == {"INDIRECT_BUFFER": 1, "NOP": pads}, name


def check_errors_inside_a_chained_ib(dev):
    """A CHAIN's IB replaces the current one at its level: a packet in it is checked against
    the new IB's IB_SIZE (not what was left of the old), and an error in it names the new IB:
    OFFSET from its start, ADDR in it, LEVEL the level it runs at (IB1 chained from IB1, IB2
    from IB2); a fetch past memory's end in it is BUS_DECERR at that dword, OPCODE 0; while a
    chained IB waits, STATUS.LEVEL is its level and RB_RPTR still names the ring's packet."""
    g, ring, ih = bring_up(dev)
    P = pm4_packets()
    wd = write_data(OUT, [0x77])
    g.w32(IB1B, [0xFFFF1000] + wd)
    g.w32(IB1, pm4("NOP", [0]) + ib(IB1B, 6, CHAIN=1))
    assert ring.run(ib(IB1, 100))["ERROR"] == 0 and g.r32(OUT) == 0x77  # fits exactly
    g.w32(IB1, pm4("NOP", [0]) + ib(IB1B, 5, CHAIN=1))  # one dword short: BAD_COUNT in IB1B
    ring.submit(ib(IB1, 100))
    expect_error(ring, ih, "BAD_COUNT", "IB1", P["WRITE_DATA"].opcode, IB1B + 4, 1)
    g.w32(IB1B, [0xFFFF1000, 0x8000_0000, 0xC000_2A00, 0])  # opcode 0x2A at offset 2
    g.w32(IB2, pm4("NOP", [0]) + ib(IB1B, 4, CHAIN=1))
    g.w32(IB1, ib(IB2, 6))
    ring.submit(pm4("NOP", [0]), ib(IB1, 4))
    expect_error(ring, ih, "ILLEGAL_OPCODE", "IB2", 0x2A, IB1B + 8, 2)
    end = 64 << 20
    g.w32(end - 4, [0xFFFF1000])
    g.w32(IB1, pm4("NOP", [0]) + ib(end - 4, 4, CHAIN=1))
    ring.submit(ib(IB1, 6))
    expect_error(ring, ih, "BUS_DECERR", "IB1", 0, end, 1)
    flag = OUT + 0x40
    g.w32(flag, [0])
    g.w32(IB1B, [0xFFFF1000] + wait_mem(flag, 1, 1, "EQ") + write_data(OUT + 4, [0x78]))
    g.w32(IB2, ib(IB1B, 13, CHAIN=1))
    g.w32(IB1, ib(IB2, 4) + write_data(OUT + 8, [0x79]))
    ring.submit(pm4("NOP", [0]), ib(IB1, 9))
    st = g.waiting()
    assert (st["LEVEL"], g.read("RB_RPTR")) == (g.level["IB2"], 2), (st, g.read("RB_RPTR"))
    g.w32(flag, [1])
    assert g.idle()["ERROR"] == 0 and g.r32(OUT + 4, 2) == [0x78, 0x79] and g.read("RB_RPTR") == 6


def check_byte_counters_count_the_copy_engines_alone(dev):
    """registers.md: PERF_SDMA_BYTES_READ counts COPY_LINEAR's reads in whole bus beats (a
    3-byte copy on a 64-bit bus counts 8), PERF_SDMA_BYTES_WRITTEN the bytes COPY_LINEAR and
    CONSTANT_FILL wrote, exactly; a WRITE_LINEAR, a FENCE and a POLL_REGMEM count in neither.
    The CP's PERF_DMA_BYTES_* likewise count DMA_DATA alone, not a WRITE_DATA's or a
    RELEASE_MEM's write nor a WAIT_REG_MEM's read."""
    g, ring, ih = bring_up(dev)
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    g.w32(OUT, [1, 2, 3, 4])
    s.run(sdma("WRITE_LINEAR", [1, 2, 3, 4], COUNT=3, **lo_hi("DST_ADDR", OUT, 2)),
          sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT + 32, 2)),
          sdma("POLL_REGMEM", **lo_hi("ADDR", OUT, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
               RETRY_COUNT=0xFFF, INTERVAL=1))
    ring.run(write_data(OUT + 64, [1, 2]), release_mem(OUT + 72, 1), wait_mem(OUT, 1, M32, "EQ"))
    counters = ("PERF_SDMA_BYTES_READ", "PERF_SDMA_BYTES_WRITTEN", "PERF_DMA_BYTES_READ", "PERF_DMA_BYTES_WRITTEN")
    assert [g.read(c) for c in counters] == [0] * 4, [g.read(c) for c in counters]
    s.run(sdma("COPY_LINEAR", COUNT=2, **lo_hi("SRC_ADDR", OUT + 1), **lo_hi("DST_ADDR", OUT + 0x81)),
          sdma("CONSTANT_FILL", SRC_DATA=7, COUNT=4, **lo_hi("DST_ADDR", OUT + 0x91)))
    ring.run(dma_data(OUT + 0xA1, OUT + 5, 3, CP_SYNC=1), dma_data(OUT + 0xB1, 7, 5, SRC_SEL="DATA", CP_SYNC=1))
    assert [g.read(c) for c in counters] == [g.beats_bytes(OUT + 1, 3), 3 + 5, g.beats_bytes(OUT + 5, 3), 3 + 5], \
        [g.read(c) for c in counters]



def check_byte_counters_count_no_refused_write(dev):
    """registers.md: PERF_DMA_BYTES_WRITTEN and PERF_SDMA_BYTES_WRITTEN count the bytes written:
    a write burst the bus refuses (past memory's end: DECERR) or the MMU refuses (a read-only
    page: VM fault) writes nothing and counts nothing, on the RTL as on the model. Memory ends
    at 64 MiB, a 4 KiB boundary, where every bus width splits its bursts, so a fill half
    inside counts exactly its bytes inside; a fill far past the end, whose bursts all go out
    before the first refusal comes back, counts none (the RTL counted every W beat's strobes
    handed to the bus: 64, 256 and 0x400 where the model said 0, 128 and 0)."""
    g, ring, ih = bring_up(dev)
    end = 64 << 20
    op = pm4_packets()["DMA_DATA"].opcode
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    written = []
    for dst, n in ((end, 64), (end - 128, 256), (end + 0x1000, 0x400)):
        ring.submit(dma_data(dst, 0x01020304, n, SRC_SEL="DATA"))
        expect_error(ring, ih, "BUS_DECERR", "RING", op, max(dst, end), 0)
        written.append(g.read("PERF_DMA_BYTES_WRITTEN"))
    assert written == [0, 128, 128], f"PERF_DMA_BYTES_WRITTEN after each refused fill: {written}"
    assert g.r32(end - 128, 32) == [0x01020304] * 32, "the half inside was written"
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    S = sdma_packets()
    written = []
    for dst, n in ((end, 64), (end - 128, 256), (end + 0x1000, 0x400)):
        s.submit(sdma("CONSTANT_FILL", SRC_DATA=5, COUNT=n - 1, **lo_hi("DST_ADDR", dst)))
        expect_sdma_error(s, ih, "BUS_DECERR", "RING", S["CONSTANT_FILL"].opcode, max(dst, end), 0)
        written.append(g.read("PERF_SDMA_BYTES_WRITTEN"))
    assert written == [0, 128, 128], f"PERF_SDMA_BYTES_WRITTEN after each refused fill: {written}"
    # the MMU's refusal: a read-only page, from its first byte and from 8 bytes before it
    map_vmid1(g)
    g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
    written = []
    for dst, n in ((VA_RO, 64), (VA_RO - 8, 64)):
        body = sdma("CONSTANT_FILL", SRC_DATA=6, COUNT=n - 1, **lo_hi("DST_ADDR", dst))
        g.w32(PA_CODE, body)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE, 5), IB_SIZE=len(body), VMID=1))
        expect_sdma_error(s, ih, "VM_FAULT", "IB1", S["CONSTANT_FILL"].opcode, VA_RO, 0)
        written.append(g.read("PERF_SDMA_BYTES_WRITTEN"))
    assert written == [0, 8], f"PERF_SDMA_BYTES_WRITTEN after each fill of a read-only page: {written}"

def check_dwords_fetched_up_to_a_packet_error(dev):
    """PERF_DWORDS_FETCHED after a packet error (no DMA error: exact, the model's count the
    RTL's) counts the packets before it and what the failing packet's checks read: its header
    for ILLEGAL_OPCODE and BAD_COUNT (checks 1-3, a WRITE_DATA without a data dword too), its
    header and fixed payload for a field check (UNSUPPORTED, FENCE_MISALIGNED: checks 4-5) and
    for the checks after them (IB_MISALIGNED, IB_SIZE_ZERO, IB_NESTING, an IB base beyond the
    bus, DMA_BYTE_COUNT), in the ring and in an IB; the dwords after it, fetched ahead or not,
    are not counted; on either CP queue, in its own PERF_Qn_DWORDS_FETCHED."""
    g, ring, ih = bring_up(dev)
    w = wait_mem(OUT, 0, 0, "ALWAYS")
    misaligned = write_data(OUT, [1])
    misaligned[2] |= 2
    pads = [0xFFFF1000] * 8
    cases = (([pm4("NOP", [0] * 3), [0xC003_2A00, 0, 0, 0, 0]], None, "ILLEGAL_OPCODE", 4 + 1),
             ([pm4("NOP", [0]), [w[0] + (1 << 16)] + w[1:] + [0]], None, "BAD_COUNT", 2 + 1),
             ([write_data(OUT, [1], DST_SEL="REGISTER")], None, "UNSUPPORTED", 4),
             ([misaligned], None, "FENCE_MISALIGNED", 4),
             ([ib(IB1, 6)], [0xFFFF1000] + write_data(OUT, [1, 2]), "BAD_COUNT", 4 + 1 + 1),
             ([ib(IB1, 9)], [0xFFFF1000, 0xC003_2A00, 0, 0, 0, 0] + pads[:3], "ILLEGAL_OPCODE", 4 + 1 + 1),
             ([ib(IB1, 12)], [0xFFFF1000] + misaligned + pads[:6], "FENCE_MISALIGNED", 4 + 1 + 4))
    # the checks after the fields' (6: the IB's size, nesting and base; DMA_BYTE_COUNT) read the
    # fixed payload too; a WRITE_DATA whose COUNT leaves no data dword fails at its header
    ib_misaligned = ib(IB1B, 4)
    ib_misaligned[1] |= 1
    no_data = write_data(OUT, [1])[:4]
    no_data[0] -= 1 << 16
    cases += (([ib_misaligned], None, "IB_MISALIGNED", 4), ([ib(IB1B, 0)], None, "IB_SIZE_ZERO", 4),
              ([ib(1 << 48, 4)], None, "BUS_DECERR", 4), ([no_data], None, "BAD_COUNT", 1),
              ([dma_data(OUT, OUT + 64, (1 << g.fields("CAPS")["DMA_MAX_LOG2"]) + 1)], None, "DMA_BYTE_COUNT", 7),
              ([ib(IB1, 12)], ib(IB2, 4) + pads, "IB_NESTING", 4 + 4 + 4))
    assert g.fields("CAPS")["IB_LEVELS"] == 2
    g.w32(IB2, ib(IB1B, 4))  # the IB2 calls one level more
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)  # queue 1 alike, in its own part of the counter
    for q, mine, other in ((ring, "PERF_Q0_DWORDS_FETCHED", "PERF_Q1_DWORDS_FETCHED"),
                           (q1, "PERF_Q1_DWORDS_FETCHED", "PERF_Q0_DWORDS_FETCHED")):
        for packets, body, code, want in cases:
            g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
            if body:
                g.w32(IB1, body)
            q.submit(*packets, pads)
            assert g.idle(q.status)["ERROR"] == 1 and g.fields(q.error)["CODE"] == g.err[code], (q.p, code)
            assert [g.read(r) for r in ("PERF_DWORDS_FETCHED", mine, other)] == [want, want, 0], \
                (q.p, code, body is not None, g.read("PERF_DWORDS_FETCHED"), want)
            g.set("CP_QUEUE_RESET", **{"Q0" if q is ring else "Q1": 1})
            g.idle(q.status)
            q.wptr = 0
            ih.pop()
            g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))


def check_sdma_dwords_fetched_up_to_a_packet_error(dev):
    """PERF_SDMA_DWORDS_FETCHED after an SDMA packet error (no DMA error: exact, the model's
    count the RTL's) counts the packets before it and what the failing packet's checks read
    (docs/hardware.md, The SDMA copy engine, Counters): its header alone when the header decides
    (ILLEGAL_OPCODE; BAD_COUNT of a packet whose length the table or NOP's COUNT gives, or a
    WRITE_LINEAR whose fixed dwords do not fit either), a WRITE_LINEAR's header and three fixed
    dwords for a BAD_COUNT from its COUNT, and the whole packet for a field or alignment check
    (UNSUPPORTED, FENCE_MISALIGNED, IB_MISALIGNED) and for IB_SIZE_ZERO and IB_NESTING; in the
    ring and in an IB; nothing after it, though the ring holds more. PERF_SDMA_PACKETS does not
    count the failing packet."""
    g, ring, ih = bring_up(dev)
    S = sdma_packets()
    s = SdmaRing(g, SRING, 8)
    fence = sdma("FENCE", DATA=1, **lo_hi("ADDR", OUT, 2))
    misaligned = [fence[0], fence[1] | 2] + fence[2:]
    copy = lambda **kw: sdma("COPY_LINEAR", COUNT=3, **lo_hi("SRC_ADDR", OUT), **lo_hi("DST_ADDR", OUT + 64), **kw)  # noqa: E731
    wl = sdma("WRITE_LINEAR", [1, 2], COUNT=1, **lo_hi("DST_ADDR", OUT, 2))
    too_long = wl[:3] + [wl[3] | 40]  # COUNT 41: data dwords past the written ring space (or the IB)
    sib = lambda base, n: sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", base, 5), IB_SIZE=n)  # noqa: E731
    ib_misaligned = sib(IB1B, 4)
    ib_misaligned[1] |= 0x10
    unknown = [0x0000_0003]  # OP 3: no packet
    ring_cases = (  # (the failing packet's dwords up to the doorbell or IB_SIZE, its code, its dwords counted)
        (unknown, "ILLEGAL_OPCODE", 1), (copy()[:4], "BAD_COUNT", 1),
        ([sdma("NOP", [0] * 30, COUNT=30)[0]], "BAD_COUNT", 1), (wl[:2], "BAD_COUNT", 1),
        (too_long, "BAD_COUNT", 4), (copy(TMZ="SECURE"), "UNSUPPORTED", 7),
        (copy(SRC_SW="SWAP_16"), "UNSUPPORTED", 7), (misaligned, "FENCE_MISALIGNED", 4),
        (ib_misaligned, "IB_MISALIGNED", 6), (sib(IB1B, 0), "IB_SIZE_ZERO", 6))
    ib_cases = ((unknown, "ILLEGAL_OPCODE", 1), (copy()[:4], "BAD_COUNT", 1), (wl[:3], "BAD_COUNT", 1),
                (wl[:4], "BAD_COUNT", 4), (copy(TMZ="SECURE"), "UNSUPPORTED", 7),
                (misaligned, "FENCE_MISALIGNED", 4), (sib(IB1B, 4), "IB_NESTING", 6))
    nop = sdma("NOP", [0] * 3, COUNT=3)  # a burst NOP before the failing packet: 4 dwords
    for where, cases in (("RING", ring_cases), ("IB1", ib_cases)):
        for words, code, want in cases:
            g.write("CONTROL", g.value("CONTROL", PERF_CLEAR=1))
            op = words[0] & 0xFF
            if where == "RING":
                g.w32(SRING, [0xFF] * 32)  # what lies past the doorbell is never a packet
                # a packet that fits is followed by one-dword NOPs the fetchers may read ahead
                s.submit(nop, words, [] if code == "BAD_COUNT" else [0] * 8)
                expect_sdma_error(s, ih, code, "RING", op, SRING + 16, 4)
                packets, fetched = {"NOP": 1}, 4 + want
            else:
                g.w32(IB1, [0] + words + [0] * 8)  # a one-dword NOP, the packet, then NOPs but for BAD_COUNT
                s.submit(sib(IB1, 1 + len(words) + (0 if code == "BAD_COUNT" else 8)))
                expect_sdma_error(s, ih, code, "IB1", op, IB1 + 4, 1)
                packets, fetched = {"INDIRECT_BUFFER": 1, "NOP": 1}, 6 + 1 + want
            got = {k: g.read("PERF_SDMA_PACKETS", S[k].index) for k in S if g.read("PERF_SDMA_PACKETS", S[k].index)}
            assert (g.read("PERF_SDMA_DWORDS_FETCHED"), got) == (fetched, packets), (where, code, len(words), got)


CHECKS = [check_ib_size_every_bit_up_to_the_largest, check_count_fields_out_of_range,
          check_packet_addresses_reach_the_bus, check_every_header_type_and_unknown_opcodes,
          check_a_packet_whose_payload_cannot_be_fetched_is_not_counted, check_errors_inside_a_chained_ib,
          check_byte_counters_count_the_copy_engines_alone, check_byte_counters_count_no_refused_write,
          check_dwords_fetched_up_to_a_packet_error,
          check_sdma_dwords_fetched_up_to_a_packet_error]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
