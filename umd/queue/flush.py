"""A queue's entry points that submit: flush (one CS ioctl, or a hand-over to the device's
submission thread, umd/submit.py), finish (flush, then wait for the last job) and close;
what a queue records is in umd/queue/record.py.
"""

from __future__ import annotations

import functools
import logging

from kmd_model.uapi import CsChunkFence, KmdError
from spec import pm4, sdma

from .. import submit
from ..args import DEFAULT_TIMEOUT, _timeout
from ..errors import DeviceLost, GpuError, GpuTimeout, UmdError
from ..failures import failed_jobs, kmd_errors
from ..runtime import _raise_first
from ..signals import deferred_stops
from ..submit import PendingCs
from ..winsys.cmdbuf import Label
from .record import QBO_USER_FENCE, Queue, Submission, log

def queue_flush(self: Queue) -> int | None:
    """Submit what was recorded (one CS ioctl); returns the submission's seqno, or None
    when there was nothing to submit, and always on an async queue (API v3: the submission
    thread makes the CS later; its events tell when it ran). With `max_inflight`
    submissions in flight it first waits for the oldest; if that times out (GpuTimeout)
    the commands stay recorded. An earlier job's failure or refused flush is raised after
    the commands are submitted, the exception's last note saying so."""
    return _flush(self)


def _flush(self: Queue, check: bool = True, call: str = "flush", own: str = "") -> int | None:
    """queue_flush; without `check` (a flush for memory, in the middle of a transfer; the
    flush of finish and close, which raise what is pending after their wait) an earlier
    job's failure or refused flush is left for the caller, or the next call, to raise.
    With it, those are taken first but raised after the commands are submitted (as finish
    does): the error is earlier work's, and the app's new work is not held back by it, nor
    left recorded for whichever call comes next; the last note says what was submitted.
    `call`: the API call that flushes (Event.wait's "wait"), which the note names. `own`:
    what `call` recorded last ("copy": download's), which it takes back when this flush
    does not submit it (CmdBuf.take_back): the note of a GpuTimeout says so."""
    earlier: list = []
    if self.async_submit:
        if self.pending:
            submit.collect(self)
        if check and self.async_errors:
            # a refused earlier flush (when the thread is done with it): with it, the rest
            # pending (a look: an ioctl only on this error path)
            earlier = failed_jobs.pending(self, call)
    cb = self.cmdbuf
    if not cb.ibs and self.deps:  # a wait with nothing after it yet: a NOP job carries it
        cb.emit(sdma.pad(8) if self.copy_engine else pm4.pad(8), Label("wait_event"))
    if not cb.ibs:
        _raise_first(earlier)
        return None
    if check and (self.watch.jobs or self.async_errors) and not self.async_submit:
        # an earlier job's failure (an async flush makes no ioctl: its queue learns at finish),
        # or the refusal of a flush another queue's wait_event made (events._flush_for)
        earlier = failed_jobs.pending(self, call)
    if any(isinstance(e, DeviceLost) for e in earlier):
        _raise_first(earlier)  # (at once: nothing runs any more, and the CS would meet the same loss)
    calls = self.calls
    try:
        if len(self.inflight) + len(self.pending) >= self.max_inflight:
            try:
                self._throttle(call)
            except GpuError as e:  # the oldest failed, and left: earlier work's error, raised after
                earlier.append(e)
                self._throttle(call)  # (room now, unless more are in flight than the limit: then it waits)
        with deferred_stops():  # (a ^C or a --timeout between the CS and its bookkeeping lost the submission)
            seq = _submit_recorded(self, call)
    except UmdError as e:  # its own refusal (the commands did not run), or no room: after the earlier ones
        if isinstance(e, GpuTimeout) and not own:
            e.add_note(f"{call}: the commands recorded since the last flush (the queue's calls up to #{calls}) "
                       "stay recorded: the next flush submits them")
        elif isinstance(e, GpuTimeout):
            rest = (f"the commands recorded before it (the queue's calls up to #{calls - 1}) stay recorded: the "
                    "next flush submits them" if cb.commands > 1 else "nothing else was recorded")
            e.add_note(f"{call}: its own {own} (the queue's call #{calls}) is taken back; {rest}")
        if not earlier:
            raise
        _raise_first([*earlier, e])
    if earlier:
        try:
            _raise_first(earlier)
        except UmdError as e:
            how = "queued for submission" if self.async_submit else "submitted"
            at = f" (asynchronous submission #{self.flushes})" if self.async_submit else f", seqno {seq:#x}"
            e.add_note(f"{call}: the commands recorded since the last flush (the queue's calls up to #{calls}) were "
                       f"{how} all the same, as the queue's flush #{self.flushes}{at}: the errors above are "
                       f"earlier work's")
            raise
    return seq


