"""The KMD's VMID manager and TLB flushes (kmd_model/mm/vm.py; split by concept from
test_kmd_vm.py, which has GEM_VA and the page tables): grab, reuse, steal with a TLB flush,
waiting when every VMID is busy (and a closed waiter keeping no one waiting), a closed
file's VM keeping its VMID while its jobs run, the root's whole address programmed at a
grab, unmaps invalidating one page by its address or many by the whole VMID, flushes that
wait for the MMU's acknowledge, and an MMU that loses or never acknowledges a flush.
"""

from __future__ import annotations

import errno
import re

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import Request, VaOp
from spec import pm4
from spec import vm as vm_spec
from testbench.refmodel import RefModel

from ..test_kmd_ioctl import Client, expect
from .test_kmd_vm import _va


class _TlbSpy(RefModel):
    """The model, with a record of the KMD's TLB invalidation requests (VMID mask, one page
    or all) and an MMU that acknowledges `ack_after` reads of VM_INVALIDATE_ACK late, as the
    RTL's MMU answers after some cycles (the model's at once)."""

    def __init__(self, ack_after: int = 0, **kw):
        super().__init__(**kw)
        self.ack_after, self.requests, self.ack_reads, self._late = ack_after, [], [], 0

    def mmio_write32(self, offset, value):
        if offset == regs.VM_INVALIDATE_REQ.addr():
            r = regs.VM_INVALIDATE_REQ.decode(value)
            page = self.mmio_read32(regs.VM_INVALIDATE_ADDR_LO.addr()) if not r["ALL_ADDR"] else None
            self.requests.append((r["PER_VMID"], page))
            self.ack_reads.append(0)
            self._late = self.ack_after
        super().mmio_write32(offset, value)

    def mmio_read32(self, offset):
        v = super().mmio_read32(offset)
        if offset == regs.VM_INVALIDATE_ACK.addr() and self.ack_reads:
            self.ack_reads[-1] += 1
            if self._late:
                self._late -= 1
                return 0
        return v


class _LostFlush(RefModel):
    """The model, with an MMU that (while `lost`) drops TLB invalidation requests and never
    acknowledges them: its TLB keeps every entry."""

    lost = False

    def mmio_write32(self, offset, value):
        if self.lost and offset == regs.VM_INVALIDATE_REQ.addr():
            return
        super().mmio_write32(offset, value)

    def mmio_read32(self, offset):
        v = super().mmio_read32(offset)
        return 0 if self.lost and offset == regs.VM_INVALIDATE_ACK.addr() else v


