"""Jobs and the schedulers that feed them to the rings (drm_sched's role, one per ring).

A CS becomes a Job in its context's entity for the ring it names (drm_sched_entity: one
per context per ring). Entities sit in run queues by priority (KERNEL, HIGH, NORMAL, LOW,
as drm_sched's enum since v6.8, KERNEL first). `kick()` moves jobs to the ring while there
is room and fewer than `hw_submission_limit` of the ring's jobs are in flight: it takes the
first run queue, highest priority first, with a ready entity, round robin within it
(drm_sched's RR policy); an entity is ready when its next job's dependencies (jobs of any
ring, CS dependency chunks) have finished. A job whose dependency failed is cancelled with
ECANCELED without running (CANCELS_PER_PASS a pass at most). Jobs of one entity run in submission order. `run_job` emits the
IBs, the user fence and the hardware fence and commits; the ring's fence driver signals the
hardware fence, `free_job` then retires the job.

Recovery is drm_sched's: stop (no more run_job) -> reset the hardware -> drop the
guilty job and the rest of its context's jobs -> resubmit the innocent jobs that had
not finished (with new hardware fences, in their original order) -> start. A job that
makes no progress for `job_timeout` cycles goes through `timedout_job`, which does the
same with the job as the guilty one.
"""

from __future__ import annotations

import logging
import bisect
from collections import deque
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ..log import get_logger
from ..uapi import KmdError
from .fence import Fence, FenceDriver
from .job import FailedDep, Job, dependency_failed, ring_dw  # noqa: F401 (the scheduler's names: ioctl/cs.py)
from .ring import Ring

if TYPE_CHECKING:
    from ..core.ctx import Context
    from ..core.kmd import Kmd

log = get_logger("sched")


class Priority(IntEnum):
    """drm_sched's run queues (enum drm_sched_priority since v6.8: 0 is served first)."""

    KERNEL = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3


def _turn(e: "Entity") -> int:
    return e.turn


class Entity:
    """drm_sched_entity: one context's queue of jobs for one ring."""

    def __init__(self, ctx: "Context", priority: Priority):
        self.ctx = ctx
        self.priority = priority
        self.queue: deque[Job] = deque()
        self.in_rq = False  # in its run queue: while it has jobs queued (Scheduler._enqueue)
        self.parked = False  # out of it while its head job waits for dependencies (Scheduler._park)
        self.turn = 0  # its place in the round robin: when it was made or last served (Scheduler._turns)
        # its file was banned: each job it had queued then (none has run: Job.runs) is
        # cancelled with this by the passes to come (Scheduler.cancel_queued)
        self.cancel_error: KmdError | None = None

    def banned_job(self, job: "Job") -> bool:
        """Is `job` one its file's ban cancels (queued then; a job in a ring then that a later
        reset puts back is innocent there, and runs again)?"""
        return self.cancel_error is not None and not job.runs

    def __repr__(self) -> str:
        return f"Entity(ctx {self.ctx.id}, {self.priority.name})"


