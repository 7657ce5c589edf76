"""Events and timestamps: what a queue's GPU signals (RELEASE_MEM of a timeline value or
of the GPU clock into the queue's page) and the waits on them: Event.wait on the CPU (memory
first, the user fence, the kernel last) and Queue.wait_event on the GPU (a CS dependency).
"""

from __future__ import annotations

import errno
import sys

from kmd_model.ioctl.copyin import shown
from kmd_model.uapi import KmdError
from kmd_model.sched.fence import seq_passed
from spec import pm4, sdma

from .failures import failed_jobs, kmd_errors  # (first: the import order umd/submit.py needs)
from . import submit
from .errors import OPEN_NEW_DEVICE, DeviceLost, GpuError, GpuTimeout, SubmitError, UmdError
from .args import _UNSET, DEFAULT_TIMEOUT, M32, _timeout, _timeout_alias
from .calls import named_args
from .runtime import _Handle, api_call, fixed, record
from .submit import PendingCs
from .queue import QBO_TIMELINE, QBO_TS_FIRST, QBO_TS_SLOTS, Queue
from .queue.flush import _flush
from .winsys.ioctl import DRIVER_CLOSED


# ---------------------------------------------------------------------------- Event

# What a look of Event.signalled() that finds it not signalled costs in device time: about a
# CPU's uncached read of memory across the bus (0.5-1 us), in cycles of a 100 MHz GPU.
POLL_CYCLES = 64
# Looks of signalled() at an event never flushed before the UMD says, once, that it never will
# be signalled: `while not ev.signalled(): pass` without a flush looped for ever, without a word
# (10,000 looks: some 50 ms; a multithreaded app's other thread may still flush it)
UNFLUSHED_LOOKS = 10_000
# Every how-manieth look of signalled() at a submitted event still unsignalled also asks the
# kernel (WAIT_CS, no wait): a job that failed left its event unsignalled, and a loop of looks
# went on for ever (the KMD's job timer had ended it; only wait() and finish() raised its error)
ASK_KERNEL_LOOKS = 1024

_NEVER = "the queue of this event was closed before the GPU signalled it (its work failed or was cancelled)"
# (a queue whose close() gave up on its running job: it was _NEVER's "failed or was cancelled")
_ABANDONED = ("the queue of this event was closed while the job carrying it still ran (close() gave up on it "
              "after DEFAULT_TIMEOUT cycles): its signalled() turns True if it ends")

