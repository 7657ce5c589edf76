"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): virtual memory. Page tables as docs/hardware.md lays them out, the bits the
MMU ignores, every fault cause and access kind with what VM_FAULT_* and the UTCL2 entry
hold, faults at page edges, which queue's fault VM_FAULT_STATUS shows, and TLB invalidation.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (EXECUTABLE, IB1, IH_BASE, IH_WB, M32, OUT, RING, RPTR_WB, SRPTR_WB, PA_CODE, PA_HUGE, PA_OUT,
                                         PA_OUT2, PA_RO, PDE_PTE, PT_L1, PT_ROOT, READABLE, RING1, RPTR1_WB, SRING,
                                         VALID, VA_CODE, VA_HOLE, VA_HUGE, VA_OUT, VA_RO, WRITEABLE, Gpu, IhRing,
                                         Ring, SdmaRing, bring_up, dma_data, expect_error, expect_fault,
                                         expect_sdma_error, ib, lo_hi, map_vmid1, pm4, pm4_packets, release_mem,
                                         sdma, sdma_packets, wait_mem, write_data)


def check_vm_translation_faults_and_invalidate(dev):
    """A VMID's page tables as the docs lay them out, the IB's VMID in its entries, every
    fault cause and access kind with what VM_FAULT_* and the UTCL2 entry hold, and an
    invalidation that makes a changed PTE seen."""
    g, ring, ih = bring_up(dev)
    assert g.fields("VM_CAPS") == {"LEVELS": 2, "VMIDS": 16, "TLB_LOG2": 4}
    map_vmid1(g)
    assert g.read("VM_CONTEXT_PT_BASE_LO", 1) == PT_ROOT
    P = pm4_packets()
    code = write_data(VA_OUT + 8, [0x1111]) + write_data(VA_HUGE + 0x12344, [0x2222]) + \
        release_mem(VA_OUT + 16, 0x3333, INT_SEL="SEND_INT", INT_CTXID=1)
    g.w32(PA_CODE, code)
    ring.run(ib(VA_CODE, len(code), VMID=1))
    assert (g.r32(PA_OUT + 8), g.r32(PA_HUGE + 0x12344), g.r32(PA_OUT + 16)) == (0x1111, 0x2222, 0x3333)
    (e,) = ih.pop()
    assert (ih.source(e), e["VMID"], e["DATA3"]) == ("EOP", 1, VA_OUT + 16), "an IB's entry has its VMID"

    def run_ib(body, entry=VA_CODE):
        g.w32(PA_CODE, body)
        ring.submit(ib(entry, len(body), VMID=1))

    W, R, F, DR, DW = 1, 0, 2, 3, 4
    run_ib(pm4("NOP", [0]) + write_data(VA_RO + 4, [1]))  # a PTE without WRITEABLE
    expect_fault(ring, ih, VA_RO + 4, W, 1, 1, P["WRITE_DATA"].opcode, 2, 0x20)
    run_ib(wait_mem(VA_HOLE, 0, 0, "ALWAYS"))  # a page-table entry not VALID
    expect_fault(ring, ih, VA_HOLE, R, 1, 0, P["WAIT_REG_MEM"].opcode, 0, 0x40)
    run_ib(write_data(0x400000, [1]))  # a root entry not VALID
    expect_fault(ring, ih, 0x400000, W, 0, 0, P["WRITE_DATA"].opcode, 0, 0x20)
    far = 0x5000_0000_1000  # bits 47:44 = 5, beyond the 30-bit reach
    run_ib(release_mem(far, 1))
    expect_fault(ring, ih, far, W, 0, 2, P["RELEASE_MEM"].opcode, 0, 0x20)
    run_ib(dma_data(VA_OUT, VA_HOLE + 0x10, 16, CP_SYNC=1))
    expect_fault(ring, ih, VA_HOLE + 0x10, DR, 1, 0, P["DMA_DATA"].opcode, 0, 0x40)
    run_ib(dma_data(VA_RO + 0x20, VA_OUT, 16, CP_SYNC=1))
    expect_fault(ring, ih, VA_RO + 0x20, DW, 1, 1, P["DMA_DATA"].opcode, 0, 0x20)
    g.w32(PA_OUT, [0xFFFF1000] * 4)
    ring.submit(ib(VA_OUT, 4, VMID=1))  # a fetch from a page without EXECUTABLE: header, OPCODE 0
    expect_fault(ring, ih, VA_OUT, F, 1, 1, 0, 0, 0x10)
    # Invalidation: point VA_OUT at another page; after VM_INVALIDATE_ACK shows VMID 1, the
    # next translation reads the new entry.
    run_ib(write_data(VA_OUT + 0x40, [0x44]))
    g.idle()
    assert g.r32(PA_OUT + 0x40) == 0x44
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE)
    g.write("VM_INVALIDATE_ADDR_LO", VA_OUT >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    assert g.read("VM_INVALIDATE_REQ") == 0, "write-only"
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    run_ib(write_data(VA_OUT + 0x40, [0x55]))
    g.idle()
    assert g.r32(PA_OUT2 + 0x40) == 0x55 and g.r32(PA_OUT + 0x40) == 0x44
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=0xFFFF, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0xFFFF, "VM_INVALIDATE_ACK = every VMID")
    run_ib(write_data(VA_OUT + 0x40, [0x66]))
    g.idle()
    assert g.r32(PA_OUT + 0x40) == 0x66
    # A failed translation is never kept: a new entry needs no invalidation.
    run_ib(write_data(VA_HOLE + 0x40, [0x88]))
    expect_fault(ring, ih, VA_HOLE + 0x40, W, 1, 0, P["WRITE_DATA"].opcode, 0, 0x20)
    g.w64(PT_L1 + 8 * (VA_HOLE >> 12 & 511), PA_OUT2 | VALID | WRITEABLE)
    run_ib(write_data(VA_HOLE + 0x40, [0x89]))
    g.idle()
    assert g.fields("STATUS")["ERROR"] == 0 and g.r32(PA_OUT2 + 0x40) == 0x89
    # VMID 0 (ENABLE clear) is physical.
    ring.run(write_data(PA_OUT + 0x44, [0x77]))
    assert g.r32(PA_OUT + 0x44) == 0x77

