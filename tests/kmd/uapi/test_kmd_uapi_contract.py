"""The KMD's uAPI as an outside UMD writer reads it: kmd_model/uapi.py (our amdgpu_drm.h),
open_render_node() and docs/architecture.md, nothing of umd/ or of the KMD's insides.

Each check opens render nodes and drives them the way Mesa's amdgpu winsys does (INFO,
GEM_CREATE in each domain, GEM_MMAP, GEM_VA, CTX, CS with IB / fence / dependency chunks,
WAIT_CS, GEM_WAIT_IDLE, close) and asserts a number or an errno the docs state; where the
docs give the whole message, the message. Every refusal is one line that names its ioctl
(docs/architecture.md, "Every ioctl argument is attacked input"). The errnos are amdgpu's
for the same mistake unless the docs say otherwise.

This file: the helpers, open, INFO, GEM_CREATE / GEM_CLOSE, GEM_MMAP, GEM_VA, close;
test_kmd_uapi_contract_cs.py: CTX, CS, the waits, resets, the DMA ring.

The bodies are `check_*(dev)` on a fresh device, so tests/cosim/driver_checks.py runs them
on the RTL too; pytest runs them on the reference model.
"""

from __future__ import annotations

import errno
import re

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import (CsChunkFence, CsChunkIb, CtxOp, CtxPriority, Domain, GemFlags, InfoQuery, KmdError,
                            MappingRevoked, Request, VaOp, VmFlags)
from spec import pm4
from testbench.refmodel import RefModel

GTT, VRAM = Domain.GTT, Domain.VRAM
RW = VmFlags.READABLE | VmFlags.WRITEABLE
RWX = RW | VmFlags.EXECUTABLE
PAGE = 0x1000
LATEST = 0xFFFF_FFFF  # a dependency's "the context's latest job on that ring"


def refused(err: int, ioctl: str, fn, *args) -> KmdError:
    """fn(*args) raises KmdError `err`, whose message is one line naming `ioctl` first."""
    with pytest.raises(KmdError) as ei:
        fn(*args)
    e = ei.value
    assert e.name == uapi.errno_name(err), f"{ioctl}: {e} (wanted {uapi.errno_name(err)})"
    assert e.message.startswith(ioctl) and "\n" not in e.message, e.message
    assert str(e) == f"{e.name}: {e.message}"
    return e


class Umd:
    """A render node seen through its ioctls alone."""

    def __init__(self, **kw):
        self.f = kmd_model.open_render_node(**kw)
        self.info = self.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
        # each Umd maps from its own 64 MiB of the range, so tests may name addresses freely
        self.va = self.info.va_start + 0x40_0000

    def io(self, req, args):
        return self.f.ioctl(req, args)

    def create(self, size=PAGE, domain=GTT, flags=0, alignment=0) -> int:
        return self.io(Request.GEM_CREATE, uapi.GemCreateArgs(size, alignment, domain, flags)).handle

    def mmap(self, handle):
        return self.io(Request.GEM_MMAP, uapi.GemMmapArgs(handle)).view

    def map(self, handle, va, size, offset=0, flags=RWX, op=VaOp.MAP):
        return self.io(Request.GEM_VA, uapi.GemVaArgs(handle, op, va, offset, size, flags))

    def close_bo(self, handle):
        return self.io(Request.GEM_CLOSE, uapi.GemCloseArgs(handle))

    def bo(self, size=0x4000, domain=GTT, vm_flags=RWX):
        """A BO, its CPU view as dwords and its VA (a page of VA left free after it)."""
        h = self.create(size, domain)
        va, self.va = self.va, self.va + size + PAGE
        self.map(h, va, size, flags=vm_flags)
        return h, self.mmap(h).view("<u4"), va

    def ctx(self, priority=CtxPriority.NORMAL) -> int:
        return self.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=priority)).ctx_id

    def query(self, ctx):
        return self.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, ctx))

    def cs(self, ctx, *chunks) -> int:
        return self.io(Request.CS, uapi.CsArgs(ctx, list(chunks))).seq

    def wait(self, ctx, seq, timeout=200_000) -> bool:
        """WAIT_CS: True once signalled."""
        return not self.io(Request.WAIT_CS, uapi.WaitCsArgs(ctx, seq, timeout)).busy

    def heaps(self):
        m = self.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
        return m.vram.used, m.gtt.used


