"""The bounds docs/uapi.md (kmd_model/uapi.py) states to an outside UMD writer that the
other uAPI tests did not hold: how long a GEM_VA MAP or REPLACE waits for a closed BO's jobs
(GemCloseArgs: 2 * job_timeout, then MAP is EINVAL and REPLACE takes the range; none when a
live BO's mapping is in the range too); how BO handles and context ids wrap (the module's
Ids: 1 .. 0x7FFFFFFF, idr_alloc_cyclic, never a live one) and what an id outside its u32
field is; a context's seqnos (CsOut.seq); what waiting ioctls answer when another thread
closes the file; a CS waiting for shadow-pool room and a signal. The helpers are
test_kmd_uapi_contract.py's and test_kmd_uapi_lifetimes.py's; each test drives render
nodes through their ioctls alone, but where a test sets a context's or file's counters
where 2**31 more CSs or creations would have left them.
"""

from __future__ import annotations

import errno
import signal
import threading
import time

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CtxOp, Request, VaOp, WaitCsArgs
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, RW, Umd, ib, refused
from tests.kmd.uapi.test_kmd_uapi_lifetimes import held, now
from tests.security.limits.test_security_contention import _one_kib_job, _pool_filled_behind_a_hold

W = Request.WAIT_CS
ID_MAX = 0x7FFF_FFFF


def _closed_bo_held_by(u: Umd, n: int):
    """A BO `t` mapped RW at tva, then n contexts' jobs each held in a WAIT_REG_MEM (released
    by the dword at va + 0x3000), the last one writing 0x77 to tva after; then t closed. Each
    hold is reset by the job timer in turn (job_timeout * 9/8 each): t lives n of those."""
    ctxs = [u.ctx() for _ in range(n)]
    h, u32, va = u.bo(0x4000)
    t = u.create(PAGE)
    tva = u.va
    u.va += 0x2000
    u.map(t, tva, PAGE, flags=RW)
    jobs = [held(u, c, u32, h, va, pm4.write_data(tva, [0x77]) if i == n - 1 else (), offset=0x100 * i)
            for i, c in enumerate(ctxs)]
    u.close_bo(t)
    return ctxs, jobs, u32, tva


T = 20_000  # job_timeout