def check_vm_fault_status_follows_the_stopped_queue(dev):
    """VM_FAULT_STATUS holds the fault of the queue it stopped, queue 0's when both are, 0
    once neither is; a far address in a translated IB is BUS_DECERR, nothing in VM_FAULT_*."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    P = pm4_packets()
    g.w32(PA_CODE, write_data(VA_RO, [1]) + wait_mem(VA_HOLE + 8, 0, 0, "ALWAYS"))
    q1.submit(ib(VA_CODE, 5, VMID=1))
    g.idle("CP_HQD1_STATUS")
    q1_fault = g.fields("VM_FAULT_STATUS")
    assert q1_fault == {"VMID": 1, "ACCESS": 1, "LEVEL": 1, "CAUSE": 1}, q1_fault
    assert g.read("VM_FAULT_ADDR_LO") == VA_RO
    g.w32(PA_CODE + 0x100, wait_mem(VA_HOLE + 8, 0, 0, "ALWAYS"))
    q0.submit(ib(VA_CODE + 0x100, 7, VMID=1))
    g.idle()
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 1, "ACCESS": 0, "LEVEL": 1, "CAUSE": 0}
    assert g.read("VM_FAULT_ADDR_LO") == VA_HOLE + 8, "queue 0's fault when both queues are stopped by one"
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    q0.wptr = 0
    assert g.fields("VM_FAULT_STATUS") == q1_fault and g.read("VM_FAULT_ADDR_LO") == VA_RO
    g.set("CP_QUEUE_RESET", Q1=1)
    g.idle("CP_HQD1_STATUS")
    q1.wptr = 0
    assert g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0
    ih.pop()
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    far = 0x0001_0000_0000_0000 | VA_OUT
    g.w32(PA_CODE, wait_mem(far, 0, 0, "ALWAYS"))
    q0.submit(ib(VA_CODE, 7, VMID=1))
    expect_error(q0, ih, "BUS_DECERR", "IB1", P["WAIT_REG_MEM"].opcode, VA_OUT, 0)
    assert g.read("VM_FAULT_STATUS") == 0

def check_vm_entry_bits_and_walk_errors(dev):
    """Bits a PTE may carry that the MMU ignores (SYSTEM, SNOOPED, FRAG 11:7, 53:48, MTYPE
    58:57, PDE_PTE in a PTE); a huge page's own permissions (a fault at LEVEL 0); a table read
    that answers an error is WALK_ERROR at its level; a new invalidation request clears ACK."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P = pm4_packets()
    ignored = (1 << 1) | (1 << 2) | (0x1F << 7) | (0x3F << 48) | (3 << 57) | PDE_PTE
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | ignored)
    g.w32(PA_CODE, write_data(VA_OUT + 0x80, [0x81]))
    ring.run(ib(VA_CODE, 5, VMID=1))
    assert g.fields("STATUS")["ERROR"] == 0 and g.r32(PA_OUT + 0x80) == 0x81
    # ... and amdgpu's other bits, named in no table: TMZ (3), 55, TF (56), a PDE's BFS (63:59),
    # in a page-table entry and in the directory entry above it (rewritten, so invalidated)
    others = (1 << 3) | (1 << 55) | (1 << 56) | (0x1F << 59)
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | ignored | others)
    g.w64(PT_ROOT + 8 * (VA_CODE >> 21), PT_L1 | VALID | others)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    g.w32(PA_CODE, write_data(VA_OUT + 0x84, [0x82]))
    ring.run(ib(VA_CODE, 5, VMID=1))
    assert g.fields("STATUS")["ERROR"] == 0 and g.r32(PA_OUT + 0x84) == 0x82, g.fields("VM_FAULT_STATUS")
    g.w64(PT_ROOT + 8 * (VA_CODE >> 21), PT_L1 | VALID)
    huge_ro = 0x400000  # root index 2: a huge page without WRITEABLE
    g.w64(PT_ROOT + 8 * (huge_ro >> 21), 0x600000 | VALID | PDE_PTE | READABLE)
    g.w32(PA_CODE, write_data(huge_ro + 0x1234 * 4, [1]))
    ring.submit(ib(VA_CODE, 5, VMID=1))
    expect_fault(ring, ih, huge_ro + 0x1234 * 4, 1, 0, 1, P["WRITE_DATA"].opcode, 0, 0x20)
    bad = 0x1000_0000  # beyond memory: every read of it answers DECERR
    g.w64(PT_ROOT + 8 * (0x600000 >> 21), bad | VALID)  # a directory entry pointing there
    g.w32(PA_CODE, write_data(0x600000, [1]))
    ring.submit(ib(VA_CODE, 5, VMID=1))
    expect_fault(ring, ih, 0x600000, 1, 1, 3, P["WRITE_DATA"].opcode, 0, 0x20)
    g.write("VM_CONTEXT_PT_BASE_LO", bad, 2)
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)
    g.w32(IB1, write_data(0x1000, [1]))  # VMID 2's root is unreadable: the fetch faults first
    ring.submit(ib(0x1000, 5, VMID=2))
    g.idle()
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 2, "ACCESS": 2, "LEVEL": 0, "CAUSE": 3}
    assert g.fields("CP_ERROR")["CODE"] == g.err["VM_FAULT"]
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    ih.pop()
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "ACK of VMID 1")
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 3, ALL_ADDR=1)
    assert g.read("VM_INVALIDATE_ACK") & (1 << 1) == 0, "a new request clears VM_INVALIDATE_ACK"
    g.until(lambda: g.read("VM_INVALIDATE_ACK"), "ACK of VMID 3")
    assert g.read("VM_INVALIDATE_ACK") == 1 << 3

def check_vm_fault_addresses_at_page_edges(dev):
    """Where a fault is reported at a page edge: an IB ending at its page's end never touches
    the next page; a payload dword in a non-executable page faults at that dword (OPCODE the
    packet's, OFFSET its header's); a DMA copy faults at its first byte in the page that
    refuses it, for the source and for the destination."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P = pm4_packets()
    end = VA_CODE + 0x1000  # VA_OUT follows VA_CODE: writeable, not executable
    tail = write_data(VA_OUT + 0x90, [0x91])
    g.w32(PA_CODE + 0x1000 - 4 * len(tail), tail)
    ring.run(ib(end - 4 * len(tail), len(tail), VMID=1))
    assert g.fields("STATUS")["ERROR"] == 0 and g.r32(PA_OUT + 0x90) == 0x91
    g.w32(PA_CODE + 0x1000 - 8, write_data(VA_OUT + 0x94, [0x95])[:2])  # the header and ADDR_LO
    ring.submit(ib(end - 8, 5, VMID=1))
    expect_fault(ring, ih, end, 2, 1, 1, P["WRITE_DATA"].opcode, 0, 0x10)
    g.w32(PA_CODE, write_data(VA_RO - 8, [1, 2, 3, 4]))  # VA_OUT's last 8 bytes, then VA_RO's first
    g.w32(PA_OUT + 0xFF8, [0xEE, 0xEE])
    ro = g.r32(PA_RO, 2)
    ring.submit(ib(VA_CODE, 8, VMID=1))
    expect_fault(ring, ih, VA_RO, 1, 1, 1, P["WRITE_DATA"].opcode, 0, 0x20)  # (blocks never cross a page)
    assert (g.r32(PA_OUT + 0xFF8, 2), g.r32(PA_RO, 2)) == ([1, 2], ro), \
        "a stopped WRITE_DATA wrote every dword before the fault's address and none from it"
    g.w32(PA_CODE, dma_data(VA_RO - 8, VA_CODE + 0x10, 16, CP_SYNC=1))  # dst: VA_OUT, then VA_RO
    ring.submit(ib(VA_CODE, 7, VMID=1))
    expect_fault(ring, ih, VA_RO, 4, 1, 1, P["DMA_DATA"].opcode, 0, 0x20)
    g.w32(PA_CODE, dma_data(VA_OUT + 0x100, VA_HOLE - 6, 16, CP_SYNC=1))  # src: VA_RO, then VA_HOLE
    ring.submit(ib(VA_CODE, 7, VMID=1))
    expect_fault(ring, ih, VA_HOLE, 3, 1, 0, P["DMA_DATA"].opcode, 0, 0x40)

def check_vm_new_tables_need_an_invalidation(dev):
    """The TLB is keyed by VMID and page: a VMID whose VM_CONTEXT_PT_BASE is pointed at other
    tables (or whose translation is switched off and on) keeps what its old tables left until
    an ALL_ADDR invalidation of that VMID, on the model as on the RTL (docs/hardware.md,
    Invalidation); a huge page's entry written with address bits 20:12 set maps the aligned
    2 MiB page below it (docs/hardware.md, Page tables and faults)."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    root_b, l1_b = 0x84000, 0x85000  # VMID 1's next VM: VA_OUT is PA_OUT2 there
    g.w64(root_b + 8 * (VA_CODE >> 21), l1_b | VALID)
    g.w64(l1_b + 8 * (VA_CODE >> 12 & 511), PA_CODE | VALID | EXECUTABLE | READABLE)
    g.w64(l1_b + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)

    def run(value, off=0x10):
        g.w32(PA_CODE, write_data(VA_OUT + off, [value]))
        assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
        return g.r32(PA_OUT + off), g.r32(PA_OUT2 + off)

    assert run(1) == (1, 0)
    g.write("VM_CONTEXT_PT_BASE_LO", root_b, 1)
    assert run(2) == (2, 0), "a PT_BASE write invalidates nothing: the old VM's entry still translates"
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    assert run(3) == (2, 3), "after the VMID's ALL_ADDR invalidation its new tables translate"
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=0)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT, 1)
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=1)
    assert run(4) == (2, 4), "nor does switching the VMID's translation off and on"
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    assert run(5) == (5, 4)
    va = 0x600000  # root index 3: a huge page whose entry has bits 20:12 set
    g.w64(PT_ROOT + 8 * (va >> 21), (PA_HUGE | 0x1F000) | VALID | PDE_PTE | READABLE | WRITEABLE)
    g.w32(PA_CODE, write_data(va + 0x3010, [0x66]))
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
    assert (g.r32(PA_HUGE + 0x3010), g.r32(PA_HUGE + 0x1F000 + 0x3010)) == (0x66, 0), \
        "a huge page's address bits below 2 MiB are the virtual address's"


