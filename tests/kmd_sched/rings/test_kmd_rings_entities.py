"""The scheduler's entities with many rings (kmd_model/sched/): a job cancelled when its
dependency on another ring fails (its reason named once down a chain), CTX FREE and close(2)
waiting until their jobs left the queues (signals, resets and ordering meanwhile), the round
robin per context and the turn an entity keeps, what a context keeps of its jobs' errors.
Reference-model backend."""

from __future__ import annotations

import errno
import signal
import threading
import time

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkDep, CtxPriority, HwIp, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import DMA, HANG, NoQueue0Reset, Recorder, new_ctx, sdma_ib


@pytest.mark.parametrize("failed_first", [False, True], ids=["fails_later", "failed_before_its_cs"])
def test_a_job_whose_dependency_fails_is_cancelled_with_its_reason(failed_first):
    """A job queued behind a dependency on another ring that then fails is cancelled with
    ECANCELED naming the dependency and its error, without running; so is one whose
    dependency had failed before its CS (gone from the scheduler by then: it must not run
    as if the dependency had succeeded). Its context carries on."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    b = new_ctx(c)
    bad = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000)))

    def wait_bad():
        with pytest.raises(uapi.KmdError):
            c.wait(bad, 1_000_000)
    if failed_first:
        wait_bad()
    dep = c.submit(CsChunkDep(DMA, 0, c.ctx, bad), c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]), 0x400), ctx=b)
    if not failed_first:
        wait_bad()
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(dep, 1_000_000, ctx=b)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert e.message.startswith(f"WAIT_CS: Job(ctx {b} seq {dep:#x}) on gfx: its dependency "
                                f"Job(ctx {c.ctx} seq {bad:#x}) failed: job {bad:#x} timed out on sdma0")
    assert bo.u32[0x40] == 0
    good = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [2]), 0x800), ctx=b)
    assert c.wait(good, ctx=b) and bo.u32[0x40] == 2


@pytest.mark.parametrize("failed_first", [False, True], ids=["fails_later", "failed_before_their_cs"])
def test_a_chain_of_jobs_cancelled_by_their_dependencies_names_the_first_error_once(failed_first):
    """Each job cancelled for its dependency's failure had the dependency's whole message
    inside its own, so a chain of N such jobs made messages of N levels: 1,000 CSs in a
    chain (0.3 s of one client's time) left 36 MB of messages in one context's record of
    failed jobs, the last WAIT_CS answer 72,578 characters on one line, and the chain could
    go on (quadratic memory for the driver). A cancelled job now names its dependency and
    the first error of the chain, its message the same length at any depth."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    b = new_ctx(c)
    bad = c.submit(sdma_ib(bo, HANG(bo.addr + 0x3000)))
    if failed_first:
        with pytest.raises(uapi.KmdError):
            c.wait(bad, 1_000_000)
    dep_ctx, dep, seqs = c.ctx, bad, []
    for _ in range(300):
        chunk = c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]), 0x400)
        seqs.append(c.submit(CsChunkDep(DMA if dep_ctx == c.ctx else HwIp.GFX, 0, dep_ctx, dep), chunk, ctx=b))
        dep_ctx, dep = b, seqs[-1]
    messages = []
    for seq in seqs:
        with pytest.raises(uapi.KmdError) as ei:
            c.wait(seq, 1_000_000, ctx=b)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
        messages.append(ei.value.message)
    root = f"job {bad:#x} timed out on sdma0"
    assert messages[0].startswith(f"WAIT_CS: Job(ctx {b} seq {seqs[0]:#x}) on gfx: its dependency "
                                  f"Job(ctx {c.ctx} seq {bad:#x}) failed: {root}")
    assert messages[-1].startswith(f"WAIT_CS: Job(ctx {b} seq {seqs[-1]:#x}) on gfx: its dependency "
                                   f"Job(ctx {b} seq {seqs[-2]:#x}) failed: {root}"), messages[-1][:300]
    assert all(m.count("its dependency") == 1 for m in messages)
    assert max(map(len, messages)) < len(messages[0]) + 8  # (the seqnos' digits alone differ)
    assert bo.u32[0x40] == 0


HELD = dict(job_timeout=2_000_000, fallback_poll=1_000)  # a held job outlasts a FREE's first waits by far


