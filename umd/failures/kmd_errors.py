"""What a KMD error means for the queue that got it: the UMD's exception (umd/errors.py)
for a CS's or a WAIT_CS's failure, the failed job's GpuError naming the call that recorded
its packet (umd/failures/faults.py), and the error remembered as raised (umd/failures/failed_jobs.py).

EIO is the kernel's answer to three things the app must handle differently: the queue's
context is banned (make a new queue), the Device's whole file is banned (no context of it
runs, nor can one be made: open a new Device), or the device is lost (nothing runs any
more). The context's CTX QUERY_STATE flags tell the first from the others; the file's ban
is learnt from CTX ALLOC (file_banned). A guilty context's CS is ECANCELED even in a
banned file (the kernel looks at the guilt first): its "make a new queue" needs the same
question.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from kmd_model.uapi import CtxPriority, CtxQueryFlags, KmdError, PacketAt

from . import failed_jobs, faults
from ..errors import OPEN_NEW_DEVICE, DeviceLost, GpuError, OutOfMemory, QueueBanned, SubmitError

if TYPE_CHECKING:
    from ..queue import Queue


def raise_from(q: Queue, e: KmdError, what: str, cs: bool = False, subs: list | None = None,
               labels: dict | None = None) -> None:
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
        subs = q.inflight if subs is None else subs
        command, unnamed = faults.find_command(q, e.info, subs)
        why = file_banned(q) if cs else None  # (a refusal says what to do next: a new queue, or a new Device)
        raise GpuError(e.info, command, refused=cs, unnamed=unnamed, file_banned=why,
                       hint=faults.hint_of(e.info, subs) if command else None) from e
    if e.errno == errno.EIO or e.errno == errno.ECANCELED and not cs:
        # EIO is a banned context's, a banned file's or a lost device's: the context's query
        # tells the first from the others, CTX ALLOC the file's ban (a wait's ECANCELED with
        # no GPU error is a job its file's ban cancelled: lost too)
        if queue_banned(q):  # (never set in a banned file: kmd_model/ioctl/ctx.py _query_flags)
            raise QueueBanned(f"{what}: this {q.engine} queue (context {q.ctx_id}) is banned ({e.message}); "
                              "the device and its other queues still run: make a new queue (Device.queue())",
                              q.ctx_id) from e
        said = f"{what}: {'its job was cancelled: ' * (e.errno == errno.ECANCELED)}{e.message}"
        why = file_banned(q)
        if why is not None:  # (the kernel's words may name the context's own ban only)
            said += f": {OPEN_NEW_DEVICE}" if said.endswith(why) else f"; {why}: {OPEN_NEW_DEVICE}"
        raise DeviceLost(said) from e
    if e.errno == errno.ENOMEM:
        raise OutOfMemory(f"{what}: queue (context {q.ctx_id}), {len(q.inflight)} submission{'s' * (len(q.inflight) != 1)} in flight "
                          f"(max_inflight={q.max_inflight}): {e.message}") from e
    said = f"{what}: {e}"
    if cs and isinstance(e.info, PacketAt) and labels:
        if e.info.addr in labels:  # (the refused flush's packets, `labels`)
            label = labels[e.info.addr]
            said += f" (recorded by {label}{': ' + label.hint if getattr(label, 'hint', None) else ''})"
        else:  # in an IB2 of the app's own: the call that recorded the INDIRECT_BUFFER running it
            call = next((labels[a] for a in e.info.via if a in labels), None)
            if call is not None:
                said += f" (run by the INDIRECT_BUFFER recorded by {call})"
    raise SubmitError(e.errno, said) from e


def queue_banned(q: Queue) -> bool:
    """Is the queue's own context banned (CTX QUERY_STATE's BANNED), the device running on?"""
    try:
        return bool(q.ws.ctx_query(q.ctx_id).flags & CtxQueryFlags.BANNED)
    except KmdError:
        return False  # (no answer: the device, not the queue, is what is lost)


def file_banned(q: Queue) -> str | None:
    """Why the kernel banned the file of `q`'s Device (file_ban_after_hangs), or None while it
    has not. No query says so (QUERY_STATE's BANNED is the context's own ban, left unset in
    a banned file; INFO has no client state): the one call the file's ban alone refuses is
    CTX ALLOC (EIO), what Device.queue() would meet, so the UMD asks it and frees the
    context it got when not banned. Only on these error paths, and once banned, never again."""
    ws = q.ws
    if ws.banned is None:
        try:
            ws.ctx_free(ws.ctx_alloc(CtxPriority.NORMAL))
        except KmdError as e:
            if e.errno == errno.EIO:  # (ENOSPC, all the file's contexts taken, is checked after the ban)
                ws.banned = ban_reason(e)
    return ws.banned


def ban_reason(e: KmdError) -> str:
    """The kernel's words why the file is banned, from CTX ALLOC's EIO ("CTX ALLOC: fd 3 is
    banned: ...", as every ioctl's message starts with its name)."""
    return e.message.removeprefix("CTX ALLOC: ")
