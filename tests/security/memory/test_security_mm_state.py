"""A hostile client against the KMD's memory management, as a stateful property test
(hypothesis's RuleBasedStateMachine, and `random_walk`, the same rules driven by a seeded
random.Random for deep runs): two or three render nodes make GEM_CREATE, GEM_MMAP,
GEM_CLOSE, GEM_VA MAP / UNMAP / REPLACE / CLEAR (good and bad), GEM_WAIT_IDLE and INFO
MEMORY calls, write their BOs from the CPU, and run small GPU jobs (WRITE_DATA, DMA_DATA
copies, SDMA writes, a user fence) into their mapped VAs and into VAs only another file has
mapped, while one job held in a WAIT_REG_MEM (checked at CS, released later) writes to a VA
whose mapping the client changes or closes under it; other files take every VMID in turn,
and VRAM is filled. With the CS checker on, and off (the MMU alone stands).

A reference beside the driver says what each file's VM maps (which VA page holds which
page of which BO, with which permissions), which handles are live, what every BO holds and
which BOs the held job keeps alive. After every step:

- each ioctl's errno is the one docs/architecture.md and kmd_model/uapi.py give (amdgpu's
  order of checks; ENOMEM exactly when the heap has no room), nothing raises but KmdError;
- the KMD's mappings are the reference's, and so are its page tables (walked in device
  memory with spec/vm.py's walk, for every page of each file's window);
- every live BO holds exactly what the reference says (so no file read or wrote another's
  BO through any mapping, handle or job), and no two allocated BOs share memory;
- a BO the held job may still reach is still allocated (busy), and GEM_WAIT_IDLE says so
  of exactly those (the BOs mapped at its CS, and those whose mapping went while it was in
  its ring: a write it translated before the TLB flush may still land); a job the MMU stops is its own file's INFO VM_FAULT, no other's;
- the heaps' accounting (INFO MEMORY) is the live BOs plus the page tables the reference
  expects; views of closed BOs raise MappingRevoked, and an alias made through the buffer
  protocol reaches none of the BO's memory;
- at the end, once every file is closed, the driver holds what it held at bring-up.

Threads of one file racing GEM_CLOSE against a CS and a GEM_VA on the same handle:
test_security_mm_threads.py.

Its default run in make test is small and reproducible (derandomize, no database). Longer:
    GPUCOSIM_MM_EXAMPLES=2000 GPUCOSIM_MM_WALKS=50 GPUCOSIM_MM_STEPS=400 \
        .venv/bin/python -m pytest -q tests/security/memory/test_security_mm_state.py
(hypothesis's examples, the walks' count, each walk's steps; a walk's seed is its index.)
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as _event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import (CsChunkFence, CsChunkIb, CtxArgs, CtxOp, CtxPriority, Domain, GemFlags, InfoQuery,
                            KmdError, MappingRevoked, Request, VaOp, VmFlags)
from spec import pm4
from spec import vm as vm_spec
from testbench.refmodel import RefModel

from tests.security.limits.test_security_time_and_state import _start_state, assert_as_at_bring_up

PAGE = 0x1000
R, W, X = VmFlags.READABLE, VmFlags.WRITEABLE, VmFlags.EXECUTABLE
RWX = R | W | X
WINDOW = 48  # pages of VA each file's GEM_VA calls aim at
WIN0 = 0x0200_0000 - 24 * PAGE  # across a 2 MiB boundary: two page tables
IB_VA = 0x0010_0000  # each file's IB BO (va_start), out of the window
IB_SIZE = 0x4000
FLAG_OFF = 0x3000  # the held job's flag in the IB BO
HOLD_IB_OFF = 0x2000
JOB_TIMEOUT = 400_000
SPAN = 1 << vm_spec.leaf_bits(vm_spec.LEVELS - 2)  # what one page table covers


@dataclass(eq=False)
class RBo:
    file: "RFile"
    handle: int
    size: int
    domain: Domain
    flags: int
    kbo: object  # the kernel's Bo (to read its memory and check its life)
    data: np.ndarray  # what it must hold (bytes)
    closed: bool = False
    held: bool = False  # the held job may reach it
    big: bool = False  # (VRAM filler: only its ends compared)
    alias: object = None  # an alias of its CPU mapping made with the buffer protocol

    def word(self, off: int) -> int:
        return int(self.data[off:off + 4].view("<u4")[0])


@dataclass(eq=False)
class RMap:
    va: int
    size: int
    bo: RBo
    offset: int
    flags: int

    @property
    def end(self) -> int:
        return self.va + self.size


@dataclass(eq=False)
class RFile:
    f: object
    ctx: int  # NORMAL: the held job's
    hctx: int  # HIGH: every other job (the CP's second queue, which runs while the first polls)
    ib: object  # the IB BO's CPU view (dwords)
    ib_handle: int
    ib_kbo: object  # (its flag is set through device memory once the file is closed)
    bos: dict = field(default_factory=dict)  # handle -> RBo
    maps: list = field(default_factory=list)  # RMap, live BOs' and closed BOs the held job keeps (zombies)
    views: list = field(default_factory=list)  # (view, RBo)
    regions: set = field(default_factory=set)  # the page tables its GEM_VAs made (by SPAN)
    stale: list = field(default_factory=list)  # handles it closed


def event(what: str) -> None:
    """hypothesis's statistics (--hypothesis-show-statistics); nothing in the random walk."""
    try:
        _event(what)
    except Exception:  # (outside a hypothesis test)
        WALK_EVENTS[what] = WALK_EVENTS.get(what, 0) + 1


