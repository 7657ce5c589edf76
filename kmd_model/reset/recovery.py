"""Recovery (Kmd's part, mixed into core/kmd.py's Kmd; amdgpu_device_gpu_recover and
amdgpu_job_timedout's ladder).

Errors: a CP_ERROR entry (or STATUS.ERROR found by polling) is decoded into a message,
the job at the CP's read pointer is guilty, and recovery runs drm_sched's
stop -> reset -> resubmit -> start. A VM fault (its UTCL2 entry) goes the same way, after
the fault is recorded in the faulting VM (INFO VM_FAULT). A job with no progress for
`job_timeout` cycles goes the same way through `timedout_job`.

Every ring (the gfx ring, CP queue 0; the SDMA ring; the CP's second queue) climbs
amdgpu's ladder (`ring_recover`): a reset of its queue alone (CP_QUEUE_RESET.Q0/Q1,
SDMA_CNTL.QUEUE_RESET), the other rings running on, and the full reset (`gpu_recover`:
every ring stopped, CONTROL.SOFT_RESET, every ring's innocent jobs run again from their
start) only if that fails, or on a device whose CP has no CP_QUEUE_RESET. The
guilty context's jobs are cancelled (ECANCELED); after `ban_after_hangs` resets it is
banned (EIO); a reset that fails wedges the device (every job and CS: EIO, and no new
memory: GEM_CREATE, GEM_VA MAP and REPLACE; what is freed from then on is quarantined, the
stuck engine may still reach it).
"""

from __future__ import annotations

import errno
import logging
from dataclasses import replace

from .. import regs
from ..log import get_logger
from ..sched.scheduler import Job, Scheduler
from ..uapi import HwErrorInfo, KmdError, ResetStatus
from .cp_error import CpError, CpErrorState

log = get_logger("kmd")


def _file_of(job: Job | None):
    """The File whose job it is (the rate limit's count: RecoveryMixin._log_limited), None for none."""
    return job.ctx.file if job is not None else None


