"""The reference model's MMU: the translation rtl/mmu.py makes, without cycles.

Same contract (docs/hardware.md "Virtual memory", spec/vm.py): per-VMID page tables walked
in memory, a VMID whose enable is clear is physical, faults by cause and level. The
translations found are kept as the TLB keeps them (a leaf, permissions included; never a
fault) until an invalidation names them, so the model sees a changed page table only
after VM_INVALIDATE_REQ, as the hardware is allowed to (it may see it sooner when its
smaller TLB has evicted the entry: software that changes a valid entry invalidates).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from spec import vm as vm_spec


class ModelMmu:
    def __init__(self, mem32: np.ndarray, entry_ok: Callable[[int], bool], levels: int = vm_spec.LEVELS):
        """`entry_ok(addr)`: the 8-byte page-table read at `addr` answers OKAY."""
        self.m32 = mem32
        self.entry_ok = entry_ok
        self.levels = levels
        self.va_bits = vm_spec.va_bits(levels)
        self.enabled = [False] * vm_spec.VMIDS
        self.base = [0] * vm_spec.VMIDS
        self.tlb: dict[tuple[int, int], tuple[int, int, int]] = {}  # (vmid, va page) -> (pa page, flags, level)

    def configure(self, enabled: list[bool], base: list[int]) -> None:
        self.enabled = enabled
        self.base = base

    def invalidate(self, vmids: int, all_addr: bool, page: int) -> None:
        """VM_INVALIDATE_REQ: drop the entries of the VMIDs in the mask (all, or one page's)."""
        for key in [k for k in self.tlb if vmids >> k[0] & 1 and (all_addr or k[1] == page)]:
            del self.tlb[key]

    def _r64(self, a: int) -> int:
        i = a >> 2
        return int(self.m32[i]) | int(self.m32[i + 1]) << 32

    def translate(self, vmid: int, va: int, access: int) -> tuple[int, tuple | None]:
        """(physical address, None), or (-1, (cause, level)) when the translation faults."""
        if not self.enabled[vmid]:
            return va, None
        page = va >> vm_spec.PAGE_SHIFT
        hit = self.tlb.get((vmid, page))
        if hit is None:
            w = vm_spec.walk(self._r64, self.base[vmid], va, None, self.levels, self.entry_ok)
            if w.phys is None:
                return -1, (w.cause, w.level)
            hit = (w.phys >> vm_spec.PAGE_SHIFT, w.flags, w.level)
            self.tlb[(vmid, page)] = hit
        if not hit[1] & vm_spec.NEEDS[access]:
            return -1, (vm_spec.Cause.PERMISSION, hit[2])
        return hit[0] << vm_spec.PAGE_SHIFT | (va & (vm_spec.PAGE_SIZE - 1)), None


def pages(va: int, n: int):
    """(va, bytes) pieces of [va, va + n) that do not cross a 4 KiB page."""
    while n > 0:
        take = min(n, vm_spec.PAGE_SIZE - (va & (vm_spec.PAGE_SIZE - 1)))
        yield va, take
        va += take
        n -= take
