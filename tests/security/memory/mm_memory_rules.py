"""The state machine's rules for files, BOs and mappings (tests/security/memory/test_security_mm_state.py
puts them together with the jobs' rules of mm_job_rules.py): open and close files, GEM_CREATE,
GEM_MMAP, GEM_CLOSE, GEM_WAIT_IDLE, CPU writes, VRAM filled, and GEM_VA MAP / UNMAP /
REPLACE / CLEAR, good and bad, each checked against the reference (mm_reference.py) as it
goes.
"""

from __future__ import annotations

import errno

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CtxArgs, CtxOp, CtxPriority, Domain, GemFlags, InfoQuery, MappingRevoked, Request, VaOp

from tests.security.memory.mm_reference import (IB_SIZE, IB_VA, PAGE, R, RWX, SPAN, W, WIN0, WINDOW, X, RBo, RFile,
                                                RMap, _err, event)


class MmMemoryRules:
    """Files, GEM and GEM_VA: a mixin of MmMachine (its state: files, kmd, dev, hold)."""

    def _open(self) -> RFile:
        f = kmd_model.open_render_node()
        self.info = self.info or f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
        ctx = f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        hctx = f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id
        out = f.ioctl(Request.GEM_CREATE, uapi.GemCreateArgs(IB_SIZE, 0, Domain.GTT, 0))
        f.ioctl(Request.GEM_VA, uapi.GemVaArgs(out.handle, VaOp.MAP, IB_VA, 0, IB_SIZE, RWX))
        view = f.ioctl(Request.GEM_MMAP, uapi.GemMmapArgs(out.handle)).view.view("<u4")
        rf = RFile(f, ctx, hctx, view, out.handle, f.handles[out.handle])
        rf.regions.add(IB_VA // SPAN)
        self.files.append(rf)
        return rf

    @initialize(n=st.integers(2, 3), seed=st.integers(0, 1 << 16))
    def open_files(self, n, seed):
        for i in range(n):
            self._open()
            for j in range(2):  # a state worth attacking from the first step: BOs, mapped
                self.gem_create(i, 1 + (seed >> j) % 4, Domain.GTT if (seed >> i + j) & 1 else Domain.VRAM, 0, 0, 0)
                self.map_good(i, seed + j, (seed * 7 + 13 * j) % WINDOW, seed >> 3, RWX)

    @precondition(lambda self: len(self.files) > 1)
    @rule(i=st.integers(0, 2))
    def close_file(self, i):
        rf = self.files.pop(i % len(self.files))
        rf.f.close()
        for bo in rf.bos.values():
            bo.closed = True
        for view, bo in rf.views:
            with pytest.raises(MappingRevoked):
                view[0]
        for bo in rf.bos.values():
            self._alias_revoked(bo)
        rf.maps.clear()

    @precondition(lambda self: len(self.files) < 3)
    @rule()
    def open_file(self):
        if self._vram_free_pages() < 2:  # its page directory and the IB's page table
            if self._vram_free_pages() == 0:
                e, _ = _err(kmd_model.open_render_node)
                assert e == errno.ENOMEM, e
                event("open ENOMEM")
            return
        self._open()

    def _file(self, i) -> RFile:
        return self.files[i % len(self.files)]

    # ------------------------------------------------------------------ GEM

    @rule(i=st.integers(0, 2), pages=st.integers(1, 4), domain=st.sampled_from([Domain.GTT, Domain.VRAM]),
          flags=st.sampled_from([0, 0, GemFlags.NO_CPU_ACCESS, GemFlags.CPU_ACCESS_REQUIRED | GemFlags.VRAM_CLEARED]),
          align=st.sampled_from([0, 0, PAGE, 0x10000]), tail=st.sampled_from([0, 0, 1, PAGE - 1]))
    def gem_create(self, i, pages, domain, flags, align, tail, big=False):
        rf = self._file(i)
        size = pages * PAGE - (PAGE - tail if tail else 0)
        fits = self._fits(domain, -(-size // PAGE) * PAGE, max(align, PAGE))
        e, out = _err(rf.f.ioctl, Request.GEM_CREATE, uapi.GemCreateArgs(size, align, domain, flags))
        if not fits:
            assert e == errno.ENOMEM, e
            event("GEM_CREATE ENOMEM")
            return
        assert e == 0, e
        assert out.size == -(-size // PAGE) * PAGE and out.handle not in rf.bos
        kbo = rf.f.handles[out.handle]
        assert kbo.gpu_addr % max(align, PAGE) == 0
        rf.bos[out.handle] = RBo(rf, out.handle, out.size, domain, flags, kbo, np.zeros(out.size, np.uint8), big=big)

    def _fits(self, domain, size: int, align: int) -> bool:
        """Is there a hole for it (first fit, aligned)? The heap's holes, as INFO MEMORY's largest
        free hole says for an unaligned BO."""
        return any(((s0 + align - 1) & -align) + size <= e0 for s0, e0 in self.kmd.bo.heaps[domain].holes)

    def _vram_free_pages(self) -> int:
        m = self.files[0].f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY)) if self.files else None
        h = self.kmd.bo.heaps[Domain.VRAM]
        if m is not None:
            assert (m.vram.total, m.vram.used, m.vram.largest_free) == (h.size, h.used, h.largest_free)
        return (h.size - h.used) // PAGE

    @rule(i=st.integers(0, 2), leave=st.integers(0, 3))
    def fill_vram(self, i, leave):
        """Take all of VRAM's largest hole but `leave` pages: GEM_CREATE in VRAM and GEM_VA's
        page tables run out next."""
        largest = self.kmd.bo.heaps[Domain.VRAM].largest_free
        if largest > (leave + 1) * PAGE:
            self.gem_create(i, largest // PAGE - leave, Domain.VRAM, GemFlags.NO_CPU_ACCESS, 0, 0, big=True)
            event("VRAM filled")

    def _pick(self, rf: RFile, k: int) -> int:
        """A handle: mostly a live one of the file, else a closed one, another file's or junk."""
        live = sorted(rf.bos)
        if k % 8 < 6 and live:
            return live[k % len(live)]
        if k % 8 == 6 and rf.stale:
            return rf.stale[k % len(rf.stale)]
        others = [h for o in self.files if o is not rf for h in o.bos if h not in rf.bos and h != rf.ib_handle]
        if others:
            return others[k % len(others)]
        return 1000 + k

    def _on_picked(self, i, k, request, args):
        """(file, handle, errno, result, its RBo or None): `request` with `args(handle)` on a
        handle picked for file i (its own, another file's or none)."""
        rf = self._file(i)
        h = self._pick(rf, k)
        e, out = _err(rf.f.ioctl, request, args(h))
        return rf, h, e, out, rf.bos.get(h)

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16))
    def gem_close(self, i, k):
        rf, h, e, _, bo = self._on_picked(i, k, Request.GEM_CLOSE, uapi.GemCloseArgs)
        if bo is None:
            assert e == errno.EINVAL
            return
        assert e == 0
        del rf.bos[h]
        rf.stale.append(h)
        bo.closed = True
        if not bo.held:  # its mappings go now; else they stay for the held job (zombies)
            if any(m.bo is bo for m in rf.maps):
                self._unmapped_under_hold(rf, [bo])
            rf.maps = [m for m in rf.maps if m.bo is not bo]
        for view, b in rf.views:
            if b is bo:
                with pytest.raises(MappingRevoked):
                    view[0] = 1
        self._alias_revoked(bo)
        rf.views = [(v, b) for v, b in rf.views if b is not bo]

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16))
    def gem_mmap(self, i, k):
        rf, _, e, out, bo = self._on_picked(i, k, Request.GEM_MMAP, uapi.GemMmapArgs)
        if bo is None:
            assert e == errno.ENOENT
        elif bo.flags & GemFlags.NO_CPU_ACCESS:
            assert e == errno.EPERM
        else:
            assert e == 0 and out.size == bo.size
            assert (out.view == bo.data).all(), "a fresh CPU mapping shows what the BO holds"
            rf.views.append((out.view, bo))
            if bo.alias is None:  # past every Python-level check: what a C pointer would keep
                bo.alias = np.frombuffer(memoryview(out.view), dtype=np.uint8)

    def _alias_revoked(self, bo: RBo) -> None:
        """After the BO's close, an alias of its CPU mapping reaches none of its memory (which
        may go to someone else, or still be a job's): its pages were replaced."""
        if bo.alias is None:
            return
        bo.alias[:] = 0xEE
        k = bo.kbo
        assert not (np.asarray(self.dev.mem[k.gpu_addr:k.end]) == 0xEE).all(), "a revoked alias wrote the BO"
        bo.alias = None

    @precondition(lambda self: any(f.views for f in self.files))
    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), off=st.integers(0, 4 * PAGE - 4), value=st.integers(1, 255))
    def cpu_write(self, i, k, off, value):
        rf = self._file(i)
        if not rf.views:
            return
        view, bo = rf.views[k % len(rf.views)]
        off %= bo.size
        view[off] = value
        bo.data[off] = value

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16))
    def gem_wait_idle(self, i, k):
        rf, _, e, out, bo = self._on_picked(i, k, Request.GEM_WAIT_IDLE, lambda h: uapi.GemWaitIdleArgs(h, 0))
        if bo is None:
            assert e == errno.ENOENT
        else:
            assert e == 0 and out.busy == bo.held, (bo.handle, out.busy, bo.held)

    # ------------------------------------------------------------------ GEM_VA

    def _ref_va_errno(self, rf: RFile, op, h, va, off, size, flags) -> int:
        """What GEM_VA must answer (amdgpu_gem_va_ioctl's order of checks; docs/architecture.md)."""
        if flags & ~int(RWX):
            return errno.EINVAL
        if va < self.info.va_start or va + size > self.info.va_end:
            return errno.EINVAL
        bo = rf.bos.get(h)
        if op != VaOp.CLEAR and bo is None:
            return errno.ENOENT
        if op == VaOp.UNMAP:
            ok = any(m.va == va and m.bo is bo for m in rf.maps)
            return 0 if ok else errno.ENOENT
        if op == VaOp.CLEAR:
            off = 0  # (not read)
        if size <= 0 or (va | size | off) & (PAGE - 1):
            return errno.EINVAL
        if op != VaOp.CLEAR and off + size > bo.size:
            return errno.EINVAL
        return 0

    def _overlaps_live(self, rf: RFile, va: int, size: int) -> bool:
        return any(m.va < va + size and va < m.end for m in rf.maps if not m.bo.closed)

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), page=st.integers(0, WINDOW - 1), k2=st.integers(0, 1 << 16),
          flags=st.sampled_from([RWX, RWX, RWX, R | W, R, W]))
    def map_good(self, i, k, page, k2, flags):
        """A MAP that the reference says must succeed: a live BO, a free range in the window."""
        rf = self._file(i)
        if not rf.bos:
            return
        bo = rf.bos[sorted(rf.bos)[k % len(rf.bos)]]
        npages = bo.size // PAGE
        off = (k2 % npages) if k2 % 3 == 0 else 0
        n = 1 + (k2 >> 2) % (npages - off)
        for p in list(range(page, WINDOW - n + 1)) + list(range(0, page)):
            va = WIN0 + p * PAGE
            if p + n <= WINDOW and not any(m.va < va + n * PAGE and va < m.end for m in rf.maps):
                self.gem_va(i, VaOp.MAP, bo.handle, p, off, n, flags, 0, handle=bo.handle)
                return

    def _clear(self, rf: RFile, va: int, size: int) -> None:
        out = []
        for m in rf.maps:
            if m.end <= va or m.va >= va + size:
                out.append(m)
                continue
            lo, hi = max(m.va, va), min(m.end, va + size)
            if m.va < lo:
                out.append(RMap(m.va, lo - m.va, m.bo, m.offset, m.flags))
            if hi < m.end:
                out.append(RMap(hi, m.end - hi, m.bo, m.offset + hi - m.va, m.flags))
        rf.maps = sorted(out, key=lambda m: m.va)

    @rule(i=st.integers(0, 2), op=st.sampled_from([VaOp.MAP, VaOp.MAP, VaOp.MAP, VaOp.UNMAP, VaOp.UNMAP,
                                                  VaOp.REPLACE, VaOp.CLEAR]),
          k=st.integers(0, 1 << 16), page=st.integers(-2, WINDOW), off=st.integers(0, 4), pages=st.integers(0, 5),
          flags=st.sampled_from([RWX, RWX, R | W, R, W, X, 0, 1 << 4]),
          skew=st.sampled_from([0] * 12 + [4, -WIN0, 1 << 30]))
    def gem_va(self, i, op, k, page, off, pages, flags, skew, handle=None):
        rf = self._file(i)
        h = self._pick(rf, k) if handle is None else handle
        if op == VaOp.UNMAP and rf.maps and k % 3 and handle is None:  # mostly at a mapping's start
            m = rf.maps[k % len(rf.maps)]
            page, h = (m.va - WIN0) // PAGE, (m.bo.handle if not m.bo.closed and k % 5 else h)
        va = WIN0 + page * PAGE + skew
        if page < 0 and skew == 0:  # the VM's top page, or the page below its bottom
            va = self.info.va_end - PAGE if page == -1 else self.info.va_start - PAGE
        size, offset = pages * PAGE, off * PAGE
        zombie = op in (VaOp.MAP, VaOp.REPLACE) and any(m.bo.closed and m.va < va + size and va < m.end
                                                        for m in rf.maps)
        expect = self._ref_va_errno(rf, op, h, va, offset, size, flags)
        if zombie and expect == 0:
            # a MAP or REPLACE over a closed BO the held job keeps waits for that BO: the held job
            # is reset by the job timer meanwhile (it never moves), its context guilty
            self._hold_cancelled()
        if op == VaOp.MAP and expect == 0 and self._overlaps_live(rf, va, size):
            expect = errno.EINVAL
        new_tables = []
        if op in (VaOp.MAP, VaOp.REPLACE) and expect == 0:
            new_tables = [r for r in range(va // SPAN, (va + size - 1) // SPAN + 1) if r not in rf.regions]
            free = self._vram_free_pages()
            if free < len(new_tables):  # the tables that fit are made and stay (amdgpu's too)
                rf.regions.update(new_tables[:free])
                expect = errno.ENOMEM
        e, _ = _err(rf.f.ioctl, Request.GEM_VA, uapi.GemVaArgs(h, op, va, offset, size, flags))
        event(f"GEM_VA {op.name} {errno.errorcode.get(e, 'ok')}{' over a zombie' if zombie else ''}")
        assert e == expect, (op.name, hex(va), hex(offset), hex(size), flags, h, e, expect)
        if e:
            return
        bo = rf.bos.get(h)
        if op == VaOp.UNMAP:
            self._unmapped_under_hold(rf, [bo])
            rf.maps = [m for m in rf.maps if not (m.va == va and m.bo is bo)]
        if op in (VaOp.CLEAR, VaOp.REPLACE):
            self._unmapped_under_hold(rf, [m.bo for m in rf.maps if m.va < va + size and va < m.end])
            self._clear(rf, va, size)
        if op in (VaOp.MAP, VaOp.REPLACE):
            rf.maps = sorted(rf.maps + [RMap(va, size, bo, offset, flags)], key=lambda m: m.va)
            rf.regions.update(range(va // SPAN, (va + size - 1) // SPAN + 1))

    def _unmapped_under_hold(self, rf: RFile, bos: list) -> None:
        """Mappings of `bos` went from `rf`'s VM while its held job is in a ring: the job holds
        them until it ends (a write it translated before the TLB flush may still land:
        Kmd.hold_for_jobs_in_rings), GEM_WAIT_IDLE says busy."""
        if self.hold is None or self.hold[0] is not rf:
            return
        for b in bos:
            if not b.held:
                b.held = True
                self.hold[4].append(b)