WALK_EVENTS: dict[str, int] = {}


def _err(fn, *args):
    """(errno or 0, result): only KmdError may come out, one line naming its ioctl."""
    try:
        return 0, fn(*args)
    except KmdError as e:
        assert "\n" not in e.message, e.message
        return e.errno, None


class MmMachine(RuleBasedStateMachine):
    CS_CHECK = True  # False: the MMU alone stands (a job the checker would refuse faults)

    def __init__(self):
        super().__init__()
        self.dev = RefModel()
        self.kmd = kmd_model.bind(self.dev, job_timeout=JOB_TIMEOUT, cs_check=self.CS_CHECK, cap_sys_nice=True)
        self.start = _start_state(self.kmd)
        self.files: list[RFile] = []
        self.hold = None  # the held job: (RFile, seq, target va, value, held BOs)
        self.serial = 0
        self.info = None

    # ------------------------------------------------------------------ files

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

    @rule(i=st.integers(0, 2), k=st.integers(0, 1 << 16))
    def gem_close(self, i, k):
        rf = self._file(i)
        h = self._pick(rf, k)
        e, _ = _err(rf.f.ioctl, Request.GEM_CLOSE, uapi.GemCloseArgs(h))
        bo = rf.bos.get(h)
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
        rf = self._file(i)
        h = self._pick(rf, k)
        e, out = _err(rf.f.ioctl, Request.GEM_MMAP, uapi.GemMmapArgs(h))
        bo = rf.bos.get(h)
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
        rf = self._file(i)
        h = self._pick(rf, k)
        e, out = _err(rf.f.ioctl, Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(h, 0))
        bo = rf.bos.get(h)
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

    # ------------------------------------------------------------------ jobs

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

    # ------------------------------------------------------------------ invariants

    @invariant()
    def vms_match(self):
        if not self.files:
            return
        mem = self.dev.mem
        read64 = lambda a: int(mem[a:a + 8].view("<u8")[0])  # noqa: E731
        for rf in self.files:
            vm = rf.f.vm
            got = [(m.va, m.size, m.offset, m.flags, m.bo) for m in vm.maps if m.va != IB_VA]
            want = [(m.va, m.size, m.offset, m.flags, m.bo.kbo) for m in rf.maps]
            assert got == want, (got, want)
            assert set(rf.f.handles) == set(rf.bos) | {rf.ib_handle}
            for h, bo in rf.bos.items():
                assert rf.f.handles[h] is bo.kbo
            # the page tables, walked as the MMU does
            root = vm.root.gpu_addr
            for p in range(-1, WINDOW + 1):
                va = WIN0 + p * PAGE
                w = vm_spec.walk(read64, root, va, None)
                m = next((m for m in rf.maps if m.va <= va < m.end), None)
                if m is None:
                    assert w.phys is None, (hex(va), w)
                    continue
                assert w.phys == m.bo.kbo.gpu_addr + m.offset + va - m.va, (hex(va), w)
                bits = w.flags & (vm_spec.READABLE | vm_spec.WRITEABLE | vm_spec.EXECUTABLE)
                want_bits = ((vm_spec.READABLE if m.flags & R else 0) | (vm_spec.WRITEABLE if m.flags & W else 0)
                             | (vm_spec.EXECUTABLE if m.flags & X else 0))
                assert bits == want_bits, (hex(va), hex(w.flags), m.flags)

    @invariant()
    def memory_matches(self):
        mem = self.dev.mem
        for rf in self.files:
            for bo in rf.bos.values():
                k = bo.kbo
                assert not k.freed and not k.closed
                got = np.asarray(mem[k.gpu_addr:k.end])
                want = bo.data
                if bo.big:  # (its first and last 16 KiB: what the machine's jobs reach)
                    got, want = np.concatenate([got[:0x4000], got[-0x4000:]]), np.concatenate(
                        [want[:0x4000], want[-0x4000:]])
                if not (got == want).all():
                    bad = int(np.flatnonzero(got != want)[0])
                    raise AssertionError(f"fd {rf.f.fd} BO {bo.handle} byte {bad:#x}: {got[bad]:#x}, "
                                         f"not {want[bad]:#x}")
        if self.hold is not None and self.hold[0] != "cancelled":
            for bo in self.hold[4]:
                assert not bo.kbo.freed, "a BO the held job may reach was freed"
        live = sorted((b.gpu_addr, b.end) for b in self.kmd.bo.live)
        for (a0, a1), (b0, b1) in zip(live, live[1:]):
            assert a1 <= b0, "two allocated BOs share memory"

    @invariant()
    def accounting(self):
        kmd = self.kmd
        for d, h in kmd.bo.heaps.items():
            assert h.used == sum(b.size for b in kmd.bo.live if b.domain == d)
            assert h.used + sum(e - s for s, e in h.holes) == h.size
        if not self.files or self.hold is not None:
            return
        m = self.files[0].f.ioctl(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
        user = {d: sum(bo.size for rf in self.files for bo in rf.bos.values() if bo.domain == d) for d in Domain}
        tables = sum(1 + len(rf.regions) for rf in self.files) * vm_spec.TABLE_BYTES
        ibs = len(self.files) * IB_SIZE
        assert m.vram.used == self.start[Domain.VRAM] + user[Domain.VRAM] + tables, (m.vram.used, self.start)
        assert m.gtt.used == self.start[Domain.GTT] + user[Domain.GTT] + ibs

    def teardown(self):
        try:
            if self.hold is not None and self.hold[0] != "cancelled":
                self._set_flag(self.hold[0])
            for rf in self.files:
                rf.f.close()
            assert_as_at_bring_up(self.kmd, self.start)
        finally:
            kmd_model.unbind()


EXAMPLES = int(os.environ.get("GPUCOSIM_MM_EXAMPLES", "12"))
MmMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=50, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck), print_blob=True)
test_mm_state_machine = MmMachine.TestCase


