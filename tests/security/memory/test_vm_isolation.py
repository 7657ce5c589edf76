"""Isolation by the MMU alone, modelled on igt's gem_ctx_isolation: the CS checker is off,
so a hostile client's packets reach the CP as it wrote them.

- Every packet that touches memory (WRITE_DATA, RELEASE_MEM, WAIT_REG_MEM, an IB fetch by
  a call or a CHAIN, naming the kernel's VMID 0 or another in its ignored VMID field, both
  sides of DMA_DATA) aimed at every kind of memory outside the client's mappings (another
  client's BO by its address and by its physical address, page tables, the ring, the IH
  ring, the write-back page, the shadow pool, the null page, beyond the VM), every pair on
  every backend, stops with a VM fault that names the address and the access; nothing
  lands in the 64 bytes at any target, nothing comes home from them (a DMA_DATA from a
  foreign page leaves its destination as it was); an innocent client's job queued behind
  each guilty one completes.
- A page unmapped while a job waits to use it faults when used, and its memory is not
  freed while the job may still reach it; a range remapped to another BO reaches the new
  one (the KMD invalidated the TLB); a TLB invalidation that races a running DMA copy
  stops it at the first page it takes away (on the RTL, where the copy is under way, it
  must), or after the copy, never elsewhere.

Each `check_*(dev)` runs on the reference model here and on the RTL under both simulators
(tests/cosim/test_rtl_drivers.py).
"""

from __future__ import annotations

import errno

import numpy as np
import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.core.kmd import Wb
from kmd_model.uapi import CtxOp, KmdError, Request, VaOp
from spec import pm4
from spec import vm as vm_spec
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client

EVIL = 0xBAD0_0BAD


def _hostile_packets(own: int) -> dict:
    """What a job can name memory with: packet name -> dwords aimed at address t."""
    return {
        "WRITE_DATA": lambda t: pm4.write_data(t, [EVIL, EVIL]),
        "RELEASE_MEM": lambda t: pm4.release_mem(t, EVIL, data_sel="DATA_64"),
        "WAIT_REG_MEM": lambda t: pm4.wait_reg_mem(t, 0, 0, "ALWAYS"),
        "INDIRECT_BUFFER": lambda t: pm4.indirect_buffer(t, 8),
        # an IB's VMID field is ignored: naming the kernel's (physical) VMID 0 or another
        # client's reaches nothing either; CHAIN fetches as a call does
        "INDIRECT_BUFFER naming VMID 0": lambda t: pm4.indirect_buffer(t, 8, vmid=0, valid=1),
        "INDIRECT_BUFFER naming VMID 15": lambda t: pm4.indirect_buffer(t, 8, vmid=15, valid=1),
        "INDIRECT_BUFFER CHAIN": lambda t: pm4.indirect_buffer(t, 8, chain=1),
        "DMA_DATA from": lambda t: pm4.dma_data(own, t, 64, cp_sync=1),
        "DMA_DATA to": lambda t: pm4.dma_data(t, own, 64, cp_sync=1),
    }