class _Free(threading.Thread):
    """CTX FREE from a thread of its own: it waits while the context has jobs queued
    (drm_sched_entity_flush), and other ioctls and the CPU carry on meanwhile."""

    def __init__(self, kmd, c: Client, ctx: int):
        super().__init__(daemon=True)
        self.c, self.ctx, self.out, self.error = c, ctx, None, None
        since = kmd.dev.now()
        self.start()
        for _ in range(2000):  # until it waits inside the driver: simulated time moves under it
            if kmd.dev.now() > since or not self.is_alive():
                break
            time.sleep(0.005)
        assert self.is_alive() and kmd.dev.now() > since, "CTX FREE did not wait"

    def run(self):
        try:
            self.out = self.c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, self.ctx))
        except BaseException as e:  # (raised in the test's thread: done())
            self.error = e

    def done(self):
        self.join(30)
        assert not self.is_alive(), "CTX FREE did not return"
        if self.error is not None:
            raise self.error
        return self.out


def test_ctx_free_returns_once_the_contexts_jobs_left_its_queue():
    """CTX FREE waits until none of the context's jobs is queued any more: each is in the ring
    or has run (amdgpu_ctx_fini_entity's drm_sched_entity_flush). It returned at once, so a
    client that allocated a context, queued `sched_jobs` jobs on it and freed it, over and
    over, queued jobs without bound behind a job holding the ring: 200 here with 4 a context
    and one context alive, every freed context's entity a turn of its own ahead of every
    other client's job."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False, sched_jobs=4)
    c = Client()
    bo = c.bo(0x10000)
    c.submit(sdma_ib(bo, HANG(bo.addr + 0x8000)))  # holds the DMA ring until the job timer
    ib = sdma_ib(bo, sdma.write_linear(bo.addr + 0x9000, [1]), 0x100)
    most = 0
    for _ in range(50):
        x = new_ctx(c)
        for _ in range(4):
            c.submit(ib, ctx=x)
            most = max(most, len(kmd.sdma_sched.queue))
        c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, x))
        assert not kmd.sdma_sched.queue  # (its jobs are in the ring or done)
    # (the hold's timeout, once: a reset of the SDMA queue alone)
    assert most <= 4 and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0), kmd.recovery_log


def test_close_returns_once_the_files_jobs_left_its_queues():
    """close(2) of the fd waits, as CTX FREE does, until none of the file's jobs is queued
    (amdgpu_flush: amdgpu_ctx_mgr_entity_flush). It returned at once, so a client opening a
    file, queueing jobs on it and closing it, over and over, queued jobs without bound behind
    a job holding the ring (96,000 from 3,000 files, with one file open at a time)."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False)
    c = Client()
    bo = c.bo(0x1000)
    c.submit(sdma_ib(bo, HANG(bo.addr + 0x800)))  # holds the DMA ring until the job timer
    most = 0
    for _ in range(20):
        h = Client()
        h.next_va = 0x200000  # (every file's VM is its own)
        hb = h.bo(0x1000)
        ib = sdma_ib(hb, sdma.write_linear(hb.addr + 0x800, [1]))
        for _ in range(8):
            h.submit(ib)
        most = max(most, len(kmd.sdma_sched.queue))
        h.f.close()
        assert not kmd.sdma_sched.queue  # (its jobs are in the ring or done)
    # (the hold's timeout, once: a reset of the SDMA queue alone)
    assert most <= 8 and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0), kmd.recovery_log
    assert kmd.wait_for(lambda: not kmd.sdma_sched.pending, 1_000_000)
    assert kmd.kmd_stats()["files"] == 1 and kmd.kmd_stats()["live_bos"] == 1


