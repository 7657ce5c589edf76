"""Streams under a VMID: page tables, and the packets' addresses made virtual.

`to_vm(stream, rng)` turns a stream built in physical addresses (testbench/difftest/streams/gen.py,
malformed.py) into one whose IBs run under a VMID with translation on:

- every job region of layout.py (IBs, data, DMA destinations and sources, semaphores,
  the bus-error region, canaries) gets a virtual address: its physical address plus an
  offset of its own ("pages": 4 KiB pages, a random 4 KiB-aligned place per region) or
  one shared 2 MiB-aligned offset ("huge": the first 2 MiB as one huge page (PDE_PTE), the
  rest in pages);
- each region's pages get the permissions its packets need (IBs EXECUTABLE, destinations
  WRITEABLE, sources and semaphores READABLE), plus random others;
- the page tables are written by the CPU before the stream starts (layout.PT_REGION), and
  the `vm` action programs the VMID's base and enable;
- every address a packet in an IB names is rewritten to its virtual address, and the
  kernel ring's INDIRECT_BUFFERs name the VMID (an IB2's own VMID field stays random: it
  must not matter).

Every access then lands on the physical byte it named before, so what the generator knows
(the allowed write ranges, the packets' order and effects) holds unchanged, while the RTL
and the model both translate every IB fetch, read and write. Ring packets stay physical
(VMID 0).

`VmFault` plans the pages of layout.VM_FAULT_REGION for the vm_fault error class: a page
without an entry (level 1), a region whose directory entry is missing (level 0), a page
missing a permission, a table in a bus-error window (WALK_ERROR), an address beyond the
tables (RANGE), and a page unmapped and invalidated after it was used.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from spec import packets as pk
from spec import pm4
from spec import vm as vm_spec

from . import layout as L
from .stream import Stream

M32 = 0xFFFF_FFFF
PAGE = vm_spec.PAGE_SIZE
HUGE = 1 << vm_spec.leaf_bits(vm_spec.LEVELS - 2)
VA_TOP = 1 << vm_spec.va_bits()
R, W, X = vm_spec.READABLE, vm_spec.WRITEABLE, vm_spec.EXECUTABLE

# region -> the permissions its packets need
NEEDS = {
    L.IB_REGION: X, L.DATA_REGION: W, L.DMA_DST_REGION: W, L.SRC_REGION: R,
    L.SEM_REGION: R | W, L.FAULT_REGION: R | W, L.CANARY_REGION: W,
}


@dataclass
class VmFault:
    """How the vm_fault class treats layout.VM_FAULT_REGION: `kind` is one of "pte" (the
    target page has no entry), "pde" (the region's 2 MiB has no table), "perm" (the page
    lacks `missing`), "walk" (its table sits in a bus-error window), "range" (the region's
    address is beyond the tables) or "invalidated" (mapped, used, then unmapped)."""

    kind: str
    page: int  # the target page's index in the region
    missing: int = 0
    pte_addr: int = 0  # (filled by to_vm) where the target's PTE is, for "invalidated"
    table: int = 0  # (filled by to_vm) the region's table, for "walk"


@dataclass
class VmPlan:
    vmid: int
    mode: str
    root: int
    offsets: dict = field(default_factory=dict)  # region -> va - pa
    flags: dict = field(default_factory=dict)  # region -> PTE permission bits

    def va(self, pa: int) -> int:
        for (lo, hi), off in self.offsets.items():
            if lo <= pa < hi:
                return pa + off
        return pa


class _Tables:
    """Page tables built in layout.PT_REGION as CPU preloads."""

    def __init__(self):
        self.next = L.PT_REGION[0]
        self.root = self.alloc()
        self.entries: dict[int, int] = {}  # address -> 64-bit entry
        self.l1: dict[int, int] = {}  # 2 MiB VA block -> table address

    def alloc(self) -> int:
        a = self.next
        self.next += vm_spec.TABLE_BYTES
        assert self.next <= L.PT_REGION[1], "page tables do not fit layout.PT_REGION"
        return a

    def table(self, va: int) -> int:
        block = va // HUGE
        if block not in self.l1:
            t = self.alloc()
            self.l1[block] = t
            self.entries[self.root + 8 * vm_spec.index(va, 0)] = vm_spec.pde(t)
        return self.l1[block]

    def page(self, va: int, pa: int, flags: int) -> int:
        """Map one 4 KiB page; returns its PTE's address."""
        a = self.table(va) + 8 * vm_spec.index(va, 1)
        self.entries[a] = vm_spec.pte(pa, flags)
        return a

    def huge(self, va: int, pa: int, flags: int) -> None:
        self.entries[self.root + 8 * vm_spec.index(va, 0)] = vm_spec.pte(pa, flags) | vm_spec.PDE_PTE

    def preloads(self) -> list:
        out = []
        for a, e in sorted(self.entries.items()):
            out.append(("mem", a, [e & M32, e >> 32]))
        return out


