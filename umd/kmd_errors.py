"""What a KMD error means for the queue that got it: the UMD's exception (umd/errors.py)
for a CS's or a WAIT_CS's failure, the failed job's GpuError naming the call that recorded
its packet (umd/faults.py), and the error remembered as raised (umd/failed_jobs.py).

EIO is the kernel's answer to three things the app must handle differently: the queue's
context is banned (make a new queue), or the device is lost (nothing runs any more); the
context's CTX QUERY_STATE flags tell the two apart.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from kmd_model.uapi import CtxQueryFlags, KmdError

from . import failed_jobs, faults
from .errors import DeviceLost, GpuError, OutOfMemory, QueueBanned, SubmitError

if TYPE_CHECKING:
    from .queue import Queue


def raise_from(q: Queue, e: KmdError, what: str, cs: bool = False, subs: list | None = None) -> None:
    """Turn a KMD error of queue `q` into the UMD's exception, for API call `what` (a
    WAIT_CS's ETIME never comes here: Queue._wait_seq answers it with False, and the caller
    says what timed out). `cs`: the error is a CS ioctl's (a flush's), not a wait's; `subs`:
    the submissions that may hold the failed packet (the queue's in flight when None)."""
    if e.errno == errno.ECANCELED and e.info is not None:
        failed_jobs.mark_reported(q, e)
        if q.failed_from is None:  # (a dependency's error names the other job: suspect all of ours)
            q.failed_from = e.info.seq if e.info.ctx_id == q.ctx_id else q.first_seq
        # the KMD's ECANCELED carries the context's decoded error (what CTX QUERY_STATE
        # would return): no need to ask again
        if e.info.ctx_id and e.info.ctx_id != q.ctx_id:  # a dependency's error: its job was cancelled
            raise GpuError(e.info, None, waited_for=True) from e
        # a CS refused for its context's earlier error (not a wait that found it failed)
        command, unnamed = faults.find_command(q, e.info, q.inflight if subs is None else subs)
        raise GpuError(e.info, command, refused=cs, unnamed=unnamed) from e
    if e.errno == errno.EIO or e.errno == errno.ECANCELED and not cs:
        # EIO is a banned context's or a lost device's: the context's query tells them apart
        # (a wait's ECANCELED with no GPU error is a job its file's ban cancelled: lost too)
        if queue_banned(q):
            raise QueueBanned(f"{what}: this {q.engine} queue (context {q.ctx_id}) is banned ({e.message}); "
                              "the device and its other queues still run: make a new queue (Device.queue())",
                              q.ctx_id) from e
        raise DeviceLost(f"{what}: {'its job was cancelled: ' * (e.errno == errno.ECANCELED)}{e.message}") from e
    if e.errno == errno.ENOMEM:
        raise OutOfMemory(f"{what}: queue (context {q.ctx_id}), {len(q.inflight)} submissions in flight "
                          f"(max_inflight={q.max_inflight}): {e.message}") from e
    raise SubmitError(e.errno, f"{what}: {e}") from e


def queue_banned(q: Queue) -> bool:
    """Is the queue's own context banned (CTX QUERY_STATE's BANNED), the device running on?"""
    try:
        return bool(q.ws.ctx_query(q.ctx_id).flags & CtxQueryFlags.BANNED)
    except KmdError:
        return False  # (no answer: the device, not the queue, is what is lost)