def test_the_round_robin_is_per_context_not_per_file():
    """drm_sched's round robin serves entities (one per context and ring), not files, and
    so does this scheduler: a file with 40 contexts, each with 4 jobs queued behind a held
    job, gets 40 turns ahead of an innocent file's one job, and no more (its 160 jobs do not
    all run first). The limitation is amdgpu's (its FIFO policy orders entities by their
    oldest job, no file either): documented, not given a policy of our own."""
    kmd = kmd_model.bind(RefModel(), hw_submission_limit=1, cs_check=False)
    h, v = Client(), Client()
    hb, vb = h.bo(0x10000), v.bo(0x1000)
    hold = h.submit(sdma_ib(hb, sdma.poll_regmem(hb.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    for k in range(40):
        x = new_ctx(h)
        for j in range(4):
            n = 4 * k + j
            h.submit(sdma_ib(hb, sdma.write_linear(hb.addr + 0x9000 + 4 * n, [1]), 0x100 + 0x20 * n), ctx=x)
    mine = v.submit(sdma_ib(vb, sdma.write_linear(vb.addr + 0x800, [5])))
    runs = []
    kmd.observers.append(lambda ev, f: ev == "run_job" and runs.append((f["job"].ctx.file.fd, f["job"].seq)))
    hb.u32[0x8000 // 4] = 1
    assert h.wait(hold) and v.wait(mine, 1_000_000)
    at = runs.index((v.f.fd, mine))
    assert at == 40 and all(fd == h.f.fd for fd, _ in runs[:at])  # one job of each hostile context first
    assert vb.u32[0x800 // 4] == 5


def test_an_entity_whose_job_finds_no_ring_room_keeps_its_turn():
    """drm_sched keeps the round robin's place of an entity whose next job cannot go yet
    ("If we can't queue yet, preserve the current entity in terms of fairness",
    drm_sched_rq_select_entity_rr): its job goes first once there is room. Here the entity
    was sent to the back of its run queue when it was chosen, before the ring was asked for
    room, so a job bigger than what one job frees (the UMD's copy flush: 4 IB chunks and a
    user fence, 64 dwords of the 1,024-dword SDMA ring) lost its turn each time a hostile
    client's smaller jobs (2 IBs, 32 dwords) kept the ring full: the hostile job behind it
    took each room made, and the innocent job never went into the ring while the hostile
    client fed it (120 of its jobs, none hanging). amdgpu's ring fits every job of
    hw_submission_limit; this SDMA ring does not, so room is asked for as drm_sched asks
    for credits."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    h, v = Client(), Client()
    hb, vb = h.bo(0x40000), v.bo(0x4000)
    ctxs = [h.ctx] + [new_ctx(h) for _ in range(3)]
    flags = {}  # (ctx, seq) -> the dword its polls wait on

    def hostile_job(n: int) -> None:
        flag = 0x20000 + 4 * n
        ib = sdma_ib(hb, sdma.poll_regmem(hb.addr + flag, 1, 0xFFFF_FFFF, "EQ", interval=1), 0x40 * n)
        c = ctxs[n % len(ctxs)]
        flags[c, h.submit(ib, ib, ctx=c)] = flag

    n = 0
    for n in range(60):  # (the ring full: the rest queued)
        hostile_job(n)
    assert kmd.sdma_sched.has_queued() and kmd.sdma_ring.space() < 64
    mine = v.submit(*[sdma_ib(vb, sdma.fence(vb.addr + 0x800 + 4 * j, 0x70 + j), 0x100 * j) for j in range(4)],
                    uapi.CsChunkFence(vb.handle, 0x900))
    def release_oldest() -> None:
        """The hostile client lets its oldest job end (a producer feeding the copy engine)."""
        head = kmd.sdma_sched.pending[0]
        hb.u32[flags[head.ctx.id, head.seq] // 4] = 1
        assert h.wait(head.seq, ctx=head.ctx.id)

    released = 0
    while not any(j.ctx.file is v.f for j in kmd.sdma_sched.pending):
        # each job that ends makes room for one of the hostile client's; two, for the innocent one
        assert released < 8, (f"the innocent job still queued after {released} hostile jobs ran "
                              f"({len(kmd.sdma_sched.pending)} in the ring)")
        release_oldest()
        released += 1
        n += 1
        hostile_job(n)  # and feeds the ring another
    ring = kmd.sdma_sched.pending
    while any(j.ctx.file is v.f for j in ring) and ring[0].ctx.file is not v.f:  # (hostile jobs ahead of it)
        release_oldest()
    assert v.wait(mine) and vb.u32[0x900 // 4] == mine
    assert vb.u32[0x800 // 4: 0x810 // 4].tolist() == [0x70, 0x71, 0x72, 0x73]
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0)


def test_ctx_free_waits_for_queued_jobs_with_other_ioctls_let_in():
    """CTX FREE with jobs queued behind another context's job that waits for the CPU: FREE
    waits, the context still the file's (a CS on it is taken, a second FREE from another
    thread waits too), while the CPU releases the job; then both return, one freeing it
    and the other finding it gone (EINVAL, as amdgpu's second free)."""
    kmd = kmd_model.bind(RefModel(), **HELD, cs_check=False, hw_submission_limit=1)
    c = Client()
    bo = c.bo(0x10000)
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    x = new_ctx(c)
    c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x9000, [7]), 0x100), ctx=x)
    frees = [_Free(kmd, c, x), _Free(kmd, c, x)]
    # a CS on it meanwhile: still the file's (the lock is handed over while FREE waits)
    c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x9004, [8]), 0x200), ctx=x)
    assert all(f.is_alive() for f in frees) and x in c.f.contexts
    bo.u32[0x8000 // 4] = 1
    assert c.wait(hold)
    outcomes = []
    for f in frees:
        try:
            outcomes.append(f.done().ctx_id)
        except uapi.KmdError as e:
            outcomes.append(e.errno)
    assert sorted(outcomes, key=str) == sorted([x, errno.EINVAL], key=str)
    assert x not in c.f.contexts and kmd.stats["resets"] == 0
    assert kmd.wait_for(lambda: not kmd.sdma_sched.pending and not kmd.sdma_sched.queue, 1_000_000)
    assert bo.u32[0x9000 // 4: 0x9008 // 4].tolist() == [7, 8]
    assert not any(kmd.sdma_sched.rqs) and set(kmd.sdma_sched.entities) == {c.f.contexts[c.ctx]}


def test_a_signal_during_ctx_free_s_wait_leaves_the_context_as_it_was(monkeypatch):
    """A signal held while CTX FREE waits for the context's queued jobs ends the wait with
    EINTR (the UMD makes the call again) and changes nothing: the context is still the
    file's, its job still queued; the FREE made again after the hold ends frees it."""
    kmd = kmd_model.bind(RefModel(), **HELD, cs_check=False, hw_submission_limit=1)
    c = Client()
    bo = c.bo(0x10000)
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x8000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    x = new_ctx(c)
    seq = c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x9000, [7]), 0x100), ctx=x)
    came = []
    prev = signal.signal(signal.SIGUSR1, lambda *_: came.append(kmd.lock.owned()))
    wait = kmd.wait_unlocked

    def interrupted(done, timeout):
        signal.raise_signal(signal.SIGUSR1)  # held: it ends the wait, its handler runs as FREE returns
        return wait(done, timeout)
    monkeypatch.setattr(kmd, "wait_unlocked", interrupted)
    try:
        with pytest.raises(uapi.KmdError) as ei:
            c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, x))
    finally:
        signal.signal(signal.SIGUSR1, prev)
        monkeypatch.undo()
    assert ei.value.errno == errno.EINTR and str(ei.value).startswith("EINTR: CTX: interrupted by a signal"), ei.value
    assert came == [False] and x in c.f.contexts and [j.seq for j in kmd.sdma_sched.queue] == [seq]
    bo.u32[0x8000 // 4] = 1
    assert c.wait(hold) and c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.FREE, x)).ctx_id == x
    assert x not in c.f.contexts and not kmd.sdma_sched.queue


