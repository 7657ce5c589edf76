"""Isolation by the MMU alone, modelled on igt's gem_ctx_isolation: the CS checker is off,
so a hostile client's packets reach the CP as it wrote them.

- Every packet that touches memory (WRITE_DATA, RELEASE_MEM, WAIT_REG_MEM, an IB fetch,
  both sides of DMA_DATA) aimed at every kind of memory outside the client's mappings
  (another client's BO by its address and by its physical address, page tables, the ring,
  the IH ring, the write-back page, the shadow pool, the null page, beyond the VM) stops
  with a VM fault that names the address; nothing lands; an innocent client's job after
  it completes.
- A page unmapped while a job waits to use it faults when used, and its memory is not
  freed while the job may still reach it; a range remapped to another BO reaches the new
  one (the KMD invalidated the TLB); a TLB invalidation that races a running DMA copy
  stops it at the first page it takes away, or after the copy, never elsewhere.

Each `check_*(dev)` runs on the reference model here and on the RTL under both simulators
(tests/test_rtl_drivers.py).
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.kmd import Wb
from kmd_model.uapi import CsChunkIb, CtxOp, KmdError, Request, VaOp
from spec import pm4
from spec import vm as vm_spec
from testbench.refmodel import RefModel

from .test_kmd_ioctl import RWX, Client

EVIL = 0xBAD0_0BAD


def _hostile_packets(own: int) -> dict:
    """What a job can name memory with: packet name -> dwords aimed at address t."""
    return {
        "WRITE_DATA": lambda t: pm4.write_data(t, [EVIL, EVIL]),
        "RELEASE_MEM": lambda t: pm4.release_mem(t, EVIL, data_sel="DATA_64"),
        "WAIT_REG_MEM": lambda t: pm4.wait_reg_mem(t, 0, 0, "ALWAYS"),
        "INDIRECT_BUFFER": lambda t: pm4.indirect_buffer(t, 8),
        "DMA_DATA from": lambda t: pm4.dma_data(own, t, 64, cp_sync=1),
        "DMA_DATA to": lambda t: pm4.dma_data(t, own, 64, cp_sync=1),
    }


def _run_guilty(c: Client, ib_bo, dwords) -> uapi.HwErrorInfo:
    """Submit `dwords` on a fresh context of `c`: the job must stop with a VM fault."""
    ctx = c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    seq = c.submit(c.ib(ib_bo, dwords), ctx=ctx)
    with pytest.raises(KmdError) as ei:
        c.wait(seq, 200_000, ctx)
    assert ei.value.errno == errno.ECANCELED, ei.value
    return ei.value.info


def check_hostile_reach_faults(dev):
    kmd = kmd_model.bind(dev, cs_check=False)
    victim, bad = Client(), Client()
    vbo = victim.bo(0x4000)
    vbo.u32[:] = 0x5AFE
    abo = bad.bo(0x4000)
    own = abo.addr + 0x2000
    ih = kmd.ih.gpu_addr + 4 * ((kmd.ih.rptr + 64) & (kmd.ih.size_dw - 1))
    targets = {
        "another client's BO, by its address": vbo.addr + 0x100,
        "another client's BO, by its physical address": victim.phys(vbo) + 0x100,
        "the other client's page directory": victim.f.vm.root.gpu_addr,
        "its own page directory": bad.f.vm.root.gpu_addr + 0x800,
        "the kernel ring": kmd.ring.gpu_addr + 4 * ((kmd.ring.wptr + 256) & kmd.ring.mask),
        "the IH ring": ih,
        "the write-back page": kmd.wb_addr(Wb.SCRATCH),
        "the shadow pool": kmd.shadow.bo.gpu_addr + 0x1000,
        "the null page": 0x40,
        "beyond the VM": 1 << vm_spec.va_bits(),
    }
    targets = {k: a & ~7 for k, a in targets.items()}  # (a 64-bit fence needs 8-byte alignment)
    packets = _hostile_packets(own)
    pairs = [(t, p) for t in targets for p in packets]
    if dev.name != "model":  # every target and every packet, not every pair: resets are slow in RTL
        pairs = [(t, list(packets)[k % len(packets)]) for k, t in enumerate(targets)] + \
                [(list(targets)[k % len(targets)], p) for k, p in enumerate(packets)]
    mem32 = dev.mem.view("<u4")
    for name, which in pairs:
        t, pkt = targets[name], packets[which]
        before = {k: int(mem32[(a & ~3) >> 2]) for k, a in targets.items() if a < len(dev.mem)}
        info = _run_guilty(bad, abo, pkt(t))
        assert info.code == "VM_FAULT" and info.addr == t, f"{pkt(t)} at {name}: {info}"
        f = bad.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.VM_FAULT))
        assert (f.addr, f.vmid) == (t, bad.f.vm.vmid or f.vmid) and f.cause in ("INVALID", "RANGE"), f
        after = {k: int(mem32[(a & ~3) >> 2]) for k, a in targets.items() if a < len(dev.mem)}
        landed = [k for k in after if after[k] == EVIL and before[k] != EVIL]
        assert not landed, f"{pkt(t)} at {name} reached {landed}"
        victim.run(vbo, pm4.write_data(vbo.addr + 0x3000, [len(pairs)]), offset=0x200)  # innocent: runs
    assert (vbo.u32[:0x40] == 0x5AFE).all() and vbo.u32[0xC00] == len(pairs)
    assert kmd.stats["vm_faults"] == len(pairs) and kmd.stats["resets"] == len(pairs)


def check_unmap_while_in_use(dev):
    """A page unmapped under a waiting job: the job's write faults when it comes, and the
    BO (closed too) keeps its memory until the job has ended."""
    kmd = kmd_model.bind(dev, cs_check=False)
    c = Client()
    ib, data = c.bo(0x2000), c.bo(0x2000)
    flag = ib.addr + 0x1000
    seq = c.submit(c.ib(ib, pm4.wait_reg_mem(flag, 1, 1, "EQ") + pm4.write_data(data.addr + 0x10, [EVIL])))
    phys = c.phys(data)
    c.io(Request.GEM_VA, uapi.GemVaArgs(data.handle, VaOp.UNMAP, data.addr))
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))
    assert any(b.gpu_addr == phys for b in kmd.live_bos())  # not freed: the job may still reach it
    ib.u32[0x400] = 1  # release the job
    with pytest.raises(KmdError) as ei:
        c.wait(seq)
    e = ei.value.info
    assert (e.code, e.addr) == ("VM_FAULT", data.addr + 0x10), e
    assert "WRITE" in e.message and "no valid entry at page-table level 1" in e.message, e.message
    assert int(dev.mem[phys + 0x10:phys + 0x14].view("<u4")[0]) != EVIL
    c.f.close()
    assert not any(b.gpu_addr == phys for b in kmd.live_bos())  # freed once idle


def check_remap_to_another_bo(dev):
    """REPLACE points a range at another BO: the next job reaches the new BO, not the one
    the TLB held (the KMD invalidated it)."""
    kmd_model.bind(dev, cs_check=False)
    c = Client()
    ib = c.bo(0x1000)
    one, two = c.bo(0x1000), c.bo(0x1000)
    va = one.addr
    c.run(ib, pm4.write_data(va + 8, [1]))
    assert one.u32[2] == 1
    c.io(Request.GEM_VA, uapi.GemVaArgs(two.handle, VaOp.REPLACE, va, 0, 0x1000, RWX))
    c.run(ib, pm4.write_data(va + 8, [2]), offset=0x100)
    assert (one.u32[2], two.u32[2]) == (1, 2)
    # a read-only mapping faults on a write, and says so
    c.io(Request.GEM_VA, uapi.GemVaArgs(two.handle, VaOp.REPLACE, va, 0, 0x1000, uapi.VmFlags.READABLE))
    info = _run_guilty(c, ib, pm4.write_data(va + 8, [3]))
    assert info.code == "VM_FAULT" and "WRITE" in info.message and "permission missing" in info.message
    assert two.u32[2] == 2


def check_invalidation_races_dma(dev):
    """A TLB invalidation (CLEAR of the destination's upper half) while a 256 KiB DMA copy
    runs: the copy stops at the first page it takes away, or completes; nothing is written
    anywhere else, and the pages stay allocated until the job ends."""
    kmd = kmd_model.bind(dev, cs_check=False)
    if not kmd.info.has_dma:
        return
    c = Client()
    n = 256 << 10
    ib, src, dst = c.bo(0x1000), c.bo(n), c.bo(n)
    src.u32[:] = np.arange(n // 4, dtype=np.uint32)
    flag = ib.addr + 0x800
    seq = c.submit(c.ib(ib, pm4.wait_reg_mem(flag, 1, 1, "EQ") + pm4.dma_data(dst.addr, src.addr, n, cp_sync=1)))
    ib.u32[0x200] = 1
    dev.delay(2000)  # the copy is under way on the RTL (the model has run it already)
    half = dst.addr + n // 2
    c.io(Request.GEM_VA, uapi.GemVaArgs(0, VaOp.CLEAR, half, 0, n // 2, 0))
    try:
        c.wait(seq)
        fault = None
    except KmdError as e:
        fault = e.info
    phys = c.phys(dst)
    got = dev.mem[phys:phys + n].view("<u4")
    want = np.arange(n // 4, dtype=np.uint32)
    if fault is None:
        assert (got == want).all()
    else:
        assert fault.code == "VM_FAULT" and half <= fault.addr < dst.addr + n and fault.addr % 4096 == 0, fault
        k = (fault.addr - dst.addr) // 4
        assert (got[:n // 8] == want[:n // 8]).all()  # the first half: copied whole
        assert not got[k:].any()  # nothing from the first page it took away on
    assert kmd.stats["resets"] == (fault is not None)


CHECKS = [check_hostile_reach_faults, check_unmap_while_in_use, check_remap_to_another_bo,
          check_invalidation_races_dma]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_hostile_reach_with_checker_on_is_refused_first():
    """With the CS checker on the same packets never reach the CP (EFAULT at CS)."""
    kmd = kmd_model.bind(RefModel())
    victim, bad = Client(), Client()
    vbo, abo = victim.bo(0x1000), bad.bo(0x4000)
    for name, pkt in _hostile_packets(abo.addr + 0x2000).items():
        with pytest.raises(KmdError) as ei:
            bad.submit(bad.ib(abo, pkt(vbo.addr)))
        assert ei.value.errno == errno.EFAULT and "outside every mapping" in ei.value.message, (name, ei.value)
    assert kmd.stats["resets"] == 0
