"""Submission contexts (amdgpu_ctx): a sequence of jobs, and what a reset did to them.

A context numbers its jobs with 32-bit seqnos (the CS ioctl's result, and what the user
fence receives), compared wrap-safely like the ring's. After a GPU reset caused by one
of its jobs the context is guilty: every later CS on it fails with ECANCELED and
the decoded error, as amdgpu refuses a guilty context's CS, and so does a WAIT_CS on a
ring whose latest job of the context failed (ioctl/wait.py: amdgpu's entity error). Contexts whose
work was merely in flight during someone else's reset are innocent: their jobs are
resubmitted and they carry on.

A file holds at most MAX_CONTEXTS: amdgpu gives a file's contexts the ids idr_alloc finds
in [1, AMDGPU_VM_MAX_NUM_CTX), so a client allocating in a loop gets ENOSPC, not the
driver's memory.

What a context remembers of its past jobs (which ring each ran on, why each that failed
failed) is bounded per context and per file (Kept): 4,095 contexts of 1,024 records each
were 4 M records a file, about 2 GB of failed-job errors, for a client that only submits.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from ..sched.fence import SEQ_MASK, seq_after
from ..uapi import HwErrorInfo, ResetStatus

MAX_CONTEXTS = 4096 - 1  # contexts per file (amdgpu: AMDGPU_VM_MAX_NUM_CTX, ids from 1)

if TYPE_CHECKING:
    from ..sched.scheduler import Job
    from ..uapi import KmdError
    from .file import File


class Kept:
    """A file's budget of remembered records of one kind (Context.failed, Context.ring_of):
    each context keeps its latest PER_CONTEXT, and the file its latest PER_FILE across all
    its contexts, the oldest going first, so what a client makes the driver remember is
    bounded by the file, not by its contexts times theirs (amdgpu keeps a context's fences
    in a fixed ring of AMDGPU_CTX_MAX_CS_PENDING)."""

    PER_CONTEXT = 1024
    PER_FILE = 16 * 1024

    def __init__(self):
        self.live = 0  # records in the contexts' tables now
        self.order: deque = deque()  # (table, seq) as added; some gone already (taken out lazily)

    def add(self, table: dict, seq: int, value, per_context: int = PER_CONTEXT) -> None:
        if seq not in table:
            self.live += 1
        else:  # (its seqno again, 2^32 jobs later: the newer record replaces the older)
            del table[seq]
        table[seq] = value
        self.order.append((table, seq))
        if len(table) > per_context:
            del table[next(iter(table))]
            self.live -= 1
        while self.live > self.PER_FILE:
            t, old = self.order.popleft()
            if old in t:
                del t[old]
                self.live -= 1
        if len(self.order) > 2 * self.PER_FILE:  # entries of records gone by the context's own limit
            self.order = deque((t, q) for t, q in self.order if q in t)

    def forget(self, table: dict) -> None:
        """A context freed: its records go (their entries in `order` with them, lazily)."""
        self.live -= len(table)
        table.clear()


class Context:
    def __init__(self, ctx_id: int, file: "File", initial_seq: int, priority: int):
        self.id = ctx_id
        # what messages call it: its id, "3#2" once the file's ids have wrapped (File.new_ctx_id),
        # as a freed context's jobs run on while a new one may hold its id
        self.name = str(ctx_id)
        self.file = file
        self.last_seq = (initial_seq - 1) & SEQ_MASK  # last seqno handed out
        self.jobs: dict[int, "Job"] = {}  # seqno -> job not finished yet
        self.guilty: HwErrorInfo | None = None  # why its CS is refused (a full reset's lasting guilt)
        # the error of the latest reset its work caused, a queue reset's too: QUERY_STATE's
        # `error` (it was None after a queue reset, with reset_status GUILTY)
        self.reset_error: HwErrorInfo | None = None
        self.reset_status = ResetStatus.NO_RESET
        self._resets_from = file.kmd.reset_count  # (resets: the driver's count since then)
        self.submitted = 0
        self.priority = priority  # its entities' run queue (a scheduler.Priority: CTX ALLOC's, mapped)
        self.ring_status: dict[str, ResetStatus] = {}  # ring name -> what resets of that ring did to it
        self.last_on: dict[str, int] = {}  # ring name -> seqno of its latest job there
        self.hangs = 0  # resets its jobs caused
        self.failed: dict[int, "KmdError"] = {}  # seqno -> why, for jobs that ended with an error
        # (the latest FAILED_KEPT of them: WAIT_CS reports their error after they are gone)
        self.banned: str | None = None  # why its CS fails with EIO (too many hangs)
        # seqno -> ring name of its latest RING_KEPT jobs: a dependency names a job on the
        # ring it ran on, finished or not (older ones have finished: taken as they are)
        self.ring_of: dict[int, str] = {}

    FAILED_KEPT = RING_KEPT = Kept.PER_CONTEXT  # (the file's Kept holds them to Kept.PER_FILE in all)

    @property
    def resets(self) -> int:
        """Resets it lived through (QUERY_STATE's `resets`): the driver's count
        (Kmd.reset_count, one increment a reset) since it was made."""
        return self.file.kmd.reset_count - self._resets_from

    def submitted_on(self, seq: int, ring: str) -> None:
        self.last_on[ring] = seq
        self.file.kept_ring_of.add(self.ring_of, seq, ring, self.RING_KEPT)

    def job_failed(self, seq: int, error: "KmdError") -> None:
        self.file.kept_failed.add(self.failed, seq, error, self.FAILED_KEPT)

    def forget_records(self) -> None:
        """Freed: what it remembered of its jobs no longer counts against its file's budget."""
        self.file.kept_failed.forget(self.failed)
        self.file.kept_ring_of.forget(self.ring_of)

    def next_seq(self) -> int:
        self.last_seq = (self.last_seq + 1) & SEQ_MASK
        self.submitted += 1
        return self.last_seq

    def submitted_seq(self, seq: int) -> bool:
        """Has this context handed out `seq` (within the wrap-safe window)?"""
        return not seq_after(seq, self.last_seq) and ((self.last_seq - seq) & SEQ_MASK) < self.submitted

    def __repr__(self) -> str:
        return f"Context({self.id}, fd {self.file.fd}{', guilty' if self.guilty else ''})"
