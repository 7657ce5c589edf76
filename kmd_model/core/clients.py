"""What clients own, on the driver's side (Kmd's part, mixed into core/kmd.py's Kmd): open
files and their contexts (drm_file, amdgpu_ctx), the kernel's range in every file's VM (the
shadow pool, where the checked copies run; what CSs hold of them: core/copies.py), and the
lifetime of BOs: a closed BO's CPU mappings are revoked at once, its GPU mappings and memory
go once no job uses it (`job_retired` lets go of what a finished job held).
"""

from __future__ import annotations

import errno
import os

import numpy as np

from spec import vm as vm_spec

from ..cs.checked import CheckedJob
from ..cs.shadow import ShadowWait
from ..log import get_logger
from ..mm.mapping import CpuMapping, map_bo
from ..mm.vm import HUGE, Vm
from ..sched.job import RingHold
from ..sched.scheduler import Job
from ..uapi import KmdError
from .ctx import Context
from .file import File
from .lock import kernel_stack

log = get_logger("kmd")


class _Holds:
    """Work a closing file's release does (Kmd._release_file), counted in holds of the
    driver's lock of `per` units each: once a hold's units are spent, the lock goes to the
    threads waiting for it (core/lock.py), and the release goes on in the next hold."""

    __slots__ = ("lock", "per", "used")

    def __init__(self, lock, per: int) -> None:
        self.lock, self.per, self.used = lock, per, 0

    def room(self) -> int:
        return self.per - self.used

    def spend(self, n: int) -> None:
        self.used += n
        if self.used >= self.per:
            self.next()

    def next(self) -> None:
        self.used = 0
        self.lock.yield_to_waiters()