class Event(_Handle):
    """Signalled when the GPU has executed the queue up to the `signal()` that made it."""

    _what = "a queue's fence"
    _made_by = "ev = q.signal()"
    queue = fixed("Event", "queue", doc="the Queue whose signal() made it")
    # (a Timestamp's is its sample: its own property)
    value = fixed("Event", "value", doc="its timeline value: the number the GPU writes to its queue's fence "
                                        "when it gets here")
    # what the UMD records of it as its queue flushes it: `ev.seq = 0` made the next wait()
    # wait for (and return True on) another submission, `ev.pending = None` lost an async flush
    seq = record("Event", "seq", "the seqno of the submission carrying it, once its queue flushed it")
    pending = record("Event", "pending", "its flush, while the submission thread has it")
    number = record("Event", "number", "its flush's number on its queue")
    lost = record("Event", "lost", "True once the submission carrying it was refused")
    call = record("Event", "call", "the queue's call that recorded it")

    def __init__(self, queue: Queue, value: int):
        self._start(queue)
        self._value = value  # its timeline value (a Timestamp's value is its clock sample instead)

    def _start(self, queue: Queue) -> None:
        """What every event has, a Timestamp too (the UMD's own records: read-only to the app)."""
        self._queue = queue
        self._seq: int | None = None  # the submission carrying it, once flushed
        self._pending: PendingCs | None = None  # its flush, while queued for the submission thread
        self._number: int | None = None  # its flush's number (Queue.flushes), once flushed
        self._lost = False  # its submission was refused
        self._call = queue.calls + 1  # the queue's how-manieth call recorded it (Queue.calls, after its label)
        self._unflushed_looks = 0  # signalled()'s looks at it before its flush (UNFLUSHED_LOOKS)
        self._looks = 0  # and after it (ASK_KERNEL_LOOKS)
        self._failed = False  # a wait (or a look) raised its job's GpuError

    def _alive(self, call: str) -> None:
        """DeviceLost once the driver closed the Device's file (its page's mapping went with it)."""
        q = self._queue
        if not q.closed and q.ws.lost():
            raise DeviceLost(f"{call}: {DRIVER_CLOSED}: {OPEN_NEW_DEVICE}")

    @named_args("Event.signalled")
    def signalled(self) -> bool:
        """A look at memory: no ioctl, no flush, no wait. A look that finds it not signalled
        takes POLL_CYCLES of device time once it is submitted (as a CPU's read of memory the
        GPU writes takes time, while the GPU runs on), so a loop of signalled() ends when the
        GPU gets there, on every backend (on the simulators and the reference model the
        device's time passes only inside the driver: such a loop never ended before). An
        event never flushed stays unsignalled however long it is polled: flush(), or
        wait(timeout), which flushes (after UNFLUSHED_LOOKS looks, 10,000, the UMD says so
        once on stderr: such a loop went on without a word). Every ASK_KERNEL_LOOKS-th look
        (1024) at a submitted event asks the kernel too (WAIT_CS, no wait), as wait(0): a job
        that failed raises its GpuError there, once (its event is never signalled)."""
        self._alive("signalled")
        if self._signalled():
            return True
        q = self._queue
        if not self._lost and (self._seq is not None or self._pending is not None) and not q.closed:
            q.ws.elapse(POLL_CYCLES)
            if q.pending:  # (an async flush the submission thread has made since: its seqno, for a Timestamp)
                submit.collect(q)
            self._looks += 1
            if self._seq is not None and self._looks % ASK_KERNEL_LOOKS == 0:
                return self._wait(0, "signalled")  # (its job's error raised here, once, as wait() raises it)
        elif not self._lost and not q.closed:
            self._unflushed_looks = looks = self._unflushed_looks + 1
            if looks == UNFLUSHED_LOOKS:
                print(f"umd: Event.signalled(): {self!r} of {q!r} looked at {looks} times, never flushed: the GPU "
                      "has not got it and will never signal it: flush() the queue first (Event.wait() flushes)",
                      file=sys.stderr, flush=True)
        return False

    def _signalled(self) -> bool:
        """Memory only, and no time passes (the driver's own looks, repr)."""
        if self._lost:  # never written: a later event's value passes it, but it did not run
            return False
        # timeline values start at 1 over a zeroed dword, and are compared wrap-safely
        return seq_passed(self.value, int(self._queue.q32[QBO_TIMELINE]))

    @api_call("Event.wait")
    def wait(self, timeout: int | None = DEFAULT_TIMEOUT, *, timeout_cycles: int | None = _UNSET) -> bool:
        """True once signalled, False if `timeout` GPU cycles pass first (default
        DEFAULT_TIMEOUT; None: no bound but the KMD's job timer, which ends a job that makes
        no progress). Checks memory first, then the user fence, and asks the kernel (WAIT_CS)
        last; raises GpuError when the GPU failed on this queue. `timeout_cycles=` is the
        keyword's old name, still taken."""
        timeout_cycles = _timeout("wait", _timeout_alias("wait", timeout, timeout_cycles, "timeout_cycles"))
        return self._wait(timeout_cycles, "wait")

    def _wait(self, timeout_cycles: int | None, call: str) -> bool:
        """wait()'s, for `call` (wait, or signalled's look that asks the kernel)."""
        self._alive(call)
        q = self._queue
        if self._signalled() and self._proven():
            if (q.watch.jobs or q.async_errors) and self._number is not None:
                # (memory alone says nothing of a job that failed before, nor of a refusal)
                failed_jobs.check(q, call, upto=self._number)
            return True
        if q.closed:  # its close() finished what it could: this will never be signalled
            if q.abandoned and not q.device.closed:  # (its job still runs and writes the page)
                raise ValueError(f"{call}: {_ABANDONED}")
            raise ValueError(f"{call}: {_NEVER}")
        if self._seq is None and not self._lost and q.async_submit:
            if self._pending is None:
                _flush(q, call=call)  # never flushed
            q._drain()  # its submission first
        if self._lost:  # refused: raised here with what is pending up to it, unless reported before
            if self._number is not None:
                failed_jobs.check(q, call, upto=self._number)
            raise SubmitError(errno.ECANCELED, f"{call}: the submission carrying this event was refused")
        if self._seq is None:
            _flush(q, call=call)  # never flushed (earlier errors: raised once it is submitted)
        try:
            if not q._wait_seq(self._seq, timeout_cycles, call):  # type: ignore[arg-type]
                return False
            if not self._done() or not self._proven():
                # its submission has ended but did not signal it (or the queue has seen a job
                # fail): the kernel keeps a failed job's error, the one to raise, not "False",
                # which says time ran out (as a copy queue's event did after its job's reset).
                # (Before the reclaim, which lets the submission go: its labels name the call.)
                try:
                    q.ws.wait_cs(q.ctx_id, self._seq, 0)
                except KmdError as e:
                    kmd_errors.raise_from(q, e, call)
            q._reclaim()
        except GpuError as e:  # its job's error, with the errors pending up to it, in flush order
            self._failed = True  # (its repr said "pending" for ever)
            failed_jobs.check(q, call, upto=self._number, found=(self._number, e))
            raise  # (unreachable: check raises `found` at least)
        # a job before this one that failed, a refused flush before it, unless raised already
        failed_jobs.check(q, call, upto=self._number)
        return self._done()

    def __bool__(self) -> bool:
        # `if ev:` read as "is it done?" was always True, before the GPU got there too
        raise TypeError(f"{self!r} is not a truth value: ev.signalled() looks (memory only), ev.wait() waits")

    def _done(self) -> bool:
        return self._signalled()

    def _proven(self) -> bool:
        """Does memory prove the GPU got here? Its value in the timeline does."""
        return True

    def __repr__(self) -> str:
        state = ("lost" if self._lost else "failed" if self._failed
                 else "signalled" if self._signalled() else "pending")
        return f"<umd.Event {self.value} {state}>"


