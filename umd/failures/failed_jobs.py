"""Finding a queue's failed jobs whose error no wait has raised, so that the app learns of
each once, at its next flush, finish, Event.wait or close: all those that call finds at
once (the oldest raised, the others its notes), since a failure raised a call later than
the first after it came late, and close() (nothing after it) lost it. With them go the
async queue's refused flushes not raised yet (umd/submit.py refusals) and the error the
call's own wait or CS met, all in the order of the flushes they came from (`pending`):
every error pending at a call is raised by it, none twice.

A wait on the queue's last job is told of that job alone (WAIT_CS names one job, as
amdgpu_cs_wait_ioctl does); a failed job ahead of it raised only while the kernel answers
every wait on that ring with its error. That is so when the error took the full reset (the
context is guilty for good, amdgpu's ctx->guilty, and the latest job of a queue's context
on its one ring failed: amdgpu's entity error), but not where the job's own ring was reset
alone (the copy engine's sdma0, the high-priority gfx ring, and the gfx ring, whose
CP_QUEUE_RESET.Q0 the KMD uses since 6 December 2026): the context runs on, the jobs
flushed after the reset end well, the user fence passes the failed job's seqno, and its
error was lost. Nor when a job was cancelled because a job it waited for (wait_event)
failed: its context was never reset.

So a queue keeps the submissions whose good end is not proven yet (`Queue.watch.jobs`):
every one, since every ring may be reset alone (each ring's recovery starts with its
queue's reset). Proving them costs little: CTX QUERY_STATE's
`resets` (amdgpu's reset counter, which every reset of any ring moves) unchanged since the
queue last looked means no reset has cancelled a job since, so a job the user fence has
passed ended well (one ioctl for any number of jobs). When it moved, or a job carries a
dependency (whose cancel moves no counter), the kernel is asked about each job (WAIT_CS
with no wait: busy, ended, or its error), as Mesa's radeonsi asks the context's reset
state at its flushes.
"""

from __future__ import annotations

import errno
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kmd_model.uapi import KmdError

from .. import runtime, submit
from ..errors import GpuError, UmdError
from . import kmd_errors

if TYPE_CHECKING:
    from ..queue import Queue, Submission

REPORTED_KEPT = 1024  # errors a queue remembers having raised (a failed job's seqno is not seen again after)


@dataclass(eq=False)
class Watch:
    """A queue's jobs not yet proven to have ended well, and how they are proven."""

    jobs: deque = field(default_factory=deque)  # Submissions not yet proven, oldest first
    resets_seen: int | None = None  # CTX QUERY_STATE's reset count at the last look
    ask_all: bool = False  # ask the kernel about every job at the next look
    reported: dict = field(default_factory=dict)  # (context, seqno) of the failed jobs whose error was raised


def error_key(e: KmdError) -> tuple[int, int] | None:
    """What names a failed job's error: the context and seqno of the job that caused it (a
    job cancelled with it carries the same)."""
    return (e.info.ctx_id, e.info.seq) if e.errno == errno.ECANCELED and e.info is not None else None


def mark_reported(q: Queue, e: KmdError) -> None:
    """Remember that the error of `e` is raised now (kmd_errors.raise_from)."""
    key, seen = error_key(e), q.watch.reported
    if key is not None:
        seen[key] = None
        if len(seen) > REPORTED_KEPT:
            del seen[next(iter(seen))]


def track(q: Queue, sub: Submission) -> None:
    """A submission is in flight: it needs proving (every queue's ring may be reset alone)."""
    q.inflight.append(sub)
    q.watch.jobs.append(sub)


def check(q: Queue, what: str, upto: int | None = None, found: tuple | None = None) -> None:
    """Raise every error pending for API call `what` of `q` (pending), if any."""
    runtime._raise_first(pending(q, what, upto, found))


def pending(q: Queue, what: str, upto: int | None = None, found: tuple | None = None) -> list[UmdError]:
    """The errors of `q` the app has not been told of, for API call `what`, oldest first
    (by the flush each came from), each marked raised: the async queue's refused flushes
    (submit.refusals) and the failed jobs (of the flushes up to number `upto`, all when
    None), each failed job's naming the call that recorded its packet; the jobs proven to
    have ended well are forgotten. The caller raises the first, the others as its notes (as
    close() raises several errors): each reaches the app at its first call after it, once.
    `found`: (flush number, error) the same call's wait or CS met, raised in its place."""
    errors = submit.refusals(q, upto) + _failures(q, what, upto)
    if found is not None:
        errors.append(found)
    errors.sort(key=lambda n_e: n_e[0])  # (stable; a refused flush has no job: no two share a number)
    return [e for _, e in errors]


def _failures(q: Queue, what: str, upto: int | None) -> list[tuple[int, UmdError]]:
    """pending's look: the failed jobs' (flush number, error), oldest first (each marked raised)."""
    w = q.watch
    subs = [s for s in w.jobs if upto is None or s.number <= upto]
    if not subs or q.closed:
        return []
    ask_all = w.ask_all
    try:
        resets = q.ws.ctx_query(q.ctx_id).resets
    except KmdError:
        resets = None  # (no answer: ask about each job, whose WAIT_CS says what is wrong)
    if resets is None or resets != w.resets_seen:
        ask_all, w.resets_seen = True, resets
    # a look that asks (a reset since the last, which the count seen from now on covers)
    # leaves the jobs after `upto` to the next look, which must ask them too: one that failed
    # in that reset, whose seqno the fence passes, would pass for ended well
    w.ask_all = ask_all and len(subs) < len(w.jobs)
    errors: list[tuple[int, UmdError]] = []
    for sub in subs:
        if not ask_all and not sub.deps:
            if q.seq_done(sub.seq):  # no reset since the last look: it ended well
                w.jobs.remove(sub)
            continue
        outcome = _ask(q, sub)
        if outcome is False:
            continue  # still to run: asked again at the next look
        w.jobs.remove(sub)
        if isinstance(outcome, KmdError) and error_key(outcome) not in w.reported:
            try:
                kmd_errors.raise_from(q, outcome, what, subs=[sub, *q.inflight])
            except GpuError as e:
                errors.append((sub.number, e))
            except UmdError as e:  # (the device or the file is lost: the later jobs' answers say no more)
                errors.append((sub.number, e))
                break
    return errors


def _ask(q: Queue, sub: Submission) -> bool | KmdError:
    """Has every job of `sub` (a copy flush may take several CS) ended? True when all ended
    well, False while one is still to run, else the first one's error."""
    for k in range(sub.ncs - 1, -1, -1):
        try:
            if not q.ws.wait_cs(q.ctx_id, (sub.seq - k) & 0xFFFF_FFFF, 0):
                return False
        except KmdError as e:
            return e
    return True


def wait_last(q: Queue, timeout: int, call: str) -> tuple[bool, tuple | None]:
    """Wait for the queue's last job (Queue.finish, close): False when `timeout` ran out, and
    its error as pending's `found` (flush number, error), None unless the app has not been
    told of it (a job the queue had failed before, with nothing after it: once is enough)."""
    known = set(q.watch.reported)
    try:
        return q.last_seq is None or q._wait_seq(q.last_seq, timeout, call), None
    except GpuError as e:
        if (e.info.ctx_id, e.info.seq) in known:
            return True, None
        return True, (q.last_number, e)
