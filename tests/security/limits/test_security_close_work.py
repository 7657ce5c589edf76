"""What closing a file costs the driver's lock (hostile-20).

A file's close releases every BO it still holds, in one hold of the driver's lock. Each BO
still mapped was released as a GEM_CLOSE releases one: its mappings out of the VM, then a
TLB invalidation of the VM's VMID (an MMIO write and its acknowledge) and a walk of the
VM's jobs in the rings, each BO on its own. A client that mapped 2,000 BOs and closed the
file held the lock 305 ms (2,001 invalidations; the model's 8,000 pages of GTT as BOs over
a second), and could open, map and close again at will. The mappings of the BOs a close
releases go together now, with one invalidation for all of them (`Kmd._close_bos`).

The rest, some 28 Python calls a BO (its PTEs, its heap's free), was still one hold: 4,000
BOs 105 ms (hostile-21). It goes in holds of `Kmd.CLOSE_WORK_PER_HOLD` units of work now,
the lock handed over in between, each hold's work counted (not timed) below.
"""

from __future__ import annotations

import errno

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import Domain, Request
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client


def _mapped_bos(c: Client, n: int) -> list[int]:
    out = []
    for _ in range(n):
        h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.MAP, c.next_va, 0, 0x1000, RWX))
        c.next_va += 0x1000
        out.append(h)
    return out


def test_closing_a_file_invalidates_its_tlb_once_for_all_its_mapped_bos():
    """A file with a VMID (a job ran) and 500 BOs mapped, closed: one TLB invalidation (501
    before, one a BO), the device's time moved by one; every BO freed, the heap as before
    the file made them, and a new client's job runs."""
    kmd = kmd_model.bind(RefModel())
    gtt = kmd.bo.heaps[Domain.GTT]
    holes0 = gtt.holes
    c = Client()
    bo = c.bo(0x1000)
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    _mapped_bos(c, 500)
    vmid = c.f.vm.vmid
    assert vmid is not None and gtt.used >= 500 * 0x1000
    flushes, t0 = kmd.vmids.flushes, kmd.dev.now()
    c.f.close()
    assert kmd.vmids.flushes - flushes == 1, kmd.vmids.flushes - flushes
    assert kmd.dev.now() - t0 < 100  # (one invalidation's handshake: 16 cycles on the model)
    assert not kmd.live_bos() and gtt.holes == holes0
    v = Client()
    vbo = v.bo(0x1000)
    v.run(vbo, pm4.write_data(vbo.addr + 0x100, [7]))
    assert vbo.u32[0x40] == 7