def test_a_freed_contexts_entity_leaves_the_run_queue_once_its_jobs_ran():
    """CTX FREE with jobs queued: they run, then the context's entity is gone from the
    scheduler (run queues do not grow with every context freed while busy)."""
    kmd = kmd_model.bind(RefModel(), **HELD)
    c = Client()
    bo = c.bo(0x8000)
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ"), 0x400))
    ctxs = [new_ctx(c) for _ in range(3)]
    kmd.sched.hw_submission_limit = 1  # the others queue behind `hold`
    for k, x in enumerate(ctxs):
        c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100 + 4 * k, [k + 1]), 0x800 + 0x100 * k), ctx=x)
    frees = [_Free(kmd, c, x) for x in ctxs]  # (each waits while its job is queued)
    assert sum(len(rq) for rq in kmd.sched.rqs) == 3  # (`hold`'s, in the ring, not)
    bo.u32[0x7000 // 4] = 1
    assert c.wait(hold)
    for f in frees:
        f.done()
    assert kmd.wait_for(lambda: not kmd.sched.pending and not kmd.sched.queue, 1_000_000)
    assert bo.u32[0x40:0x43].tolist() == [1, 2, 3]
    assert not any(kmd.sched.rqs)  # (an entity is in its run queue only while it has jobs queued)
    assert set(kmd.sched.entities) == {c.f.contexts[c.ctx]}


@pytest.mark.parametrize("reset", ["full", "queue"])
def test_a_freed_contexts_jobs_keep_their_order_across_a_reset(reset):
    """CTX FREE with one job in the SDMA ring and one queued behind it (FREE waits, in a
    thread of its own), then another client's gfx error resets the device (full: queue 0's
    reset does not come back): the job in the ring is resubmitted ahead of the queued one,
    in the entity they share. It went to a new entity made for the freed
    context at the end of the run queue instead, so the later job ran first (its copy read
    what the earlier one had not written yet), and that entity stayed for good. With queue
    0's own reset (queue) the SDMA ring is not touched: its job is not run again."""
    dev = NoQueue0Reset() if reset == "full" else RefModel()
    kmd = kmd_model.bind(dev, **HELD, hw_submission_limit=1, cs_check=False, hw_timeout=2_000)
    x, g = Client(), Client()
    xbo, gbo = x.bo(), g.bo()
    first = sdma.poll_regmem(xbo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.write_linear(
        xbo.addr + 0x3100, [1])
    x.submit(sdma_ib(xbo, first))
    x.submit(sdma_ib(xbo, sdma.copy_linear(xbo.addr + 0x3200, xbo.addr + 0x3100, 4), 0x400))  # queued
    assert len(kmd.sdma_sched.pending) == 1 and len(kmd.sdma_sched.queue) == 1
    free = _Free(kmd, x, x.ctx)
    runs = []
    kmd.observers.append(lambda ev, f: ev == "run_job" and runs.append(f["job"].seq))
    bad = g.submit(g.ib(gbo, [pm4.header(0x7B, 0), 0]))  # an illegal opcode
    with pytest.raises(uapi.KmdError):
        g.wait(bad)
    xbo.u32[0x3000 // 4] = 1
    free.done()
    assert kmd.wait_for(lambda: not kmd.sdma_sched.pending and not kmd.sdma_sched.queue, 1_000_000)
    assert runs == ([bad, 1, 2] if reset == "full" else [bad, 2]) and xbo.u32[0x3200 // 4] == 1
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == ((0, 1) if reset == "full" else (1, 0))
    assert not any(kmd.sdma_sched.rqs) and not kmd.sdma_sched.entities


def test_a_freed_contexts_entity_leaves_the_run_queue_when_a_reset_drops_its_jobs():
    """CTX FREE with a job in the ring and one queued, then the job in the ring fails: the
    reset cancels the queued one too, and the freed context's entity, empty now, leaves the
    run queue then (it stayed until some later job was scheduled on that ring)."""
    kmd = kmd_model.bind(RefModel(), **HELD, hw_submission_limit=1, cs_check=False)
    c = Client()
    bo = c.bo()
    x = new_ctx(c, CtxPriority.LOW)
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x3000, 1, 1, "EQ") + [pm4.header(0x7B, 0), 0]), ctx=x)
    c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x3100, [1]), 0x100), ctx=x)  # queued behind it
    good = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x3200, [2]), 0x200))  # NORMAL: first after the reset
    free = _Free(kmd, c, x)  # (it waits while the context's second job is queued)
    assert len(kmd.sched.pending) == 1 and len(kmd.sched.queue) == 2
    bo.u32[0x3000 // 4] = 1
    assert c.wait(good) and (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    free.done()
    assert not kmd.sched.pending and not kmd.sched.queue and bo.u32[0x3100 // 4] == 0 and bo.u32[0x3200 // 4] == 2
    assert not any(kmd.sched.rqs)  # (an entity is in its run queue only while it has jobs queued)
    assert set(kmd.sched.entities) == {c.f.contexts[c.ctx]}


def test_ctx_query_names_the_context_and_waits_are_checked_against_what_it_submitted():
    kmd_model.bind(RefModel(), initial_seq=100)
    c = Client()
    bo = c.bo()
    other = new_ctx(c)
    out = c.io(Request.CTX, uapi.CtxArgs(uapi.CtxOp.QUERY_STATE, other))
    assert out.ctx_id == other != c.ctx
    s1 = c.run(bo, pm4.write_data(bo.addr + 0x100, [1]))
    s2 = c.run(bo, pm4.write_data(bo.addr + 0x104, [2]), 0x100)
    assert (s1, s2) == (100, 101)
    expect(errno.EINVAL, f"WAIT_CS: context {c.ctx} never submitted seqno 0x63 (last is 0x65)", c.wait, 99)
    ctx = c.f.contexts[c.ctx]
    assert repr(ctx) == f"Context({c.ctx}, fd {c.f.fd})"
    ctx.guilty = object()
    assert repr(ctx) == f"Context({c.ctx}, fd {c.f.fd}, guilty)"


def test_a_context_keeps_the_errors_of_its_latest_failed_jobs_only():
    from kmd_model.core.ctx import Context
    kmd_model.bind(RefModel())
    c = Client()
    ctx = Context(99, c.f, 0, 2)
    ctx.FAILED_KEPT = 3
    for seq in range(5):
        ctx.job_failed(seq, uapi.KmdError(errno.ECANCELED, f"job {seq}"))
    assert list(ctx.failed) == [2, 3, 4] and ctx.failed[4].message == "job 4"


def test_a_guilty_contexts_job_held_on_a_dependency_leaves_the_scheduler_with_it():
    """A guilty context's queued jobs are cancelled with it (Scheduler.drop_context), a job
    held on a dependency among them: its entity, out of the run queue while its head waited,
    goes with its last job. Kept aside, it would be counted as queued work on the ring for
    good (has_queued: the MMU-stuck wedge's 'jobs waiting for a VMID', a kick at each
    service) and keep its context after CTX FREE."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    y = new_ctx(c)
    hang = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))  # (the flag never set)
    d = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [1]), 0x400), ctx=y)  # (behind it in the ring)
    held = c.submit(CsChunkDep(HwIp.GFX, 0, y, d), c.ib(bo, pm4.write_data(bo.addr + 0x104, [2]), 0x600))
    gfx = next(s for s in kmd.scheds if s.name == "gfx")
    assert [e.ctx.id for e in gfx.parked] == [c.ctx]
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(hang, 1_000_000)
    assert ei.value.errno == errno.ECANCELED
    assert c.wait(d, ctx=y) and bo.u32[0x40] == 1  # (innocent: run again after the reset)
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(held)
    assert ei.value.errno == errno.ECANCELED and bo.u32[0x41] == 0
    assert not gfx.parked and not any(s.has_queued() for s in kmd.scheds)


def test_a_job_with_two_dependencies_waits_for_both():
    """A CS naming two unfinished jobs (one on each ring) runs once both have ended, not when
    the first does (Job.set_deps counts each)."""
    kmd_model.bind(RefModel(), job_timeout=1 << 30)
    c = Client()
    bo = c.bo()
    a, b, j, k = (new_ctx(c) for _ in range(4))
    d1 = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")), ctx=a)
    d2 = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x900, 1, 0xFFFF_FFFF, "EQ", interval=1)), ctx=b)
    held = c.submit(CsChunkDep(HwIp.GFX, 0, a, d1), CsChunkDep(DMA, 0, b, d2),
                    c.ib(bo, pm4.write_data(bo.addr + 0x100, [7]), 0x400), ctx=j)
    bo.u32[0x200] = 1  # d1 ends; d2 still polls
    assert c.wait(d1, ctx=a)
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [8]), 0x600), ctx=k), ctx=k)
    assert bo.u32[0x41] == 8 and bo.u32[0x40] == 0  # (a later gfx job ran; the held one did not)
    bo.u32[0x240] = 1  # d2 ends: now it runs
    assert c.wait(d2, ctx=b) and c.wait(held, ctx=j) and bo.u32[0x40] == 7


def test_a_wedge_leaves_no_entity_held_on_a_dependency():
    """A wedged device cancels every job (Kmd.wedge, Scheduler.cancel_all), a job held on a
    dependency on another ring among them: its entity goes with it, whichever ring is
    cancelled first. Kept aside, the ring would count as having queued work for good."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30)
    c = Client()
    bo = c.bo()
    b = new_ctx(c)
    d = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x900, 1, 0xFFFF_FFFF, "EQ", interval=1)), ctx=b)
    held = c.submit(CsChunkDep(DMA, 0, b, d), c.ib(bo, pm4.write_data(bo.addr + 0x100, [7]), 0x400))
    assert any(s.parked for s in kmd.scheds)
    kmd.wedge("wedged by the test")
    for seq, ctx in ((held, c.ctx), (d, b)):
        with pytest.raises(uapi.KmdError) as ei:
            c.wait(seq, ctx=ctx)
        assert ei.value.errno == errno.EIO
    assert not any(s.parked for s in kmd.scheds) and not any(s.has_queued() for s in kmd.scheds)


