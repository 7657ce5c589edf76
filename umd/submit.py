"""The asynchronous submission thread (`Device.queue(async_submit=True)`, API v3; or every
queue with GPUCOSIM_ASYNC_SUBMIT=1): the app's thread records and flushes, a thread of the
device submits (the CS ioctls: the KMD's checker, shadow IBs, ring and doorbell), so a
flush returns without waiting for the ioctl. Mesa's u_threaded_context and radeonsi's
submission thread have the same shape.

One thread per Device, serving the device's async queues in the order they flushed (a
FIFO), so a queue's submissions keep their order, and a `wait_event` on another async
queue's event can be resolved by the thread itself: the submission carrying the event is
ahead of it in the FIFO.

Who may enter the KMD. The KMD model serialises its ioctls itself (Kmd.lock), and the UMD's
run under one lock of its own too (winsys.KMD_LOCK). On the reference model that is all: the thread runs
its ioctls itself. On the RTL the simulator belongs to the app's thread (the app runs in a
greenlet of the simulator's thread: testbench/sim/bridge.py refuses any other), and an ioctl drives it (MMIO,
interrupt waits), so there the thread hands each ioctl to the owner (the thread that
opened the device) through a request queue, which the owner serves whenever it enters the
driver: before each of its own ioctls it runs those of every flush queued so far (so a
CS reaches the simulator at the same cycle run after run), and it runs them while it
waits for the submission thread (`drain`, before every wait on a fence). We chose this proxy over making the submission thread the
owner because the owner is where the app, its crash reports and its timeline already run;
the app thread only ever runs whole ioctls, never half of one, so the KMD is never entered
twice at once. The price: on the RTL a submission reaches the GPU at the app thread's
next driver call, not earlier; a wait never deadlocks on one still queued, because every
wait first drains the FIFO (docs/architecture.md, "The asynchronous submission thread").

Errors: the thread never raises. A refused CS is stored in its PendingCs and handed to the
queue (`collect`), which raises it at the app's next flush() of that queue if the thread is
done with it by then, else at the latest at its finish(), Event.wait() or close(): with
every other refusal and failed job pending then, oldest first (umd/failures/failed_jobs.py pending).

Only ioctls are serialised: code that reaches into the KMD directly (tests calling
`kmd.service()`) must first let the queued flushes through (`Queue.finish`, a wait).
"""

from __future__ import annotations

import errno
import threading
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from kmd_model.sched.fence import seq_passed
from kmd_model.uapi import CsChunkDep, CsChunkFence, CsChunkIb, KmdError

from .failures import kmd_errors
from .errors import GpuError, QueueBanned, UmdError

ENV = "GPUCOSIM_ASYNC_SUBMIT"  # "1": every queue submits asynchronously (the default of async_submit)

_live: "weakref.WeakSet[Submitter]" = weakref.WeakSet()  # every running submission thread


def any_queued() -> bool:
    """Has a device opened by this thread flushes queued for its submission thread?"""
    me = threading.get_ident()
    return any(s.jobs and s.owner == me for s in list(_live))


def drain_all() -> int:
    """Submit every flush still queued on a device this thread opened; how many were.
    For the end of an app that never closed its device (gpucosim's Session calls it):
    on the RTL nobody else would run the thread's ioctls."""
    n = 0
    for s in list(_live):
        # (a stopped one too: stop() lets its thread end once its queue is empty, and at the
        # interpreter's end weakref.finalize stops every unclosed device's first)
        if s.jobs and s.owner == threading.get_ident():
            n += len(s.jobs)
            s.drain()
    return n


@dataclass(eq=False)
class PendingCs:
    """One flush of an async queue, waiting for (or back from) the submission thread.
    `submit_fn()` runs on that thread; the app's thread reads the outcome (`seq` or
    `error`) once `done`, in `collect`."""

    submit_fn: Callable[[], tuple[int, int]]  # the CS ioctl(s); returns the last seqno and how many
    ibs: list
    labels: dict
    events: list
    staging: list
    number: int  # the queue's n-th async flush, for messages
    done: bool = False
    seq: int | None = None
    ncs: int = 1  # CS ioctls it took (a copy queue splits a flush at max_ib_chunks IBs)
    error: BaseException | None = None
    nibs: int | None = None  # with `error`, a later CS's refusal: the IBs the CSs before it carried
    deps: bool = False  # it waits for another queue's job (umd/failures/failed_jobs.py)


