"""What the KMD keeps for a client, and when it lets go (round 3 of the hostile program,
helper 75):

- A BO whose unmap's TLB invalidation was never acknowledged (the MMU lost it): the release
  of a closed BO raised out of the flush before the BO was freed, so it stayed allocated for
  good (a leak per lost flush, and after the file's close too). Raised from a job's
  retirement, inside the fence processing, it also left the fences after it unsignalled. Now
  it is freed once no job runs with the VMID whose TLB may still hold its pages (a later
  grab of that VMID flushes first): never while the GPU may still use it, never leaked. A
  file's close raised out of its loop over the BOs at the first lost flush: the BOs after it
  and the page tables stayed allocated; it closes everything, then raises.
- A descriptor per mapped BO: each BO's CPU mapping (made at its first GEM_MMAP) was Python's
  mmap, which keeps a duplicate of the memory file's descriptor, so an honest client with
  many small BOs each mapped ran into the process's descriptor limit (EMFILE). The mappings
  are libc's now, no descriptor each.
"""

from __future__ import annotations

import errno
import os

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import KmdError, MappingRevoked, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.memory.test_kmd_vmids_and_tlb import _LostFlush  # (an MMU whose TLB flushes are lost)
from tests.kmd.test_kmd_ioctl import Client


def test_an_idle_bo_closed_when_its_flush_is_lost_is_freed_not_leaked():
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000)
    c = Client()
    ib, x = c.bo(0x1000), c.bo(0x1000)
    c.run(ib, pm4.write_data(x.addr + 0x100, [1]))  # x's translation is in the TLB
    bo = c.f.handles[x.handle]
    dev.lost = True
    vmid = c.f.vm.vmid
    with pytest.raises(KmdError) as ei:
        c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(x.handle))
    assert (ei.value.errno, ei.value.message) == (
        errno.EIO, f"GEM_CLOSE: TLB flush of VMID {vmid}: no acknowledge after 2000 cycles")
    assert c.f.vm.vmid is None  # no job runs with that VMID until a flush of it is acknowledged
    assert bo.freed  # (nothing runs with it: its pages may go)
    dev.lost = False
    c.f.close()
    assert not kmd.live_bos()


def test_bos_closed_under_lost_flushes_of_the_last_vmid_are_each_freed():
    """A BO closed when its unmap's flush is lost is listed with the VMID
    (VmidManager.unflushed) and freed once no job runs with that VMID: at once here, none
    does. On the last VMID (the VM the 15th to take one), closed one after another with a
    job of the VM between (its grab flushes, then the next close's flush is lost again):
    each BO is freed at its close, the list emptied each time."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000)
    for _ in range(len(kmd.vmids.ids) - 1):  # every other VMID taken first
        o = Client()
        o.run(o.bo(0x1000), pm4.nop(2))
    c = Client()
    ib, x, y = c.bo(0x1000), c.bo(0x1000), c.bo(0x1000)
    for k, b in enumerate((x, y)):
        c.run(ib, pm4.write_data(b.addr, [1]), 0x100 * k)  # b's translation is in the TLB
        vmid = c.f.vm.vmid
        assert vmid == len(kmd.vmids.ids)
        bo = c.f.handles[b.handle]
        dev.lost = True
        with pytest.raises(KmdError) as ei:
            c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(b.handle))
        assert (ei.value.errno, ei.value.message) == (
            errno.EIO, f"GEM_CLOSE: TLB flush of VMID {vmid}: no acknowledge after 2000 cycles")
        assert bo.freed and kmd.vmids.unflushed == []
        dev.lost = False
    assert kmd.kmd_stats()["tlb_flush_failures"] == 2
    c.f.close()
    assert len(kmd.live_bos()) == len(kmd.vmids.ids) - 1  # (the others' IBs)


@pytest.mark.parametrize("j2_ends", ["by_itself", "by_its_reset"])
def test_a_bo_whose_unmap_flush_is_lost_at_a_jobs_retirement_waits_for_the_vmids_jobs_then_goes(j2_ends):
    """Checker off: J1 uses X and holds the CP; X is closed (busy: it stays mapped for J1);
    J2, submitted after the close, runs with the same VMID. J1 ends, its retirement releases
    X, and the flush is lost: X must stay allocated while J2 may still reach it through the
    TLB, and be freed once J2 is done. (The flush's EIO was raised out of the fence
    processing: the WAIT_CS on J1 got it, and X stayed allocated for good.) J2 ends by itself,
    or never, and its reset ends it."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000, cs_check=False, job_timeout=1 << 30 if j2_ends == "by_itself" else 50_000)
    c = Client()
    ib, x, flag = c.bo(0x1000), c.bo(0x1000), c.bo(0x1000)
    j1 = c.submit(c.ib(ib, pm4.write_data(x.addr + 0x100, [1]) + pm4.wait_reg_mem(flag.addr, 1, 1, "EQ")))
    bo = c.f.handles[x.handle]
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(x.handle))
    assert not bo.freed
    j2 = c.submit(c.ib(ib, pm4.wait_reg_mem(flag.addr + 4, 1, 1, "EQ") + pm4.write_data(x.addr + 0x104, [2]), 0x100))
    dev.lost = True
    flag.u32[0] = 1
    assert c.wait(j1)
    assert kmd.kmd_stats()["tlb_flush_failures"] == 1 and not bo.freed  # J2 may still use the VMID's TLB
    if j2_ends == "by_itself":
        dev.lost = False
        flag.u32[1] = 1
        assert c.wait(j2)
    else:
        with pytest.raises(KmdError) as ei:
            c.wait(j2, 1 << 30)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT" and not kmd.wedged
        dev.lost = False
    assert bo.freed
    c.f.close()
    assert not kmd.live_bos()