def ib(u32, dwords, offset=0, handle=0, va=None) -> CsChunkIb:
    """Write `dwords`, padded to DEV_INFO.ib_align_dw (8 here), at byte `offset` of a BO; the
    chunk naming them by handle, or by VA when `va` (the BO's) is given."""
    dw = list(dwords) + pm4.pad(-len(dwords) % 8)
    u32[offset // 4: offset // 4 + len(dw)] = dw
    if va is not None:
        return CsChunkIb(len(dw), gpu_addr=va + offset)
    return CsChunkIb(len(dw), handle=handle, offset=offset)


# ------------------------------------------------------------------------------ open, INFO, dispatch

def check_open_and_info(dev):
    kmd_model.bind(dev)
    u = Umd()
    fw = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.FW_VERSION))
    assert (fw.kmd_name, fw.kmd_version) == (uapi.KMD_NAME, uapi.KMD_VERSION)
    i = u.info
    assert i.hw_version == fw.hw_version
    # docs/architecture.md: 4 KiB pages; the default 2-level VM: va_start 1 MiB, va_end 1 GiB
    # less the kernel's range (tests/kmd/memory/test_high_memory.py runs this on a 3-level VM above 4 GiB)
    assert i.va_alignment == PAGE and i.va_end % (2 << 20) == 0  # the shadow pool is 2 MiB-aligned above it
    assert i.va_start < i.va_end <= 1 << (12 + 9 * i.vm_levels)  # 512 entries a level, 4 KiB pages
    if i.vm_levels == 2:
        assert i.va_start == 1 << 20 and i.va_end < 1 << 30
    # the CS limits the docs name: IB_SIZE's field, max_job_dw 2^21, 4 IB chunks, 1,024 dependencies
    assert (i.max_ib_dw, i.max_job_dw, i.max_ib_chunks, i.max_dep_chunks) == ((1 << 20) - 1, 1 << 21, 4, 1024)
    assert i.sdma_rings in (0, 1) and (i.dma_max_bytes > 0) == i.has_dma
    mem = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
    for h in (mem.vram, mem.gtt):
        assert 0 <= h.largest_free <= h.total - h.used and h.used <= h.total
    assert u.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)) == uapi.VmFaultInfo()  # all 0: none yet
    # COUNTERS: a file opened by default has no CAP_PERFMON: the clock and its own counts
    # (docs/architecture.md, "Side channels"); one opened with it, the device's counters
    cnt = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.COUNTERS))
    assert set(cnt.hw) == {"timestamp"} and cnt.packets == {} and cnt.kmd["ioctls"] >= 1
    cnt = Umd(cap_perfmon=True).io(Request.INFO, uapi.InfoArgs(InfoQuery.COUNTERS))
    assert set(cnt.packets) >= set(i.packets[:3]) and cnt.kmd["ioctls"] >= 1 and "cs" in cnt.kmd
    for q in (7, -1, 1 << 32, "DEV_INFO", None, 22.0):  # 0x16 as a float is no query
        refused(errno.EINVAL, "INFO", u.io, Request.INFO, uapi.InfoArgs(q))
    # the request number and its argument class (DRM: an unknown driver ioctl is EINVAL)
    refused(errno.EINVAL, "unknown ioctl request", u.io, 0x99, uapi.InfoArgs(InfoQuery.DEV_INFO))
    # amdgpu's requests this uAPI leaves out (uapi.py): BO_LIST, GEM_METADATA, GEM_OP, GEM_USERPTR,
    # WAIT_FENCES, FENCE_TO_HANDLE, SCHED
    for nr in (0x03, 0x06, 0x10, 0x11, 0x12, 0x14, 0x15):
        refused(errno.EINVAL, "unknown ioctl request", u.io, uapi.DRM_COMMAND_BASE + nr, None)
    refused(errno.EINVAL, "unknown ioctl request", u.io, float(Request.INFO), uapi.InfoArgs(InfoQuery.DEV_INFO))
    refused(errno.EINVAL, "GEM_CREATE", u.io, Request.GEM_CREATE, uapi.InfoArgs(InfoQuery.DEV_INFO))
    u.f.close()
    u.f.close()  # closing twice is no error (the kernel's release runs once)
    refused(errno.EBADF, "INFO", u.io, Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    refused(errno.EBADF, "GEM_CREATE", u.io, Request.GEM_CREATE, uapi.GemCreateArgs(PAGE))


# ------------------------------------------------------------------------------ GEM_CREATE / GEM_CLOSE

def check_gem_create(dev):
    kmd_model.bind(dev)
    u, other = Umd(), Umd()
    vram0, gtt0 = u.heaps()
    for domain, flags in ((GTT, 0), (VRAM, 0), (VRAM, GemFlags.VRAM_CLEARED), (GTT, GemFlags.CPU_ACCESS_REQUIRED)):
        for size, rounded in ((1, PAGE), (PAGE, PAGE), (PAGE + 1, 2 * PAGE)):
            out = u.io(Request.GEM_CREATE, uapi.GemCreateArgs(size, 0, domain, flags))
            assert out.size == rounded  # whole pages
            view = u.mmap(out.handle)
            assert view.size == rounded and not view.any()  # every new BO is zero-filled, whatever its flags
            view[:] = 0xA5  # (the next BO in this memory must come back zeroed too)
            vram, gtt = u.heaps()
            assert (vram - vram0, gtt - gtt0) == ((rounded, 0) if domain == VRAM else (0, rounded))
            u.close_bo(out.handle)
            assert u.heaps() == (vram0, gtt0)
    h = u.create(PAGE, VRAM, alignment=0x10000)  # a power of two above the page is fine
    u.close_bo(h)
    G = Request.GEM_CREATE
    bad = [  # (size, alignment, domain, flags): each EINVAL
        (0, 0, GTT, 0), (-PAGE, 0, GTT, 0), (1 << 64, 0, GTT, 0), (1.5, 0, GTT, 0), ("4096", 0, GTT, 0),
        (None, 0, GTT, 0), (True, 0, GTT, 0),
        (PAGE, 3, GTT, 0), (PAGE, 0x3000, GTT, 0), (PAGE, -PAGE, GTT, 0), (PAGE, 1.0, GTT, 0),
        (PAGE, 0, 0, 0), (PAGE, 0, 1, 0), (PAGE, 0, VRAM | GTT, 0), (PAGE, 0, 0x8, 0), (PAGE, 0, "VRAM", 0),
        (PAGE, 0, None, 0), (PAGE, 0, True, 0),
        (PAGE, 0, GTT, 1 << 8), (PAGE, 0, GTT, 1 << 2), (PAGE, 0, GTT, -1), (PAGE, 0, GTT, 1 << 64),
        (PAGE, 0, GTT, None),
    ]
    for args in bad:
        refused(errno.EINVAL, "GEM_CREATE", u.io, G, uapi.GemCreateArgs(*args))
    m = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
    for domain, heap in ((VRAM, m.vram), (GTT, m.gtt)):  # more than the heap: ENOMEM, nothing taken
        refused(errno.ENOMEM, "GEM_CREATE", u.io, G, uapi.GemCreateArgs(heap.total + PAGE, 0, domain))
        refused(errno.ENOMEM, "GEM_CREATE", u.io, G, uapi.GemCreateArgs(1 << 62, 0, domain))
    assert u.heaps() == (vram0, gtt0)
    # GEM_CLOSE: an unknown handle is EINVAL (drm_gem_handle_delete), another file's too
    h = u.create()
    theirs = other.create()
    for handle in (0, 99, -1, 1 << 32, "1", None, 1.0):
        refused(errno.EINVAL, "GEM_CLOSE", u.close_bo, handle)
    refused(errno.EINVAL, "GEM_CLOSE", other.close_bo, 99)
    u.close_bo(h)
    refused(errno.EINVAL, "GEM_CLOSE", u.close_bo, h)  # twice
    other.mmap(theirs)[:4] = 7  # the other file's BO is untouched by all of it
    other.close_bo(theirs)


def check_gem_handles_are_per_file(dev):
    kmd_model.bind(dev)
    a, b = Umd(), Umd()
    ha = a.create()
    a.mmap(ha)[:] = 0x5A
    # b names a's handle: for b it is no BO (ENOENT where drm_gem_object_lookup fails, EINVAL for
    # GEM_CLOSE and a CS fence chunk, as amdgpu)
    hb = b.create()
    if hb == ha:  # handles may coincide across files: close b's so the number is a's alone
        b.close_bo(hb)
    refused(errno.ENOENT, "GEM_MMAP", b.mmap, ha)
    refused(errno.ENOENT, "GEM_VA", b.map, ha, b.va, PAGE)
    refused(errno.ENOENT, "GEM_WAIT_IDLE", b.io, Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(ha, 0))
    refused(errno.EINVAL, "GEM_CLOSE", b.close_bo, ha)
    bctx = b.ctx()
    bh, bu32, _ = b.bo()
    bnop = ib(bu32, pm4.nop(6), handle=bh)
    if ha != bh:
        refused(errno.ENOENT, "CS", b.cs, bctx, CsChunkIb(8, handle=ha))
        refused(errno.EINVAL, "CS", b.cs, bctx, bnop, CsChunkFence(ha, 0))
    assert a.mmap(ha).tolist() == [0x5A] * PAGE  # a's BO is as a left it


# ------------------------------------------------------------------------------ GEM_MMAP

def check_gem_mmap(dev):
    kmd_model.bind(dev)
    u = Umd()
    h = u.create(0x3000, VRAM)
    m = u.io(Request.GEM_MMAP, uapi.GemMmapArgs(h))
    assert (m.size, m.view.size) == (0x3000, 0x3000)
    m.view[:8] = range(8)
    again = u.mmap(h)  # a second mapping is the same memory
    assert again[:8].tolist() == list(range(8))
    nocpu = u.create(PAGE, VRAM, GemFlags.NO_CPU_ACCESS)
    refused(errno.EPERM, "GEM_MMAP", u.mmap, nocpu)  # amdgpu_mode_dumb_mmap: EPERM
    for handle in (0, 77, -1, "1", None, 1 << 64):
        refused(errno.ENOENT, "GEM_MMAP", u.mmap, handle)
    u.close_bo(h)
    # GEM_CLOSE revokes the mapping: every access raises MappingRevoked, naming the BO by its
    # file and handle (never by where the kernel put it: GEM_CREATE tells no address)
    gone = f"BO fd{u.f.fd}:{h} (0x3000 bytes) was closed (GEM_CLOSE): its CPU mapping is gone, as after munmap"
    with pytest.raises(MappingRevoked) as ei:
        m.view[0] = 1
    assert str(ei.value) == gone
    with pytest.raises(MappingRevoked, match=re.escape(gone)):
        again.fill(0)
    refused(errno.ENOENT, "GEM_MMAP", u.mmap, h)
    # the file's close revokes every mapping it made, and says so
    kept = u.create(PAGE, GTT)
    view = u.mmap(kept)
    u.f.close()
    with pytest.raises(MappingRevoked) as ei:
        view[0]
    assert str(ei.value) == (f"BO fd{u.f.fd}:{kept} (0x1000 bytes) was closed (its file was closed): its CPU "
                             "mapping is gone, as after munmap")


# ------------------------------------------------------------------------------ GEM_VA

def check_gem_va(dev):
    kmd_model.bind(dev)
    u, other = Umd(), Umd()
    i = u.info
    h = u.create(0x4000)
    h2 = u.create(0x4000)
    va = u.va
    u.map(h, va, 0x4000)
    u.map(h, va + 0x8000, 0x2000, offset=0x2000)  # one BO at two VAs (part of it)
    u.map(h2, va + 0x5000, PAGE, flags=0)  # no permissions: legal, every access faults
    V = Request.GEM_VA

    def bad(err, *a):
        refused(err, "GEM_VA", u.io, V, uapi.GemVaArgs(*a))

    # EINVAL: unknown operation or flag, misaligned address / offset / size, outside the VM,
    # past the BO's end, overlapping a mapping
    for op in (0, 5, -1, None, "MAP", 1.0):
        bad(errno.EINVAL, h2, op, va + 0x10000, 0, PAGE, RW)
    for flags in (1 << 0, 1 << 4, 1 << 5, 1 << 63, -1, None, 2.0):
        bad(errno.EINVAL, h2, VaOp.MAP, va + 0x10000, 0, PAGE, flags)
    for addr, off, size in ((va + 0x10000 + 4, 0, PAGE), (va + 0x10000, 0x800, PAGE), (va + 0x10000, 0, 0x800),
                            (va + 0x10000, 0, 0), (va + 0x10000, 0, -PAGE), (va + 0x10000, -PAGE, PAGE),
                            (-PAGE, 0, PAGE), (1 << 64, 0, PAGE), (va + 0x10000, 0, 1 << 64),
                            (float(va + 0x10000), 0, PAGE), (va + 0x10000, None, PAGE), (va + 0x10000, 0, "4096")):
        bad(errno.EINVAL, h2, VaOp.MAP, addr, off, size, RW)
    for addr, size in ((0, PAGE), (i.va_start - PAGE, PAGE), (i.va_start - PAGE, 2 * PAGE), (i.va_end, PAGE),
                       (i.va_end - PAGE, 2 * PAGE), ((1 << 48) - PAGE, PAGE), (i.va_start, (1 << 63) - i.va_start)):
        bad(errno.EINVAL, h2, VaOp.MAP, addr, 0, size, RW)
    bad(errno.EINVAL, h2, VaOp.MAP, va + 0x10000, 0, 0x5000, RW)  # past the BO's end
    bad(errno.EINVAL, h2, VaOp.MAP, va + 0x10000, 0x3000, 0x2000, RW)
    for addr in (va, va + 0x3000, va - PAGE, va + 0x4000 - PAGE):  # overlaps [va, va + 0x4000)
        bad(errno.EINVAL, h2, VaOp.MAP, addr, 0, 0x2000, RW)
    bad(errno.EINVAL, h2, VaOp.MAP, va + 0x4000, 0, 0x2000, RW)  # the one with no permissions
    # ENOENT: a handle the file does not own (unknown, another file's), an UNMAP of no mapping
    theirs = other.create(0x4000)
    if theirs in (h, h2):
        theirs = 99
    for handle in (0, theirs, 12345, -1, "1", None):
        for op in (VaOp.MAP, VaOp.REPLACE, VaOp.UNMAP):
            bad(errno.ENOENT, handle, op, va + 0x10000, 0, PAGE, RW)
    bad(errno.ENOENT, h, VaOp.UNMAP, va + PAGE, 0, 0, RW)  # inside a mapping, not its start
    bad(errno.ENOENT, h2, VaOp.UNMAP, va, 0, 0, RW)  # a mapping of another BO starts there
    bad(errno.ENOENT, h, VaOp.UNMAP, va + 0x10000, 0, 0, RW)  # nothing there
    # an UNMAP outside the VM is EINVAL before its handle is looked at, as amdgpu_gem_va_ioctl
    # checks the range (map_size included) before the operation: below the reserved bottom,
    # in the kernel's top, or reaching past the end
    for addr, size in ((0, 0), (i.va_start - PAGE, 0), (i.va_end, PAGE), (i.va_end - PAGE, 2 * PAGE),
                       (va, 1 << 63)):
        for handle in (h, 12345):
            bad(errno.EINVAL, handle, VaOp.UNMAP, addr, 0, size, RW)
    # every refusal above changed nothing: the ranges the refused MAPs named are still free
    u.map(h2, va + 0x10000, 0x4000)
    u.map(h2, va + 0x6000, 0x2000)  # right after h2's page at va + 0x5000, up to h's second mapping
    # UNMAP names the mapping by its start; after it the range is free
    u.map(h, va, 0, op=VaOp.UNMAP)
    bad(errno.ENOENT, h, VaOp.UNMAP, va, 0, 0, RW)  # twice
    u.map(h2, va, 0x4000)
    # CLEAR: whatever is in the range, no BO (the handle is not looked up, as amdgpu)
    u.io(V, uapi.GemVaArgs(0, VaOp.CLEAR, va + 0x1000, 0, 0x2000, 0))
    u.io(V, uapi.GemVaArgs(12345, VaOp.CLEAR, va + 0x1000, 0, 0x2000, 0))  # (empty: nothing to clear)
    u.map(h, va + 0x1000, 0x2000)  # the hole CLEAR made
    bad(errno.EINVAL, h, VaOp.MAP, va, 0, PAGE, RW)  # what CLEAR left on either side stays
    bad(errno.EINVAL, h, VaOp.MAP, va + 0x3000, 0, PAGE, RW)
    for addr, size in ((va + 4, PAGE), (va, 0), (i.va_end - PAGE, 2 * PAGE)):
        bad(errno.EINVAL, 0, VaOp.CLEAR, addr, 0, size, 0)
    # REPLACE: CLEAR the range, then MAP it (over several mappings and holes at once)
    u.map(h, va, 0x4000, op=VaOp.REPLACE)
    u.map(h, va, 0x4000, op=VaOp.REPLACE)  # over itself
    u.map(h, va + 0x20000, 0x4000, op=VaOp.REPLACE)  # over nothing: a MAP
    bad(errno.EINVAL, h, VaOp.MAP, va + 0x20000, 0, PAGE, RW)
    bad(errno.EINVAL, h, VaOp.REPLACE, va + 0x20000, 0, 0x5000, RW)  # past the BO: nothing changed
    u.map(h, va + 0x20000, 0, op=VaOp.UNMAP)
    # GEM_CLOSE takes the BO's mappings away (no job holds it): its ranges are free again
    u.close_bo(h)
    u.map(h2, va + 0x8000, 0x2000)
    u.map(h2, va, PAGE, op=VaOp.REPLACE)
    # the other file's VM is its own: the same VA is free there
    other.map(theirs if theirs != 99 else other.create(0x4000), va, 0x4000)


# ------------------------------------------------------------------------------ close

def check_close_gives_everything_back(dev):
    kmd_model.bind(dev)
    watcher = Umd()
    before = watcher.heaps()
    u = Umd()
    ctx = u.ctx()
    for domain in (GTT, VRAM):
        h, u32, va = u.bo(0x4000, domain)
        assert u.wait(ctx, u.cs(ctx, ib(u32, pm4.write_data(va + 0x2000, [1]), handle=h), CsChunkFence(h, 0x3000)))
    u.create(0x10000, VRAM)  # never mapped
    assert watcher.heaps() != before
    u.f.close()
    assert watcher.heaps() == before  # its BOs and its VM's page tables
    refused(errno.EBADF, "CTX", u.io, Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, ctx))




