"""Hostile clients beside an innocent one, on every ring at once (reference model): random
jobs that hang, break the packet rules, fault, reach for the innocent client's memory by its
addresses and its physical ones, depend on each other's jobs, run at every priority; contexts
freed and files closed with jobs queued or running; BOs mapped in new ranges, replaced,
unmapped and closed under them; the checker on or off, one job in flight per ring or many.

Whatever they do: every refusal is one of the errnos the docs give; the innocent client's
jobs all complete (resubmitted through every reset), its memory holds exactly what they
wrote and none of its values reach a hostile BO; every queue drains (nothing hangs);
closing every file leaves no BO, nothing in the shadow pool, no entity in a run queue.
"""

from __future__ import annotations

import errno
import random

import pytest

import kmd_model
from kmd_model.uapi import (CsChunkDep, CtxArgs, CtxOp, Domain, GemCloseArgs, GemCreateArgs, GemVaArgs, HwIp,
                            KmdError, Request, VaOp)
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client
from .sched_helpers import sdma_ib

EVIL = 0xBAD0_0BAD
ANSWERS = {errno.EINVAL, errno.ECANCELED, errno.EIO, errno.ETIME, errno.ENOMEM, errno.ENOENT}
FLAGS = 0xF000  # 16 dwords each hostile client's waits poll (set to release them)


class Hostile(Client):
    def __init__(self):
        super().__init__()
        self.mem = self.bo(0x10000)
        self.mem.u32[0xF800 // 4] = EVIL  # what its DMA copies spread
        self.ctxs = [self.ctx]
        self.seqs: list[tuple[int, int, int]] = []  # (context, ring, seqno)
        self.extra: list[tuple[int, int]] = []  # (handle, va) of BOs mapped in far ranges

    def release(self) -> None:
        self.mem.u32[FLAGS // 4: FLAGS // 4 + 16] = 1


def _hostile_step(rng: random.Random, c: Hostile, victim_addrs: list[int], step: int) -> None:
    r = rng.random()
    if r < 0.06:
        c.f.close()
    elif r < 0.10 and len(c.ctxs) > 1:
        x = c.ctxs.pop(rng.randrange(len(c.ctxs)))
        c.io(Request.CTX, CtxArgs(CtxOp.FREE, x))
        c.seqs = [s for s in c.seqs if s[0] != x]
    elif r < 0.14:
        c.ctxs.append(c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=rng.choice([0, 512, -512]))).ctx_id)
    elif r < 0.20:
        c.release()
    elif r < 0.28:  # a BO mapped (or replacing what is there) in a range of its own, maybe a new table's
        va = rng.choice([0x2000_0000, 0x1000_0000, 0x0800_0000]) + rng.randrange(64) * 0x1000
        out = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, rng.choice([Domain.GTT, Domain.VRAM]), 0))
        c.io(Request.GEM_VA, GemVaArgs(out.handle, rng.choice([VaOp.MAP, VaOp.REPLACE]), va, 0, 0x1000, RWX))
        c.extra.append((out.handle, va))
    elif r < 0.34 and c.extra:
        h, va = c.extra.pop(rng.randrange(len(c.extra)))
        if rng.random() < 0.5:
            c.io(Request.GEM_VA, GemVaArgs(h, VaOp.UNMAP, va))
        c.io(Request.GEM_CLOSE, GemCloseArgs(h))
    else:
        ctx, ring = rng.choice(c.ctxs), rng.choice([HwIp.GFX, HwIp.DMA])
        off = rng.randrange(0, 0xE000, 0x100)
        flag = c.mem.addr + FLAGS + 4 * rng.randrange(16)
        target = rng.choice(victim_addrs + [0x3000_0000, c.mem.addr + off + 0x40, 0x2000_0010]
                            + [va + 0x10 for _, va in c.extra])
        deps = []
        if c.seqs and rng.random() < 0.4:
            dctx, dring, dseq = rng.choice(c.seqs)
            deps = [CsChunkDep(dring, 0, dctx, dseq)]
        kind = rng.random()
        if ring == HwIp.GFX:
            words = ([pm4.header(0x7B, 0), 0] if kind < 0.1 else
                     pm4.wait_reg_mem(flag, 1, 1, "EQ") + pm4.write_data(target, [EVIL]) if kind < 0.25 else
                     pm4.dma_data(target, c.mem.addr + 0xF800, 4, cp_sync=1) if kind < 0.4 else
                     pm4.dma_data(c.mem.addr + off + 0x80, rng.choice(victim_addrs), 64, cp_sync=1) if kind < 0.5 else
                     pm4.write_data(target, [EVIL]))
            ib = c.ib(c.mem, words, off)
        else:
            words = ([0x23DECD3D] if kind < 0.1 else
                     sdma.poll_regmem(flag, 1, 0xFFFF_FFFF, "EQ", interval=4) + sdma.write_linear(target, [EVIL])
                     if kind < 0.25 else sdma.write_linear(target, [EVIL]))
            ib = sdma_ib(c.mem, words, off)
        seq = c.submit(*deps, ib, ctx=ctx)
        c.seqs.append((ctx, ring, seq))
        if rng.random() < 0.3:
            c.wait(seq, rng.choice([0, 5_000, 100_000]), ctx=ctx)