@pytest.mark.parametrize("op", ["UNMAP", "CLEAR", "REPLACE"])
def test_a_bo_unmapped_by_a_gem_va_whose_flush_is_lost_stays_while_a_job_may_reach_it(op):
    """Checker off: J runs and waits; X is mapped after J's CS (J does not hold it), J writes
    it (its translation is in the VMID's TLB), then GEM_VA takes X's mapping away and the
    MMU loses the flush (EIO), and GEM_CLOSE closes X. X was freed at once (its release found
    no mapping left to flush for): a victim was given its page, and J's next write landed in
    it through the stale entry. X stays allocated now until no job runs with that VMID, then
    goes."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000, cs_check=False, job_timeout=1 << 30)
    a, v = Client(), Client()
    ib, flag = a.bo(0x1000), a.bo(0x1000)
    va = a.next_va
    j = a.submit(a.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 1, "EQ") + pm4.write_data(va, [1])
                      + pm4.wait_reg_mem(flag.addr + 4, 1, 1, "EQ") + pm4.write_data(va + 4, [0xBAD])))
    x = a.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    a.io(Request.GEM_VA, uapi.GemVaArgs(x, uapi.VaOp.MAP, va, 0, 0x1000))
    bo = a.f.handles[x]
    flag.u32[0] = 1
    assert kmd.wait_for(lambda: int(kmd.mem32[bo.gpu_addr // 4]) == 1, 100_000)
    dev.lost = True
    y = a.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    args = {"UNMAP": uapi.GemVaArgs(x, uapi.VaOp.UNMAP, va, 0, 0x1000),
            "CLEAR": uapi.GemVaArgs(0, uapi.VaOp.CLEAR, va, 0, 0x1000),
            "REPLACE": uapi.GemVaArgs(y, uapi.VaOp.REPLACE, va, 0, 0x1000)}[op]
    with pytest.raises(KmdError) as ei:
        a.io(Request.GEM_VA, args)
    assert ei.value.errno == errno.EIO and "TLB flush of VMID" in ei.value.message
    dev.lost = False
    a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(x))
    assert not bo.freed  # J's VMID may still hold X's page
    got = [v.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle for _ in range(64)]
    assert bo.gpu_addr not in {v.f.handles[h].gpu_addr for h in got}
    flag.u32[1] = 1
    assert a.wait(j)
    assert bo.freed and not any(int(kmd.mem32[v.f.handles[h].gpu_addr // 4 + 1]) for h in got)
    a.f.close()
    v.f.close()
    assert not kmd.live_bos()


# ------------------------------------------------------------------------------ CPU mappings and descriptors

def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the process's descriptors in /proc")
def test_an_honest_client_with_30000_small_bos_each_mapped_takes_no_descriptor_per_bo():
    """Each BO's OS mapping was Python's mmap, which keeps a duplicate of the memory file's
    descriptor: with 30,000 small BOs each mapped, GEM_MMAP was EMFILE at the process's
    descriptor limit (20,000 here; lowered to the descriptors open + 10,000 for the test, so
    it fails the same way wherever it runs), for this client and every other. The mappings
    are libc's now: no descriptor each (the OS's own bound, vm.max_map_count, 65,530 by
    default, is the limit left)."""
    import resource
    kmd = kmd_model.bind(RefModel(256 << 20))
    c, other = Client(), Client()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = _open_fds()
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, before + 10_000), hard))
    try:
        views = []
        for i in range(30_000):
            h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.VRAM if i % 2 else uapi.Domain.GTT, 0)).handle
            v = c.io(Request.GEM_MMAP, uapi.GemMmapArgs(h)).view.view("<u4")
            v[1] = i
            views.append((h, v))
        assert _open_fds() - before <= 1
        assert [int(v[1]) for _, v in views[::997]] == list(range(0, 30_000, 997))
        obo = other.bo(0x1000)  # another client maps as before
        obo.u32[0] = 7
        h, v = views[12_345]
        assert int(kmd.dev.mem[c.f.handles[h].gpu_addr + 4]) == 12_345 & 0xFF  # (the BO's own pages)
        c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))
        with pytest.raises(MappingRevoked):
            v[1] = 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    c.f.close()
    other.f.close()
    assert not kmd.live_bos()


def test_a_file_closed_when_its_flush_is_lost_releases_every_bo_and_its_vm():
    """close() of a file whose first BO's unmap flush was lost raised out of the loop over its
    handles: the BOs after it, and the VM's page tables, stayed allocated for good. The close
    now goes on to the end, then raises the flush's EIO (as close(2) reports EIO)."""
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000)
    before = len(kmd.bo.live_bos(None))
    c = Client()
    ib, *rest = (c.bo(0x1000) for _ in range(4))
    c.run(ib, pm4.write_data(rest[0].addr, [1]))  # the VM holds a VMID
    dev.lost = True
    with pytest.raises(KmdError) as ei:
        c.f.close()
    assert ei.value.errno == errno.EIO and "no acknowledge" in ei.value.message
    assert c.f.closed
    dev.lost = False
    assert not kmd.live_bos() and len(kmd.bo.live_bos(None)) == before  # no page table left either


