"""spec/vm.py, the single source of the page-table format: the entry bits and the VM fault's
IH source data against AMD's own values (amdgpu_vm.h, gmc_v9_0), and the software walker the
KMD and the reference model share with the MMU's definition. The KMD's page tables and the
faults of real jobs are tests/kmd/memory/test_kmd_vm.py's.
"""

from __future__ import annotations

import pytest

from spec import vm as vm_spec


def test_pde_and_pte_bits_are_amdgpus():
    """The entry bits are amdgpu_vm.h's (AMDGPU_PTE_VALID 1 << 0, SYSTEM 1, SNOOPED 2,
    EXECUTABLE 4, READABLE 5, WRITEABLE 6, AMDGPU_PDE_PTE 1 << 54), the address in bits 47:12:
    the KMD, the model and the MMU all read spec/vm.py, so a bit moved there moves in all of
    them alike and only AMD's own values tell."""
    assert [(b.name, b.mask) for b in vm_spec.BITS] == [
        ("VALID", 0x1), ("SYSTEM", 0x2), ("SNOOPED", 0x4), ("EXECUTABLE", 0x10), ("READABLE", 0x20),
        ("WRITEABLE", 0x40), ("PDE_PTE", 1 << 54)]
    assert (vm_spec.VALID, vm_spec.EXECUTABLE, vm_spec.READABLE, vm_spec.WRITEABLE, vm_spec.PDE_PTE) == (
        0x1, 0x10, 0x20, 0x40, 1 << 54)
    assert vm_spec.pte(0xF123_4567_8ABC, vm_spec.READABLE | vm_spec.WRITEABLE) == 0xF123_4567_8061
    assert vm_spec.pte(0x1_0000_0000_0000, vm_spec.EXECUTABLE) == 0x11  # above bit 47: not an address bit
    assert vm_spec.pde(0x0000_0012_3456_7000) == 0x0000_0012_3456_7001


@pytest.mark.parametrize("va, access, data", [
    (0x0000_3FFF_F000, vm_spec.Access.FETCH, (0x3FFFF, 0x10)),
    (0xF123_4567_8ABC, vm_spec.Access.DMA_WRITE, (0x1234_5678, 0x2F)),
    (0x1000_0000_0000, vm_spec.Access.READ, (0, 0x41)),
    (0x0FFF_FFFF_F000, vm_spec.Access.WRITE, (0xFFFF_FFFF, 0x20)),
])
def test_a_vm_fault_entry_carries_the_page_as_amdgpu_decodes_it(va, access, data):
    """A VM_FAULT IH entry's DATA0/DATA1 are gmc_v9_0_process_interrupt's src_data: the page's
    address bits 43:12, then bits 47:44 with the READ/WRITE/EXE hint; amdgpu rebuilds the
    faulting page from them (addr = src_data[0] << 12 | (src_data[1] & 0xf) << 44)."""
    assert vm_spec.fault_src_data(va, access) == data
    assert vm_spec.fault_addr_from_src_data(*data) == va & ~0xFFF


def test_the_walk_reports_each_fault_with_its_cause_and_level():
    """spec/vm.walk, the walker the KMD and the model share with the MMU's definition: a
    translation through a PDE and a PTE, a 2 MiB huge page (PDE_PTE), and each fault at the
    level it happened (VM_FAULT_STATUS.LEVEL): an address beyond the tables, an entry not
    VALID, a leaf without the permission, an entry whose read answers a bus error."""
    root, pt = 0x10_0000, 0x20_0000
    mem = {root + 8 * 0: vm_spec.pde(pt),
           root + 8 * 1: vm_spec.pte(0x4000_0000, vm_spec.READABLE | vm_spec.PDE_PTE),
           pt + 8 * 3: vm_spec.pte(0x7_5000, vm_spec.READABLE | vm_spec.WRITEABLE)}
    read = lambda a: mem.get(a, 0)  # noqa: E731
    W, C, A = vm_spec.Walk, vm_spec.Cause, vm_spec.Access
    assert vm_spec.walk(read, root, 0x3123, A.WRITE) == W(0x7_5123, mem[pt + 24], None, 1)
    assert vm_spec.walk(read, root, 0x3123, None) == W(0x7_5123, mem[pt + 24], None, 1)
    assert vm_spec.walk(read, root, 0x3123, A.FETCH) == W(None, mem[pt + 24], C.PERMISSION, 1)
    assert vm_spec.walk(read, root, 0x20_0000 + 0x1_2345, A.DMA_READ) == W(0x4001_2345, mem[root + 8], None, 0)
    assert vm_spec.walk(read, root, 0x20_0000, A.DMA_WRITE) == W(None, mem[root + 8], C.PERMISSION, 0)
    assert vm_spec.walk(read, root, 0x4000, A.READ) == W(None, 0, C.INVALID, 1)
    assert vm_spec.walk(read, root, 0x40_0000, A.READ) == W(None, 0, C.INVALID, 0)
    assert vm_spec.walk(read, root, 1 << 30, A.READ) == W(None, 0, C.RANGE, 0)
    assert vm_spec.walk(read, root, 0x3000, A.READ, read_ok=lambda a: a != pt + 24) == W(None, 0, C.WALK_ERROR, 1)
    assert vm_spec.walk(read, root, 0x3000, A.READ, read_ok=lambda a: a != root) == W(None, 0, C.WALK_ERROR, 0)