class ClientsMixin:
    """Kmd's methods for files, contexts, the kernel's VA range and BO lifetimes."""

    # ------------------------------------------------------------------ files and contexts

    def open(self, cap_sys_nice: bool | None = None, cap_perfmon: bool | None = None) -> File:
        """A new file; `cap_sys_nice`: may it ask for above-NORMAL priorities, `cap_perfmon`:
        may it read the device-wide counters (None: the driver's KmdParams.cap_sys_nice,
        KmdParams.cap_perfmon). Refused (EDEADLK) from client code run inside an
        ioctl or a close of this thread (a signal handler, a garbage-collector callback:
        core/signals.py), as an ioctl from there is: the driver is halfway through its change
        (a gc callback inside GEM_CREATE's allocation opened a file whose page directory
        came from the hole being split, which then went back on the free list, and the next
        client BO held that page directory). Signals are held during it, as during an ioctl
        (core/signals.py): a handler run in the middle of it had its ioctl refused, and its
        KeyboardInterrupt left the page directory's page taken by the allocator and recorded
        by no BO, for good."""
        if self.lock.owned():
            raise KmdError(errno.EDEADLK, "open: made from inside an ioctl of this thread (a signal handler or a "
                                          "garbage-collector callback): the kernel runs no client code during an ioctl")
        from .signals import hold
        with kernel_stack(), hold(), self.lock:  # (however deep the client called from: core/lock.py)
            return self._open(cap_sys_nice, cap_perfmon)

    def _open(self, cap_sys_nice: bool | None = None, cap_perfmon: bool | None = None) -> File:
        f = File(self, self.next_fd)
        f.cap_sys_nice = self.params.cap_sys_nice if cap_sys_nice is None else cap_sys_nice
        f.cap_perfmon = self.params.cap_perfmon if cap_perfmon is None else cap_perfmon
        f.vm = Vm(self, f, self.vm_levels)
        self.files[f.fd] = f
        self.next_fd += 1
        return f

    def ctx_alloc(self, file: File, priority: int) -> Context:
        # ids are the file's own, as amdgpu's (an idr per file): a client's ids say nothing
        # of other clients, and another file's id names nothing here. Unlike idr_alloc, a
        # freed id is not handed out again until the ids wrap (idr_alloc_cyclic: file.next_id):
        # a stale id is EINVAL, not a new context
        ctx_id, name = file.new_ctx_id()
        ctx = Context(ctx_id, file, self.params.initial_seq, priority)
        ctx.name = name  # (what messages call it: "3", or "3#2" once the ids have wrapped)
        self.contexts[file.fd, ctx.id] = ctx
        file.contexts[ctx.id] = ctx
        return ctx

    def ctx_free(self, ctx: Context) -> None:
        """Queued and running jobs still complete (their BOs stay alive until then)."""
        ctx.file.contexts.pop(ctx.id, None)
        self.contexts.pop((ctx.file.fd, ctx.id), None)
        ctx.forget_records()
        for s in self.scheds:
            s.remove_context(ctx)

    def flush_file(self, file: File) -> None:
        """amdgpu_flush, run by every close(2) of the fd: wait until none of the file's jobs
        is queued any more, each in a ring or run (amdgpu_ctx_mgr_entity_flush, CTX FREE's
        wait for every context: ioctl/ctx.py `_flushed`). A close returned at once, so a
        client opening a file, queueing jobs on it and closing it, over and over, queued jobs
        without bound behind a job holding a ring (96,000 from 3,000 files, one file open).
        The file is closed already (its ioctls EBADF: nothing adds to its queues); other
        clients' ioctls run meanwhile (Kmd.wait_unlocked), and the job timer ends a job
        that never finishes. A signal ends the wait, as a fatal one ends amdgpu's killable
        wait: the release then goes ahead, the queued jobs left to run. A close from client
        code run inside an ioctl (core/signals.py) waits too, once the ioctl is done
        (release_deferred)."""
        def flushed() -> bool:
            return all(j.runs for ctx in file.contexts.values() for j in ctx.jobs.values())

        self.service()
        while not flushed():
            try:
                self.wait_unlocked(flushed, self.params.job_timeout)
            except KmdError as e:
                if e.errno == errno.EINTR:
                    return
                raise

    def release_deferred(self) -> None:
        """Release the files closed from inside the ioctl or close now ending (File.close),
        once the outermost one ends. A release's error has nobody to go to (the close
        returned): it is logged, as the kernel's fput drops it."""
        if self.lock.depth != 1:
            return
        while self.deferred_release:
            file = self.deferred_release.pop(0)
            try:
                try:
                    self.flush_file(file)  # (as a close's own: else a close from a gc callback skipped it)
                finally:
                    self.file_closed(file)
            except KmdError as e:
                log.warning("fd %d: its release after the ioctl it was closed in failed: %s", file.fd, e)

    def file_closed(self, file: File) -> None:
        try:
            self.service()  # retire what finished, so idle BOs are freed now
        finally:  # (a recovery run in there that fails is raised, after the file is released)
            self._release_file(file)

    def _release_file(self, file: File) -> None:
        holds = _Holds(self.lock, self.CLOSE_WORK_PER_HOLD)  # (a file may hold 4,095 contexts)
        for ctx in list(file.contexts.values()):
            self.ctx_free(ctx)
            holds.spend(1)
        leaked = list(file.handles.values())
        file.vm.drop_view()
        if leaked:
            log.debug("fd %d closed with %d BO(s) open: %s", file.fd, len(leaked), leaked)
        # every BO is closed, and the VM destroyed, whatever one of them raises (a lost TLB
        # flush): raised out of the loop, it left the BOs after it and the page tables
        # allocated for good. The first error is raised at the end, as close(2) reports EIO.
        error = self._close_bos(file.vm, leaked, "its file was closed", holds)
        file.handles.clear()
        file.vm.destroy(holds.spend)
        self.files.pop(file.fd, None)
        if error is not None:
            raise error

    def detach(self, why: str = "its driver was replaced (the device was bound again)") -> None:
        """The device is bound again (bind()), or another device is: this driver is gone
        without touching the hardware, which a new driver resets. Its files answer EBADF from
        now on and its BOs' CPU mappings are revoked, saying `why` (their memory is the new
        driver's to hand out)."""
        for f in list(self.files.values()):
            for bo in f.handles.values():
                for m in bo.mappings:  # (GEM_CREATE names every BO a handle holds)
                    m.revoke(f"BO {bo.name}: {why}")
                bo.mappings.clear()
            f.closed = True
        self.files.clear()

    # ------------------------------------------------------------------ the kernel's range in every VM

    def map_kernel_ranges(self, vm: Vm) -> None:
        """What the kernel puts in every VM: with the CS checker, the shadow pool at the top
        of the address space, executable only (the CP fetches the checked copies from it)."""
        if not self.kernel_va_size:
            return
        bo = self.shadow.bo
        if bo.gpu_addr % HUGE == 0 and bo.size % HUGE == 0:
            for off in range(0, bo.size, HUGE):
                vm.set_huge(self.kernel_va + off, bo.gpu_addr + off, vm_spec.EXECUTABLE)
        else:
            vm.set_ptes(self.kernel_va, bo.size, bo.gpu_addr, vm_spec.EXECUTABLE)

    def shadow_va(self, addr: int) -> int:
        """Where a shadow-pool address is in every VM."""
        return self.kernel_va + addr - self.shadow.bo.gpu_addr

    def job_translate(self, job: Job):
        """va, nbytes -> where a job's data address is in memory (its VM's mappings), None
        when it is nowhere: for the KMD's own reads of what a job's packets read (the timeout
        diagnosis's polls). Not the shadow pool's kernel range: it is mapped executable only,
        the checked copies the CP fetches (job_read reads them), which no packet reads as data
        (the checker refuses a poll there, and an SDMA job's faults). Taken for the job's
        memory, it gave a client any dword of the pool, other clients' IB copies (their
        WRITE_DATAs' data): an SDMA job polling one there behind a poll that held once its
        engine slept out its interval timed out "stuck in POLL_REGMEM ... = <the dword>"
        (tests/kmd_sched/reset/test_kmd_timeouts.py)."""
        vm = job.vm
        return vm.translate  # (every job has its file's VM: CS makes the only jobs)

    def job_translate_many(self, job: Job):
        """job_translate for an array of addresses (int64), each of one dword: where each is in
        memory, -1 where it is nowhere (the timeout diagnosis's polls, all at once)."""
        vm = job.vm

        def translate_many(va: np.ndarray) -> np.ndarray:
            pa = np.full(len(va), -1, dtype=np.int64)
            starts, ends, _, delta, _ = vm.lookup_arrays()
            if len(starts):
                i = np.searchsorted(starts, va, side="right") - 1
                j = np.maximum(i, 0)
                inside = (i >= 0) & (va + 4 <= ends[j])
                pa[inside] = (va + delta[j])[inside]
            return pa
        return translate_many

    def job_ib_translate(self, job: Job):
        """va, nbytes -> where a job's IB words are in memory, as the CP fetches them: the
        shadow pool's kernel range (a checked job's copies) or its VM's mappings; None when
        nowhere. For the KMD's own reads of a job's IBs (job_read, the crash report's
        listing), never for what a packet reads as data (job_translate)."""
        vm = job.vm
        kernel_va, kernel_end = self.kernel_va, self.kernel_va + (self.shadow.size if self.kernel_va_size else 0)

        def translate(va: int, n: int) -> int | None:
            if kernel_va <= va and va + n <= kernel_end:
                return self.shadow.bo.gpu_addr + va - kernel_va
            return vm.translate(va, n)
        return translate

    def job_read(self, job: Job):
        """va, ndwords -> the dwords of a job's IB there (a copy), None where it has nothing
        mapped: from the shadow pool's kernel range (a checked job's copies), or its VM's
        mappings: an IB may run across adjacent mappings of its VM, each read where its own
        memory is (never the memory after the first one, which may be anyone's)."""
        vm = job.vm
        mem32 = self.mem32
        ib_translate = self.job_ib_translate(job)

        def read(va: int, n: int) -> np.ndarray | None:
            pa = ib_translate(va, 4 * n)
            if pa is not None:
                runs = [(pa, 4 * n)]
            elif vm is not None and va >= 0:
                runs = vm.pieces(va, 4 * n)
                if runs is None:
                    return None
            else:
                return None
            if any(p // 4 + b // 4 > len(mem32) for p, b in runs):
                return None
            return np.concatenate([mem32[p // 4: p // 4 + b // 4] for p, b in runs])
        return read

    # ------------------------------------------------------------------ BO lifetimes

    def bo_close(self, bo, by: str = "GEM_CLOSE") -> None:
        """The BO's last handle is gone (`by`: what closed it, for the revoked mappings'
        message): its CPU mappings are revoked now; its GPU mappings and its memory go once
        no job uses it (jobs submitted before still find it mapped; so do jobs of the file
        submitted after that no checker reads: amdgpu unmaps it at once in amdgpu_vm_bo_del
        and orders the VM's later jobs behind the page-table clear, docs/architecture.md
        "Ordering")."""
        if self._closed(bo, by):
            self.bo_release(bo)

    def _closed(self, bo, by: str) -> bool:
        """bo_close's first half: the CPU mappings revoked, the BO closed; True when no job
        holds it (the caller releases it), else it waits for its last holder (job_retired)."""
        for m in bo.mappings:
            # the BO by its file and handle, as the client knows it: where the kernel put it
            # is not the client's to learn (the message named its physical range); GEM_CREATE
            # names every BO a handle holds
            m.revoke(f"BO {bo.name} ({bo.size:#x} bytes) was closed ({by}): "
                     "its CPU mapping is gone, as after munmap")
        bo.mappings.clear()
        bo.closed = True
        if bo.owner is not None and not bo.owner.vm.closed:
            bo.owner.vm.bo_closed(bo)
        if not bo.busy:
            return True
        if bo.held_vm is not None:
            bo.held_vm.wait_release(bo)  # (freed as its last holder ends: job_retired)
        return False

    # work a closing file's release does in one hold of the driver's lock (_close_bos): BOs,
    # their mappings, and the jobs in rings each BO is held for
    CLOSE_WORK_PER_HOLD = 256

    def _close_bos(self, vm: Vm, bos: list, by: str, holds: "_Holds | None" = None) -> KmdError | None:
        """bo_close for each of `bos`, all of one closing file's (`vm`: its VM), with one TLB
        invalidation for the idle ones' mappings, not one each: a close of a file with 2,000
        BOs mapped made 2,001 flushes in one hold of the driver's lock (305 ms; 8,000 BOs, the
        model's GTT in pages, over a second), repeatable at the cost of opening a file and
        mapping them. The first error (a lost flush) is returned, after every BO is closed.

        The work goes in holds of CLOSE_WORK_PER_HOLD (a BO, each of its mappings, its hold
        for the VM's jobs in the rings and its free, one each; each job a hold is given to, one), the lock handed to the threads waiting for it in between
        (core/lock.py): the one invalidation made, it was still some 28 Python calls a BO in
        one hold, 8,000 BOs 0.3 s of every other client's ioctls. Between the holds the file
        is closed (its ioctls EBADF), its contexts gone; the BOs unmapped and not yet
        invalidated stay allocated (nothing frees them until the invalidation: they are
        still the file's own memory for its jobs' stale TLB entries), and a flush lost
        meanwhile (another BO's release) marks them for the VMIDs the VM held (freed once
        none runs: VmidManager.free_unflushed)."""
        holds = holds or _Holds(self.lock, self.CLOSE_WORK_PER_HOLD)
        spend = holds.spend
        idle, gone, vmids = [], [], set()
        failures = self.vmids.flush_failures
        for bo in bos:
            n = 1 + (len(vm.maps_of(bo)) if not vm.closed else 0)  # (its mappings: at most)
            if holds.used and holds.used + n > holds.per:  # (a BO's mappings go in one hold)
                holds.next()
            if self._closed(bo, by):
                idle.append(bo)
                if not vm.closed:
                    if vm.vmid is not None:
                        vmids.add(vm.vmid)
                    if vm.bo_removed(bo):
                        gone.append(bo)
            spend(n)
        error = None
        if gone:
            if self.vmids.flush_failures != failures:  # (lost between two holds: see above)
                vmids.discard(vm.vmid)
                for bo in gone:
                    bo.stale_vmids.update(vmids)
            try:
                self.vmids.flush_vm(vm, bos=gone)
            except KmdError as e:
                error = e
        held = set(gone)
        i = 0
        while i < len(idle):
            # the VM's jobs in the rings now (one that ended between two holds holds nothing)
            jobs = len([j for s in self.scheds for j in s.pending if j.vm is vm and not j.finished])
            room = (holds.room() - jobs) // 2  # (a hold for each BO, and its free; one for each job)
            if room < 1 and holds.used:
                holds.next()
                continue
            part = idle[i:i + max(1, room)]
            i += len(part)
            self.hold_for_jobs_in_rings(vm, [bo for bo in part if bo in held])
            for bo in part:
                if not bo.freed:  # (a job's end between two holds may have freed it)
                    self._free_released(bo)
            spend(2 * len(part) + jobs)
        return error

    def hold_for_jobs_in_rings(self, vm, bos) -> None:
        """`bos` lost their mappings in `vm` (GEM_VA UNMAP, CLEAR, REPLACE, or a closed BO's
        release), the TLB invalidated: every unfinished job of the VM in a ring holds them
        until it ends. The invalidation drops the TLB's entries, not the writes already
        translated: a burst whose address was translated before VM_INVALIDATE_ACK may land
        after it (the RTL's MMU queues the W beats of up to 8 translated write bursts:
        docs/hardware.md, "Invalidation"), and a job's fence is written only after its
        writes. A job holds the BOs mapped at its CS; one mapped after it, or closed while
        an earlier job held it, was freed once unmapped while a job of the VM (an SDMA job,
        which no checker reads) could have a fill under way into it, and its pages went to
        the next GEM_CREATE, another client's (tests/security/memory/test_security_mappings.py
        test_memory_a_job_in_a_ring_may_write_is_not_handed_out_until_the_job_ends). Jobs only
        queued start after the invalidation: they hold nothing of it."""
        jobs = [j for s in self.scheds for j in s.pending if j.vm is vm and not j.finished]
        if not jobs:
            return
        # held once for all of them, until the last ends (RingHold): each BO added to each job
        # (a holds() look and a hold a BO and job) cost a CLEAR of 3,000 BOs' mappings with 60
        # jobs of the VM in the rings 0.62 s of the lock, some 5 s at the rings' and heaps' most
        held = frozenset([bo for bo in bos if not bo.freed and bo.owner is not None])
        if not held:
            return
        hold = RingHold(held, len(jobs))
        for bo in held:
            bo.busy_jobs += 1
        for job in jobs:
            job.ring_holds.append(hold)

    def bo_release(self, bo, raising: bool = True) -> None:
        """A closed BO is idle: out of its file's VM (the TLB invalidated), then freed. When
        the MMU does not acknowledge the invalidation, the VMID's TLB may still hold the BO's
        pages for a job of the VM that runs with it (one submitted after the GEM_CLOSE, which
        does not hold the BO, can reach it through the entries): it is freed once no job
        runs with that VMID (VmidManager.free_unflushed; the VMID's next grab flushes
        first). It raised out of the flush and the BO stayed allocated for good. `raising`:
        the flush's EIO is the caller's error (GEM_CLOSE, close); not out of a job's
        retirement, inside fence processing (the fences after it stayed unsignalled)."""
        vm = bo.owner.vm if bo.owner is not None else None
        error = None
        if vm is not None and not vm.closed and vm.bo_removed(bo):
            try:
                self.vmids.flush_vm(vm, bos=(bo,))
            except KmdError as e:
                error = e
            self.hold_for_jobs_in_rings(vm, (bo,))
        self._free_released(bo)
        if error is not None:
            if raising:
                raise error
            log.error("BO %s: %s: freed once no job runs with VMID %s", bo.name or "?", error.message,
                      ", ".join(map(str, sorted(bo.stale_vmids))))

    def _free_released(self, bo) -> None:
        """A closed BO out of its VM, the TLB invalidated: freed, unless a job of its VM in a
        ring may still write it (freed when the last ends, job_retired) or the invalidation
        was lost (freed once no job runs with the VMIDs: VmidManager.free_unflushed)."""
        if bo.busy:
            pass
        elif bo.stale_vmids:  # (this flush's, or a GEM_VA's that unmapped it before: flush_vm)
            self.vmids.unflushed.extend((bo, n) for n in sorted(bo.stale_vmids))
            self.vmids.free_unflushed()
        else:
            self.bo.close(bo)

    def map_bo(self, bo, who: str = "GEM_MMAP") -> CpuMapping:
        """A CPU mapping of a BO for its owner (GEM_MMAP), revoked at GEM_CLOSE: a new array each
        time, over the one OS mapping the BO has. One per GEM_MMAP let a client mapping one BO
        in a loop use up the process's descriptors (EMFILE after 19,993: Python's mmap kept a
        duplicate of the memory file's descriptor each), and then every client's GEM_MMAP,
        and the simulator's own files, failed with a raw OSError. The OS mapping is libc's
        now (mm/mapping.py), no descriptor each: what bounds a client's mapped BOs is the
        OS's count of mappings (vm.max_map_count), refused as the call's one-line error."""
        if not bo.mappings:
            try:
                bo.mappings.append(map_bo(self.dev.mem, self._mem_file, bo.gpu_addr, bo.size))
            except OSError as e:  # (the process's limits: descriptors, mappings)
                raise KmdError(e.errno or errno.ENOMEM, f"{who}: BO {bo.name}: the OS refused a CPU "
                               f"mapping ({os.strerror(e.errno) if e.errno else e})") from None
        return bo.mappings[0].view()  # (shares the mapping's revocation)

    def live_bos(self, file: File | None = None) -> list:
        """User BOs still allocated (all, or one File's): for leak reports."""
        return [b for b in self.bo.live if b.owner is not None and (file is None or b.owner is file)]

    def job_retired(self, job: Job) -> None:
        if job.error is not None:
            self.stats["jobs_cancelled"] += 1
        else:
            self.stats["jobs_retired"] += 1
        for bo in job.bos:
            bo.busy_jobs -= 1
            if bo.closed and not bo.busy:
                self.bo_release(bo, raising=False)
        holds, job.ring_holds = job.ring_holds, []
        for hold in holds:
            hold.jobs -= 1
            if not hold.jobs:  # (the last of the jobs in a ring at its unmap)
                for bo in hold.bos:
                    bo.busy_jobs -= 1
                    if bo.closed and not bo.busy and not bo.freed:
                        self.bo_release(bo, raising=False)
        gen, job.gen = job.gen, -1  # (an ended job holds nothing: Job.holds)
        if job.vm is not None and gen >= 0:
            for bo in job.vm.job_ended(gen):  # (its VM's BOs of its generation)
                if bo.closed and not bo.freed and not bo.busy:
                    self.bo_release(bo, raising=False)
        if self.vmids.unflushed:
            self.vmids.free_unflushed()
        if job.checked is not None:  # the CP is done with the copies
            # cleared before the range goes back: the pool is executable in every VM, and a
            # job run unchecked (cs_check switched off after bring-up: examples/gpu_error.py)
            # may call an IB there. A retired client's copies stayed in it, and another
            # client's INDIRECT_BUFFER into the pool ran them under its own VMID: their
            # WRITE_DATAs' data landed in its own BO mapped at the victim's addresses
            at, n = job.checked.shadow_mem, job.checked.shadow_bytes
            self.dev.mem[at:at + n] = 0
            self.shadow.free(at, n)
            job.checked = None
        vm = job.vm
        if vm is not None and vm.closed and vm.vmid is not None:
            # a closed file's job that ran after its close (queued, or resubmitted by a reset)
            # grabbed a VMID for the dead VM: given back once none of its jobs runs with it, or
            # the VMID stayed owned by the VM (and its freed tables' address) until stolen
            self.vmids.release_idle(vm)