class Scheduler:
    """drm_gpu_scheduler for one ring: run queues of entities, the jobs in flight, the timer."""

    # Jobs one pass (kick) cancels at most for a failed dependency; the rest wait in their
    # entities for the next pass, which a wait of the driver makes at once, no device time
    # passing, the driver's lock handed to the threads waiting for it in between
    # (Kmd.wait_for, Kmd.elapse), as drm_sched cancels them a job at a time from its work
    # item. One pass cancelled them all: a hung job 8,000 jobs of a client's contexts
    # depended on held the lock 0.16 to 0.3 s in the pass after its reset, every other
    # client's ioctls waiting, and a file may queue `sched_jobs` x 4,095 contexts a ring.
    CANCELS_PER_PASS = 64
    # Jobs one pass (kick) puts into the ring at most; the rest go in the next pass, made at
    # once as the cancellations' are (Kmd.wait_for, Kmd.elapse), as drm_sched's work item runs
    # one job a time. A pass filled the ring as far as `hw_submission_limit` let it, some
    # 15 µs a job: with a limit and a ring raised to hold thousands, a client's 32,000 ready
    # jobs held the driver's lock 47 to 83 ms in one pass. At the default limit (64) no pass
    # reaches it.
    RUNS_PER_PASS = 64

    def __init__(self, kmd: "Kmd", job_timeout: int, ring: Ring | None = None,
                 fence_drv: FenceDriver | None = None, hw_submission_limit: int = 1 << 30):
        self.kmd = kmd
        self.ring = ring if ring is not None else kmd.ring
        self._fence_drv = fence_drv
        self.job_timeout = job_timeout
        self.hw_submission_limit = hw_submission_limit
        self.rqs: list[list[Entity]] = [[] for _ in Priority]  # by Priority, round robin within
        self._turns = 0  # Entity.turn's clock
        self._rq_adds = 0  # entities put into a run queue (_enqueue): a kick's walk looks again
        # entities out of their run queue while their head job waits for dependencies: a
        # scheduler pass walked each of them (a client's 4,094 contexts, each with a job held
        # on a dependency, made every other client's passes 7 times slower)
        self.parked: set[Entity] = set()
        self.entities: dict["Context", Entity] = {}  # context -> its entity on this ring (ids are per file)
        self.pending: deque[Job] = deque()  # in the ring, not finished
        # the jobs a reset put back (resubmit_and_start), with their entities, in their ring
        # order: they go into the ring again first, ahead of every job queued (kick)
        self.resubmitted: deque[tuple[Job, Entity]] = deque()
        self.stopped = False
        self.progress_at = 0  # when the head job started, the last job finished, or the CP last moved
        self.head_at = 0  # when the head job started (the ring's oldest since then): how long it has run
        self.progress_mark: tuple = ()  # what the engine had done then (Kmd._progressed)
        self.head_fetched = 0  # dwords the CP fetched for the head job, counted at the timer's looks
        # cycles the head job could run, counted at the timer's looks: from head_at, less the
        # intervals between two looks in which its queue was not served (Kmd._progressed: the
        # CP busy with the other queue); the time rule for unchecked jobs bounds it
        self.head_ran = 0
        self.marked_at = 0  # when progress_mark was read
        # the last time a job entered or left the ring (`pending` changed): with `pending`
        # empty, the queue had nothing to run since then (Kmd._progressed asks it of the
        # other CP queue)
        self.busy_at = 0
        self.error: Any = None  # an extra ring's CpErrorState, until Kmd recovers the ring
        self.cancels_left = 0  # cancellations the running pass may still make (CANCELS_PER_PASS)
        self.cancels_due = False  # the last pass left jobs to cancel for the next (Kmd.wait_for)
        self.runs_due = False  # the last pass ran its share of jobs (RUNS_PER_PASS): the next goes on

    @property
    def name(self) -> str:
        return self.ring.name

    @property
    def fence_drv(self) -> FenceDriver:
        return self._fence_drv if self._fence_drv is not None else self.kmd.fence_drv

    @property
    def queue(self) -> list[Job]:
        """Jobs accepted and not yet in the ring, entity by entity (parked ones' too)."""
        return [j for e in self._queued_entities() for j in e.queue]

    def _queued_entities(self) -> list[Entity]:
        return [e for rq in self.rqs for e in rq] + list(self.parked)

    def has_queued(self) -> bool:
        """Is any job accepted and not yet in the ring? (`bool(queue)`, without the list.)"""
        return any(self.rqs) or bool(self.parked)

    def entity(self, ctx: "Context") -> Entity:
        """The context's entity on this ring, created on first use at the context's priority.
        It is in its run queue only while it has jobs queued (_enqueue, _dequeue): it was there
        from its first job until its context was freed, and every pass of the scheduler walked
        every idle entity of every file (a client's idle contexts slowed every other's CS and
        wait: 4 files of 4,094 contexts each made 100 small jobs 17 times slower)."""
        e = self.entities.get(ctx)
        if e is None:
            e = self.entities[ctx] = Entity(ctx, Priority(ctx.priority))
            self._turns += 1
            e.turn = self._turns
        return e

    def _enqueue(self, e: Entity) -> None:
        """`e` has jobs: into its run queue, if not there, at its place in the round robin
        (a run queue is in the order its entities were made or last served, idle ones left
        out: the order they had when every entity stayed in it, so jobs resubmitted after a
        reset keep the order they had in the ring). A parked entity stays parked (a job
        pushed behind its head changes nothing)."""
        if not e.in_rq and not e.parked:
            e.in_rq = True
            self._rq_adds += 1
            bisect.insort(self.rqs[e.priority], e, key=_turn)

    def _dequeue(self, e: Entity) -> None:
        """`e` has no job queued: out of its run queue."""
        if e.in_rq:
            e.in_rq = False
            self.rqs[e.priority].remove(e)

    def _park(self, e: Entity) -> None:
        """`e`'s head job waits for dependencies: out of its run queue until they end (Job.ended)."""
        self._dequeue(e)
        e.parked = True
        self.parked.add(e)

    def _unpark(self, e: Entity) -> None:
        """Back into its run queue (at its turn), or gone if it has no job left."""
        if e.parked:
            e.parked = False
            self.parked.discard(e)
        if e.queue:
            self._enqueue(e)

    def remove_context(self, ctx: "Context") -> None:
        """A freed context: its entity goes (its queued jobs still run, from the run queue,
        which it leaves once they are gone)."""
        self.entities.pop(ctx, None)

    # ------------------------------------------------------------------ submission

    def push_job(self, job: Job) -> None:
        job.ring = self.ring
        job.entity = self.entity(job.ctx)
        job.sched = self
        job.entity.queue.append(job)
        self._enqueue(job.entity)
        job.ctx.jobs[job.seq] = job
        self.kick()

    def _ready(self):
        """drm_sched_select_entity's choices for one kick, in order: the first run queue (KERNEL
        first) with a ready entity, round robin within it. Jobs whose dependency failed are
        cancelled on the way. The entity keeps its place: it goes to the back of its queue
        once its job is in the ring (_served). Each run queue is walked once, the walk resumed
        after each entity the caller passes over (its job found no VMID); a walk that served
        one, or put an entity back into a run queue (a cancellation's dependents), starts
        again from the first: the order a walk from the front after each choice gives. That
        walk, made again after each entity passed over, cost a pass the square of the
        entities waiting for a VMID: 2,000 contexts of one file, each with a job queued
        while 15 files held every VMID, made each ioctl of every client hold the driver's
        lock 0.4 s. At most CANCELS_PER_PASS jobs are cancelled in one pass: an entity whose
        head is to be cancelled after that stays in its run queue, as it is, for the next."""
        while True:
            mark = (self._turns, self._rq_adds)
            for rq in self.rqs:
                for e in list(rq):
                    if not e.in_rq:
                        continue  # (left it since the walk began)
                    while e.queue and self.cancels_left and (e.banned_job(e.queue[0]) or e.queue[0].deps_failed):
                        job = e.queue.popleft()
                        self.cancels_left -= 1
                        if e.banned_job(job):  # (its ban's error first, as when the ban cancelled it)
                            self.cancel_job(job, e.cancel_error)
                            continue
                        bad = next(d for d in job.deps if d.finished and d.error is not None)
                        self.cancel_job(job, dependency_failed(job, self.name, bad))
                    if not e.queue:
                        self._dequeue(e)  # (its jobs were cancelled)
                    elif e.banned_job(e.queue[0]) or e.queue[0].deps_failed:
                        self.cancels_due = True  # (the pass made its share: the next cancels it)
                    elif not e.queue[0].deps_left:
                        yield e
                    else:
                        self._park(e)  # (its head's last dependency to end puts it back: Job.ended)
                if (self._turns, self._rq_adds) != mark:
                    break  # (one served, or one back: from the first run queue again)
            else:
                return

    def _served(self, e: Entity) -> None:
        """`e`'s job went into the ring: round robin, it goes to the back of its queue. Only
        then, as drm_sched keeps the place of an entity whose job cannot go yet ("preserve
        the current entity in terms of fairness", drm_sched_rq_select_entity_rr): sent back
        when chosen, an entity whose job found no room in the ring (or no VMID) lost its
        turn, and a job bigger than the room one job frees (the UMD's copy flush, 64 dwords
        of the SDMA ring) never went in while a client's smaller jobs kept the ring full."""
        if e.in_rq:
            rq = self.rqs[e.priority]
            rq.remove(e)
            rq.append(e)
        self._turns += 1
        e.turn = self._turns

    def _next_resubmitted(self) -> Entity | None:
        """The entity whose head is the first job a reset put back, if any is still to go into
        the ring: as drm_sched_resubmit_jobs runs the pending jobs again before the
        scheduler picks any new one. Through the round robin (_ready), an entity with an
        older turn went first: a client's jobs queued after an innocent job that was next in
        the ring went into it ahead of that job, each reset again (a client faulting on
        purpose, from context after context, kept it from ever running)."""
        while self.resubmitted:
            job, e = self.resubmitted[0]
            if not job.finished and e.queue and e.queue[0] is job:
                return e
            self.resubmitted.popleft()  # (cancelled since)
        return None

    def kick(self) -> None:
        """Move ready jobs into the ring while they fit, RUNS_PER_PASS at most (one commit for
        them all)."""
        moved = False
        # VMs whose job found no VMID in this kick: every job of theirs waits (the VMID manager
        # answers by the VM, so it is not asked again), and their entities met so far: the
        # others may go
        no_vmid: set = set()
        passed: set[Entity] = set()
        self.cancels_left, self.cancels_due = self.CANCELS_PER_PASS, False
        self.runs_due = False
        runs_left = self.RUNS_PER_PASS
        ready = self._ready()
        while not self.stopped and len(self.pending) < self.hw_submission_limit:
            if not runs_left:
                self.runs_due = True  # (its share: the next pass goes on, at once in a wait)
                break
            resubmitted = self._next_resubmitted()
            e = resubmitted or next(ready, None)
            if resubmitted is None and e in passed:
                continue
            # no room: the entity keeps its turn and nothing else goes (drm_sched_can_queue
            # fails for it): its job goes first once the ring has drained enough
            if e is None or not self.ring.alloc(e.queue[0].ndw):
                break
            job = e.queue[0]
            if resubmitted is None and job.vm in no_vmid:
                passed.add(e)
                continue
            vmid = self.kmd.vmids.grab(job.vm, resubmitted is not None)
            if vmid is None:
                # every VMID is busy: the job waits for one (amdgpu_vmid_grab's fence, a
                # dependency of the job: its entity is not ready, the others are), keeping its
                # entity's turn; a resubmitted job keeps the ring order, so nothing passes it,
                # nor anything while the MMU acknowledges no flush (each grab would wait for it)
                if resubmitted is not None or self.kmd.vmids.stuck_since is not None:
                    break
                no_vmid.add(job.vm)
                passed.add(e)
                continue
            job.vmid = vmid
            if self.resubmitted and self.resubmitted[0][0] is job:
                self.resubmitted.popleft()
            e.queue.popleft()
            if resubmitted is None:
                self._served(e)
            if not e.queue:
                self._dequeue(e)
            if not self.pending:
                self.progress_at = self.head_at = self.kmd.dev.now()
                self.progress_mark = ()
            self.run_job(job)
            self.pending.append(job)
            moved = True
            runs_left -= 1
        if moved:
            self.ring.commit()

    def run_job(self, job: Job) -> Fence:
        """Emit the job into the ring (committed by the caller); return its hardware fence."""
        ring, kmd = self.ring, self.kmd
        job.runs += 1
        self.busy_at = kmd.dev.now()
        job.ring_start = ring.wptr
        for addr, size_dw in job.ibs:
            ring.emit_ib(addr, size_dw, vmid=job.vmid)
        if job.user_fence is not None:
            # before the kernel fence: when WAIT_CS returns, the user fence is there too
            ring.emit_fence(job.user_fence, job.seq, interrupt=False)
        fd = self.fence_drv
        fence = Fence(fd.next_seq(), job)
        ring.emit_fence(fd.gpu_addr, fence.seq, interrupt=True)  # amdgpu's: INT_CTXID 0
        job.ring_end = ring.wptr
        job.hw_fence = fence
        if job.vmid:
            kmd.vmids.used(job.vmid, job)
        fd.track(fence)
        if kmd.observers:
            kmd.notify("run_job", job=job, fence=fence)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("run_job %r: hw fence %#010x, ring [%#x, %#x)%s", job, fence.seq,
                      job.ring_start, job.ring_end, " (resubmitted)" if job.runs > 1 else "")
        return fence

    # ------------------------------------------------------------------ completion

    def fence_signalled(self, fence: Fence) -> None:
        job = fence.job
        if job is None or job.hw_fence is not fence or job.finished:
            return  # the ring test's fence, or one replaced by a resubmission
        self.free_job(job)

    def free_job(self, job: Job) -> None:
        job.finished = True
        if self.pending and self.pending[0] is job:
            self.pending.popleft()
        else:
            try:
                self.pending.remove(job)
            except ValueError:
                pass
        job.ctx.jobs.pop(job.seq, None)
        job.ended()
        self.progress_at = self.busy_at = self.head_at = self.kmd.dev.now()
        self.progress_mark = ()
        self.kmd.job_retired(job)

    def cancel_job(self, job: Job, error: KmdError) -> None:
        self.busy_at = self.kmd.dev.now()
        job.error = error
        job.finished = True
        job.ctx.jobs.pop(job.seq, None)
        job.ctx.job_failed(job.seq, error)  # a WAIT_CS after this must not report success
        job.ended()
        self.kmd.job_retired(job)

    # ------------------------------------------------------------------ timeouts and recovery

    # The timer's first look after a job starts (or the one before it ends) comes this
    # fraction of job_timeout later: it only reads what the engine has done (the mark the
    # next look compares with, Kmd._progressed). Taken at the full job_timeout, as it was,
    # every hang cost two job timeouts (1.0 M cycles by default): a client's hanging jobs
    # delayed the innocent jobs behind them twice as long as the rule needs.
    FIRST_LOOK = 8

    def _look_at(self) -> int:
        """When the timer next looks at the head job's progress."""
        if self.progress_mark:
            return self.progress_at + self.job_timeout
        return self.progress_at + max(1, self.job_timeout // self.FIRST_LOOK)

    def timed_out(self, now: int) -> bool:
        """Is a look at the head job's progress due (Kmd._progressed says if it moved)?"""
        return bool(self.pending) and not self.stopped and now >= self._look_at()

    def next_timeout(self, now: int) -> int | None:
        """Cycles until the timer's next look at the head job (None: nothing running)."""
        if not self.pending or self.stopped:
            return None
        return max(0, self._look_at() - now)

    def head_job(self) -> Job | None:
        return self.pending[0] if self.pending else None

    def job_at_ring(self, rptr: int) -> Job | None:
        """The pending job whose ring packets include dword `rptr`."""
        for job in self.pending:
            if (rptr - job.ring_start) & self.ring.PTR_MASK < (job.ring_end - job.ring_start) & self.ring.PTR_MASK:
                return job
        return None

    def stop(self) -> None:
        self.stopped = True

    def cancel_queued(self, e: Entity, error: KmdError) -> None:
        """Every job queued in `e` (a banned file's context's) is cancelled with `error` by the
        passes to come, CANCELS_PER_PASS a pass (_ready), none run: as drm_sched_entity_pop_job
        gives a guilty entity's jobs ECANCELED as it pops them. The ban cancelled them all at
        once (drop_context), the 131,000 jobs a file may queue on a ring in one hold of the
        driver's lock: 8,000 held it some 0.12 s, as the dependents of a hung job did."""
        while e.queue and e.queue[0].runs:
            # put back by a reset, not in the ring again yet (its jobs in a ring then, at the
            # front of its queue): now, as the ban did, a ring's worth at most
            job = e.queue.popleft()
            self.cancel_job(job, error)
        e.cancel_error = error
        if not e.queue:
            self._dequeue(e)
        self._unpark(e)  # (its head may wait for dependencies: cancelled without them)
        if e.queue:
            self.cancels_due = True  # (the waits make the passes: Kmd.wait_for)

    def drop_context(self, ctx: "Context", error: KmdError, queued_only: bool = False,
                     in_ring_only: bool = False) -> list[Job]:
        """Cancel every unfinished job of a guilty context, queued or in the ring (only
        queued ones with `queued_only`: on a ring that was not reset, its running jobs end).
        Its own jobs are looked at (Context.jobs, in submission order), and the ring's, not
        every queued job of every client: each reset, a fault made on purpose among them,
        walked them all, and 8,000 jobs another file held queued on a dependency cost every
        fault 18 ms of the driver's lock (a file's ban, a walk a context, minutes)."""
        running = {id(j) for j in self.pending}
        in_ring = [] if queued_only else [j for j in self.pending if j.ctx is ctx and not j.finished]
        queued = [] if in_ring_only else \
            [j for j in ctx.jobs.values() if j.sched is self and not j.finished and id(j) not in running]
        dropped = in_ring + queued
        for j in dropped:  # (one its file's ban cancels keeps the ban's error: Entity.banned_job)
            self.cancel_job(j, j.entity.cancel_error if j.entity is not None and j.entity.banned_job(j) else error)
        if in_ring:
            self.pending = deque(j for j in self.pending if not j.finished)
        for e in {j.entity: None for j in queued if j.entity is not None}:  # (the only queues changed)
            e.queue = deque(j for j in e.queue if not j.finished)
            if e.parked:  # (its head gone: every job of its queue is the context's, none is left)
                self._unpark(e)
            elif not e.queue:
                self._dequeue(e)
        return dropped

    def _drop_emptied(self) -> None:
        """An entity leaves the run queue once its last job is gone: here, for jobs cancelled
        outside _ready and kick, which only see the entities they reach (cancel_all's, every
        queue emptied)."""
        for rq in self.rqs:
            for e in rq:
                e.in_rq = bool(e.queue)
            rq[:] = [e for e in rq if e.queue]
        for e in list(self.parked):  # (its head gone: no job left, cancel_all emptied every queue)
            self._unpark(e)

    def resubmit_and_start(self) -> list[Job]:
        """Put the unfinished jobs that were in the ring back at the head of their entities
        and restart; the ring is empty again after the reset. They go into it again first, in
        the order they had there, before any job queued (_next_resubmitted)."""
        redo = [j for j in self.pending if not j.finished]
        self.pending.clear()
        back = []
        for j in reversed(redo):
            # back into the entity it came from, ahead of its later jobs: a freed context's
            # too (its entity has left `entities`; a new one would run the later jobs first).
            # Every job in the ring has one: push_job gave it, kick took it from its queue
            e = j.entity
            e.queue.appendleft(j)
            self._unpark(e)  # (its head is a job that ran: ready)
            back.append((j, e))
        # into the ring first, in their order (kick), ahead of any put back by an earlier
        # reset and not in the ring again yet (they were behind these)
        self.resubmitted = deque([*reversed(back), *self.resubmitted])
        self.stopped = False
        # (the ring test after the reset ran packets on this queue with nothing pending)
        self.progress_at = self.busy_at = self.head_at = self.kmd.dev.now()
        self.progress_mark = ()
        self.kick()
        return redo

    def cancel_all(self, error: KmdError) -> None:
        for j in self.pending:
            if not j.finished:
                self.cancel_job(j, error)
        for e in self._queued_entities():
            for j in e.queue:
                if not j.finished:  # (one its file's ban cancels keeps the ban's error, as when it cancelled it)
                    self.cancel_job(j, e.cancel_error if e.banned_job(j) else error)
        self.pending.clear()
        for e in self._queued_entities():
            e.queue.clear()
        self._drop_emptied()

