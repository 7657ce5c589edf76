"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone; split by concept from test_contract_vm.py, which has the page tables and
faults): the SDMA's accesses and the kernel's own traffic under translation. The SDMA needs
the permissions the CP does, a page with EXECUTABLE alone is fetched by both engines and
read by neither, a huge page's EXECUTABLE gates fetches from it, its fetch faults at page edges, a soft reset while it reports
an error; VMID 0 translated (ring fetches, write-backs, IH entries) and IH entry writes that
fault under it.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus (as contract_vm__check_*,
the name of the file they were split from).
"""

from __future__ import annotations

from tests.model.contract.contract_driver import (EXECUTABLE, IH_BASE, IH_WB, M32, OUT, PA_CODE, PA_OUT, PA_OUT2, PA_RO,
                                                  PDE_PTE, PT_L1, PT_ROOT, READABLE, RING, RPTR_WB, SRING, SRPTR_WB, VALID, VA_CODE,
                                                  VA_OUT, VA_RO, WRITEABLE, Gpu, IhRing, Ring, SdmaRing, bring_up,
                                                  dma_data, expect_fault, expect_sdma_error, ib, lo_hi, map_vmid1,
                                                  pm4_packets, release_mem, sdma, sdma_packets, wait_mem, write_data)
from tests.model.contract.on_the_model import on_the_model


def check_sdma_accesses_need_what_the_cps_do(dev):
    """The SDMA's accesses need the permissions the CP's do (docs/hardware.md, Page tables and
    faults: "the SDMA's accesses need the same"): a POLL_REGMEM and a COPY_LINEAR source
    READABLE, WRITE_LINEAR and CONSTANT_FILL WRITEABLE, an IB fetch EXECUTABLE; each fault is
    the SDMA's VM_FAULT at the address the packet named (a WRITE_LINEAR crossing into a page
    it may not write: that page's first byte), with its 241 entry carrying the IB's VMID, and
    VM_FAULT_STATUS stays 0 (the CP's); a RANGE address too."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    map_vmid1(g)
    va_wo = 0x105000  # a page the SDMA may write but not read
    g.w64(PT_L1 + 8 * (va_wo >> 12 & 511), PA_OUT2 | VALID | WRITEABLE)
    s = SdmaRing(g, SRING, 6)
    S = sdma_packets()
    g.w32(PA_RO, [0x1111] * 8)
    g.w32(PA_OUT2, [0x2222] * 8)
    poll = sdma("POLL_REGMEM", **lo_hi("ADDR", va_wo + 8, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="MEMORY",
                INTERVAL=1, RETRY_COUNT=0xFFF)
    cases = [
        (poll, "POLL_REGMEM", va_wo + 8),
        (sdma("COPY_LINEAR", COUNT=11, **lo_hi("SRC_ADDR", va_wo + 0x13), **lo_hi("DST_ADDR", VA_OUT + 0x100)),
         "COPY_LINEAR", va_wo + 0x13),
        (sdma("WRITE_LINEAR", [7, 8, 9, 10], **lo_hi("DST_ADDR", VA_RO + 0x40, 2), COUNT=3), "WRITE_LINEAR",
         VA_RO + 0x40),
        (sdma("WRITE_LINEAR", [7, 8, 9, 10], **lo_hi("DST_ADDR", VA_RO - 8, 2), COUNT=3), "WRITE_LINEAR", VA_RO),
        (sdma("CONSTANT_FILL", SRC_DATA=5, COUNT=6, **lo_hi("DST_ADDR", VA_RO + 0x61)), "CONSTANT_FILL", VA_RO + 0x61),
        (sdma("FENCE", DATA=3, **lo_hi("ADDR", 0x4000_0000 | VA_OUT, 2)), "FENCE", 0x4000_0000 | VA_OUT),  # RANGE
    ]
    for body, name, va in cases:
        g.w32(PA_CODE + 0x40, [0] + body)  # after a NOP: OFFSET 1
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x40, 5), IB_SIZE=len(body) + 1, VMID=1))
        st = g.idle("SDMA_STATUS")
        assert st["ERROR"] == 1, f"{name} at {va:#x}: no error"
        expect_sdma_error(s, ih, "VM_FAULT", "IB1", S[name].opcode, va, 1)
        e = ih.entry(ih.rptr - 32)  # the entry expect_sdma_error took
        assert e["VMID"] == 1, e
        assert g.read("VM_FAULT_STATUS") == 0
    assert g.r32(PA_RO, 8) == [0x1111] * 8, "nothing written to the read-only page"
    # an IB in a page without EXECUTABLE: its header's fetch, OP 0
    g.w32(PA_OUT + 0x200, [0] * 8)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_OUT + 0x200, 5), IB_SIZE=8, VMID=1))
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", 0, VA_OUT + 0x200, 0)
    # and the same packets run where the permissions allow
    g.w32(PA_OUT + 0x300, [0x33])
    body = sdma("POLL_REGMEM", **lo_hi("ADDR", VA_OUT + 0x300, 2), VALUE=0x33, MASK=M32, FUNC="EQ",
                MEM_POLL="MEMORY", INTERVAL=1, RETRY_COUNT=0xFFF) + \
        sdma("WRITE_LINEAR", [7, 8], **lo_hi("DST_ADDR", va_wo + 0x20, 2), COUNT=1) + \
        sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", VA_RO), **lo_hi("DST_ADDR", va_wo + 0x31))
    g.w32(PA_CODE + 0x40, body)
    st = s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x40, 5), IB_SIZE=len(body), VMID=1))
    assert st["ERROR"] == 0, g.fields("SDMA_ERROR")
    assert g.r32(PA_OUT2 + 0x20, 2) == [7, 8]
    assert bytes(g.dev.mem[PA_OUT2 + 0x31:PA_OUT2 + 0x39]) == bytes.fromhex("1111000011110000")


