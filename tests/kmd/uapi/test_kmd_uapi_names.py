"""How the KMD's messages name BOs and contexts once their ids have wrapped (docs/uapi.md,
the module's Ids): "fd3:2" and "context 2" in the ids' first round, "fd3:2#2" and
"context 2#2" for the ones handed out after one wrap. A closed BO that jobs still hold and a
new BO given its handle, or a freed context whose job still runs and a new context given its
id, were both named "fd3:2" (context 2) in the messages about them: a client could not tell
which one a refusal, a revoked mapping or a timeout spoke of.

Each test drives render nodes through their ioctls alone, but sets the file's next id where
2**31 more creations would have left it, as tests/kmd/uapi/test_kmd_uapi_bounds.py does.
"""

from __future__ import annotations

import errno
import logging

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkDep, CtxOp, HwIp, MappingRevoked, Request, WaitCsArgs
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.uapi.test_kmd_uapi_bounds import ID_MAX, T, _closed_bo_held_by
from tests.kmd.uapi.test_kmd_uapi_contract import PAGE, RW, Umd, ib, refused
from tests.kmd.uapi.test_kmd_uapi_lifetimes import held, now

W = Request.WAIT_CS


def test_a_closed_bo_jobs_hold_and_a_new_bo_given_its_handle_are_named_apart():
    """Handle 2 closed while jobs still reach it; the handles wrap and a new BO gets 2: a MAP
    over the closed BO's range names it fd3:2 (closed), one over the new BO's range names that
    one fd3:2#2, and so does the new BO's revoked CPU mapping once it is closed."""
    kmd_model.bind(RefModel(), job_timeout=T, fallback_poll=1_000)
    u = Umd()
    ctxs, jobs, u32, tva = _closed_bo_held_by(u, 3)  # BO 1 holds the IBs, BO 2 (closed) at tva
    fd = u.f.fd
    u.f.next_handle = ID_MAX  # (where 2**31 - 3 more creations would have left it)
    assert u.create(PAGE) == ID_MAX
    new = u.create(PAGE)
    assert new == 2  # wrapped: 1 is live, 2 was closed (its BO lives on for its jobs)
    nva = tva + 0x10_0000
    u.map(new, nva, PAGE, flags=RW)
    e = refused(errno.EINVAL, "GEM_VA", u.map, new, tva, PAGE, 0, RW)  # (waits 2 * job_timeout)
    assert e.message == (f"GEM_VA: [{tva:#x}, {tva + PAGE:#x}) overlaps the mapping [{tva:#x}, {tva + PAGE:#x}) of "
                         f"fd{fd}:2 (closed; its jobs still ran {2 * T} cycles (2 * job_timeout) after the GEM_VA "
                         "began waiting for them)")
    t0 = now(u)
    e = refused(errno.EINVAL, "GEM_VA", u.map, u.create(PAGE), nva, PAGE, 0, RW)
    assert now(u) - t0 < 1_000  # a live BO's mapping: at once
    assert e.message == f"GEM_VA: [{nva:#x}, {nva + PAGE:#x}) overlaps the mapping [{nva:#x}, {nva + PAGE:#x}) of fd{fd}:2#2"
    view = u.mmap(new)
    u.close_bo(new)
    with pytest.raises(MappingRevoked) as ei:
        view[0] = 1
    assert str(ei.value).startswith(f"BO fd{fd}:2#2 ({PAGE:#x} bytes) was closed (GEM_CLOSE): ")
    assert u.io(W, WaitCsArgs(ctxs[-1], jobs[-1], 0)).busy  # (the closed BO 2 is still in use all along)
    u32[0x3000 // 4] = 1
    assert u.wait(ctxs[-1], jobs[-1])


def test_bo_names_take_the_round_of_the_handles_alone():
    """The round is counted per file and per kind: a second wrap is #3; another file's
    handles, and the file's context ids, are in their first round still."""
    kmd_model.bind(RefModel())
    u, other = Umd(), Umd()
    live = u.create()
    u.f.next_handle = ID_MAX
    assert u.create() == ID_MAX and u.create() == 2  # (1 is live)
    u.f.next_handle = ID_MAX - 1
    assert [u.create(), u.create()] == [ID_MAX - 1, 3]  # ID_MAX is live: the second wraps again
    names = {h: b.name for h, b in u.f.handles.items()}
    fd = u.f.fd
    assert names == {live: f"fd{fd}:1", ID_MAX: f"fd{fd}:{ID_MAX}", 2: f"fd{fd}:2#2",
                     ID_MAX - 1: f"fd{fd}:{ID_MAX - 1}#2", 3: f"fd{fd}:3#3"}
    c = u.ctx()
    assert (c, u.f.contexts[c].name) == (1, "1")
    h = other.create()
    assert other.f.handles[h].name == f"fd{other.f.fd}:1"


def test_a_freed_contexts_running_job_and_a_new_context_given_its_id_are_named_apart(caplog):
    """Context 2 freed while its job holds the ring (FREE waits for queued jobs only); the ids
    wrap and a new context gets 2. Both jobs are seqno 1 and both time out: the timeouts, the
    guilty lines of the log and the new context's WAIT_CS name the freed one context 2 and the
    new one context 2#2 (HwErrorInfo.ctx_id is 2 for both: the uAPI's integer id), and so does
    the ECANCELED of a job that named the new one's failed job as its dependency."""
    kmd_model.bind(RefModel(), job_timeout=T, fallback_poll=1_000)
    u = Umd()
    keep, old = u.ctx(), u.ctx()
    h, u32, va = u.bo(0x4000)
    first = held(u, old, u32, h, va)
    u.io(Request.CTX, uapi.CtxArgs(CtxOp.FREE, old))
    u.f.next_ctx_id = ID_MAX  # (where 2**31 - 3 more ALLOCs would have left it)
    assert u.ctx() == ID_MAX
    new = u.ctx()
    assert (keep, old, new) == (1, 2, 2)  # wrapped: 1 is live, 2 was freed
    caplog.set_level(logging.WARNING, logger="gpucosim.kmd")
    second = held(u, new, u32, h, va, offset=0x100)
    assert first == second == 1
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, new, second, 4 * T)
    assert e.message.startswith("WAIT_CS: job 0x1 timed out on gfx: ") and e.message.endswith(", context 2#2")
    assert e.info.ctx_id == 2 and e.info.message.endswith(", context 2#2")
    lines = [r.getMessage() for r in caplog.records if r.name == "gpucosim.kmd"]
    timeouts = [x for x in lines if x.startswith("timeout: job 0x1 timed out on gfx: ")]
    assert [x.rsplit(", ", 1)[1] for x in timeouts] == ["context 2", "context 2#2"], lines
    fd = u.f.fd
    assert f"context 2 of fd {fd} is guilty: 1 job(s) cancelled" in lines
    assert f"context 2#2 of fd {fd} is guilty: 1 job(s) cancelled" in lines
    # a CS naming the new context's failed job as a dependency: cancelled, naming it 2#2 (it
    # said "ctx 2", the freed context's name, once the job had ended: FailedDep kept the id)
    dep = u.cs(keep, ib(u32, pm4.nop(6), offset=0x200, handle=h), CsChunkDep(HwIp.GFX, 0, new, second))
    e = refused(errno.ECANCELED, "WAIT_CS", u.wait, keep, dep)
    assert "its dependency Job(ctx 2#2 seq 0x1) failed: " in e.message, e.message


def test_context_names_take_the_round_of_the_context_ids_alone():
    """As a BO's (test_bo_names_take_the_round_of_the_handles_alone): a context handed out
    after the file's context ids wrapped twice is "#3", and the file's handles are in their
    first round still."""
    kmd_model.bind(RefModel())
    u = Umd()
    live = u.ctx()
    u.f.next_ctx_id = ID_MAX  # (where 2**31 - 2 more ALLOCs would have left it)
    assert u.ctx() == ID_MAX and u.ctx() == 2  # (1 is live)
    u.f.next_ctx_id = ID_MAX - 1
    assert [u.ctx(), u.ctx()] == [ID_MAX - 1, 3]  # ID_MAX is live: the second wraps again
    names = {c: ctx.name for c, ctx in u.f.contexts.items()}
    assert names == {live: "1", ID_MAX: str(ID_MAX), 2: "2#2", ID_MAX - 1: f"{ID_MAX - 1}#2", 3: "3#3"}
    h = u.create()
    assert u.f.handles[h].name == f"fd{u.f.fd}:1"