def retarget(dwords: list[int], va, ring_vmid: int | None = None) -> list[int]:
    """`dwords` with every address a packet names passed through `va` (low bits kept); with
    `ring_vmid` (the kernel ring's packets, which run untranslated) only the
    INDIRECT_BUFFERs change: their base, and the VMID they name."""
    out = list(dwords)
    for item in pm4.decode_stream(out):
        if not isinstance(item, pm4.Packet) or not item.ok:
            continue
        p = pk.by_name.get(item.name)
        if p is None or ring_vmid is not None and p is not pk.INDIRECT_BUFFER:
            continue
        base = item.offset + 1
        for v in p.values:
            if v.name == "data":
                continue  # RELEASE_MEM's value, however much it looks like an address
            if p is pk.DMA_DATA and v.name == "src" and item.fields.get("SRC_SEL") == \
                    pk.DMA_DATA.field("SRC_SEL").values["DATA"]:
                continue  # a fill's "source" is the value
            lo, hi = (p.field(n) for n in v.fields)
            a = (out[base + hi.dword] >> hi.lsb & hi.max) << 32 | out[base + lo.dword]
            n = va(a)
            if n != a:
                out[base + lo.dword] = n & M32
                out[base + hi.dword] = (out[base + hi.dword] & ~hi.mask & M32) | hi.put(n >> 32 & hi.max)
        if ring_vmid is not None and p is pk.INDIRECT_BUFFER:
            f = p.field("VMID")
            out[base + f.dword] = (out[base + f.dword] & ~f.mask & M32) | f.put(ring_vmid)
    return out


def to_vm(s: Stream, rng: random.Random, fault: VmFault | None = None) -> VmPlan:
    """Make `s` run its IBs under a VMID (see the module docstring); returns the plan."""
    vmid = rng.randint(1, vm_spec.VMIDS - 1)
    regions = list(NEEDS) + ([L.VM_FAULT_REGION] if fault else [])
    mode = rng.choice(["pages", "pages", "huge"]) if fault is None else "pages"
    t = _Tables()
    plan = VmPlan(vmid, mode, t.root)
    if mode == "huge":
        off = HUGE * rng.randrange(1, VA_TOP // HUGE - 2)
        for reg in regions:
            plan.offsets[reg] = off
        everything = X | W | R
        t.huge(off, 0, everything)  # the first 2 MiB (IBs, data, DMA destinations) in one entry
    else:
        slots = rng.sample(range(1, VA_TOP // (8 * HUGE) - 1), len(regions))
        for reg, slot in zip(regions, slots):
            va = slot * 8 * HUGE + PAGE * rng.randrange(0, (4 * HUGE) // PAGE)
            plan.offsets[reg] = va - reg[0]
    for reg in regions:
        need = NEEDS.get(reg, R | W | X)
        flags = need | sum(b for b in (R, W, X) if rng.random() < 0.5)
        plan.flags[reg] = flags
        lo, hi = reg
        off = plan.offsets[reg]
        if mode == "huge" and hi <= HUGE:
            continue  # inside the huge page
        if reg == L.VM_FAULT_REGION:
            _fault_region(t, plan, fault, lo, hi, off)
            continue
        for pa in range(lo, hi, PAGE):
            t.page(pa + off, pa, flags)
    # the packets' addresses become virtual; the kernel ring's IBs name the VMID
    new_actions = []
    for a in s.actions:
        if a[0] == "mem" and L.IB_REGION[0] <= a[1] < L.IB_REGION[1] or a[0] == "mem" and fault and \
                L.VM_FAULT_REGION[0] <= a[1] < L.VM_FAULT_REGION[1]:
            a = ("mem", a[1], retarget(list(a[2]), plan.va))
        elif a[0] == "submit":
            a = ("submit", retarget(a[1], plan.va, ring_vmid=vmid), a[2])
        elif a[0] == "vm_unmap":
            a = ("pte", fault.pte_addr, vmid)
            s.infra.append((fault.pte_addr, fault.pte_addr + 8))  # the driver's write
        elif a[0] == "vm_errwin":
            a = ("errwin", fault.table, fault.table + vm_spec.TABLE_BYTES, "SLVERR")
        new_actions.append(a)
    if fault is not None and fault.kind == "invalidated":
        new_actions = [("check", a[1] + [(fault.pte_addr, fault.pte_addr + 8)]) if a[0] == "check" else a
                       for a in new_actions]
    s.actions = t.preloads() + [("vm", vmid, t.root)] + new_actions
    for p in s.packets:  # the packets as they now are in memory (their writes stay physical)
        p.dwords = retarget(p.dwords, plan.va, ring_vmid=vmid if p.level == 0 else None)
    s.notes.append(f"IBs run as VMID {vmid} ({mode}): " + ", ".join(
        f"[{lo:#x}, {hi:#x}) at {lo + off:#x}" for (lo, hi), off in plan.offsets.items()))
    s.vm = plan
    s.bins.add(("", "VM", mode))
    if any(a[0] == "submit" and any(p.name == "INDIRECT_BUFFER" for p in pm4.decode_stream(a[1]) if p.ok)
           for a in s.actions):
        s.bins.add(("", "VM", "ib_vmid"))
    return plan


def _fault_region(t: _Tables, plan: VmPlan, f: VmFault, lo: int, hi: int, off: int) -> None:
    """layout.VM_FAULT_REGION's pages for the vm_fault class (VmFault)."""
    target = lo + PAGE * f.page
    if f.kind == "range":
        plan.offsets[(lo, hi)] = VA_TOP + PAGE * 7 - lo  # every address beyond the tables
        return
    if f.kind == "pde":
        return  # no table: the root's entry for the region's 2 MiB stays invalid
    if f.kind == "walk":
        f.table = t.table(target + off)  # the target's table (the stream puts a bus-error window on it)
    for pa in range(lo, hi, PAGE):
        flags = plan.flags[(lo, hi)]
        if pa == target:
            if f.kind == "pte":
                t.table(pa + off)
                continue
            if f.kind == "perm":
                flags &= ~f.missing
        a = t.page(pa + off, pa, flags)
        if pa == target:
            f.pte_addr = a