def check_soft_reset_keeps_the_tlb_and_clears_the_fault(dev):
    """CONTROL.SOFT_RESET does not reset the MMU (docs/hardware.md, Errors): a translation
    the TLB holds survives it, so a PTE changed before the reset without an invalidation can
    still translate the old way after it; VM_FAULT_STATUS/ADDR are cleared by it
    (registers.md) while VM_CONTEXT_* keep their values; an ALL_ADDR invalidation after the
    reset makes the new entry seen."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)

    def run(value, off=0x30):
        g.w32(PA_CODE, write_data(VA_OUT + off, [value]))
        assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
        return g.r32(PA_OUT + off), g.r32(PA_OUT2 + off)

    assert run(1) == (1, 0)  # VA_OUT's translation is in the TLB now
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)  # no invalidation
    g.w32(PA_CODE + 0x100, write_data(VA_HOLE + 4, [1]))
    ring.submit(ib(VA_CODE + 0x100, 5, VMID=1))
    g.idle()
    assert g.fields("CP_ERROR")["CODE"] == g.err["VM_FAULT"] and g.read("VM_FAULT_ADDR_LO") == VA_HOLE + 4
    g.set("CONTROL", SOFT_RESET=1)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    g.idle("SDMA_STATUS")
    assert (g.read("VM_FAULT_STATUS"), g.read("VM_FAULT_ADDR_LO"), g.read("CP_ERROR")) == (0, 0, 0)
    assert (g.read("VM_CONTEXT_CNTL", 1), g.read("VM_CONTEXT_PT_BASE_LO", 1)) == (1, PT_ROOT)
    ih.pop()
    g.write("IH_RPTR", 0)
    ih.rptr = 0
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    ring.wptr = 0
    assert run(2) == (2, 0), "the TLB kept VA_OUT's old translation across CONTROL.SOFT_RESET"
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    assert run(3) == (2, 3), "after the invalidation the new entry translates"


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


def check_vm_page_taken_away_while_polling_faults_the_poll(dev):
    """A wait whose page is taken away and invalidated while it polls faults at its next poll
    (docs/hardware.md: each poll is translated): the CP's WAIT_REG_MEM stops its queue with
    VM_FAULT, ACCESS READ at the polled address, the WAIT_REG_MEM's OFFSET, WAITING 0 once
    stopped; the SDMA's POLL_REGMEM (a finite RETRY_COUNT: the fault, not a POLL_TIMEOUT)
    its queue with SDMA_ERROR VM_FAULT; the next job after the queue's reset runs."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P, S = pm4_packets(), sdma_packets()
    flag = VA_OUT + 0x50
    g.w32(PA_OUT + 0x50, [0])
    g.w32(PA_CODE, write_data(VA_OUT + 0x58, [1]))  # VA_OUT's entry in the TLB first
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
    code = pm4("NOP", [0]) + wait_mem(flag, 1, M32, "EQ", interval=8) + write_data(VA_OUT + 0x54, [0x77])
    g.w32(PA_CODE, code)
    ring.submit(ib(VA_CODE, len(code), VMID=1))
    g.waiting()
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | WRITEABLE | READABLE)  # VALID cleared
    g.write("VM_INVALIDATE_ADDR_LO", VA_OUT >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    g.until(lambda: g.fields("STATUS")["ERROR"], "the poll's fault")
    st = g.idle()
    assert (st["ERROR"], st["WAITING"]) == (1, 0), st
    expect_fault(ring, ih, flag, 0, 1, 0, P["WAIT_REG_MEM"].opcode, 2, 0x40)
    assert g.r32(PA_OUT + 0x54) == 0, "the packet after the wait never ran"
    # READABLE taken away: a PERMISSION fault at the next poll
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | READABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    g.w32(PA_CODE, code)
    ring.submit(ib(VA_CODE, len(code), VMID=1))
    g.waiting()
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    expect_fault(ring, ih, flag, 0, 1, 1, P["WAIT_REG_MEM"].opcode, 2, 0x40)
    # the SDMA's POLL_REGMEM, with a finite RETRY_COUNT: the fault, no POLL_TIMEOUT entry
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | READABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    s = SdmaRing(g, SRING, 6)
    body = [0] + sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=1, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                      RETRY_COUNT=0xFFE, INTERVAL=1) + sdma("FENCE", DATA=0x7B, **lo_hi("ADDR", VA_OUT + 0x5C, 2))
    g.w32(PA_CODE + 0x400, body)
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x400, 5), IB_SIZE=len(body), VMID=1))
    g.waiting("SDMA_STATUS")
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | WRITEABLE | READABLE)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    g.until(lambda: g.fields("SDMA_STATUS")["ERROR"], "the SDMA poll's fault")
    st = g.idle("SDMA_STATUS")
    assert (st["ERROR"], st["WAITING"]) == (1, 0), st
    expect_sdma_error(s, ih, "VM_FAULT", "IB1", S["POLL_REGMEM"].opcode, flag, 1)
    assert g.r32(PA_OUT + 0x5C) == 0 and g.read("VM_FAULT_STATUS") == 0
    # mapped again: both queues run their next job
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | READABLE)
    g.w32(PA_OUT + 0x50, [1])
    g.w32(PA_CODE, code)
    assert ring.run(ib(VA_CODE, len(code), VMID=1))["ERROR"] == 0 and g.r32(PA_OUT + 0x54) == 0x77
    assert s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x400, 5), IB_SIZE=len(body),
                      VMID=1))["ERROR"] == 0 and g.r32(PA_OUT + 0x5C) == 0x7B
    assert not ih.pop(), "no POLL_TIMEOUT, no other entry"


