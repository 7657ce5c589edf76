"""The KMD's ioctls: every happy path, every bad argument's errno and message, the CS
checker. Test bodies are `check_*(dev)` functions taking a fresh Device, so the same
bodies can run on the RTL backend (`for check in CHECKS: run_driver(dut, check)`);
pytest runs them on the reference model.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

import numpy as np
import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import (CsChunkFence, CsChunkIb, CtxOp, Domain, GemFlags, InfoQuery, KmdError,
                            Request, VaOp, VmFlags)
from spec import packets, pm4
from spec import vm as vm_spec
from testbench.refmodel import RefModel

GTT, VRAM = Domain.GTT, Domain.VRAM


# ------------------------------------------------------------------------------ helpers
# (imported by the other test_kmd_* modules)

@dataclass
class Bo:
    handle: int
    addr: int
    size: int
    u32: np.ndarray


RWX = VmFlags.READABLE | VmFlags.WRITEABLE | VmFlags.EXECUTABLE


class Client:
    """One open render node with a context: the raw-ioctl view of a UMD. Its BOs are
    mapped (GEM_VA) one after another from the bottom of the VM's range, a guard page apart."""

    def __init__(self, cap_perfmon: bool | None = None, cap_sys_nice: bool | None = None):
        # cap_perfmon True: may read INFO COUNTERS whole; cap_sys_nice True: may ask for HIGH
        self.f = kmd_model.open_render_node(cap_perfmon=cap_perfmon, cap_sys_nice=cap_sys_nice)
        self.ctx = self.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
        # clients start 16 MiB apart, so one's addresses are holes in another's VM
        self.next_va = self.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO)).va_start + (self.f.fd - 3 << 24)

    def io(self, req, args):
        return self.f.ioctl(req, args)

    def bo(self, size: int = 0x4000, domain: int = GTT, flags: int = 0, vm_flags: int = RWX) -> Bo:
        out = self.io(Request.GEM_CREATE, uapi.GemCreateArgs(size, 0, domain, flags))
        view = self.io(Request.GEM_MMAP, uapi.GemMmapArgs(out.handle)).view
        va = self.next_va
        self.next_va += out.size + 0x1000
        self.io(Request.GEM_VA, uapi.GemVaArgs(out.handle, VaOp.MAP, va, 0, out.size, vm_flags))
        return Bo(out.handle, va, out.size, view.view("<u4"))

    def phys(self, bo: Bo) -> int:
        """Where the kernel put the BO (for tests of the allocator; clients never see it)."""
        return self.f.handles[bo.handle].gpu_addr

    @staticmethod
    def ib(bo: Bo, dwords: list[int], offset: int = 0) -> CsChunkIb:
        """Put `dwords` (padded to 8) into `bo` at byte `offset`; the chunk naming them."""
        dw = list(dwords) + pm4.pad(-len(dwords) % 8)
        bo.u32[offset // 4: offset // 4 + len(dw)] = dw
        return CsChunkIb(len(dw), handle=bo.handle, offset=offset)

    def submit(self, *chunks, ctx: int | None = None) -> int:
        return self.io(Request.CS, uapi.CsArgs(self.ctx if ctx is None else ctx, list(chunks))).seq

    def wait(self, seq: int, timeout: int = 200_000, ctx: int | None = None) -> bool:
        return not self.io(Request.WAIT_CS, uapi.WaitCsArgs(self.ctx if ctx is None else ctx, seq, timeout)).busy

    def run(self, bo: Bo, dwords: list[int], offset: int = 0) -> int:
        seq = self.submit(self.ib(bo, dwords, offset))
        assert self.wait(seq)
        return seq


def addr_fields(packet: str, addr: int, value: str = "addr") -> dict[str, int]:
    """Raw field values (for pm4.encode_fields) that put byte address `addr` in `packet`'s
    `value`: the low field in place (ADDR_LO holds bits [31:2]) and the high dword, so they
    hold on a device whose memory reaches above 4 GiB too (tests/kmd/memory/test_high_memory.py)."""
    p = packets.by_name[packet]
    lo, hi = (p.field(n) for n in p.value(value).fields)
    return {lo.name: (addr & 0xFFFF_FFFF) >> lo.lsb, hi.name: addr >> 32}


def expect(err: int, message: str, fn, *args):
    """fn(*args) raises KmdError with exactly this errno and message."""
    with pytest.raises(KmdError) as ei:
        fn(*args)
    e = ei.value
    assert (e.name, e.message) == (uapi.errno_name(err), message)
    return e


def hw_state(kmd) -> tuple:
    """What a rejected submission must leave alone: ring pointers and packet counters."""
    c = kmd.counters()
    return kmd.ring.get_wptr(), kmd.ring.get_rptr(), kmd.ring.doorbells, tuple(c["packets"].values())


def drained_hw_state(kmd, timeout: int = 100_000) -> tuple:
    """hw_state once every ring has drained: the state to compare against when the rings
    had work just before (bind()'s IB test). A fence signals when its RELEASE_MEM has
    written it; the packets after it (the NOPs that pad a submission to the ring's
    alignment) finish later, and the hardware promises no bound (docs/hardware.md: rptr
    moves past a packet once it has finished): on slow, stalling memory bind() returned
    with RB_RPTR 12 of 24 and the padding NOP still to run, so a snapshot taken then moved
    by itself."""
    dev, rings = kmd.dev, [r for r in (kmd.ring, kmd.hqd_ring, kmd.sdma_ring) if r is not None]
    deadline = dev.now() + timeout
    while any(r.get_rptr() != r.get_wptr() for r in rings):
        assert dev.now() < deadline, "rings not drained after %d cycles: %s" % (timeout, ", ".join(
            f"{r.name} rptr {r.get_rptr():#x} wptr {r.get_wptr():#x}" for r in rings))
        dev.delay(16)
    return hw_state(kmd)


# ------------------------------------------------------------------------------ bring-up and INFO

def check_bind_and_info(dev):
    kmd = kmd_model.bind(dev)
    s = kmd.kmd_stats()
    assert s["fences_signalled"] == 1 and s["interrupts"] >= 1  # the IB test went by interrupt
    # and its EOP entry is in the IH ring, though maybe not read yet: the line rises with
    # IH_WPTR, before the wptr write-back lands (docs/hardware.md), and a handler that finds
    # no entry takes INT_STATUS.EOP; on slow memory bind() returned before the entry was read
    assert kmd.wait_for(lambda: kmd.ih.by_source.get("EOP") == 1, 10_000), kmd.ih.by_source
    c = Client(cap_perfmon=True)  # (it reads the device-wide counters)
    info = c.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    assert info.backend == dev.name and info.ib_align_dw == 8 and info.ring_size_dw == 4096
    caps = kmd.mmio.fields(regs.CAPS)  # what the device says of itself, as the UMD is told it
    # the bus is a build parameter (32 to 256 bits: make sweep, the RTL tests at 32 bits)
    assert (info.bus_bytes, info.addr_bits) == (1 << caps["BUS_BYTES_LOG2"], caps["ADDR_BITS"])
    assert info.bus_bytes in (4, 8, 16, 32) and info.addr_bits == 48
    assert info.packets[:3] == ("NOP", "WRITE_DATA", "INDIRECT_BUFFER")
    fw = c.io(Request.INFO, uapi.InfoArgs(InfoQuery.FW_VERSION))
    assert fw.kmd_name == "gpucosim" and fw.kmd_version == uapi.KMD_VERSION and fw.hw_version[0] == 0
    assert (info.va_start, info.va_end, info.va_alignment, info.vm_levels) == (
        1 << 20, (1 << 30) - kmd.kernel_va_size, 0x1000, 2)  # 2 levels: a 1 GiB VM, the shadow pool on top
    mem = c.io(Request.INFO, uapi.InfoArgs(InfoQuery.MEMORY))
    # kernel BOs live in GTT; VRAM holds the file's root page directory
    assert mem.vram.used == vm_spec.TABLE_BYTES and mem.gtt.used > 0
    cnt = c.io(Request.INFO, uapi.InfoArgs(InfoQuery.COUNTERS))
    # ring test + IB test, and the ring test of the CP's second queue where there is one (the model)
    assert cnt.packets["WRITE_DATA"] == 2 + (kmd.hqd_ring is not None) and cnt.packets["RELEASE_MEM"] == 1
    assert cnt.kmd["ioctls"] == 6 and cnt.kmd["doorbells"] == 2
    assert c.io(Request.INFO, uapi.InfoArgs(InfoQuery.VM_FAULT)) == uapi.VmFaultInfo()  # no fault yet
    expect(errno.EINVAL, "INFO: unknown query 7 (known: FW_VERSION (0xe), DEV_INFO (0x16), "
           "MEMORY (0x19), VM_FAULT (0x23), COUNTERS (0x80))", c.io, Request.INFO, uapi.InfoArgs(7))


def check_dispatch_errors(dev):
    kmd_model.bind(dev)
    c = Client()
    expect(errno.EINVAL, "unknown ioctl request 0x99", c.io, 0x99, None)
    expect(errno.EINVAL, "GEM_CREATE: arguments must be a GemCreateArgs, not dict",
           c.io, Request.GEM_CREATE, {"size": 4096})
    expect(errno.EINVAL, "INFO: arguments must be an InfoArgs, not dict",  # (it said "a InfoArgs")
           c.io, Request.INFO, {"query": 1})
    c.f.close()
    expect(errno.EBADF, "INFO: the file is closed", c.io, Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    kmd_model.unbind()
    expect(errno.ENODEV, "open: no device bound: call kmd_model.bind(dev) first", kmd_model.open_render_node)


# ------------------------------------------------------------------------------ GEM

def check_gem(dev):
    kmd = kmd_model.bind(dev)
    c = Client()
    v = c.bo(100, VRAM, GemFlags.VRAM_CLEARED)
    g = c.bo(0x3000, GTT)
    assert v.size == 0x1000 and g.size == 0x3000  # whole pages
    heaps = kmd.bo.heaps
    pv, pg = c.phys(v), c.phys(g)
    assert heaps[VRAM].base <= pv < heaps[VRAM].base + heaps[VRAM].size
    assert heaps[GTT].base <= pg < heaps[GTT].base + heaps[GTT].size
    assert not v.u32.any()
    m = c.io(Request.GEM_MMAP, uapi.GemMmapArgs(g.handle))  # the mapping says how much, and is the BO's
    assert (m.size, m.view.size) == (0x3000, 0x3000)
    m.view[:4] = [5, 6, 7, 8]
    assert dev.mem[pg:pg + 4].tolist() == [5, 6, 7, 8] and g.u32[0] == 0x08070605
    v.u32[:4] = [1, 2, 3, 4]  # the mapping is the device's memory
    assert dev.mem[pv:pv + 16].view("<u4").tolist() == [1, 2, 3, 4]
    a = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0x10000, VRAM))
    assert c.f.handles[a.handle].gpu_addr % 0x10000 == 0
    assert len(kmd.live_bos(c.f)) == 3
    # freeing coalesces: the same memory comes back
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(a.handle))
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(v.handle))
    assert c.f.handles[c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, VRAM)).handle].gpu_addr == pv
    assert len(kmd.live_bos()) == 2
    c.f.close()
    assert kmd.live_bos() == [] and kmd.bo.heaps[VRAM].used == 0