def check_vmid_0_translated_moves_the_kernels_own_traffic(dev):
    """VMID 0 is translated once its VM_CONTEXT_CNTL.ENABLE is set (docs/hardware.md: a VMID
    whose ENABLE is clear is not translated; the ring fetches, the rptr write-back, IH entries
    and their wptr write-back and the kernel ring's own packets run as VMID 0): every one of
    them then goes through VMID 0's tables, the SDMA ring's and its write-back too; a ring
    fetch from a page VMID 0 does not map is a VM_FAULT of VMID 0 at LEVEL RING."""
    g = Gpu(dev)
    root, l1 = 0x84000, 0x85000
    ih_wb = 0x90C0
    pa = {RING: 0x60000, 0x8000: 0x61000, IH_BASE: 0x62000, OUT: 0x63000, SRING: 0x64000, 0x9000: 0x65000}
    g.w64(root, l1 | VALID)  # VA 0 .. 2 MiB
    for va, p_ in pa.items():
        g.w64(l1 + 8 * (va >> 12), p_ | VALID | EXECUTABLE | READABLE | WRITEABLE)
    g.write("VM_CONTEXT_PT_BASE_LO", root, 0)
    g.set("VM_CONTEXT_CNTL", 0, ENABLE=1)
    ih = IhRing(g, IH_BASE, 6, ih_wb)
    ring = Ring(g, RING, 8, RPTR_WB)
    ring.base = pa[RING]  # the driver writes the packets where the ring's VA is mapped
    g.w32(pa[0x8000], [0xDEAD] * 64)
    st = ring.run(write_data(OUT + 8, [0x11]), release_mem(OUT + 12, 0x22, INT_SEL="SEND_INT", INT_CTXID=5))
    assert st["ERROR"] == 0, (g.fields("CP_ERROR"), g.fields("VM_FAULT_STATUS"))
    assert g.r32(pa[OUT] + 8, 2) == [0x11, 0x22] and g.r32(OUT + 8, 2) == [0, 0]
    assert g.r32(pa[0x8000] + (RPTR_WB & 0xFFF)) == ring.wptr, "the rptr write-back through VMID 0's tables"
    assert g.read("IH_WPTR") == 32
    g.until(lambda: g.r32(pa[0x9000] + (ih_wb & 0xFFF)) == 32, "the IH wptr write-back through VMID 0's tables")
    e = ih.entry(0)  # (read at the IH ring's VA: ih.entry reads memory at base, so look at the PA)
    raw = g.r32(pa[IH_BASE], 8)
    assert raw[0] & 0xFFFF == 181 << 8 | 0x14 and raw[4] == 5 and raw[7] == OUT + 12, [hex(x) for x in raw]
    assert e["raw"] == [0] * 8, "nothing at the IH ring's VA taken as physical"
    g.write("IH_RPTR", 32)
    # the SDMA ring and its write-back likewise
    s = SdmaRing(g, SRING, 6, SRPTR_WB)
    s.base = pa[SRING]
    st = s.run(sdma("FENCE", DATA=0x33, **lo_hi("ADDR", OUT + 16, 2)))
    assert st["ERROR"] == 0 and g.r32(pa[OUT] + 16) == 0x33
    assert g.r32(pa[0x8000] + (SRPTR_WB & 0xFFF)) == 16
    # a ring fetch VMID 0 does not map: its VM_FAULT, VMID 0, LEVEL RING (the entry at the IH's PA)
    g.w64(l1 + 8 * (RING >> 12), 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1, "VM_INVALIDATE_ACK = VMID 0")
    ring.doorbell((ring.wptr + 8) & M32)
    g.idle()
    assert g.fields("CP_ERROR") == {"CODE": g.err["VM_FAULT"], "LEVEL": g.level["RING"], "OPCODE": 0}
    off = ring.wptr % ring.size
    assert g.read("CP_ERROR_ADDR_LO") == RING + 4 * off and g.read("CP_ERROR_OFFSET") == off
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 0, "ACCESS": 2, "LEVEL": 1, "CAUSE": 0}
    g.until(lambda: g.read("IH_WPTR") == 64, "the VM_FAULT entry")
    raw = g.r32(pa[IH_BASE] + 32, 8)
    assert (raw[0] & 0xFFFF, raw[0] >> 24 & 0xF, raw[4]) == (0x1B, 0, (RING + 4 * off) >> 12), [hex(x) for x in raw]
    # the rptr write-back's page taken away: the CP's own write faults as the packet it follows
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    g.write("IH_RPTR", 64)
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1, EOP=1))
    g.w64(l1 + 8 * (RING >> 12), pa[RING] | VALID | EXECUTABLE)
    g.w64(l1 + 8 * (RPTR_WB >> 12), pa[0x8000] | VALID | READABLE)  # no WRITEABLE
    g.set("VM_INVALIDATE_REQ", PER_VMID=1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1, "VM_INVALIDATE_ACK = VMID 0")
    ring.submit(write_data(OUT + 20, [0x44]), write_data(OUT + 24, [0x55]))
    g.idle()
    assert g.r32(pa[OUT] + 20, 2) == [0x44, 0], "the packet done, the next not run"
    assert g.fields("CP_ERROR") == {"CODE": g.err["VM_FAULT"], "LEVEL": g.level["RING"],
                                    "OPCODE": pm4_packets()["WRITE_DATA"].opcode}, g.fields("CP_ERROR")
    assert (g.read("CP_ERROR_ADDR_LO"), g.read("CP_ERROR_OFFSET"), g.read("RB_RPTR")) == (RPTR_WB, 0, 5)
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 0, "ACCESS": 1, "LEVEL": 1, "CAUSE": 1}
    g.until(lambda: g.read("IH_WPTR") == 96, "the VM_FAULT entry")
    raw = g.r32(pa[IH_BASE] + 64, 8)
    assert (raw[0] & 0xFFFF, raw[4], raw[5]) == (0x1B, RPTR_WB >> 12, 0x20), [hex(x) for x in raw]


