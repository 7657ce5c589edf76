"""CTX: submission contexts (amdgpu_ctx_ioctl): ALLOC, FREE, QUERY_STATE (= QUERY_STATE2)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from .. import uapi
from ..core.ctx import MAX_CONTEXTS
from ..sched.scheduler import Priority
from ..uapi import CtxOp, CtxPriority, KmdError, Request
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd


@ioctl_def(Request.CTX)
def ctx_ioctl(kmd: "Kmd", file: "File", a: uapi.CtxArgs) -> uapi.CtxOut:
    op = _int("CTX", "op", a.op)
    _int("CTX", "flags", a.flags, 0, 0)  # no flags are defined for any op
    # an int32, as in drm_amdgpu_ctx_in; read by ALLOC alone (amdgpu_ctx_ioctl ignores it for the rest)
    prio = _int("CTX", "priority", a.priority, -(1 << 31), (1 << 31) - 1)
    if op == CtxOp.ALLOC:
        # drm_amdgpu_ctx_in's u32, whose value ALLOC ignores (amdgpu_ctx_ioctl): any u32 is taken,
        # but not a field of the wrong type (a str, None, a float was taken and ignored)
        _int("CTX ALLOC", "ctx_id", a.ctx_id, bits=32)
        if prio not in CtxPriority._value2member_map_:
            raise KmdError(errno.EINVAL, f"CTX ALLOC: priority must be one of "
                           f"{', '.join(f'{p.name} ({p.value})' for p in CtxPriority)}, not {prio}")
        if prio == CtxPriority.UNSET:  # amdgpu_ctx_ioctl: UNSET is NORMAL
            prio = CtxPriority.NORMAL
        if prio > CtxPriority.NORMAL and not file.cap_sys_nice:
            raise KmdError(errno.EACCES, f"CTX ALLOC: priority {CtxPriority(prio).name} needs CAP_SYS_NICE "
                           "(amdgpu_ctx_priority_permit)")
        if file.banned:  # (a new context would be a fresh start for a client that hangs on purpose)
            raise KmdError(errno.EIO, f"CTX ALLOC: {file.banned}")
        if len(file.contexts) >= MAX_CONTEXTS:  # amdgpu's idr_alloc answer
            raise KmdError(errno.ENOSPC, f"CTX ALLOC: this file has {MAX_CONTEXTS} contexts, the most one file "
                           "may have (free one first)")
        run_queue = Priority.LOW if prio < 0 else Priority.NORMAL if prio == 0 else Priority.HIGH
        return uapi.CtxOut(kmd.ctx_alloc(file, run_queue).id)
    if op == CtxOp.FREE:
        ctx = _flushed(kmd, file, a.ctx_id)
        kmd.ctx_free(ctx)
        return uapi.CtxOut(ctx.id)
    if op in (CtxOp.QUERY_STATE, CtxOp.QUERY_STATE2):  # one answer: amdgpu's two ops' fields
        ctx = file.ctx(a.ctx_id, f"CTX {CtxOp(op).name}")
        kmd.service()
        return uapi.CtxOut(ctx.id, ctx.reset_status, ctx.resets, ctx.guilty or ctx.reset_error, dict(ctx.ring_status),
                           _query_flags(kmd, ctx))
    raise KmdError(errno.EINVAL, f"CTX: op must be ALLOC (1), FREE (2), QUERY_STATE (3) or QUERY_STATE2 (4), "
                   f"not {op!r}")


def _flushed(kmd: "Kmd", file: "File", ctx_id):
    """The context CTX FREE names, once none of its jobs waits in its entities any more
    (drm_sched_entity_flush, which amdgpu_ctx_fini_entity runs before the entity goes): every
    unfinished job of it is in a ring, or has run there. A freed context's queued jobs still
    ran, but FREE returned at once, so ALLOC, `sched_jobs` CSs, FREE, over and over, queued
    jobs without bound behind a job holding the ring (neither `sched_jobs` nor the file's
    4,095 contexts counted them), each entity one more turn ahead of every other client's.
    The wait lets other ioctls in (Kmd.wait_unlocked) and ends: a job that never finishes is
    reset by the job timer. Unlike amdgpu, which takes the id first, the context stays the
    file's until the wait ends, so a signal's EINTR (the UMD makes the call again) leaves it
    as it was; it is looked up again after each wait (another thread may have freed it)."""
    while True:
        if file.closed:
            raise KmdError(errno.EBADF, "CTX FREE: the file was closed while FREE waited for the context's jobs")
        ctx = file.ctx(ctx_id, "CTX FREE")
        kmd.service()  # (jobs the ring finished, and room for queued ones)
        if all(j.runs for j in ctx.jobs.values()):
            return ctx
        kmd.wait_unlocked(lambda: all(j.runs for j in ctx.jobs.values()), kmd.params.job_timeout)


def _query_flags(kmd: "Kmd", ctx) -> uapi.CtxQueryFlags:
    """QUERY2's flags, as amdgpu_ctx_query2 sets them, and BANNED: the context's CS fails
    with EIO while the device runs (on a wedged device every CS does, and it is not set:
    the UMD tells a banned queue from a lost device by it; nor when the whole file is
    banned, `file_ban_after_hangs`: a new context would be EIO too, the device is lost to
    the client)."""
    F = uapi.CtxQueryFlags
    f = F(0)
    if ctx.resets:
        f |= F.RESET
    if ctx.reset_status == uapi.ResetStatus.GUILTY:
        f |= F.GUILTY
    if ctx.banned and not kmd.wedged and not ctx.file.banned:
        f |= F.BANNED
    return f


def _guilty(who: str, ctx) -> KmdError:
    return KmdError(errno.ECANCELED, f"{who}: context {ctx.id} was reset: {ctx.guilty.message}", ctx.guilty)
