"""Jobs and the scheduler that feeds them to the ring (drm_sched's role, one ring).

A CS becomes a Job in the scheduler's queue. `kick()` moves queued jobs to the ring
while there is room (`run_job`: emit the IBs, the user fence and the hardware fence,
commit), in submission order. The fence driver signals a job's hardware fence when
its RELEASE_MEM lands; `free_job` then retires it.

Recovery is drm_sched's: stop (no more run_job) -> reset the hardware -> drop the
guilty job and the rest of its context's jobs -> resubmit the innocent jobs that had
not finished (with new hardware fences, in their original order) -> start. A job that
makes no progress for `job_timeout` cycles goes through `timedout_job`, which does the
same with the job as the guilty one.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .fence import Fence
from .log import get_logger
from .ring import Ring
from .uapi import KmdError

if TYPE_CHECKING:
    from .ctx import Context
    from .kmd import Kmd

log = get_logger("sched")


@dataclass(eq=False)
class Job:
    ctx: "Context"
    seq: int  # the context's seqno: the CS result and the user fence value
    ibs: list[tuple[int, int]]  # (gpu_addr, size_dw)
    user_fence: int | None  # GPU address of the user fence dword
    bos: set = field(default_factory=set)
    hw_fence: Fence | None = None
    finished: bool = False
    error: KmdError | None = None
    queued_at: int = 0
    ring_start: int = 0  # ring wptr range of its packets (free running)
    ring_end: int = 0
    runs: int = 0  # 1 + resubmissions
    checked: Any = None  # the CheckedJob whose shadow copies `ibs` name (None: cs_check off)
    client_ibs: list = field(default_factory=list)  # the IBs as the client named them
    vm: Any = None  # the file's Vm (kmd_model/vm.py): its IBs run with the VMID it holds
    vmid: int = 0

    def client_addr(self, addr: int) -> int:
        """An address in the job's shadow copies as the client knows it (error reports)."""
        return self.checked.client_addr(addr) if self.checked is not None else addr

    @property
    def ndw(self) -> int:
        """Ring dwords run_job writes (before padding)."""
        return len(self.ibs) * Ring.IB_DW + Ring.FENCE_DW * (2 if self.user_fence is not None else 1)

    def __repr__(self) -> str:
        return f"Job(ctx {self.ctx.id} seq {self.seq:#x})"


class Scheduler:
    def __init__(self, kmd: "Kmd", job_timeout: int):
        self.kmd = kmd
        self.ring = kmd.ring
        self.job_timeout = job_timeout
        self.queue: deque[Job] = deque()  # accepted, not yet in the ring
        self.pending: deque[Job] = deque()  # in the ring, not finished
        self.stopped = False
        self.progress_at = 0  # when the head job started, the last job finished, or the CP last moved
        self.progress_mark: tuple = ()  # what the CP had done then (Kmd._progressed)

    # ------------------------------------------------------------------ submission

    def push_job(self, job: Job) -> None:
        job.queued_at = self.kmd.dev.now()
        self.queue.append(job)
        job.ctx.jobs[job.seq] = job
        self.kick()

    def kick(self) -> int:
        """Move queued jobs into the ring while they fit; return how many."""
        n = 0
        while self.queue and not self.stopped and self.ring.alloc(self.queue[0].ndw):
            job = self.queue[0]
            vmid = self.kmd.vmids.grab(job.vm) if job.vm is not None else 0
            if vmid is None:
                break  # every VMID is busy: the job waits for one (amdgpu_vmid_grab)
            job.vmid = vmid
            self.queue.popleft()
            if not self.pending:
                self.progress_at = self.kmd.dev.now()
                self.progress_mark = ()
            self.run_job(job)
            self.pending.append(job)
            n += 1
        if n:
            self.ring.commit()
        return n

    def run_job(self, job: Job) -> Fence:
        """Emit the job into the ring (committed by the caller); return its hardware fence."""
        ring, kmd = self.ring, self.kmd
        job.runs += 1
        job.ring_start = ring.wptr
        for addr, size_dw in job.ibs:
            ring.emit_ib(addr, size_dw, vmid=job.vmid)
        if job.user_fence is not None:
            # before the kernel fence: when WAIT_CS returns, the user fence is there too
            ring.emit_fence(job.user_fence, job.seq, interrupt=False)
        fence = Fence(kmd.fence_drv.next_seq(), job)
        ring.emit_fence(kmd.fence_addr, fence.seq, interrupt=True)  # amdgpu's: INT_CTXID 0
        job.ring_end = ring.wptr
        job.hw_fence = fence
        if job.vmid:
            kmd.vmids.used(job.vmid, job)
        kmd.fence_drv.track(fence)
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
        self.progress_at = self.kmd.dev.now()
        self.progress_mark = ()
        self.kmd.job_retired(job)

    def cancel_job(self, job: Job, error: KmdError) -> None:
        job.error = error
        job.finished = True
        job.ctx.jobs.pop(job.seq, None)
        self.kmd.job_retired(job)

    # ------------------------------------------------------------------ timeouts and recovery

    def timed_out(self, now: int) -> bool:
        return bool(self.pending) and not self.stopped and now - self.progress_at >= self.job_timeout

    def next_timeout(self, now: int) -> int | None:
        """Cycles until the head job times out (None: nothing running)."""
        if not self.pending or self.stopped:
            return None
        return max(0, self.progress_at + self.job_timeout - now)

    def head_job(self) -> Job | None:
        return self.pending[0] if self.pending else None

    def job_at_ring(self, rptr: int) -> Job | None:
        """The pending job whose ring packets include dword `rptr`."""
        for job in self.pending:
            if (rptr - job.ring_start) & 0xFFFF_FFFF < (job.ring_end - job.ring_start) & 0xFFFF_FFFF:
                return job
        return None

    def stop(self) -> None:
        self.stopped = True

    def drop_context(self, ctx: "Context", error: KmdError) -> list[Job]:
        """Cancel every unfinished job of a guilty context, queued or in the ring."""
        dropped = [j for j in (*self.pending, *self.queue) if j.ctx is ctx and not j.finished]
        for j in dropped:
            self.cancel_job(j, error)
        self.pending = deque(j for j in self.pending if not j.finished)
        self.queue = deque(j for j in self.queue if not j.finished)
        return dropped

    def resubmit_and_start(self) -> list[Job]:
        """Put the unfinished jobs that were in the ring back at the head of the queue and
        restart; the ring is empty again after the reset."""
        redo = [j for j in self.pending if not j.finished]
        self.pending.clear()
        self.queue.extendleft(reversed(redo))
        self.stopped = False
        self.progress_at = self.kmd.dev.now()
        self.progress_mark = ()
        self.kick()
        return redo

    def cancel_all(self, error: KmdError) -> None:
        for j in (*self.pending, *self.queue):
            if not j.finished:
                self.cancel_job(j, error)
        self.pending.clear()
        self.queue.clear()