def test_a_bo_unmapped_under_two_jobs_in_rings_stays_until_the_last_of_them_ends():
    """X is mapped after the CSs of two jobs of the same VM, one in the gfx ring and one in
    the SDMA ring, each waiting for its flag (neither holds X by its CS), then closed: each
    job in a ring may have translated a write to X before the TLB flush (Kmd.hold_for_jobs_in_rings),
    so X stays allocated, GEM_WAIT_IDLE busy, until the last of the two has ended, whichever
    ends first; a new BO of another file never gets its page meanwhile."""
    from tests.kmd_sched.sched_helpers import sdma_ib

    for first in ("gfx", "sdma"):
        kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=1 << 30)
        a, v = Client(), Client()
        ib, flag = a.bo(0x1000), a.bo(0x1000)
        g = a.submit(a.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 1, "EQ")))
        s = a.submit(sdma_ib(ib, sdma.poll_regmem(flag.addr + 4, 1, 1, "EQ", interval=1), 0x400))
        x = a.bo(0x1000)
        bo = a.f.handles[x.handle]
        a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(x.handle))
        # (both jobs hold it: one hold for the two since hostile-21's RingHold, one each before)
        ring_jobs = [j for sc in kmd.scheds for j in sc.pending if j.vm is a.f.vm and not j.finished]
        assert not bo.freed and bo.busy_jobs == 1 and len(ring_jobs) == 2 and all(j.holds(bo) for j in ring_jobs)
        order = [(g, 0), (s, 1)] if first == "gfx" else [(s, 1), (g, 0)]
        seq, k = order[0]
        flag.u32[k] = 1
        assert a.wait(seq)
        assert not bo.freed, f"{first} ended first: X freed while the other job of its VM is in a ring"
        got = [v.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle for _ in range(16)]
        assert bo.gpu_addr not in {v.f.handles[h].gpu_addr for h in got}
        seq, k = order[1]
        flag.u32[k] = 1
        assert a.wait(seq) and bo.freed
        a.f.close()
        v.f.close()
        assert not kmd.live_bos()


