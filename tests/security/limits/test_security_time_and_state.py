"""A hostile program against the KMD in time and state (round 2; round 1, argument copy-in, is
test_security_hostile_program.py): what holds when clients race each other, exhaust what the
driver shares, and hang the GPU on purpose again and again. Split by concept from it:
test_security_interrupt_storms.py (the IH ring overflowed, interrupt storms and the job
timer) and test_security_checker_off.py (the CS checker off, the MMU alone).

- Threads: several client threads on one driver, some on one shared file, some on files of
  their own that they close and reopen, racing CS, WAIT_CS, GEM_VA MAP/UNMAP/REPLACE,
  GEM_CLOSE, CTX ALLOC/FREE and close(): no thread hangs (joined with a timeout), every
  refusal is a documented errno, every job ends exactly once (retired + cancelled == CS),
  each context's seqnos are handed out once each, and once every file is closed the driver
  holds what it held at bring-up: no BO, no shadow copy, no VMID owner, no entity, no
  pending fence, the heaps as they were.
- Exhaustion by one client: more files than VMIDs with jobs held in the GPU, VRAM and GTT
  filled, the shadow pool filled behind a held CP, an open that fails half way, OS mappings
  and descriptors: another client's jobs still complete, each refusal names what ran out,
  and all of it comes back when the hostile client goes.
- A client hanging every ring on purpose, again and again: the innocent client's jobs
  complete with their results, every guilty context reads GUILTY, nothing leaks, and the
  driver's record of recoveries stays bounded; a wedged device leaves nothing behind once
  its files close.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import threading

import pytest

import kmd_model
from kmd_model.core.kmd import Kmd
from kmd_model.uapi import (CsChunkDep, CsChunkIb, CtxArgs, CtxOp, Domain, GemCloseArgs, GemCreateArgs, GemMmapArgs,
                            GemVaArgs, GemWaitIdleArgs, HwIp, KmdError, MappingRevoked, Request, ResetStatus, VaOp)
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client
from tests.kmd_sched.sched_helpers import sdma_ib

from ..security_helpers import EVIL, _start_state, assert_as_at_bring_up

ANSWERS = {errno.EINVAL, errno.ECANCELED, errno.EIO, errno.ETIME, errno.ENOMEM, errno.ENOENT,
           errno.EBADF}


def _client_thread(i: int, seed: int, shared: Client, sbo, files: list, errors: list, seqs: dict,
                   victim_addrs: list) -> None:
    rng = random.Random(seed * 100 + i)
    own = i >= 3  # threads 0..2 share one file; the others have files of their own
    c, mybo = (Client(), None) if own else (shared, sbo)
    if own:
        mybo = c.bo(0x10000)
    ctxs, extra = [c.ctx], []
    base = 0x2000_0000 + 0x100_0000 * i  # each thread's own far range
    try:
        for step in range(150):
            try:
                r = rng.random()
                if i == 0 and step == 100 and seed % 2:  # the shared file, closed under the other two threads
                    c.f.close()  # (EBADF from then on, and their IBs' BO revoked)
                elif r < 0.05 and own:  # close with jobs in flight, open again
                    c.f.close()
                    c = Client()
                    mybo = c.bo(0x10000)
                    ctxs, extra = [c.ctx], []
                elif r < 0.1:  # any priority: HIGH ones' gfx jobs go to the CP's second queue
                    ctxs.append(c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=rng.choice([0, 512, -512]))).ctx_id)
                elif r < 0.15 and len(ctxs) > 1:  # freed with its jobs queued or running
                    c.io(Request.CTX, CtxArgs(CtxOp.FREE, ctxs.pop(rng.randrange(len(ctxs)))))
                elif r < 0.25:
                    out = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, rng.choice([Domain.GTT, Domain.VRAM]), 0))
                    va = base + rng.randrange(16) * 0x1000
                    c.io(Request.GEM_VA, GemVaArgs(out.handle, rng.choice([VaOp.MAP, VaOp.REPLACE]), va, 0, 0x1000, RWX))
                    extra.append((out.handle, va))
                elif r < 0.32 and extra:
                    h, va = extra.pop(rng.randrange(len(extra)))
                    if rng.random() < 0.5:
                        c.io(Request.GEM_VA, GemVaArgs(h, VaOp.UNMAP, va))
                    c.io(Request.GEM_CLOSE, GemCloseArgs(h))
                elif r < 0.4 and seqs.get((c.f.fd, ctxs[0])):
                    c.wait(rng.choice(seqs[c.f.fd, ctxs[0]]), rng.choice([0, 1_000, 50_000]), ctx=ctxs[0])
                elif r < 0.45:
                    c.io(Request.GEM_WAIT_IDLE, GemWaitIdleArgs(mybo.handle, rng.choice([0, 20_000])))
                else:
                    ctx = rng.choice(ctxs)
                    off = rng.randrange(0, 0xE000, 0x100)
                    target = rng.choice([mybo.addr + 0xF000 + 4 * i, base + 0x10, *victim_addrs])
                    value = EVIL if target in victim_addrs else i
                    if rng.random() < 0.7:
                        words = pm4.write_data(target, [value])
                        if rng.random() < 0.2:  # held until its timeout (nobody releases it)
                            words = pm4.wait_reg_mem(mybo.addr + 0xFF00, 1, 1, "EQ") + words
                        ib = c.ib(mybo, words, off)
                    else:
                        ib = sdma_ib(mybo, sdma.write_linear(target, [value]), off)
                    deps = []
                    mine = [(x, q[-1]) for (fd, x), q in list(seqs.items()) if fd == c.f.fd and x in ctxs and q]
                    if mine and rng.random() < 0.3:  # after a job of its own, on whichever ring that ran
                        x, q = rng.choice(mine)
                        deps = [CsChunkDep(rng.choice([HwIp.GFX, HwIp.DMA]), 0, x, q)]
                    seq = c.submit(*deps, ib, ctx=ctx)
                    seqs.setdefault((c.f.fd, ctx), []).append(seq)
            except KmdError as e:
                if e.errno not in ANSWERS:
                    errors.append(f"thread {i}: {e.name}: {e.message}")
            except MappingRevoked:  # its IBs' BO: gone with the file another thread closed
                if not c.f.closed:
                    raise
                break
    except Exception as e:  # noqa: BLE001 (reported by the test, not lost in the thread)
        errors.append(f"thread {i}: {type(e).__name__}: {e}")
    finally:
        if own:
            files.append(c)


def _innocent_thread(seed: int, victim: Client, vbo, vhigh: int, wrote: dict, errors: list) -> None:
    """A client among the hostile threads that does nothing wrong: each of its jobs (either
    ring, either priority) completes with its value, whatever the others' resets."""
    rng = random.Random(seed)
    try:
        for k in range(40):
            at, val = 0xE000 + 4 * k, rng.randrange(1, 1 << 32)
            off = 0x100 * k
            ib = (victim.ib(vbo, pm4.write_data(vbo.addr + at, [val]), off) if rng.random() < 0.5
                  else sdma_ib(vbo, sdma.write_linear(vbo.addr + at, [val]), off))
            ctx = rng.choice([victim.ctx, vhigh])
            if not victim.wait(victim.submit(ib, ctx=ctx), 5_000_000, ctx=ctx):
                errors.append(f"innocent job {k} still busy")
            wrote[at // 4] = val
    except Exception as e:  # noqa: BLE001 (any error of an innocent client's is the finding)
        errors.append(f"innocent: {type(e).__name__}: {e}")


def _fill(c: Client, domain: Domain) -> list[int]:
    handles, size = [], 1 << 26
    while size >= 0x1000:
        try:
            handles.append(c.io(Request.GEM_CREATE, GemCreateArgs(size, 0, domain, 0)).handle)
        except KmdError as e:
            assert e.errno == errno.ENOMEM
            size >>= 1
    return handles


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_closed_files_job_that_runs_after_the_close_gives_its_vmid_back(monkeypatch):
    """A file closed while one context's job hangs and another's waits behind it, the
    close's wait for its queued jobs (Kmd.flush_file) ended by a signal: the reset
    resubmits the innocent job after the release, and it grabs a VMID for the closed file's
    VM. It was kept by the dead VM (and the address of its freed page directory) until
    another VM stole it."""
    kmd = kmd_model.bind(RefModel(), job_timeout=8_000, fallback_poll=1_000, hw_submission_limit=1)
    heaps = _start_state(kmd)
    c = Client()
    bo = c.bo(0x1000)
    ctx2 = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [2]), 0x200), ctx=ctx2)
    assert (len(kmd.sched.pending), len(kmd.sched.queue)) == (1, 1)
    came = []
    prev = signal.signal(signal.SIGUSR1, lambda *_: came.append(kmd.lock.owned()))
    flush = kmd.flush_file

    def interrupted(file):
        signal.raise_signal(signal.SIGUSR1)  # held: it ends the wait, its handler runs as close returns
        return flush(file)
    monkeypatch.setattr(kmd, "flush_file", interrupted)
    try:
        c.f.close()
    finally:
        signal.signal(signal.SIGUSR1, prev)
    assert came == [False] and kmd.stats["resets"] == 0 and len(kmd.sched.queue) == 1  # (released, still queued)
    assert_as_at_bring_up(kmd, heaps)
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)  # (queue 0's reset)
    assert kmd.vmids.grabs == 2  # the innocent job did run, on a VMID of its own