def check_gem_errors(dev):
    kmd = kmd_model.bind(dev)
    c = Client()
    G = Request.GEM_CREATE
    expect(errno.EINVAL, "GEM_CREATE: size must be > 0, not 0", c.io, G, uapi.GemCreateArgs(0))
    expect(errno.EINVAL, "GEM_CREATE: size must be an int, not 1.5", c.io, G, uapi.GemCreateArgs(1.5))
    expect(errno.EINVAL, "GEM_CREATE: alignment must be 0 or a power of two, not 0x3000",
           c.io, G, uapi.GemCreateArgs(4096, 0x3000))
    expect(errno.EINVAL, "GEM_CREATE: domain must be VRAM (0x4) or GTT (0x2), not 0x6",
           c.io, G, uapi.GemCreateArgs(4096, 0, 6))
    expect(errno.EINVAL, "GEM_CREATE: unknown flags 0x100", c.io, G, uapi.GemCreateArgs(4096, 0, GTT, 0x100))
    expect(errno.EINVAL, "GEM_CREATE: flags must be >= 0, not -1", c.io, G, uapi.GemCreateArgs(4096, 0, GTT, -1))
    expect(errno.EINVAL, "GEM_CREATE: alignment must be >= 0, not -0x1000", c.io, G, uapi.GemCreateArgs(4096, -4096))
    vram = kmd.bo.heaps[VRAM]
    free = vram.size - vram.used  # the file's page directory took a page
    expect(errno.ENOMEM, f"GEM_CREATE: no {vram.size + 0x1000:#x} bytes free in VRAM ({free:#x} free, "
           f"largest hole {vram.largest_free:#x})", c.io, G, uapi.GemCreateArgs(vram.size + 0x1000, 0, VRAM))
    expect(errno.EINVAL, "GEM_CLOSE: no BO with handle 99", c.io, Request.GEM_CLOSE, uapi.GemCloseArgs(99))
    expect(errno.ENOENT, "GEM_MMAP: no BO with handle 99", c.io, Request.GEM_MMAP, uapi.GemMmapArgs(99))
    expect(errno.ENOENT, "GEM_WAIT_IDLE: no BO with handle 99", c.io, Request.GEM_WAIT_IDLE,
           uapi.GemWaitIdleArgs(99, 0))
    h = c.io(G, uapi.GemCreateArgs(4096, 0, VRAM, GemFlags.NO_CPU_ACCESS)).handle
    expect(errno.EPERM, f"GEM_MMAP: BO {h} was created with NO_CPU_ACCESS", c.io, Request.GEM_MMAP,
           uapi.GemMmapArgs(h))
    # with other flags beside it too (a test of the flags equal to NO_CPU_ACCESS survived: mutants-11)
    h2 = c.io(G, uapi.GemCreateArgs(4096, 0, VRAM, GemFlags.NO_CPU_ACCESS | GemFlags.VRAM_CLEARED)).handle
    expect(errno.EPERM, f"GEM_MMAP: BO {h2} was created with NO_CPU_ACCESS", c.io, Request.GEM_MMAP,
           uapi.GemMmapArgs(h2))
    # handles are per file
    other = Client()
    expect(errno.EINVAL, f"GEM_CLOSE: no BO with handle {h}", other.io, Request.GEM_CLOSE, uapi.GemCloseArgs(h))
    expect(errno.EINVAL, "GEM_WAIT_IDLE: timeout must be >= 0, not -1", c.io, Request.GEM_WAIT_IDLE,
           uapi.GemWaitIdleArgs(h, -1))


