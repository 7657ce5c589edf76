"""The KMD under contention (round 3 of the hostile program, helper 75): what one client's
waits inside the driver cost the others.

- A CS past its context's `sched_jobs` unfinished jobs on a ring waits for the oldest
  (amdgpu_ctx_wait_prev_fence). It waited with the driver's lock held, so one client that
  filled its slots with a held job stopped every other client's ioctls, GEM_CREATE and INFO
  too, until its oldest job ended (its reset, a `job_timeout` later). WAIT_CS and
  GEM_WAIT_IDLE did the same for as long as the client asked, and a GEM_VA MAP over a closed
  BO its held jobs use for up to 2 * job_timeout. Such waits now let other
  clients' ioctls in between their steps (`Kmd.wait_unlocked`), and a CS that waited checks
  its whole argument list again: the file, the context, the BOs may have changed meanwhile.
- Hanging jobs ahead of an innocent one delay it a reset each (drm_sched's per-ring timer, as
  amdgpu's). Each cost two job timeouts (1.0 M cycles by default: the timer's first look only
  marked where the CP was): it costs job_timeout * 9 / 8 now. And a file could hang on
  purpose once per context, 4,095 contexts (each banned after `ban_after_hangs` only): a file
  whose jobs timed out `file_ban_after_hangs` (8) times is banned, every context. Files are
  the bound that stays: N files, N resets.
"""

from __future__ import annotations

import errno
import threading
import time

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import InfoQuery, KmdError, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import sdma_ib


def _held(c: Client, bo, n: int) -> list[int]:
    """A job held in a WAIT_REG_MEM on bo+0x800 (nobody sets it), then n - 1 small jobs behind it."""
    seqs = [c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))]
    for i in range(1, n):
        seqs.append(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000 + 4 * i, [i]), 0x2000 + 0x20 * i)))
    return seqs


