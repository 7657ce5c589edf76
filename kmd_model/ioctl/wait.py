"""WAIT_CS: waiting for a context's job (amdgpu_cs_wait_ioctl)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from .. import uapi
from ..sched.fence import SEQ_MASK
from ..uapi import KmdError, Request
from .ctx import _guilty
from .dispatch import _int, ioctl_def

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd


@ioctl_def(Request.WAIT_CS)
def wait_cs(kmd: "Kmd", file: "File", a: uapi.WaitCsArgs) -> uapi.WaitCsOut:
    ctx = file.ctx(a.ctx_id, "WAIT_CS")
    seq = _int("WAIT_CS", "seq", a.seq, 0, SEQ_MASK)
    timeout = _int("WAIT_CS", "timeout", a.timeout)
    if ctx.guilty:
        raise _guilty("WAIT_CS", ctx)
    if not ctx.submitted_seq(seq):
        last = f"last is {ctx.last_seq:#x}" if ctx.submitted else "nothing submitted yet"
        raise KmdError(errno.EINVAL, f"WAIT_CS: context {ctx.id} never submitted seqno {seq:#x} ({last})")
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
    if ctx.guilty:
        raise _guilty("WAIT_CS", ctx)
    if not done:
        if timeout == 0:
            return uapi.WaitCsOut(True)
        raise KmdError(errno.ETIME, f"WAIT_CS: seqno {seq:#x} of context {ctx.id} not signalled "
                       f"after {timeout} cycles")
    return uapi.WaitCsOut(False)
