"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): the CP and the SDMA side by side. Both faulting at once, one's reset while
the other runs, the transfers' order on each engine (WAR, WAW, DMA_DATA's RAW_WAIT), and
the IH entry of every source at its widest values.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (IB1, IH_BASE, IH_WB, M32, OUT, PA_CODE, RING, RING1, RPTR1_WB, RPTR_WB, SRING,
                                         SRPTR_WB, VA_CODE, Gpu, IhRing, Ring, SdmaRing, bring_up, dma_data, ib, lo_hi,
                                         map_vmid1, pm4_packets, release_mem, sdma, sdma_packets, write_data)


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
    from tests.model.contract.contract_driver import ih_entry

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


CHECKS = [check_cp_and_sdma_side_by_side, check_transfers_keep_war_and_waw_order,
          check_dma_raw_wait_and_reads_after_earlier_writes, check_ih_entry_of_every_source_fills_its_fields_alone]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())