class _Waiter(threading.Thread):
    """A client's ioctl in a thread of its own: its result or exception in `out`."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.out = fn, []

    def run(self) -> None:
        try:
            self.out.append(self.fn())
        except Exception as e:  # noqa: BLE001 (the test looks at it)
            self.out.append(e)


def _in_wait(kmd, t: _Waiter, since: int) -> None:
    """Until the thread is waiting inside the driver: simulated time moves under it."""
    for _ in range(2000):
        if kmd.dev.now() > since or not t.is_alive():
            break
        time.sleep(0.005)
    assert t.is_alive() and kmd.dev.now() > since, "the waiting ioctl did not start waiting"


def _innocent_calls(kmd, v: Client) -> dict:
    """Another client's ioctls, each with the driver's job_timeouts seen as it returned."""
    seen = {}
    seen["INFO"] = (v.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO)), kmd.stats["job_timeouts"])
    seen["GEM_CREATE"] = (v.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0)),
                          kmd.stats["job_timeouts"])
    vbo = v.bo(0x1000)
    seen["CS"] = (v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5]))), kmd.stats["job_timeouts"])
    return seen


JOB_TIMEOUT = 2_000_000  # long enough that the hold outlasts the innocent's calls by far


@pytest.mark.parametrize("how", ["cs_past_sched_jobs", "wait_cs", "gem_wait_idle", "gem_va_over_a_closed_bo"])
def test_a_client_waiting_in_the_driver_does_not_stop_other_clients_ioctls(how):
    kmd = kmd_model.bind(RefModel(), job_timeout=JOB_TIMEOUT, fallback_poll=1_000, sched_jobs=4)
    h, v = Client(), Client()
    hbo = h.bo(0x4000)
    hold = (h.phys(hbo) + 0x800) // 4
    seqs = _held(h, hbo, 4)
    t0 = kmd.dev.now()
    if how == "cs_past_sched_jobs":
        fn = lambda: h.submit(h.ib(hbo, pm4.write_data(hbo.addr + 0x3F00, [33]), 0x1F00))  # noqa: E731
    elif how == "wait_cs":
        fn = lambda: h.wait(seqs[0], 1 << 40)  # noqa: E731
    elif how == "gem_wait_idle":
        fn = lambda: h.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(hbo.handle, 1 << 40)).busy  # noqa: E731
    else:  # a MAP over the range of a closed BO the held jobs use waits for them
        new = h.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x4000, 0, uapi.Domain.GTT, 0)).handle
        h.io(Request.GEM_CLOSE, uapi.GemCloseArgs(hbo.handle))
        fn = lambda: h.io(Request.GEM_VA, uapi.GemVaArgs(new, uapi.VaOp.MAP, hbo.addr, 0, 0x4000,  # noqa: E731
                                                          uapi.VmFlags.READABLE | uapi.VmFlags.WRITEABLE))
    t = _Waiter(fn)
    t.start()
    try:
        _in_wait(kmd, t, t0)
        seen = _innocent_calls(kmd, v)
        # each returned while the hostile job still held the CP: no reset had happened
        assert {k: n for k, (_, n) in seen.items()} == {"INFO": 0, "GEM_CREATE": 0, "CS": 0}
        assert t.is_alive() and kmd.stats["job_timeouts"] == 0
    finally:
        kmd.mem32[hold] = 1  # the hold ends: the waiting thread's ioctl returns
        t.join(60)
    assert not t.is_alive() and not isinstance(t.out[0], Exception), t.out
    assert kmd.stats["job_timeouts"] == 0 and kmd.dev.now() - t0 < JOB_TIMEOUT
    if how == "cs_past_sched_jobs":
        assert h.wait(t.out[0]) and hbo.u32[0x3F00 // 4] == 33
    if how == "gem_va_over_a_closed_bo":
        assert h.f.vm.find(hbo.addr).bo is h.f.handles[new]
    assert v.wait(seen["CS"][0])


@pytest.mark.parametrize("change", ["gem_close_fence_bo", "gem_close_ib_bo", "ctx_free", "close_file"])
def test_a_cs_that_waited_for_a_slot_looks_at_its_arguments_again(change):
    """While a CS waits for its context's oldest job, another thread of the client changes
    what it named: the CS that then goes ahead must not use what it looked up before the
    wait (a closed fence BO's page is the next client's; so is a closed IB BO's)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=JOB_TIMEOUT, fallback_poll=1_000, sched_jobs=4)
    h = Client()
    hbo, ibo, fbo = h.bo(0x4000), h.bo(0x1000), h.bo(0x1000)
    _held(h, hbo, 4)
    hold = (h.phys(hbo) + 0x800) // 4  # (the file's CPU mappings go with it)
    ib = h.ib(ibo, pm4.write_data(ibo.addr + 0x100, [33]))
    t0 = kmd.dev.now()
    t = _Waiter(lambda: h.submit(ib, uapi.CsChunkFence(fbo.handle, 0)))
    t.start()
    try:
        _in_wait(kmd, t, t0)
        if change == "gem_close_fence_bo":
            h.io(Request.GEM_CLOSE, uapi.GemCloseArgs(fbo.handle))
            want = (errno.EINVAL, f"CS: chunk 1: no BO with handle {fbo.handle}")
        elif change == "gem_close_ib_bo":
            h.io(Request.GEM_CLOSE, uapi.GemCloseArgs(ibo.handle))
            want = (errno.ENOENT, f"CS: chunk 0: no BO with handle {ibo.handle}")
        elif change == "ctx_free":
            h.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, h.ctx))
            want = (errno.EINVAL, f"CS: no context {h.ctx} on this file")
        else:
            h.f.close()
            want = (errno.EBADF, "CS: the file was closed while the CS waited")
        assert t.is_alive()
    finally:
        kmd.mem32[hold] = 1
        t.join(60)
    assert not t.is_alive()
    e = t.out[0]
    assert isinstance(e, KmdError) and (e.errno, e.message) == want, e
    assert kmd.stats["cs"] == 4  # the refused CS queued nothing
    kmd.wait_for(lambda: not any(s.pending or s.queue for s in kmd.scheds), JOB_TIMEOUT)
    if change != "close_file":
        h.f.close()
    assert not kmd.live_bos(h.f)