def check_ih_entry_writes_that_fault_under_vmid_0(dev):
    """With VMID 0 translated, an IH entry written to a page VMID 0 may not write fails as the
    write it is (docs/hardware.md, Errors: the CP's own writes fail like a packet's; a failed IH
    write is the SDMA's error): a RELEASE_MEM's EOP entry stops queue 0 with VM_FAULT of that
    RELEASE_MEM (its data written first), VM_FAULT_STATUS VMID 0 WRITE at the entry's address,
    IH_WPTR unchanged and no entry anywhere (the fault's own cannot be written), INT_STATUS's
    CP_ERROR the only sign (EOP is set as IH_WPTR moves, which it does not); an SDMA TRAP's entry stops the SDMA with its VM_FAULT at
    that address, VM_FAULT_STATUS untouched; both run again once the page is writeable."""
    g = Gpu(dev)
    root, l1 = 0x84000, 0x85000
    pa = {RING: 0x60000, 0x8000: 0x61000, IH_BASE: 0x62000, OUT: 0x63000, SRING: 0x64000}
    g.w64(root, l1 | VALID)
    for va, p_ in pa.items():
        g.w64(l1 + 8 * (va >> 12), p_ | VALID | EXECUTABLE | READABLE | (WRITEABLE if va != IH_BASE else 0))
    g.write("VM_CONTEXT_PT_BASE_LO", root, 0)
    g.set("VM_CONTEXT_CNTL", 0, ENABLE=1)
    IhRing(g, IH_BASE, 6, IH_WB)
    ring = Ring(g, RING, 8, RPTR_WB)
    ring.base = pa[RING]
    P, S = pm4_packets(), sdma_packets()
    g.w32(pa[IH_BASE], [0xEEEE] * 16)
    ring.submit(release_mem(OUT, 0x21, INT_SEL="SEND_INT", INT_CTXID=1), write_data(OUT + 4, [0x22]))
    g.idle()
    err = g.fields("CP_ERROR")
    assert err == {"CODE": g.err["VM_FAULT"], "LEVEL": g.level["RING"], "OPCODE": P["RELEASE_MEM"].opcode}, err
    assert (g.read("CP_ERROR_ADDR_LO"), g.read("CP_ERROR_OFFSET")) == (IH_BASE, 0)
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 0, "ACCESS": 1, "LEVEL": 1, "CAUSE": 1}
    assert g.r32(pa[OUT], 2) == [0x21, 0], "the RELEASE_MEM's data written, the next packet not run"
    st = g.fields("INT_STATUS")
    assert (g.read("IH_WPTR"), st["CP_ERROR"], st["EOP"], st["IH_PENDING"]) == (0, 1, 0, 0), st
    assert g.r32(pa[IH_BASE], 16) == [0xEEEE] * 16 and g.r32(IH_BASE, 16) == [0] * 16, "no entry anywhere"
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ring.wptr = 0
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1, EOP=1))
    assert g.read("VM_FAULT_STATUS") == 0
    s = SdmaRing(g, SRING, 6)
    s.base = pa[SRING]
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.submit(sdma("TRAP", INT_CONTEXT=3), sdma("FENCE", DATA=0x23, **lo_hi("ADDR", OUT + 8, 2)))
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1, st
    got = (g.fields("SDMA_ERROR"), g.read("SDMA_ERROR_ADDR_LO"), g.read("SDMA_ERROR_OFFSET"))
    assert got == ({"SUB_OP": 0, "OP": S["TRAP"].opcode, "LEVEL": g.level["RING"], "CODE": g.err["VM_FAULT"]},
                   IH_BASE, 0), got
    assert (g.read("IH_WPTR"), g.read("VM_FAULT_STATUS"), g.r32(pa[OUT] + 8)) == (0, 0, 0)
    assert g.fields("STATUS")["ERROR"] == 0, "the CP untouched"
    g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    g.w64(l1 + 8 * (IH_BASE >> 12), pa[IH_BASE] | VALID | WRITEABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1, "VM_INVALIDATE_ACK = VMID 0")
    assert ring.run(release_mem(OUT + 12, 0x24, INT_SEL="SEND_INT", INT_CTXID=4))["ERROR"] == 0
    assert s.run(sdma("TRAP", INT_CONTEXT=5))["ERROR"] == 0
    g.until(lambda: g.read("IH_WPTR") == 64, "both entries")
    raw = g.r32(pa[IH_BASE], 16)
    assert (raw[4], raw[8] & 0xFFFF, raw[12]) == (4, 224 << 8 | 0x08, 5), [hex(x) for x in raw]