@pytest.mark.parametrize("seed", range(4))
def test_client_threads_racing_on_one_driver_lose_no_job_and_leave_it_as_it_was(seed):
    kmd = kmd_model.bind(RefModel(), job_timeout=8_000, fallback_poll=1_000, cs_check=seed % 2 == 0,
                         hw_submission_limit=[1, 2, 64, 64][seed % 4], cap_sys_nice=True)
    heaps = _start_state(kmd)
    shared = Client()
    sbo = shared.bo(0x10000)
    victim = Client()
    vbo = victim.bo(0x10000)
    vhigh = victim.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=512)).ctx_id
    files, errors, seqs, wrote = [shared, victim], [], {}, {}
    victim_addrs = [vbo.addr + 0xF000, victim.phys(vbo) + 0xF000]  # by its VA and by its physical address
    threads = [threading.Thread(target=_client_thread, args=(i, seed, shared, sbo, files, errors, seqs, victim_addrs),
                                daemon=True) for i in range(6)]
    threads.append(threading.Thread(target=_innocent_thread, args=(seed, victim, vbo, vhigh, wrote, errors),
                                    daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a client thread hangs"
    assert errors == []
    assert len(wrote) == 40 and {i: int(vbo.u32[i]) for i in wrote} == wrote and EVIL not in vbo.u32.tolist()
    assert victim.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, victim.ctx)).error is None
    for (fd, ctx), got in seqs.items():  # each seqno handed out once (no fence lost or doubled)
        assert sorted(got) == list(range(1, len(got) + 1)), (fd, ctx)  # (threads sharing a context append in any order)
    assert kmd.stats["cs"] == sum(len(s) for s in seqs.values()) + 40
    for c in files:
        c.f.close()
    assert_as_at_bring_up(kmd, heaps)