def test_a_gem_va_whose_file_is_closed_while_it_waits_is_ebadf():
    """A MAP over a closed BO still in use waits without the driver's lock; another thread of
    the client closes the file meanwhile: the MAP, when its wait ends, maps nothing into the
    destroyed VM and says why (not a lookup error of a handle the close took)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=JOB_TIMEOUT, fallback_poll=1_000)
    h = Client()
    hbo = h.bo(0x4000)
    hold = (h.phys(hbo) + 0x800) // 4
    _held(h, hbo, 1)
    new = h.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x4000, 0, uapi.Domain.GTT, 0)).handle
    h.io(Request.GEM_CLOSE, uapi.GemCloseArgs(hbo.handle))
    t0 = kmd.dev.now()
    t = _Waiter(lambda: h.io(Request.GEM_VA, uapi.GemVaArgs(new, uapi.VaOp.MAP, hbo.addr, 0, 0x4000,
                                                            uapi.VmFlags.READABLE)))
    t.start()
    try:
        _in_wait(kmd, t, t0)
        h.f.close()
        assert t.is_alive()
    finally:
        kmd.mem32[hold] = 1
        t.join(60)
    assert not t.is_alive()
    e = t.out[0]
    assert isinstance(e, KmdError) and (e.errno, e.message) == (
        errno.EBADF, "GEM_VA: the file was closed while the GEM_VA waited for its closed BOs' jobs"), e
    assert not kmd.live_bos(h.f)


# ------------------------------------------------------------------------------ hangs ahead of an innocent job

T_OUT = 20_000


def _hangs_then_innocent(kmd, hostile: list[tuple[Client, int]]) -> int:
    """Each (client, context) submits a job that never ends, then an innocent client one job:
    the cycles from its CS to its fence."""
    for h, ctx in hostile:
        bo = h.bo(0x1000)
        h.submit(h.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")), ctx=ctx)
    v = Client()
    vbo = v.bo(0x1000)
    t0 = kmd.dev.now()
    seq = v.submit(v.ib(vbo, pm4.write_data(vbo.addr + 0x100, [5])))
    assert v.wait(seq, 1 << 40) and vbo.u32[0x40] == 5
    return kmd.dev.now() - t0


@pytest.mark.parametrize("n", [1, 3, 4])
def test_each_hanging_file_ahead_of_an_innocent_job_costs_it_one_reset_of_nine_eighths_of_job_timeout(n):
    """Measured with the default job_timeout (500,000): 1, 3, 4, 15 files ahead cost 562,700,
    1,687,988, 2,250,632 and 8,439,716 cycles (1,000,400, 4,001,432, 15,005,216 before the
    timer's first look moved to job_timeout / 8). Each hang is found by its own timeout; the
    innocent job waits in the ring behind them, is resubmitted after each reset (its n + 1
    runs), never cancelled, and its own timer never runs out: it starts only once the job
    ahead of it is gone, as drm_sched's does (docs/architecture.md, "Hangs ahead of an
    innocent job", compares amdgpu)."""
    runs: dict = {}
    kmd = kmd_model.bind(RefModel(), job_timeout=T_OUT, fallback_poll=1_000,
                         observers=[lambda ev, f: ev == "run_job" and runs.setdefault(f["job"].ctx.file.fd, []).append(
                             f["job"].error)])
    hostile = []
    for _ in range(n):
        h = Client()
        hostile.append((h, h.ctx))
    took = _hangs_then_innocent(kmd, hostile)
    # (each a reset of queue 0 alone: the innocent job is in that ring, resubmitted by each)
    assert kmd.stats["job_timeouts"] == kmd.stats["queue_resets"] == n and kmd.stats["resets"] == 0
    assert n * T_OUT * 9 // 8 <= took < n * (T_OUT * 9 // 8 + 1_000)  # (was n * 2 * T_OUT)
    innocent = max(runs)  # (the last file opened)
    assert runs[innocent] == [None] * (n + 1)


def test_a_file_whose_jobs_time_out_file_ban_after_hangs_times_is_banned_every_context():
    """32 contexts of one file, a hang in each: the innocent job behind them waited 32 resets
    (32.0 M cycles at the default job_timeout); the file's ban after 8 ends it (4.5 M)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=T_OUT, fallback_poll=1_000)
    assert kmd.params.file_ban_after_hangs == 8
    h = Client()
    ctxs = [h.ctx] + [h.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC)).ctx_id for _ in range(31)]
    took = _hangs_then_innocent(kmd, [(h, c) for c in ctxs])
    assert kmd.stats["job_timeouts"] == 8 and took < 8 * (T_OUT * 9 // 8 + 1_000)
    why = f"fd {h.f.fd} is banned: its contexts' jobs timed out 8 times (file_ban_after_hangs 8)"
    bo = h.bo(0x1000)
    with pytest.raises(KmdError) as ei:  # a context that never hung: banned with its file
        h.submit(h.ib(bo, pm4.write_data(bo.addr + 0x100, [1])), ctx=ctxs[-1])
    assert (ei.value.errno, ei.value.message) == (errno.EIO, f"CS: {why}")
    with pytest.raises(KmdError) as ei:  # and its jobs were cancelled
        h.wait(1, ctx=ctxs[-1])
    assert (ei.value.errno, ei.value.message) == (errno.ECANCELED, f"WAIT_CS: {why}")
    with pytest.raises(KmdError) as ei:
        h.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC))
    assert (ei.value.errno, ei.value.message) == (errno.EIO, f"CTX ALLOC: {why}")
    # not BANNED, the flag by which the UMD tells a banned queue (make a new one) from a lost
    # device: for this client the device is lost (DeviceLost)
    flags = h.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, ctxs[-1])).flags
    assert not flags & uapi.CtxQueryFlags.BANNED
    assert not any(s.pending or s.queue for s in kmd.scheds)
    h.f.close()
    assert not kmd.live_bos(h.f)


def test_a_file_banned_by_a_queue_reset_keeps_its_job_running_on_another_ring():
    """A file banned by a timeout on the SDMA ring (a queue reset: the gfx ring runs on): the
    job of it the CP is running is not cancelled, it ends as it would, its write done and its
    WAIT_CS answered well; only queued jobs go from a ring that was not reset (drm_sched
    cancels what it has not handed to the hardware)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, fallback_poll=1_000, file_ban_after_hangs=1)
    h = Client()
    other = h.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC)).ctx_id
    bo = h.bo()
    hang = h.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x3000, 1, 0xFFFFFFFF, "EQ", interval=4)))
    assert not kmd.wait_for(lambda: False, 15_000)  # the gfx job starts late: it outlives the SDMA reset
    run = h.submit(h.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x100, [7]),
                        0x400), ctx=other)
    assert kmd.wait_for(lambda: kmd.stats["job_timeouts"] == 1, 20_000)
    assert h.f.banned and kmd.recovery_log == [("sdma0", "timeout"), ("sdma0", "queue_reset")]
    with pytest.raises(KmdError) as ei:
        h.wait(hang)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    bo.u32[0x200] = 1
    assert h.wait(run, ctx=other) and bo.u32[0x40] == 7
    assert kmd.stats["job_timeouts"] == 1