ACCESS = {"WRITE_DATA": "WRITE", "RELEASE_MEM": "WRITE", "WAIT_REG_MEM": "READ", "DMA_DATA from": "DMA_READ",
          "DMA_DATA to": "DMA_WRITE"}  # the rest, INDIRECT_BUFFERs: FETCH


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
    abo.u32[0x800:0xC00] = EVIL  # what a DMA_DATA to a foreign page would carry there
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
    mem32 = dev.mem.view("<u4")
    # the 64 bytes at each target (what the widest packet, DMA_DATA, would write), where they
    # are memory: nothing may turn EVIL there (the IH and kernel rings move on by themselves)
    windows = {k: slice(a >> 2, (a >> 2) + 16) for k, a in targets.items() if a + 64 <= len(dev.mem)}
    innocent = []
    for n, (name, which) in enumerate(pairs):
        t, pkt = targets[name], packets[which]
        before = {k: mem32[w].copy() for k, w in windows.items()}
        ctx = bad.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
        seq = bad.submit(bad.ib(abo, pkt(t)), ctx=ctx)
        # an innocent client's job queued behind the guilty one: in flight during the reset
        innocent.append(victim.submit(victim.ib(vbo, pm4.write_data(vbo.addr + 0x3000 + 4 * n, [n + 1]),
                                                offset=0x200 + 0x20 * (n % 64))))
        with pytest.raises(KmdError) as ei:
            bad.wait(seq, 200_000, ctx)
        assert ei.value.errno == errno.ECANCELED, ei.value
        info = ei.value.info
        assert info.code == "VM_FAULT" and info.addr == t, f"{which} at {name}: {info}"
        f = bad.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.VM_FAULT))
        assert (f.addr, f.vmid) == (t, bad.f.vm.vmid or f.vmid) and f.cause in ("INVALID", "RANGE"), f
        assert f.access == ACCESS.get(which, "FETCH"), (which, f)
        landed = [k for k, w in windows.items() if ((mem32[w] == EVIL) & (before[k] != EVIL)).any()]
        assert not landed, f"{which} at {name} reached {landed}"
        assert (abo.u32[0x800:0x810] == EVIL).all(), f"{which} at {name} brought {abo.u32[0x800:0x810]} home"
        assert victim.wait(innocent[-1]), f"the innocent job behind {which} at {name}"
    assert (vbo.u32[:0x40] == 0x5AFE).all() and (vbo.u32[0x40:0x80] == 0x5AFE).all()
    assert vbo.u32[0xC00:0xC00 + len(pairs)].tolist() == list(range(1, len(pairs) + 1))
    assert kmd.stats["vm_faults"] == len(pairs)
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (len(pairs), 0)  # each: queue 0's reset alone


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
    assert kmd.info.has_dma, "a check of the DMA engine, on a device without one"
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
    if dev.name != "model":  # the copy is under way: 2,000 of its 32,768+ cycles have gone by
        assert fault is not None and fault.addr == half, fault
    if fault is None:  # the model has run the job whole before the invalidation
        assert (got == want).all()
    else:
        assert fault.code == "VM_FAULT" and half <= fault.addr < dst.addr + n and fault.addr % 4096 == 0, fault
        k = (fault.addr - dst.addr) // 4
        assert (got[:n // 8] == want[:n // 8]).all()  # the first half: copied whole
        assert not got[k:].any()  # nothing from the first page it took away on
    # (a fault: queue 0's reset alone, CP_QUEUE_RESET.Q0 behind the aborted copy)
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (int(fault is not None), 0)


def check_close_while_dma_reads(dev):
    """The source of a running 256 KiB DMA copy unmapped and closed under it: the KMD
    invalidates at once (on the RTL the copy stops at the next burst it translates) but
    keeps the memory until the job has ended, so a BO made meanwhile lands elsewhere
    and the copy never reads it; the memory goes once the job is done."""
    kmd = kmd_model.bind(dev, cs_check=False)
    assert kmd.info.has_dma, "a check of the DMA engine, on a device without one"
    c, other = Client(), Client()
    n = 256 << 10
    ib, src, dst = c.bo(0x1000), c.bo(n), c.bo(n)
    want = np.arange(1, n // 4 + 1, dtype=np.uint32)
    src.u32[:] = want
    flag = ib.addr + 0x800
    seq = c.submit(c.ib(ib, pm4.wait_reg_mem(flag, 1, 1, "EQ") + pm4.dma_data(dst.addr, src.addr, n, cp_sync=1)))
    ib.u32[0x200] = 1
    dev.delay(2000)  # the copy is under way on the RTL (the model has run it already)
    phys, kbo = c.phys(src), c.f.handles[src.handle]
    c.io(Request.GEM_VA, uapi.GemVaArgs(src.handle, VaOp.UNMAP, src.addr))
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(src.handle))
    busy = c.io(Request.WAIT_CS, uapi.WaitCsArgs(c.ctx, seq, 0)).busy
    assert busy == (kbo in kmd.live_bos())  # kept exactly while the job may run
    late = other.bo(n)
    lp = other.phys(late)
    assert not busy or lp + n <= phys or lp >= phys + n, (hex(lp), hex(phys))  # not on the memory in use
    late.u32[:] = 0xEEEE_EEEE
    try:
        c.wait(seq)
        fault = None
    except KmdError as e:
        fault = e.info
    got = dev.mem[c.phys(dst):c.phys(dst) + n].view("<u4")
    assert ((got == want) | (got == 0)).all()  # the source's bytes or nothing: never the late BO's
    if dev.name != "model":
        assert busy and fault is not None and fault.code == "VM_FAULT" and "DMA_READ" in fault.message, fault
        # a burst's first byte (hardware.md: the first burst translated after the
        # invalidation, in the page the copy was reading), nothing copied from there on
        assert src.addr < fault.addr < src.addr + n and fault.addr % min(16 * kmd.info.bus_bytes, 4096) == 0, fault
        assert not got[(fault.addr - src.addr) // 4:].any()
    else:
        assert fault is None and (got == want).all()
    assert kbo not in kmd.live_bos()  # freed once the job is done


CHECKS = [check_hostile_reach_faults, check_unmap_while_in_use, check_remap_to_another_bo,
          check_invalidation_races_dma, check_close_while_dma_reads]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_hostile_reach_with_checker_on_is_refused_first():
    """With the CS checker on the same packets never reach the CP (EINVAL at CS)."""
    kmd = kmd_model.bind(RefModel())
    victim, bad = Client(), Client()
    vbo, abo = victim.bo(0x1000), bad.bo(0x4000)
    for name, pkt in _hostile_packets(abo.addr + 0x2000).items():
        with pytest.raises(KmdError) as ei:
            bad.submit(bad.ib(abo, pkt(vbo.addr)))
        assert ei.value.errno == errno.EINVAL and "outside every mapping" in ei.value.message, (name, ei.value)
    assert kmd.stats["resets"] == 0


def _take_page(c: Client, phys: int) -> np.ndarray | None:
    """A VRAM BO of `c`'s at physical page `phys`, if the allocator hands that page out (a
    hostile client allocates until it lands on memory it wants): its dwords as u64."""
    for _ in range(64):
        out = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.VRAM, 0))
        if c.f.handles[out.handle].gpu_addr == phys:
            return c.io(Request.GEM_MMAP, uapi.GemMmapArgs(out.handle)).view.view("<u8")
    return None


def test_a_closed_files_page_tables_outlive_its_queued_jobs():
    """A file closed while one of its jobs waits in the ring: a page table it made after that
    job's CS (a GEM_VA into a new 2 MiB range) is linked from the root the job runs with, so
    it stays allocated until the job ends. Freed at the close, its page went to another
    client, whose data the job's walk then read as PTEs: the job (an SDMA one, which no
    checker reads) wrote into a third client's BO through a PTE the second one wrote."""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel())
    holder, evil, victim = Client(), Client(), Client()
    hbo, ebo, vbo = holder.bo(), evil.bo(), victim.bo(0x1000)
    # the holder's job keeps the SDMA ring busy until released: the evil job waits behind it
    hold = holder.submit(sdma_ib(hbo, sdma.poll_regmem(hbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    far = 0x2000_0000  # a 2 MiB range with no page table yet
    evil.submit(sdma_ib(ebo, sdma.write_linear(far + 0x10, [EVIL])))
    q = evil.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.VRAM, 0))
    evil.io(Request.GEM_VA, uapi.GemVaArgs(q.handle, VaOp.MAP, far, 0, 0x1000, RWX))
    vm = evil.f.vm
    table = vm.tables[(vm.levels - 1, far >> vm_spec.leaf_bits(vm.levels - 2, vm.levels))]
    evil.f.close()
    freed_at_close = table.freed
    page = _take_page(holder, table.gpu_addr)
    if page is not None:  # (not reached with the fix: the page is not free)
        page[vm_spec.index(far, vm.levels - 1, vm.levels)] = vm_spec.pte(
            victim.phys(vbo), vm_spec.READABLE | vm_spec.WRITEABLE)
    hbo.u32[0x3000 // 4] = 1
    assert holder.wait(hold)
    kmd.service()
    assert int(vbo.u32[4]) != EVIL
    assert not freed_at_close  # the queued job's root still pointed at it
    assert kmd.stats["vm_faults"] == 1  # the evil job faulted on the entry its GEM_CLOSE cleared
    assert table.freed and not kmd.live_bos(evil.f)  # everything goes once the job has ended


def test_a_closed_files_bo_stays_while_any_of_its_jobs_may_reach_it():
    """The same close, on two rings: a BO mapped after an SDMA job's CS, in a range whose
    page table that job holds, is held by a later gfx job only. That job ends first; the BO
    must not be freed then, since its entries are still in the table the SDMA job walks
    (they went to the next client's BO, which the SDMA job then wrote)."""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel())
    holder, evil = Client(), Client()
    hbo, ebo = holder.bo(), evil.bo()
    # one job of the holder's keeps each ring busy until it is released
    hold_sdma = holder.submit(sdma_ib(hbo, sdma.poll_regmem(hbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    hold_gfx = holder.submit(holder.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x3800, 1, 1, "EQ"), 0x1000))
    near = ebo.addr + ebo.size + 0x10000  # beside its BO: the page table is there already
    evil.submit(sdma_ib(ebo, sdma.write_linear(near + 0x10, [EVIL])))
    q = evil.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0))
    evil.io(Request.GEM_VA, uapi.GemVaArgs(q.handle, VaOp.MAP, near, 0, 0x1000, RWX))
    qbo = evil.f.handles[q.handle]
    evil.submit(evil.ib(ebo, pm4.nop(2), 0x2000))  # a gfx job: it holds the new BO
    evil.f.close()
    hbo.u32[0x3800 // 4] = 1
    assert holder.wait(hold_gfx)  # the gfx job has ended; the SDMA job waits still
    freed_early = qbo.freed
    late = None
    for _ in range(64):  # the holder allocates until it lands on the BO's page, if it is free
        out = holder.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0))
        if holder.f.handles[out.handle].gpu_addr == qbo.gpu_addr:
            late = holder.io(Request.GEM_MMAP, uapi.GemMmapArgs(out.handle)).view.view("<u4")
            break
    hbo.u32[0x3000 // 4] = 1
    assert holder.wait(hold_sdma)
    kmd.service()
    assert late is None or int(late[4]) != EVIL
    assert not freed_early
    assert qbo.freed and not kmd.live_bos(evil.f)


def test_a_closed_files_tables_stay_while_its_own_job_runs_and_nothing_else_does():
    """Closing a file whose job still runs, with no other client's work in flight: a page
    table made after the job's CS (a GEM_VA into a new 2 MiB range) is linked from the
    root the job walks, so the job must hold it too until it ends."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)  # the held job is slow, not hung
    evil = Client()
    ebo = evil.bo()
    flag = evil.phys(ebo) + 0x3000
    seq = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ")))
    far = 0x2000_0000  # a 2 MiB range with no page table yet
    q = evil.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.VRAM, 0))
    evil.io(Request.GEM_VA, uapi.GemVaArgs(q.handle, VaOp.MAP, far, 0, 0x1000, RWX))
    vm = evil.f.vm
    table = vm.tables[(vm.levels - 1, far >> vm_spec.leaf_bits(vm.levels - 2, vm.levels))]
    assert [j.seq for j in kmd.sched.pending] == [seq] and not kmd.sdma_sched.pending
    evil.f.close()
    assert not table.freed  # the running job's root links it
    kmd.mem32[flag // 4] = 1  # the job goes on and ends
    assert kmd.wait_for(lambda: table.freed, 100_000)  # then it goes


def test_a_fault_on_each_cp_queue_at_once_is_each_clients_own_in_info_vm_fault():
    """Both CP queues stopped by VM faults at once, a client's job on queue 0, another's on
    queue 1 (gfx_high): VM_FAULT_STATUS, which the two queues share, holds queue 0's fault
    (docs/hardware.md), and the KMD took it as queue 1's too: queue 1's fault went to queue 0's
    VM with queue 1's address, so the first client read in INFO VM_FAULT the address the
    other client's job had faulted at (0x2b000000 for its own 0x2a000000). Queue 1's fault
    is its job's VMID's now, its access and cause unknown (as an SDMA fault's)."""
    from spec import sdma
    from kmd_model.uapi import CsChunkDep, HwIp, InfoArgs, InfoQuery
    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel(), cs_check=False, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bhigh = b.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC, priority=512)).ctx_id
    # each gfx job waits for a copy job held on a flag, so the scheduler puts both in the CP together
    ax = a.submit(sdma_ib(abo, sdma.poll_regmem(abo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=1), 0x1000))
    by = b.submit(sdma_ib(bbo, sdma.poll_regmem(bbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=1), 0x1000))
    ag = a.submit(CsChunkDep(HwIp.DMA, 0, a.ctx, ax), a.ib(abo, pm4.write_data(0x2A00_0000, [1])))
    bg = b.submit(CsChunkDep(HwIp.DMA, 0, b.ctx, by), b.ib(bbo, pm4.write_data(0x2B00_0000, [1])), ctx=bhigh)
    abo.u32[0x3000 // 4] = bbo.u32[0x3000 // 4] = 1
    for c, seq, ctx, addr in ((a, ag, a.ctx, 0x2A00_0000), (b, bg, bhigh, 0x2B00_0000)):
        with pytest.raises(KmdError) as ei:
            c.wait(seq, 1_000_000, ctx=ctx)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT" and ei.value.info.addr == addr
    # queue 1's message says why it has no access or cause: the shared status held queue 0's
    # fault (not the SDMA engine's words, which a CP queue's fault is not)
    assert "VM_FAULT_STATUS held CP queue 0's fault, no access or cause latched" in ei.value.info.message
    assert "SDMA" not in ei.value.info.message, ei.value.info.message
    fa = a.io(Request.INFO, InfoArgs(InfoQuery.VM_FAULT))
    fb = b.io(Request.INFO, InfoArgs(InfoQuery.VM_FAULT))
    assert (fa.addr, fa.vmid) == (0x2A00_0000, a.f.vm.vmid or fa.vmid) and fa.access == "WRITE", fa
    assert fb.addr == 0x2B00_0000 and fb.vmid not in (0, fa.vmid), fb


def test_a_job_run_unchecked_finds_no_other_clients_copies_in_the_shadow_pool():
    """The shadow pool is mapped executable in every VM (the CP fetches a job's checked
    copies under its VMID), and a retired job's copies stayed in it. With the checker
    switched off after bring-up (`params.cs_check = False`, as examples/gpu_error.py does)
    a client's INDIRECT_BUFFER packet may call into the pool: it ran another client's
    copy under its own VMID, and with a BO of its own mapped at the victim's addresses the
    copy's WRITE_DATA put the victim's data there. A retired job's copies are now cleared
    before their range goes back to the pool: the call finds zeros (a CP error)."""
    kmd = kmd_model.bind(RefModel())
    victim, spy = Client(), Client()
    vbo = victim.bo(0x2000)
    secret = [0x5EC12E70, 0x5EC12E71]
    seq = victim.submit(victim.ib(vbo, pm4.write_data(vbo.addr + 0x1000, secret)))
    job = victim.f.contexts[victim.ctx].jobs[seq]
    (copy, n), = job.ibs  # the ring's call of the checked copy, at its address in every VM
    assert kmd.kernel_va <= copy < kmd.kernel_va + kmd.kernel_va_size
    assert victim.wait(seq)
    assert vbo.u32[0x400:0x402].tolist() == secret
    kmd.params.cs_check = False
    # the spy's bait: a BO of its own where the victim's WRITE_DATA writes
    bait = spy.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x2000, 0, uapi.Domain.GTT, 0)).handle
    spy.io(Request.GEM_VA, uapi.GemVaArgs(bait, VaOp.MAP, vbo.addr, 0, 0x2000, RWX))
    view = spy.io(Request.GEM_MMAP, uapi.GemMmapArgs(bait)).view.view("<u4")
    ib = spy.bo(0x1000)
    seq = spy.submit(spy.ib(ib, pm4.indirect_buffer(copy, n)))
    try:
        spy.wait(seq)
    except KmdError as e:  # (zeros: no type-3 header)
        assert e.errno == errno.ECANCELED and e.info.code != "VM_FAULT", e
    assert not np.isin(view, secret).any(), "the victim's data reached the spy's BO"
    kmd.params.cs_check = True
    assert victim.wait(victim.run(vbo, pm4.write_data(vbo.addr + 0x1800, [1])))  # the checker runs on