def test_a_map_over_a_closed_bos_range_waits_2_job_timeouts_then_is_einval_and_replace_takes_it():
    """GemCloseArgs: a MAP over the range of a closed BO that jobs still use waits for them for
    2 * job_timeout cycles from the call, then is EINVAL (the range overlaps the closed BO's
    mapping, said closed), changing nothing; a REPLACE waits as long, then takes the range,
    and a job still reaching it reaches the new BO (VaOp). Five holds, reset one after the
    other, keep the closed BO in use for some 5.6 job timeouts."""
    kmd_model.bind(RefModel(), job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctxs, jobs, u32, tva = _closed_bo_held_by(u, 5)
    new = u.create(PAGE)
    new32 = u.mmap(new).view("<u4")
    t0 = now(u)
    e = refused(errno.EINVAL, "GEM_VA", u.map, new, tva, PAGE, 0, RW)
    took = now(u) - t0
    assert 2 * T <= took < 2 * T + 2_000, took
    assert e.message == (f"GEM_VA: [{tva:#x}, {tva + PAGE:#x}) overlaps the mapping [{tva:#x}, {tva + PAGE:#x}) of "
                         f"fd{u.f.fd}:2 (closed; its jobs still ran {2 * T} cycles (2 * job_timeout) after the GEM_VA "
                         "began waiting for them)")
    assert u.io(W, WaitCsArgs(ctxs[-1], jobs[-1], 0)).busy  # (the last hold still holds it)
    t0 = now(u)
    u.map(new, tva, PAGE, flags=RW, op=VaOp.REPLACE)
    took = now(u) - t0
    assert 2 * T <= took < 2 * T + 2_000, took
    assert u.io(W, WaitCsArgs(ctxs[-1], jobs[-1], 0)).busy
    u32[0x3000 // 4] = 1  # the holds left run on: the last writes the range, now the new BO's
    assert u.wait(ctxs[-1], jobs[-1]) and new32[0] == 0x77
    refused(errno.EINVAL, "GEM_VA", u.map, u.create(PAGE), tva, PAGE)  # (the new BO is there)


def test_a_map_whose_closed_bos_jobs_end_within_the_wait_maps():
    """The other side of the bound: jobs that end before 2 * job_timeout (two holds, reset
    after some 2.25 job timeouts in all, the MAP made after the first reset) let the MAP go
    ahead once the closed BO is freed, with no error."""
    kmd_model.bind(RefModel(), job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctxs, jobs, u32, tva = _closed_bo_held_by(u, 2)
    refused(errno.ECANCELED, "WAIT_CS", u.wait, ctxs[0], jobs[0], 2 * T)  # the first hold's reset
    new = u.create(PAGE)
    t0 = now(u)
    u.map(new, tva, PAGE, flags=RW)
    assert now(u) - t0 < 2 * T
    refused(errno.ECANCELED, "WAIT_CS", u.wait, ctxs[1], jobs[1], 0)  # the MAP came after its reset


def test_a_map_over_a_closed_bos_range_and_a_live_ones_is_einval_at_once():
    """GemCloseArgs: a MAP whose range a live BO's mapping overlaps too, beside a closed BO's
    still in use, is EINVAL at once, naming the live one: it waited for the closed BO's jobs
    (here until the hold's reset, up to 2 * job_timeout), then was refused all the same."""
    kmd_model.bind(RefModel(), job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctxs, jobs, u32, tva = _closed_bo_held_by(u, 1)
    live = u.create(PAGE)
    u.map(live, tva + PAGE, PAGE, flags=RW)
    t0 = now(u)
    e = refused(errno.EINVAL, "GEM_VA", u.map, u.create(0x2000), tva, 0x2000, 0, RW)
    assert now(u) - t0 < 1_000
    assert e.message == (f"GEM_VA: [{tva:#x}, {tva + 0x2000:#x}) overlaps the mapping [{tva + PAGE:#x}, "
                         f"{tva + 0x2000:#x}) of fd{u.f.fd}:{live}")
    assert u.io(W, WaitCsArgs(ctxs[0], jobs[0], 0)).busy  # (the closed BO still in use)


def test_a_map_made_again_after_eintr_waits_2_job_timeouts_from_the_new_call():
    """GemCloseArgs: the 2 * job_timeout counts from the call: a MAP a signal ended (EINTR)
    and made again (as drmIoctl does) waits the whole 2 * job_timeout again."""
    t_out = 2_000_000
    kmd_model.bind(RefModel(), job_timeout=t_out, fallback_poll=1_000)
    u = Umd()
    ctxs, jobs, u32, tva = _closed_bo_held_by(u, 4)  # in use for some 4.5 job timeouts
    new = u.create(PAGE)
    came = []
    prev = signal.signal(signal.SIGALRM, lambda *_: came.append(1))
    t0 = now(u)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        refused(errno.EINTR, "GEM_VA", u.map, new, tva, PAGE, 0, RW)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    first = now(u) - t0
    assert came and 2_000 < first < 2 * t_out, first  # (the signal came inside the wait)
    t0 = now(u)
    refused(errno.EINVAL, "GEM_VA", u.map, new, tva, PAGE, 0, RW)
    assert 2 * t_out <= now(u) - t0 < 2 * t_out + 2_000
    u32[0x3000 // 4] = 1
    assert u.wait(ctxs[-1], jobs[-1])


# ------------------------------------------------------------------------------ ids

def test_bo_handles_wrap_after_0x7fffffff_to_the_next_one_not_in_use():
    """Ids: handles grow, one closed is not handed out again (a stale one stays unknown), up
    to 0x7FFFFFFF; then from 1 again, skipping the live ones: a hostile loop of creates and
    closes never gets a handle past the uAPI's fields (it went on to 2**31 and past 2**32)
    nor one naming a live BO."""
    kmd_model.bind(RefModel())
    u = Umd()
    live = u.create()
    u.mmap(live)[:4] = 0x5A
    gone = u.create()
    u.close_bo(gone)
    assert (live, gone) == (1, 2) and u.create() == 3
    u.f.next_handle = ID_MAX - 1  # (where 2**31 - 4 more creations would have left it)
    assert [u.create(), u.create()] == [ID_MAX - 1, ID_MAX]
    assert u.create() == gone  # wrapped: 1 is live, 2 was closed
    assert u.create() == 4  # 3 is live
    assert u.mmap(live)[:4].tolist() == [0x5A] * 4  # the live BO is untouched, named by its handle
    u.close_bo(ID_MAX)
    u.f.next_handle = ID_MAX
    assert u.create() == ID_MAX and u.create() == 5


def test_context_ids_wrap_after_0x7fffffff_to_the_next_one_not_in_use():
    """Ids: context ids as handles: a freed one stays unknown (EINVAL) until the ids wrap,
    then the next not in use comes back, never a live one, and never past 0x7FFFFFFF."""
    kmd_model.bind(RefModel())
    u = Umd()
    live, gone = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    seq = u.cs(live, ib(u32, pm4.write_data(va + 0x2000, [1]), handle=h))
    assert u.wait(live, seq)
    u.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, gone))
    assert (live, gone) == (1, 2) and u.ctx() == 3
    refused(errno.EINVAL, "CTX", u.query, gone)
    u.f.next_ctx_id = ID_MAX  # (where 2**31 - 4 more ALLOCs and FREEs would have left it)
    assert u.ctx() == ID_MAX
    back = u.ctx()
    assert back == gone  # wrapped: 1 is live, 2 was freed
    assert u.query(back).reset_status == uapi.ResetStatus.NO_RESET
    refused(errno.EINVAL, "WAIT_CS", u.io, W, WaitCsArgs(back, seq, 0))  # a new context: no seqno of the old
    assert u.wait(live, seq, 0)  # the live context is as it was
    assert u.ctx() == 4


# ------------------------------------------------------------------------------ seqnos, ring_status

def test_a_contexts_seqnos_are_one_sequence_over_its_rings_from_1():
    """CsOut.seq: 1 for a context's first job, one more for each CS it accepts, whichever
    ring (a refused CS takes none), each context its own; ring_status is {} while no reset
    touched the context's work (CtxOut)."""
    kmd_model.bind(RefModel())
    u = Umd()
    a, b = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    gfx = ib(u32, pm4.write_data(va + 0x2000, [1]), handle=h)
    assert u.cs(a, gfx) == 1
    refused(errno.EINVAL, "CS", u.cs, a, uapi.CsChunkIb(8, handle=h, offset=2))
    if u.info.sdma_rings:
        u32[0x400:0x408] = sdma.pad(8)
        assert u.cs(a, uapi.CsChunkIb(8, handle=h, offset=0x1000, ip_type=uapi.HwIp.DMA)) == 2
    nxt = u.cs(a, gfx)
    assert nxt == (3 if u.info.sdma_rings else 2) and u.cs(b, gfx) == 1
    assert u.wait(a, nxt) and u.wait(b, 1)
    assert u.query(a).ring_status == {} and u.query(b).ring_status == {}


def test_wait_cs_takes_seqnos_up_to_2_31_before_the_latest():
    """CsOut.seq: WAIT_CS and a dependency take a seqno at most 2**31 before the context's
    latest; an older one is taken for one not handed out (EINVAL), the 32-bit sequence having
    wrapped. (The context's counters are set as 2**31 more CSs would have left them.)"""
    kmd_model.bind(RefModel())
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    first = u.cs(ctx, ib(u32, pm4.write_data(va + 0x2000, [1]), handle=h))
    assert u.wait(ctx, first)
    c = u.f.contexts[ctx]
    c.last_seq, c.submitted = (first + (1 << 31)) & 0xFFFF_FFFF, (1 << 31) + 1
    assert u.wait(ctx, first, 0)  # 2**31 before the latest: ended well long ago
    nop = ib(u32, pm4.nop(6), offset=0x100, handle=h)
    u.cs(ctx, nop, uapi.CsChunkDep(uapi.HwIp.GFX, 0, ctx, first))
    refused(errno.EINVAL, "WAIT_CS", u.io, W, WaitCsArgs(ctx, first, 0))  # now 2**31 + 1 before it
    refused(errno.EINVAL, "CS", u.cs, ctx, nop, uapi.CsChunkDep(uapi.HwIp.GFX, 0, ctx, first))


# ------------------------------------------------------------------------------ a file closed under a wait

class _Call(threading.Thread):
    """One ioctl (or close) in a thread of its own: its answer or exception in `out`."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.out = fn, []
        self.start()

    def run(self) -> None:
        try:
            self.out.append(self.fn())
        except Exception as e:  # noqa: BLE001 (the test looks at it)
            self.out.append(e)


def _waiting(kmd, fn) -> _Call:
    """`fn`'s ioctl in a thread of its own, once the driver has taken it in (its count of
    ioctls moved: the thread then holds the driver's lock until its wait hands it over) and
    simulated time moves under it. (Time alone said nothing: another thread's wait moves it,
    and a thread whose ioctl had not begun met the close as an EBADF of its own.)"""
    before, since = kmd.stats["ioctls"], kmd.dev.now()
    t = _Call(fn)
    for _ in range(4000):
        if (kmd.stats["ioctls"] > before and kmd.dev.now() > since + 2_000) or not t.is_alive():
            break
        if kmd.stats["ioctls"] == before:
            since = kmd.dev.now()
        time.sleep(0.005)
    assert t.is_alive() and kmd.stats["ioctls"] > before, "the ioctl did not start waiting"
    return t


def test_a_file_closed_under_waiting_ioctls():
    """uapi.py, the file: a CTX FREE waiting for its context's queued job when another thread
    closes the file ends with EBADF (the close waits for that job to reach the ring, here
    behind another context's job held until the CPU releases it); a WAIT_CS and a
    GEM_WAIT_IDLE waiting then answer as their jobs end, the file's jobs running on."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40, fallback_poll=1_000, hw_submission_limit=1)
    u = Umd()
    a, b = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    held(u, a, u32, h, va)  # holds the ring (hw_submission_limit 1): b's job stays queued
    queued = u.cs(b, ib(u32, pm4.write_data(va + 0x2000, [7]), offset=0x100, handle=h))
    free = _waiting(kmd, lambda: u.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, b)))
    wait = _waiting(kmd, lambda: u.io(W, WaitCsArgs(b, queued, (1 << 64) - 1)))
    idle = _waiting(kmd, lambda: u.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(h, (1 << 64) - 1)))
    phys = u.f.handles[h].gpu_addr  # (where the CPU releases the hold once the file is closed)
    close = _Call(u.f.close)
    for _ in range(4000):  # (the close marks the file closed first, then waits for b's queued job)
        if u.f.closed or not close.is_alive():
            break
        time.sleep(0.005)
    assert u.f.closed and close.is_alive()
    assert free.is_alive() and wait.is_alive() and idle.is_alive()
    kmd.mem32[(phys + 0x3000) // 4] = 1
    for t in (free, wait, idle, close):
        t.join(60)
        assert not t.is_alive()
    e = free.out[0]
    assert isinstance(e, uapi.KmdError) and (e.errno, e.message) == (
        errno.EBADF, "CTX FREE: the file was closed while FREE waited for the context's jobs"), e
    assert wait.out == [uapi.WaitCsOut(False)] and idle.out == [uapi.GemWaitIdleOut(False)]
    assert close.out == [None] and kmd.mem32[(phys + 0x2000) // 4] == 7  # (the queued job ran)


def test_a_handle_or_context_id_outside_its_u32_field_is_an_unknown_one():
    """uapi.py, EINVAL: a handle or context id outside its u32 field (negative, or 2**32 and
    up, which no C UMD can pass: amdgpu would see a truncated, unknown one) is an unknown
    one, with that lookup's errno: ENOENT in GEM_MMAP, GEM_VA, GEM_WAIT_IDLE and a CS IB
    chunk, EINVAL in GEM_CLOSE, a CS fence chunk and wherever a context is named. None of
    them reaches the BO or context whose id the low 32 bits hold."""
    kmd_model.bind(RefModel())
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    nop = ib(u32, pm4.nop(6), handle=h)
    for bad in (-1, (1 << 32) + h, 1 << 40):
        refused(errno.ENOENT, "GEM_MMAP", u.mmap, bad)
        refused(errno.ENOENT, "GEM_VA", u.map, bad, u.va, PAGE)
        refused(errno.ENOENT, "GEM_WAIT_IDLE", u.io, Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(bad, 0))
        refused(errno.ENOENT, "CS", u.cs, ctx, uapi.CsChunkIb(8, handle=bad))
        refused(errno.EINVAL, "GEM_CLOSE", u.close_bo, bad)
        refused(errno.EINVAL, "CS", u.cs, ctx, nop, uapi.CsChunkFence(bad, 0))
    for bad in (-1, (1 << 32) + ctx, 1 << 40):
        refused(errno.EINVAL, "CS", u.cs, bad, nop)
        refused(errno.EINVAL, "CTX", u.query, bad)
        refused(errno.EINVAL, "WAIT_CS", u.io, W, WaitCsArgs(bad, 1, 0))
        refused(errno.EINVAL, "CS", u.cs, ctx, nop, uapi.CsChunkDep(uapi.HwIp.GFX, 0, bad, 1))
    assert u.wait(ctx, u.cs(ctx, nop)) and u.mmap(h).size == 0x4000  # h and ctx as they were


def test_a_wait_cs_made_before_its_contexts_free_answers_as_the_job_ends():
    """CtxOp.FREE: the freed context's jobs still run, and a WAIT_CS another thread was
    making for one of them when the FREE came answers as that job ends (a new WAIT_CS naming
    the freed id is EINVAL)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40, fallback_poll=1_000)
    u = Umd()
    ctx = u.ctx()
    h, u32, va = u.bo(0x4000)
    job = held(u, ctx, u32, h, va, pm4.write_data(va + 0x2000, [5]))
    wait = _waiting(kmd, lambda: u.io(W, WaitCsArgs(ctx, job, (1 << 64) - 1)))
    assert u.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, ctx)).ctx_id == ctx  # (the job is in the ring)
    refused(errno.EINVAL, "WAIT_CS", u.io, W, WaitCsArgs(ctx, job, 0))
    assert wait.is_alive()
    u32[0x3000 // 4] = 1
    wait.join(60)
    assert not wait.is_alive() and wait.out == [uapi.WaitCsOut(False)] and u32[0x800] == 5


def test_a_cs_waiting_for_shadow_pool_room_ends_with_eintr_and_leaves_the_pools_queue():
    """uapi.py, EINTR: a CS waiting for room in the shadow pool (filled behind another
    client's held job) ends with EINTR at a signal, having changed nothing: no seqno taken,
    its place in the pool's queue given up (a CS after it is not held behind it); made again
    once the pool has room, it runs."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=1 << 40, fallback_poll=1_000)
    _, _, hold = _pool_filled_behind_a_hold(kmd)
    a = Client()
    bo, chunk = _one_kib_job(a, 0xA)
    came = []
    prev = signal.signal(signal.SIGALRM, lambda *_: came.append(1))
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        e = refused(errno.EINTR, "CS", a.submit, chunk)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    assert came and "interrupted by a signal" in e.message
    assert not kmd.shadow.waiters  # out of the pool's queue
    refused(errno.EINVAL, "WAIT_CS", a.io, W, WaitCsArgs(a.ctx, 1, 0))  # no seqno taken
    kmd.mem32[hold] = 1
    seq = a.submit(chunk)
    assert seq == 1 and a.wait(seq) and bo.u32[0x40] == 0xA
