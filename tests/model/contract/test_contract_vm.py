"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone): virtual memory, its page tables and faults. Page tables as docs/hardware.md
lays them out, the bits the MMU ignores, every fault cause and access kind with what
VM_FAULT_* and the UTCL2 entry hold, faults at page edges, walks and leaves that meet bus
errors, which queue's fault VM_FAULT_STATUS shows (beside another queue's error that is not
a fault too) and the entries of both queues' faults,
queue resets during a walk, and (on the model alone) the levels and huge pages. Split by
concept from it: test_contract_vm_tlb.py, the TLB and its invalidation;
test_contract_vm_sdma_and_vmid_0.py, the SDMA's accesses and the kernel's own traffic
translated under VMID 0.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus.
"""

from __future__ import annotations

import pytest

from tests.model.contract.contract_driver import (EXECUTABLE, IB1, IH_BASE, IH_WB, M32, OUT, PA_CODE, PA_HUGE, PA_OUT,
                                                  PA_OUT2, PA_RO, PDE_PTE, PT_L1, PT_ROOT, READABLE, RING1, RPTR1_WB,
                                                  SRING, VALID, VA_CODE, VA_HOLE, VA_HUGE, VA_OUT, VA_RO, WRITEABLE,
                                                  Gpu, Ring, SdmaRing, bring_up, dma_data, expect_error, expect_fault,
                                                  expect_sdma_error, ib, lo_hi, map_vmid1, pm4, pm4_packets,
                                                  release_mem, sdma, sdma_packets, wait_mem, write_data)
from tests.model.contract.on_the_model import on_the_model


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



def check_vm_faults_past_a_huge_page_s_end(dev):
    """A huge page (a root entry with PDE_PTE: 2 MiB, VA_HUGE) ends where its range does: an
    access running on past it meets the next root entry, here not VALID, and faults there at
    LEVEL 0, CAUSE INVALID, at the next range's first byte (docs/hardware.md, Virtual memory:
    a WRITE_DATA's blocks before the failing one written; a DMA transfer's first failing byte
    is its page's first byte it moves), for each access kind that can cross: a WRITE_DATA, a
    DMA_DATA's destination and source, and the SDMA's WRITE_LINEAR, CONSTANT_FILL and
    COPY_LINEAR (SDMA_ERROR VM_FAULT at that address, VM_FAULT_STATUS the CP's: 0)."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    P, S = pm4_packets(), sdma_packets()
    edge = VA_HUGE + (2 << 20)  # the huge page's end: the next root entry is not VALID
    W, DR, DW = 1, 3, 4

    def run_ib(body):
        g.w32(PA_CODE, body)
        ring.submit(ib(VA_CODE, len(body), VMID=1))

    g.dev.mem[PA_HUGE + (2 << 20) - 64:PA_HUGE + (2 << 20)] = [0] * 64
    run_ib(write_data(edge - 8, [0xE1, 0xE2, 0xE3, 0xE4]))
    expect_fault(ring, ih, edge, W, 0, 0, P["WRITE_DATA"].opcode, 0, 0x20)
    assert g.r32(PA_HUGE + (2 << 20) - 8, 2) == [0xE1, 0xE2], "the block before the huge page's end is written"
    run_ib(dma_data(edge - 0x30, VA_OUT, 0x60, CP_SYNC=1))
    expect_fault(ring, ih, edge, DW, 0, 0, P["DMA_DATA"].opcode, 0, 0x20)
    run_ib(dma_data(VA_OUT, edge - 0x30, 0x60, CP_SYNC=1))
    expect_fault(ring, ih, edge, DR, 0, 0, P["DMA_DATA"].opcode, 0, 0x40)
    s = SdmaRing(g, SRING, 8)
    for body, name in ((sdma("WRITE_LINEAR", [1, 2, 3, 4], COUNT=3, **lo_hi("DST_ADDR", edge - 8, 2)), "WRITE_LINEAR"),
                       (sdma("CONSTANT_FILL", SRC_DATA=5, COUNT=0x5F, **lo_hi("DST_ADDR", edge - 0x30)), "CONSTANT_FILL"),
                       (sdma("COPY_LINEAR", COUNT=0x5F, **lo_hi("SRC_ADDR", edge - 0x30), **lo_hi("DST_ADDR", VA_OUT)),
                        "COPY_LINEAR")):
        g.w32(PA_CODE, body + [0] * (16 - len(body)))
        s.submit(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE, 5), IB_SIZE=16, VMID=1))
        expect_sdma_error(s, ih, "VM_FAULT", "IB1", S[name].opcode, edge, 0)
        assert g.read("VM_FAULT_STATUS") == 0, name