def check_soft_reset_while_the_sdma_reports_an_error_leaves_no_entry(dev):
    """CONTROL.SOFT_RESET is done when STATUS.IDLE, CP_HQD1_STATUS.IDLE and SDMA_STATUS.IDLE
    all read 1, and then IH_WPTR is 0 and the error latches are clear (docs/hardware.md,
    Errors). Written 0 to 79 cycles after the doorbells of a CP IB and an SDMA IB whose walks
    fail (VMID 2's root beyond memory), it must leave no IH entry behind it. On the RTL before
    6 December 2026 (64-bit bus, 35 cycles) the SDMA_ERROR entry the SDMA requested in the
    reset's own cycle survived it and was written after it (IH_WPTR 32, IH_PENDING 1, an
    SDMA_ERROR entry for an error SDMA_ERROR no longer held; 32-bit bus: 44 cycles), and so
    did a TRAP's entry requested in the reset's cycle (7 cycles, both widths), and a
    POLL_REGMEM's POLL_TIMEOUT entry:
    rtl/sdma/engine.py cleared `ih_valid` on CONTROL.SOFT_RESET before its FSM, whose
    ERR_DRAIN (and the TRAP's state) set it in the same cycle and won; the RESET state then
    waited for the CP to take the request, which the CP, reset, wrote at IH_WPTR 0. The
    clear now comes after the FSM (driver-writer-4)."""
    g, ring, ih = bring_up(dev)
    g.write("VM_CONTEXT_PT_BASE_LO", 0x1000_0000, 2)  # beyond the 64 MiB: the walk's first read fails
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)
    s = SdmaRing(g, SRING, 6)
    left = []
    for d in range(80):
        g.w32(IH_BASE, [0] * 16)
        ring.submit(ib(0x3000, 8, VMID=2))
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", 0x3000, 5), IB_SIZE=8, VMID=2))
        g.dev.delay(d)
        g.set("CONTROL", SOFT_RESET=1)
        g.until(lambda: all(g.fields(r)["IDLE"] for r in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS")), "all idle")
        g.dev.delay(100)
        assert (g.fields("STATUS")["ERROR"], g.fields("SDMA_STATUS")["ERROR"], g.read("CP_ERROR"),
                g.read("SDMA_ERROR"), g.read("VM_FAULT_STATUS")) == (0, 0, 0, 0, 0), d
        assert [g.read(r) for r in ("RB_RPTR", "RB_WPTR", "SDMA_RB_RPTR", "SDMA_RB_WPTR")] == [0] * 4, d
        if g.read("IH_WPTR"):
            e = ih.entry(0)
            left.append((d, g.read("IH_WPTR"), ih.source(e), hex(e["DATA0"])))
        g.write("IH_RPTR", 0)
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
        g.set("CONTROL", SOFT_RESET=1)  # (again, for an entry that came after the reset)
        g.until(lambda: all(g.fields(r)["IDLE"] for r in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS")), "all idle")
        g.write("IH_RPTR", 0)
        ih.rptr = ring.wptr = s.wptr = 0
    def reset_after(d: int, submit) -> None:
        """`submit()` an SDMA packet, reset `d` cycles later; note an entry written after."""
        submit()
        g.dev.delay(d)
        for again in (False, True):  # (again, for an entry that came after the reset)
            g.set("CONTROL", SOFT_RESET=1)
            g.until(lambda: all(g.fields(r)["IDLE"] for r in ("STATUS", "CP_HQD1_STATUS", "SDMA_STATUS")),
                    "all idle")
            if not again:
                g.dev.delay(100)
                if g.read("IH_WPTR"):
                    e = ih.entry(0)
                    left.append((d, g.read("IH_WPTR"), ih.source(e), hex(e["DATA0"])))
            g.write("IH_RPTR", 0)
        ih.rptr = ring.wptr = s.wptr = 0

    # ... and a TRAP's entry (SDMA_CNTL.TRAP_ENABLE) requested in the reset's cycle (RTL: 7 cycles)
    for d in range(60):
        g.set("SDMA_CNTL", TRAP_ENABLE=1)
        reset_after(d, lambda: s.submit(sdma("TRAP", INT_CONTEXT=d)))
    # ... and a POLL_REGMEM's POLL_TIMEOUT entry requested in the reset's cycle (RTL: 26 cycles)
    flag = OUT + 0x40
    g.w32(flag, [0])
    for d in range(80):
        reset_after(d, lambda: s.submit(sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=1, FUNC="EQ",
                                             MEM_POLL="MEMORY", RETRY_COUNT=1, INTERVAL=0)))
    assert not left, f"entries written after CONTROL.SOFT_RESET was done (delay, IH_WPTR, source, DATA0): {left}"
    assert ring.run(write_data(OUT, [1]))["ERROR"] == 0 and s.run(sdma("FENCE", DATA=2, **lo_hi("ADDR", OUT + 4, 2)))["ERROR"] == 0
    assert g.r32(OUT, 2) == [1, 2]


def check_sdma_fetch_faults_at_page_edges_and_virtual_addresses(dev):
    """The SDMA in a translated IB, as the CP's: an IB that ends at its page's end never
    touches the next page (no fetch fault), a header in a page without EXECUTABLE is
    VM_FAULT with OP 0 (no packet yet) at that dword, a payload dword there is VM_FAULT with
    the packet's OP at that dword and OFFSET its header's; a POLL_TIMEOUT entry names the
    polled virtual address; addresses' bits above 47 are dropped before translation."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, 6, IH_WB)
    map_vmid1(g)
    s = SdmaRing(g, SRING, 6)
    S = sdma_packets()
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    fence = lambda off, v: sdma("FENCE", DATA=v, **lo_hi("ADDR", VA_OUT + off, 2))  # noqa: E731
    tail = VA_CODE + 0x1000 - 32  # the IB's last 8 dwords of VA_CODE; VA_OUT (not executable) follows
    g.w32(PA_CODE + 0x1000 - 32, fence(0x50, 0x61) + fence(0x54, 0x62))
    s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", tail, 5), IB_SIZE=8, VMID=1))
    assert g.fields("SDMA_STATUS")["ERROR"] == 0 and g.r32(PA_OUT + 0x50, 2) == [0x61, 0x62]
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", tail, 5), IB_SIZE=12, VMID=1))
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", 0, VA_OUT, 8)  # the header at VA_OUT: OP 0
    g.w32(PA_CODE + 0x1000 - 32, [0] * 6 + fence(0x58, 0x63)[:2])  # FENCE's ADDR_HI is VA_OUT's first dword
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", tail, 5), IB_SIZE=10, VMID=1))
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", S["FENCE"].opcode, VA_OUT, 6)
    assert g.read("VM_FAULT_STATUS") == 0 and g.r32(PA_OUT + 0x58) == 0
    body = sdma("POLL_REGMEM", **lo_hi("ADDR", VA_OUT + 0x5C, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                RETRY_COUNT=0, INTERVAL=1) \
        + sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", 1 << 48 | VA_OUT + 0x50),
               **lo_hi("DST_ADDR", 0xFFFF << 48 | VA_OUT + 0x60)) + fence(0x68, 0x64)
    g.w32(PA_OUT + 0x5C, [0x0BAD])
    g.w32(PA_CODE, body + [0] * (-len(body) % 8))
    s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE, 5), IB_SIZE=len(body), VMID=1))
    assert g.fields("SDMA_STATUS")["ERROR"] == 0
    assert g.r32(PA_OUT + 0x60, 3) == [0x61, 0x62, 0x64], "bits above 47 dropped, then translated"
    (e,) = g.until(lambda: ih.pop() or None, "the POLL_TIMEOUT entry")
    assert (ih.source(e), e["VMID"], e["DATA0"], e["DATA1"], e["DATA2"]) == \
        ("SDMA_POLL_TIMEOUT", 1, VA_OUT + 0x5C, 0, 0x0BAD), e


def check_an_executable_page_is_fetched_not_read(dev):
    """EXECUTABLE lets commands be fetched from a page, not read (docs/hardware.md, Page tables
    and faults: ring and IB fetches need EXECUTABLE, polls and DMA sources READABLE; the MMU's
    "a read needs READABLE (EXECUTABLE for a FETCH)"). A page whose PTE has EXECUTABLE alone:
    an IB in it runs on the CP and on the SDMA, and a WAIT_REG_MEM poll and a DMA_DATA source
    in that page (named by IBs in it, so its leaf is in the TLB by then) are PERMISSION faults
    at level 1, ACCESS READ and DMA_READ with the READ hint; the SDMA's POLL_REGMEM and
    COPY_LINEAR source there are its VM_FAULT at the address named, VM_FAULT_STATUS 0."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    va_x, pa_x = 0x106000, 0x94000  # EXECUTABLE alone
    g.w64(PT_L1 + 8 * (va_x >> 12 & 511), pa_x | VALID | EXECUTABLE)
    P, S = pm4_packets(), sdma_packets()
    g.w32(pa_x + 0x800, [0x5A5A] * 8)  # what the polls and copies would read
    body = write_data(VA_OUT + 0x10, [0xA1])
    g.w32(pa_x, body)
    st = ring.run(ib(va_x, len(body), VMID=1))
    assert st["ERROR"] == 0 and g.r32(PA_OUT + 0x10) == 0xA1, (g.fields("CP_ERROR"), g.fields("VM_FAULT_STATUS"))
    R, DR = 0, 3
    g.w32(pa_x + 0x40, wait_mem(va_x + 0x800, 0, 0, "ALWAYS"))
    ring.submit(ib(va_x + 0x40, 7, VMID=1))
    expect_fault(ring, ih, va_x + 0x800, R, 1, 1, P["WAIT_REG_MEM"].opcode, 0, 0x40)
    body = dma_data(VA_OUT + 0x100, va_x + 0x804, 16, CP_SYNC=1)
    g.w32(pa_x + 0x80, body)
    ring.submit(ib(va_x + 0x80, len(body), VMID=1))
    expect_fault(ring, ih, va_x + 0x804, DR, 1, 1, P["DMA_DATA"].opcode, 0, 0x40)
    assert g.r32(PA_OUT + 0x100, 4) == [0] * 4, "nothing copied from a page without READABLE"
    s = SdmaRing(g, SRING, 6)
    body = sdma("FENCE", DATA=0xB2, **lo_hi("ADDR", VA_OUT + 0x20, 2))
    g.w32(pa_x + 0x200, body)
    st = s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", va_x + 0x200, 5), IB_SIZE=len(body), VMID=1))
    assert st["ERROR"] == 0 and g.r32(PA_OUT + 0x20) == 0xB2, g.fields("SDMA_ERROR")
    cases = [(sdma("POLL_REGMEM", **lo_hi("ADDR", va_x + 0x808, 2), VALUE=0, MASK=0, FUNC="ALWAYS", MEM_POLL="MEMORY",
                   INTERVAL=1, RETRY_COUNT=0xFFF), "POLL_REGMEM", va_x + 0x808),
             (sdma("COPY_LINEAR", COUNT=7, **lo_hi("SRC_ADDR", va_x + 0x810), **lo_hi("DST_ADDR", VA_OUT + 0x200)),
              "COPY_LINEAR", va_x + 0x810)]
    for k, (body, name, va) in enumerate(cases):
        g.w32(pa_x + 0x240 + 0x40 * k, body)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", va_x + 0x240 + 0x40 * k, 5), IB_SIZE=len(body), VMID=1))
        expect_sdma_error(s, ih, "VM_FAULT", "IB1", S[name].opcode, va, 0)
        assert g.read("VM_FAULT_STATUS") == 0, name
    assert g.r32(PA_OUT + 0x200, 2) == [0, 0], "nothing copied from a page without READABLE"


def check_a_huge_page_s_executable_bit_gates_fetches_from_it(dev):
    """A directory entry with PDE_PTE maps a huge page "with its own permissions"
    (docs/hardware.md, Virtual memory), EXECUTABLE among them: an IB in a 2 MiB page whose
    root entry has EXECUTABLE runs on the CP and on the SDMA; one in a huge page without it
    is a FETCH PERMISSION fault at LEVEL 0 (its header: OPCODE 0, the EXE hint; the SDMA's
    VM_FAULT, OP 0); and an IB whose packet runs past the executable huge page's end into a
    root entry not VALID faults at the next range's first byte, LEVEL 0 INVALID, with the
    packet's opcode (a payload dword), the dwords before it fetched."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P, S = pm4_packets(), sdma_packets()
    huge_x, pa_x = 0xC00000, 0xA00000  # root index 6: EXECUTABLE | READABLE
    huge_nx, pa_nx = 0x600000, 0xC00000  # root index 3: READABLE | WRITEABLE
    g.w64(PT_ROOT + 8 * (huge_x >> 21), pa_x | VALID | PDE_PTE | EXECUTABLE | READABLE)
    g.w64(PT_ROOT + 8 * (huge_nx >> 21), pa_nx | VALID | PDE_PTE | READABLE | WRITEABLE)
    edge = huge_x + (2 << 20)  # root index 7: not VALID
    body = write_data(VA_OUT + 0x30, [0xC1])
    g.w32(pa_x + 0x1F_0000, body)
    st = ring.run(ib(huge_x + 0x1F_0000, len(body), VMID=1))
    assert st["ERROR"] == 0 and g.r32(PA_OUT + 0x30) == 0xC1, (g.fields("CP_ERROR"), g.fields("VM_FAULT_STATUS"))
    F = 2
    g.w32(pa_nx + 0x40, body)
    ring.submit(ib(huge_nx + 0x40, len(body), VMID=1))
    expect_fault(ring, ih, huge_nx + 0x40, F, 0, 1, 0, 0, 0x10)
    body = write_data(VA_OUT + 0x34, [0xC2, 0xC3])  # header and control in the page, ADDR_LO at edge
    g.w32(pa_x + (2 << 20) - 8, body[:2])
    ring.submit(ib(edge - 8, len(body), VMID=1))
    expect_fault(ring, ih, edge, F, 0, 0, P["WRITE_DATA"].opcode, 0, 0x10)
    assert g.r32(PA_OUT + 0x34, 2) == [0, 0], "the packet did not run"
    s = SdmaRing(g, SRING, 6)
    body = sdma("FENCE", DATA=0xC4, **lo_hi("ADDR", VA_OUT + 0x3C, 2))
    g.w32(pa_x + 0x1F_0100, body)
    st = s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", huge_x + 0x1F_0100, 5), IB_SIZE=len(body), VMID=1))
    assert st["ERROR"] == 0 and g.r32(PA_OUT + 0x3C) == 0xC4, g.fields("SDMA_ERROR")
    g.w32(pa_nx + 0x100, body)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", huge_nx + 0x100, 5), IB_SIZE=len(body), VMID=1))
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", 0, huge_nx + 0x100, 0)
    assert g.read("VM_FAULT_STATUS") == 0


CHECKS = [check_sdma_accesses_need_what_the_cps_do, check_vmid_0_translated_moves_the_kernels_own_traffic,
          check_ih_entry_writes_that_fault_under_vmid_0,
          check_soft_reset_while_the_sdma_reports_an_error_leaves_no_entry,
          check_sdma_fetch_faults_at_page_edges_and_virtual_addresses, check_an_executable_page_is_fetched_not_read,
          check_a_huge_page_s_executable_bit_gates_fetches_from_it]


test_contract_on_the_model = on_the_model(CHECKS)