# ------------------------------------------------------------------------------ work a reset does

def test_a_reset_does_not_walk_every_context_of_every_file():
    """Each reset counted itself into every context of every file (QUERY_STATE's `resets`),
    a walk of the driver's table of contexts under its lock: a client with 25 files of
    4,095 contexts (a file's most; the files are its descriptors') made every reset cost
    some 15 ms of the lock instead of 3, and its own faults on the SDMA ring (no checker,
    reset at once, a new context every 3) cost every other client's ioctls that much each;
    a million contexts, 150 ms a fault. amdgpu keeps one counter (gpu_reset_counter) that a
    context compares with the value it was made with: so here, a reset is one increment,
    whatever the contexts."""
    from kmd_model.uapi import CtxArgs, CtxOp, WaitCsArgs

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel())
    walked = []

    class Watched(dict):  # the driver's table of every file's contexts: who walks it
        def values(self):
            walked.append("values")
            return super().values()

        def items(self):
            walked.append("items")
            return super().items()

        def __iter__(self):
            walked.append("iter")
            return super().__iter__()

    kmd.contexts = Watched(kmd.contexts)
    other, c = Client(), Client()
    bo = c.bo(0x1000)
    for _ in range(3):
        ctx = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        seq = c.io(Request.CS, uapi.CsArgs(ctx, [sdma_ib(bo, sdma.write_linear(0x3000_0000, [1]))])).seq
        with pytest.raises(KmdError) as e:
            c.io(Request.WAIT_CS, WaitCsArgs(ctx, seq, 1_000_000))
        assert e.value.errno == errno.ECANCELED and e.value.info.code == "VM_FAULT"
    assert kmd.stats["queue_resets"] == 3
    assert walked == [], walked
    # what QUERY_STATE says is as before: every context that lived through a reset counts it
    seen = other.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, other.ctx))
    assert seen.resets == 3 and seen.flags & uapi.CtxQueryFlags.RESET
    assert c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, ctx)).resets == 1  # made before the last
    new = other.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    st = other.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, new))
    assert st.resets == 0 and not st.flags & uapi.CtxQueryFlags.RESET


def test_a_cs_does_not_walk_every_mapping_of_its_vm():
    """Each CS gathered the BOs its job holds (Vm.bos) from every mapping of the file's VM,
    under the driver's lock: a client that mapped one 4 KiB BO 100,000 times (its VM holds
    some 250,000 pages) made each of its CSs hold the lock 13 ms longer (about 33 ms at
    the VM's end), every other client's ioctls waiting behind each. The VM keeps its
    mappings by BO already (Vm.maps_of): the job's BOs come from those, one step a BO."""
    from tests.kmd.test_kmd_ioctl import RWX
    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x2000)
    small = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0)).handle
    va = 0x2000_0000
    for i in range(200):
        c.io(Request.GEM_VA, uapi.GemVaArgs(small, uapi.VaOp.MAP, va + 0x1000 * i, 0, 0x1000, RWX))
    vm = c.f.vm
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000, [1]))))  # (the checker's view made once)
    walked = []

    class Watched(list):  # the VM's mappings by address: who walks them
        def __iter__(self):
            walked.append(len(self))
            return super().__iter__()

    vm.maps = Watched(vm.maps)
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000, [2]))),
            c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x1800, [3]), 0x400))]
    assert walked == [], walked
    assert all(c.wait(s) for s in seqs)
    assert bo.u32[0x400] == 2 and bo.u32[0x600] == 3
    # what a job holds is as before: every BO mapped with a handle, and the page tables
    f = c.f.handles
    assert vm.bos() == {f[bo.handle], f[small]} | set(vm.tables.values())
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(small))
    assert vm.bos() == {f[bo.handle]} | set(vm.tables.values())