# ------------------------------------------------------------------------------ contexts

def check_ctx(dev):
    kmd_model.bind(dev)
    a, b = Client(), Client()
    assert (a.ctx, b.ctx) == (1, 1)  # ids are per file (amdgpu's idr per fpriv): b's say nothing of a
    st = a.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, a.ctx))
    assert (st.reset_status, st.resets, st.error) == (uapi.ResetStatus.NO_RESET, 0, None)
    expect(errno.EINVAL, "CTX FREE: no context 2 on this file", a.io, Request.CTX, uapi.CtxArgs(CtxOp.FREE, 2))
    expect(errno.EINVAL, "CTX QUERY_STATE: no context 42 on this file", a.io, Request.CTX,
           uapi.CtxArgs(CtxOp.QUERY_STATE, 42))
    expect(errno.EINVAL, "CTX: op must be ALLOC (1), FREE (2), QUERY_STATE (3) or QUERY_STATE2 (4), not 9", a.io,
           Request.CTX, uapi.CtxArgs(9))
    expect(errno.EINVAL, "CTX: op must be >= 0, not -1", a.io, Request.CTX, uapi.CtxArgs(-1))
    expect(errno.EINVAL, "CTX: flags must be 0, not 1", a.io, Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, flags=1))
    a.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, a.ctx))
    expect(errno.EINVAL, "CS: no context 1 on this file", a.submit, CsChunkIb(8, gpu_addr=0x1000))