def check_queue_resets_during_a_walk_leave_no_error(dev):
    """A queue reset written while the queue's access is still being translated (a page walk
    that will fail: VMID 2's root lies beyond memory) is done once STATUS.IDLE
    (SDMA_STATUS.IDLE) reads 1, and then the queue has no error (docs/hardware.md: the reset
    lets its own bus traffic end, a walk's included): the failing walk's answer, coming after
    the reset, latches nothing (no ERROR, CP_ERROR/SDMA_ERROR and VM_FAULT_STATUS 0) and the
    next job runs; whether the fault latched (and raised its entry) before the reset depends
    on timing. Also the CP and SDMA resets at 0 to 45 cycles after the doorbell; and a TLB
    invalidation written right before CONTROL.SOFT_RESET still completes (the MMU is not reset).
    (CONTROL.SOFT_RESET with both walks under way: /work/notes/driver-writer-4-sdma-soft-reset-ih-race.patch,
    an RTL bug.)"""
    g, ring, ih = bring_up(dev)
    g.write("VM_CONTEXT_PT_BASE_LO", 0x1000_0000, 2)  # beyond the 64 MiB: the walk's first read fails
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)
    s = SdmaRing(g, SRING, 6)
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    latched = {"cp": 0, "sdma": 0}
    for d in range(0, 46, 3):
        ring.submit(ib(0x3000, 8, VMID=2))
        g.dev.delay(d)
        g.set("CP_QUEUE_RESET", Q0=1)
        st = g.idle()
        assert (st["ERROR"], g.read("CP_ERROR"), g.read("VM_FAULT_STATUS")) == (0, 0, 0), (d, st)
        ring.wptr = 0
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", 0x3000, 5), IB_SIZE=8, VMID=2))
        g.dev.delay(d)
        g.set("SDMA_CNTL", QUEUE_RESET=1, TRAP_ENABLE=1)
        st = g.idle("SDMA_STATUS")
        assert (st["ERROR"], g.read("SDMA_ERROR")) == (0, 0), (d, st)
        s.wptr = 0
        g.dev.delay(100)  # anything still to come would have come
        assert g.fields("STATUS")["ERROR"] == 0 and g.fields("SDMA_STATUS")["ERROR"] == 0, d
        for e in ih.pop():
            src = ih.source(e)
            assert src in ("VM_FAULT", "SDMA_ERROR"), e
            latched["cp" if src == "VM_FAULT" else "sdma"] += 1
        g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
        st = ring.run(write_data(OUT + 4 * d, [d + 1]))
        assert st["ERROR"] == 0 and g.r32(OUT + 4 * d) == d + 1, d
        assert s.run(sdma("FENCE", DATA=d + 2, **lo_hi("ADDR", OUT + 0x100 + 4 * d, 2)))["ERROR"] == 0
        assert g.r32(OUT + 0x100 + 4 * d) == d + 2, d
    # an invalidation written right before CONTROL.SOFT_RESET completes
    g.set("VM_INVALIDATE_REQ", PER_VMID=0x6, ALL_ADDR=1)
    g.set("CONTROL", SOFT_RESET=1)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 0x6, "VM_INVALIDATE_ACK across CONTROL.SOFT_RESET")
    return latched


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


def check_vm_permission_fault_keeps_its_leaf(dev):
    """The TLB keeps leaves, permissions included, never a failed translation
    (docs/hardware.md, TLB): an INVALID fault leaves nothing, so a page made VALID afterwards
    needs no invalidation; a PERMISSION fault's leaf is a valid entry and is kept, so a write
    after its PTE gained WRITEABLE still faults until the page is invalidated, on the model as
    on the RTL (the MMU installs the leaf, then checks the access against it)."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P = pm4_packets()
    va_new = 0x106000  # not VALID yet
    for k in range(2):
        g.w32(PA_CODE, write_data(VA_RO + 0x10, [0x41]))
        ring.submit(ib(VA_CODE, 5, VMID=1))
        expect_fault(ring, ih, VA_RO + 0x10, 1, 1, 1, P["WRITE_DATA"].opcode, 0, 0x20)
        g.w32(PA_CODE, write_data(va_new + 0x10, [0x42]))
        ring.submit(ib(VA_CODE, 5, VMID=1))
        if k == 0:
            expect_fault(ring, ih, va_new + 0x10, 1, 1, 0, P["WRITE_DATA"].opcode, 0, 0x20)
            g.w64(PT_L1 + 8 * (va_new >> 12 & 511), PA_OUT2 | VALID | WRITEABLE)  # a new entry
            g.w64(PT_L1 + 8 * (VA_RO >> 12 & 511), PA_RO | VALID | READABLE | WRITEABLE)  # granted, no invalidation
        else:
            assert g.idle()["ERROR"] == 0 and g.r32(PA_OUT2 + 0x10) == 0x42, "a new entry needs nothing"
    assert g.r32(PA_RO + 0x10) == 0, "the kept read-only leaf refused the write"
    g.write("VM_INVALIDATE_ADDR_LO", VA_RO >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "VM_INVALIDATE_ACK = VMID 1")
    g.w32(PA_CODE, write_data(VA_RO + 0x10, [0x43]))
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0 and g.r32(PA_RO + 0x10) == 0x43


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


def check_vm_leaf_beyond_memory_is_a_bus_error_at_the_virtual_address(dev):
    """A valid leaf (a PTE or a huge page's PDE_PTE entry) whose physical address lies beyond
    memory translates: the access itself answers DECERR, so it is BUS_DECERR, not VM_FAULT
    (nothing in VM_FAULT_*, a CP_ERROR entry with the IB's VMID, not UTCL2's), at the address
    the packet named, the virtual one (docs/hardware.md, Errors: "Addresses are the ones the
    packet named"); the same for a fetch, a poll, a DMA source and the SDMA's FENCE and copy;
    and VM_CONTEXT_PT_BASE_LO's bits 11:0 read 0, the walk starts at the 4 KiB-aligned root."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT | 0xABC, 1)
    assert g.read("VM_CONTEXT_PT_BASE_LO", 1) == PT_ROOT, "bits 11:0 read 0"
    P, S = pm4_packets(), sdma_packets()
    far_pa = 0x1000_0000  # beyond the 64 MiB of memory: every access answers DECERR
    va_x, va_h = 0x104000, 0x600000  # a PTE and a huge page (root index 3) pointing there
    g.w64(PT_L1 + 8 * (va_x >> 12 & 511), far_pa | VALID | EXECUTABLE | READABLE | WRITEABLE)
    g.w64(PT_ROOT + 8 * (va_h >> 21), far_pa | VALID | PDE_PTE | EXECUTABLE | READABLE | WRITEABLE)

    def expect_decerr(opcode, va, offset=0):
        e, = expect_error(ring, ih, "BUS_DECERR", "IB1", opcode, va, offset)
        assert e["VMID"] == 1, e
        assert (g.read("VM_FAULT_STATUS"), g.read("VM_FAULT_ADDR_LO"), g.read("VM_FAULT_ADDR_HI")) == (0, 0, 0)

    def run_ib(body):
        g.w32(PA_CODE, body)
        ring.submit(ib(VA_CODE, len(body), VMID=1))

    run_ib(write_data(va_x + 0x18, [1, 2]))
    expect_decerr(P["WRITE_DATA"].opcode, va_x + 0x18)
    run_ib(pm4("NOP", [0]) + wait_mem(va_x + 0x24, 0, 0, "ALWAYS"))
    expect_decerr(P["WAIT_REG_MEM"].opcode, va_x + 0x24, 2)
    run_ib(dma_data(VA_OUT, va_x + 0x31, 40, CP_SYNC=1))
    expect_decerr(P["DMA_DATA"].opcode, va_x + 0x31)
    run_ib(release_mem(va_h + 0x1234 * 8, 5, DATA_SEL="DATA_64"))
    expect_decerr(P["RELEASE_MEM"].opcode, va_h + 0x1234 * 8)
    ring.submit(ib(va_x + 0x40, 4, VMID=1))  # a fetch: the IB's first header, OPCODE 0
    expect_decerr(0, va_x + 0x40)
    # the ring still runs (nothing of VMID 1 is broken) and the tables are as they were
    run_ib(write_data(VA_OUT + 0x20, [0x5A]))
    assert g.idle()["ERROR"] == 0 and g.r32(PA_OUT + 0x20) == 0x5A
    # the SDMA: its errors are its own, BUS_DECERR at the virtual address too
    s = SdmaRing(g, SRING, 6)
    for body, op, va in ((sdma("FENCE", DATA=7, **lo_hi("ADDR", va_x + 0x44, 2)), S["FENCE"].opcode, va_x + 0x44),
                         (sdma("COPY_LINEAR", COUNT=15, **lo_hi("SRC_ADDR", VA_OUT), **lo_hi("DST_ADDR", va_h + 0x80)),
                          S["COPY_LINEAR"].opcode, va_h + 0x80)):
        g.w32(PA_CODE + 0x200, body)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x200, 5), IB_SIZE=len(body), VMID=1))
        expect_sdma_error(s, ih, "BUS_DECERR", "IB1", op, va, 0)
        assert g.read("VM_FAULT_STATUS") == 0
    assert g.idle()["ERROR"] == 0, "the SDMA's errors leave the CP"



