"""A job's end told to the jobs that depend on it (Job.ended, Job.tell, Kmd.wake_dependents)
and a ban's cancellations (Scheduler.cancel_queued), as a client sees them: a job held on two
dependencies is cancelled as soon as one fails, not once the other ends; a banned file's job
held on a dependency that still runs is cancelled with the ban at once. Written for the
survivors of the mutation campaign on kmd_model/sched/job.py and the scheduler's bounded
passes (helper 122). Reference-model backend."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkDep, HwIp
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import DMA, new_ctx, sdma_ib


def test_a_job_is_cancelled_when_one_of_its_two_dependencies_fails_while_the_other_runs():
    """A CS naming two unfinished jobs, one that fails (a malformed SDMA packet) and one still
    held in a WAIT_REG_MEM on gfx, is cancelled (ECANCELED naming the failed one) once that
    one fails: it will never run, so its WAIT_CS does not wait for the other one to end."""
    kmd_model.bind(RefModel(), job_timeout=1 << 30)
    c = Client()
    bo = c.bo()
    a, b, j = (new_ctx(c) for _ in range(3))
    d1 = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")), ctx=a)  # (held until the flag is set)
    d2 = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x900, 1, 0xFFFF_FFFF, "EQ", interval=1) + [0x23DECD3D],
                          0x400), ctx=b)  # (held, then a malformed packet: ILLEGAL_OPCODE)
    held = c.submit(CsChunkDep(HwIp.GFX, 0, a, d1), CsChunkDep(DMA, 0, b, d2),
                    c.ib(bo, pm4.write_data(bo.addr + 0x100, [7]), 0xC00), ctx=j)
    bo.u32[0x240] = 1  # d2 goes on to its malformed packet; d1 still waits
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(d2, 1_000_000, ctx=b)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE", ei.value
    with pytest.raises(uapi.KmdError) as ei:
        c.wait(held, 100_000, ctx=j)
    assert ei.value.errno == errno.ECANCELED, ei.value
    assert f"its dependency Job(ctx {b} seq {d2:#x}) failed" in ei.value.message, ei.value
    assert not c.wait(d1, 0, ctx=a) and bo.u32[0x40] == 0  # (d1 still held; the held job never ran)
    bo.u32[0x200] = 1
    assert c.wait(d1, ctx=a) and bo.u32[0x40] == 0


def test_a_banned_files_job_held_on_a_running_dependency_is_cancelled_with_the_ban_at_once():
    """A file banned by a timeout on the SDMA ring (a queue reset: its gfx job runs on) has a
    gfx job queued behind a dependency on that running job: the ban cancels it (ECANCELED,
    the ban's error) in the passes right after it, while the dependency still runs; it is
    not left waiting for the dependency to end before the ban reaches it."""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000, fallback_poll=1_000, file_ban_after_hangs=1)
    h = Client()
    other = new_ctx(h)
    bo = h.bo()
    hang = h.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x3000, 1, 0xFFFFFFFF, "EQ", interval=4)))
    assert not kmd.wait_for(lambda: False, 15_000)  # (the gfx job starts late: it outlives the SDMA reset)
    run = h.submit(h.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x100, [7]),
                        0x400), ctx=other)
    queued = h.submit(h.ib(bo, pm4.write_data(bo.addr + 0x104, [8]), 0x500), CsChunkDep(HwIp.GFX, 0, other, run),
                      ctx=other)  # (held in its entity by its dependency)
    with pytest.raises(uapi.KmdError) as ei:
        h.wait(hang, 100_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert h.f.banned and kmd.recovery_log == [("sdma0", "timeout"), ("sdma0", "queue_reset")]
    with pytest.raises(uapi.KmdError) as ei:
        h.wait(queued, 0, ctx=other)
    assert ei.value.errno == errno.ECANCELED and "is banned" in ei.value.message, ei.value
    run_job = h.f.contexts[other].jobs[run]
    assert not run_job.finished and bo.u32[0x40] == 0 and bo.u32[0x41] == 0  # (its dependency still runs)
    assert not any(s.has_queued() for s in kmd.scheds)


def test_jobs_ending_in_one_pass_past_its_share_of_wakes_tell_their_dependents_later(monkeypatch):
    """Three gfx jobs end in one pass (released together): the first has two dependents, the
    second one, the third none; the pass's share of wakes (WAKES_PER_PASS, 1 here) runs out at
    the first one's first dependent. The others are told in the passes after it, none past the
    share, and every dependent runs once, after its dependency, with its own result."""
    from kmd_model.core.kmd import Kmd
    monkeypatch.setattr(Kmd, "WAKES_PER_PASS", 1)
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30)
    c = Client()
    bo, copy = c.bo(), c.bo()
    x = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x100, [1])))
    y = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [2]), 0x400))
    z = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x108, [3]), 0x600))
    deps = [(x, 0x11), (x, 0x12), (y, 0x13)]
    held = []
    for i, (on, v) in enumerate(deps):
        k = new_ctx(c)
        held.append((k, c.submit(CsChunkDep(HwIp.GFX, 0, c.ctx, on),
                                 sdma_ib(copy, sdma.write_linear(copy.addr + 0x800 + 4 * i, [v]), 0x100 * i), ctx=k)))
    told = []
    real = Kmd.wake_dependents
    monkeypatch.setattr(Kmd, "wake_dependents", lambda self: told.append(self.wakes_left) or real(self))
    bo.u32[0x200] = 1
    assert c.wait(z) and c.wait(x) and c.wait(y) and list(bo.u32[0x40:0x43]) == [1, 2, 3]
    for k, s in held:
        assert c.wait(s, ctx=k)
    assert list(copy.u32[0x200:0x203]) == [0x11, 0x12, 0x13]
    assert min(told) >= 0, told  # (no pass told more than its share)
    assert not kmd.waking and not kmd.cancels_due()
