"""The jobs a reset cancels and the driver's lock (round 18 of the hostile program, helper 117).

A job whose dependency failed is cancelled (ECANCELED) by the scheduler pass that finds it:
a reset of a job thousands of others depend on (a client's own contexts, each with
`sched_jobs` jobs queued on it) had one pass cancel them all under the driver's lock, some
15 to 37 µs a job: 8,000 dependents held it 0.12 to 0.3 s in one go, and another client's
INFO waited for the whole pass (121 to 298 ms); the jobs a file may queue are bounded only
by `sched_jobs` × 4,095 contexts a ring. A pass now cancels at most
`Scheduler.CANCELS_PER_PASS` jobs; the next pass comes at once, within any wait of the
driver (`Kmd.wait_for`, `Kmd.elapse`), with the lock handed to the threads waiting for it in
between, as drm_sched cancels a job at a time from its work item, no lock held across.

A file's ban cancelled every job it had queued in the reset that banned it, as many at once:
a client made `file_ban_after_hangs` - 1 hangs first, and the bound above was gone (8,000
jobs, 0.12 s of the lock, another client's INFO waiting 128 ms). The passes after the ban
cancel them now, with the ban's error, as drm_sched_entity_pop_job cancels a guilty entity's.

A job's end, well or not, was told to every job depending on it in one go (32,000: 27 to
57 ms of the lock); a pass tells `Kmd.WAKES_PER_PASS` of them, the passes after it the rest.
"""

from __future__ import annotations

import errno
import threading
import time

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.sched.scheduler import Scheduler
from kmd_model.uapi import CsArgs, CsChunkDep, CtxArgs, CtxOp, HwIp, InfoQuery, KmdError, Request, WaitCsArgs
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import held_by_a_hung_gfx_job, sdma_ib


class _Info(threading.Thread):
    """Another client's INFO, from a thread started while the driver's lock is held: it
    waits for the lock from the start."""

    def __init__(self, v: Client):
        super().__init__(daemon=True)
        self.v, self.out = v, []

    def run(self) -> None:
        self.out.append(self.v.io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO)))


def _until_it_waits_for_the_lock(kmd) -> None:
    """Until another thread waits for the driver's lock, which this thread holds (5 s at most)."""
    for _ in range(5000):
        if kmd.lock.waiters:
            break
        time.sleep(0.001)
    assert kmd.lock.waiters


def _reset_with_dependents(monkeypatch, contexts: int, info_at: tuple = (), chains: bool = False,
                           ban: bool = False) -> dict:
    """A client's gfx job hangs (a WAIT_REG_MEM nobody releases), and `contexts` contexts of
    its own each queue `sched_jobs` (32) SDMA jobs depending on it (`chains`: every other
    context's on the last job of the context before it instead, cancelled in turn). Its
    WAIT_CS runs into the job's reset, which cancels them all (`ban`: the reset bans the
    file, `file_ban_after_hangs` 1, and they are cancelled for the ban). When the k-th of them is
    cancelled, for each k in `info_at`, another client's INFO starts waiting for the
    driver's lock. Returns the cancellations done before each INFO got the lock ("waited"),
    the order they were made in, every dependent's WAIT_CS answer and the device's clock."""
    kmd = kmd_model.bind(RefModel(), job_timeout=100_000, file_ban_after_hangs=1 if ban else 8)
    h, v = Client(), Client()
    flag, root, job, copy = held_by_a_hung_gfx_job(h)
    held = []
    for i in range(contexts):
        c = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        dep = CsChunkDep(HwIp.DMA, 0, held[-1][0], held[-1][1]) if chains and i % 2 else \
            CsChunkDep(HwIp.GFX, 0, h.ctx, root)
        held += [(c, h.io(Request.CS, CsArgs(c, [job, dep])).seq) for _ in range(kmd.params.sched_jobs)]
    order, probes = [], []
    real = Scheduler.cancel_job

    def cancel_job(self, j, error):
        for p in probes:
            if kmd.lock.entries == p["entries"]:  # (its INFO has not had the lock yet)
                p["waited"] += 1
        if len(order) in info_at:
            t = _Info(v)
            probes.append({"entries": kmd.lock.entries, "waited": 0, "thread": t})
            t.start()
            _until_it_waits_for_the_lock(kmd)
        order.append((j.ctx.id, j.seq))
        return real(self, j, error)
    monkeypatch.setattr(Scheduler, "cancel_job", cancel_job)
    try:
        h.io(Request.WAIT_CS, WaitCsArgs(h.ctx, root, 1 << 30))
        raise AssertionError("the hung job ended well")
    except KmdError as e:
        assert e.errno == errno.ECANCELED and "timed out" in e.message, e
        hang = e.message.removeprefix("WAIT_CS: ")
    answers = []
    for c, s in held:
        try:
            answers.append(h.io(Request.WAIT_CS, WaitCsArgs(c, s, 1 << 30)).busy)
        except KmdError as e:
            answers.append((e.errno, e.message))
    for p in probes:
        p["thread"].join(30)
        assert p["thread"].out and p["thread"].out[0].va_end, "the other client's INFO did not return"
    monkeypatch.setattr(Scheduler, "cancel_job", real)
    return {"waited": [p["waited"] for p in probes], "order": order, "answers": answers, "now": kmd.dev.now(),
            "hang": hang, "cancelled": kmd.stats["jobs_cancelled"]}