def _submit_recorded(self: Queue, call: str) -> int | None:
    """queue_flush's CS and its bookkeeping, which a ^C must not separate. The queue's
    recorded state (commands, events, dependencies) is taken only once the CS is in or
    refused: an exception from inside the CS ioctl that is not the kernel's answer (a ^C
    raised in its wait for ring room, where no SIGINT is held) comes before the KMD queues
    the job, its last step, so the commands stay recorded for the next flush (they were
    taken first, and lost: never run, their events never signalled)."""
    cb = self.cmdbuf
    first = cb.end()  # (recording may go on after it: the next end() closes the last IB again)
    ibs = [ib.buf for ib in cb.ibs]
    labels = cb.labels
    if log.isEnabledFor(logging.DEBUG):
        log.debug("flush ctx %d: %d command(s), %d dwords in %d IB(s)", self.ctx_id, cb.commands,
                  sum(ib.size_dw for ib in cb.ibs), len(cb.ibs))
        for ib in cb.ibs:
            log.debug("IB at %#x, %d dwords:\n%s", ib.gpu_addr, ib.size_dw, "\n".join(
                "  " + line for line in pm4.disassemble(ib.buf.u32[:ib.size_dw].tolist(), ib.gpu_addr)))
    sizes = [ib.size_dw for ib in cb.ibs]
    first_ib = (first.buf.gpu_addr, first.size_dw)
    deps = self.deps
    fence = CsChunkFence(self.qbo.handle, self.qbo.bo_offset + 4 * QBO_USER_FENCE)
    do_cs = functools.partial(submit.cs_ioctls, self, first_ib, ibs, sizes, deps, fence)
    if self.async_submit:  # the device's submission thread makes the ioctl (umd/submit.py)
        events = _take_recorded(self)
        self.flushes += 1
        job = PendingCs(do_cs, ibs, labels, events, self.staging, self.flushes, deps=bool(deps))
        self.staging = []  # freed once the CS is in (submit.collect)
        for ev in events:
            ev._pending, ev._number = job, self.flushes
        self.pending.append(job)
        self.device.submitter.push(job)  # type: ignore[union-attr]
        return None
    interrupted = refused = None
    try:
        seq, ncs = do_cs()
    except submit.Submitted as done:  # (its first CSs in: recorded as submitted, then the ^C or the refusal)
        seq, ncs, interrupted, refused = done.seq, done.ncs, done.error, done.refused
        nibs = done.nibs
    except KmdError as e:
        self.pool.free.extend(ibs)  # never ran
        for ev in _take_recorded(self):
            ev._lost = True
        try:
            kmd_errors.raise_from(self, e, call, cs=True, labels=labels)
        except UmdError as u:  # the newest error: the earlier ones pending first (finish's, close's flush)
            failed_jobs.check(self, call, found=(self.flushes + 1, u))
            raise  # (unreachable: check raises `found` at least)
    events = _take_recorded(self)
    self.flushes += 1
    all_ibs, all_labels = ibs, labels
    if refused is not None:  # a later CS of a copy flush refused: the part before it runs
        ibs, labels, events = submit.split(self, ibs, labels, events, nibs)
    self._submitted(seq, ncs, self.flushes)
    failed_jobs.track(self, Submission(seq, ibs, labels, ncs, bool(deps), self.flushes))
    for ev in events:
        ev._seq, ev._number = seq, self.flushes
    for b in self.staging:  # upload/download staging: the KMD keeps them until the job is done
        b.free()
    self.staging.clear()
    self.device.mm.flushed()
    self._reclaim()
    if refused is not None:
        try:
            kmd_errors.raise_from(self, refused, call, cs=True, labels=all_labels)
        except UmdError as u:
            submit.part_refused(self, u, all_ibs, all_labels, nibs, ncs, seq, self.flushes, call)
            if interrupted is not None:  # (the ^C first: the refusal is raised by the next call)
                self.async_errors.append((self.flushes, u))
                raise interrupted from None
            failed_jobs.check(self, call, found=(self.flushes, u))
            raise  # (unreachable: check raises `found` at least)
    if interrupted is not None:
        raise interrupted
    return seq


def _take_recorded(self: Queue) -> list:
    """The recorded commands now belong to a submission: the queue starts a new stream, with
    no dependencies; returns the events the submission carries."""
    events, self.unflushed_events = self.unflushed_events, []
    self.cmdbuf.reset()
    self.deps, self.seq_deps = [], {}
    return events


def queue_finish(self: Queue, timeout: int | None = DEFAULT_TIMEOUT) -> None:
    """Flush, then wait until the GPU has done everything submitted on this queue (an
    async queue's flushes included), then raise every error the app was not told of, once,
    together (umd/failures/failed_jobs.py): a refused flush, a failed job, the last job's.
    `timeout` is in GPU cycles, as every wait's (None: no bound but the KMD's job timer);
    when they pass first, GpuTimeout is raised (where Event.wait returns False), as the
    last note of the errors pending, if any."""
    _finish(self, _timeout("finish", timeout, "timeout"), "finish")


def _finish(self: Queue, timeout: int, call: str, own: str = "") -> None:
    """Queue.finish for `call`, the API call that finishes the queue (download too): the
    name its errors give; `own` as _flush's."""
    _flush(self, check=False, call=call, own=own)  # (its own refusal raises here, the errors pending with it)
    if self.async_submit:
        self._drain()
    done, found = failed_jobs.wait_last(self, timeout, call)
    errors = failed_jobs.pending(self, call, found=found)
    if not done:
        errors.append(GpuTimeout(f"{call}: queue (context {self.ctx_id}) not idle after {timeout} cycles"))
    _raise_first(errors)
    self._reclaim()


def queue_close(self: Queue) -> None:
    """Submit what the queue recorded, wait for its work (DEFAULT_TIMEOUT cycles), release its
    context; its events still answer. Errors the app was not told of yet (a refused flush, a
    failed job) are raised once it is closed, and GpuTimeout when its last job still runs
    after those cycles (closed all the same: the job runs on); a second close() does
    nothing. `with gpu.queue() as q:` closes it at the end."""
    self._close()