def check_vm_fault_status_shows_a_fault_beside_the_other_queue_s_other_error(dev):
    """VM_FAULT_STATUS is the fault that stopped a CP queue, queue 0's only when both queues
    are stopped by one (registers.md): with one queue stopped by a fault and the other by an
    error that is not one (ILLEGAL_OPCODE), it shows the fault whichever queue has it and
    whichever came first, and reads 0 once the faulting queue is reset while the other is
    still stopped."""
    g, q0, ih = bring_up(dev)
    q1 = Ring(g, RING1, 8, RPTR1_WB, queue=1)
    map_vmid1(g)
    bad = [0xC000FF00, 0]  # ILLEGAL_OPCODE at the ring
    g.w32(PA_CODE, write_data(VA_RO + 0x10, [1]))  # a WRITE PERMISSION fault at level 1
    g.w32(PA_CODE + 0x100, wait_mem(VA_HOLE + 8, 0, 0, "ALWAYS"))  # a READ INVALID at level 1
    fw = g.value("VM_FAULT_STATUS", VMID=1, ACCESS=1, LEVEL=1, CAUSE=1)
    fr = g.value("VM_FAULT_STATUS", VMID=1, ACCESS=0, LEVEL=1, CAUSE=0)
    ill = g.err["ILLEGAL_OPCODE"]

    def shows(want, va, why):
        got = (g.read("VM_FAULT_STATUS"), g.read("VM_FAULT_ADDR_LO"), g.read("VM_FAULT_ADDR_HI"))
        assert got == (want, va, 0), f"{why}: VM_FAULT_STATUS/ADDR {got[0]:#x} {got[1]:#x}, expected {want:#x} {va:#x}"

    def reset(*qs):
        for q in qs:
            g.set("CP_QUEUE_RESET", **{f"Q{0 if q is q0 else 1}": 1})
            g.idle(q.status)
            q.wptr = 0

    for fq, eq in ((q1, q0), (q0, q1)):  # the queue that faults, the one stopped otherwise
        fq.submit(ib(VA_CODE, 5, VMID=1))
        assert g.idle(fq.status)["ERROR"] == 1
        eq.submit(bad)
        assert g.idle(eq.status)["ERROR"] == 1 and g.fields(eq.error)["CODE"] == ill, g.fields(eq.error)
        shows(fw, VA_RO + 0x10, f"queue {fq is q1:d}'s fault, then queue {eq is q1:d}'s ILLEGAL_OPCODE")
        e_f, e_e = ih.pop()
        assert (ih.source(e_f), e_f["RING_ID"], e_f["DATA2"]) == ("VM_FAULT", int(fq is q1), fw), e_f
        assert (ih.source(e_e), e_e["RING_ID"], e_e["DATA0"] & 0xFF) == ("CP_ERROR", int(eq is q1), ill), e_e
        reset(fq)
        assert g.fields(eq.status)["ERROR"] == 1
        shows(0, 0, f"queue {fq is q1:d} reset, queue {eq is q1:d} still stopped by ILLEGAL_OPCODE")
        fq.submit(ib(VA_CODE + 0x100, 7, VMID=1))  # the fault after the other error this time
        assert g.idle(fq.status)["ERROR"] == 1
        shows(fr, VA_HOLE + 8, f"queue {eq is q1:d}'s ILLEGAL_OPCODE, then queue {fq is q1:d}'s fault")
        reset(eq)
        shows(fr, VA_HOLE + 8, f"queue {eq is q1:d} reset, queue {fq is q1:d} still stopped by its fault")
        reset(fq)
        shows(0, 0, "both queues reset")
        ih.pop()
        g.write("INT_STATUS", M32)


CHECKS = [check_vm_translation_faults_and_invalidate, check_vm_fault_status_follows_the_stopped_queue,
          check_vm_entry_bits_and_walk_errors, check_vm_fault_addresses_at_page_edges,
          check_queue_resets_during_a_walk_leave_no_error,
          check_vm_leaf_beyond_memory_is_a_bus_error_at_the_virtual_address,
          check_cp_and_sdma_vm_faults_at_once, check_vm_fault_entries_of_both_queues_and_a_full_ih_ring,
          check_vm_walks_and_leaves_in_memory_answering_slverr, check_vm_faults_past_a_huge_page_s_end,
          check_vm_fault_status_shows_a_fault_beside_the_other_queue_s_other_error]


test_contract_on_the_model = on_the_model(CHECKS)


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
