"""How the reference model's CP and DMA reach memory: translation through the MMU, the
error window's bus errors, fetches, reads and block writes, exactly as the RTL's bus
does it (docs/hardware.md)."""

from __future__ import annotations


import numpy as np

from spec import vm as vm_spec

from .cp.packets import _Fault, _vm_fault
from .mmu import pages
from .regmap import ADDR_BITS, DECERR, OKAY, _BUS_ERROR, _FETCH, _PAGE_MASK, _WRITE


class MemoryAccess:
    """RefModel's memory paths (a mixin: the state lives in RefModel)."""

    def _first_fault(self, a: int, n: int) -> tuple[int, int]:
        """(index, response) of the first of the n dwords at byte address a (4-aligned)
        that answers an error, or (n, OKAY)."""
        size = self._size
        j_oor = 0 if a >= size else min(n, (size - a) >> 2)
        wb, wl = self._wb, self._wl
        if wl > wb and a + 4 * n > wb and a < wl:
            j_win = max(0, ((wb - a - 4) >> 2) + 1)
            if j_win <= j_oor:
                return j_win, self._wresp
        if j_oor < n:
            return j_oor, DECERR
        return n, OKAY

    def _first_bad_byte(self, a: int, n: int) -> tuple[int, int]:
        """As _first_fault, for n bytes at any address (the DMA engine)."""
        size = self._size
        j_oor = 0 if a >= size else min(n, size - a)
        wb, wl = self._wb, self._wl
        if wl > wb and a + n > wb and a < wl:
            j_win = max(0, wb - a)
            if j_win <= j_oor:
                return j_win, self._wresp
        if j_oor < n:
            return j_oor, DECERR
        return n, OKAY

    def _fetch(self, base: int, mask: int | None, start: int, k: int) -> tuple[np.ndarray, _Fault | None]:
        """Dwords [start, start + k) of the ring (index mask, VMID 0) or an IB (mask None, the
        job's VMID), cut at the first dword whose read faults: (dwords, its fault or None)."""
        if mask is None:
            segs = ((base + 4 * start, k),)
            vmid = self._vmid
        else:
            i0 = start & mask
            first = mask + 1 - i0
            segs = ((base + 4 * i0, k),) if k <= first else ((base + 4 * i0, first), (base, k - first))
            vmid = 0
        parts = []
        for a, n in segs:
            words, f = self._read32(vmid, a, n, _FETCH)
            parts.append(words)
            if f is not None:
                break
        else:
            f = None
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), f

    def _read32(self, vmid: int, va: int, n: int, access: int) -> tuple[np.ndarray, _Fault | None]:
        """The n dwords at va (4-aligned) the CP reads with `vmid`, up to the first that
        faults: (dwords, its fault or None)."""
        m32 = self._m32
        if not self._vm_on[vmid]:
            e = va + 4 * n
            i = va >> 2
            if e <= self._size and (e <= self._wb or va >= self._wl):
                return m32[i:i + n], None
            j, resp = self._first_fault(va, n)
            return m32[i:i + j], (_Fault(_BUS_ERROR[resp], va + 4 * j) if resp else None)
        parts = []
        for a, nb in pages(va, 4 * n):
            pa, why = self._mmu.translate(vmid, a, access)
            if why is not None:
                f = _vm_fault(a, access, vmid, why)
                break
            j, resp = self._first_fault(pa, nb >> 2)
            parts.append(m32[pa >> 2:(pa >> 2) + j])
            if resp:
                f = _Fault(_BUS_ERROR[resp], a + 4 * j)
                break
        else:
            f = None
        if not parts:
            return m32[0:0], f
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), f

    def _phys_span(self, vmid: int, va: int, nbytes: int, access: int) -> int:
        """The physical address of [va, va + nbytes) when it is contiguous and answers
        without an error (the fast path: one page, or no translation), else -1."""
        if self._vm_on[vmid]:
            if (va & _PAGE_MASK) + nbytes > vm_spec.PAGE_SIZE:
                return -1
            va, why = self._mmu.translate(vmid, va, access)
            if why is not None:
                return -1
        e = va + nbytes
        return va if e <= self._size and (e <= self._wb or va >= self._wl) else -1

    def _span(self, base: int, mask: int | None, start: int, k: int) -> int:
        """The physical address of dwords [start, start + k) of the ring or an IB when they
        are contiguous in memory and read without an error (the fast path), else -1."""
        if mask is None:
            return self._phys_span(self._vmid, base + 4 * start, 4 * k, _FETCH)
        i0 = start & mask
        if k > mask + 1 - i0:
            return -1
        return self._phys_span(0, base + 4 * i0, 4 * k, _FETCH)

    def _read(self, base: int, mask: int | None, start: int, k: int) -> list[int]:
        """Payload dwords the parser consumes (counted in PERF_DWORDS_FETCHED)."""
        a = self._span(base, mask, start, k)
        if a >= 0:
            self._fetched += k
            i = a >> 2
            return self._mv[i:i + k].tolist()
        words, f = self._fetch(base, mask, start, k)
        self._fetched += len(words) + (f is not None)  # the faulting dword was consumed too
        if f is not None:
            raise f
        return words.tolist()

    def _cp_write(self, a: int, words, vmid: int) -> None:
        """A CP write of dwords at a (4-aligned) with `vmid`: each page's part translated,
        then written as _cp_write_phys does. A VM fault writes nothing of its page (the MMU
        answers every block there); the error names its first address. An address with bits
        above the bus's 48 never reaches the MMU: the CP answers it BUS_DECERR itself, as
        untranslated (rtl/cp/packets.py beyond_bus), not a VM fault (RANGE)."""
        if not self._vm_on[vmid] or a >> ADDR_BITS:
            return self._cp_write_phys(a, words)
        n = len(words)
        k = 0
        for va, nb in pages(a, 4 * n):
            cnt = nb >> 2
            pa, why = self._mmu.translate(vmid, va, _WRITE)
            if why is not None:
                f = _vm_fault(va, _WRITE, vmid, why)
                f.done = min(n, (((va | 31) + 1) - a) >> 2)
                raise f
            try:
                self._cp_write_phys(pa, words[k:k + cnt])
            except _Fault as e:
                e.addr = va + (e.addr - pa)
                e.done += k
                raise
            k += cnt

    def _cp_write_phys(self, a: int, words) -> None:
        """A CP write of dwords at physical a (4-aligned). Like rtl/cp/writer.py it goes out in aligned
        32-byte blocks, each waiting for its response: on an error the earlier blocks are
        written, the faulting block keeps its good dwords, later blocks are not written;
        the error names the block's first written address and its worst response."""
        n = len(words)
        if not n:
            return
        e = a + 4 * n
        i = a >> 2
        if e <= self._size and (e <= self._wb or a >= self._wl):
            if n <= 8 and isinstance(words, list):
                mv = self._mv
                for k, w in enumerate(words):
                    mv[i + k] = w
            else:
                self._m32[i:i + n] = words
            return
        j, resp = self._first_fault(a, n)
        if not resp:
            self._m32[i:i + n] = words
            return
        fa = a + 4 * j
        js = max(0, ((fa & ~31) - a) >> 2)
        je = min(n, (((fa | 31) + 1) - a) >> 2)
        if js:
            self._m32[i:i + js] = words[:js]
        worst = OKAY
        for k in range(js, je):
            _, r = self._first_fault(a + 4 * k, 1)
            if r:
                worst = max(worst, r)
            else:
                self._m32[i + k] = words[k]
        raise _Fault(_BUS_ERROR[worst], a + 4 * js, done=je)


    def _gather(self, vmid: int, va: int, n: int) -> np.ndarray:
        """A copy of the n bytes at va (every page known to translate)."""
        out = np.empty(n, dtype=np.uint8)
        done = 0
        for a, nb in pages(va, n):
            pa, _ = self._mmu.translate(vmid, a, vm_spec.Access.DMA_READ)
            out[done:done + nb] = self._mem[pa:pa + nb]
            done += nb
        return out

    def _bad_byte(self, vmid: int, va: int, n: int, access: int) -> tuple[int, int, tuple | None]:
        """(index, bus response, VM fault (cause, level)) of the first of the n bytes at va
        that fails, or (n, OKAY, None)."""
        if not self._vm_on[vmid]:
            k, resp = self._first_bad_byte(va, n)
            return k, resp, None
        k = 0
        for a, nb in pages(va, n):
            pa, why = self._mmu.translate(vmid, a, access)
            if why is not None:
                return k, OKAY, why
            j, resp = self._first_bad_byte(pa, nb)
            if resp:
                return k + j, resp, None
            k += nb
        return n, OKAY, None