@pytest.mark.parametrize("how", ["dependency", "ban"])
def test_another_clients_ioctl_waits_for_a_bounded_number_of_a_resets_cancellations(monkeypatch, how):
    """Two INFOs of another client, one waiting from the first dependent's cancellation, one
    from the middle of them: each gets the driver's lock after a number of cancellations that
    does not grow with the dependents (before: all of them, every one in one lock hold).
    ban: the hang bans the file, whose queued jobs were all cancelled in the reset (the
    bound above bypassed by a client with `file_ban_after_hangs` - 1 hangs made first)."""
    few = _reset_with_dependents(monkeypatch, 8, info_at=(0, 100), ban=how == "ban")
    many = _reset_with_dependents(monkeypatch, 32, info_at=(0, 400), ban=how == "ban")
    assert len(few["order"]) == 8 * 32 + 1 and len(many["order"]) == 32 * 32 + 1  # (the hung job too)
    # 4 times the dependents, no longer a wait (one pass's share); it was every one of them
    assert max(many["waited"]) <= max(few["waited"]) < 8 * 32 // 2, (few["waited"], many["waited"])
    assert max(many["waited"]) <= Scheduler.CANCELS_PER_PASS, many["waited"]


def _by_context(order: list) -> dict:
    """Each context's cancelled jobs in the order they were cancelled."""
    out: dict = {}
    for ctx, seq in order:
        out.setdefault(ctx, []).append(seq)
    return out


def test_cancellations_split_across_passes_end_every_job_as_one_pass_did(monkeypatch):
    """With passes of CANCELS_PER_PASS cancellations, each dependent ends as it did when one
    pass cancelled them all: the same ECANCELED naming its dependency and the hang, each
    context's jobs in their order, at the same device time; chains of dependencies across
    contexts too (whose contexts' turns may come in another order: a pass that walks the run
    queue again finds the contexts a cancellation put back sooner)."""
    for chains, ban in ((False, False), (True, False), (True, True)):
        with monkeypatch.context() as m:
            m.setattr(Scheduler, "CANCELS_PER_PASS", 1 << 30, raising=False)
            one = _reset_with_dependents(m, 12, chains=chains, ban=ban)
        split = _reset_with_dependents(monkeypatch, 12, chains=chains, ban=ban)
        assert _by_context(split["order"]) == _by_context(one["order"]) and split["answers"] == one["answers"]
        assert split["now"] == one["now"] and split["cancelled"] == one["cancelled"] == 12 * 32 + 1
        if ban:
            assert set(split["answers"]) == {(errno.ECANCELED, "WAIT_CS: fd 3 is banned: its contexts' jobs timed "
                                              "out 1 times (file_ban_after_hangs 1)")}, split["answers"][:3]
            continue
        for a in split["answers"]:
            assert a[0] == errno.ECANCELED and a[1].startswith("WAIT_CS: Job(ctx "), a
            assert " on sdma0: its dependency Job(ctx " in a[1] and a[1].endswith(f" failed: {split['hang']}"), a
        assert sum(a[1].endswith(f"dependency Job(ctx 1 seq 0x1) failed: {split['hang']}")
                   for a in split["answers"]) == (6 if chains else 12) * 32