def check_cp_and_sdma_vm_faults_at_once(dev):
    """The CP and the SDMA faulting in VMID 1 at once: each stops alone with its own record
    (the CP's in VM_FAULT_STATUS/ADDR and a UTCL2 entry, the SDMA's in SDMA_ERROR* and a
    SDMA_ERROR entry: VM_FAULT_STATUS stays the CP's), and the CP's reset clears
    VM_FAULT_STATUS while the SDMA is still stopped by its fault."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    s = SdmaRing(g, SRING, 8)
    S = sdma_packets()
    code = write_data(VA_RO, [1])  # PERMISSION at level 1 (a write to a read-only page)
    g.w32(PA_CODE, code)
    g.w32(PA_CODE + 0x100, sdma("FENCE", DATA=2, **lo_hi("ADDR", VA_HOLE + 0x10, 2)))  # INVALID
    ring.submit(ib(VA_CODE, len(code), VMID=1))
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x100, 5), IB_SIZE=4, VMID=1))
    g.until(lambda: g.fields("STATUS")["ERROR"] and g.fields("SDMA_STATUS")["ERROR"], "both engines stopped")
    assert g.fields("VM_FAULT_STATUS") == {"VMID": 1, "ACCESS": 1, "LEVEL": 1, "CAUSE": 1}
    assert g.read("VM_FAULT_ADDR_LO") == VA_RO
    err = g.fields("SDMA_ERROR")
    assert (err["CODE"], err["LEVEL"], err["OP"], g.read("SDMA_ERROR_ADDR_LO")) == \
        (g.err["VM_FAULT"], g.level["IB1"], S["FENCE"].opcode, VA_HOLE + 0x10), err
    entries = []
    g.until(lambda: entries.extend(ih.pop()) or len(entries) >= 2, "two entries")
    got = sorted((ih.source(e), e["VMID"]) for e in entries)
    assert got == [("SDMA_ERROR", 1), ("VM_FAULT", 1)], got
    g.set("CP_QUEUE_RESET", Q0=1)
    g.idle()
    assert g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0
    assert g.fields("SDMA_STATUS")["ERROR"] == 1 and g.fields("SDMA_ERROR")["CODE"] == g.err["VM_FAULT"]
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")


def check_vm_invalidation_names_vmids_and_pages(dev):
    """VM_INVALIDATE_REQ drops the entries of the VMIDs in PER_VMID only (another VMID's entry
    of the same page keeps translating), a page request drops that 4 KiB page of a huge page
    alone (the huge page's other pages keep their entries, a page not yet translated reads the
    new entry), and a page beyond the tables' reach (VM_INVALIDATE_ADDR bit 30 set: no entry
    can hold it) drops nothing; VM_CONTEXT_PT_BASE_LO's bits 11:0 read 0 (docs/registers.md)."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT | 0xFFF, 2)  # VMID 2: the same tables
    assert g.read("VM_CONTEXT_PT_BASE_LO", 2) == PT_ROOT, "bits 11:0 read 0"
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)

    def run(vmid, va, value):
        g.w32(PA_CODE + 0x200 * vmid, write_data(va, [value]))
        assert ring.run(ib(VA_CODE + 0x200 * vmid, 5, VMID=vmid))["ERROR"] == 0

    def invalidate(vmids, va=None):
        if va is not None:
            g.write("VM_INVALIDATE_ADDR_LO", va >> 12 & M32)
            g.write("VM_INVALIDATE_ADDR_HI", va >> 44)
        g.set("VM_INVALIDATE_REQ", PER_VMID=vmids, ALL_ADDR=int(va is None))
        g.until(lambda: g.read("VM_INVALIDATE_ACK") == vmids, f"VM_INVALIDATE_ACK = {vmids:#x}")

    run(1, VA_OUT + 0x20, 0x11)
    run(2, VA_OUT + 0x24, 0x21)
    assert g.r32(PA_OUT + 0x20, 2) == [0x11, 0x21]
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)
    invalidate(1 << 2, VA_OUT)
    run(1, VA_OUT + 0x28, 0x12)
    run(2, VA_OUT + 0x2C, 0x22)
    assert (g.r32(PA_OUT + 0x28), g.r32(PA_OUT2 + 0x2C)) == (0x12, 0x22), \
        "VMID 1's entry was not named: it still translates to the old page; VMID 2's reads the new one"
    assert (g.r32(PA_OUT2 + 0x28), g.r32(PA_OUT + 0x2C)) == (0, 0)
    invalidate(1 << 1, VA_OUT | 1 << 30)  # beyond the 30-bit reach: drops nothing
    run(1, VA_OUT + 0x30, 0x13)
    assert (g.r32(PA_OUT + 0x30), g.r32(PA_OUT2 + 0x30)) == (0x13, 0), "a page beyond reach names no entry"
    invalidate(1 << 1, VA_OUT)
    run(1, VA_OUT + 0x34, 0x14)
    assert (g.r32(PA_OUT + 0x34), g.r32(PA_OUT2 + 0x34)) == (0, 0x14)
    # A huge page: pages 0 and 1 translated, its entry moved, page 1 invalidated alone.
    pa_new = 0x800000
    run(1, VA_HUGE + 0x40, 0x31)
    run(1, VA_HUGE + 0x1040, 0x32)
    g.w64(PT_ROOT + 8 * (VA_HUGE >> 21), pa_new | VALID | PDE_PTE | READABLE | WRITEABLE)
    invalidate(1 << 1, VA_HUGE + 0x1000)
    run(1, VA_HUGE + 0x44, 0x33)
    run(1, VA_HUGE + 0x1044, 0x34)
    run(1, VA_HUGE + 0x2044, 0x35)
    assert (g.r32(PA_HUGE + 0x44), g.r32(pa_new + 0x44)) == (0x33, 0), "page 0 of the huge page keeps its entry"
    assert (g.r32(PA_HUGE + 0x1044), g.r32(pa_new + 0x1044)) == (0, 0x34), "page 1 was invalidated"
    assert (g.r32(PA_HUGE + 0x2044), g.r32(pa_new + 0x2044)) == (0, 0x35), "page 2 was never translated"