# ------------------------------------------------------------------------------ waiting for room in the shadow pool

def _pool_filled_behind_a_hold(kmd) -> tuple[Client, object, int]:
    """A client holds the CP and fills the 4 KiB shadow pool behind the hold from another
    context: (the client, its BO, the hold's word in memory)."""
    h = Client()
    hbo = h.bo(0x8000)
    fill = h.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC)).ctx_id
    hbo.u32[0x400:0x500] = [pm4.TYPE2_FILLER] * 0x100
    h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x7000, 1, 1, "EQ")))
    for _ in range(3):
        h.submit(uapi.CsChunkIb(0x100, hbo.handle, 0x1000), ctx=fill)
    assert kmd.shadow.size - kmd.shadow.used < 0x400
    return h, hbo, (h.phys(hbo) + 0x7000) // 4


def _one_kib_job(c: Client, value: int):
    """A client's BO holding a 1 KiB IB (its copy takes 1 KiB of the pool) that writes `value`."""
    bo = c.bo(0x8000)
    bo.u32[0x400:0x4F8] = [pm4.TYPE2_FILLER] * 0xF8
    bo.u32[0x4F8:0x500] = pm4.write_data(bo.addr + 0x100, [value]) + pm4.pad(3)
    return bo, uapi.CsChunkIb(0x100, bo.handle, 0x1000)