class Submitted(BaseException):
    """A copy flush's CS ioctls (cs_ioctls) that did not end as one answer, its first CS
    in: `ncs` of them are in, the last `seq`, carrying the flush's first `nibs` IBs.
    `refused`: the KmdError of the later CS the kernel refused (none after it was tried:
    they would run ahead of what it carried); `error`: a KeyboardInterrupt that came in a
    later CS's wait, raised once the flush's bookkeeping is done, as a held SIGINT is
    (umd/signals.py)."""

    def __init__(self, seq: int, ncs: int, nibs: int, error: BaseException | None = None,
                 refused: KmdError | None = None):
        super().__init__(seq, ncs)
        self.seq, self.ncs, self.nibs, self.error, self.refused = seq, ncs, nibs, error, refused


class _Request:
    """One ioctl the submission thread asks the owner thread to run (RTL)."""

    __slots__ = ("fn", "args", "done", "value", "error")

    def __init__(self, fn: Callable, args: tuple):
        self.fn, self.args = fn, args
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.fn(*self.args)
        except BaseException as e:  # noqa: BLE001  (handed back to the submission thread)
            self.error = e


class Submitter:
    """The device's submission thread and the owner's side of its ioctl proxy."""

    def __init__(self, owner: int, marshal: bool):
        self.owner = owner  # thread id of the app thread that opened the device
        self.marshal = marshal  # ioctls must run on the owner (a bridged simulator)
        self.cond = threading.Condition()
        self.jobs: deque[PendingCs] = deque()  # flushed, not yet submitted, in flush order
        self.requests: deque[_Request] = deque()  # ioctls for the owner (marshal mode)
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="umd-submit", daemon=True)
        self.thread.start()
        _live.add(self)

    # ---------------------------------------------------------------- app thread

    def push(self, job: PendingCs) -> None:
        with self.cond:
            if self.closed:
                raise ValueError("flush: the device's submission thread has stopped (the device is closed)")
            self.jobs.append(job)
            self.cond.notify_all()

    def drain(self) -> None:
        """Wait until every job pushed so far has been submitted (or refused), running the
        thread's ioctls meanwhile when they must run here."""
        with self.cond:
            if not self.jobs:
                return
            last = self.jobs[-1]
        while True:
            self.serve()
            with self.cond:
                while not last.done and not self.requests:
                    self.cond.wait()
                if last.done and not self.requests:
                    return

    def serve(self) -> None:
        """Run the ioctls the submission thread has handed over (owner thread only)."""
        while True:
            with self.cond:
                if not self.requests:
                    return
                req = self.requests.popleft()
            req.run()
            with self.cond:
                req.done = True
                self.cond.notify_all()

    def close(self) -> None:
        """Submit what is queued, then stop the thread."""
        self.drain()
        self.stop()
        self.thread.join()

    def stop(self) -> None:
        """Let the thread end once nothing is queued (also when its Device is collected
        unclosed: the queued flushes keep the Device alive until they are submitted)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    # ---------------------------------------------------------------- any thread

    def ioctl(self, fn: Callable, *args: Any) -> Any:
        """Run one ioctl `fn(*args)` from whichever thread asks (Winsys.ioctl comes here
        while the device has a submission thread)."""
        me = threading.get_ident()
        if me == self.owner:
            if self.marshal:
                # Every queued flush first: they were made before this call, and so the
                # simulated cycle of each CS does not depend on how the threads were
                # scheduled (the same cycles run after run, as in sync mode).
                self.drain()
            return fn(*args)
        if not self.marshal or me != self.thread.ident:
            return fn(*args)
        req = _Request(fn, args)
        with self.cond:
            self.requests.append(req)
            self.cond.notify_all()
            while not req.done:
                self.cond.wait()
        if req.error is not None:
            raise req.error
        return req.value

    # ---------------------------------------------------------------- the thread

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.jobs and not self.closed:
                    self.cond.wait()
                if not self.jobs:
                    return
                job = self.jobs[0]  # stays queued until done, so drain() sees it
            try:
                job.seq, job.ncs = job.submit_fn()
            except Submitted as done:  # (in: a ^C is the main thread's, never this thread's to raise)
                job.seq, job.ncs = done.seq, done.ncs
                if done.refused is not None:  # (a later CS refused: the first ones' part runs)
                    job.error, job.nibs = done.refused, done.nibs
            except BaseException as e:  # noqa: BLE001  (a refused CS, or a bug: the app gets it)
                job.error = e
            with self.cond:
                self.jobs.popleft()
                job.done = True
                self.cond.notify_all()
            job = None  # (while it waits, the thread holds no queue: an unclosed Device can be collected)


# ---------------------------------------------------------------------------- a queue's side
# (Queue._drain, collect and refusals: what the app's thread does with its async flushes)

def collect(q) -> None:
    """Take in what the submission thread has done with queue `q`'s flushes, in order: a
    submitted one is in flight from now on (as a synchronous flush leaves it), a refused
    one frees its IBs, loses its events and waits in `q.async_errors` (with its flush's
    number) to be raised; a copy flush whose later CS was refused is both: the part its
    first CSs carried is in flight, the rest refused (split)."""
    from .failures import failed_jobs
    from .queue import Submission

    while q.pending and q.pending[0].done:
        job = q.pending.popleft()
        if job.error is not None and job.nibs is None:
            q.pool.free.extend(job.ibs)  # never ran
            for ev in job.events:
                ev._lost, ev._pending = True, None
            for b in job.staging:
                b.free()
            q.async_errors.append((job.number, _error(q, job)))
            q.device.mm.flushed()  # BOs closed after it: nothing of it will name them now
            continue
        seq, ibs, labels, events = job.seq, job.ibs, job.labels, job.events
        if job.error is not None:  # a later CS refused: the part before it is in flight
            ibs, labels, events = split(q, job.ibs, job.labels, job.events, job.nibs)  # type: ignore[arg-type]
            q.async_errors.append((job.number, part_refused(q, _error(q, job), job.ibs, job.labels, job.nibs,
                                                            job.ncs, seq, job.number, _what(q, job.number))))
        q._submitted(seq, job.ncs, job.number)
        failed_jobs.track(q, Submission(seq, ibs, labels, job.ncs, job.deps, job.number))
        for ev in events:
            ev._seq, ev._pending = seq, None
        for b in job.staging:
            b.free()
        q.device.mm.flushed()


def _what(q, number: int) -> str:
    """The API call a refusal of async flush `number` names."""
    return f"flush (asynchronous submission #{number} of queue context {q.ctx_id})"


def _error(q, job: PendingCs) -> BaseException:
    """The exception a synchronous flush would have raised for the refused `job`."""
    e = job.error
    if not isinstance(e, KmdError):
        return e  # not the KMD's answer: a bug, handed over as it is
    try:
        kmd_errors.raise_from(q, e, _what(q, job.number), cs=True, labels=job.labels)
    except UmdError as u:
        return u
    return e  # unreachable: raise_from always raises


def refusals(q, upto: int | None = None) -> list[tuple[int, BaseException]]:
    """Take the refused flushes of `q` the app has not been told of (those up to flush number
    `upto`, all when None), with their numbers, each as it stands now (fresh)."""
    if q.pending:
        collect(q)
    taken = [r for r in q.async_errors if upto is None or r[0] <= upto]
    if taken:
        q.async_errors = [r for r in q.async_errors if r not in taken]
    return [(n, fresh(q, n, e)) for n, e in taken]


def fresh(q, number: int, e: BaseException) -> BaseException:
    """A refusal's exception as it would be written now. It was written when the thread's
    answer was collected (its packet's call is found then, while the submission it names is
    in flight), which may be long before the app's call raises it: the Device's whole file
    may have been banned since, when "make a new queue" (QueueBanned; a guilty gfx context's
    refused GpuError) is no longer true. Those two ask again: CTX QUERY_STATE, and the file's
    ban (kmd_errors.file_banned: none once the ban is known)."""
    cause = e.__cause__
    if isinstance(e, QueueBanned) and isinstance(cause, KmdError):
        try:
            kmd_errors.raise_from(q, cause, _what(q, number), cs=True)
        except UmdError as u:
            return u
    if isinstance(e, GpuError) and e.refused and e.file_banned is None:
        why = kmd_errors.file_banned(q)
        if why is not None:
            u = GpuError(e.info, e.command, e.waited_for, True, e.unnamed, why, e.hint)
            u.__cause__ = cause
            return u
    return e


def drain(q) -> None:
    """Wait until the submission thread has handled every flush so far (`q`'s and the other
    async queues': a GPU-side wait of ours may need theirs), then take `q`'s in (a refusal
    waits in q.async_errors for the app's next flush, finish, Event.wait or close)."""
    s = q.device.submitter
    if s is not None:
        s.drain()
    if q.pending:
        collect(q)


def cs_ioctls(q, first_ib: tuple[int, int], ibs: list, sizes: list, deps: list,
               fence: CsChunkFence) -> tuple[int, int]:
    """The CS ioctl(s) of one flush: its last seqno and how many it took. On the app's
    thread (a synchronous queue) or the device's submission thread (an async one): it
    touches no queue state."""
    deps = merge_deps(c for c in (d.chunk() for d in deps) if c is not None)
    if not q.copy_engine:
        return q.ws.cs_submit(q.ctx_id, [*deps, CsChunkIb(first_ib[1], gpu_addr=first_ib[0]), fence]), 1
    # SDMA IBs do not chain: every IB is a chunk, max_ib_chunks per CS, in order
    step = q.device.dev_info.max_ib_chunks
    ncs = 0
    interrupted: BaseException | None = None
    for k in range(0, len(ibs), step):
        chunks = [CsChunkIb(n, gpu_addr=b.gpu_addr, ip_type=q._ip_type)
                  for b, n in zip(ibs[k:k + step], sizes[k:k + step])]
        while True:
            try:
                seq = q.ws.cs_submit(q.ctx_id, [*(deps if k == 0 else ()), *chunks, fence])
                break
            except KeyboardInterrupt as e:
                if not ncs:
                    raise  # (nothing queued yet: the flush's commands stay recorded)
                # a ^C in a later CS's wait for ring room, the flush's first CS in: the rest
                # follow (as a held SIGINT would have let them: umd/signals.py), then it is raised
                interrupted = interrupted or e
            except KmdError as e:
                if not ncs:
                    raise  # (nothing queued: the whole flush is refused)
                # the jobs of the CSs before it are queued and run: the queue must keep their
                # IBs busy and signal their events (split), only the rest is refused
                raise Submitted(seq, ncs, k, interrupted, refused=e) from None
        ncs += 1
    if interrupted is not None:
        raise Submitted(seq, ncs, len(ibs), interrupted)
    return seq, ncs


def split(q, ibs: list, labels: dict, events: list, nibs: int) -> tuple[list, dict, list]:
    """A flush whose CS carrying its IB `nibs` (from 0) on was refused, the CSs before it in:
    the refused IBs go back to the pool (never ran), the events they carry are lost; returns
    the IBs, labels and events of the part that runs (its IBs come back when its fence has
    passed, as any submission's)."""
    ran_events = [ev for ev in events if event_ran(q, ev, ibs, labels, nibs)]
    for ev in events:
        if ev not in ran_events:
            ev._lost, ev._pending = True, None
    q.pool.free.extend(ibs[nibs:])
    return ibs[:nibs], {a: lab for a, lab in labels.items() if _in(q, a, ibs[:nibs])}, ran_events


def _in(q, addr: int, ibs: list) -> bool:
    size = 4 * q.pool.size_dw
    return any(0 <= addr - b.gpu_addr < size for b in ibs)


def _calls(q, labels: dict, ibs: list) -> list[int]:
    """The queue's call numbers (Label.call) whose packets are in `ibs`."""
    return sorted({lab.call for a, lab in labels.items() if lab.call is not None and _in(q, a, ibs)})


def event_ran(q, ev, ibs: list, labels: dict, nibs: int) -> bool:
    """Is event `ev`'s packet (its call's: Event.call) in the flush's first `nibs` IBs? (Any
    thread: it reads only what the flush recorded.)"""
    return any(lab.call == ev._call for a, lab in labels.items() if _in(q, a, ibs[:nibs]))


def part_refused(q, e: BaseException, ibs: list, labels: dict, nibs: int, ncs: int, seq: int, number: int,
                 what: str) -> BaseException:
    """The refusal `e` of a later CS of flush `number`, with a note saying which part ran."""
    step = q.device.dev_info.max_ib_chunks
    refused = _calls(q, labels, ibs[nibs:])
    first = refused[0] if refused else None
    ran, lost = "its commands run", "its commands"
    if first is not None:
        ran, lost = f"the queue's calls up to #{first - 1} run, their events signal", f"the calls from #{first} on"
        if first in _calls(q, labels, ibs[:nibs]):  # (a call whose packets straddle the two parts)
            ran += f" (and #{first}'s packets in those IBs)"
            lost = f"the rest of #{first} and the calls after it"
    e.add_note(f"{what}: a copy flush's CS carries at most {step} IBs: the first {ncs} of its "
               f"{-(-len(ibs) // step)} CS ioctls (IBs 1-{nibs} of {len(ibs)}, the queue's flush #{number}, last "
               f"seqno {seq:#x}) were submitted: {ran}; the CS from IB {nibs + 1} on was refused (none after it "
               f"was tried): {lost} did not run, their events are lost")
    return e


def dep_chunk(q, seq: int) -> CsChunkDep | None:
    """The dependency chunk on seqno `seq` of queue `q`, named when the CS is made: `q` may
    have been closed since the wait_event, and its context, which a CS can no longer name,
    freed. Then a job whose fence has passed needs no wait (None); one that failed, or
    still runs (close() gave up waiting), is ECANCELED, as the KMD cancels a job whose
    dependency failed."""
    if not q.closed:
        return CsChunkDep(q._ip_type, 0, q.ctx_id, seq)
    if q.seq_done(seq):
        return None
    raise KmdError(errno.ECANCELED, "CS: wait_event: the event's queue was closed before the job carrying the event "
                   "ended well (it failed, or still runs): it can no longer be named")


def add_seq_dep(waiter, q, seq: int) -> None:
    """`waiter`'s next submission waits for seqno `seq` of queue `q`: one SeqDep per queue,
    on its latest seqno, since a queue's jobs end in order (its fence passing `seq` means
    every earlier seqno passed too). Mesa's amdgpu winsys keeps one fence per (context,
    ring) the same way; without it an app waiting on thousands of events of a few queues
    would pass the KMD's max_dep_chunks and its flush be refused (EINVAL)."""
    dep = waiter.seq_deps.get(q)
    if dep is None:
        dep = waiter.seq_deps[q] = SeqDep(q, seq)
        waiter.deps.append(dep)
    elif seq_passed(dep.seq, seq):  # later (wrap-safe: seqnos are 32-bit)
        dep.seq = seq


def merge_deps(chunks) -> list[CsChunkDep]:
    """The dependency chunks of a CS, one per (context, ring): the latest seqno of each, in
    the order first named. What add_seq_dep does for submitted events, here also for the
    events an async queue's submission thread named (EventDep) and any mix of both."""
    latest: dict[tuple, CsChunkDep] = {}
    for c in chunks:
        key = (c.ip_type, c.ip_instance, c.ring, c.ctx_id)
        had = latest.get(key)
        if had is None or seq_passed(had.handle, c.handle):
            latest[key] = c
    return list(latest.values())


class SeqDep:
    """A wait_event on an event submitted already: its queue and seqno (dep_chunk)."""

    def __init__(self, queue, seq: int):
        self.queue, self.seq = queue, seq

    def chunk(self) -> CsChunkDep | None:
        return dep_chunk(self.queue, self.seq)


class EventDep:
    """A wait_event on an event whose flush is still queued for the submission thread:
    named (dep_chunk) by that thread, which has submitted the event's flush by then."""

    def __init__(self, queue, job: PendingCs, event):
        self.queue, self.job, self.event = queue, job, event

    def chunk(self) -> CsChunkDep | None:
        job, q = self.job, self.queue
        if job.seq is None or job.error is not None and (
                job.nibs is None or not event_ran(q, self.event, job.ibs, job.labels, job.nibs)):
            raise KmdError(errno.ECANCELED, "CS: wait_event: the submission carrying the event was refused")
        return dep_chunk(q, job.seq)  # (the whole flush, or its part before a later CS refused)