def test_a_closed_files_bos_a_job_in_a_ring_may_write_are_held_until_it_ends():
    """The one invalidation keeps what one a BO did for a job of the VM still in a ring: the
    BOs the close unmapped (mapped after its CS: it held none of them) are held by it (the
    MMU's writes already translated may land after the invalidation), freed only as it ends
    (Kmd.hold_for_jobs_in_rings)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40, fallback_poll=1_000)
    c = Client()
    bo = c.bo(0x2000)
    flag = c.phys(bo) // 4 + 0x400
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x1000, 1, 1, "EQ")))
    kmd.service()
    assert any(j.vm is c.f.vm for s in kmd.scheds for j in s.pending)
    bos = [c.f.handles[h] for h in _mapped_bos(c, 20)]  # (mapped after the CS: the job holds none yet)
    assert not any(b.busy for b in bos)
    c.f.close()
    assert all(not b.freed for b in bos)  # (held by the job in the ring)
    kmd.mem32[flag] = 1
    v = Client()  # (its job runs behind the held one, on the same ring)
    vbo = v.bo(0x1000)
    v.run(vbo, pm4.write_data(vbo.addr + 0x100, [7]))
    kmd.service()
    assert all(b.freed for b in bos) and kmd.live_bos() == [v.f.handles[vbo.handle]]


# ---------------------------------------------------------------------------- holds of the release

PER_HOLD = 256  # (Kmd.CLOSE_WORK_PER_HOLD)


class _Work:
    """The release's work as it is done (each context freed, each BO closed, each mapping
    removed, each BO held for a job, each BO freed, each page table closed: one each), and the work done since the last hand-over of the lock
    (DriverLock.yield_to_waiters) at each hand-over and at the end: the work of each hold."""

    def __init__(self, monkeypatch, kmd):
        from kmd_model.core.kmd import Kmd
        from kmd_model.mm.vm import Vm
        self.done, self.holds = 0, []
        self._at = 0
        real_closed, real_free, real_hold = Kmd._closed, Kmd._free_released, Kmd.hold_for_jobs_in_rings
        real_removed, real_step = Vm.bo_removed, kmd.lock.yield_to_waiters
        real_ctx_free, real_bo_close = Kmd.ctx_free, type(kmd.bo).close

        def ctx_free(k, ctx):
            self.done += 1
            return real_ctx_free(k, ctx)

        def bo_close(m, bo):  # (a page table's, at the VM's destroy: a user BO's is its free, above)
            self.done += bo.owner is None
            return real_bo_close(m, bo)

        def closed(k, bo, by):
            self.done += 1
            return real_closed(k, bo, by)

        def removed(vm, bo):
            self.done += len(vm.maps_of(bo))
            return real_removed(vm, bo)

        def free(k, bo):
            self.done += 1
            return real_free(k, bo)

        def hold(k, vm, bos):  # (each BO held, and each job given the hold)
            self.done += len(bos) + len([j for s in k.scheds for j in s.pending if j.vm is vm and not j.finished])
            return real_hold(k, vm, bos)

        def step():
            self.holds.append(self.done - self._at)
            real_step()
            self._at = self.done
        monkeypatch.setattr(Kmd, "_closed", closed)
        monkeypatch.setattr(Kmd, "_free_released", free)
        monkeypatch.setattr(Kmd, "hold_for_jobs_in_rings", hold)
        monkeypatch.setattr(Vm, "bo_removed", removed)
        monkeypatch.setattr(Kmd, "ctx_free", ctx_free)
        monkeypatch.setattr(type(kmd.bo), "close", bo_close)
        monkeypatch.setattr(kmd.lock, "yield_to_waiters", step)

    def end(self) -> list[int]:
        return [*self.holds, self.done - self._at]


def test_a_closed_files_release_of_many_bos_is_done_in_holds_of_bounded_work(monkeypatch):
    """A file with 2,000 BOs mapped, closed: its release closed, unmapped and freed them all
    in one hold of the driver's lock (some 28 Python calls a BO: 8,000 BOs, the model's GTT in
    pages, 0.3 s of every other client's ioctls, repeatable at will). The work goes in holds of
    at most CLOSE_WORK_PER_HOLD (and a BO's own mappings), the lock handed over in between; the
    outcome is the same: one TLB invalidation, every BO freed, the heap as before."""
    kmd = kmd_model.bind(RefModel())
    gtt = kmd.bo.heaps[Domain.GTT]
    holes0, used0 = gtt.holes, gtt.used
    c = Client()
    bo = c.bo(0x1000)
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    _mapped_bos(c, 2000)
    work = _Work(monkeypatch, kmd)
    flushes = kmd.vmids.flushes
    c.f.close()
    holds = work.end()
    assert work.done >= 3 * 2000 and len(holds) >= 3 * 2000 // PER_HOLD, (work.done, holds)
    assert max(holds) <= PER_HOLD + 2, max(holds)  # (was 6,003: every BO in one hold)
    assert kmd.vmids.flushes - flushes == 1 and not kmd.live_bos() and gtt.holes == holes0 and gtt.used == used0
    from kmd_model.core.kmd import Kmd
    assert Kmd.CLOSE_WORK_PER_HOLD == PER_HOLD


def test_a_closed_files_bos_are_held_for_its_jobs_in_a_ring_in_holds_of_bounded_work(monkeypatch):
    """The close's holds of BOs for the VM's jobs in a ring (one a BO, one a job given the
    hold) are bounded too: 12 jobs held in a ring and 600 BOs mapped after their CSs go in
    holds of at most CLOSE_WORK_PER_HOLD; every BO is held by every job and freed only once
    they end."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40, fallback_poll=1_000)
    c = Client()
    bo = c.bo(0x2000)
    flag = c.phys(bo) // 4 + 0x400
    for _ in range(12):
        c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x1000, 1, 1, "EQ")))
    kmd.service()
    jobs = [j for s in kmd.scheds for j in s.pending if j.vm is c.f.vm and not j.finished]
    assert len(jobs) == 12
    bos = [c.f.handles[h] for h in _mapped_bos(c, 600)]
    work = _Work(monkeypatch, kmd)
    c.f.close()
    holds = work.end()
    assert work.done >= 600 * 4 and max(holds) <= PER_HOLD + 1, (work.done, holds)
    assert all(not b.freed and all(j.holds(b) for j in jobs) for b in bos)
    kmd.mem32[flag] = 1
    v = Client()
    vbo = v.bo(0x1000)
    v.run(vbo, pm4.write_data(vbo.addr + 0x100, [7]))
    kmd.service()
    assert all(b.freed for b in bos) and kmd.live_bos() == [v.f.handles[vbo.handle]]