class Timestamp(Event):
    """A GPU clock sample (RELEASE_MEM TIMESTAMP): `wait()` for it, then `value` (or its
    alias `cycles`) is the 48-bit GPU clock, in cycles, when the queue got there."""

    _made_by = "ts = q.timestamp()"

    def __init__(self, queue: Queue, slot: int, index: int):
        self._start(queue)  # (no timeline value: Event.__init__ would set one)
        self._slot = slot
        self._index = index  # the queue's how-manieth timestamp: its slot is taken again QBO_TS_SLOTS later

    @property
    def _reused(self) -> bool:
        """QBO_TS_SLOTS more timestamps were taken on the queue: its slot may hold a later sample."""
        return self._queue.ts_next - self._index > QBO_TS_SLOTS

    def __repr__(self) -> str:
        if self._reused:
            return "<umd.Timestamp (its slot was taken again)>"
        if self._failed:
            return "<umd.Timestamp failed>"
        return f"<umd.Timestamp {self.cycles} cycles>" if self._signalled() else "<umd.Timestamp pending>"

    def _signalled(self) -> bool:
        return self._seq is not None and self._queue.seq_done(self._seq)

    def _done(self) -> bool:
        return True

    def _proven(self) -> bool:
        # its slot is written by the job, whose end passes the fence even when a ring reset
        # cancelled it: from the queue's first failed job on, the kernel says whether this one ran
        f = self._queue.failed_from
        return f is None or self._seq is None or not seq_passed(f, self._seq)

    def _read_only(self, _v: int) -> None:
        # (a setter that ignored it let an app's own number be read back as the GPU's sample)
        raise AttributeError("timestamp: its value (cycles) is the GPU clock sample the queue's job wrote: read-only")

    def _cycles(self) -> int:
        self._alive("timestamp")
        if self._reused:
            raise ValueError(f"timestamp: its slot was taken again by a later timestamp (a queue keeps its "
                             f"last {QBO_TS_SLOTS}): read it before taking more")
        if not self._signalled():
            raise ValueError("timestamp: not written yet: wait() for it first")
        lo, hi = self._queue.q32[2 * self._slot: 2 * self._slot + 2].tolist()
        return lo | hi << 32

    slot = record("Timestamp", "slot", "the dword pair of its queue's page the GPU writes its sample to")
    index = record("Timestamp", "index", "the queue's how-manieth timestamp it is")
    cycles = property(_cycles, _read_only, doc="the 48-bit GPU clock, in cycles, when the queue got here: "
                                               "ValueError until it is signalled (wait(), or signalled() True), "
                                               f"and once {QBO_TS_SLOTS} later timestamps of its queue have "
                                               "taken its slot again (read-only)")
    value = property(_cycles, _read_only,  # type: ignore[assignment]  (Event's timeline value, here the sample)
                     doc="the same as cycles: a timestamp's value is its clock sample (read-only)")


# -- entry points (the dispatch tables name these)