# ------------------------------------------------------------------------------ CS / WAIT_CS

def check_cs_and_wait(dev):
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    data = bo.addr + 0x2000
    ib1 = c.ib(bo, pm4.write_data(data, [0x11, 0x22]))
    ib2 = c.ib(bo, pm4.write_data(data + 8, [0x33]), offset=0x100)
    seq = c.submit(ib1, ib2, CsChunkFence(bo.handle, 0x3000))
    assert c.wait(seq)
    assert bo.u32[0x800:0x803].tolist() == [0x11, 0x22, 0x33]
    assert bo.u32[0x3000 // 4] == seq  # the user fence
    # by GPU address instead of handle, and a second job on the same context
    seq2 = c.submit(CsChunkIb(ib1.size_dw, gpu_addr=bo.addr))
    assert seq2 == seq + 1 and c.wait(seq2)
    assert c.wait(seq, 0)  # long finished: signalled at once
    st = kmd.kmd_stats()
    assert st["cs"] == 2 and st["jobs_retired"] == 2 and st["live_bos"] == 1
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(bo.handle))
    assert kmd.live_bos() == []


def check_cs_errors(dev):
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x1000)
    ib = c.ib(bo, pm4.nop(6))
    cs = c.submit
    expect(errno.EINVAL, "CS: no IB chunk", cs)
    expect(errno.EINVAL, "CS: no IB chunk", cs, CsChunkFence(bo.handle, 0))
    expect(errno.EINVAL, "CS: more than 4 IB chunks", cs, *[ib] * 5)
    expect(errno.EINVAL, "CS: chunk 0 is a int, not a CsChunkIb, CsChunkFence or CsChunkDep", cs, 7)
    expect(errno.EINVAL, "CS: chunk 0: size_dw must be 0x1 to 0xfffff, not 0", cs, CsChunkIb(0, bo.handle))
    expect(errno.EINVAL, "CS: chunk 0: size_dw must be 0x1 to 0xfffff, not 0x100000", cs,
           CsChunkIb(1 << 20, bo.handle))
    expect(errno.ENOENT, "CS: chunk 0: no BO with handle 9", cs, CsChunkIb(8, 9))
    expect(errno.EINVAL, "CS: chunk 0: offset must be dword aligned, not 0x2", cs, CsChunkIb(8, bo.handle, 2))
    expect(errno.EINVAL, "CS: chunk 0: offset must be >= 0, not -4", cs, CsChunkIb(8, bo.handle, -4))
    expect(errno.EINVAL, "CS: chunk 1: offset must be >= 0, not -4", cs, ib, CsChunkFence(bo.handle, -4))
    expect(errno.EINVAL, "CS: chunk 0: IB at offset 0xfe0+0x40 runs past the end of BO 1 (0x1000 bytes)",
           cs, CsChunkIb(16, bo.handle, 0xFE0))
    expect(errno.EINVAL, "CS: chunk 0: an IB chunk needs a BO handle or a gpu_addr", cs, CsChunkIb(8))
    expect(errno.EINVAL, "CS: chunk 0: gpu_addr must be dword aligned, not 0x1001", cs, CsChunkIb(8, gpu_addr=0x1001))
    top = (1 << kmd.info.addr_bits) - 4  # the bus's last dword: a fine address, in no BO of the client's
    expect(errno.EINVAL, f"CS: chunk 0: gpu_addr must be 0x0 to {top + 3:#x}, not {top + 4:#x}", cs,
           CsChunkIb(8, gpu_addr=top + 4))
    expect(errno.EINVAL, f"CS: IB at {top:#x}+0x20 is outside every mapping of context {c.ctx}", cs,
           CsChunkIb(8, gpu_addr=top))
    expect(errno.EINVAL, "CS: chunk 0: flags must be 0, not 1", cs, CsChunkIb(8, bo.handle, flags=1))
    expect(errno.EINVAL, "CS: chunk 2: only one fence chunk per CS", cs, ib, CsChunkFence(bo.handle, 0),
           CsChunkFence(bo.handle, 4))
    expect(errno.EINVAL, "CS: chunk 1: user fence offset 0x1000 must be dword aligned and inside BO 1 "
           "(0x1000 bytes)", cs, ib, CsChunkFence(bo.handle, 0x1000))
    expect(errno.EINVAL, "CS: chunk 1: no BO with handle 5", cs, ib, CsChunkFence(5, 0))
    expect(errno.EINVAL, "CS: chunks must be a list, not str", c.io, Request.CS, uapi.CsArgs(c.ctx, "ib"))
    W = Request.WAIT_CS
    expect(errno.EINVAL, "WAIT_CS: context 1 never submitted seqno 0x1 (nothing submitted yet)", c.io, W,
           uapi.WaitCsArgs(c.ctx, 1, 10))
    seq = cs(ib)
    expect(errno.EINVAL, "WAIT_CS: context 1 never submitted seqno 0x2 (last is 0x1)", c.io, W,
           uapi.WaitCsArgs(c.ctx, seq + 1, 10))
    expect(errno.EINVAL, "WAIT_CS: timeout must be >= 0, not -5", c.io, W, uapi.WaitCsArgs(c.ctx, seq, -5))
    # small numbers in decimal, the rest in hex: -9 .. 9 read as written
    expect(errno.EINVAL, "WAIT_CS: timeout must be >= 0, not -9", c.io, W, uapi.WaitCsArgs(c.ctx, seq, -9))
    expect(errno.EINVAL, "WAIT_CS: timeout must be >= 0, not -0xa", c.io, W, uapi.WaitCsArgs(c.ctx, seq, -10))
    expect(errno.EINVAL, "WAIT_CS: seq must be 0x0 to 0xffffffff, not 0x100000000", c.io, W,
           uapi.WaitCsArgs(c.ctx, 1 << 32, 5))
    expect(errno.EINVAL, "WAIT_CS: no context 7 on this file", c.io, W, uapi.WaitCsArgs(7, seq, 5))
    assert kmd.stats["cs"] == 1