def check_vm_poll_remap_and_accesses_that_move_nothing(dev):
    """A WAIT_REG_MEM in a translated IB translates every poll: its page remapped and
    invalidated while it polls, the next poll reads the new page and the wait ends (an SDMA
    POLL_REGMEM's too); a
    RELEASE_MEM with DATA_SEL NONE and a DMA_DATA of 0 bytes access no memory, so an address
    no table maps does not fault; an IB2 in a VMID 1 IB that names VMID 2 runs as VMID 1."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P = pm4_packets()
    flag = VA_OUT + 0x30
    g.w32(PA_OUT + 0x30, [0])
    g.w32(PA_OUT2 + 0x30, [0x5A])
    # VA_OUT's entry in the TLB first: the wait's first poll may still be walking when
    # STATUS.WAITING reads 1, and a walk that reads the new entry is allowed (hardware.md)
    g.w32(PA_CODE, write_data(VA_OUT + 0x38, [0x76]))
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0 and g.r32(PA_OUT + 0x38) == 0x76
    code = wait_mem(flag, 0x5A, M32, "EQ", interval=8) + write_data(VA_OUT + 0x34, [0x77])
    g.w32(PA_CODE, code)
    ring.submit(ib(VA_CODE, len(code), VMID=1))
    g.waiting()
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)
    g.dev.delay(200)
    assert g.fields("STATUS")["WAITING"] == 1, "not invalidated: the polls still read the old page"
    g.write("VM_INVALIDATE_ADDR_LO", VA_OUT >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    st = g.idle()
    assert st["ERROR"] == 0 and st["WAITING"] == 0 and g.r32(PA_OUT2 + 0x34) == 0x77
    # Accesses that move nothing, at an address no table maps
    body = release_mem(VA_HOLE + 0x40, 5, DATA_SEL="NONE", INT_SEL="SEND_INT", INT_CTXID=0x55) \
        + dma_data(VA_HOLE + 0x80, VA_HOLE + 0xC0, 0, CP_SYNC=1) \
        + dma_data(VA_HOLE + 0x100, 0x12345678, 0, SRC_SEL="DATA", CP_SYNC=1) + write_data(VA_OUT + 0x38, [0x78])
    g.w32(PA_CODE, body)
    st = ring.run(ib(VA_CODE, len(body), VMID=1))
    assert st["ERROR"] == 0, (g.fields("CP_ERROR"), hex(g.read("CP_ERROR_ADDR_LO")), g.fields("VM_FAULT_STATUS"))
    assert g.r32(PA_OUT2 + 0x38) == 0x78
    (e,) = ih.pop()
    assert (ih.source(e), e["VMID"], e["DATA0"], e["DATA3"]) == ("EOP", 1, 0x55, VA_HOLE + 0x40), e
    # IB2's VMID field is ignored: the IB keeps its ring packet's VMID
    g.write("VM_CONTEXT_PT_BASE_LO", 0x1000_0000, 2)  # VMID 2's root unreadable: any VMID 2 access faults
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)
    inner = write_data(VA_OUT + 0x3C, [0x79])
    g.w32(PA_CODE + 0x800, inner)
    outer = ib(VA_CODE + 0x800, len(inner), VMID=2)
    g.w32(PA_CODE, outer)
    st = ring.run(ib(VA_CODE, len(outer), VMID=1))
    assert st["ERROR"] == 0 and g.r32(PA_OUT2 + 0x3C) == 0x79, (g.fields("CP_ERROR"), g.fields("VM_FAULT_STATUS"))
    # The SDMA's POLL_REGMEM likewise: VA_OUT back to PA_OUT while it polls (VA_OUT in the TLB
    # already, PA_OUT2 + 0x30 holds 0x5A), seen once invalidated
    s = SdmaRing(g, SRING, 6)
    body = sdma("POLL_REGMEM", **lo_hi("ADDR", flag, 2), VALUE=0x5A, MASK=M32, FUNC="NE", MEM_POLL="MEMORY",
                RETRY_COUNT=0xFFF, INTERVAL=1) + sdma("FENCE", DATA=0x7A, **lo_hi("ADDR", VA_OUT + 0x40, 2))
    g.w32(PA_CODE + 0x400, body + [0] * (-len(body) % 8))
    s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x400, 5), IB_SIZE=len(body), VMID=1))
    g.waiting("SDMA_STATUS")
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | READABLE)
    g.dev.delay(200)
    assert g.fields("SDMA_STATUS")["WAITING"] == 1, "not invalidated: the SDMA's polls still read the old page"
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 0 and g.r32(PA_OUT + 0x40) == 0x7A and g.r32(PA_OUT2 + 0x40) == 0


def check_vm_fault_entries_of_both_queues_and_a_full_ih_ring(dev):
    """Queue 1's VM_FAULT entry while queue 0 is stopped by its own fault: RING_ID 1, DATA2
    the fields of queue 1's fault (not what VM_FAULT_STATUS shows then: queue 0's) and
    DATA3 CP_HQD1_ERROR; a VM_FAULT or SDMA_ERROR entry that finds the IH ring full is
    dropped (IH_WPTR and its write-back unchanged, IH_OVERFLOW set, INT_STATUS.CP_ERROR for
    the CP's), the queues stopped all the same, and the next entry lands at IH_WPTR."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    P = pm4_packets()
    g.w32(PA_CODE, write_data(VA_RO + 8, [1]))
    g.w32(PA_CODE + 0x100, wait_mem(VA_HOLE + 0x18, 0, 0, "ALWAYS"))
    q0.submit(ib(VA_CODE, 5, VMID=1))
    assert g.idle()["ERROR"] == 1
    q1.submit(ib(VA_CODE + 0x100, 7, VMID=1))
    assert g.idle("CP_HQD1_STATUS")["ERROR"] == 1
    f0 = g.value("VM_FAULT_STATUS", VMID=1, ACCESS=1, LEVEL=1, CAUSE=1)
    f1 = g.value("VM_FAULT_STATUS", VMID=1, ACCESS=0, LEVEL=1, CAUSE=0)
    assert g.read("VM_FAULT_STATUS") == f0, "queue 0's fault while both queues are stopped by one"
    e0, e1 = ih.pop()
    e0 = {k: e0[k] for k in ("CLIENT_ID", "SOURCE_ID", "RING_ID", "VMID", "DATA0", "DATA1", "DATA2", "DATA3")}
    e1 = {k: e1[k] for k in e0}
    assert e0 == {"CLIENT_ID": 0x1B, "SOURCE_ID": 0, "RING_ID": 0, "VMID": 1, "DATA0": (VA_RO + 8) >> 12,
                  "DATA1": 0x20, "DATA2": f0, "DATA3": g.read("CP_ERROR")}, e0
    hq1_err = g.read("CP_HQD1_ERROR")
    assert g.fields("CP_HQD1_ERROR") == {"OPCODE": P["WAIT_REG_MEM"].opcode, "LEVEL": 1, "CODE": g.err["VM_FAULT"]}
    assert e1 == {"CLIENT_ID": 0x1B, "SOURCE_ID": 0, "RING_ID": 1, "VMID": 1, "DATA0": (VA_HOLE + 0x18) >> 12,
                  "DATA1": 0x40, "DATA2": f1, "DATA3": hq1_err}, \
        f"queue 1's entry: {e1}; its fault {f1:#x}, CP_HQD1_ERROR {hq1_err:#x}, CP_ERROR {g.read('CP_ERROR'):#x}"
    g.set("CP_QUEUE_RESET", Q0=1, Q1=1)
    g.idle()
    g.idle("CP_HQD1_STATUS")
    q0.wptr = q1.wptr = 0
    g.write("INT_STATUS", M32)
    # A one-entry IH ring (LOG2_DWORDS 3), written while IH_CNTL.ENABLE is clear
    g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
    g.set("IH_SIZE", LOG2_DWORDS=3)
    g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)
    ih.bytes = 32
    w = g.read("IH_WPTR")
    q0.run(release_mem(OUT, 1, INT_SEL="SEND_INT", INT_CTXID=0xE1))
    assert (g.read("IH_WPTR"), g.r32(IH_WB)) == (w + 32, w + 32)
    g.write("INT_STATUS", M32)
    q0.submit(ib(VA_CODE, 5, VMID=1))  # the VM fault again: its entry finds the ring full
    st = g.idle()
    assert st["ERROR"] == 1 and g.read("VM_FAULT_STATUS") == f0
    got = g.fields("INT_STATUS")
    assert (got["CP_ERROR"], got["IH_OVERFLOW"], got["EOP"], got["IH_PENDING"]) == (1, 1, 0, 1), got
    assert (g.read("IH_WPTR"), g.r32(IH_WB)) == (w + 32, w + 32), "a dropped entry moves nothing"
    g.write("INT_STATUS", M32)
    s = SdmaRing(g, SRING, 6)
    s.submit([0x0000_0003])  # ILLEGAL_OPCODE: its SDMA_ERROR entry finds the ring full
    assert g.idle("SDMA_STATUS")["ERROR"] == 1
    g.until(lambda: g.field("INT_STATUS", "IH_OVERFLOW"), "IH_OVERFLOW of the SDMA_ERROR entry")
    got = g.fields("INT_STATUS")
    assert (got["CP_ERROR"], got["EOP"]) == (0, 0) and g.read("IH_WPTR") == w + 32 == g.r32(IH_WB), got
    (e,) = ih.pop()
    assert (ih.source(e), e["DATA0"]) == ("EOP", 0xE1), "the entry before the drops"
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    g.idle("SDMA_STATUS")
    s.wptr = 0
    g.set("SDMA_CNTL", TRAP_ENABLE=1)
    s.run(sdma("TRAP", INT_CONTEXT=0xE2))
    g.until(lambda: g.read("IH_WPTR") == w + 64, "the TRAP entry")
    assert g.r32(IH_WB) == w + 64 and g.r32(IH_BASE + 16) == 0xE2, "the next entry lands at IH_WPTR mod 32"


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


