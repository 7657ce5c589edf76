"""VMIDs shared by the rings' jobs (kmd_model/mm/vmid.py through the scheduler): files that
keep every VMID busy do not keep another file's job out, a drained VMID's waiting job is not
taken for stuck (and a hung one is spared once, then reset), VMs waiting for a VMID are
served first come, first served. Reference-model backend."""

from __future__ import annotations

import pytest

import kmd_model
from kmd_model import uapi
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import query, sdma_ib


def test_files_that_keep_every_vmid_busy_do_not_keep_another_files_job_out():
    """A VMID is idle only when no job runs with it: 15 files (one for each VMID) that each
    keep a job in a ring at every moment, submitting the next before the last ends (none
    hanging, no reset, no ban), kept every VMID busy, and a 16th file's copy never ran (100
    rounds of their jobs in a probe). A VM whose job finds no idle VMID now waits first come,
    first served, and the least recently used VMID is drained for it: its owner starts no new
    job with it until the VMID has gone to the waiter."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    hs = [Client() for _ in kmd.vmids.ids]
    bos = [h.bo(0x10000) for h in hs]
    made = [0] * len(hs)
    jobs: list[list] = [[] for _ in hs]

    def submit(i: int) -> None:
        k = made[i]
        made[i] += 1
        flag = 0x8000 + 4 * k
        jobs[i].append((hs[i].submit(sdma_ib(bos[i], sdma.poll_regmem(bos[i].addr + flag, 1, 0xFFFF_FFFF, "EQ",
                                                                       interval=1), 0x40 * k)), flag))

    for i in range(len(hs)):
        submit(i)
    assert all(v.owner is not None and not kmd.vmids._idle(v) for v in kmd.vmids.ids)
    v = Client()
    vb = v.bo(0x1000)
    mine = v.submit(sdma_ib(vb, sdma.write_linear(vb.addr + 0x800, [0x77])))
    assert vb.u32[0x200] == 0 and kmd.sdma_sched.has_queued()  # (every VMID busy: it waits)
    vmids = kmd.vmids
    drained = vmids.ids[vmids.drain - 1].owner
    assert list(vmids.waiting) == [v.f.vm] and drained is not None
    # the drained VMID's owner starts no new job with it; a job a reset put back keeps it
    assert vmids.grab(drained) is None and vmids.grab(drained, resubmitted=True) == vmids.drain
    for _ in range(3):
        if vb.u32[0x200] == 0x77:
            break
        for i in range(len(hs)):  # each file: its next job in first, then its oldest let go
            submit(i)
            seq, flag = jobs[i].pop(0)
            bos[i].u32[flag // 4] = 1
            assert hs[i].wait(seq)
    assert v.wait(mine) and vb.u32[0x200] == 0x77, "the 16th file's job still waits for a VMID"
    for i, h in enumerate(hs):  # (every file's jobs still run: the drained one's waited its turn)
        for seq, flag in jobs[i]:
            bos[i].u32[flag // 4] = 1
            assert h.wait(seq)
    assert (kmd.stats["job_timeouts"], kmd.stats["resets"], kmd.stats["queue_resets"]) == (0, 0, 0)


def test_a_job_waiting_for_its_own_vms_later_job_is_not_reset_because_its_vmid_is_drained():
    """A gfx job of file A waits (WAIT_REG_MEM) for a flag A's own copy job sets next (the
    UMD's wait_mem on one queue, a write on another). Other files' small jobs queued behind
    it in the gfx ring take every other VMID, and a 16th file's job waits: the least recently
    used busy VMID, A's, is drained, so A's copy job waited for A's VMID to go idle, which it
    never did while A's gfx job waited for the copy. The job timer reset A's innocent job with
    TIMEOUT, its context guilty, a hang towards its file's ban (`file_ban_after_hangs` of them ban it)
    for nothing but other files' ordinary jobs. Now the timer lifts the drain (its job of the VM
    held back by it) and the drain moves to another VMID; the waiter still gets one."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    a = Client()
    abo = a.bo(0x4000)
    flag = abo.addr + 0x2000
    g = a.submit(a.ib(abo, pm4.wait_reg_mem(flag, 1, 0xFFFF_FFFF, "EQ") + pm4.write_data(abo.addr + 0x2004, [7])))
    others = [Client() for _ in range(len(kmd.vmids.ids) - 1)]
    jobs = []
    for c in others:
        b = c.bo(0x1000)
        jobs.append((c, b, c.submit(c.ib(b, pm4.write_data(b.addr + 0x800, [0x55])))))
    w = Client()
    wb = w.bo(0x1000)
    ws = w.submit(w.ib(wb, pm4.write_data(wb.addr + 0x800, [0x66])))
    vmids = kmd.vmids
    assert vmids.drain == a.f.vm.vmid and list(vmids.waiting) == [w.f.vm]  # (A's is the least recently used)
    s = a.submit(sdma_ib(abo, sdma.write_linear(flag, [1])))
    assert a.wait(g, 200_000) and a.wait(s) and abo.u32[0x2004 // 4] == 7
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0)
    assert query(a).reset_status == uapi.ResetStatus.NO_RESET and a.f.hangs == 0
    assert a.f.vm.vmid in vmids.spared  # (not drained again for this waiter)
    assert w.wait(ws) and wb.u32[0x200] == 0x66, "the waiting file's job never got a VMID"
    for c, b, seq in jobs:
        assert c.wait(seq) and b.u32[0x200] == 0x55