def test_every_job_ready_when_a_dependency_ends_goes_into_the_ring_in_one_kick():
    """When a dependency ends, the kick that follows moves every job that is ready into the
    ring, one commit for them all (Scheduler.kick): the held job and the one queued behind
    it on the same context, and a HIGH context's job queued behind a dependency too. The
    round robin walks the run queues from the first again after each job it serves
    (_ready); walked once, the context's second job, and the HIGH job when the NORMAL one
    went first, waited for the next kick (the next ioctl or interrupt)."""
    rec = Recorder()
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30, observers=[rec])
    c = Client()
    bo = c.bo()
    b, j = new_ctx(c), new_ctx(c)
    d = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x900, 1, 0xFFFF_FFFF, "EQ", interval=1)), ctx=b)
    held = c.submit(CsChunkDep(DMA, 0, b, d), c.ib(bo, pm4.write_data(bo.addr + 0x100, [7]), 0x400), ctx=j)
    behind = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [8]), 0x600), ctx=j)
    gfx = next(s for s in kmd.scheds if s.name == "gfx")
    assert [e.ctx.id for e in gfx.parked] == [j] and not rec.of("run_job")[1:]  # (d's alone)
    rec.events.clear()
    bo.u32[0x240] = 1  # d ends
    assert c.wait(d, ctx=b)
    runs = [f["job"] for f in rec.of("run_job")]
    assert [(x.ctx.id, x.seq) for x in runs] == [(j, held), (j, behind)]
    assert [f["ring"] is kmd.ring for f in rec.of("doorbell")] == [True]  # (one commit)
    assert c.wait(behind, ctx=j) and bo.u32[0x40:0x42].tolist() == [7, 8]


