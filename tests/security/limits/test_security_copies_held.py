"""The checked copies a client's CSs hold inside the driver (hostile-20).

A CS's check copies every IB its job reaches (kmd_model/cs/checker.py), up to `max_job_dw`
dwords: some 8 MiB for a maximum job. The copies go into the shadow pool, which bounds them
for the device; but a CS that waits first (for its context's oldest job, `sched_jobs`; for
room in the pool; after a pause of its check that let other ioctls in) keeps its check
meanwhile (ShadowWait.kept_check), outside the pool. Each thread of a client could have one
such CS, all of one 8 MiB BO of its own: 4 threads held 31 MiB of the process's memory
(every client's), 64 threads 500 MiB. Now the copies a file's CSs hold inside the ioctl count
against the file (`File.copies_held`, Kmd.charge_copies), at most the pool's size: the copy
that would pass it is ENOMEM, and one CS alone never does (its copies are at most half the
pool). Every ending of a CS gives its bytes back. For the device, whatever the files, the
checks kept through a wait take at most Kmd.PARKED_POOLS pools: a CS past them drops its
check before it waits and checks again after (the waiting frame held it in any case).
The checks under way, each paused with its copies while the lock went to others, were
each file's bound alone (hostile-21): 16 files' maximum checks at once held 8 pools. A check
pauses with its copies only in one of Kmd.CHECKS_PAUSED turns, every file's; without one it
drops them and waits for a turn holding none.
"""

from __future__ import annotations

import errno
import gc
import threading
import time
import tracemalloc

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CtxOp, Request
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client

POOL_KIB = 64  # max_job_dw: 8,192 dwords, 32 KiB of copies, half the pool
BIG_DW = 8192


def _setup(c: Client, dw: int = BIG_DW):
    """c's BO with a held job in its first context (a WAIT_REG_MEM on a flag nobody sets)
    and, at 0x10000, an IB of `dw` dwords (BIG_DW: the largest job, 32 KiB of copies, at
    POOL_KIB); the flag's dword index in memory and the big IB's chunk."""
    bo = c.bo(0x10000 + 4 * dw)
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x1000, 1, 1, "EQ")))
    bo.u32[0x4000:0x4000 + dw] = pm4.nop(1023) * (dw // 1024)
    return c.phys(bo) // 4 + 0x400, uapi.CsChunkIb(dw, handle=bo.handle, offset=0x10000)


def _submit_in_thread(c: Client, chunk, ctx: int, out: list) -> threading.Thread:
    def run() -> None:
        try:
            out.append(c.submit(chunk, ctx=ctx))
        except kmd_model.uapi.KmdError as e:
            out.append((e.errno, e.message))  # (not the exception: its traceback holds the check's frames)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _settled(kmd, t: threading.Thread, out: list) -> None:
    """Until the CS in `t` is refused, or waits inside the driver: simulated time moves on
    by three of its wait's steps with the thread still in it (a check of BIG_DW dwords takes
    one lock hold, well before)."""
    t0 = kmd.dev.now()
    for _ in range(4000):
        if out or not t.is_alive() or kmd.dev.now() > t0 + 3 * 2_000:
            return
        time.sleep(0.005)
    raise AssertionError("the CS neither waited nor returned")


def test_a_files_waiting_css_hold_at_most_the_pools_size_of_copies_the_next_is_enomem():
    """sched_jobs 1 and a held job: every CS of the context waits for it with its check. Two
    maximum CSs of one file wait (the pool's size of copies between them); a third, of
    another context of the file, is ENOMEM at once, naming its own and the file's others'
    bytes; another client's maximum CS waits as before (the bound is the file's). Before,
    the third waited too, a thread each, its 32 KiB (8 MiB at the default pool) held."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=POOL_KIB, sched_jobs=1, job_timeout=1 << 40,
                         fallback_poll=2_000)
    a, v = Client(), Client()
    aflag, achunk = _setup(a)
    vflag, vchunk = _setup(v)
    other_ctx = a.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    outs: list[list] = [[], [], []]
    threads = []
    try:
        for k in range(2):
            threads.append(_submit_in_thread(a, achunk, a.ctx, outs[k]))
            _settled(kmd, threads[-1], outs[k])
        assert not outs[0] and not outs[1]  # (both wait for the held job)
        # a's third CS, of a context with nothing to wait for: refused at its check's copy
        third: list = []
        _submit_in_thread(a, achunk, other_ctx, third).join(30)
        assert third == [(errno.ENOMEM, "CS: this file's CSs inside the driver would hold more than 0x10000 bytes "
                          "of checked copies outside the shadow pool (its size): this one 0x8000, the file's others "
                          "0x10000 (they wait for their context's slot or for room in the pool)")]
        assert a.f.copies_held == 0x10000
        # another client's CS waits for its own slot as before
        threads.append(_submit_in_thread(v, vchunk, v.ctx, outs[2]))
        _settled(kmd, threads[-1], outs[2])
        assert not outs[2] and threads[-1].is_alive()
    finally:
        kmd.mem32[aflag] = 1
        kmd.mem32[vflag] = 1
        for t in threads:
            t.join(60)
    assert all(len(o) == 1 and isinstance(o[0], int) for o in outs[:3]), outs
    assert a.wait(outs[0][0]) and a.wait(outs[1][0]) and v.wait(outs[2][0])
    assert a.f.copies_held == 0 and v.f.copies_held == 0


def test_many_threads_of_one_file_waiting_with_their_checks_hold_a_bounded_memory():
    """Eight threads of one file, each a maximum CS of the same BO waiting for its context's
    slot: the process's memory grows by about the pool's size of copies (256 KiB here), not
    eight CSs' (1 MiB here, 64 MiB at the default pool)."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=256, sched_jobs=1, job_timeout=1 << 40,
                         fallback_poll=2_000)
    a = Client()
    aflag, achunk = _setup(a, 4 * BIG_DW)
    outs: list[list] = [[] for _ in range(8)]
    threads = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(8):
            threads.append(_submit_in_thread(a, achunk, a.ctx, outs[k]))
            _settled(kmd, threads[-1], outs[k])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        kmd.mem32[aflag] = 1
        for t in threads:
            t.join(60)
    assert held < 2 * 0x40000, f"{held:#x} bytes held by 8 waiting CSs"  # (8 CSs' copies: 0x100000)
    results = [o[0] for o in outs]
    assert sum(isinstance(r, int) for r in results) == 2
    assert all(r[0] == errno.ENOMEM for r in results if not isinstance(r, int)), results
    assert a.f.copies_held == 0


