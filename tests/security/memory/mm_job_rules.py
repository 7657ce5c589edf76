"""The state machine's rules for GPU jobs (tests/security/memory/test_security_mm_state.py puts
them together with the files' and mappings' rules of mm_memory_rules.py): WRITE_DATA, SDMA
writes, IBs by handle, DMA_DATA copies into mapped VAs and into VAs only another file has
mapped, the job held in a WAIT_REG_MEM and its release, and other files taking every VMID
in turn; each job's outcome (its writes, or its file's VM fault) checked against the
reference (mm_reference.py).
"""

from __future__ import annotations

import errno

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import (CsChunkFence, CsChunkIb, CtxArgs, CtxOp, CtxPriority, Domain, GemFlags, InfoQuery, Request,
                            VaOp)
from spec import pm4

from tests.security.memory.mm_reference import (FLAG_OFF, HOLD_IB_OFF, IB_VA, JOB_TIMEOUT, PAGE, R, RWX, W, WIN0,
                                                WINDOW, X, RFile, _err, event)


class MmJobRules:
    """GPU jobs: a mixin of MmMachine (its state: files, kmd, dev, hold)."""

    def _resolve(self, rf: RFile, va: int, n: int, need: int):
        """(RBo, offset) where [va, va + n) lies in one live mapping permitting `need`, else None."""
        for m in rf.maps:
            if m.va <= va and va + n <= m.end and not m.bo.closed and m.flags & need == need:
                return m.bo, m.offset + va - m.va
        return None

    def _target(self, rf: RFile, k: int, word: int) -> int:
        """A VA to aim at: in a mapping of this file, of another file, or nowhere."""
        pool = [m for m in rf.maps] if k % 5 else [m for o in self.files for m in o.maps]
        if pool:
            m = pool[k % len(pool)]
            return m.va + (word * 4) % m.size
        return WIN0 + (word * 4) % (WINDOW * PAGE)

    def _run(self, rf: RFile, dwords, fence=None) -> int:
        dw = list(dwords) + pm4.pad(-len(dwords) % 8)
        rf.ib[:len(dw)] = dw
        chunks = [CsChunkIb(len(dw), handle=rf.ib_handle)] + ([fence] if fence else [])
        return _err(rf.f.ioctl, Request.CS, uapi.CsArgs(rf.hctx, chunks))

    def _wait(self, rf: RFile, ctx: int, seq: int) -> None:
        out = rf.f.ioctl(Request.WAIT_CS, uapi.WaitCsArgs(ctx, seq, 1_000_000))
        assert not out.busy

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), word=st.integers(0, 1 << 12),
          value=st.integers(1, 0xFFFF_FFFF), k2=st.integers(0, 1 << 16))
    def write_data(self, i, k, word, value, k2):
        rf = self._file(i)
        va = self._target(rf, k, word)
        fence = None
        fbo = None
        at = self._resolve(rf, va, 4, W)
        if k2 % 3 == 0 and (at is not None or self.CS_CHECK):  # (a faulting job's fence: not promised)
            h = self._pick(rf, k2)
            fbo = rf.bos.get(h)
            fence = CsChunkFence(h, (k2 * 4) % PAGE)
        e, out = self._run(rf, pm4.write_data(va, [value]), fence)
        if fence is not None and fbo is None:
            assert e == errno.EINVAL  # an unknown fence handle
            return
        if at is None:
            if self.CS_CHECK:
                assert e == errno.EINVAL, (hex(va), e)
            else:
                self._faults(rf, e, out, va)
            return
        assert e == 0, e
        self._wait(rf, rf.hctx, out.seq)
        event("write_data ran" + (" with a fence" if fbo else ""))
        bo, off = at
        bo.data[off:off + 4] = np.frombuffer(int(value).to_bytes(4, "little"), np.uint8)
        if fbo is not None:
            fbo.data[fence.offset:fence.offset + 4] = np.frombuffer((out.seq & 0xFFFF_FFFF).to_bytes(4, "little"),
                                                                   np.uint8)

    def _faults(self, rf: RFile, e: int, out, va: int) -> None:
        """A job the MMU alone must stop: accepted, then a VM fault (its WAIT_CS ECANCELED), its
        context guilty (a new one for the next jobs)."""
        assert e == 0, e
        if any(m.bo.closed and m.va <= va < m.end and m.flags & W for m in rf.maps):
            # a closed BO the held job keeps is still mapped for it: this job's write lands
            # there too (memory no one else has, freed once the held job ends), no fault
            self._wait(rf, rf.hctx, out.seq)
            event("a write into a closed BO still held")
            return
        before = {id(o): o.f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)) for o in self.files if o is not rf}
        e, _ = _err(rf.f.ioctl, Request.WAIT_CS, uapi.WaitCsArgs(rf.hctx, out.seq, 1_000_000))
        assert e == errno.ECANCELED, e
        event("a job stopped by the MMU")
        # INFO VM_FAULT: the file's own fault, at the address it wrote; no other file's changes
        fault = rf.f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT))
        assert fault.addr & ~(PAGE - 1) == va & ~(PAGE - 1) and fault.access in ("WRITE", ""), (fault, hex(va))
        for o in self.files:
            if o is not rf:
                assert o.f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)) == before[id(o)]
        rf.hctx = rf.f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), word=st.integers(0, 1 << 12),
          value=st.integers(1, 0xFFFF_FFFF))
    def sdma_write(self, i, k, word, value):
        """WRITE_LINEAR on the SDMA ring, which no checker reads: the MMU alone decides."""
        from spec import sdma
        rf = self._file(i)
        va = self._target(rf, k, word)
        at = self._resolve(rf, va, 4, W)
        w = list(sdma.write_linear(va, [value]))
        w += sdma.pad(-len(w) % 8)
        rf.ib[0x1000 // 4:0x1000 // 4 + len(w)] = w
        e, out = _err(rf.f.ioctl, Request.CS, uapi.CsArgs(rf.hctx, [CsChunkIb(
            len(w), handle=rf.ib_handle, offset=0x1000, ip_type=uapi.HwIp.DMA)]))
        if at is None:
            self._faults(rf, e, out, va)
            return
        assert e == 0, e
        self._wait(rf, rf.hctx, out.seq)
        event("sdma_write ran")
        bo, off = at
        bo.data[off:off + 4] = np.frombuffer(int(value).to_bytes(4, "little"), np.uint8)

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), k2=st.integers(0, 1 << 16), word=st.integers(0, 1 << 12),
          value=st.integers(1, 0xFFFF_FFFF))
    def ib_by_handle(self, i, k, k2, word, value):
        """An IB in one of the file's BOs, named by handle and offset: it runs from a mapping of
        the BO it lies inside whole with EXECUTABLE (uapi.CsChunkIb), whichever VA that is."""
        rf = self._file(i)
        bos = [b for b in rf.bos.values() if not b.flags & GemFlags.NO_CPU_ACCESS and not b.big]
        if not bos:
            return
        bo = bos[k % len(bos)]
        off = (k2 % (bo.size // 16)) * 16  # (16-byte steps: some IBs cross a page's end)
        if off + 32 > bo.size:
            return
        va = self._target(rf, k2 >> 3, word)
        at = self._resolve(rf, va, 4, W)
        dw = pm4.write_data(va, [value])
        dw += pm4.pad(-len(dw) % 8)
        view = rf.f.ioctl(Request.GEM_MMAP, uapi.GemMmapArgs(bo.handle)).view
        ib = np.array(dw, dtype="<u4").view(np.uint8)
        view[off:off + 32] = ib
        bo.data[off:off + 32] = ib
        holds = [m for m in rf.maps if m.bo is bo and m.offset <= off < m.offset + m.size]
        whole = [m for m in holds if off + 32 <= m.offset + m.size and m.flags & X]
        if not self.CS_CHECK and holds and not whole:
            return  # (the CP fetching from a mapping without EXECUTABLE: not this rule's question)
        e, out = _err(rf.f.ioctl, Request.CS, uapi.CsArgs(rf.hctx, [CsChunkIb(8, handle=bo.handle, offset=off)]))
        if not holds or (self.CS_CHECK and (not whole or at is None)):
            assert e == errno.EINVAL, (e, off, [(hex(m.va), m.offset, m.size, m.flags) for m in holds])
            return
        if at is None:
            self._faults(rf, e, out, va)
            return
        assert e == 0, (e, off, [(hex(m.va), m.offset, m.size, m.flags) for m in holds])
        self._wait(rf, rf.hctx, out.seq)
        event("an IB by handle ran" + (" (not from its first mapping)" if whole[0] is not holds[0] else ""))
        tbo, toff = at
        tbo.data[toff:toff + 4] = np.frombuffer(int(value).to_bytes(4, "little"), np.uint8)

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), k2=st.integers(0, 1 << 16),
          w1=st.integers(0, 1 << 12), w2=st.integers(0, 1 << 12), n=st.sampled_from([4, 8, 64, PAGE]))
    def dma_copy(self, i, k, k2, w1, w2, n):
        rf = self._file(i)
        src, dst = self._target(rf, k, w1), self._target(rf, k2, w2)
        s, d = self._resolve(rf, src, n, R), self._resolve(rf, dst, n, W)
        if s is not None and d is not None and s[0] is d[0] and s[1] < d[1] + n and d[1] < s[1] + n:
            return  # (overlapping: no promise about the order)
        if (s is None or d is None) and not self.CS_CHECK:
            return  # (a copy the MMU stops halfway: which bytes moved is not promised)
        e, out = self._run(rf, pm4.dma_data(dst, src, n, cp_sync=1))
        if s is None or d is None:
            assert e == errno.EINVAL, (hex(src), hex(dst), n, e)
            return
        assert e == 0, e
        self._wait(rf, rf.hctx, out.seq)
        event("dma_copy ran")
        (sb, so), (db, do) = s, d
        db.data[do:do + n] = sb.data[so:so + n].copy()

    @precondition(lambda self: self.hold is None)
    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16), word=st.integers(0, 1 << 12),
          value=st.integers(1, 0xFFFF_FFFF))
    def hold_job(self, i, k, word, value):
        """A job on the CP's first queue that polls its flag, then writes: checked at CS,
        run after whatever the client did to its VM in between."""
        rf = self._file(i)
        if not rf.maps:
            return
        m = rf.maps[k % len(rf.maps)]
        va = m.va + (word * 4) % m.size
        at = self._resolve(rf, va, 4, W)
        rf.ib[FLAG_OFF // 4] = 0
        dw = pm4.wait_reg_mem(IB_VA + FLAG_OFF, 1, 0xFFFF_FFFF, "EQ") + pm4.write_data(va, [value])
        dw += pm4.pad(-len(dw) % 8)
        rf.ib[HOLD_IB_OFF // 4:HOLD_IB_OFF // 4 + len(dw)] = dw
        e, out = _err(rf.f.ioctl, Request.CS, uapi.CsArgs(
            rf.ctx, [CsChunkIb(len(dw), handle=rf.ib_handle, offset=HOLD_IB_OFF)]))
        if at is None and self.CS_CHECK:
            assert e == errno.EINVAL
            return
        assert e == 0, e
        held = [m.bo for m in rf.maps if not m.bo.closed]
        for bo in held:
            bo.held = True
        self.hold = (rf, out.seq, va, value, held, self.dev.now())

    def _hold_cancelled(self) -> None:
        """The held job was reset (never ran its write): its context is guilty; a new one."""
        rf, seq, va, value, held, t0 = self.hold
        self._unhold()
        self.hold = ("cancelled", rf, seq)

    def _set_flag(self, rf: RFile) -> None:
        k = rf.ib_kbo
        self.dev.mem[k.gpu_addr + FLAG_OFF:k.gpu_addr + FLAG_OFF + 4] = np.array([1, 0, 0, 0], np.uint8)

    def _unhold(self) -> None:
        rf, seq, va, value, held, t0 = self.hold
        for bo in held:
            bo.held = False
        for o in self.files:
            o.maps = [m for m in o.maps if not m.bo.closed]
        self.hold = None

    @precondition(lambda self: self.hold is not None)
    @rule()
    def release(self):
        if self.hold[0] == "cancelled":
            _, rf, seq = self.hold
            self.hold = None
            if rf in self.files:
                e, _ = _err(rf.f.ioctl, Request.WAIT_CS, uapi.WaitCsArgs(rf.ctx, seq, 1_000_000))
                assert e == errno.ECANCELED
                rf.ctx = rf.f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
            return
        rf, seq, va, value, held, t0 = self.hold
        event(f"release: file {'open' if rf in self.files else 'closed'}, target "
              f"{'mapped' if self._resolve(rf, va, 4, W) else 'gone'}")
        assert self.dev.now() - t0 < JOB_TIMEOUT, "the held job's time ran out (too many steps)"
        at = self._resolve(rf, va, 4, W) if rf in self.files else None
        # a closed BO's mapping the job keeps: its write lands there, in memory no one else has
        zombie = any(m.bo.closed and m.va <= va < m.end and m.flags & W for m in rf.maps)
        self._set_flag(rf)
        if rf in self.files:
            e, out = _err(rf.f.ioctl, Request.WAIT_CS, uapi.WaitCsArgs(rf.ctx, seq, 1_000_000))
            if zombie:
                assert e == 0 and not out.busy
            elif at is None:
                # unmapped (or made read-only) since its CS: the MMU stops it, a VM fault
                assert e == errno.ECANCELED, e
                rf.ctx = rf.f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
            else:
                assert e == 0 and not out.busy
                bo, off = at
                bo.data[off:off + 4] = np.frombuffer(int(value).to_bytes(4, "little"), np.uint8)
        else:  # its file is closed: the job still runs, into what the file held
            assert self.kmd.wait_for(lambda: all(not s.pending and not s.queue for s in self.kmd.scheds), 1_000_000)
        self._unhold()

    @rule(n=st.integers(14, 16))
    def vmid_churn(self, n):
        """n other files each run a job (and close): every VMID changes hands, so this machine's
        files' next jobs run on a VMID another VM's TLB entries were in (flushed at the grab)."""
        if self._vram_free_pages() < 3 * n:
            return
        others = [kmd_model.open_render_node() for _ in range(n)]
        for f in others:  # (HIGH: the CP's second queue, beside the held job)
            ctx = f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id
            h = f.ioctl(Request.GEM_CREATE, uapi.GemCreateArgs(PAGE, 0, Domain.GTT, 0)).handle
            # each at this machine's window, so a stale entry would be an alias of the same VA
            f.ioctl(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.MAP, WIN0, 0, PAGE, RWX))
            f.ioctl(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.MAP, IB_VA, 0, PAGE, RWX))
            v = f.ioctl(Request.GEM_MMAP, uapi.GemMmapArgs(h)).view.view("<u4")
            dw = pm4.write_data(WIN0 + 0x100, [0xC0FFEE]) + pm4.nop(2)
            dw += pm4.pad(-len(dw) % 8)
            v[0x800 // 4:0x800 // 4 + len(dw)] = dw
            seq = f.ioctl(Request.CS, uapi.CsArgs(ctx, [CsChunkIb(len(dw), handle=h, offset=0x800)])).seq
            assert not f.ioctl(Request.WAIT_CS, uapi.WaitCsArgs(ctx, seq, 1_000_000)).busy
            assert v[0x100 // 4] == 0xC0FFEE
        for f in others:
            f.close()
        event("VMIDs churned")