def check_open_with_vram_full(dev):
    """Opening takes the VM's page directory from VRAM: with VRAM full the open is ENOMEM,
    naming open, and keeps nothing (docs/architecture.md)."""
    kmd_model.bind(dev)
    u = Umd()
    hog = []
    while True:  # the largest hole each time, then whatever pages are left
        free = u.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY)).vram.largest_free
        if not free:
            break
        hog.append(u.create(free, VRAM))
    before = u.heaps()
    with pytest.raises(KmdError) as ei:
        kmd_model.open_render_node()
    e = ei.value
    assert e.name == "ENOMEM" and e.message.startswith("open: the VM's page directory: no 0x1000 bytes free in VRAM")
    assert u.heaps() == before
    u.close_bo(hog.pop())
    freed = u.heaps()
    v = Umd()  # room again: the open works, its page directory in VRAM
    assert v.heaps()[0] - freed[0] >= PAGE and v.heaps()[1] == freed[1]


class _NoClass:
    """A value whose `__class__` raises: isinstance() asks for it, and so runs client code."""

    @property
    def __class__(self):
        raise ValueError("client code")


def check_values_that_raise_when_their_type_is_asked(dev):
    """A request number, an argument structure, a field, a CS's chunk list or one chunk whose
    `__class__` raises (isinstance asks it) is EINVAL like any value of the wrong type: every
    refusal is one KmdError line naming the ioctl (docs/architecture.md), never the client's
    exception out of the KMD."""
    kmd_model.bind(dev)
    u = Umd()
    ctx = u.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    bad = _NoClass()
    refused(errno.EINVAL, "unknown ioctl request", u.io, bad, None)
    refused(errno.EINVAL, "GEM_CREATE", u.io, Request.GEM_CREATE, bad)
    for args in (uapi.GemCreateArgs(bad), uapi.GemCreateArgs(PAGE, bad), uapi.GemCreateArgs(PAGE, 0, bad)):
        refused(errno.EINVAL, "GEM_CREATE", u.io, Request.GEM_CREATE, args)
    refused(errno.ENOENT, "GEM_MMAP", u.io, Request.GEM_MMAP, uapi.GemMmapArgs(bad))
    refused(errno.EINVAL, "GEM_CLOSE", u.io, Request.GEM_CLOSE, uapi.GemCloseArgs(bad))
    refused(errno.EINVAL, "GEM_VA", u.io, Request.GEM_VA, uapi.GemVaArgs(1, VaOp.MAP, bad, 0, PAGE))
    refused(errno.EINVAL, "CTX", u.io, Request.CTX, uapi.CtxArgs(bad))
    refused(errno.EINVAL, "INFO", u.io, Request.INFO, uapi.InfoArgs(bad))
    refused(errno.EINVAL, "WAIT_CS", u.io, Request.WAIT_CS, uapi.WaitCsArgs(ctx, 1, bad))
    for chunks in (bad, [bad], [CsChunkIb(bad, gpu_addr=u.va)], [CsChunkIb(8, gpu_addr=bad)]):
        refused(errno.EINVAL, "CS", u.io, Request.CS, uapi.CsArgs(ctx, chunks))
    refused(errno.EINVAL, "CS", u.io, Request.CS, uapi.CsArgs(bad, []))
    assert u.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO)) == u.info  # the file works on
    with pytest.raises(TypeError, match=r"^open_render_node: cap_sys_nice must be True, False or None, not "):
        kmd_model.open_render_node(cap_sys_nice=bad)


CHECKS = [check_open_and_info, check_gem_create, check_gem_handles_are_per_file, check_gem_mmap, check_gem_va,
          check_close_gives_everything_back, check_open_with_vram_full, check_values_that_raise_when_their_type_is_asked]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_open_with_no_device_bound_is_enodev_naming_open():
    """uapi.py: open_render_node is ENODEV with no device bound, and every refusal's message
    names its call first: "open:", as the open's ENOMEM and EDEADLK do (it said "no device
    bound: ..." alone)."""
    kmd_model.unbind()
    e = refused(errno.ENODEV, "open: ", kmd_model.open_render_node)
    assert e.message == "open: no device bound: call kmd_model.bind(dev) first"