def test_every_ending_of_a_cs_gives_its_copies_bytes_back():
    """A CS refused by its check after copying (a bad packet at its end), one placed in the
    pool, one that waited then ran: the file's count is 0 after each, and 20 refused
    maximum CSs (10 pools' worth) leave the next one accepted. A byte not given back would
    make the file ENOMEM for good."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=POOL_KIB, job_timeout=1 << 40, fallback_poll=2_000)
    a = Client()
    bo = a.bo(0x30000)
    bo.u32[0x4000:0x4000 + BIG_DW] = pm4.nop(1023) * (BIG_DW // 1024)
    # (the last NOP shortened: a WRITE_DATA to 0x10, outside a's mappings, after it)
    bo.u32[0x8000:0x8000 + BIG_DW] = pm4.nop(1023) * 7 + pm4.nop(1015) + pm4.write_data(0x10, [1]) + pm4.pad(3)
    for _ in range(20):
        try:
            a.submit(uapi.CsChunkIb(BIG_DW, handle=bo.handle, offset=0x20000))
        except kmd_model.uapi.KmdError as e:
            assert e.errno == errno.EINVAL and "outside every mapping" in e.message, e
        else:
            raise AssertionError("the bad CS was accepted")
        assert a.f.copies_held == 0
    assert a.wait(a.submit(uapi.CsChunkIb(BIG_DW, handle=bo.handle, offset=0x10000)))
    assert a.f.copies_held == 0


def test_a_css_check_made_again_after_its_wait_does_not_count_twice():
    """Two maximum CSs of one file wait for their contexts' slots, each with its check (the
    pool's size of copies between them); meanwhile the file maps another BO, so each checks
    again once its slot is free. The check it kept is dropped as the new one begins: counted
    with it, the first to check again was ENOMEM (its old copies and the other CS's made the
    pool's size already)."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=POOL_KIB, sched_jobs=1, job_timeout=1 << 40,
                         fallback_poll=2_000)
    a = Client()
    aflag, achunk = _setup(a)
    other = a.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    obo = a.bo(0x1000)  # (other's held job: its flag at obo + 0x800)
    a.submit(a.ib(obo, pm4.wait_reg_mem(obo.addr + 0x800, 1, 1, "EQ")), ctx=other)
    oflag = a.phys(obo) // 4 + 0x200
    outs: list[list] = [[], []]
    threads = []
    try:
        for k, ctx in enumerate((a.ctx, other)):
            threads.append(_submit_in_thread(a, achunk, ctx, outs[k]))
            _settled(kmd, threads[-1], outs[k])
        assert not outs[0] and not outs[1] and a.f.copies_held == 0x10000
        a.bo(0x1000)  # the file's mappings change: both checks are made again
        kmd.mem32[aflag] = 1
        kmd.mem32[oflag] = 1
        for t in threads:
            t.join(60)
    finally:
        kmd.mem32[aflag] = 1
        kmd.mem32[oflag] = 1
        for t in threads:
            t.join(60)
    assert [type(o[0]) for o in outs] == [int, int], outs
    assert a.wait(outs[0][0]) and a.wait(outs[1][0], ctx=other) and a.f.copies_held == 0