class MmMachineUnchecked(MmMachine):
    CS_CHECK = False


MmMachineUnchecked.TestCase.settings = MmMachine.TestCase.settings
test_mm_state_machine_checker_off = MmMachineUnchecked.TestCase


def random_walk(seed: int, steps: int, cls=MmMachine) -> None:
    """The same machine driven by a seeded random.Random for `steps` steps in one run (hypothesis
    keeps its runs short): deep sequences, reproducible by seed."""
    import random
    rng = random.Random(seed)
    m = cls()
    r = rng.randrange
    try:
        m.open_files(2 + r(2), r(1 << 16))
        rules = [
            (6, lambda: m.gem_create(r(3), 1 + r(4), rng.choice([Domain.GTT, Domain.VRAM]),
                                     rng.choice([0, 0, GemFlags.NO_CPU_ACCESS]), rng.choice([0, 0x10000]), r(2) * r(PAGE))),
            (4, lambda: m.gem_close(r(3), r(1 << 16))),
            (3, lambda: m.gem_mmap(r(3), r(1 << 16))),
            (3, lambda: m.cpu_write(r(3), r(1 << 16), r(4 * PAGE), 1 + r(255))),
            (2, lambda: m.gem_wait_idle(r(3), r(1 << 16))),
            (8, lambda: m.map_good(r(3), r(1 << 16), r(WINDOW), r(1 << 16), rng.choice([RWX, RWX, R | W, R, W]))),
            (8, lambda: m.gem_va(r(3), rng.choice(list(VaOp)), r(1 << 16), r(WINDOW + 2) - 2, r(5), r(6),
                                 rng.choice([RWX, R | W, R, W, X, 0, 1 << 4]),
                                 rng.choice([0] * 12 + [4, -WIN0, 1 << 30]))),
            (8, lambda: m.write_data(r(3), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF), r(1 << 16))),
            (4, lambda: m.ib_by_handle(r(3), r(1 << 16), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF))),
            (4, lambda: m.sdma_write(r(3), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF))),
            (4, lambda: m.dma_copy(r(3), r(1 << 16), r(1 << 16), r(1 << 12), r(1 << 12), rng.choice([4, 8, 64, PAGE]))),
            (3, lambda: m.hold_job(r(3), r(1 << 16), r(1 << 12), 1 + r(0xFFFF_FFFF)) if m.hold is None else None),
            (2, lambda: m.release() if m.hold is not None else None),
            (1, lambda: m.close_file(r(3)) if len(m.files) > 1 else None),
            (1, lambda: m.vmid_churn(14 + r(3))),
            (1, lambda: m.fill_vram(r(3), r(4))),
            (1, lambda: m.open_file() if len(m.files) < 3 else None),
        ]
        weights = [w for w, _ in rules]
        held_for = 0
        for _ in range(steps):
            rng.choices(rules, weights)[0][1]()
            held_for = held_for + 1 if m.hold is not None else 0
            if held_for > 25:
                m.release()
            m.vms_match()
            m.memory_matches()
            m.accounting()
    finally:
        m.teardown()


@pytest.mark.parametrize("checker", ["on", "off"])
@pytest.mark.parametrize("seed", range(int(os.environ.get("GPUCOSIM_MM_WALKS", "1"))))
def test_mm_random_walk(seed, checker):
    random_walk(seed, int(os.environ.get("GPUCOSIM_MM_STEPS", "300")),
                MmMachine if checker == "on" else MmMachineUnchecked)