def check_cp_queues_keep_their_vmids_across_turns_and_resets(dev):
    """Two CP queues of equal priority taking turns packet by packet inside IBs of two
    translated VMIDs that map the same virtual pages to different memory: each packet runs
    with its own queue's VMID (the TLB keyed by VMID), each EOP entry names its queue and
    VMID; a CP_QUEUE_RESET of queue 1 while it polls inside a VMID 2 IB leaves it at the ring
    with VMID 0: its next ring packet writes a physical address VMID 2 does not map."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    root2, l1_2, pa_code2, pa_x = 0x84000, 0x85000, 0x94000, 0x95000
    g.w64(root2 + 8 * (VA_CODE >> 21), l1_2 | VALID)
    g.w64(l1_2 + 8 * (VA_CODE >> 12 & 511), pa_code2 | VALID | EXECUTABLE)
    g.w64(l1_2 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)
    g.write("VM_CONTEXT_PT_BASE_LO", root2, 2)
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)
    g.set("CP_QUEUE_PRIORITY", Q0=1, Q1=1)
    n = 24
    for vmid, pa, tag in ((1, PA_CODE, 0x100), (2, pa_code2, 0x200)):
        body = sum((write_data(VA_OUT + 4 * k, [tag + k]) for k in range(n)), []) \
            + release_mem(VA_OUT + 0x200, tag, INT_SEL="SEND_INT", INT_CTXID=vmid)
        g.w32(pa, body)
    g.set("CONTROL", HALT=1)
    g.until(lambda: g.fields("STATUS")["HALTED"], "HALTED")
    q0.submit(ib(VA_CODE, 5 * n + 8, VMID=1))
    q1.submit(ib(VA_CODE, 5 * n + 8, VMID=2))
    g.set("CONTROL", HALT=0)
    assert g.idle()["ERROR"] == 0 and g.idle("CP_HQD1_STATUS")["ERROR"] == 0
    assert g.r32(PA_OUT, n) == [0x100 + k for k in range(n)] and g.r32(PA_OUT + 0x200) == 0x100
    assert g.r32(PA_OUT2, n) == [0x200 + k for k in range(n)] and g.r32(PA_OUT2 + 0x200) == 0x200
    got = sorted((e["DATA0"], e["RING_ID"], e["VMID"], e["DATA3"]) for e in ih.pop())
    assert got == [(1, 0, 1, VA_OUT + 0x200), (2, 1, 2, VA_OUT + 0x200)], got
    # queue 1 reset while it polls in a VMID 2 IB
    g.w32(PA_OUT2 + 0x300, [0])
    body = write_data(VA_OUT + 0x304, [0x31]) + wait_mem(VA_OUT + 0x300, 1, M32, "EQ") \
        + write_data(VA_OUT + 0x308, [0x32])
    g.w32(pa_code2, body)
    q1.submit(ib(VA_CODE, len(body), VMID=2))
    st = g.waiting("CP_HQD1_STATUS")
    assert st["LEVEL"] == g.level["IB1"]
    g.set("CP_QUEUE_RESET", Q1=1)
    st = g.idle("CP_HQD1_STATUS")
    assert (st["LEVEL"], st["WAITING"], st["ERROR"]) == (g.level["RING"], 0, 0), st
    q1.wptr = 0
    g.w32(PA_OUT2 + 0x300, [1])
    st = q1.run(write_data(pa_x, [0x33]), release_mem(pa_x + 4, 0x34, INT_SEL="SEND_INT", INT_CTXID=3))
    assert st["ERROR"] == 0, (g.fields("CP_HQD1_ERROR"), g.fields("VM_FAULT_STATUS"))
    assert g.r32(pa_x, 2) == [0x33, 0x34] and g.r32(PA_OUT2 + 0x304, 2) == [0x31, 0]
    (e,) = ih.pop()
    assert (e["DATA0"], e["RING_ID"], e["VMID"]) == (3, 1, 0), e


def check_vm_walks_and_leaves_in_memory_answering_slverr(dev):
    """A page-table read that the memory answers with SLVERR (inside memory, not past its
    end) is a WALK_ERROR fault at that level, as DECERR is: VM_FAULT, never a bus error; a
    valid leaf whose page answers SLVERR is a bus error, BUS_SLVERR at the virtual address
    (the CP_ERROR entry with the IB's VMID, nothing in VM_FAULT_*); the SDMA's copy from such
    a page too (SDMA_ERROR BUS_SLVERR at the virtual address, VMID 1)."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P, S = pm4_packets(), sdma_packets()
    err = 0x70000
    dev.mem_model.configure(error_window=(err, err + 0x2000, "SLVERR"))
    try:
        g.w64(PT_ROOT + 8 * (0x600000 >> 21), err | VALID)  # a page table inside the window
        g.w32(PA_CODE, write_data(0x600000 + 0x40, [1]))
        ring.submit(ib(VA_CODE, 5, VMID=1))
        expect_fault(ring, ih, 0x600040, 1, 1, 3, P["WRITE_DATA"].opcode, 0, 0x20)
        va = 0x104000  # VMID 1's page at err + 0x1000: valid, writeable, the memory refuses it
        g.w64(PT_L1 + 8 * (va >> 12 & 511), err + 0x1000 | VALID | WRITEABLE | READABLE)
        g.w32(PA_CODE, [0xFFFF1000] + write_data(va + 0x24, [2]))
        ring.submit(ib(VA_CODE, 6, VMID=1))
        (e,) = expect_error(ring, ih, "BUS_SLVERR", "IB1", P["WRITE_DATA"].opcode, va + 0x24, 1)
        assert e["VMID"] == 1 and g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0, e
        s = SdmaRing(g, SRING, 6)
        body = sdma("COPY_LINEAR", COUNT=0x3F, **lo_hi("SRC_ADDR", va + 0x100), **lo_hi("DST_ADDR", VA_OUT))
        g.w32(PA_CODE + 0x100, body)
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x100, 5), IB_SIZE=len(body), VMID=1))
        expect_sdma_error(s, ih, "BUS_SLVERR", "IB1", S["COPY_LINEAR"].opcode, va + 0x100, 0)
    finally:
        dev.mem_model.configure(error_window=None)