@pytest.mark.parametrize("seed", range(24))
def test_hostile_clients_leave_the_innocent_one_and_the_driver_whole(seed):
    rng = random.Random(seed)
    kmd = kmd_model.bind(RefModel(), job_timeout=8_000, fallback_poll=1_000,
                         hw_submission_limit=rng.choice([1, 2, 64]), ban_after_hangs=rng.choice([1, 3, 100]),
                         cs_check=rng.random() < 0.5, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    victim = Client()
    vbo = victim.bo(0x10000)
    vhigh = victim.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=512)).ctx_id
    victim_addrs = [vbo.addr + 0xE000, victim.phys(vbo) + 0xE000]
    wrote: dict[int, int] = {}  # dword index in vbo -> value
    vjobs: list[tuple[int, int]] = []
    hostiles = [Hostile() for _ in range(3)]
    for step in range(80):
        if rng.random() < 0.25:  # the innocent client: one write, on a ring and context of its choice
            off = 0x100 * (len(vjobs) + 1)  # (its IBs never rewritten: the SDMA runs them from its memory)
            at, val = 0xE000 + (off >> 4), rng.randrange(1, 1 << 32)
            ring_ib = (victim.ib(vbo, pm4.write_data(vbo.addr + at, [val]), off) if rng.random() < 0.5
                       else sdma_ib(vbo, sdma.write_linear(vbo.addr + at, [val]), off))
            ctx = rng.choice([victim.ctx, vhigh])
            vjobs.append((ctx, victim.submit(ring_ib, ctx=ctx)))
            wrote[at // 4] = val
            continue
        live = [c for c in hostiles if not c.f.closed]
        if not live:
            hostiles.append(Hostile())
            continue
        try:
            _hostile_step(rng, rng.choice(live), victim_addrs, step)
        except KmdError as e:
            assert e.errno in ANSWERS, e
    for c in hostiles:
        if not c.f.closed:
            c.release()
    for ctx, seq in vjobs:
        assert victim.wait(seq, 3_000_000, ctx=ctx)  # never cancelled: innocent
    assert {i: int(vbo.u32[i]) for i in wrote} == wrote and EVIL not in vbo.u32.tolist()
    assert kmd.wait_for(lambda: all(not s.pending and not s.queue for s in kmd.scheds), 5_000_000)
    assert EVIL not in vbo.u32.tolist()
    for c in hostiles:
        if not c.f.closed:
            assert not set(wrote.values()) & set(c.mem.u32.tolist())  # nothing of the victim's came home
    for c in (*hostiles, victim):
        c.f.close()
    assert not kmd.live_bos() and kmd.shadow.used == 0
    assert not any(rq for s in kmd.scheds for rq in s.rqs) and not any(s.entities for s in kmd.scheds)
    assert not any(s.parked for s in kmd.scheds)


def _lines_in(fn, module: str | tuple = ("sched/scheduler.py", "sched/job.py")) -> tuple[int, tuple]:
    """Line events in kmd_model/`module` (or each of a tuple) while `fn()` runs (a count of its
    steps that load does not move, unlike its time), and what `fn` returned. The scheduler's
    by default: its module and its jobs' (sched/job.py)."""
    import sys
    lines = [0]

    def tracer(frame, event, arg):
        if frame.f_code.co_filename.endswith(module):
            lines[0] += 1
            return tracer
        return None
    prev = sys.gettrace()
    sys.settrace(tracer)
    try:
        out = fn()
    finally:
        sys.settrace(prev)
    return lines[0], (out,)


def _scheduler_steps_of_a_cs(ndeps: int, contexts: int = 40) -> tuple[int, list]:
    """Line events in kmd_model/sched/scheduler.py and job.py while an innocent client makes one CS, with
    a hostile one's `contexts` contexts each holding a queued copy job with `ndeps` dependency
    chunks on its gfx job that holds the CP; then the hold ends and everything runs. Returns
    the count and the hostile jobs' WAIT_CS answers."""
    from kmd_model.uapi import CsArgs, WaitCsArgs
    from .sched_helpers import held_by_a_hung_gfx_job, sdma_ib
    kmd_model.bind(RefModel(), job_timeout=1 << 40)
    h, inn = Client(), Client()
    flag, root, job, copy = held_by_a_hung_gfx_job(h)
    held = []
    for _ in range(contexts):
        c = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        held.append((c, h.io(Request.CS, CsArgs(c, [job] + [CsChunkDep(HwIp.GFX, 0, h.ctx, root)] * ndeps)).seq))
    ibi = inn.bo(0x1000)
    lines, (seq,) = _lines_in(lambda: inn.submit(sdma_ib(ibi, sdma.write_linear(ibi.addr + 0x800, [1]))))
    flag.u32[0] = 1
    assert inn.wait(seq)
    answers = [h.io(Request.WAIT_CS, WaitCsArgs(c, s, 1 << 30)).busy for c, s in held]
    return lines, answers


def test_a_job_with_many_dependencies_costs_the_scheduler_no_more_than_one_with_one():
    """Every pass of the scheduler (each CS of any client, each step of any wait) looked at
    every dependency of the head job of every entity (`any(...)` over the 1,024 a CS may
    carry, for a failed one): a client with many contexts, each with a queued job of 1,024
    dependencies on a job it holds the CP with, made every other client's CS and wait pay
    for all of them (an innocent copy CS took 78 ms with 600 such contexts, 2 ms with one
    dependency each). A job now counts its unfinished and failed dependencies, told by each
    as it ends (drm_sched's fence callbacks): a pass looks at each head job once."""
    few, answers_few = _scheduler_steps_of_a_cs(1)
    many, answers_many = _scheduler_steps_of_a_cs(1024)
    assert answers_few == answers_many == [False] * 40  # (every held job ran once its dependency had)
    assert many < 2 * few, (few, many)


def _scheduler_steps_with_idle_contexts(contexts: int) -> int:
    """Line events in kmd_model/sched/scheduler.py and job.py while an innocent client makes one CS and
    waits for it, beside a hostile file whose `contexts` contexts each ran one job (their
    entities idle, the contexts kept)."""
    from kmd_model.uapi import CsArgs
    kmd_model.bind(RefModel())
    h, inn = Client(), Client()
    ib = h.bo(0x1000)
    chunk = h.ib(ib, pm4.write_data(ib.addr + 0x800, [7]))
    seqs = []
    for _ in range(contexts):
        c = h.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        seqs.append((c, h.io(Request.CS, CsArgs(c, [chunk])).seq))
    assert all(h.wait(s, ctx=c) for c, s in seqs)
    ibi = inn.bo(0x1000)
    lines, (ran,) = _lines_in(lambda: inn.run(ibi, pm4.write_data(ibi.addr + 0x800, [1])))
    assert ran
    return lines


def test_idle_contexts_of_another_file_cost_the_scheduler_nothing():
    """An entity stayed in its run queue from its context's first job until the context was
    freed, and every scheduler pass (each CS, each step of every wait, of every client) walked
    every entity of the queue: a file with 4,094 contexts in each of 4 files, each having
    run one job, made an innocent client's 100 small jobs take 1.7 s instead of 0.1 s (and the
    hostile's own setup 115 s). An entity is in its run queue only while it has jobs queued
    now, as drm_sched's FIFO run queue keeps only entities with work."""
    few = _scheduler_steps_with_idle_contexts(1)
    many = _scheduler_steps_with_idle_contexts(400)
    assert many < 2 * few, (few, many)


def test_contexts_whose_jobs_wait_for_a_dependency_cost_the_scheduler_nothing():
    """An entity whose head job waits for a dependency stayed in its run queue, and every
    scheduler pass looked at it: a client with 4,094 contexts, each with a copy job held on
    a dependency on one job of its own, made another client's 100 small copies take 0.89 s
    instead of 0.13 s (for as long as it held that job). Such an entity is parked out of its
    run queue now, and its head's last dependency to end puts it back (Job.ended)."""
    few, answers_few = _scheduler_steps_of_a_cs(1, contexts=1)
    many, answers_many = _scheduler_steps_of_a_cs(1, contexts=400)
    assert answers_few == [False] and answers_many == [False] * 400  # (every held job ran once its dependency had)
    assert many < 2 * few, (few, many)


def _cs_lines_of_64_ibs_by_handle(mappings: int) -> int:
    """Line events in kmd_model/ioctl/cs.py while a client that holds `mappings` other mappings
    (one page of one BO, mapped again and again) makes one CS of 64 IB chunks, each naming its
    IB by handle: what the IBs' lookup costs. The BO holding the IBs has two mappings, a
    reader's first and an executable one, so the lookup's choice is made each time."""
    from kmd_model import uapi
    from kmd_model.uapi import CsArgs, CsChunkIb, VmFlags
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)
    c = Client()
    page = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
    for k in range(mappings):
        c.io(Request.GEM_VA, GemVaArgs(page, VaOp.MAP, 0x3000_0000 + 0x1000 * k, 0, 0x1000, RWX))
    out = c.bo(0x1000)  # where the IBs write
    ibs = c.io(Request.GEM_CREATE, GemCreateArgs(0x1000, 0, Domain.GTT, 0)).handle
    c.io(Request.GEM_VA, GemVaArgs(ibs, VaOp.MAP, 0x2000_0000, 0, 0x1000, VmFlags.READABLE))
    c.io(Request.GEM_VA, GemVaArgs(ibs, VaOp.MAP, 0x2100_0000, 0, 0x1000, RWX))
    view = c.io(Request.GEM_MMAP, uapi.GemMmapArgs(ibs)).view.view("<u4")
    n = kmd.params.max_ib_chunks
    for k in range(n):
        dw = pm4.write_data(out.addr + 4 * k, [k + 1])
        view[8 * k: 8 * k + 8] = dw + pm4.pad(8 - len(dw))
    chunks = [CsChunkIb(8, handle=ibs, offset=32 * k) for k in range(n)]
    assert c.wait(c.submit(*chunks))  # (the checker's view of the mappings made once, not counted)
    out.u32[:n] = 0
    lines, (seq,) = _lines_in(lambda: c.io(Request.CS, CsArgs(c.ctx, chunks)).seq, "ioctl/cs.py")
    assert c.wait(seq) and out.u32[:n].tolist() == list(range(1, n + 1))  # run from the executable mapping
    return lines


def test_an_ib_by_handle_costs_the_same_whatever_mappings_the_file_holds():
    """CS looked up each IB named by handle by scanning every mapping of the file, under the
    driver's lock: a client holding thousands of mappings made each of its CSs cost that times
    64 IB chunks, and every other client waited for the lock meanwhile. The VM now keeps each
    BO's mappings (Vm.maps_of), so the lookup examines the BO's own."""
    few = _cs_lines_of_64_ibs_by_handle(1)
    many = _cs_lines_of_64_ibs_by_handle(3000)
    assert many < few + 100, (few, many)