def test_more_files_than_vmids_with_jobs_held_delay_but_do_not_stop_another_client():
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, fallback_poll=1_000)
    heaps = _start_state(kmd)
    n = kmd.info.vmids  # one file more than the VMIDs jobs get (1..n-1), and one more
    held = []
    for _ in range(n + 1):
        c = Client()
        bo = c.bo(0x1000)
        held.append((c, bo, c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))))
    assert all(v.owner is not None for v in kmd.vmids.ids) and len(kmd.sched.queue) == 2  # two wait for a VMID
    victim = Client()
    vbo = victim.bo(0x1000)
    vseq = victim.submit(victim.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5])))
    assert victim.wait(vseq, 2_000_000) and vbo.u32[0x40] == 5  # behind every holder's timeout in turn
    for c, bo, seq in held:  # each one held its VMID until its timeout: guilty, ECANCELED
        with pytest.raises(KmdError) as ei:
            c.wait(seq)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert kmd.stats["job_timeouts"] == n + 1
    for c, _, _ in (*held, (victim, 0, 0)):
        c.f.close()
    assert_as_at_bring_up(kmd, heaps)


def test_a_client_that_holds_the_cp_and_fills_the_shadow_pool_only_delays_another_clients_cs():
    """One context holds the CP, another of the same client fills the 4 KiB shadow pool behind
    it. Another client's CS waits for room: its wait ended when the hold was reset, before
    the jobs behind it retired, and the CS was refused (ENOMEM). Now it waits while the
    pool drains, and runs."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=5_000, fallback_poll=1_000)
    heaps = _start_state(kmd)
    h = Client()
    hbo = h.bo(0x8000)
    fill = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    hbo.u32[0x400:0x500] = [pm4.TYPE2_FILLER] * 0x100
    held = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x7000, 1, 1, "EQ")))
    fills = [h.submit(CsChunkIb(0x100, hbo.handle, 0x1000), ctx=fill) for _ in range(3)]
    assert kmd.shadow.size - kmd.shadow.used < 0x400
    v = Client()
    vbo = v.bo(0x8000)
    vbo.u32[0x400:0x4F8] = [pm4.TYPE2_FILLER] * 0xF8
    vbo.u32[0x4F8:0x500] = pm4.write_data(vbo.addr + 0x100, [5]) + pm4.pad(3)
    seq = v.submit(CsChunkIb(0x100, vbo.handle, 0x1000))  # 1 KiB of copies: waits for the pool
    assert v.wait(seq) and vbo.u32[0x40] == 5
    with pytest.raises(KmdError) as ei:
        h.wait(held)
    assert ei.value.info.code == "TIMEOUT"
    assert all(h.wait(s, ctx=fill) for s in fills)  # innocent of the hang: resubmitted, and ran
    for c in (h, v):
        c.f.close()
    assert_as_at_bring_up(kmd, heaps)


def test_a_client_that_fills_vram_and_gtt_denies_only_new_memory_and_gives_it_all_back():
    kmd = kmd_model.bind(RefModel())
    heaps = _start_state(kmd)
    victim = Client()
    vbo = victim.bo(0x1000)
    hostile = Client()
    _fill(hostile, Domain.VRAM)
    _fill(hostile, Domain.GTT)
    assert all(h.used == h.size for h in kmd.bo.heaps.values())
    # what the victim already has still works: a job, a context, a mapping in a covered range
    assert victim.run(vbo, pm4.write_data(vbo.addr + 0x100, [5])) and vbo.u32[0x40] == 5
    victim.io(Request.CTX, CtxArgs(CtxOp.ALLOC))
    victim.io(Request.GEM_VA, GemVaArgs(vbo.handle, VaOp.MAP, vbo.addr + 0x2000, 0, 0x1000, RWX))
    # what needs memory says which and where
    with pytest.raises(KmdError) as ei:
        victim.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0))
    assert (ei.value.errno, ei.value.message) == (
        errno.ENOMEM, "GEM_CREATE: no 0x1000 bytes free in GTT (0x0 free, largest hole 0x0)")
    with pytest.raises(KmdError) as ei:  # a new file needs its page directory: named as the open's
        kmd_model.open_render_node()
    assert (ei.value.errno, ei.value.message) == (
        errno.ENOMEM, "open: the VM's page directory: no 0x1000 bytes free in VRAM (0x0 free, largest hole 0x0)")
    assert len(kmd.files) == 2
    hostile.f.close()
    assert victim.run(vbo, pm4.write_data(vbo.addr + 0x104, [6])) and vbo.u32[0x41] == 6
    again = Client()
    again.bo(0x10000, Domain.VRAM)
    for c in (victim, again):
        c.f.close()
    assert_as_at_bring_up(kmd, heaps)


def test_an_open_that_fails_half_way_through_its_page_tables_keeps_nothing():
    """Three levels: an open makes the root and the table the kernel's range hangs from. With
    one VRAM page free (another client holds the rest) the root took it and the second table
    failed: the root stayed allocated, owned by no one, for good (one page per failed open)."""
    kmd = kmd_model.bind(RefModel(vm_levels=3))
    hostile = Client()
    _fill(hostile, Domain.VRAM)
    vram = kmd.bo.heaps[Domain.VRAM]
    page = next(h for h, b in hostile.f.handles.items() if b.domain == Domain.VRAM and b.size == 0x1000)
    hostile.io(Request.GEM_CLOSE, GemCloseArgs(page))
    live = list(kmd.bo.live)
    assert vram.size - vram.used == 0x1000
    refusals = []
    for _ in range(3):
        with pytest.raises(KmdError) as ei:
            kmd_model.open_render_node()
        refusals.append((ei.value.errno, ei.value.message))
    assert kmd.bo.live == live and vram.size - vram.used == 0x1000
    assert set(refusals) == {
        (errno.ENOMEM, "open: the VM's page directory: no 0x1000 bytes free in VRAM (0x0 free, largest hole 0x0)")}
    hostile.f.close()
    Client().f.close()  # and an open works again


def test_a_client_hanging_every_ring_again_and_again_leaves_the_innocent_one_and_the_driver_whole(monkeypatch):
    monkeypatch.setattr(Kmd, "RECOVERY_KEPT", 8, raising=False)
    # (a context of its own for each hang: the file's ban, file_ban_after_hangs, is
    # tests/security/limits/test_security_contention.py's)
    kmd = kmd_model.bind(RefModel(), job_timeout=8_000, fallback_poll=1_000, file_ban_after_hangs=31, cap_sys_nice=True)
    heaps = _start_state(kmd)
    v = Client()
    vbo = v.bo(0x10000)
    vhigh = v.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=512)).ctx_id  # its jobs: the CP's second queue
    h = Client()
    hbo = h.bo(0x10000)
    n = 30
    for i in range(n):
        ring = i % 3  # gfx, sdma0, gfx_high in turn
        ctx = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=512 if ring == 2 else 0)).ctx_id
        flag = hbo.addr + 0xF000  # never set
        hang = (sdma_ib(hbo, sdma.poll_regmem(flag, 1, 1, "EQ", interval=4), 0x100 * i) if ring == 1
                else h.ib(hbo, pm4.wait_reg_mem(flag, 1, 1, "EQ"), 0x100 * i))
        hs = h.submit(hang, ctx=ctx)
        at, off = vbo.addr + 0xE000 + 4 * i, 0x8000 + 0x100 * i  # the innocent job behind it, on its ring
        vs = v.submit(sdma_ib(vbo, sdma.write_linear(at, [i + 1]), off) if ring == 1
                      else v.ib(vbo, pm4.write_data(at, [i + 1]), off), ctx=vhigh if ring == 2 else v.ctx)
        with pytest.raises(KmdError) as ei:
            h.wait(hs, 100_000, ctx=ctx)
        assert ei.value.errno == errno.ECANCELED
        assert h.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, ctx)).reset_status == ResetStatus.GUILTY
        assert v.wait(vs, 100_000, ctx=vhigh if ring == 2 else v.ctx)
    assert vbo.u32[0xE000 // 4: 0xE000 // 4 + n].tolist() == list(range(1, n + 1))
    for ctx in (v.ctx, vhigh):
        q = v.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, ctx))
        assert q.reset_status == ResetStatus.INNOCENT and q.error is None
    s = kmd.stats
    assert (s["resets"], s["queue_resets"], s["job_timeouts"]) == (0, n, n)  # every ring's queue reset, gfx's too
    assert len(kmd.recovery_log) == 8  # the latest steps only: 60 were taken (a timeout and a queue reset each)
    assert kmd.recovery_log == [(r, step) for r in ("gfx_high", "gfx", "sdma0", "gfx_high")  # (hangs 26 to 29)
                                for step in ("timeout", "queue_reset")]
    for c in (v, h):
        c.f.close()
    assert_as_at_bring_up(kmd, heaps)


def test_a_wedged_device_leaves_nothing_behind_once_its_files_close():
    """A reset that fails wedges the device (every job EIO): the files still close to nothing
    of theirs, the memory they held quarantined (the engine may still reach it: never freed
    to a heap, tests/security/memory/test_security_wedged.py). The fences of the jobs it cancelled
    stayed pending in their fence drivers."""
    from tests.kmd_sched.reset.test_kmd_recovery import _reset_that_fails
    kmd, a, b, abo, bbo, hold, bad, queued = _reset_that_fails()
    with pytest.raises(KmdError) as ei:
        a.wait(bad)
    assert ei.value.errno == errno.EIO and kmd.wedged
    for c in (a, b):
        c.f.close()
    assert not kmd.live_bos() and kmd.shadow.used == 0 and [v.n for v in kmd.vmids.ids if v.owner] == []
    assert kmd.bo.quarantined > 0
    assert [len(s.fence_drv.pending) for s in kmd.scheds] == [0] * len(kmd.scheds)
    assert kmd.stats["jobs_retired"] + kmd.stats["jobs_cancelled"] == kmd.stats["cs"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the process's descriptors in /proc")
def test_gem_mmap_in_a_loop_takes_one_os_mapping_per_bo_not_one_descriptor_per_call():
    """Each GEM_MMAP made an OS mapping of its own, and each holds a descriptor (Python's mmap
    keeps a dup) until GEM_CLOSE: a client mapping one BO in a loop used up the process's
    descriptors (EMFILE after 19,993 here), and then every client's GEM_MMAP failed too."""
    kmd_model.bind(RefModel())
    c, other = Client(), Client()
    h = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
    before = _open_fds()
    views = [c.io(Request.GEM_MMAP, GemMmapArgs(h)).view for _ in range(2000)]
    assert _open_fds() - before <= 1
    views[7][0x10] = 0x5A
    assert views[1999][0x10] == 0x5A  # one BO's pages, whichever call's array
    obo = other.bo(0x1000)  # the other client maps as before
    obo.u32[0] = 1
    c.io(Request.GEM_CLOSE, GemCloseArgs(h))
    for v in (views[0], views[1999]):  # every one of them revoked
        with pytest.raises(MappingRevoked):
            v[0] = 1
    assert obo.u32[0] == 1


def test_a_cpu_mapping_the_os_refuses_is_a_one_line_error(monkeypatch):
    import kmd_model.core.clients as clients

    def refuse(*args):
        raise OSError(errno.EMFILE, "Too many open files")
    kmd_model.bind(RefModel())
    c = Client()
    h = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
    monkeypatch.setattr(clients, "map_bo", refuse)
    with pytest.raises(KmdError) as ei:
        c.io(Request.GEM_MMAP, GemMmapArgs(h))
    assert (ei.value.errno, ei.value.message) == (
        errno.EMFILE, "GEM_MMAP: BO fd3:1: the OS refused a CPU mapping (Too many open files)")
    monkeypatch.undo()
    assert c.io(Request.GEM_MMAP, GemMmapArgs(h)).view.size == 0x1000  # nothing was kept of the failed one