class RecoveryMixin:
    """Kmd's recovery: the full reset, the ring reset ladder, guilt, wedging."""

    # ------------------------------------------------------------------ errors and recovery

    def _recover_pending(self) -> None:
        kind, state = self.reset_pending  # type: ignore[misc]
        assert state is not None
        rptr = self.mmio.read(regs.RB_RPTR)
        guilty = self.sched.job_at_ring(rptr) or self.sched.head_job()
        info = self.describe_error(state, guilty)
        self._log_limited("CP error", logging.ERROR, "CP error: %s", info.message, file=_file_of(guilty))
        if self.observers:
            self.notify("gpu_error", info=info, state=state, job=guilty, ring=self.ring.name)
        self.ring_recover(self.sched, guilty, info)

    def describe_error(self, state: CpErrorState, guilty: Job | None, ring: str = "gfx") -> HwErrorInfo:
        owner = f"context {guilty.ctx.name}" if guilty else "kernel"
        if ring != "gfx":
            owner = f"{ring}, {owner}"
        if guilty is not None and state.code not in (CpError.DOORBELL_BACKWARDS, CpError.DOORBELL_OVERFLOW):
            # the CP ran the checked copy; the client knows its packets by its own addresses
            state = replace(state, addr=guilty.client_addr(state.addr))
        what = state.what(self.info.ib_levels, guilty.vmid if guilty is not None else None)
        msg = f"{what} at {state.where()}, {owner}"
        return HwErrorInfo(code=state.code_name, level=state.level_name, opcode=state.opcode,
                           opcode_name=state.opcode_name, offset=4 * state.offset_dw, addr=state.addr,
                           seq=guilty.seq if guilty else 0, ctx_id=guilty.ctx.id if guilty else 0,
                           message=msg)

    def _mark_guilty(self, guilty: Job | None, info: HwErrorInfo, scheds: tuple[Scheduler, ...],
                     full: bool = True, cancel: bool = True, counted=None, count_reset: bool = True) -> None:
        """The guilty context's unfinished jobs fail with ECANCELED. After a full reset the
        context stays guilty (amdgpu's ctx->guilty: its CS fails with ECANCELED from
        then on, a WAIT_CS where its latest job failed too: ioctl/wait.py) and its jobs go
        from every ring; after a queue reset only its jobs of that
        ring go, as amdgpu's per-queue reset cancels the guilty context's other fences there,
        and the context carries on until it has caused `ban_after_hangs` resets: then it is
        banned (its CS fails with EIO, as i915 bans). Contexts with work on the reset rings
        are innocent there. Without `cancel` (a reset that failed: the wedge fails every job
        with EIO) only what the contexts read is marked. `counted`: the context a queue reset
        found guilty before it failed (ring_recover) and this full reset follows: its hang is
        counted and its jobs of that ring are gone, the full reset's lasting guilt and its
        jobs on every ring are still to come."""
        # (not innocent anywhere after a full reset: its jobs are gone, or fail with EIO)
        gctx = guilty.ctx if guilty is not None and not guilty.finished and full else None
        if counted is not None and full:
            gctx = counted
            if cancel:
                counted.guilty = info
                err = KmdError(errno.ECANCELED, info.message, info)
                dropped = [j for s in self.scheds for j in s.drop_context(counted, err)]
                self._log_limited("guilty", logging.WARNING,
                                  "context %s of fd %d is guilty: %d more job(s) cancelled by the full reset",
                                  counted.name, counted.file.fd, len(dropped), file=counted.file)
        if guilty is not None and not guilty.finished:
            ctx = guilty.ctx
            ctx.hangs += 1
            if full and cancel:
                ctx.guilty = info
            ctx.reset_status = ResetStatus.GUILTY
            ctx.reset_error = info  # (QUERY_STATE's `error`: a guilty context names what it did)
            ctx.ring_status[guilty.ring.name] = ResetStatus.GUILTY  # (push_job gave every job its ring)
            if cancel:
                err = KmdError(errno.ECANCELED, info.message, info)
                dropped = [j for s in (self.scheds if full else scheds) for j in s.drop_context(ctx, err)]
                self._log_limited("guilty", logging.WARNING, "context %s of fd %d is guilty: %d job(s) cancelled",
                                  ctx.name, ctx.file.fd, len(dropped), file=ctx.file)
            if ctx.hangs >= self.params.ban_after_hangs and not ctx.banned:
                ctx.banned = (f"context {ctx.name} is banned: it caused {ctx.hangs} resets "
                              f"(ban_after_hangs {self.params.ban_after_hangs})")
                self._log_limited("banned", logging.ERROR, "%s", ctx.banned, file=ctx.file)
            if info.code == "TIMEOUT":  # (an error or a fault is reset at once: it costs the others little)
                ctx.file.hangs += 1
            if ctx.file.hangs >= self.params.file_ban_after_hangs and ctx.file.banned is None:
                self._ban_file(ctx.file, scheds if cancel else ())
        # Innocent on a reset ring: a context whose job was in that ring (run again from its
        # start, or put back after a queue reset). A job only queued (in its entity, never in
        # the ring) is untouched by the reset: it runs once, after it, as it would have; its
        # context reads NO_RESET there (it was INNOCENT: the status said its work was
        # resubmitted). That a reset happened at all is amdgpu's QUERY2 RESET flag, every
        # context's (`resets`, below, as amdgpu_ctx_query2 compares reset counters).
        for s in scheds:
            for job in s.pending:
                if job.ctx is gctx:
                    continue
                if job.ctx.ring_status.get(s.name, ResetStatus.NO_RESET) == ResetStatus.NO_RESET:
                    job.ctx.ring_status[s.name] = ResetStatus.INNOCENT
                if job.ctx.reset_status == ResetStatus.NO_RESET:
                    job.ctx.reset_status = ResetStatus.INNOCENT
        if count_reset:
            self._count_reset()

    def _count_reset(self) -> None:
        """A reset was done: every context has seen one more (QUERY_STATE's `resets`, its
        RESET flag): one counter, which each context compares with its value when it was
        made (Context.resets), as amdgpu's gpu_reset_counter. Each reset counted itself
        into every context of every file, under the driver's lock: 25 files of 4,095
        contexts made every reset, a fault made on purpose among them, cost 15 ms of it."""
        self.reset_count += 1

    def _ban_file(self, file, reset: tuple[Scheduler, ...]) -> None:
        """A file whose contexts' jobs timed out `file_ban_after_hangs` times in all is banned,
        every context (i915 bans a client by its contexts' hang score): their CS and a CTX
        ALLOC fail with EIO, their jobs queued on every ring, and in the rings just reset, are
        cancelled (ECANCELED). With a ban per context only, a client with a hanging job in
        each of 4,095 contexts delayed every other client one job timeout per context."""
        file.banned = (f"fd {file.fd} is banned: its contexts' jobs timed out {file.hangs} times "
                       f"(file_ban_after_hangs {self.params.file_ban_after_hangs})")
        log.error(file.banned)
        for ctx in file.contexts.values():
            ctx.banned = ctx.banned or file.banned
        err = KmdError(errno.ECANCELED, file.banned)
        for s in self.scheds:
            # (a freed context's jobs too.) Those in a ring just reset now (they would run
            # again), the queued ones by the scheduler's passes to come, a bounded number a
            # pass (Scheduler.cancel_queued); every entity of the file's is looked at, not
            # every job queued
            for ctx in {j.ctx: None for j in s.pending if j.ctx.file is file and not j.finished}:
                ctx.banned = ctx.banned or file.banned
                if s in reset:
                    s.drop_context(ctx, err, in_ring_only=True)
            for e in s._queued_entities():
                if e.ctx.file is file and e.queue:
                    e.ctx.banned = e.ctx.banned or file.banned
                    s.cancel_queued(e, err)

    def gpu_recover(self, guilty: Job | None, info: HwErrorInfo, counted=None, ring: Scheduler | None = None) -> None:
        """The full reset, the last step of the ladder: stop every ring -> reset the device ->
        drop the guilty context's jobs -> resubmit the rest -> start. `counted`: the guilty
        context a failed queue reset already counted (_mark_guilty); `ring`: the ring whose
        ladder ends here (its error is `info`)."""
        self.stats["resets"] += 1
        scheds = self.scheds
        # the other rings' STATUS.ERROR first: an error an engine latched whose entry the
        # handler has not read yet (interrupts late, masked) is this reset's as well
        for s in scheds:
            if s is ring or self.wedged is not None:
                continue
            if s is self.sched:
                if self.reset_pending is None and regs.STATUS.ERROR.get(self.mmio.read(regs.STATUS)):
                    self._cp_error(self.read_cp_error())
            else:
                self._check_ring_status(s)
        # Another ring's error still waiting for its own recovery (found in the same pass, or
        # just above, its ladder not climbed yet) is this reset's too: its guilty job, by the ring's read
        # pointer before the reset clears it, is guilty here as well. Dropped, it was run
        # again from its start as an innocent job (a fault that a remap in between had
        # mended then passed, its error lost).
        also = []
        pending = [(s, s.error) for s in scheds if s is not self.sched and s.error is not None]
        if self.reset_pending is not None and self.reset_pending[1] is not None:
            pending.insert(0, (self.sched, self.reset_pending[1]))
        for s, state in pending:
            ring = s.ring
            g = s.job_at_ring(self.mmio.read(ring.RPTR) >> ring.RPTR_SHIFT) or s.head_job()
            if g is not None and g is not guilty and not g.finished:
                also.append((s, g, self.describe_error(state, g, ring.name)))
                self._log_recovery(ring.name, "error")
                self._log_limited("error taken by the full reset", logging.ERROR, "%s error, taken by the full reset: %s",
                                  ring.name, also[-1][2].message, file=_file_of(g))
        self.reset_pending = None
        for s in scheds:
            s.error = None
        marked = False
        try:
            for s in scheds:
                s.stop()
            self._soft_reset()
            for s in scheds:
                s.fence_drv.process()  # work that finished before the error stays finished
            self._mark_guilty(guilty, info, scheds, counted=counted)
            for s, g, ginfo in also:  # guilty as its own ring's queue reset would have found it
                self._mark_guilty(g, ginfo, (s,), full=False, count_reset=False)
            marked = True
            redo = []
            for s in scheds:
                # nothing will ever write the hardware fences of the lost ring contents
                s.fence_drv.pending.clear()
                s.fence_drv.force_completion()
            self._hw_reinit()
            for s in scheds:
                redo += s.resubmit_and_start()
            self._log_limited("reset done", logging.WARNING, "GPU reset done: %d job(s) resubmitted", len(redo),
                              file=_file_of(guilty) or (counted.file if counted is not None else None))
            if self.observers:
                self.notify("reset", resubmitted=len(redo))
        except KmdError as e:
            if not marked:  # the contexts still learn of the reset, and who caused it
                self._mark_guilty(guilty, info, scheds, cancel=False, counted=counted)
            self.wedge(f"GPU reset failed: {e.message}")
            raise

    def wedge(self, why: str) -> None:
        """Recovery failed: the device is wedged; every job fails with EIO, and so does every CS
        and every ioctl that would allocate device memory (GEM_CREATE, GEM_VA MAP and REPLACE).
        The engine that never went idle may still run the jobs cancelled here, with their
        VMIDs, page tables and BOs: what is freed from now on is quarantined, never handed
        out again (mm/bo.py), before the cancellations below let go of it."""
        self.wedged = why
        self.bo.quarantine = True
        log.critical(self.wedged)
        for s in self.scheds:
            s.stopped = True
            s.cancel_all(KmdError(errno.EIO, self.wedged))
            s.fence_drv.pending.clear()  # their jobs are cancelled: nothing will signal them

    # ------------------------------------------------------------------ an extra ring's recovery

    def _ring_recover_pending(self, sched: Scheduler) -> None:
        state, ring = sched.error, sched.ring
        assert state is not None
        guilty = sched.job_at_ring(self.mmio.read(ring.RPTR) >> ring.RPTR_SHIFT) or sched.head_job()
        info = self.describe_error(state, guilty, ring.name)
        self._log_limited("error", logging.ERROR, "%s error: %s", ring.name, info.message, file=_file_of(guilty))
        if self.observers:
            self.notify("gpu_error", info=info, state=state, job=guilty, ring=ring.name)
        self.ring_recover(sched, guilty, info)

    ERROR_LOGS = 10  # lines of one kind (a call site's) a job timeout at most, then one line of how many more

    def _log_limited(self, site: str, level: int, fmt: str, *args, file=None) -> None:
        """The recovery's log lines (an error, its guilty context, a ban, the reset done),
        rate limited per kind as amdgpu's dev_err_ratelimited (gmc_v9_0_process_interrupt's
        VM fault lines): at most ERROR_LOGS of a kind a job timeout (device cycles), the
        count of those left out said by the first line of the kind in a later one. Counted
        per file, the guilty job's (`file`; the device's lines, no client's, apart): one
        count for every client let a client flooding the log with faults of its own hide
        another client's error line, that client never named. A fault
        is reset at once and costs its client nothing but the job: an SDMA job writing an
        unmapped address in a loop (no checker refuses it), a new context every 3 faults
        (ban_after_hangs), logged 3 to 4 lines a fault, some 600 lines a second without end.
        The counters (INFO COUNTERS, `stats`), the recovery log and the observers still see
        every one."""
        now = self.dev.now()
        counts = self._error_logs if file is None else file.error_logs
        n = counts.get(site)
        if n is None or now - n[0] >= self.params.job_timeout:
            if n is not None and n[2]:
                of = "" if file is None else f" of fd {file.fd}"
                log.warning("%d more %r lines%s not logged (at most %d a job timeout)", n[2], site, of, self.ERROR_LOGS)
            n = counts[site] = [now, 0, 0]
        if n[1] < self.ERROR_LOGS:
            n[1] += 1
            log.log(level, fmt, *args)
        else:
            n[2] += 1

    RECOVERY_KEPT = 1024  # recovery_log's latest steps: a client hanging a ring on purpose, again
    # and again, would grow it without end

    def _log_recovery(self, ring: str, step: str) -> None:
        self.recovery_log.append((ring, step))
        if len(self.recovery_log) > self.RECOVERY_KEPT:
            del self.recovery_log[:-self.RECOVERY_KEPT]

    def ring_recover(self, sched: Scheduler, guilty: Job | None, info: HwErrorInfo) -> None:
        """amdgpu_job_timedout's ladder for one ring, ring 0 included: reset of the queue alone
        (if it has one) -> the full reset only if that fails. The other rings keep running
        through a queue reset, their jobs in flight untouched: the full reset ran them again
        from their start, and a job that is not idempotent (copy A to B, clear A) got another
        result. What the full reset does besides that a queue reset must not: the IH ring
        keeps the other rings' entries (a stale entry of the reset queue is recognised by its
        STATUS.ERROR reading 0: irq/handler.py), the MMU, VMIDs and other rings' fences and
        write-back slots are left as they are; the reset queue's rptr write-back, ring and
        fences start again (init_hw, force_completion) as after the full reset. (amdgpu's first step, soft recovery, kills the guilty job's waves: no engine
        here has waves to kill, and sdma_v4_0 has none either, so the ladder starts below it.)"""
        ring = sched.ring
        sched.error = None
        if sched is self.sched:
            self.reset_pending = None  # (ring 0's error waits there, not in sched.error)
        self._log_recovery(ring.name, "timeout" if info.code == "TIMEOUT" else "error")
        counted = None  # the context this queue reset found guilty, if it fails after that
        if ring.has_queue_reset:
            self._log_recovery(ring.name, "queue_reset")
            try:
                sched.stop()
                ring.queue_reset(self.params.hw_timeout)  # type: ignore[attr-defined]
                sched.fence_drv.process()  # what finished before the error stays finished
                if guilty is not None and not guilty.finished:
                    counted = guilty.ctx
                # (the reset counted once its ring test passed: a queue reset that fails is
                # none, the full reset after it is the one; counted here, every context saw 2
                # resets for it, as amdgpu counts a ring reset only once it succeeded)
                self._mark_guilty(guilty, info, (sched,), full=False, count_reset=False)
                sched.fence_drv.pending.clear()
                sched.fence_drv.force_completion()
                ring.init_hw()
                ring.test_after_reset(self.params.hw_timeout)  # (behind the other CP queue's work: ring.py)
                self._count_reset()
                redo = sched.resubmit_and_start()
                self.stats["queue_resets"] += 1
                self._log_limited("reset done", logging.WARNING,
                                  "%s queue reset done: %d job(s) resubmitted, the other rings ran on", ring.name, len(redo),
                                  file=_file_of(guilty))
                if self.observers:
                    self.notify("reset", resubmitted=len(redo), ring=ring.name)
                return
            except KmdError as e:
                self._log_limited("queue reset failed", logging.ERROR, "%s queue reset failed (%s): resetting the device",
                                  ring.name, e.message, file=_file_of(guilty))
        self._log_recovery(ring.name, "full_reset")
        # (a queue reset that failed after cancelling the guilty job counted its hang: the full
        # reset gives its context the full reset's guilt, as when the queue reset failed before)
        self.gpu_recover(guilty if guilty is None or not guilty.finished else None, info,
                         counted=counted if guilty is None or guilty.finished else None, ring=sched)
