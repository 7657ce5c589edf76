"""The VMID manager (amdgpu_vmid): which hardware VMID a job's VM runs with.

The `VmidManager` gives jobs VMIDs 1..15 as amdgpu_vmid_grab does: a VM keeps the VMID it
has while it owns it; otherwise it takes an idle one (no job of any ring runs with
it), least recently used first, stealing it from its previous VM: the page-table base and
enable are programmed and the VMID's TLB entries invalidated before the job's
INDIRECT_BUFFER names it. With no idle VMID the job waits in the scheduler's queue. VMs
that wait are served first come, first served (`waiting`), and the least recently used
busy VMID is drained for the first (`drain`): its owner starts no new job with it until
it has gone idle and to the waiter (15 VMs each keeping a job in a ring at every moment
kept a 16th out for good).

A flush the MMU does not acknowledge gives the VMID to no VM: the job waits as for a busy
VMID, and the next grab flushes first. `stuck_since` is when grabs began to fail that way
(None once a flush is acknowledged): the KMD wedges the device when a job has waited on
it for `job_timeout` cycles (a soft reset does not reset the MMU, so nothing else would
end the wait).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spec import vm as vm_spec

from .. import regs
from ..log import get_logger
from ..uapi import KmdError
from .vm import PAGE

if TYPE_CHECKING:
    from ..core.kmd import Kmd
    from ..sched.scheduler import Job
    from .vm import Vm

log = get_logger("vm")


@dataclass
class _Vmid:
    n: int
    owner: Vm | None = None
    jobs: list = field(default_factory=list)  # jobs emitted with it, unfinished when last looked
    used_at: int = 0
    prune_at: int = 16  # `jobs` this long: its finished ones dropped at the next job (VmidManager.used)


class VmidManager:
    """VMIDs 1..vmids-1 for jobs; 0 is the kernel's."""

    def __init__(self, kmd: "Kmd", vmids: int):
        self.kmd = kmd
        self.ids = [_Vmid(n) for n in range(1, vmids)]
        self.clock = 0
        self.grabs = self.steals = self.flushes = 0
        self.flush_failures = 0  # flushes not acknowledged (the VMID went to no VM)
        self.stuck_since: int | None = None  # the first of the grabs failing since the last acknowledge
        self.stuck_why = ""  # the last failure's message
        # (BO, VMID) of BOs unmapped by a flush the MMU did not acknowledge: the VMID's TLB may
        # hold their pages, so each is freed once no job runs with that VMID (free_unflushed)
        self.unflushed: list[tuple] = []
        # VMs whose job found no idle VMID, first come first served (-> when it last asked),
        # and the VMID drained for the first: its owner starts no new job with it meanwhile
        # (grab). A VMID is idle only when no job runs with it, so 15 files each keeping a job
        # in a ring at every moment kept every VMID busy, and a 16th file's job never ran.
        self.waiting: dict = {}
        self.swept_at = 0  # when every waiter was last looked at for its expiry (_expire)
        self.drain: int | None = None
        # The drained VMID's owner had a job refused (`held_back`); VMIDs whose drain the job
        # timer lifted for the first waiter (`spared`, lift_drain): not drained again for it
        self.held_back = False
        self.spared: set[int] = set()
        self.spared_for: "Vm | None" = None

    def _idle(self, v: _Vmid) -> bool:
        """No job runs with it. Every job, not the latest: a VM's jobs on different rings
        end out of order, and one still running would walk the next owner's tables."""
        v.jobs = [j for j in v.jobs if not j.finished]
        return not v.jobs

    def _expired(self, w: Vm, at: int, now: int) -> bool:
        return w.vmid is not None or w.closed or now - at > self.kmd.params.job_timeout

    def _expire(self, now: int) -> None:
        """Forget the waiting VMs that have a VMID, are closed, or have not asked for a job
        timeout (their jobs cancelled, or held elsewhere): they keep no one else waiting.
        Only the first waiter decides anything (grab, lift_drain), so those ahead of it
        alone are forgotten at each look, and the rest once a job timeout: every waiter
        looked at, at each grab, cost a scheduler pass the square of the files waiting (1,200
        files, each with a job queued while the VMIDs were taken, made each ioctl of every
        client hold the driver's lock 0.5 s). A VM that asks again after it expired is
        forgotten first (grab): it goes to the back, not back to its old place."""
        w = self.waiting
        while w:
            first = next(iter(w))
            if not self._expired(first, w[first], now):
                break
            del w[first]
        if w and now - self.swept_at > self.kmd.params.job_timeout:
            self.swept_at = now
            for v in [v for v, at in w.items() if self._expired(v, at, now)]:
                del w[v]
        if not w:
            self.drain = None

    def grab(self, vm: Vm, resubmitted: bool = False) -> int | None:
        """The VMID `vm`'s next job runs with, or None when it must wait: every VMID busy, or
        an idle one owed to a VM that has waited longer (first come, first served), or its
        own VMID being drained for such a VM (its jobs in flight end, its new ones wait, and
        the VMID goes idle to the waiter: amdgpu_vmid_grab waits for an idle VMID without
        that, and the clients that never let every VMID go idle kept the next one out). A job
        a reset put back (`resubmitted`) keeps its VM's VMID though it is drained: it ran with
        it, and nothing passes it in its ring (a waiter behind it there would wait for it)."""
        now = self.kmd.dev.now()
        if self.waiting:
            self._expire(now)
        if vm.vmid is not None:
            if vm.vmid == self.drain and self.waiting and not resubmitted:
                self.held_back = True
                return None
            return vm.vmid
        at = self.waiting.get(vm) if self.waiting else None
        if at is not None and self._expired(vm, at, now):
            del self.waiting[vm]  # (as if forgotten when it expired: its place is lost)
            if not self.waiting:
                self.drain = None
        first = next(iter(self.waiting), vm)
        # (not looked for while an earlier waiter is first: a VMID each for every waiting VM)
        idle = [v for v in self.ids if self._idle(v)] if first is vm or self.drain is None else []
        if not idle or first is not vm:
            self.waiting[vm] = now  # (a VM already waiting keeps its place)
            if self.drain is None:
                idle_n = {v.n for v in idle}
                busy = [v for v in self.ids if v.owner is not None and v.n not in idle_n]
                if self.spared_for is not next(iter(self.waiting)):  # (spared for an earlier waiter)
                    self.spared, self.spared_for = set(), next(iter(self.waiting))
                busy = [v for v in busy if v.n not in self.spared] or busy
                if busy:
                    self.drain = min(busy, key=lambda v: v.used_at).n  # the least recently used
                    self.held_back = False
            return None
        v = min(idle, key=lambda v: (v.owner is not None, v.used_at))  # unowned first, then LRU
        if v.owner is not None:
            v.owner.vmid = None
            v.owner = None
            self.steals += 1
        m = self.kmd.mmio
        m.write(regs.VM_CONTEXT_PT_BASE_LO, vm.root.gpu_addr & 0xFFFF_F000, v.n)
        m.write(regs.VM_CONTEXT_PT_BASE_HI, vm.root.gpu_addr >> 32, v.n)
        m.write(regs.VM_CONTEXT_CNTL, regs.VM_CONTEXT_CNTL.ENABLE.mask, v.n)
        try:
            self.flush(v.n)  # the previous owner's entries go
        except KmdError as e:
            # Given to the VM anyway, its jobs would run with the previous owner's entries
            # (reading and writing its memory at its VAs): no VM owns it until a flush of it
            # is acknowledged, and the job waits as for a busy VMID (amdgpu only logs it).
            self.flush_failures += 1
            log.error("VMID %d not given to %r: %s", v.n, vm, e.message)
            if self.stuck_since is None:
                self.stuck_since = self.kmd.dev.now()
            self.stuck_why = e.message
            return None
        v.owner = vm
        vm.vmid = v.n
        self.grabs += 1
        self.waiting.pop(vm, None)
        if self.waiting:
            self._expire(now)  # (the next waiter first: one that expired keeps no one waiting)
        if v.n == self.drain or not self.waiting:
            self.drain = None  # (the next VM still waiting picks the next to drain)
        log.debug("VMID %d -> %r", v.n, vm)
        return v.n

    def lift_drain(self, vm: "Vm") -> bool:
        """The job timer found a job of `vm` making no progress while `vm`'s VMID is drained
        and a later job of `vm` was refused by the drain: the job in the ring may wait for
        that one (a gfx job's WAIT_REG_MEM on a flag its own copy job sets: the UMD's
        wait_mem on one queue, a write on another), which the drain held back until the VMID
        went idle, which it never did. Taken for stuck, the innocent job was reset with
        TIMEOUT, its context guilty, a hang towards its file's ban, for nothing but other
        files' jobs keeping the other VMIDs busy (amdgpu's VM keeps its VMID while it owns
        it). The drain is lifted (True) and moves to another busy VMID; the VMID is not
        drained again for the same waiter, so an owner doing this on purpose delays the
        waiter once (a job timeout at most) for each VMID."""
        if self.drain is None or vm is None or vm.vmid != self.drain or not self.held_back \
                or self.drain in self.spared or not self.waiting:
            return False
        self.spared.add(self.drain)
        self.spared_for = next(iter(self.waiting))
        self.drain, self.held_back = None, False
        return True

    def used(self, vmid: int, job: "Job") -> None:
        v = self.ids[vmid - 1]
        # (a VM that keeps its VMID never asks _idle) its finished jobs are dropped once the list
        # has doubled since they last were, not at each job: each run_job walked every job in
        # flight with the VMID, as many as `hw_submission_limit` lets in (raised, a pass of
        # 2,048 jobs spent 0.86 s of the driver's lock in it)
        if len(v.jobs) >= v.prune_at:
            v.jobs = [j for j in v.jobs if not j.finished]
            v.prune_at = max(16, 2 * len(v.jobs))
        v.jobs.append(job)
        self.clock += 1
        v.used_at = self.clock

    def free_unflushed(self) -> None:
        """Free the BOs whose unmap's flush was lost once no job runs with the VMID (its next
        job grabs it anew, which flushes before anything runs with it; a reset ends the jobs
        that ran with it, or resubmits them with a new grab); a BO listed with several VMIDs
        once none of them has a job."""
        busy = {id(bo) for bo, n in self.unflushed if n is not None and not self._idle(self.ids[n - 1])}
        keep = []
        for bo, n in self.unflushed:
            if id(bo) in busy:
                keep.append((bo, n))
            else:
                self.kmd.bo.close(bo)  # (once, however many entries it had: a freed BO stays so)
        self.unflushed = keep

    def release(self, vm: Vm) -> None:
        if vm.vmid is not None:
            self.ids[vm.vmid - 1].owner = None
            vm.vmid = None

    def release_idle(self, vm: Vm) -> None:
        """Give `vm`'s VMID back if no job runs with it (a closed file's VM, its last job done)."""
        if vm.vmid is not None and self._idle(self.ids[vm.vmid - 1]):
            self.release(vm)

    def flush(self, vmid: int, page: int | None = None) -> None:
        """Invalidate the TLB entries of `vmid` (one page or all) and wait for the MMU's
        acknowledge, as amdgpu's gmc_v9_0_flush_gpu_tlb."""
        m = self.kmd.mmio
        self.flushes += 1
        if page is not None:
            m.write64(regs.VM_INVALIDATE_ADDR_LO, regs.VM_INVALIDATE_ADDR_HI, page >> vm_spec.PAGE_SHIFT)
        m.write_fields(regs.VM_INVALIDATE_REQ, PER_VMID=1 << vmid, ALL_ADDR=int(page is None))
        deadline = self.kmd.dev.now() + self.kmd.params.hw_timeout
        while not m.read(regs.VM_INVALIDATE_ACK) >> vmid & 1:
            if self.kmd.dev.now() >= deadline:
                raise KmdError(errno.EIO, f"TLB flush of VMID {vmid}: no acknowledge after "
                               f"{self.kmd.params.hw_timeout} cycles")
            self.kmd.dev.delay(4)
        self.stuck_since = None

    def flush_vm(self, vm: Vm, va: int | None = None, size: int = 0, bos=()) -> None:
        """After `vm`'s tables lost or changed entries: invalidate its VMID, if it holds one
        (else the next grab invalidates). `bos`: the BOs whose entries went; when the flush is
        lost, the VMID's TLB may still hold their pages for the jobs running with it, so each
        notes the VMID (Bo.stale_vmids) and is freed, once closed, only when none of them
        runs (Kmd.bo_release). A GEM_VA UNMAP or CLEAR whose flush was lost, followed by a
        GEM_CLOSE, freed the BO at once: a job running with the VMID wrote the page through
        the stale entry after it went to another client."""
        if vm.vmid is not None:
            try:
                self.flush(vm.vmid, va if va is not None and size == PAGE else None)
            except KmdError:
                for bo in bos:
                    bo.stale_vmids.add(vm.vmid)
                # its TLB may still hold what went: the VM's next job grabs (and flushes) anew
                self.ids[vm.vmid - 1].owner, vm.vmid = None, None
                self.flush_failures += 1
                raise
