"""The contract, checked by an outside driver writer (tests/model/contract/contract_driver.py, from
the docs alone; split by concept from test_contract_vm.py, which has the page tables and
faults): the TLB and its invalidation. New tables need an invalidation, what
VM_INVALIDATE_REQ drops (VMIDs, pages), the leaves the TLB keeps (a permission fault's, not a
failed walk), a soft reset that keeps the TLB, every poll translated (a page taken away or
remapped while a wait polls), the CP queues keeping their VMIDs across turns and resets, and
a VMID switched off reading no TLB entry it left, a request written over a pending one.

The `check_*(dev)` bodies run here on the reference model and, through CHECKS and
tests/cosim/driver_checks.py, on the RTL under Verilator and Icarus (as contract_vm__check_*,
the name of the file they were split from).
"""

from __future__ import annotations

from tests.model.contract.contract_driver import (EXECUTABLE, M32, PA_CODE, PA_HUGE, PA_OUT, PA_OUT2, PA_RO, PDE_PTE,
                                                  PT_L1, PT_ROOT, READABLE, RING1, RPTR1_WB, SRING, VALID, VA_CODE,
                                                  VA_HOLE, VA_HUGE, VA_OUT, VA_RO, WRITEABLE, Ring, SdmaRing, bring_up,
                                                  dma_data, expect_fault, expect_sdma_error, ib, lo_hi, map_vmid1, pm4,
                                                  pm4_packets, release_mem, sdma, sdma_packets, wait_mem, write_data)
from tests.model.contract.on_the_model import on_the_model

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