# ------------------------------------------------------------------------------ the CS checker

def check_cs_checker(dev):
    """Every way out of the submitter's BOs is refused and nothing reaches the hardware."""
    kmd = kmd_model.bind(dev)
    a, b = Client(), Client()
    mine, theirs = a.bo(), b.bo()
    theirs.u32[:] = 0x5A5A5A5A
    before = drained_hw_state(kmd)
    ctx = a.ctx
    ib_rel = 0x0

    def refused(err, message, dwords, *extra):
        e = expect(err, message, a.submit, a.ib(mine, dwords, ib_rel), *extra)
        assert hw_state(kmd) == before, "a refused CS touched the hardware"
        assert (theirs.u32 == 0x5A5A5A5A).all()
        return e

    t, m, fence = theirs.addr, mine.addr, kmd.fence_addr
    # the IB itself
    expect(errno.EINVAL, f"CS: IB at {t:#x}+0x20 is outside every mapping of context {ctx}", a.submit,
           CsChunkIb(8, gpu_addr=t))
    expect(errno.EINVAL, f"CS: IB at {m + 0x3ff0:#x}+0x20 runs past the end of its mapping of context {ctx} at "
           f"{m + 0x4000:#x}", a.submit,
           CsChunkIb(8, gpu_addr=m + 0x3FF0))  # runs off the end of its BO
    expect(errno.EINVAL, f"CS: IB at {m:#x}+0x4004 runs past the end of its mapping of context {ctx} at "
           f"{m + 0x4000:#x}", a.submit, CsChunkIb(0x1001, gpu_addr=m))  # from the mapping's first byte
    # each packet's reach
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({m:#x}) writes [{t:#x}, {t + 8:#x}), outside every mapping "
            f"of context {ctx}", pm4.write_data(t, [1, 2]))
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB+0xc ({m + 0xc:#x}) writes [{fence:#x}, {fence + 4:#x}), "
            f"outside every mapping of context {ctx}", pm4.nop(2) + pm4.write_data(fence, [0]))
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({m:#x}) writes [{m + 0x3ffc:#x}, {m + 0x4004:#x}), "
            f"which runs past the end of its mapping of context {ctx} at {m + 0x4000:#x}",
            pm4.write_data(m + 0x3FFC, [1, 2]))
    refused(errno.EINVAL, f"CS: WAIT_REG_MEM at IB+0x0 ({m:#x}) polls [{t:#x}, {t + 4:#x}), outside every mapping "
            f"of context {ctx}", pm4.wait_reg_mem(t, 0, 0, "EQ"))
    refused(errno.EINVAL, f"CS: RELEASE_MEM at IB+0x0 ({m:#x}) writes [{fence:#x}, {fence + 4:#x}), outside "
            f"every mapping of context {ctx}", pm4.release_mem(fence, 7))
    refused(errno.EINVAL, f"CS: DMA_DATA at IB+0x0 ({m:#x}) writes [{t:#x}, {t + 0x10:#x}), outside every mapping "
            f"of context {ctx}", pm4.dma_data(t, m, 16)) if kmd.info.has_dma else None
    # nested and chained IBs are followed
    mine.u32[0x800:0x808] = pm4.write_data(t, [1]) + pm4.pad(3)
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB2+0x0 ({m + 0x2000:#x}) writes [{t:#x}, {t + 4:#x}), outside "
            f"every mapping of context {ctx}", pm4.indirect_buffer(m + 0x2000, 8))
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({m + 0x2000:#x}) writes [{t:#x}, {t + 4:#x}), outside "
            f"every mapping of context {ctx}", pm4.nop(3) + pm4.indirect_buffer(m + 0x2000, 8, chain=1))
    refused(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB+0x0 ({m:#x}) runs [{t:#x}, {t + 0x20:#x}), outside every "
            f"mapping of context {ctx}", pm4.indirect_buffer(t, 8))
    # what the CP would refuse anyway is refused here, by name
    refused(errno.EINVAL, f"CS: malformed packet at IB+0x4 ({m + 4:#x}): UNKNOWN op=0x7b count=0",
            [pm4.TYPE2_FILLER, pm4.header(0x7B, 0), 0])
    refused(errno.EINVAL, f"CS: malformed packet at IB+0x0 ({m:#x}): BAD COUNT INDIRECT_BUFFER: count=1, "
            f"must be 2", [pm4.header(0x3F, 1), 0, 0])
    refused(errno.EINVAL, f"CS: malformed packet at IB+0x0 ({m:#x}): BAD TYPE 0: not a type-3 header", [0x1234])
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({m:#x}): DST_SEL=REGISTER is not supported by this device",
            pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, **addr_fields("WRITE_DATA", m + 0x100)}, [1]))
    refused(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB+0x0 ({m:#x}): IB_SIZE is 0",
            pm4.encode_fields("INDIRECT_BUFFER", addr_fields("INDIRECT_BUFFER", m + 0x2000, "base")))
    refused(errno.EINVAL, f"CS: WRITE_DATA at IB+0x0 ({m:#x}): DST_SEL=GDS is not supported by this device",
            pm4.encode_fields("WRITE_DATA", {"DST_SEL": 3, **addr_fields("WRITE_DATA", m + 0x100)}, [1]))
    refused(errno.EINVAL, f"CS: RELEASE_MEM at IB+0x0 ({m:#x}): addr {m + 0x104:#x} is not qword aligned "
            "(needed with DATA_SEL=DATA_64)", pm4.encode_fields("RELEASE_MEM", {
                "DATA_SEL": 2, **addr_fields("RELEASE_MEM", m + 0x104), "EVENT_INDEX": 5}))
    mine.u32[0x800:0x808] = pm4.indirect_buffer(m + 0x2100, 8) + pm4.pad(4)  # IB2 -> IB3
    refused(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB2+0x0 ({m + 0x2000:#x}): nests deeper than the device's "
            f"{kmd.info.ib_levels} IB levels", pm4.indirect_buffer(m + 0x2000, 8))
    mine.u32[0x800:0x808] = pm4.pad(4) + pm4.indirect_buffer(m + 0x2000, 8, chain=1)  # chains to itself
    refused(errno.EINVAL, f"CS: INDIRECT_BUFFER at IB+0x10 ({m + 0x2010:#x}) chains back to the IB at "
            f"{m + 0x2000:#x} (8 dwords) that this chain already ran: the CP would never finish",
            pm4.indirect_buffer(m + 0x2000, 8, chain=1))
    if not kmd.info.has_dma:
        refused(errno.EINVAL, f"CS: DMA_DATA at IB+0x0 ({m:#x}): this device has no DMA engine (CAPS.DMA = 0)",
                pm4.dma_data(m + 0x100, m + 0x200, 16))
    # another file's context is not ours to submit to (ids are per file: b's second context
    # has an id a has not)
    theirs_ctx = b.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    assert theirs_ctx not in a.f.contexts
    expect(errno.EINVAL, f"CS: no context {theirs_ctx} on this file",
           lambda: a.submit(CsChunkIb(8, mine.handle), ctx=theirs_ctx))
    assert kmd.stats["cs_rejected"] == 21
    # and the good version of the same runs
    a.run(mine, pm4.write_data(m + 0x100, [1, 2]) + pm4.release_mem(m + 0x108, 3))
    assert mine.u32[0x40:0x43].tolist() == [1, 2, 3]


def check_trace(dev):
    kmd = kmd_model.bind(dev)
    seen = []
    kmd.trace_hooks.append(seen.append)
    c = Client()
    bo = c.bo(0x1000)
    with pytest.raises(KmdError):
        c.submit(CsChunkIb(8, gpu_addr=0x10))
    text = [str(r) for r in seen]
    assert text[0].startswith("ioctl(fd 3, CTX, {op=ALLOC}) = {ctx_id=1} <0 cycles, ")
    assert text[2].startswith("ioctl(fd 3, GEM_CREATE, {size=0x1000}) = {handle=1, size=0x1000} <")
    assert text[4].startswith(f"ioctl(fd 3, GEM_VA, {{handle=1, operation=MAP, va_address={bo.addr:#x}, "
                              "map_size=0x10...}) = None <")  # (clipped, as strace -s does)
    assert text[5].startswith("ioctl(fd 3, CS, {ctx_id=1, chunks=[Ib(0x10, 8 dw)]}) = -1 EINVAL (CS: IB at "
                              "0x10+0x20 is outside every mapping of context 1) <")
    assert seen[5].error.errno == errno.EINVAL and seen[5].result is None
    # a refused request or argument kind still shows what was given (the kernel's one-line copy)
    for request, args in ((0x99, uapi.GemCreateArgs(0x1000)), (Request.GEM_CREATE, uapi.CtxArgs(CtxOp.ALLOC))):
        with pytest.raises(KmdError):
            c.io(request, args)
    assert str(seen[6]).startswith("ioctl(fd 3, 0x99, GemCreateArgs(size=4096, alignment=0, ")
    assert " = -1 EINVAL (unknown ioctl request 0x99) <0 cycles, " in str(seen[6])
    assert str(seen[7]).startswith("ioctl(fd 3, GEM_CREATE, CtxArgs(op=<CtxOp.ALLOC: 1>, ctx_id=0, ")
    assert " = -1 EINVAL (GEM_CREATE: arguments must be a GemCreateArgs, not CtxArgs) <0 cycles, " in str(seen[7])


CHECKS = [check_bind_and_info, check_dispatch_errors, check_gem, check_gem_errors, check_ctx,
          check_cs_and_wait, check_cs_errors, check_cs_checker, check_trace]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_checker_with_dma():
    check_cs_checker(RefModel(dma=True))


def test_log_spec(monkeypatch):
    import io
    import logging

    from kmd_model import log
    buf = io.StringIO()
    log.configure("ioctl=info,ring=debug", stream=buf)
    try:
        assert logging.getLogger("gpucosim.ioctl").level == logging.INFO
        assert logging.getLogger("gpucosim.ring").level == logging.DEBUG
        check_trace(RefModel())
        assert "[ioctl] ioctl(fd 3, CTX, {op=ALLOC})" in buf.getvalue()
        assert "RB_DOORBELL" in buf.getvalue() and "RELEASE_MEM" in buf.getvalue()
        with pytest.raises(ValueError, match="GPUCOSIM_LOG: unknown log level 'loud'"):
            log.configure("kmd=loud")
    finally:
        for name in ("ioctl", "ring"):
            logging.getLogger(f"gpucosim.{name}").setLevel(logging.NOTSET)
        root = logging.getLogger("gpucosim")
        for h in [h for h in root.handlers if getattr(h, "_gpucosim", False)]:
            root.removeHandler(h)
        root.setLevel(logging.NOTSET)
        root.propagate = True


def test_ioctls_from_two_threads_are_serialised(monkeypatch):
    """A client may make ioctls from several threads with no lock of its own: the driver
    holds its own (Kmd.lock), as a kernel driver does. Here one thread's CS is paused in
    the middle of the checker's walk while another client's CS is offered: without the
    driver's lock the second check ran at once and replaced the lookup tables the first
    was reading (its IB then seemed unmapped; make test once failed this way, in
    test_umd_async). With it, the second waits, and both jobs run."""
    import threading

    from kmd_model.cs.checker import CsChecker

    kmd_model.bind(RefModel())
    a, b = Client(), Client()
    bo_a, bo_b = a.bo(), b.bo()
    paused, second_done = threading.Event(), threading.Event()
    real = CsChecker._chain

    def chain(self, w, addr, *rest):
        if threading.current_thread().name == "first" and not paused.is_set():
            paused.set()
            second_done.wait(0.5)  # the second CS, if it can run now, runs meanwhile
        return real(self, w, addr, *rest)

    monkeypatch.setattr(CsChecker, "_chain", chain)
    results = {}

    def first():
        try:
            results["a"] = a.run(bo_a, pm4.write_data(bo_a.addr + 0x100, [0xA]), offset=0)
        except Exception as e:  # noqa: BLE001 (the failure to report)
            results["a"] = e

    t = threading.Thread(target=first, name="first")
    t.start()
    assert paused.wait(10)
    try:
        results["b"] = b.run(bo_b, pm4.write_data(bo_b.addr + 0x100, [0xB]), offset=0)
    except Exception as e:  # noqa: BLE001
        results["b"] = e
    second_done.set()
    t.join(10)
    assert not t.is_alive()
    assert not any(isinstance(v, Exception) for v in results.values()), results
    assert bo_a.u32[0x40] == 0xA and bo_b.u32[0x40] == 0xB


def test_a_kmd_error_is_whole_when_copied_or_sent_to_another_process():
    """copy.copy and pickle (an exception a multiprocessing worker sends back) rebuild a
    KmdError from its args: they were one string, and the rebuild failed with TypeError.
    Its errno and its message (as within() left it) come back; an errno the errno module
    does not name is shown by its number."""
    import copy
    import pickle

    e = KmdError(errno.ETIME, "the reset failed").within("WAIT_CS")
    for back in (copy.copy(e), pickle.loads(pickle.dumps(e))):
        assert (type(back), back.errno, back.message, str(back)) == (
            KmdError, errno.ETIME, "WAIT_CS: the reset failed", "ETIME: WAIT_CS: the reset failed")
    assert repr(e) == f"KmdError({errno.ETIME}, 'WAIT_CS: the reset failed')"
    e = KmdError(errno.EINVAL, "GEM_CREATE: size must be > 0, not 0")  # (not through within())
    back = pickle.loads(pickle.dumps(e))
    assert (repr(e), str(back)) == (f"KmdError({errno.EINVAL}, 'GEM_CREATE: size must be > 0, not 0')",
                                    "EINVAL: GEM_CREATE: size must be > 0, not 0")
    assert str(KmdError(4095, "x")) == "4095: x" and KmdError(4095, "x").name == "4095"


def test_elapse_lets_device_time_pass_and_refuses_what_is_no_cycle_count():
    """File.elapse (umd's Event.signalled spins through it): the device's time passes, the
    kernel's work beside it (a job finishes, its fence is processed); not an ioctl; a count
    that is not one is a one-line ValueError; a closed file's does nothing."""
    from testbench.refmodel import RefModel

    dev = RefModel()
    kmd = kmd_model.bind(dev)
    f = kmd_model.open_render_node()
    t0, n = dev.now(), kmd.stats["ioctls"]
    f.elapse(1000)
    assert dev.now() >= t0 + 1000 and kmd.stats["ioctls"] == n
    for bad in (-1, 1 << 33, 1.5, "64", True, None):
        with pytest.raises(ValueError, match=r"^elapse: cycles must be an integer in \[0, 2\*\*32\], not "):
            f.elapse(bad)
    f.close()
    t1 = dev.now()
    f.elapse(1000)
    assert dev.now() == t1