def test_a_cs_waiting_for_room_in_the_shadow_pool_lets_other_clients_in_and_is_served_first():
    """A CS waiting for room in the pool held the driver's lock until the hold was reset and
    the pool drained: another client's INFO waited that long. It waits without the lock now,
    first in the pool's queue: a CS that comes later, even one that fits in what is left,
    waits behind it (or a stream of small CSs could take each range it needs, for ever)."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=JOB_TIMEOUT, fallback_poll=1_000)
    h, hbo, hold = _pool_filled_behind_a_hold(kmd)
    a, b, v = Client(), Client(), Client()
    abo, achunk = _one_kib_job(a, 0xA)
    bbo = b.bo(0x1000)
    order = []
    kmd.trace_hooks.append(lambda rec: order.append((rec.fd, rec.request)) if rec.request == "CS" else None)
    t0 = kmd.dev.now()
    ta, tb = _Waiter(lambda: a.submit(achunk)), None
    ta.start()
    try:
        _in_wait(kmd, ta, t0)
        info = v.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
        assert info is not None and kmd.stats["job_timeouts"] == 0 and ta.is_alive()
        assert len(kmd.shadow.waiters) == 1  # a waits in the pool's queue
        small = b.ib(bbo, pm4.write_data(bbo.addr + 0x100, [0xB]))  # 32 bytes of copies: it would fit
        assert kmd.shadow.fits(32 * 8)
        tb = _Waiter(lambda: b.submit(small))
        tb.start()
        for _ in range(200):  # b's CS waits too, behind a
            if len(kmd.shadow.waiters) == 2:
                break
            time.sleep(0.01)
        assert len(kmd.shadow.waiters) == 2 and tb.is_alive() and kmd.stats["job_timeouts"] == 0
    finally:
        kmd.mem32[hold] = 1  # the hold ends, the pool drains
        ta.join(60)
        if tb is not None:
            tb.join(60)
    assert not ta.is_alive() and not tb.is_alive()
    assert a.wait(ta.out[0]) and abo.u32[0x40] == 0xA
    assert b.wait(tb.out[0]) and bbo.u32[0x40] == 0xB
    assert order[-2:] == [(a.f.fd, "CS"), (b.f.fd, "CS")]  # served in the order they came
    assert not kmd.shadow.waiters and kmd.stats["job_timeouts"] == 0


def test_the_shadow_pools_enomem_tells_a_client_of_its_own_use_only():
    """The pool's ENOMEM said how much of it was free and how many jobs were in flight on
    the device: another client's use of the pool and its jobs, which a file without
    CAP_PERFMON may not count (INFO COUNTERS). It says the pool's size and the caller's
    own jobs and bytes in it now: nothing for a client with no job in flight, whatever the
    client that filled it holds; that client is told of its own 4 jobs."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=1 << 30, fallback_poll=1_000)
    kmd.params.job_timeout = 20_000  # (the hold is never reset: its timer was armed with 2^30)
    h, hbo, hold = _pool_filled_behind_a_hold(kmd)
    a = Client()
    _, achunk = _one_kib_job(a, 0xA)
    tail = "other clients' use is not shown)"
    expect(errno.ENOMEM, "CS: no room for the job's 0x400 bytes of checked copies in the shadow pool (0x1000 "
           f"bytes; this file's 0 job(s) in flight hold 0x0 of them, {tail}", a.submit, achunk)
    expect(errno.ENOMEM, "CS: no room for the job's 0x400 bytes of checked copies in the shadow pool (0x1000 "
           f"bytes; this file's 4 job(s) in flight hold 0xc20 of them, {tail}",
           h.submit, uapi.CsChunkIb(0x100, hbo.handle, 0x1000))
    kmd.mem32[hold] = 1
    assert a.wait(a.submit(achunk))


