"""GPU virtual memory: the single source of the page-table format and the fault report.

The MMU (rtl/mmu.py) translates every memory access of the CP and the DMA engine through
per-VMID page tables walked by hardware, as AMD's GPUVM does (amdgpu_vm.c, gmc_v9_0.c):

- 16 VMIDs. Each has a page-table base (VM_CONTEXT_PT_BASE_LO/HI: the root directory's
  address) and an enable (VM_CONTEXT_CNTL.ENABLE). A VMID whose enable is clear is not
  translated: its addresses are physical. VMID 0 is the kernel's (ring fetches, IH entries,
  rptr/wptr write-back, the kernel ring's own packets); the kernel ring's
  INDIRECT_BUFFER names the VMID its IB runs with, and an IB cannot change it.
- Tables of 512 8-byte entries (4 KiB) over `LEVELS` levels, 4 KiB pages: a virtual
  address has 12 + 9 * LEVELS bits (30 bits, 1 GiB per VMID in the default build);
  level 0 is the root directory, level LEVELS - 1 the page tables.
- Entries are amdgpu's 64-bit PDE/PTE (amdgpu_vm.h): VALID, SYSTEM, SNOOPED, EXECUTABLE,
  READABLE, WRITEABLE at AMDGPU_PTE_*'s bit positions, the address in bits 47:12; a
  directory entry with PDE_PTE set (AMDGPU_PDE_PTE) is a leaf for the whole range it
  covers (2 MiB at the level above the page tables): a huge page.

Every request carries its VMID and access kind to the MMU; a translation that fails is
answered with an error response tagged with the fault's cause and level, and the
requester that consumes it (the CP, or the DMA engine through it) stops with CP_ERROR
VM_FAULT, latching VM_FAULT_STATUS and VM_FAULT_ADDR and appending a VM_FAULT IH entry
(client UTCL2, source 0, as gmc_v9_0_process_interrupt reads it).

The RTL, the reference model (testbench/refmodel/), the KMD's page-table code
(kmd_model/mm/vm.py) and docs/hardware.md all read this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT
LEVEL_BITS = 9  # 512 entries per table
ENTRIES = 1 << LEVEL_BITS
ENTRY_BYTES = 8
TABLE_BYTES = ENTRIES * ENTRY_BYTES  # one table is one 4 KiB page
LEVELS = 2  # the default build (rtl/top.py; VM_CAPS.LEVELS says which)
# the levels a build may have, on the RTL (rtl/mmu.py) and the model (RefModel's vm_levels)
# alike: a root directory above the page tables at least (one level, the root a page table
# of 2 MiB, the model accepted alone), a 48-bit address at most (a PTE's address field)
BUILD_LEVELS = (2, 3, 4)
VMIDS = 16
KERNEL_VMID = 0
ADDR_LSB, ADDR_MSB = 12, 47  # the address field of a PDE/PTE: bits 47:12
ADDR_MASK = ((1 << (ADDR_MSB + 1)) - 1) & ~((1 << ADDR_LSB) - 1)


def va_bits(levels: int = LEVELS) -> int:
    """Bits of a virtual address with `levels` levels of tables."""
    return PAGE_SHIFT + LEVEL_BITS * levels


def index(va: int, level: int, levels: int = LEVELS) -> int:
    """The entry of table `level` (0 = the root) that translates `va`."""
    return (va >> (PAGE_SHIFT + LEVEL_BITS * (levels - 1 - level))) & (ENTRIES - 1)


def leaf_bits(level: int, levels: int = LEVELS) -> int:
    """log2 of the bytes one entry of table `level` maps as a leaf (12 for a PTE)."""
    return PAGE_SHIFT + LEVEL_BITS * (levels - 1 - level)


@dataclass(frozen=True)
class EntryBit:
    name: str
    bit: int
    desc: str

    @property
    def mask(self) -> int:
        return 1 << self.bit


BITS: tuple[EntryBit, ...] = (
    EntryBit("VALID", 0, "The entry is valid (AMDGPU_PTE_VALID); clear: a fault at this level."),
    EntryBit("SYSTEM", 1, "System memory (AMDGPU_PTE_SYSTEM): reserved for now, ignored."),
    EntryBit("SNOOPED", 2, "Snooped by the CPU's caches (AMDGPU_PTE_SNOOPED): reserved for now, ignored."),
    EntryBit("EXECUTABLE", 4, "Commands may be fetched from the page (AMDGPU_PTE_EXECUTABLE): ring and IB fetches need it."),
    EntryBit("READABLE", 5, "Reads allowed (AMDGPU_PTE_READABLE): WAIT_REG_MEM polls and DMA sources need it."),
    EntryBit("WRITEABLE", 6, "Writes allowed (AMDGPU_PTE_WRITEABLE): WRITE_DATA, RELEASE_MEM and DMA destinations need it."),
    EntryBit("PDE_PTE", 54, "In a directory entry: the entry is a leaf for its whole range, a huge page "
                            "(AMDGPU_PDE_PTE); ignored in a page-table entry."),
)
BIT = {b.name: b for b in BITS}
VALID = BIT["VALID"].mask
SYSTEM = BIT["SYSTEM"].mask
SNOOPED = BIT["SNOOPED"].mask
EXECUTABLE = BIT["EXECUTABLE"].mask
READABLE = BIT["READABLE"].mask
WRITEABLE = BIT["WRITEABLE"].mask
PDE_PTE = BIT["PDE_PTE"].mask


def pde(table_addr: int) -> int:
    """A directory entry pointing at the next-level table at `table_addr` (4 KiB aligned)."""
    return (table_addr & ADDR_MASK) | VALID


def pte(page_addr: int, flags: int) -> int:
    """A leaf entry mapping the page at `page_addr` with `flags` (READABLE | ...); VALID is added."""
    return (page_addr & ADDR_MASK) | flags | VALID


class Access(IntEnum):
    """What the faulting access was (VM_FAULT_STATUS.ACCESS) and the permission it needs."""

    READ = 0  # a CP read of data: a WAIT_REG_MEM poll
    WRITE = 1  # a CP write: WRITE_DATA, RELEASE_MEM
    FETCH = 2  # a CP fetch of ring or IB dwords
    DMA_READ = 3  # the DMA engine reading a DMA_DATA source
    DMA_WRITE = 4  # the DMA engine writing a DMA_DATA destination


NEEDS = {
    Access.READ: READABLE, Access.WRITE: WRITEABLE, Access.FETCH: EXECUTABLE,
    Access.DMA_READ: READABLE, Access.DMA_WRITE: WRITEABLE,
}
"""The PTE permission bit each access kind needs."""


class Cause(IntEnum):
    """Why the translation failed (VM_FAULT_STATUS.CAUSE)."""

    INVALID = 0  # the entry at LEVEL is not VALID
    PERMISSION = 1  # the leaf (at LEVEL) lacks the permission the access needs
    RANGE = 2  # the address has bits above the tables' reach (LEVEL 0)
    WALK_ERROR = 3  # reading the entry at LEVEL answered a bus error


# The fault's source data in its IH entry (AMD gmc_v9_0_process_interrupt reads dwords 4-5:
# src_data[0] = address bits 43:12, src_data[1] bits 3:0 = address bits 47:44, and
# AMDGPU_GMC9_FAULT_SOURCE_DATA_READ/WRITE/EXE as hints).
SRC1_ADDR_HI_BITS = 4
HINT_READ = 0x40
HINT_WRITE = 0x20
HINT_EXE = 0x10
HINTS = {
    Access.READ: HINT_READ, Access.WRITE: HINT_WRITE, Access.FETCH: HINT_EXE,
    Access.DMA_READ: HINT_READ, Access.DMA_WRITE: HINT_WRITE,
}


def fault_src_data(va: int, access: int) -> tuple[int, int]:
    """(DATA0, DATA1) of a VM_FAULT IH entry, as gmc_v9_0_process_interrupt decodes them."""
    return (va >> PAGE_SHIFT) & 0xFFFF_FFFF, ((va >> 44) & 0xF) | HINTS[Access(access)]


def fault_addr_from_src_data(data0: int, data1: int) -> int:
    """The page address a VM_FAULT entry carries (amdgpu: addr = src_data[0] << 12 |
    (src_data[1] & 0xf) << 44)."""
    return data0 << PAGE_SHIFT | (data1 & 0xF) << 44


@dataclass(frozen=True)
class Walk:
    """What a software walk of one address found (the model's and the KMD's walker)."""

    phys: int | None  # the physical address, or None on a fault
    flags: int  # the leaf's bits (0 on a fault before a leaf)
    cause: Cause | None
    level: int


def walk(read64, root: int, va: int, access: int | None, levels: int = LEVELS,
         read_ok=lambda addr: True) -> Walk:
    """Translate `va` through the tables under `root` as the MMU does. `read64(addr)` reads an
    entry; `read_ok(addr)` says whether that read answers OKAY (else WALK_ERROR). With
    `access` None, permissions are not checked (a lookup, not an access)."""
    if va >> va_bits(levels):
        return Walk(None, 0, Cause.RANGE, 0)
    table = root & ADDR_MASK
    for level in range(levels):
        ea = table + ENTRY_BYTES * index(va, level, levels)
        if not read_ok(ea):
            return Walk(None, 0, Cause.WALK_ERROR, level)
        e = read64(ea)
        if not e & VALID:
            return Walk(None, 0, Cause.INVALID, level)
        if level == levels - 1 or e & PDE_PTE:
            if access is not None and not e & NEEDS[Access(access)]:
                return Walk(None, e, Cause.PERMISSION, level)
            span = (1 << leaf_bits(level, levels)) - 1
            return Walk(((e & ADDR_MASK) & ~span) | (va & span), e, None, level)
        table = e & ADDR_MASK
    raise AssertionError("unreachable")  # pragma: no cover