def check_tlb_holds_2_to_the_tlb_log2_pages_of_any_addresses(dev):
    """docs/hardware.md, TLB: 2^VM_CAPS.TLB_LOG2 entries (16), fully associative, each for one
    4 KiB page. After an ALL_ADDR invalidation of VMID 1, an IB (in one page) writing N pages
    64 KiB apart (the same low page bits: a direct-mapped TLB would keep one of them) walks
    N + 1 times (PERF_TLB_MISSES); run again, with N + 1 = 16 pages it walks no more, with 17
    it walks again. Every write lands in its page either way. On the RTL; the reference model
    has no TLB and its counters read 0 (docs/hardware.md, Counters and time)."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    entries = 1 << g.fields("VM_CAPS")["TLB_LOG2"]
    vas = [0x3000 + 0x10000 * i for i in range(entries)]  # VA bits 15:12 all 3, below VA_CODE's 2 MiB
    pas = [0x300000 + 0x1000 * i for i in range(entries)]
    for va, pa in zip(vas, pas):
        g.w64(PT_L1 + 8 * (va >> 12 & 511), pa | VALID | WRITEABLE | READABLE)

    def run(n, value, invalidate):
        if invalidate:
            g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=1)
            g.until(lambda: g.read("VM_INVALIDATE_ACK") >> 1 & 1, "VM_INVALIDATE_ACK of VMID 1")
        code = [d for va in vas[:n] for d in write_data(va + 4 * (value & 7), [value << 8 | vas.index(va)])]
        g.w32(PA_CODE, code)
        before = g.read("PERF_TLB_MISSES")
        assert ring.run(ib(VA_CODE, len(code), VMID=1))["ERROR"] == 0, g.fields("CP_ERROR")
        for i in range(n):
            assert g.r32(pas[i] + 4 * (value & 7)) == value << 8 | i, f"page {i} of {n}: the write went elsewhere"
        return (g.read("PERF_TLB_MISSES") - before) & M32

    model = dev.name == "model"
    for n in (entries - 1, entries):
        first, second = run(n, 1, True), run(n, 2, False)
        if model:
            assert (first, second) == (0, 0), "the model has no TLB: PERF_TLB_MISSES reads 0"
        elif n < entries:  # they all fit
            assert (first, second) == (n + 1, 0), f"{n} pages and the IB's in a TLB of {entries}: {first} walks " \
                                                   f"after the invalidation, {second} the second time"
        else:  # one more than fits: the IB's page may be replaced (and walked again) while it runs
            assert first >= n + 1 and second > 0, f"{n + 1} pages in a TLB of {entries}: {first}, then {second} walks"


def check_a_vmid_switched_off_is_physical_whatever_the_tlb_holds(dev):
    """A VMID whose VM_CONTEXT_CNTL.ENABLE is clear is not translated: its addresses are
    physical (docs/hardware.md, Virtual memory), though the TLB still holds the leaves its
    tables left (clearing ENABLE invalidates nothing): fetches, writes and polls of the CP's
    IBs and the SDMA's under that VMID go to the numerically same physical addresses, the
    PERF_TLB_* counters (translations of VMIDs with translation enabled) do not move, and
    ENABLE set again translates through the kept leaves as before."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    body = write_data(VA_OUT + 0x50, [0xE1])
    g.w32(PA_CODE, body)
    assert ring.run(ib(VA_CODE, len(body), VMID=1))["ERROR"] == 0 and g.r32(PA_OUT + 0x50) == 0xE1
    s = SdmaRing(g, SRING, 6)
    fence = sdma("FENCE", DATA=0xE2, **lo_hi("ADDR", VA_OUT + 0x54, 2))
    g.w32(PA_CODE + 0x100, fence)
    st = s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x100, 5), IB_SIZE=len(fence), VMID=1))
    assert st["ERROR"] == 0 and g.r32(PA_OUT + 0x54) == 0xE2, g.fields("SDMA_ERROR")
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=0)  # VA_CODE, VA_OUT of VMID 1 stay in the TLB
    counters = ("PERF_TLB_HITS", "PERF_TLB_MISSES", "PERF_WALK_CYCLES")
    before = [g.read(c) for c in counters]
    g.w32(VA_RO + 0x10, [0x77])  # the dword the poll reads, at the physical address VA_RO
    body = wait_mem(VA_RO + 0x10, 0x77, M32, "EQ") + write_data(VA_OUT + 0x58, [0xE3])
    g.w32(VA_CODE, body)  # the IB at the physical address VA_CODE
    st = ring.run(ib(VA_CODE, len(body), VMID=1))
    assert st["ERROR"] == 0, (g.fields("CP_ERROR"), g.fields("VM_FAULT_STATUS"))
    assert (g.r32(VA_OUT + 0x58), g.r32(PA_OUT + 0x58)) == (0xE3, 0), "VMID 1 switched off wrote through the TLB"
    poll = sdma("POLL_REGMEM", **lo_hi("ADDR", VA_RO + 0x10, 2), VALUE=0x77, MASK=M32, FUNC="EQ", MEM_POLL="MEMORY",
                INTERVAL=1, RETRY_COUNT=0)
    body = poll + sdma("FENCE", DATA=0xE4, **lo_hi("ADDR", VA_OUT + 0x5C, 2))
    g.w32(VA_CODE + 0x100, body)
    st = s.run(sdma("INDIRECT_BUFFER", **lo_hi("IB_BASE", VA_CODE + 0x100, 5), IB_SIZE=len(body), VMID=1))
    assert st["ERROR"] == 0, g.fields("SDMA_ERROR")
    assert (g.r32(VA_OUT + 0x5C), g.r32(PA_OUT + 0x5C)) == (0xE4, 0), "the SDMA's VMID 1 switched off: physical"
    assert not ih.pop(), "the poll matched at its first read: no POLL_TIMEOUT entry"
    assert [g.read(c) for c in counters] == before, f"{counters} moved while VMID 1 is not translated"
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=1)
    g.w32(PA_CODE, write_data(VA_OUT + 0x60, [0xE5]))
    assert ring.run(ib(VA_CODE, 5, VMID=1))["ERROR"] == 0
    assert (g.r32(PA_OUT + 0x60), g.r32(VA_OUT + 0x60)) == (0xE5, 0), "ENABLE set again: translated"