def test_a_cs_that_cannot_get_room_is_enomem_and_leaves_the_pools_queue():
    """Nothing in the pool freed for 2 * job_timeout: ENOMEM, as before, and the CS is out of
    the queue (the next CS is not held behind it)."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=1 << 30, fallback_poll=1_000)
    kmd.params.job_timeout = 20_000  # (the hold is never reset: its timer was armed with 2^30)
    h, hbo, hold = _pool_filled_behind_a_hold(kmd)
    a = Client()
    _, achunk = _one_kib_job(a, 0xA)
    t0 = kmd.dev.now()
    with pytest.raises(KmdError) as ei:
        a.submit(achunk)
    assert ei.value.errno == errno.ENOMEM and ei.value.message.startswith("CS: no room for the job's 0x400 bytes")
    # (docs/uapi.md, ENOMEM: once nothing in the pool was freed for 2 * job_timeout)
    assert 2 * 20_000 <= kmd.dev.now() - t0 < 2 * 20_000 + 2_000
    assert not kmd.shadow.waiters
    kmd.mem32[hold] = 1
    assert a.wait(a.submit(achunk))


def _sized_ib(c: Client, bo, offset: int, nbytes: int, words: list[int]) -> uapi.CsChunkIb:
    """`words` then a NOP to `nbytes` of IB (and of checked copy) at `offset` of `bo`."""
    return c.ib(bo, list(words) + pm4.nop(nbytes // 4 - len(words) - 1), offset)


def test_a_cs_that_waits_for_its_slot_leaves_the_pools_queue_and_joins_it_again_after():
    """A CS first in the shadow pool's queue that must then wait for its context's oldest job
    (sched_jobs) gives its place up meanwhile: the CSs behind it get room and go ahead. Once
    its slot is free it queues again, behind whoever waits then, and is served in turn.
    Kept its place, it would hold every CS behind it for as long as its context's job runs;
    not queued again, it would wait for a turn it never gets.

    Pool 16 KiB (a job's copies: at most 8 KiB), sched_jobs 2, every hold a WAIT_REG_MEM on
    its client's flag. The pool, first fit: H's 6 KiB (gfx, held), A's a1's 1 KiB (behind H,
    held), X's 7.75 KiB (the high-priority queue, held). Then, each waiting for room in this
    order: A's a2 (6 KiB), A's a3 (small), V's (1 KiB, held), W's (7.5 KiB, more than any
    hole while X's copy is there). H ends: a2 takes H's room; a3 gets its turn and must now
    wait for a1 (a1 and a2 fill its context's two slots); V goes ahead meanwhile. a1 ends:
    a3 queues again, behind W. X ends: W, then a3."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=16, sched_jobs=2, job_timeout=1 << 30, fallback_poll=1_000,
                         cap_sys_nice=True)  # (x asks for HIGH: CAP_SYS_NICE)
    x, h, a, v, w = Client(), Client(), Client(), Client(), Client()
    xbo, hbo, abo, vbo, wbo = (c.bo(0x4000) for c in (x, h, a, v, w))
    flag = {c: c.phys(bo) // 4 + 0xFC0 for c, bo in ((x, xbo), (h, hbo), (a, abo), (v, vbo))}
    hold = {c: pm4.wait_reg_mem(bo.addr + 0x3F00, 1, 1, "EQ") for c, bo in ((x, xbo), (h, hbo), (a, abo), (v, vbo))}
    h.submit(_sized_ib(h, hbo, 0, 0x1800, hold[h]))
    a1 = a.submit(_sized_ib(a, abo, 0, 0x400, hold[a]))
    xctx = x.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.ALLOC, priority=uapi.CtxPriority.HIGH)).ctx_id
    x.submit(_sized_ib(x, xbo, 0, 0x1F00, hold[x]), ctx=xctx)
    assert kmd.shadow.used == 0x3B00 and len(kmd.hqd_sched.pending) == 1
    ctx = a.f.contexts[a.ctx]
    jobs = {
        "a2": (a, _sized_ib(a, abo, 0x1000, 0x1800, pm4.write_data(abo.addr + 0x3000, [2]))),
        "a3": (a, _sized_ib(a, abo, 0x2C00, 0x100, pm4.write_data(abo.addr + 0x3004, [3]))),
        "v": (v, _sized_ib(v, vbo, 0, 0x400, hold[v] + pm4.write_data(vbo.addr + 0x3000, [0xB]))),
        "w": (w, _sized_ib(w, wbo, 0, 0x1E00, pm4.write_data(wbo.addr + 0x3000, [0xC]))),
    }
    threads = {}
    try:
        for n, (name, (c, chunk)) in enumerate(jobs.items(), 1):
            threads[name] = t = _Waiter(lambda c=c, chunk=chunk: c.submit(chunk))
            t.start()
            for _ in range(400):  # each in the pool's queue before the next comes
                if len(kmd.shadow.waiters) == n:
                    break
                time.sleep(0.005)
            assert len(kmd.shadow.waiters) == n and t.is_alive(), (name, t.out)
        kmd.mem32[flag[h]] = 1  # H ends: a2, then a3 (which waits for a1 now), then V
        threads["v"].join(20)
        assert threads["v"].out and isinstance(threads["v"].out[0], int), "V's CS waited behind a3's"
        assert threads["a2"].out and not threads["a3"].out and a1 in ctx.jobs and len(kmd.shadow.waiters) == 1
        kmd.mem32[flag[a]] = 1  # a1 ends: a3 queues again, behind W
        for _ in range(400):
            if len(kmd.shadow.waiters) == 2 or not threads["a3"].is_alive():
                break
            time.sleep(0.005)
        assert len(kmd.shadow.waiters) == 2 and threads["a3"].is_alive() and threads["w"].is_alive()
        kmd.mem32[flag[x]] = 1  # X ends: W, then a3
        for t in threads.values():
            t.join(20)
    finally:
        for f in flag.values():
            kmd.mem32[f] = 1
        for t in threads.values():
            t.join(20)
    assert [type(t.out[0]) for t in threads.values()] == [int] * 4, [t.out for t in threads.values()]
    assert a.wait(threads["a3"].out[0]) and abo.u32[0x3000 // 4: 0x3008 // 4].tolist() == [2, 3]
    assert w.wait(threads["w"].out[0]) and wbo.u32[0x3000 // 4] == 0xC
    assert v.wait(threads["v"].out[0]) and vbo.u32[0x3000 // 4] == 0xB
    assert not kmd.shadow.waiters and kmd.stats["job_timeouts"] == 0


def test_a_cs_refused_after_it_waited_for_room_leaves_the_pools_queue():
    """A CS waits for room in the pool; meanwhile another thread of its client closes the BO
    its IB is in. Served, the CS starts again and is refused (the handle is gone): it must
    leave the pool's queue, or its ticket would stay first in it and every later CS wait
    behind it until its ENOMEM."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=JOB_TIMEOUT, fallback_poll=1_000)
    h, hbo, hold = _pool_filled_behind_a_hold(kmd)
    a, b = Client(), Client()
    abo, achunk = _one_kib_job(a, 0xA)
    t0 = kmd.dev.now()
    ta = _Waiter(lambda: a.submit(achunk))
    ta.start()
    try:
        _in_wait(kmd, ta, t0)
        assert len(kmd.shadow.waiters) == 1
        a.io(Request.GEM_CLOSE, uapi.GemCloseArgs(abo.handle))
    finally:
        kmd.mem32[hold] = 1  # the hold ends, the pool drains
        ta.join(60)
    e = ta.out[0]
    assert isinstance(e, KmdError) and (e.errno, e.message) == (errno.ENOENT, f"CS: chunk 0: no BO with handle {abo.handle}")
    assert not kmd.shadow.waiters
    bbo, bchunk = _one_kib_job(b, 0xB)
    assert b.wait(b.submit(bchunk)) and bbo.u32[0x40] == 0xB and kmd.stats["job_timeouts"] == 0


@pytest.mark.parametrize("ring", ["gfx", "sdma0"])
def test_a_hang_behind_a_long_ib_is_diagnosed_without_decoding_every_packet(ring, monkeypatch):
    """A timed-out job's diagnosis (the poll it is stuck in, reset/stuck.py) walked its IBs
    decoding every packet in Python, the driver's lock held: 5 s a million dwords (measured:
    a checked job of two IBs of a million NOPs and a WAIT_REG_MEM held another client's INFO
    5.5 s), so a client whose job of maximum-size IBs hung stopped every other client's
    ioctls that long at each of its timeouts (four such IBs with the checker off, or on the
    DMA ring). The packets are found by their headers now and only those of the kinds the
    walk looks at decoded: the same answer, a handful of packets decoded."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    n = 1 << 16  # one-dword packets ahead of the poll
    bo = c.bo(4 * n + 0x1000)
    flag = bo.addr + 4 * n + 0x800  # (nobody sets it)
    if ring == "gfx":
        seq = c.submit(c.ib(bo, [pm4.NOP_PAD] * n + pm4.wait_reg_mem(flag, 1, 0xFFFF_FFFF, "EQ")))
        stuck = f"stuck in WAIT_REG_MEM at IB+{4 * n:#x} ({bo.addr + 4 * n:#x}): *{flag:#x} & 0xffffffff = 0x0, waits for == 0x1"
    else:
        seq = c.submit(sdma_ib(bo, sdma.nop(0) * n + sdma.poll_regmem(flag, 0, 0xFFFF_FFFF, "NE", interval=4)))
        stuck = f"stuck in POLL_REGMEM at IB+{4 * n:#x} ({bo.addr + 4 * n:#x}): *{flag:#x} & 0xffffffff = 0x0, waits for != 0x0"
    _times_out_decoding_few(monkeypatch, c, seq, stuck)


def _times_out_decoding_few(monkeypatch, c, seq, stuck: str) -> None:
    """The job `seq` times out, the error names the poll it is `stuck` in, and the diagnosis
    decoded fewer than 10 packets (each decode is Python work with the driver's lock held)."""
    decoded = [0]
    for module, name in ((pm4, "decode"), (sdma, "decode"), (sdma.codec, "decode")):
        real = getattr(module, name)

        def counted(*a, real=real, **k):
            decoded[0] += 1
            return real(*a, **k)
        monkeypatch.setattr(module, name, counted)
    with pytest.raises(KmdError) as ei:
        c.wait(seq, timeout=10**7)
    assert ei.value.errno == errno.ECANCELED and "timed out" in ei.value.message, ei.value
    assert stuck in ei.value.message, ei.value.message
    assert decoded[0] < 10, f"{decoded[0]} packets decoded, the driver's lock held"


@pytest.mark.parametrize("ring", ["gfx", "sdma0"])
def test_a_hang_behind_many_polls_that_hold_is_diagnosed_without_decoding_each(ring, monkeypatch):
    """The diagnosis decodes only the polls it looks at, but it looked at every one until it
    found one whose compare does not hold: a job of polls that hold, then one that does not,
    had each decoded in Python, the driver's lock held (an SDMA IB of 174,762 such
    POLL_REGMEMs: 5.3 s at each of its timeouts, four IBs a job; a checked gfx job of
    WAIT_REG_MEMs 1.9 s a million dwords). The compares are made for all of them at once with
    numpy now, and only a poll that does not hold is decoded: the same answer."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    n = 1 << 16
    bo = c.bo(4 * n + 0x1000)
    flag = bo.addr + 4 * n + 0x800  # (nobody sets it: 0)
    if ring == "gfx":
        one = pm4.wait_reg_mem(flag, 0, 0xFFFF_FFFF, "EQ")  # holds
        words = one * (n // len(one) - 1) + pm4.wait_reg_mem(flag, 1, 0xFFFF_FFFF, "EQ")
        at = 4 * (len(words) - len(one))
        seq = c.submit(c.ib(bo, words))
        stuck = f"stuck in WAIT_REG_MEM at IB+{at:#x} ({bo.addr + at:#x}): *{flag:#x} & 0xffffffff = 0x0, waits for == 0x1"
    else:
        one = sdma.poll_regmem(flag, 0, 0xFFFF_FFFF, "EQ", interval=4)
        words = one * (n // len(one) - 1) + sdma.poll_regmem(flag, 1, 0xFFFF_FFFF, "EQ", interval=4)
        at = 4 * (len(words) - len(one))
        seq = c.submit(sdma_ib(bo, words))
        stuck = f"stuck in POLL_REGMEM at IB+{at:#x} ({bo.addr + at:#x}): *{flag:#x} & 0xffffffff = 0x0, waits for == 0x1"
    _times_out_decoding_few(monkeypatch, c, seq, stuck)