CHECKS = [check_vm_translation_faults_and_invalidate, check_vm_fault_status_follows_the_stopped_queue,
          check_vm_entry_bits_and_walk_errors, check_vm_fault_addresses_at_page_edges,
          check_vm_new_tables_need_an_invalidation, check_cp_and_sdma_vm_faults_at_once,
          check_vm_invalidation_names_vmids_and_pages, check_vm_poll_remap_and_accesses_that_move_nothing,
          check_vm_fault_entries_of_both_queues_and_a_full_ih_ring,
          check_sdma_fetch_faults_at_page_edges_and_virtual_addresses,
          check_cp_queues_keep_their_vmids_across_turns_and_resets,
          check_vm_leaf_beyond_memory_is_a_bus_error_at_the_virtual_address,
          check_soft_reset_keeps_the_tlb_and_clears_the_fault, check_sdma_accesses_need_what_the_cps_do,
          check_vm_page_taken_away_while_polling_faults_the_poll,
          check_queue_resets_during_a_walk_leave_no_error,
          check_vmid_0_translated_moves_the_kernels_own_traffic, check_ih_entry_writes_that_fault_under_vmid_0,
          check_vm_permission_fault_keeps_its_leaf,
          check_soft_reset_while_the_sdma_reports_an_error_leaves_no_entry,
          check_vm_walks_and_leaves_in_memory_answering_slverr]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[6:])
def test_contract_on_the_model(check):
    from testbench.refmodel import RefModel

    check(RefModel())


def test_vm_levels_are_the_rtls_on_the_model():
    """VM_CAPS.LEVELS is 2, 3 or 4 (docs/hardware.md): the RTL's MMU refuses other counts and
    the model accepted 1 (a root that is a page table), a device the RTL cannot be; both take
    their range from spec/vm.py's BUILD_LEVELS, and the model reports the count it was given."""
    from amaranth.hdl import Fragment

    from rtl.mmu import MMU
    from spec import vm as vm_spec
    from testbench.refmodel import RefModel

    assert vm_spec.BUILD_LEVELS == (2, 3, 4)
    for bad in (0, 1, 5, True, 2.0):
        with pytest.raises(ValueError, match=rf"^vm_levels must be 2, 3 or 4 \(as the RTL's MMU\), not {bad!r}$"):
            RefModel(vm_levels=bad)
        with pytest.raises(ValueError, match="levels must be 2, 3 or 4"):
            Fragment.get(MMU(levels=bad), None)
    for n in vm_spec.BUILD_LEVELS:
        from tests.model.contract.contract_driver import Gpu
        assert Gpu(RefModel(vm_levels=n)).fields("VM_CAPS")["LEVELS"] == n


@pytest.mark.parametrize("levels", [3, 4])
def test_huge_pages_at_every_directory_level_on_the_model(levels):
    """A PDE_PTE entry at any directory level is a leaf for that entry's whole range
    (docs/hardware.md, Tables and entries): 2 MiB one level above the page tables, 1 GiB two
    levels above, 512 GiB at a 4-level root; its address bits below the range are the virtual
    address's. (The RTL's MMU: tests/rtl/amaranth_sim/test_rtl_mmu.py's three- and four-level walks.)"""
    from testbench.refmodel import RefModel

    g, ring, ih = bring_up(RefModel(vm_levels=levels))
    assert g.fields("VM_CAPS")["LEVELS"] == levels
    tables = [PT_ROOT + 0x1000 * k for k in range(levels)]  # tables[k]: level k's table on VA_CODE's path
    idx = lambda va, level: va >> (12 + 9 * (levels - 1 - level)) & 511
    for level in range(levels - 1):
        g.w64(tables[level] + 8 * idx(VA_CODE, level), tables[level + 1] | VALID)
    g.w64(tables[-1] + 8 * idx(VA_CODE, levels - 1), PA_CODE | VALID | EXECUTABLE)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT, 1)
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=1)
    for level in range(levels - 1):
        span = 12 + 9 * (levels - 1 - level)  # 21, 30, 39 bits
        va = (idx(VA_CODE, level) + 1) << span  # the next entry of this level on VA_CODE's path
        g.w64(tables[level] + 8 * idx(va, level), 0x200000 | VALID | PDE_PTE | WRITEABLE)
        # a 2 MiB page at 0x200000; a larger one's entry written with 0x200000 maps physical 0,
        # the address bits below its range being the virtual address's
        off, pa = (0x1238, 0x201238) if span == 21 else (0x300010, 0x300010)
        g.w32(PA_CODE, write_data(va + off, [0x100 + level]))
        st = ring.run(ib(VA_CODE, 5, VMID=1))
        assert st["ERROR"] == 0, (level, g.fields("CP_ERROR"), g.fields("VM_FAULT_STATUS"))
        assert g.r32(pa) == 0x100 + level, f"a level-{level} PDE_PTE maps {1 << span:#x} bytes"
        assert span == 21 or g.r32(0x200000 + pa) == 0
        g.w64(tables[level] + 8 * idx(va, level), 0)
        g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