def check_an_invalidation_written_over_a_pending_one_replaces_it(dev):
    """VM_INVALIDATE_REQ written while the previous request is pending replaces it
    (registers.md): two requests back to back (VMID 1's page, then VMID 2's), and from the
    second write on VM_INVALIDATE_ACK reads 0 or the second request's VMIDs, never the
    first's, then the second's; VMID 2 reads the new entry; VMID 1's entry may or may not
    have gone (the RTL takes a request between translations), so the driver writes VMID 1's
    request again and waits for its ACK, after which it reads the new entry too. And
    VM_INVALIDATE_ADDR_HI (virtual address bits 47:44) is part of the page a request names:
    set, the page is beyond the default build's reach and drops nothing."""
    g, ring, ih = bring_up(dev)
    map_vmid1(g)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT, 2)  # VMID 2: the same tables
    g.set("VM_CONTEXT_CNTL", 2, ENABLE=1)

    def run(vmid, off, value):
        g.w32(PA_CODE + 0x200 * vmid, write_data(VA_OUT + off, [value]))
        assert ring.run(ib(VA_CODE + 0x200 * vmid, 5, VMID=vmid))["ERROR"] == 0
        return g.r32(PA_OUT + off), g.r32(PA_OUT2 + off)

    assert run(1, 0x70, 0x71) == (0x71, 0) and run(2, 0x74, 0x72) == (0x72, 0)
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT2 | VALID | WRITEABLE | READABLE)
    g.write("VM_INVALIDATE_ADDR_LO", VA_OUT >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 2, ALL_ADDR=0)
    seen = []
    g.until(lambda: seen.append(g.read("VM_INVALIDATE_ACK")) or seen[-1] == 1 << 2, "ACK = VMID 2", step=1)
    assert set(seen) <= {0, 1 << 2}, f"VM_INVALIDATE_ACK after the second request: {[hex(v) for v in seen]}"
    assert run(2, 0x78, 0x73) == (0, 0x73), "VMID 2's request was carried out"
    old = run(1, 0x7C, 0x74) == (0x74, 0)  # VMID 1's entry: gone or not
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "ACK = VMID 1")
    assert run(1, 0x80, 0x75) == (0, 0x75), f"VMID 1 after its own request (before it: old entry {old})"
    # VM_INVALIDATE_ADDR_HI is part of the page: a page whose bits 47:44 are set (HI 1, LO
    # the low bits of VA_OUT's page) is beyond the 2-level tables' reach and drops nothing
    g.w64(PT_L1 + 8 * (VA_OUT >> 12 & 511), PA_OUT | VALID | WRITEABLE | READABLE)
    g.write("VM_INVALIDATE_ADDR_LO", VA_OUT >> 12)
    g.write("VM_INVALIDATE_ADDR_HI", 1)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "ACK = VMID 1")
    assert run(1, 0x84, 0x76) == (0, 0x76), "a page with VM_INVALIDATE_ADDR_HI 1 dropped VA_OUT's entry"
    g.write("VM_INVALIDATE_ADDR_HI", 0)
    g.set("VM_INVALIDATE_REQ", PER_VMID=1 << 1, ALL_ADDR=0)
    g.until(lambda: g.read("VM_INVALIDATE_ACK") == 1 << 1, "ACK = VMID 1")
    assert run(1, 0x88, 0x77) == (0x77, 0), "VA_OUT's page with VM_INVALIDATE_ADDR_HI 0"


CHECKS = [check_vm_new_tables_need_an_invalidation, check_soft_reset_keeps_the_tlb_and_clears_the_fault,
          check_vm_page_taken_away_while_polling_faults_the_poll, check_vm_permission_fault_keeps_its_leaf,
          check_vm_invalidation_names_vmids_and_pages, check_vm_poll_remap_and_accesses_that_move_nothing,
          check_cp_queues_keep_their_vmids_across_turns_and_resets, check_tlb_holds_2_to_the_tlb_log2_pages_of_any_addresses,
          check_a_vmid_switched_off_is_physical_whatever_the_tlb_holds,
          check_an_invalidation_written_over_a_pending_one_replaces_it]


test_contract_on_the_model = on_the_model(CHECKS)