def test_other_clients_ioctls_run_between_a_closed_files_holds_and_get_none_of_its_memory_early():
    """Another client's thread creating, mapping, writing and closing BOs all along gets the
    lock between the close's holds (before it ends), and no BO it gets is one of the closed
    file's pages before their TLB invalidation: the closed file's BOs are freed only after it."""
    import threading

    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    handles = _mapped_bos(c, 3000)
    ranges = sorted((b.gpu_addr, b.end) for b in (c.f.handles[h] for h in handles))
    order: list = []
    real_flush = kmd.vmids.flush_vm

    def flush_vm(vm, *a, **k):
        if vm is c.f.vm:
            order.append("flush")
        return real_flush(vm, *a, **k)
    kmd.vmids.flush_vm = flush_vm
    v = Client()
    state = {"stop": False, "made": []}

    def other() -> None:
        while not state["stop"]:
            vb = v.bo(0x1000)
            state["made"].append((vb.addr, v.phys(vb), "flush" in order, c.f.closed and c.f.fd in kmd.files))
            v.io(Request.GEM_CLOSE, uapi.GemCloseArgs(vb.handle))
    t = threading.Thread(target=other, daemon=True)
    t.start()
    import time
    while len(state["made"]) < 3:
        time.sleep(0.001)
    c.f.close()
    state["stop"] = True
    t.join(30)
    assert not t.is_alive()
    during = [m for m in state["made"] if m[3]]
    assert during, "no ioctl of the other client ran between the close's holds"
    import bisect
    for _, phys, flushed, _ in during:
        i = bisect.bisect_right(ranges, (phys, 1 << 62)) - 1
        inside = i >= 0 and ranges[i][0] <= phys < ranges[i][1]
        assert flushed or not inside, (hex(phys), flushed)
    assert order == ["flush"] and not kmd.live_bos(c.f)


def test_a_closed_files_contexts_and_page_tables_go_in_holds_of_bounded_work(monkeypatch):
    """A file with 2,000 contexts (a job run on each of 500) and 200 page tables (a page
    mapped in each 2 MiB of 400 MiB), closed: its contexts were freed and its tables closed in
    one hold (hostile-21: 4,000 contexts, 48,000 Python calls). They go in holds of at most
    CLOSE_WORK_PER_HOLD too (a BO's mappings in one: the page's 200 here); every context is
    gone from every scheduler, every table freed."""
    from kmd_model.uapi import CtxArgs, CtxOp, VaOp
    kmd = kmd_model.bind(RefModel())
    vram = kmd.bo.heaps[Domain.VRAM]
    c = Client()
    bo = c.bo(0x1000)
    ib = c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]))
    ctxs = [c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id for _ in range(2000)]
    seqs = [(k, c.submit(ib, ctx=k)) for k in ctxs[:500]]
    assert all(c.wait(s, ctx=k) for k, s in seqs)
    page = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
    for k in range(200):
        c.io(Request.GEM_VA, uapi.GemVaArgs(page, VaOp.MAP, 0x1000_0000 + k * 0x20_0000, 0, 0x1000, RWX))
    tables = list(c.f.vm.tables.values())
    assert len(tables) > 200 and vram.used > 200 * 0x1000
    work = _Work(monkeypatch, kmd)
    c.f.close()
    holds = work.end()
    assert work.done >= 2000 + 2 * 200 and max(holds) <= PER_HOLD, (work.done, holds)  # (was 2,000 + 200 in one)
    assert not any(e.file is c.f for s in kmd.scheds for e in s.entities) and not kmd.contexts
    assert all(t.freed for t in tables) and not kmd.live_bos()


def test_a_flush_lost_between_a_closed_files_holds_leaves_its_bos_freed_once_no_job_runs_with_the_vmid(monkeypatch):
    """A TLB flush of the closing file's VM lost between two holds of its release (another
    BO's release, made while the lock was handed over): the BOs the release had unmapped
    before it were invalidated by nothing. They are marked for the VMID the VM held
    (Bo.stale_vmids) and freed once no job runs with it (VmidManager.free_unflushed): here
    at once, none does; the close ends without an error of its own, nothing leaked."""
    from tests.kmd.memory.test_kmd_vmids_and_tlb import _LostFlush
    dev = _LostFlush()
    kmd = kmd_model.bind(dev, hw_timeout=2_000)
    c = Client()
    bo = c.bo(0x1000)
    c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    vm, vmid = c.f.vm, c.f.vm.vmid
    bos = [c.f.handles[h] for h in _mapped_bos(c, 600)]
    marked: list = []
    real_free = type(kmd)._free_released

    def free(k, b):
        marked.append(set(b.stale_vmids))
        return real_free(k, b)
    monkeypatch.setattr(type(kmd), "_free_released", free)
    real_step = kmd.lock.yield_to_waiters
    lost = []

    def step():
        if not lost:  # (the first hand-over: a flush of the VM is lost meanwhile)
            dev.lost = True
            try:
                kmd.vmids.flush_vm(vm)
            except kmd_model.KmdError as e:
                lost.append(e.errno)
            dev.lost = False
        real_step()
    monkeypatch.setattr(kmd.lock, "yield_to_waiters", step)
    c.f.close()
    assert lost == [errno.EIO] and vm.vmid is None
    assert all(b.freed for b in bos) and not kmd.live_bos() and not kmd.vmids.unflushed
    assert sum(vmid in m for m in marked) >= 100, len(marked)  # (those unmapped before the loss)
    v = Client()
    vbo = v.bo(0x1000)
    v.run(vbo, pm4.write_data(vbo.addr + 0x100, [7]))
    assert vbo.u32[0x40] == 7