def test_jobs_wait_for_a_free_vmid():
    """With every VMID held by a running job, a 16th VM's job waits in the queue until one
    of them ends, then runs with that VMID."""
    dev = RefModel()
    kmd = kmd_model.bind(dev, cs_check=False)
    clients = [Client() for _ in range(16)]
    bos = [c.bo(0x1000) for c in clients]
    seqs = [c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ"))) for c, bo in zip(clients[:15], bos)]
    last = clients[15].submit(clients[15].ib(bos[15], pm4.write_data(bos[15].addr + 0x900, [5])))
    assert len(kmd.sched.queue) == 1 and clients[15].f.vm.vmid is None  # no VMID is idle
    first = clients[0].f.vm.vmid
    bos[0].u32[0x200] = 1  # the first job ends: its VMID is idle
    assert clients[0].wait(seqs[0])
    kmd.service()
    assert not kmd.sched.queue and clients[15].f.vm.vmid == first and clients[0].f.vm.vmid is None
    for bo in bos[1:15]:
        bo.u32[0x200] = 1
    assert all(c.wait(s) for c, s in zip(clients, seqs))
    assert clients[15].wait(last) and bos[15].u32[0x240] == 5


def test_a_vmid_is_not_stolen_while_an_older_job_on_another_ring_runs_with_it():
    """A VM's SDMA job polls while its later gfx job ends: the VMID is still in use (the
    SDMA job runs with it), so a 16th VM must not take it. It did (the VMID counted only
    its latest job): the VMID was reprogrammed with the thief's page tables under the
    running job, which then ran in the thief's address space and faulted (its owner
    blamed, its queue reset), or read and wrote the thief's pages at its own addresses."""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel())
    x = Client()
    xbo, out = x.bo(), x.bo(0x1000)
    slow = x.submit(sdma_ib(xbo, sdma.poll_regmem(xbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4)
                            + sdma.write_linear(out.addr + 0x10, [0x600D])))
    assert x.wait(x.submit(x.ib(xbo, pm4.nop(2), 0x1000)))  # its latest job, on gfx, has ended
    vmid = x.f.vm.vmid
    others = [Client() for _ in range(len(kmd.vmids.ids) - 1)]  # every other VMID taken, later
    for c in others:
        c.run(c.bo(0x1000), pm4.nop(2))
    thief = Client()
    tbo = thief.bo(0x1000)
    thief.run(tbo, pm4.write_data(tbo.addr + 0x10, [1]))
    assert thief.f.vm.vmid != vmid and x.f.vm.vmid == vmid
    xbo.u32[0x3000 // 4] = 1
    assert x.wait(slow) and out.u32[4] == 0x600D
    assert kmd.stats["vm_faults"] == 0 and not kmd.recovery_log


def test_unmap_of_many_pages_invalidates_every_page():
    """The TLB holds translations of both pages of a 2-page BO; after GEM_VA UNMAP a job
    that writes to the second page faults (the invalidation covered the whole range, not
    its first page) and the BO's memory is untouched."""
    from tests.security.memory.test_vm_isolation import _run_guilty

    kmd_model.bind(RefModel(), cs_check=False)
    c = Client()
    ib, two = c.bo(0x1000), c.bo(0x2000)
    c.run(ib, pm4.write_data(two.addr + 8, [1]) + pm4.write_data(two.addr + 0x1008, [2]))  # both in the TLB
    phys = c.phys(two)
    c.io(Request.GEM_VA, uapi.GemVaArgs(two.handle, VaOp.UNMAP, two.addr, 0, 0x2000, 0))
    for page in (0, 1):
        info = _run_guilty(c, ib, pm4.write_data(two.addr + page * 0x1000 + 8, [3]))
        assert info.code == "VM_FAULT" and info.addr == two.addr + page * 0x1000 + 8, info
    got = c.f.kmd.dev.mem[phys:phys + 0x2000].view("<u4")
    assert (int(got[2]), int(got[0x402])) == (1, 2)


def test_unmap_invalidates_one_page_by_its_address_and_more_pages_by_the_whole_vmid():
    """The invalidation request names what went: GEM_VA UNMAP of one page asks the MMU for
    that page of the file's VMID (its address, not its size or 0), of two pages for the whole
    VMID (the MMU takes one address or all); a VMID not yet used needs none."""
    dev = _TlbSpy()
    kmd_model.bind(dev)
    c = Client()
    ib, one, two = c.bo(0x1000), c.bo(0x1000), c.bo(0x2000)
    quiet = c.bo(0x1000)
    _va(c, quiet.handle, VaOp.UNMAP, quiet.addr)
    assert dev.requests == []  # no VMID yet: nothing to invalidate
    c.run(ib, pm4.write_data(one.addr, [1]))
    vmid = c.f.vm.vmid
    dev.requests.clear()
    _va(c, one.handle, VaOp.UNMAP, one.addr)
    assert dev.requests == [(1 << vmid, one.addr >> vm_spec.PAGE_SHIFT)]
    dev.requests.clear()
    _va(c, two.handle, VaOp.UNMAP, two.addr, 0x2000)
    assert dev.requests == [(1 << vmid, None)]


@pytest.mark.parametrize("late", [0, 3])
def test_a_tlb_flush_waits_for_the_mmus_acknowledge(late):
    """The KMD reads VM_INVALIDATE_ACK until the MMU sets its VMID's bit, however many reads
    that takes (the RTL's MMU answers cycles later), and only then goes on; an MMU that never
    answers is an EIO naming the VMID after hw_timeout cycles."""
    dev = _TlbSpy(ack_after=late)
    kmd = kmd_model.bind(dev)
    c = Client()
    ib, bo = c.bo(0x1000), c.bo(0x1000)
    c.run(ib, pm4.write_data(bo.addr, [1]))
    _va(c, bo.handle, VaOp.UNMAP, bo.addr)
    assert dev.requests and dev.ack_reads == [late + 1] * len(dev.requests)
    dev.ack_after = 1 << 30  # from now on the MMU never answers
    bo2 = c.bo(0x1000)
    expect(errno.EIO, f"GEM_VA: TLB flush of VMID {c.f.vm.vmid}: no acknowledge after {kmd.params.hw_timeout} cycles",
           _va, c, bo2.handle, VaOp.UNMAP, bo2.addr)


def test_a_vmid_grab_programs_the_roots_whole_address():
    """VM_CONTEXT_PT_BASE_LO/HI carry all of the root table's address (48 bits, split at bit
    32), though every device built here keeps page tables in VRAM below 4 GiB: a VM whose
    root lies above it (a larger VRAM) reaches the MMU whole."""
    import types

    kmd = kmd_model.bind(dev := RefModel())
    root = 0x8765_4321_F000
    vm = types.SimpleNamespace(vmid=None, root=types.SimpleNamespace(gpu_addr=root))
    n = kmd.vmids.grab(vm)
    read = lambda reg: dev.mmio_read32(reg.addr(n))  # noqa: E731
    assert (read(regs.VM_CONTEXT_PT_BASE_HI), read(regs.VM_CONTEXT_PT_BASE_LO)) == (root >> 32, root & 0xFFFF_FFFF)
    assert regs.VM_CONTEXT_CNTL.ENABLE.get(read(regs.VM_CONTEXT_CNTL))


def test_no_job_runs_with_a_vmid_whose_tlb_flush_was_not_acknowledged():
    """A VMID stolen from a victim's VM is invalidated before the thief's job runs with it.
    When that invalidation was not acknowledged the grab raised EIO (out of the thief's
    CS, whose job was queued all the same) but the thief's VM kept the VMID: its next jobs
    ran with the victim's TLB entries and wrote the victim's memory at the victim's VA.
    Now the VMID is given to no VM until a flush of it is acknowledged: the job waits, as
    for a busy VMID, and runs with its own translations once the MMU answers."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000)
    victim = Client()
    vbo = victim.bo(0x1000)
    victim.run(vbo, pm4.write_data(vbo.addr + 0x100, [1]))  # its translation is in the TLB
    for _ in range(len(kmd.vmids.ids) - 1):  # every other VMID owned, each used after the victim's
        o = Client()
        o.run(o.bo(0x1000), pm4.nop(2))
    thief = Client()
    ib = thief.bo(0x1000)
    own = thief.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    _va(thief, own, VaOp.MAP, vbo.addr)  # its own page at the victim's VA
    dev.lost = True
    seq = thief.submit(thief.ib(ib, pm4.write_data(vbo.addr + 0x100, [0xBAD])))  # the grab steals the victim's
    assert thief.f.vm.vmid is None and victim.f.vm.vmid is None
    assert kmd.kmd_stats()["tlb_flush_failures"] == 1  # the CS's one grab
    expect(errno.ETIME, f"WAIT_CS: seqno {seq:#x} of context {thief.ctx} not signalled after 10000 cycles",
           thief.wait, seq, 10_000)
    assert vbo.u32[0x40] == 1  # the job waits: it never ran with the victim's entries
    assert kmd.kmd_stats()["tlb_flush_failures"] > 1  # (each grab tried since failed too, each counted)
    dev.lost = False
    assert thief.wait(seq)
    assert vbo.u32[0x40] == 1
    assert thief.f.handles[own].gpu_addr != victim.phys(vbo)
    assert int(kmd.dev.mem[thief.f.handles[own].gpu_addr + 0x100]) == 0xAD  # (its own page, little-endian)


def test_a_vm_whose_unmap_flush_was_not_acknowledged_flushes_again_before_its_next_job():
    """An UNMAP whose invalidation is not acknowledged is EIO, and the entry is gone from
    the table but maybe not from the TLB. The VM kept its VMID: its next job, writing a BO
    mapped since at the same VA, wrote the unmapped BO through the old entry. Now the VM
    gives up its VMID, and the next grab flushes first."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000)
    c = Client()
    ib, old = c.bo(0x1000), c.bo(0x1000)
    c.run(ib, pm4.write_data(old.addr, [1]))  # old's translation is in the TLB
    dev.lost = True
    vmid = c.f.vm.vmid
    expect(errno.EIO, f"GEM_VA: TLB flush of VMID {vmid}: no acknowledge after 2000 cycles",
           _va, c, old.handle, VaOp.UNMAP, old.addr)
    assert c.f.vm.vmid is None and kmd.kmd_stats()["tlb_flush_failures"] == 1
    assert kmd.vmids.ids[vmid - 1].owner is None  # (its VMID is free, not still lent to the VM)
    dev.lost = False
    new = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    _va(c, new, VaOp.MAP, old.addr)
    c.run(ib, pm4.write_data(old.addr, [2]), 0x100)
    assert old.u32[0] == 1 and int(kmd.dev.mem[c.f.handles[new].gpu_addr]) == 2


def test_an_mmu_that_never_acknowledges_a_flush_wedges_the_device_after_a_job_timeout():
    """A job that cannot get a VMID because the MMU acknowledges no invalidation waited
    forever (no job timer runs for a job not on the hardware, and a soft reset leaves the
    MMU as it is), each scheduling pass paying `hw_timeout` for the flush. Now, once jobs
    have waited on such flushes for `job_timeout` cycles, the device is wedged: the job, and
    every later CS and GEM_CREATE, fail with EIO naming why, and what the file frees then is
    quarantined (a TLB that takes no invalidation may still map it: never handed out again)."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000, job_timeout=50_000)
    c = Client()
    ib = c.bo(0x1000)
    dev.lost = True  # from bring-up on: the first grab of this VM flushes, and never hears back
    seq = c.submit(c.ib(ib, pm4.write_data(ib.addr + 0x100, [1])))
    assert c.f.vm.vmid is None and not kmd.wedged
    t0 = dev.now()
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(seq, 10_000_000)
    assert ei.value.errno == errno.EIO and kmd.wedged
    assert re.fullmatch(r"WAIT_CS: the MMU acknowledged no TLB flush for \d+ cycles, jobs waiting for a VMID "
                        r"\(TLB flush of VMID \d+: no acknowledge after 2000 cycles\)", ei.value.message), ei.value.message
    assert 50_000 <= dev.now() - t0 < 200_000  # a job timeout and a few passes, not the 10 M the wait allowed
    assert ib.u32[0x40] == 0  # it never ran
    expect(errno.EIO, f"CS: {kmd.wedged}", c.submit, c.ib(ib, pm4.nop(2), 0x100))
    expect(errno.EIO, f"GEM_CREATE: {kmd.wedged}", c.io, Request.GEM_CREATE, uapi.GemCreateArgs(0x1000))
    used = {d: h.used for d, h in kmd.bo.heaps.items()}
    c.f.close()
    assert not kmd.live_bos(c.f) and {d: h.used for d, h in kmd.bo.heaps.items()} == used
    assert kmd.bo.quarantined == 0x1000 + sum(b.size for b in c.f.vm.tables.values())


def test_a_closed_files_vm_keeps_its_vmid_while_its_jobs_run():
    """A file closed while its job is in the ring: the job runs with the VM's VMID, and the
    VM says so (Vm's repr, the VMID log lines) until the job ends; then the VMID is given
    back. It said VMID None from the close on, and a job of it queued then took a new one."""
    kmd = kmd_model.bind(RefModel())
    h, c = Client(), Client()
    hbo, cbo = h.bo(0x1000), c.bo(0x1000)
    held = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x800, 1, 1, "EQ")))
    c.submit(c.ib(cbo, pm4.write_data(cbo.addr + 0x800, [1])))
    vm = c.f.vm
    job = next(j for j in kmd.sched.pending if j.vm is vm)  # in the ring behind the held job
    assert job.vmid and vm.vmid == job.vmid
    c.f.close()
    assert vm.closed and vm.vmid == job.vmid and repr(vm).endswith(f"VMID {job.vmid})")
    assert kmd.vmids.ids[job.vmid - 1].owner is vm  # (no other VM gets it: a job runs with it)
    hbo.u32[0x200] = 1
    assert h.wait(held) and h.wait(h.submit(h.ib(hbo, pm4.nop(6), offset=0x100)))  # c's job ran before
    assert job.finished and job.error is None and vm.vmid is None
    assert [v.n for v in kmd.vmids.ids if v.owner is not None] == [h.f.vm.vmid]


def test_a_closed_waiter_keeps_no_one_waiting_and_the_drain_ends_with_the_last_waiter():
    """VMs that find every VMID busy wait first come, first served, the least recently used
    busy VMID drained for the first (kmd_model/mm/vmid.py). A waiter whose file is closed
    keeps no one waiting: the next VM is first at once, has the least recently used VMID
    drained for it and gets it as soon as that VMID's job ends (not a job timeout later, when
    the closed waiter would have expired). Once the last waiter has a VMID, none is drained
    any more (the next waiter picks its own), whichever VMID it got."""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30)
    vmids = kmd.vmids
    hs = [Client() for _ in vmids.ids]
    bos = [h.bo(0x1000) for h in hs]
    # hs[1..14] poll on the gfx ring in that order, then hs[0] on the SDMA ring: every VMID
    # busy, hs[1]'s the least recently used
    seqs = {k: hs[k].submit(hs[k].ib(bos[k], pm4.wait_reg_mem(bos[k].addr + 0x800, 1, 1, "EQ"))) for k in range(1, 15)}
    seqs[0] = hs[0].submit(sdma_ib(bos[0], sdma.poll_regmem(bos[0].addr + 0x800, 1, 0xFFFF_FFFF, "EQ", interval=1)))
    assert all(h.f.vm.vmid is not None for h in hs)

    def waiter():
        w = Client()
        wb = w.bo(0x1000)
        return w, wb, w.submit(sdma_ib(wb, sdma.write_linear(wb.addr + 0x800, [0x77])))

    # a VM that asked once, then closed its file (a close waits until the file's jobs are in
    # a ring or done, Kmd.flush_file: here it has none left queued, as when they were cancelled)
    w1 = Client()
    assert vmids.grab(w1.f.vm) is None
    assert list(vmids.waiting) == [w1.f.vm] and vmids.drain == hs[1].f.vm.vmid
    w1.f.close()
    w2, w2b, w2s = waiter()
    # the closed waiter is forgotten: the new one is first, with a VMID drained for it
    assert list(vmids.waiting) == [w2.f.vm] and vmids.drain == hs[1].f.vm.vmid
    drained = vmids.drain
    bos[1].u32[0x200] = 1  # the drained VMID's job ends: it goes to the first waiter at once
    assert hs[1].wait(seqs[1])
    kmd.service()
    assert w2.f.vm.vmid == drained and not vmids.waiting and vmids.drain is None
    w3, w3b, w3s = waiter()
    assert list(vmids.waiting) == [w3.f.vm] and vmids.drain == hs[2].f.vm.vmid
    bos[0].u32[0x200] = 1  # the SDMA poll ends: hs[0]'s VMID (and w2's, its job done) go idle
    assert hs[0].wait(seqs[0]) and w2.wait(w2s) and w2b.u32[0x200] == 0x77
    kmd.service()
    # w3 took an idle VMID, not the drained one: nobody waits, so nothing is drained any more
    assert w3.f.vm.vmid not in (None, hs[2].f.vm.vmid) and not vmids.waiting and vmids.drain is None
    assert w3.wait(w3s) and w3b.u32[0x200] == 0x77
    for k in range(2, 15):
        bos[k].u32[0x200] = 1
    assert all(hs[k].wait(seqs[k]) for k in range(2, 15))
    assert (kmd.stats["job_timeouts"], kmd.stats["resets"], kmd.stats["queue_resets"]) == (0, 0, 0)


def test_a_waiter_that_asks_again_after_it_expired_goes_to_the_back(monkeypatch):
    """Waiters are served first come, first served; one that has not asked for a job
    timeout is forgotten (its jobs cancelled or held elsewhere). Those behind the first are
    swept only once a job timeout (VmidManager._expire), so a waiter may ask again after it
    expired and before the sweep found it: it goes to the back, behind those that kept
    asking, not back to the place it had lost; the sweep forgets those that have not asked
    for more than a job timeout."""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel(), job_timeout=1000)
    vmids = kmd.vmids
    hs = [Client() for _ in vmids.ids]
    bos = [h.bo(0x1000) for h in hs]
    for k in range(1, 15):  # (every VMID busy: polls that end only when the test says)
        hs[k].submit(hs[k].ib(bos[k], pm4.wait_reg_mem(bos[k].addr + 0x800, 1, 1, "EQ")))
    hs[0].submit(sdma_ib(bos[0], sdma.poll_regmem(bos[0].addr + 0x800, 1, 0xFFFF_FFFF, "EQ", interval=1)))
    assert all(h.f.vm.vmid is not None for h in hs)
    a, b, c = (Client().f.vm for _ in range(3))
    now = [10_000]
    monkeypatch.setattr(kmd.dev, "now", lambda: now[0])  # (the asks' times, and no job timer)

    def ask(*vms, at):
        now[0] = at
        for vm in vms:
            assert vmids.grab(vm) is None

    ask(a, b, c, at=10_000)  # (b's ask sweeps: none expired)
    ask(a, b, c, at=10_600)
    ask(a, c, at=11_001)  # (a's ask sweeps again: none expired; the next sweep is a timeout away)
    assert list(vmids.waiting) == [a, b, c]
    ask(a, c, at=11_700)  # b has not asked for more than a job timeout: expired, not swept yet
    ask(b, at=11_700)
    assert list(vmids.waiting) == [a, c, b]
    # the sweep a job timeout after the last forgets those that have not asked for more than
    # a job timeout: b, at exactly one, is kept; a job timeout later it is gone
    ask(a, c, at=12_700)
    assert list(vmids.waiting) == [a, c, b]
    ask(a, c, at=13_400)
    ask(c, at=13_701)  # (a asks no more)
    assert list(vmids.waiting) == [a, c]
    ask(c, at=14_300)
    assert list(vmids.waiting) == [a, c]
    ask(c, at=14_500)  # (a, the first, has not asked for more than a job timeout: forgotten at this ask)
    assert list(vmids.waiting) == [c]