def test_every_sdma_packet_at_every_foreign_target_faults():
    """The SDMA ring has no checker with it on or off: the MMU is its one layer. Every SDMA
    packet that names memory (COPY_LINEAR's source and its destination, WRITE_LINEAR,
    CONSTANT_FILL, FENCE, POLL_REGMEM) aimed at every kind of memory outside the client's
    mappings, the shadow pool at its address in every VM (executable only) among them,
    stops with a VM fault at that address: nothing lands at any target, nothing comes home,
    and an innocent client's SDMA job behind each completes. (check_hostile_reach_faults
    is the CP's matrix; the SDMA's was sampled by tests/kmd_sched/test_kmd_hostile.py.)"""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel())
    dev = kmd.dev
    victim, bad = Client(), Client()
    vbo = victim.bo(0x4000)
    vbo.u32[:] = 0x5AFE
    abo = bad.bo(0x4000)
    own = abo.addr + 0x2000
    abo.u32[0x800:0xC00] = EVIL
    targets = {
        "another client's BO, by its address": vbo.addr + 0x100,
        "another client's BO, by its physical address": victim.phys(vbo) + 0x100,
        "the other client's page directory": victim.f.vm.root.gpu_addr,
        "the kernel ring": kmd.ring.gpu_addr + 4 * ((kmd.ring.wptr + 256) & kmd.ring.mask),
        "the SDMA ring": kmd.sdma_ring.gpu_addr,
        "the write-back page": kmd.wb_addr(Wb.SCRATCH),
        "the shadow pool, physical": kmd.shadow.bo.gpu_addr + 0x1000,
        "the shadow pool, in every VM": kmd.kernel_va + 0x1000,
        "the null page": 0x40,
        "beyond the VM": 1 << vm_spec.va_bits(),
    }
    targets = {k: a & ~31 for k, a in targets.items()}
    packets = {
        "COPY_LINEAR from": lambda t: sdma.copy_linear(own, t, 64),
        "COPY_LINEAR to": lambda t: sdma.copy_linear(t, own, 64),
        "WRITE_LINEAR": lambda t: sdma.write_linear(t, [EVIL] * 4),
        "CONSTANT_FILL": lambda t: sdma.constant_fill(t, EVIL, 64),
        "FENCE": lambda t: sdma.fence(t, EVIL),
        "POLL_REGMEM": lambda t: sdma.poll_regmem(t, 0, 0, "ALWAYS"),
    }
    mem32 = dev.mem.view("<u4")
    windows = {k: slice(a >> 2, (a >> 2) + 16) for k, a in targets.items()
               if a + 64 <= len(dev.mem) and not k.endswith("in every VM")}
    n = 0
    for name, t in targets.items():
        for which, pkt in packets.items():
            before = {k: mem32[w].copy() for k, w in windows.items()}
            ctx = bad.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
            seq = bad.submit(sdma_ib(abo, pkt(t), 0x200), ctx=ctx)
            inn = victim.submit(sdma_ib(vbo, sdma.write_linear(vbo.addr + 0x3000 + 4 * n, [n + 1]), 0x3800))
            with pytest.raises(KmdError) as ei:
                bad.wait(seq, 200_000, ctx)
            assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT", (which, name, ei.value)
            assert ei.value.info.addr == t, (which, name, ei.value.info)
            landed = [k for k, w in windows.items() if ((mem32[w] == EVIL) & (before[k] != EVIL)).any()]
            assert not landed, f"{which} at {name} reached {landed}"
            assert (abo.u32[0x800:0x810] == EVIL).all(), f"{which} at {name} brought {abo.u32[0x800:0x810]} home"
            assert victim.wait(inn), f"the innocent SDMA job behind {which} at {name}"
            bad.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, ctx))
            n += 1
    assert (vbo.u32[:0xC00] == 0x5AFE).all()
    assert vbo.u32[0xC00:0xC00 + n].tolist() == list(range(1, n + 1))
    assert kmd.stats["sdma_errors"] == n and kmd.stats["resets"] == 0
