"""The interrupt handler and the waits (Kmd's part, mixed into core/kmd.py's Kmd; amdgpu_irq
and amdgpu_fence's waits).

The IH ring (irq/ih.py) hands each entry to its source's handler here: EOP and the SDMA
trap -> fence processing (which retires jobs), CP_ERROR, VM_FAULT and SDMA errors ->
the error is recorded (a VM fault in the faulting VM, for INFO VM_FAULT) and recovery
runs once the handler is done with the IH ring. A line that is high with
nothing in the IH ring is an overflow, a device without an IH ring, or an entry whose
wptr write-back has not landed yet: INT_STATUS says which.

Waiting is amdgpu's: check fence memory (cheap); sleep on the interrupt for at most the
fallback period; run the IH handler when it fires, else poll fences and STATUS (the
fallback timer, which also catches a lost CP_ERROR interrupt, and runs every fallback
period even while interrupts keep coming); give up at the deadline.
All times are simulated cycles (`Device.now()`), so runs are repeatable.
"""

from __future__ import annotations

import errno
from dataclasses import replace

from spec import vm as vm_spec

from .. import regs
from ..core import signals
from ..log import get_logger
from ..reset.cp_error import CpError, CpErrorState
from ..sched.fence import Fence
from ..sched.scheduler import Scheduler
from ..uapi import KmdError, VmFaultInfo

log = get_logger("kmd")

INT_EVENTS = regs.INT_STATUS.EOP.mask | regs.INT_STATUS.CP_ERROR.mask | regs.INT_STATUS.IH_OVERFLOW.mask
"""The INT_STATUS events the driver handles (W1C: cleared after a reset, and when seen)."""