def test_a_banned_files_job_a_later_reset_puts_back_runs_again():
    """A file banned by a timeout on the SDMA ring (a queue reset: the gfx ring runs on) keeps
    its job in the gfx ring, behind another client's that hangs there later; that one's reset
    puts it back, innocent, and it runs again: the ban's cancellations, left to the passes
    after it, are of the jobs queued at the ban, not of those a reset puts back since."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, fallback_poll=1_000, file_ban_after_hangs=1)
    h, v = Client(), Client()
    other = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    bo, vbo = h.bo(), v.bo()
    hang = h.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x3000, 1, 0xFFFFFFFF, "EQ", interval=4)))
    assert not kmd.wait_for(lambda: False, 15_000)  # (the gfx jobs start late: they outlive the SDMA reset)
    g = v.submit(v.ib(vbo, pm4.wait_reg_mem(vbo.addr + 0x800, 1, 1, "EQ")))
    run = h.submit(h.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x100, [7]),
                        0x400), ctx=other)
    queued = h.submit(h.ib(bo, pm4.write_data(bo.addr + 0x104, [8]), 0x500), CsChunkDep(HwIp.GFX, 0, other, run),
                      ctx=other)  # (held in its entity by its dependency)
    assert kmd.wait_for(lambda: kmd.stats["job_timeouts"] == 1, 20_000)
    assert h.f.banned and kmd.recovery_log == [("sdma0", "timeout"), ("sdma0", "queue_reset")]
    with pytest.raises(KmdError) as ei:
        h.wait(hang)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert kmd.sched.job_at_ring(kmd.sched.pending[1].ring_start).seq == run  # (in the ring, behind g)
    with pytest.raises(KmdError) as ei:
        v.wait(g, 100_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert kmd.recovery_log[2:] == [("gfx", "timeout"), ("gfx", "queue_reset")]
    bo.u32[0x200] = 1
    assert h.wait(run, ctx=other) and bo.u32[0x40] == 7
    with pytest.raises(KmdError) as ei:  # (queued at the ban: cancelled)
        h.wait(queued, ctx=other)
    assert ei.value.errno == errno.ECANCELED and "is banned" in ei.value.message and bo.u32[0x41] == 0


def _told_before_another_ioctl(monkeypatch, contexts: int) -> int:
    """A client's gfx job held in a WAIT_REG_MEM, and `contexts` contexts of its own each with
    `sched_jobs` SDMA jobs depending on it; the hold ends and its WAIT_CS sees it end. As it
    ends, another thread waits for the driver's lock (as another client's ioctl would): the
    dependents told of the end when that thread gets the lock. Then every one runs."""
    from kmd_model.sched.scheduler import Job
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)
    h = Client()
    flag, root, job, copy = held_by_a_hung_gfx_job(h)
    held = []
    for _ in range(contexts):
        c = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        held += [(c, h.io(Request.CS, CsArgs(c, [job, CsChunkDep(HwIp.GFX, 0, h.ctx, root)])).seq)
                 for _ in range(kmd.params.sched_jobs)]
    waiting = [j for c, s in held for j in [h.f.contexts[c].jobs[s]]]
    root_job = h.f.contexts[h.ctx].jobs[root]
    told = []

    def count() -> None:
        with kmd.lock:
            told.append(sum(1 for j in waiting if not j.deps_left))
    other = threading.Thread(target=count, daemon=True)
    real = Job.ended

    def ended(self):
        if self is root_job:
            other.start()
            _until_it_waits_for_the_lock(kmd)
        return real(self)
    monkeypatch.setattr(Job, "ended", ended)
    flag.u32[0] = 1
    assert h.wait(root, 1 << 30)
    other.join(30)
    monkeypatch.setattr(Job, "ended", real)
    assert all(h.wait(s, 1 << 30, ctx=c) for c, s in held) and copy.u32[0x200] == 7
    return told[0]


def test_a_job_many_depend_on_tells_them_of_its_end_a_bounded_share_a_lock_hold(monkeypatch):
    """A job ending told every job that depended on it in one go, under the driver's lock: a
    client's job 32,000 jobs of its contexts depended on held it 27 ms as it ended, and a file
    may queue 131,000 a ring on one job. A pass tells WAKES_PER_PASS of them; the others are
    told in the passes after it (a wait makes them at once, the lock handed over between),
    so another client's ioctl waits for a bounded share of them."""
    from kmd_model.core.kmd import Kmd
    monkeypatch.setattr(Kmd, "WAKES_PER_PASS", 256, raising=False)  # (fewer jobs to show it)
    few = _told_before_another_ioctl(monkeypatch, 20)
    many = _told_before_another_ioctl(monkeypatch, 80)
    assert many <= few < 20 * 32, (few, many)  # (it was every one of them: 640 and 2,560)
    # (the pass of the interrupt handler that signalled it, and the next, in the WAIT_CS)
    assert many <= 2 * Kmd.WAKES_PER_PASS, many


def test_time_a_client_lets_pass_finishes_the_cancellations_as_a_wait_does(monkeypatch):
    """File.elapse (the client runs outside the driver while the GPU runs) makes the passes
    a reset left to cancel at once, as a wait does, before the device runs on: every
    dependent ends at the device time the first was cancelled, as when one pass cancelled
    them all (without it, at four times, a fallback_poll apart)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=100_000)
    at = []
    real = Scheduler.cancel_job
    monkeypatch.setattr(Scheduler, "cancel_job", lambda self, j, e: at.append(kmd.dev.now()) or real(self, j, e))
    h = Client()
    flag, root, job, copy = held_by_a_hung_gfx_job(h)
    n = 4 * Scheduler.CANCELS_PER_PASS
    for _ in range(n // kmd.params.sched_jobs):
        c = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        for _ in range(kmd.params.sched_jobs):
            h.io(Request.CS, CsArgs(c, [job, CsChunkDep(HwIp.GFX, 0, h.ctx, root)]))
    h.f.elapse(200_000)
    assert kmd.stats["job_timeouts"] == 1 and kmd.stats["jobs_cancelled"] == n + 1 == len(at)
    assert not kmd.sdma_sched.has_queued() and not kmd.cancels_due()
    assert len(set(at[1:])) == 1, sorted(set(at))  # (at[0]: the hung job's, before the ring test after its reset)