def test_checks_kept_through_waits_are_bounded_for_the_device_whatever_the_files():
    """Eight files, each with a maximum CS waiting for its context's slot (each file under
    its own bound): the checks kept through the waits take at most Kmd.PARKED_POOLS shadow
    pools, every file's; the CSs past that drop theirs and check again after their wait.
    Before, each kept its check (held by the waiting frame in any case): memory in
    proportion to the files (8 CSs' copies, 1 MiB at this pool of 256 KiB; 8 MiB a file at
    the default). Every CS still runs."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=256, sched_jobs=1, job_timeout=1 << 40,
                         fallback_poll=2_000)
    clients = [Client() for _ in range(8)]
    setups = [_setup(c, 4 * BIG_DW) for c in clients]
    outs: list[list] = [[] for _ in clients]
    threads = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k, (c, (_, chunk)) in enumerate(zip(clients, setups)):
            threads.append(_submit_in_thread(c, chunk, c.ctx, outs[k]))
            _settled(kmd, threads[-1], outs[k])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        parked = kmd.copies_parked
        assert not any(outs)  # (every CS waits for its held job)
    finally:
        tracemalloc.stop()
        for flag, _ in setups:
            kmd.mem32[flag] = 1
        for t in threads:
            t.join(60)
    assert parked <= kmd.PARKED_POOLS * kmd.shadow.size, parked
    # (8 CSs' copies: 0x100000)
    assert held < (kmd.PARKED_POOLS + 1) * kmd.shadow.size, f"{held:#x} bytes held by 8 waiting CSs"
    assert all(len(o) == 1 and isinstance(o[0], int) for o in outs), outs
    assert all(c.wait(o[0]) for c, o in zip(clients, outs))
    assert kmd.copies_parked == 0 and all(c.f.copies_held == 0 for c in clients)


# ---------------------------------------------------------------------------- checks in progress

TURNS = 4  # (Kmd.CHECKS_PAUSED)


def _checks_across_files(monkeypatch, files: int) -> tuple[int, list, object]:
    """`files` files, a thread each submitting a maximum CS (BIG_DW dwords of NOPs) at once, the
    checker pausing every 512 dwords of work (PAUSE_DW: 65,536 at the default): the most bytes
    of copies the checks in progress held (every file's copies held inside the driver, those
    kept through a wait, Kmd.copies_parked, left out) at any hand-over of the lock; the CSs'
    answers; the driver."""
    from kmd_model.cs import checker
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=POOL_KIB, job_timeout=1 << 40, fallback_poll=2_000)
    monkeypatch.setattr(checker, "PAUSE_DW", 512)
    clients = [Client() for _ in range(files)]
    chunks = []
    for c in clients:
        bo = c.bo(0x10000 + 4 * BIG_DW)
        bo.u32[0x4000:0x4000 + BIG_DW] = pm4.nop(1023) * (BIG_DW // 1024)
        bo.u32[0x10] = 0
        chunks.append((bo, uapi.CsChunkIb(BIG_DW, handle=bo.handle, offset=0x10000)))
    most = [0]
    real = kmd.lock.yield_to_waiters

    def step() -> None:
        held = sum(f.copies_held for f in kmd.files.values()) - kmd.copies_parked
        most[0] = max(most[0], held)
        real()
    monkeypatch.setattr(kmd.lock, "yield_to_waiters", step)
    outs: list[list] = [[] for _ in clients]
    go = threading.Barrier(files)

    def run(k: int) -> None:
        go.wait()
        try:
            outs[k].append(clients[k].submit(chunks[k][1]))
        except kmd_model.uapi.KmdError as e:
            outs[k].append((e.errno, e.message))
    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(files)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert all(len(o) == 1 and isinstance(o[0], int) for o in outs), outs
    assert all(c.wait(o[0], 1 << 30) for c, o in zip(clients, outs))
    return most[0], outs, kmd


def test_checks_in_progress_hold_a_bounded_memory_for_the_device_whatever_the_files(monkeypatch):
    """Sixteen files, each a maximum CS at once (each file under its own bound, one pool): each
    check paused as the lock went to the others, its copies held, so the checks in progress
    held copies in proportion to the files (up to 16 maximum checks, 8 pools; 128 MiB at the
    default pool). A check may pause holding its copies only with one of Kmd.CHECKS_PAUSED
    slots, every file's; without one, it drops them and waits for a slot holding nothing:
    at most CHECKS_PAUSED maximum checks. Every CS still runs, and gives its slot back."""
    most, outs, kmd = _checks_across_files(monkeypatch, 16)
    half = kmd.shadow.size // 2  # (a maximum job's copies: BIG_DW dwords)
    assert most <= TURNS * half, f"{most:#x} bytes of copies held by checks in progress"  # (was 8 pools)
    assert kmd.CHECKS_PAUSED == TURNS and kmd.checks_paused == 0 and kmd.copies_parked == 0
    assert all(f.copies_held == 0 for f in kmd.files.values())


def test_a_cs_whose_check_never_pauses_takes_no_slot_and_never_waits_for_one(monkeypatch):
    """With every slot taken (CHECKS_PAUSED checks paused), a small CS (a check that never
    hands the lock over) goes ahead at once, and a large one that would pause waits for a
    slot, holding no copies, and runs once one is free."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=POOL_KIB, job_timeout=1 << 40, fallback_poll=2_000)
    from kmd_model.cs import checker
    monkeypatch.setattr(checker, "PAUSE_DW", 512)
    c = Client()
    bo = c.bo(0x10000 + 4 * BIG_DW)
    kmd.checks_paused = kmd.CHECKS_PAUSED  # (as if that many checks were paused)
    small = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [5])))
    assert c.wait(small) and bo.u32[0x40] == 5 and kmd.checks_paused == kmd.CHECKS_PAUSED
    bo.u32[0x4000:0x4000 + BIG_DW] = pm4.nop(1023) * (BIG_DW // 1024)
    out: list = []
    other = Client()
    entered: list = []
    real_wait = type(kmd).wait_check_slot

    def wait_check_slot(self, file, wait):
        entered.append(file.copies_held)  # (what the waiting CS's file holds as it waits)
        return real_wait(self, file, wait)
    monkeypatch.setattr(type(kmd), "wait_check_slot", wait_check_slot)

    def big() -> None:
        # (a check pauses only when another thread waits for the lock at one of its steps:
        # submitted again until one did)
        while not entered:
            try:
                out.append(c.submit(uapi.CsChunkIb(BIG_DW, handle=bo.handle, offset=0x10000)))
            except kmd_model.uapi.KmdError as e:
                out.append((e.errno, e.message))
    done = threading.Event()

    def pester() -> None:  # another client's ioctls all along: the big check would pause for them
        while not done.is_set():
            other.io(Request.INFO, uapi.InfoArgs(uapi.InfoQuery.DEV_INFO))
    p = threading.Thread(target=pester, daemon=True)
    p.start()
    before = len(out)
    t = threading.Thread(target=big, daemon=True)
    t.start()
    for _ in range(3000):
        if entered:
            break
        time.sleep(0.01)
    time.sleep(0.2)
    assert entered == [0] and t.is_alive(), (entered, out)  # (it waits for a slot, holding no copies)
    waited = len(out)
    kmd.checks_paused = 0  # (the slots free)
    t.join(60)
    done.set()
    p.join(60)
    assert not t.is_alive() and len(out) == waited + 1 and all(isinstance(o, int) for o in out), (before, out)
    assert c.wait(out[-1]) and kmd.checks_paused == 0 and c.f.copies_held == 0


def test_turns_to_check_are_served_in_order():
    """A CS waiting for a turn (Kmd.wait_check_slot) is served before a check that comes to
    its first pause later, even with a turn free: that check drops its copies and waits
    behind it (a client's threads pausing one check after another took every turn freed,
    the waiting CS's for ever)."""
    from kmd_model.cs.shadow import ShadowWait
    kmd = kmd_model.bind(RefModel())
    first, later = object(), ShadowWait()
    kmd.check_waiters.append(first)
    assert kmd.checks_paused == 0 and not kmd.check_slot(later) and later.wants_slot and not later.slot
    kmd.check_waiters.remove(first)
    now = ShadowWait()
    assert kmd.check_slot(now) and now.slot and kmd.checks_paused == 1
    kmd.check_slot_release(now)
    assert kmd.checks_paused == 0 and not now.slot