class IrqMixin:
    """Kmd's interrupt handler, IH source handlers, fallback poll and waits."""

    # ------------------------------------------------------------------ interrupts

    def _fence_signalled(self, fence: Fence) -> None:
        if self.observers:
            self.notify("fence", fence=fence)
        job = fence.job
        ring = job.ring if job is not None else None
        sched = next((s for s in self.scheds if s.ring is ring), self.sched)
        sched.fence_signalled(fence)

    def irq_handler(self) -> None:
        self.stats["interrupts"] += 1
        if self.observers:
            self.notify("irq")
        n = self.ih.process() if self.ih else 0
        if n == 0 and self.ih is not None:
            # the line rises with IH_WPTR, a few cycles before the wptr write-back lands
            # (docs/hardware.md, "The IH ring"): what the write-back does not show yet, the
            # register does. (Returning instead, the line still high called the handler
            # again: two interrupts for every entry that won that race, most on the RTL.)
            n = self.ih.take_from_register()
        if n == 0:
            self._check_int_status()
        elif self.ih.full_seen:
            # the ring was full at one of the handler's looks: the hardware may have dropped
            # entries since, and set IH_OVERFLOW. An interrupt storm keeps the ring from ever
            # looking empty, so the overflow is read here, not only when nothing came.
            self.ih.full_seen = False
            self._check_int_status(had_entries=True)

    def _check_int_status(self, had_entries: bool = False) -> None:
        """The line is high but the IH ring had nothing, by the write-back nor by IH_WPTR: an
        overflow, or no IH ring at all. `had_entries`: the handler took entries from a ring it
        found full; only an overflow is looked for."""
        m = self.mmio
        st = m.read(regs.INT_STATUS)
        events = st & INT_EVENTS
        if events:
            m.write(regs.INT_STATUS, events)
        if regs.INT_STATUS.IH_OVERFLOW.get(st):
            log.warning("IH ring overflowed: entries were dropped; polling fences and STATUS")
        if events:
            self.fence_drv.process()
            if self.hqd_sched is not None:
                self.hqd_sched.fence_drv.process()
            if self.sdma_fence_drv is not None:
                self.sdma_fence_drv.process()
                self._check_ring_status(self.sdma_sched)
            if self.ih is None or regs.INT_STATUS.IH_OVERFLOW.get(st) or regs.INT_STATUS.CP_ERROR.get(st):
                self._check_status()
        elif had_entries:
            pass
        elif self.ih is not None and regs.INT_STATUS.IH_PENDING.get(st):
            # IH_WPTR showed no whole entry past our rptr, yet the line is high (an entry on
            # its way, IH_RPTR written mid-entry): look again soon, not a spurious interrupt
            self.dev.delay(2)
        else:
            self.stats["spurious_interrupts"] += 1
            self.dev.delay(16)  # let time pass, or a line that stays high would spin us

    def _check_status(self) -> None:
        if self.reset_pending is None and regs.STATUS.ERROR.get(self.mmio.read(regs.STATUS)):
            self._cp_error(self.read_cp_error())
        self._check_ring_status(self.hqd_sched)

    def _check_ring_status(self, sched: Scheduler | None) -> None:
        """An extra ring's STATUS.ERROR found by polling (its error entry lost or not read yet)."""
        if sched is not None and sched.error is None and sched.ring.STATUS.ERROR.get(self.mmio.read(sched.ring.STATUS)):
            self._ring_error(sched, sched.ring.read_error())

    def _ring_error(self, sched: Scheduler, state: CpErrorState) -> None:
        """An extra ring stopped with an error: recovered once the IH handler is done."""
        if sched.error is None:
            self.stats["sdma_errors" if sched is self.sdma_sched else "cp_errors"] += 1
            if state.code == CpError.VM_FAULT:
                if sched is not self.sdma_sched:
                    state = self._queue1_fault(sched, state)
                if state.vm_status is None:
                    self._record_sdma_vm_fault(sched, state)
                else:
                    self._record_vm_fault(state)
            sched.error = state

    def _queue1_fault(self, sched: Scheduler, state: CpErrorState) -> CpErrorState:
        """CP queue 1's VM fault, whose status is read from the one VM_FAULT_STATUS the two CP
        queues share: it holds queue 0's fault when both queues are stopped by one
        (docs/hardware.md). Taken as queue 1's, the fault went to the VM of queue 0's VMID,
        with queue 1's address: a client whose own job faulted on queue 0 read, in INFO
        VM_FAULT, the address another client's job faulted at on queue 1. When the status
        names another VMID than queue 1's job in hand runs with, it is not queue 1's: the
        fault is that job's VMID's, access and cause unknown, as an SDMA fault is."""
        job = sched.job_at_ring(self.mmio.read(sched.ring.RPTR) >> sched.ring.RPTR_SHIFT) or sched.head_job()
        if (job is None or not job.vmid or state.vm_status is None
                or regs.VM_FAULT_STATUS.VMID.get(state.vm_status) == job.vmid):
            return state
        return replace(state, vm_status=None, unlatched="VM_FAULT_STATUS held CP queue 0's fault, no access "
                                                        "or cause latched for this one")

    def read_cp_error(self) -> CpErrorState:
        m = self.mmio
        return CpErrorState.from_regs(m.read(regs.CP_ERROR), m.read64(regs.CP_ERROR_ADDR_LO, regs.CP_ERROR_ADDR_HI),
                                      m.read(regs.CP_ERROR_OFFSET), m.read(regs.VM_FAULT_STATUS))

    # IH source handlers (kmd_model/irq/ih.py)
    def on_eop(self, entry: dict) -> None:
        self.fence_drv.process()
        if self.hqd_sched is not None:
            self.hqd_sched.fence_drv.process()

    def on_sdma_trap(self, entry: dict) -> None:
        """sdma_v4_0_process_trap_irq: the fence value is re-read from memory."""
        if self.sdma_fence_drv is not None:
            self.sdma_fence_drv.process()

    def on_sdma_error_entry(self, entry: dict) -> None:
        """The SDMA stopped by an error, unless SDMA_STATUS.ERROR is 0 again: then the entry came
        late and its error was recovered already. On the RTL an SDMA entry waits for the CP's
        IH writer behind the CP's packet in hand (docs/hardware.md), so the job timer may find
        the error first (SDMA_STATUS.ERROR), and the queue reset ends once this entry is
        written: taken as a new error, it reset the queue a second time, under the next job."""
        if not regs.SDMA_STATUS.ERROR.get(self.mmio.read(regs.SDMA_STATUS)):
            log.info("SDMA_ERROR entry of an error already recovered (its entry waited for the CP's IH writer)")
            return
        self._ring_error(self.sdma_sched, self.sdma_ring.read_error())  # type: ignore[arg-type, union-attr]

    POLL_TIMEOUT_LOGS = 10  # POLL_TIMEOUT warnings per job timeout at most (then one line says how many more)

    def on_sdma_poll_timeout(self, entry: dict) -> None:
        """sdma_v4_0_process_pool_timeout_irq only logs: the engine moved on by itself. Rate
        limited, as the kernel's dev_err_ratelimited: an SDMA job of POLL_REGMEMs each giving
        up after a cycle (no checker refuses it) logged a warning a cycle, 20,000 lines for
        a job of 20,000 polls. At most POLL_TIMEOUT_LOGS a job timeout, then one line says how
        many were not logged."""
        now, n = self.dev.now(), self._poll_timeouts
        if n is None or now - n[0] >= self.params.job_timeout:
            if n is not None and n[2]:
                log.warning("sdma0: %d more POLL_REGMEMs gave up (not logged)", n[2])
            n = self._poll_timeouts = [now, 0, 0]
        if n[1] < self.POLL_TIMEOUT_LOGS:
            n[1] += 1
            log.warning("sdma0: a POLL_REGMEM at %#x gave up (last read %#010x)", entry["DATA0"] | entry["DATA1"] << 32,
                        entry["DATA2"])
        else:
            n[2] += 1

    def _stale_cp_entry(self, queue: int, what: str) -> bool:
        """Is this CP error entry (CP_ERROR, VM_FAULT) of queue `queue` one of an error already
        recovered? A queue's own reset (CP_QUEUE_RESET.Q0/Q1) leaves the IH ring as it is,
        other rings' entries in it: an entry of the error it recovered that was written or
        read after the error was found by polling STATUS.ERROR (the fallback poll, the job
        timer) is still there, and taken as a new error it reset the queue a second time
        under the next job (queue 1's as an error of code 0, its registers cleared). (The
        full reset empties the IH ring.) A queue stopped by an error reads its STATUS.ERROR 1
        until it is reset, and its entry is written after the error is latched."""
        if queue == 1:
            pending, status = self.hqd_sched.error, regs.CP_HQD1_STATUS  # type: ignore[union-attr]
        else:
            pending, status = self.reset_pending, regs.STATUS
        if pending is None and not status.ERROR.get(self.mmio.read(status)):
            log.info("%s entry of a CP queue %d error already recovered", what, queue)
            return True
        return False

    def on_cp_error_entry(self, entry: dict) -> None:
        queue = 1 if entry.get("RING_ID") == 1 and self.hqd_sched is not None else 0
        if self._stale_cp_entry(queue, "CP_ERROR"):
            return
        if queue == 1:  # the CP's second queue
            self._ring_error(self.hqd_sched, self.hqd_ring.read_error())  # type: ignore[union-attr]
            return
        # From the registers, not the entry's data: an entry read after its error was recovered
        # (found by polling) while the next job's error is latched says that an error stopped
        # the queue, the registers which one. Decoded from the entry, the next client was told
        # of the earlier client's error, its opcode and IB address, and its own never was.
        self._cp_error(self.read_cp_error())

    def on_vm_fault_entry(self, entry: dict) -> None:
        """A UTCL2 fault entry: the CP stopped with VM_FAULT; the registers hold the exact
        address (the entry has its page) and the status."""
        queue = 1 if entry.get("RING_ID") == 1 and self.hqd_sched is not None else 0
        if self._stale_cp_entry(queue, "VM_FAULT"):
            return
        if queue == 1:
            self._ring_error(self.hqd_sched, self.hqd_ring.read_error())  # type: ignore[union-attr]
            return
        self._cp_error(self.read_cp_error())

    def _cp_error(self, state: CpErrorState) -> None:
        # One error can be seen twice (STATUS.ERROR by a poll, then its IH entry, which the
        # CP writes a few cycles later): count and recover it once.
        if self.reset_pending is None:  # recovery runs once the handler is done with the IH ring
            self.stats["cp_errors"] += 1
            if state.code == CpError.VM_FAULT:
                self._record_vm_fault(state)
            self.reset_pending = ("cp_error", state)

    def _record_vm_fault(self, state: CpErrorState) -> None:
        """Keep the fault for INFO VM_FAULT in the VM that holds the faulting VMID
        (amdgpu_vm_update_fault_cache), and in the KMD's statistics."""
        self.stats["vm_faults"] += 1
        f = regs.VM_FAULT_STATUS.decode(state.vm_status)
        info = VmFaultInfo(state.addr, state.vm_status, f["VMID"], vm_spec.Access(f["ACCESS"]).name,
                           vm_spec.Cause(f["CAUSE"]).name, f["LEVEL"])
        self.last_vm_fault = info
        if f["VMID"]:
            owner = self.vmids.ids[f["VMID"] - 1].owner
            if owner is not None:
                owner.fault = info

    def _record_sdma_vm_fault(self, sched: Scheduler, state: CpErrorState) -> None:
        """An SDMA queue's VM fault (or CP queue 1's whose status is not its own:
        _queue1_fault), kept as a CP fault is (INFO VM_FAULT, the statistics). The
        engine latches the address (SDMA_ERROR_ADDR) but no VM_FAULT_STATUS: the VMID is the
        one the job it stopped in ran with (found as the recovery finds the guilty job, by the
        ring's rptr, so the error's message and INFO VM_FAULT name the same VMID); status,
        access, cause and level stay 0 and empty: not known, rather than decoded from a
        status of 0."""
        self.stats["vm_faults"] += 1
        ring = sched.ring
        job = sched.job_at_ring(self.mmio.read(ring.RPTR) >> ring.RPTR_SHIFT) or sched.head_job()
        vmid = job.vmid if job is not None and job.vmid else 0
        info = VmFaultInfo(state.addr, 0, vmid, "", "", 0)
        self.last_vm_fault = info
        if vmid:
            owner = self.vmids.ids[vmid - 1].owner
            if owner is not None:
                owner.fault = info

    def fallback_poll(self) -> None:
        """amdgpu's fence fallback timer: a lost interrupt only costs time. It runs when no
        interrupt came for `fallback_poll` cycles, and at least every `fallback_poll` cycles
        however many come (service): it ran only when none came, and the handler polls the
        fences only when it finds the IH ring empty, so an interrupt storm (an SDMA job of
        POLL_REGMEMs giving up every cycle) kept a job whose EOP entry an overflow had dropped
        unsignalled for as long as it lasted, and the job timer then reset its ring."""
        self.stats["fallback_polls"] += 1
        self.fallback_at = self.dev.now()
        if self.fence_drv.pending and self.fence_drv.process():
            log.debug("fallback poll signalled fences (interrupt late or lost)")
        if self.sched.pending or self.fence_drv.pending:
            self._check_status()
        if self.hqd_sched is not None:
            self.hqd_sched.fence_drv.process()
            if self.hqd_sched.pending and not (self.sched.pending or self.fence_drv.pending):
                self._check_status()
        if self.sdma_sched is not None:
            if self.sdma_fence_drv.pending:  # type: ignore[union-attr]
                self.sdma_fence_drv.process()  # type: ignore[union-attr]
            if self.sdma_sched.pending:
                self._check_ring_status(self.sdma_sched)

    # ------------------------------------------------------------------ waiting

    def service(self) -> None:
        """Fold in whatever the hardware did: fences, interrupts, a pending reset, timeouts;
        then feed the ring. Every ioctl that depends on GPU state calls this first."""
        self.wake_dependents()
        if self.dev.irq_level():
            self.irq_handler()
            if self.dev.now() - self.fallback_at >= self.params.fallback_poll:
                self.fallback_poll()  # (the timer runs whatever the interrupts do)
        else:
            if self.fence_drv.pending:
                self.fence_drv.process()
            if self.sdma_fence_drv is not None and self.sdma_fence_drv.pending:
                self.sdma_fence_drv.process()
            if self.hqd_sched is not None and self.hqd_sched.fence_drv.pending:
                self.hqd_sched.fence_drv.process()
        if self.reset_pending is not None:
            self._recover_pending()
        elif self.sched.timed_out(self.dev.now()) and not self._progressed(self.sched):
            self.timedout_job()
        for s in (self.hqd_sched, self.sdma_sched):
            if s is None or self.wedged is not None:
                continue
            if s.error is not None:
                self._ring_recover_pending(s)
            elif s.timed_out(self.dev.now()) and not self._progressed(s):
                self.ring_timedout_job(s)
        v = self.vmids
        if (v.stuck_since is not None and self.wedged is None and any(s.has_queued() for s in self.scheds)
                and self.dev.now() - v.stuck_since >= self.params.job_timeout):
            # the MMU has not acknowledged an invalidation for a whole job timeout and jobs
            # wait for a VMID: a soft reset leaves the MMU as it is, so only failing them ends it
            self.wedge(f"the MMU acknowledged no TLB flush for {self.dev.now() - v.stuck_since} cycles, "
                       f"jobs waiting for a VMID ({v.stuck_why})")
        for s in self.scheds:
            if s.has_queued():
                s.kick()

    # Dependents of ended jobs a pass tells of their end (Job.ended) at most; the others are
    # told in the passes after it, which a wait makes at once (wait_for), as it does those
    # that cancel jobs
    WAKES_PER_PASS = 1024

    def wake_dependents(self) -> None:
        """A new pass: the dependents ended jobs have still to tell (Job.ended), its share."""
        self.wakes_left = self.WAKES_PER_PASS
        while self.waking and self.wakes_left > 0:
            job, deps, at = self.waking[0]
            n = min(len(deps) - at, self.wakes_left)
            job.tell(deps, at, at + n)
            self.wakes_left -= n
            if at + n == len(deps):
                self.waking.popleft()
            else:
                self.waking[0] = (job, deps, at + n)

    def cancels_due(self) -> bool:
        """Did a pass leave work for the next: jobs to cancel (Scheduler.CANCELS_PER_PASS),
        dependents to tell of an end (WAKES_PER_PASS), jobs to put into a ring
        (Scheduler.RUNS_PER_PASS; only while it has jobs queued: service kicks it then)?"""
        return bool(self.waking) or any(s.cancels_due or (s.runs_due and s.has_queued()) for s in self.scheds)

    def wait_unlocked(self, done, timeout: int) -> bool:
        """wait_for, for an ioctl waiting on a client's work (a CS for its context's slot,
        WAIT_CS, GEM_WAIT_IDLE): in steps of `fallback_poll` cycles at most, the driver's lock
        handed to the threads waiting for it in between (core/lock.py), and between the
        scheduler passes that cancel jobs for a failed dependency (wait_for). So `done` may only
        look at objects it holds, and the caller must look up again anything it needs after
        (the file may be closed, the context freed, a BO closed or unmapped meanwhile)."""
        dev = self.dev
        deadline = dev.now() + timeout
        while True:
            if self.wait_for(done, min(max(0, deadline - dev.now()), self.params.fallback_poll)):
                return True
            if dev.now() >= deadline:
                return False
            if signals.pending():
                # an interruptible wait, as the kernel's: a held signal (^C, --timeout) ends it
                # now, the handler runs as the ioctl returns (core/signals.py); nothing was
                # changed yet that a retry would not do again
                raise KmdError(errno.EINTR, "interrupted by a signal while it waited for the GPU")
            self.lock.yield_to_waiters()

    def elapse(self, cycles: int) -> None:
        """`cycles` of device time pass while a client runs outside the kernel (File.elapse):
        the GPU runs, and the kernel does beside it what it does while no ioctl is made (its
        interrupt handler, fences, the job timer, the rings fed), as wait_for does for a
        sleeping ioctl, with no condition to end it early. The lock is handed to the threads
        waiting for it between steps (of fallback_poll cycles at most), as wait_unlocked
        does: a client spinning for long holds no other client's ioctl back. A held signal
        ends it early, as it ends a wait inside an ioctl (EINTR there): the time passing
        promises nothing, and 2**32 cycles on a simulator held ^C and `--timeout` for hours.
        Jobs a scheduler pass left to cancel are cancelled first, as wait_for does."""
        dev = self.dev
        deadline = dev.now() + cycles
        while True:
            self.service()
            if self.cancels_due():
                self.lock.yield_to_waiters()
                continue
            now = dev.now()
            if now >= deadline or signals.pending():
                return
            if dev.wait_irq(min(deadline - now, self.params.fallback_poll)):
                self.irq_handler()
            elif dev.now() - self.fallback_at >= self.params.fallback_poll:
                self.fallback_poll()  # (the timer that catches a lost interrupt runs beside a poll too)
            self.lock.yield_to_waiters()

    def wait_for(self, done, timeout: int) -> bool:
        """Wait until `done()` or `timeout` cycles pass; interrupts, fallback polls, resets
        and timeouts are handled on the way. While a scheduler pass leaves jobs to cancel
        (Scheduler.CANCELS_PER_PASS), the next pass comes at once, no device time passing,
        the driver's lock handed to the threads waiting for it in between: as a kernel's
        scheduler cancels them from its worker, not in the waiting ioctl's critical section."""
        dev = self.dev
        deadline = dev.now() + timeout
        while True:
            self.service()
            if done():
                return True
            if self.cancels_due():
                # a scheduler pass left jobs to cancel (Scheduler.CANCELS_PER_PASS): the next
                # pass now, with no device time passing, the threads waiting for the driver's
                # lock let in first (only between passes: each ioctl of theirs waits for one)
                self.lock.yield_to_waiters()
                continue
            now = dev.now()
            if now >= deadline:
                return False
            step = min(deadline - now, self.params.fallback_poll)
            for s in self.scheds:
                t = s.next_timeout(now)
                if t is not None:
                    step = max(1, min(step, t))
            if dev.wait_irq(step):
                self.irq_handler()
            else:
                self.fallback_poll()