def queue_signal(self: Queue) -> "Event":
    """An event the GPU signals when it gets here (RELEASE_MEM of a timeline value)."""
    self.timeline = (self.timeline + 1) & M32
    ev = Event(self, self.timeline)
    addr = self.qbo.gpu_addr + 4 * QBO_TIMELINE
    self.cmdbuf.emit(sdma.fence(addr, ev.value) if self.copy_engine else
                     pm4.release_mem(addr, ev.value, data_sel="DATA_32"), self._label("signal"))
    self.unflushed_events.append(ev)
    self._end_command()
    return ev


def queue_timestamp(self: Queue) -> "Timestamp":
    """API v2: the GPU clock when the queue gets here (RELEASE_MEM TIMESTAMP)."""
    if self.copy_engine:
        raise ValueError("timestamp: the copy engine has no timestamp packet here (SDMA TIMESTAMP is not "
                         "implemented): take it on a gfx queue")
    slot = QBO_TS_FIRST + self.ts_next % QBO_TS_SLOTS
    ts = Timestamp(self, slot, self.ts_next)
    self.ts_next += 1  # (read only once its job has ended: the GPU wrote the slot by then)
    self.cmdbuf.emit(pm4.release_mem(self.qbo.gpu_addr + 8 * slot, 0, data_sel="TIMESTAMP"), self._label("timestamp"))
    self.unflushed_events.append(ts)
    self._end_command()
    return ts


def queue_wait_event(self: Queue, event: "Event") -> None:
    """API v2: the queue's next submission starts only once `event` (of another queue,
    gfx or copy, of this device) is signalled: a dependency the KMD's scheduler holds the
    job back for (a CS dependency chunk), so the CPU never waits. The wait covers the whole
    submission that carries the event. An event of this same queue needs no wait (the
    queue runs in order).

    An event its queue has not flushed yet is flushed by this call when it is the last
    thing that queue recorded (so the flush goes up to the event, no further), as that
    queue's flush: its errors stay that queue's (_flush_for). With commands recorded after
    it, ValueError: flushed from here, they would be submitted before that queue's own
    flush (and a job reads its inputs when it runs: the CPU may not have written them)."""
    if not isinstance(event, Event):
        raise TypeError(f"wait_event: event must be a umd Event, not {shown(event)}")
    q = event.queue
    if q.device is not self.device:
        raise ValueError("wait_event: the event belongs to another device")
    if q is self:
        return
    if q.closed:  # close() finished it, and its context is gone: nothing for a CS to name
        if event._signalled():
            return
        raise ValueError(f"wait_event: {_NEVER}")
    if event._seq is None and event._pending is None and not event._lost:
        _flush_for(q, self, event)  # the event must be submitted before anything can depend on it
    if event._pending is not None:  # flushed, queued for the submission thread
        if self.async_submit:
            # that thread submits it before this queue's next flush (one FIFO per device)
            # and names the dependency then
            self.deps.append(submit.EventDep(q, event._pending, event))
            self._label("wait_event")
            self._end_command()
            return
        q._drain()  # (the refusal, if any, stays its queue's to raise)
    if event._lost:  # refused: known before, or found by the drain
        raise SubmitError(errno.ECANCELED, "wait_event: the submission carrying this event was refused")
    submit.add_seq_dep(self, q, event._seq)  # (named at the CS: q may be closed by then)
    self._label("wait_event")
    self._end_command()


def _flush_for(q: Queue, waiter: Queue, event: "Event") -> None:
    """Flush queue `q` for `waiter`'s wait_event on `event`, which q has not flushed. A
    wait_event flushed all q had recorded, past the event too, and raised q's earlier
    failures and refusals, and this flush's own refusal, from the waiter's call, naming
    neither q's calls nor q. Now only up to the event (or a precise error), and q's errors
    are kept for q's next call (flush, finish, Event.wait, close), this flush's own refusal
    named as the flush wait_event made; the wait_event raises only that its event was
    refused (SubmitError ECANCELED), or a GpuTimeout or DeviceLost (nothing recorded)."""
    if q.last_recorded != event._call:  # (not q.calls: a call that raised recorded nothing)
        raise ValueError(f"wait_event: the event's queue ({q!r}) recorded commands after it and has not flushed "
                         "it: flush that queue first (flushed from here, they would be submitted before its own "
                         "flush)")
    try:
        _flush(q, check=False, call=f"flush (made by wait_event of {waiter!r})")
    except (GpuTimeout, DeviceLost):
        raise  # (the event still unflushed: retried, or nothing runs any more)
    except UmdError as e:  # q's own, raised by its next call, with its notes (the errors found with it)
        q.async_errors.append((q.flushes + 1, e))