def test_the_checkers_view_of_the_mappings_is_kept_not_made_again_at_each_change():
    """The checker's view of a VM's mappings (Vm.lookup_arrays) was made again from every
    mapping at the first CS after any GEM_VA or GEM_CLOSE: a client with 100,000 mappings
    that moved one page before each CS held the driver's lock 130 ms a CS (some 330 ms at
    the VM's end). It is kept in step with each change now, a row at a time: no walk of the
    mappings, and after MAP, UNMAP, REPLACE, CLEAR and GEM_CLOSE in any order it is what a
    view made afresh would be, and the checker answers by it."""
    import random

    import numpy as np

    from kmd_model.uapi import GemVaArgs, VaOp
    from tests.kmd.test_kmd_ioctl import RWX
    kmd_model.bind(RefModel())
    c = Client()
    ib = c.bo(0x2000)
    vm = c.f.vm
    assert c.wait(c.submit(c.ib(ib, pm4.write_data(ib.addr + 0x1000, [1]))))  # (the view made once)
    walked = []

    class Watched(list):  # the VM's mappings by address: who walks them
        def __iter__(self):
            walked.append(len(self))
            return super().__iter__()

    vm.maps = Watched(vm.maps)
    rng = random.Random(5)
    answers = {"accepted": 0, "refused": 0}
    base = 0x2000_0000
    handles = [c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x4000, 0, uapi.Domain.GTT, 0)).handle for _ in range(4)]
    for step in range(300):
        op = rng.choice(["map", "map", "unmap", "replace", "clear", "close", "cs"])
        va = base + 0x1000 * rng.randrange(64)
        try:
            if op == "close" and len(handles) > 1:
                c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(handles.pop(rng.randrange(len(handles)))))
                handles.append(c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x4000, 0, uapi.Domain.GTT, 0)).handle)
            elif op == "cs":
                # a WRITE_DATA into the range: accepted exactly when a writable mapping covers it
                m = vm.find(va)
                ok = m is not None and bool(m.flags & uapi.VmFlags.WRITEABLE) and not m.bo.closed
                try:
                    seq = c.submit(c.ib(ib, pm4.write_data(va, [step])))
                except KmdError as e:
                    assert e.errno == errno.EINVAL and not ok, (step, e)
                    answers["refused"] += 1
                else:
                    assert ok, step
                    assert c.wait(seq)
                    answers["accepted"] += 1
            else:
                h = rng.choice(handles)
                size = 0x1000 * rng.randrange(1, 4)
                vop = {"map": VaOp.MAP, "unmap": VaOp.UNMAP, "replace": VaOp.REPLACE, "clear": VaOp.CLEAR}[op]
                flags = rng.choice([RWX, int(uapi.VmFlags.READABLE)])
                c.io(Request.GEM_VA, GemVaArgs(h, vop, va, 0, size, flags if vop in (VaOp.MAP, VaOp.REPLACE) else 0))
        except KmdError as e:
            assert e.errno in (errno.EINVAL, errno.ENOENT), (step, op, e)
    assert walked == [], walked
    kept = vm.lookup_arrays()
    vm.maps = list(vm.maps)
    vm._arrays = None
    fresh = vm.lookup_arrays()
    assert len(fresh[0]) >= 5 and min(answers.values()) >= 5, (len(fresh[0]), answers)
    for a, b in zip(kept, fresh):
        assert np.array_equal(a, b)


# ------------------------------------------------------------------------------ jobs waiting for a VMID

def _scheduler_steps_beside_jobs_waiting_for_a_vmid(contexts: int, files: int = 1) -> int:
    """Line events in the scheduler and the VMID manager while an innocent client makes one
    CS, beside `files` hostile files whose `contexts` contexts each hold one queued job, every
    VMID taken by 15 other files' jobs in the gfx ring (the first held in a WAIT_REG_MEM).
    Then the holds end and every job runs."""
    from kmd_model.uapi import CtxArgs, CtxOp

    from tests.kmd_sched.test_kmd_hostile import _lines_in
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)
    holders = []
    for _ in kmd.vmids.ids:
        c = Client()
        c.next_va = 0x10_0000  # (each file's VM is its own: the same VAs in every one)
        bo = c.bo(0x1000)
        c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
        holders.append((c, bo))
    assert all(v.owner is not None for v in kmd.vmids.ids)
    inn = Client()
    inn.next_va = 0x10_0000
    ibo = inn.bo(0x1000)
    held = []
    for _ in range(files):
        h = Client()
        h.next_va = 0x10_0000
        hbo = h.bo(0x1000)
        chunk = h.ib(hbo, pm4.write_data(hbo.addr + 0x800, [7]))
        for _ in range(contexts):
            ctx = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
            held.append((h, ctx, h.submit(chunk, ctx=ctx)))
    assert len(kmd.sched.queue) == files * contexts
    lines, (seq,) = _lines_in(lambda: inn.submit(inn.ib(ibo, pm4.write_data(ibo.addr + 0x800, [1]))),
                              ("sched/scheduler.py", "sched/job.py", "mm/vmid.py"))
    for _, bo in holders:
        bo.u32[0x200] = 1
    assert inn.wait(seq, 1 << 24) and ibo.u32[0x200] == 1
    assert all(h.wait(s, 1 << 24, ctx=ctx) for h, ctx, s in held)
    return lines


