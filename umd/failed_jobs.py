"""Finding a queue's failed jobs whose error no wait has raised, so that the app learns of
each once, at its next flush, finish, Event.wait or close.

A wait on the queue's last job is told of that job alone (WAIT_CS names one job, as
amdgpu_cs_wait_ioctl does); a failed job ahead of it raised only while the kernel refused
the whole context after it. That is so when the error took the full reset (the gfx ring's
recovery: the context is guilty for good, amdgpu's ctx->guilty), but not where the job's
own ring was reset alone (the copy engine's sdma0, the high-priority gfx ring): the
context runs on, the jobs flushed after the reset end well, the user fence passes the
failed job's seqno, and its error was lost. Nor when a job was cancelled because a job it
waited for (wait_event) failed: its context was never reset.

So a queue keeps the submissions whose good end is not proven yet (`Queue.watch.jobs`):
every one of a queue whose ring may be reset alone (a copy queue, a high-priority one),
and those that carry a dependency on any queue. Proving them costs little: CTX QUERY_STATE's
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

from kmd_model.sched.fence import seq_after
from kmd_model.uapi import KmdError

from . import kmd_errors
from .errors import GpuError

if TYPE_CHECKING:
    from .queue import Queue, Submission

REPORTED_KEPT = 1024  # errors a queue remembers having raised (a failed job's seqno is not seen again after)


@dataclass(eq=False)
class Watch:
    """A queue's jobs not yet proven to have ended well, and how they are proven."""

    resets_alone: bool  # its ring may be reset alone, the context running on: watch every job
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
    """A submission is in flight: it needs proving if its queue's ring may be reset alone or
    it waits for another queue's job."""
    q.inflight.append(sub)
    if q.watch.resets_alone or sub.deps:
        q.watch.jobs.append(sub)


def check(q: Queue, what: str, upto: int | None = None) -> None:
    """Raise the error of the oldest failed job of `q` (of those up to seqno `upto`, all
    when None) the app has not been told of, for API call `what`, naming the call that
    recorded its packet; forget the jobs proven to have ended well."""
    w = q.watch
    subs = [s for s in w.jobs if upto is None or not seq_after(s.seq, upto)]
    if not subs or q.closed:
        return
    ask_all, w.ask_all = w.ask_all, False
    if w.resets_alone:
        try:
            resets = q.ws.ctx_query(q.ctx_id).resets
        except KmdError:
            resets = None  # (no answer: ask about each job, whose WAIT_CS says what is wrong)
        if resets is None or resets != w.resets_seen:
            ask_all, w.resets_seen = True, resets
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
            w.ask_all = True  # (the jobs after it are asked at the next look)
            kmd_errors.raise_from(q, outcome, what, subs=[sub, *q.inflight])


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


def wait_last(q: Queue, timeout: int, call: str) -> bool:
    """Wait for the queue's last job (Queue.finish): False when `timeout` ran out. Its
    error raises, unless the app was told of it already (a job the queue had failed before,
    with nothing after it): once is enough."""
    known = set(q.watch.reported)
    try:
        return q.last_seq is None or q._wait_seq(q.last_seq, timeout, call)
    except GpuError as e:
        if (e.info.ctx_id, e.info.seq) not in known:
            raise
        return True