@pytest.mark.parametrize("held", [True, False])
def test_a_hung_job_whose_vmid_is_drained_is_spared_once_then_reset(held):
    """The other side of lifting the drain: a job that hangs for good (its poll never holds),
    its VMID drained and its file's next job held back, gets the drain lifted once (its next
    job goes, the timer starts again) and is then reset at the next look, its context guilty,
    one job timeout counted; the VMID is not drained again for that waiter, who runs. With no
    job of its VM held back by the drain, nothing is lifted: reset at job_timeout * 9/8."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    h = Client()
    hbo = h.bo(0x4000)
    t0 = kmd.dev.now()
    g = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x2000, 1, 0xFFFF_FFFF, "EQ")))
    others = [Client() for _ in range(len(kmd.vmids.ids) - 1)]
    for c in others:
        b = c.bo(0x1000)
        c.submit(c.ib(b, pm4.write_data(b.addr + 0x800, [0x55])))
    w = Client()
    wb = w.bo(0x1000)
    ws = w.submit(w.ib(wb, pm4.write_data(wb.addr + 0x800, [0x66])))
    mine = h.f.vm.vmid
    assert kmd.vmids.drain == mine
    if held:
        s = h.submit(sdma_ib(hbo, sdma.write_linear(hbo.addr + 0x2100, [1])))  # (sets nothing the poll reads)
    with pytest.raises(uapi.KmdError) as ei:
        h.wait(g, 500_000)
    assert ei.value.info.code == "TIMEOUT" and ei.value.info.ctx_id == h.ctx
    took = kmd.dev.now() - t0
    assert kmd.stats["job_timeouts"] == 1 and h.f.hangs == 1
    if held:
        assert h.wait(s) and hbo.u32[0x2100 // 4] == 1  # (the held job went when the drain was lifted)
        assert kmd.vmids.spared == {mine}
        assert 2 * 20_000 <= took < 2 * 20_000 + 20_000 // 8 + 5_000  # spared once: one job timeout later
    else:
        assert kmd.vmids.spared == set() and took < 20_000 + 20_000 // 8 + 5_000
    assert w.wait(ws) and wb.u32[0x200] == 0x66


@pytest.mark.parametrize("order", ["gfx_first", "sdma_first"])
def test_vms_waiting_for_a_vmid_are_served_first_come_first_served(order):
    """Two files find every VMID busy, one after the other: the drained VMID goes to the one
    that asked first, whichever ring its job is on and whichever job the driver tries first
    when the VMID goes idle; the other keeps its place and waits on. A waiter is forgotten
    only when it has a VMID, is closed, or has not asked for a job timeout: one that keeps
    asking keeps its place however long the device has been up."""
    kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=20_000)
    hs = [Client() for _ in kmd.vmids.ids]
    bos = [h.bo(0x10000) for h in hs]
    seqs = [h.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=1)))
            for h, bo in zip(hs, bos)]
    kmd.dev.delay(12_000)  # (past half a job timeout, short of a timeout of the jobs that hold the VMIDs)
    first, second = Client(), Client()
    fb, sb = first.bo(0x1000), second.bo(0x1000)
    # each asker's job waits for its flag, then writes: its VMID stays busy until the test lets it go
    gfx = lambda c, b: c.submit(c.ib(b, pm4.wait_reg_mem(b.addr + 0x400, 1, 1, "EQ")  # noqa: E731
                                     + pm4.write_data(b.addr + 0x800, [0x77]), 0x100))
    dma = lambda c, b: c.submit(sdma_ib(b, sdma.poll_regmem(b.addr + 0x400, 1, 1, "EQ", interval=1)  # noqa: E731
                                        + sdma.write_linear(b.addr + 0x800, [0x77])))
    # the first asker's job on the ring the driver tries second
    f_seq = (dma if order == "gfx_first" else gfx)(first, fb)
    kmd.dev.delay(2_000)
    s_seq = (gfx if order == "gfx_first" else dma)(second, sb)
    vmids = kmd.vmids
    assert list(vmids.waiting) == [first.f.vm, second.f.vm] and vmids.drain is not None
    drained = vmids.drain
    i = next(k for k, h in enumerate(hs) if h.f.vm.vmid == drained)
    given = []  # (VM, VMID) of each grab that gave one, in order
    grab = vmids.grab

    def recorded(vm, *a, **kw):
        n = grab(vm, *a, **kw)
        if n is not None:
            given.append((vm, n))
        return n

    vmids.grab = recorded
    bos[i].u32[0x8000 // 4] = 1  # the drained VMID's job ends: the VMID goes idle, to the first asker
    assert hs[i].wait(seqs[i])
    mine = [(vm, n) for vm, n in given if vm in (first.f.vm, second.f.vm)]
    assert mine and mine[0] == (first.f.vm, drained), "the second asker passed the first"
    # the VMID is the first asker's now, not drained any more: its next job would run with it
    # at once, while the second asker still waits (a VMID drained for it is another)
    assert list(vmids.waiting) == [second.f.vm] and vmids.drain != drained
    assert grab(first.f.vm) == drained
    for k, h in enumerate(hs):  # (the SDMA ring runs its jobs in order: the others end too)
        bos[k].u32[0x8000 // 4] = 1
        assert h.wait(seqs[k])
    fb.u32[0x100] = sb.u32[0x100] = 1
    assert first.wait(f_seq) and second.wait(s_seq) and fb.u32[0x200] == sb.u32[0x200] == 0x77
    assert (kmd.stats["job_timeouts"], kmd.stats["resets"], kmd.stats["queue_resets"]) == (0, 0, 0)
