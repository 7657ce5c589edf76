"""The reference model's DMA datapath: DMA_DATA copies and fills (the SDMA engine's copies
use it too), with the DMA engine's counters and its first failing byte."""

from __future__ import annotations


from kmd_model.regs import CpError
from spec import vm as vm_spec

from .cp.packets import (
    _DMA_COUNT, _DMA_DST, _DMA_FILL, _DMA_SRC, _DMA_SRC_SEL, _Fault, _addr_of, _get, _vm_fault,
)
from .mmu import pages
from .regmap import OKAY, _ADDR_MASK, _BUS_ERROR


class DmaDatapath:
    """RefModel's DMA engine (a mixin: the state lives in RefModel)."""

    def _op_dma_data(self, kind, level, base, mask, pos, ha, n) -> None:
        p = self._read(base, mask, pos + 1, n - 1)
        if not self.has_dma:
            raise _Fault(CpError.UNSUPPORTED, ha)
        for dw, lsb, mx, ok in kind.supported:
            if (p[dw] >> lsb) & mx not in ok:
                raise _Fault(CpError.UNSUPPORTED, ha)
        count = _get(p, _DMA_COUNT)
        if count > self.dma_max_bytes:
            raise _Fault(CpError.DMA_BYTE_COUNT, ha)
        self._packets[kind.index] += 1
        # the DMA engine drives 48 address bits: higher ADDR_HI bits are dropped (docs/hardware.md)
        dst = _addr_of(p, _DMA_DST) & _ADDR_MASK
        fill = _get(p, _DMA_SRC_SEL) == _DMA_FILL
        src = p[_DMA_SRC[0]] if fill else _addr_of(p, _DMA_SRC) & _ADDR_MASK
        self._dma(dst, src, count, fill, self._vmid if level else 0)  # at once: CP_SYNC holds trivially
        self._complete(level, n)

    def _dma_count(self, acct, read: int = 0, written: int = 0, busy: int = 0) -> None:
        """Count a transfer's bytes: the CP's DMA counters, or (acct) the SDMA engine's."""
        if acct is None:
            self._dma_read += read
            self._dma_written += written
            self._dma_busy += busy
        else:
            acct.bytes_read += read
            acct.bytes_written += written

    def _dma(self, dst: int, src: int, count: int, fill: bool, vmid: int, acct=None) -> None:
        """Copy `count` bytes from src to dst (as memmove), or fill them with the 32-bit
        value src: the byte at address a gets byte (a mod 4) of the value, as the engine
        puts the value on every dword lane. Any alignment; both sides translated with `vmid`.

        Errors, as the RTL engine reports them (docs/hardware.md): a read error at the
        first byte the transfer needed in the faulting beat; a write error at the first
        byte of the faulting burst (bursts split at min(16 beats, 4 KiB)-aligned
        boundaries; B carries no beat detail). A VM fault is a page's error: its first
        byte the transfer needs. What a failing transfer leaves in its destination is
        not defined (bursts already under way complete); here the bytes before the first
        faulting one are moved."""
        kr, rresp, rwhy = (count, OKAY, None) if fill else self._bad_byte(vmid, src, count, vm_spec.Access.DMA_READ)
        kw, wresp, wwhy = self._bad_byte(vmid, dst, count, vm_spec.Access.DMA_WRITE)
        k = min(kr, kw)
        B = self._bus_bytes
        if k:
            if not self._vm_on[vmid]:
                self._dma_move(dst, src, k, fill)
            else:
                data = None if fill else self._gather(vmid, src, k)
                done = 0
                for va, nb in pages(dst, k):
                    pa, _ = self._mmu.translate(vmid, va, vm_spec.Access.DMA_WRITE)
                    if fill:
                        self._dma_move(pa, src, nb, True)
                    else:
                        self._mem[pa:pa + nb] = data[done:done + nb]
                    done += nb
            self._dma_count(acct, written=k, busy=-(-k // B))
        if not fill and count:
            # the engine reads whole bus beats: every beat touching [src, src + bytes read)
            end = src + (kr + (1 if rresp or rwhy else 0) if rresp or rwhy else count)
            self._dma_count(acct, read=((end + B - 1) // B - src // B) * B)
        if (rresp or rwhy) and kr <= kw:
            bad = src + kr
            at = max(src, bad - bad % B)
            if rwhy is not None:
                raise _vm_fault(at, vm_spec.Access.DMA_READ, vmid, rwhy)
            raise _Fault(_BUS_ERROR[rresp], at)
        if wresp or wwhy:
            bad = dst + kw
            burst = min(16 * B, 4096)
            at = max(dst, bad - bad % burst)
            if wwhy is not None:
                raise _vm_fault(at, vm_spec.Access.DMA_WRITE, vmid, wwhy)
            raise _Fault(_BUS_ERROR[wresp], at)

    def _dma_move(self, dst: int, src: int, k: int, fill: bool) -> None:
        """Move (or fill) k physical bytes."""
        mem = self._mem
        if fill:
            end = dst + k
            a0, a1 = min(end, (dst + 3) & ~3), max(dst, end & ~3)
            if a0 < a1:
                self._m32[a0 >> 2:a1 >> 2] = src  # whole dwords: the value as it is
            for a in (*range(dst, a0), *range(max(a0, a1), end)):  # at most 3 + 3 edge bytes
                mem[a] = (src >> 8 * (a & 3)) & 0xFF
        else:
            mem[dst:dst + k] = mem[src:src + k]  # numpy buffers overlapping slices: memmove