def test_contexts_waiting_for_a_vmid_cost_a_scheduler_pass_once_each():
    """With every VMID taken, a scheduler pass (each CS of any client, each step of any
    wait) looked for a ready entity from the front of its run queue again after each one whose
    job found no VMID, and asked the VMID manager again for each: a pass cost the square of
    the contexts with a job queued. A client whose 2,000 contexts each queued one job behind
    15 files holding the VMIDs made every other client's ioctl hold the driver's lock 0.4 s
    (0.02 s with 500; its own setup, paying it at each CS, 435 s). A pass now walks the run
    queue once, as drm_sched_rq_select_entity_rr does, and asks once for each VM: a cost of
    a + b * contexts, which 4 times the contexts multiplies by less than 4 (it was 6.7)."""
    few = _scheduler_steps_beside_jobs_waiting_for_a_vmid(40)
    many = _scheduler_steps_beside_jobs_waiting_for_a_vmid(160)
    assert many < 4 * few, (few, many)


def test_files_waiting_for_a_vmid_cost_a_scheduler_pass_once_each():
    """The VMID manager looked at every waiting VM, for its expiry, at each VM's ask: with
    every VMID taken, a scheduler pass, which asks once for each VM with a job ready, cost the
    square of the files waiting. 1,200 files, each with one job queued while 15 files held
    the VMIDs, made each ioctl of every client hold the driver's lock 0.5 s (0.02 s with 300).
    Only the first waiter decides which VM is served next: only those ahead of it are
    forgotten at each ask, the rest once a job timeout (VmidManager._expire)."""
    few = _scheduler_steps_beside_jobs_waiting_for_a_vmid(1, files=20)
    many = _scheduler_steps_beside_jobs_waiting_for_a_vmid(1, files=80)
    assert many < 4 * few, (few, many)


# ------------------------------------------------------------------------------ many mappings removed at once

@pytest.mark.parametrize("how", ["GEM_CLOSE", "CLEAR", "close"])
def test_many_mappings_removed_at_once_cost_one_cut_of_the_checkers_view(how, monkeypatch):
    """A GEM_CLOSE removed its BO's mappings one at a time, each cutting its row out of the
    checker's view (five arrays of a row a mapping, copied whole) and out of the VM's lists:
    one page mapped 20,000 times took 4.4 s of the driver's lock to close, 100,000 times some
    2 minutes, every other client's ioctls waiting; a CLEAR over them as long, and a file's
    close paid it for each BO. They go in one step now (Vm._remove_many; the file's close
    drops the view it will not need), and the view is what one made afresh would be."""
    import numpy as np

    from kmd_model.mm import vm as vm_module
    from kmd_model.uapi import GemVaArgs, VaOp
    from tests.kmd.test_kmd_ioctl import RWX
    kmd_model.bind(RefModel())
    c = Client()
    ib = c.bo(0x1000)
    n = 600
    page = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0)).handle
    base = 0x2000_0000
    for k in range(n):
        c.io(Request.GEM_VA, GemVaArgs(page, VaOp.MAP, base + 0x2000 * k, 0, 0x1000, RWX))
    other = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0)).handle
    c.io(Request.GEM_VA, GemVaArgs(other, VaOp.MAP, base + 0x2000 * n, 0, 0x1000, RWX))
    assert c.wait(c.submit(c.ib(ib, pm4.write_data(base + 0x2000 * (n - 1), [1]))))  # (the view made)
    vm = c.f.vm
    rows = []
    real = np.delete

    def counted(a, *args, **kw):
        rows.append(len(a))
        return real(a, *args, **kw)
    monkeypatch.setattr(vm_module.np, "delete", counted)
    if how == "GEM_CLOSE":
        c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(page))
    elif how == "CLEAR":
        c.io(Request.GEM_VA, GemVaArgs(0, VaOp.CLEAR, base + 0x1000, 0, 0x2000 * n - 0x2000))
    else:
        c.f.close()
    assert sum(rows) <= 5 * (n + 2), (len(rows), sum(rows))  # (a cut of each array once, at most)
    if how == "close":
        return
    left = [(m.va, m.size) for m in vm.maps]
    kept = vm.lookup_arrays()
    vm._arrays = None
    assert all(np.array_equal(a, b) for a, b in zip(kept, vm.lookup_arrays()))
    want = [(base + 0x2000 * n, 0x1000)] if how == "GEM_CLOSE" else [(base, 0x1000), (base + 0x2000 * n, 0x1000)]
    assert left == [(ib.addr, 0x1000)] + want
    assert vm.maps_of(c.f.handles[other]) == [m for m in vm.maps if m.va == base + 0x2000 * n]
    for va in (base + 0x2000, base + 0x2000 * (n - 1)):  # (unmapped: refused, as any address outside its mappings)
        with pytest.raises(KmdError) as e:
            c.submit(c.ib(ib, pm4.write_data(va, [2])))
        assert e.value.errno == errno.EINVAL
    assert c.wait(c.submit(c.ib(ib, pm4.write_data(base + 0x2000 * n, [3]))))