def test_a_high_job_made_ready_by_a_cancellation_goes_into_the_ring_in_the_same_kick():
    """A NORMAL context's job cancelled in a kick for its dependency's failure takes with it
    a HIGH context's job that waited for it, and the HIGH context's next job, which waited
    behind that one, is ready: it goes into the ring in that kick (the walk starts again
    from the first run queue when one is put back). Walked once, past the HIGH run queue
    by then, it waited for the next kick."""
    rec = Recorder()
    kmd_model.bind(RefModel(), job_timeout=20_000, observers=[rec])
    c = Client(cap_sys_nice=True)  # (it makes a HIGH context)
    bo = c.bo()
    n = new_ctx(c)
    h = new_ctx(c, priority=CtxPriority.HIGH)
    bad = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))  # (never ends: timed out)
    x = c.submit(CsChunkDep(HwIp.GFX, 0, c.ctx, bad), sdma_ib(bo, sdma.fence(bo.addr + 0x100, 5)), ctx=n)
    h1 = c.submit(CsChunkDep(DMA, 0, n, x), sdma_ib(bo, sdma.fence(bo.addr + 0x104, 6), 0x400), ctx=h)
    h2 = c.submit(sdma_ib(bo, sdma.fence(bo.addr + 0x108, 7), 0x600), ctx=h)
    rec.events.clear()
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(bad, 1_000_000)
    assert ei.value.errno == errno.ECANCELED
    assert [(f["job"].ctx.id, f["job"].seq) for f in rec.of("run_job")] == [(h, h2)]
    for seq, ctx in ((x, n), (h1, h)):
        with pytest.raises(uapi.KmdError) as ei:
            c.wait(seq, ctx=ctx)
        assert ei.value.errno == errno.ECANCELED
    assert c.wait(h2, ctx=h) and bo.u32[0x40:0x43].tolist() == [0, 0, 7]
