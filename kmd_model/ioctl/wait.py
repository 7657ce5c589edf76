"""WAIT_CS: waiting for a context's job (amdgpu_cs_wait_ioctl).

amdgpu's wait never reads the context's guilt: it takes the ring's entity from
amdgpu_ctx_get_entity, which fails with the error of the entity's last scheduled job
(drm_sched_entity_error, since Linux 6.5), then waits for the job's own fence and returns
its error. Here a context's entity with an error is a guilty one's (a full reset): the
ring's latest job of the context failed, and every seqno waited for on that ring gets its
error; on its other rings each job answers for itself, a job that ended well before the
reset succeeding. A context a queue reset left innocent, or whose job a failed dependency
cancelled, submits on (not so in amdgpu, whose entity refuses the CS with that error): its
jobs answer for themselves.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from .. import uapi
from ..sched.fence import SEQ_MASK
from ..uapi import KmdError, Request
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.ctx import Context
    from ..core.file import File
    from ..core.kmd import Kmd


@ioctl_def(Request.WAIT_CS)
def wait_cs(kmd: "Kmd", file: "File", a: uapi.WaitCsArgs) -> uapi.WaitCsOut:
    ctx = file.ctx(a.ctx_id, "WAIT_CS")
    seq = _int("WAIT_CS", "seq", a.seq, 0, SEQ_MASK)
    timeout = _int("WAIT_CS", "timeout", a.timeout)
    if not ctx.submitted_seq(seq):
        last = f"last is {ctx.last_seq:#x}" if ctx.submitted else "nothing submitted yet"
        raise KmdError(errno.EINVAL, f"WAIT_CS: context {ctx.id} never submitted seqno {seq:#x} ({last})")
    _entity_error(ctx, seq)
    job = ctx.jobs.get(seq)
    if job is None:
        e = ctx.failed.get(seq)
        if e is not None:  # it ended with an error (a reset cancelled it, or a dependency failed)
            raise KmdError(e.errno, f"WAIT_CS: {e.message}", e.info)
        return uapi.WaitCsOut(False)
    done = kmd.wait_unlocked(lambda: job.finished, timeout)  # other clients' ioctls run meanwhile
    if job.error is not None:
        e = job.error
        raise KmdError(e.errno, f"WAIT_CS: {e.message}", e.info)
    if not done:
        if timeout == 0:
            return uapi.WaitCsOut(True)
        raise KmdError(errno.ETIME, f"WAIT_CS: seqno {seq:#x} of context {ctx.id} not signalled "
                       f"after {timeout} cycles")
    return uapi.WaitCsOut(False)


def _entity_error(ctx: "Context", seq: int) -> None:
    """A guilty context's entity on the ring job `seq` ran on has the error of the context's
    latest job there, if that failed (drm_sched_entity_error): raise it. (A job older than
    the context's last RING_KEPT has no ring known: it answers for itself.) The latest job has
    always ended: the full reset that made the context guilty cancelled every job it had
    on every ring, and it submits nothing after (test_a_guilty_context_has_no_job_left_on_any_ring)."""
    if not ctx.guilty:
        return
    ring = ctx.ring_of.get(seq)
    latest = ctx.last_on.get(ring) if ring is not None else None
    if latest is None or latest == seq:
        return  # (the job's own error, if any, is raised as its own)
    e = ctx.failed.get(latest)
    if e is not None:
        raise KmdError(e.errno, f"WAIT_CS: context {ctx.id}'s latest job on {ring}, seqno {latest:#x}, "
                       f"failed: {e.message}", e.info)