# ------------------------------------------------------------------------------ a guilty context's jobs

def _scheduler_steps_of_a_fault(contexts: int) -> int:
    """Line events in kmd_model/sched/scheduler.py and job.py while a client's SDMA job faults and its
    ring is reset (the WAIT_CS that finds it), beside `contexts` contexts of its own, each
    with 4 SDMA jobs queued on a dependency on its gfx job that holds the CP; then the hold
    ends and those run."""
    from kmd_model.uapi import CsArgs, CsChunkDep, CtxArgs, CtxOp, HwIp, WaitCsArgs

    from tests.kmd_sched.sched_helpers import sdma_ib
    from tests.kmd_sched.test_kmd_hostile import _lines_in
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)
    h = Client()
    ib, flag, copy, bad = h.bo(0x1000), h.bo(0x1000), h.bo(0x1000), h.bo(0x1000)
    root = h.submit(h.ib(ib, pm4.wait_reg_mem(flag.addr, 1, 1, "EQ")))
    job = sdma_ib(copy, sdma.write_linear(copy.addr + 0x800, [7]))
    held = []
    for _ in range(contexts):
        c = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        held += [(c, h.io(Request.CS, CsArgs(c, [job, CsChunkDep(HwIp.GFX, 0, h.ctx, root)])).seq) for _ in range(4)]
    assert len(kmd.sdma_sched.queue) == 4 * contexts
    ctx = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    seq = h.io(Request.CS, CsArgs(ctx, [sdma_ib(bad, sdma.write_linear(0x3000_0000, [1]))])).seq

    def fault():
        with pytest.raises(KmdError) as e:
            h.io(Request.WAIT_CS, WaitCsArgs(ctx, seq, 1_000_000))
        return e.value
    lines, (e,) = _lines_in(fault)
    assert e.errno == errno.ECANCELED and e.info.code == "VM_FAULT" and kmd.stats["queue_resets"] == 1
    assert len(kmd.sdma_sched.queue) == 4 * contexts  # (the others' jobs untouched)
    flag.u32[0] = 1
    assert all(h.wait(s, 1 << 24, ctx=c) for c, s in held)
    return lines


def test_a_reset_looks_at_the_guilty_contexts_jobs_not_every_queued_job():
    """A reset cancelled the guilty context's jobs by walking every job queued on the ring,
    every client's, and rebuilding every entity's queue: 8,000 jobs a file held queued on a
    dependency made each of its own faults (the SDMA ring has no checker, and a fault is
    reset at once) cost every other client 18 ms of the driver's lock, and a file's ban,
    which cancels each of its contexts, that times its contexts. It looks at the context's
    own jobs now (Context.jobs) and the ring's, as drm_sched cancels an entity's own queue."""
    few = _scheduler_steps_of_a_fault(5)
    many = _scheduler_steps_of_a_fault(200)
    assert many < few + 100, (few, many)
