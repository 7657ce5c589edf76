"""Jobs and their dependencies (drm_sched_job and its dependency fences).

A Job is one CS: its IBs, its user fence, its hardware fence once it runs. It waits for the
jobs its dependency chunks name (of any ring: `set_deps`); each of those tells it when it
ends (`ended`, drm_sched's fence callbacks), a bounded share a pass (Kmd.wake_dependents).
A FailedDep stands for a dependency that had already failed; `dependency_failed` is the
ECANCELED of a job whose dependency failed.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..uapi import KmdError
from .fence import Fence
from .ring import Ring

if TYPE_CHECKING:
    from ..core.ctx import Context
    from .scheduler import Entity


def ring_dw(ring: "Ring | type[Ring]", n_ibs: int, user_fence: bool) -> int:
    """Ring dwords a job of `n_ibs` IB chunks writes (run_job: its IB packets, its fence and
    the user fence's), before the commit's padding."""
    return n_ibs * ring.IB_DW + ring.FENCE_DW * (2 if user_fence else 1)


@dataclass(eq=False)
class Job:
    ctx: "Context"
    seq: int  # the context's seqno: the CS result and the user fence value
    ibs: list[tuple[int, int]]  # (gpu_addr, size_dw)
    user_fence: int | None  # GPU address of the user fence dword
    # what it holds besides its VM's BOs of its generation (`gen`: Vm.job_started): its user
    # fence's BO, BOs unmapped while it was in a ring (Kmd.hold_for_jobs_in_rings)
    bos: set = field(default_factory=set)
    gen: int = -1
    hw_fence: Fence | None = None
    finished: bool = False
    error: KmdError | None = None
    ring_start: int = 0  # ring wptr range of its packets (free running)
    ring_end: int = 0
    runs: int = 0  # 1 + resubmissions
    checked: Any = None  # the CheckedJob whose shadow copies `ibs` name (None: cs_check off)
    vm: Any = None  # the file's Vm (kmd_model/mm/vm.py): its IBs run with the VMID it holds
    vmid: int = 0
    ring: Ring | None = None  # the ring it runs on (its scheduler's)
    deps: list = field(default_factory=list)  # jobs (of any ring) that must finish first (set_deps)
    entity: Entity | None = None  # its context's entity on its ring (push_job)
    sched: Any = None  # the scheduler of its ring (push_job)
    # its dependencies not finished yet, and those that failed: counted as each ends
    # (dependency_ended), so a scheduler pass looks at a job once, not at each of its deps
    deps_left: int = 0
    deps_failed: int = 0
    dependents: list = field(default_factory=list)  # jobs waiting for this one (their set_deps)
    # BOs unmapped while it was in a ring, held with the VM's other jobs there at the time, each
    # such unmap's BOs once for all of them (RingHold: Kmd.hold_for_jobs_in_rings)
    ring_holds: list = field(default_factory=list)

    def set_deps(self, deps: list) -> None:
        """The jobs (or FailedDeps) it waits for: each unfinished one tells it when it ends
        (drm_sched_entity_add_dependency_cb's part). A job named twice is waited for once
        (drm_sched_job_add_dependency's dedup): 1,024 chunks naming it counted it 1,024 times."""
        self.deps = deps = list(dict.fromkeys(deps))  # (Jobs by identity, FailedDeps by value)
        for d in deps:
            if not d.finished:
                d.dependents.append(self)
                self.deps_left += 1
            elif d.error is not None:
                self.deps_failed += 1

    def ended(self) -> None:
        """It finished (well or with `error`): its dependents count it, and a dependent at the
        head of an entity parked for its dependencies goes back to its run queue. As many as
        the pass has left of its share (Kmd.wakes_left) now, the others in the passes after
        it (Kmd.wake_dependents): every one in one go, a job 131,000 jobs of a file's
        contexts depend on (sched_jobs x 4,095 a ring) held the driver's lock for them all as
        it ended (32,000: 27 to 57 ms)."""
        deps, self.dependents = self.dependents, []
        kmd = self.sched.kmd if self.sched is not None else None
        if kmd is None or len(deps) <= kmd.wakes_left:
            self.tell(deps, 0, len(deps))
            if kmd is not None:
                kmd.wakes_left -= len(deps)
            return
        n = max(0, kmd.wakes_left)
        self.tell(deps, 0, n)
        kmd.wakes_left -= n
        kmd.waking.append((self, deps, n))

    def tell(self, deps: list, lo: int, hi: int) -> None:
        """Its dependents deps[lo:hi] count its end (ended)."""
        failed = self.error is not None
        for i in range(lo, hi):
            j = deps[i]
            j.deps_left -= 1
            if failed:
                j.deps_failed += 1
            e = j.entity
            if e is not None and e.parked and e.queue and e.queue[0] is j and (not j.deps_left or j.deps_failed):
                j.sched._unpark(e)

    def holds(self, bo) -> bool:
        """Whether it keeps `bo` allocated until it ends."""
        return (bo in self.bos or any(bo in h.bos for h in self.ring_holds)
                or (self.vm is not None and self.gen >= 0 and self.vm.holds_at(bo, self.gen)))


    def client_addr(self, addr: int) -> int:
        """An address in the job's shadow copies as the client knows it (error reports)."""
        return self.checked.client_addr(addr) if self.checked is not None else addr

    @property
    def ndw(self) -> int:
        """Ring dwords run_job writes (before padding)."""
        return ring_dw(self.ring or Ring, len(self.ibs), self.user_fence is not None)

    def __repr__(self) -> str:
        return f"Job(ctx {self.ctx.name} seq {self.seq:#x})"


def dependency_failed(job: Job, ring: str, bad: "Job | FailedDep") -> KmdError:
    """The ECANCELED of `job`, cancelled on `ring` because its dependency `bad` failed: it names
    `bad` and the first error of the chain (`bad`'s own, or, when `bad` was itself cancelled
    for a dependency, the one that began it), kept as the error's `cause`. It held `bad`'s
    whole message, so each job of a chain held every message before it: 1,000 CSs in a
    chain left 36 MB of messages in one context's record of failed jobs, the last 72,578
    characters long, and a chain may go on for ever."""
    cause = getattr(bad.error, "cause", None) or bad.error.message
    err = KmdError(errno.ECANCELED, f"{job!r} on {ring}: its dependency {bad!r} failed: {cause}", bad.error.info)
    err.cause = cause
    return err


@dataclass(frozen=True)
class FailedDep:
    """A CS dependency on a job that had already failed (its error kept in Context.failed):
    finished with that error, so the scheduler cancels the dependent job as for a Job."""

    ctx_name: str  # (the context's name in messages, "2#2" after its ids wrapped: as Job's repr)
    seq: int
    error: KmdError
    finished: bool = True

    def __repr__(self) -> str:
        return f"Job(ctx {self.ctx_name} seq {self.seq:#x})"


class RingHold:
    """BOs one unmap took from a VM while `jobs` of its jobs were in a ring (Kmd.hold_for_jobs_in_rings):
    each held once (Bo.busy_jobs) until the last of those jobs ends (Kmd.job_retired)."""

    __slots__ = ("bos", "jobs")

    def __init__(self, bos: frozenset, jobs: int) -> None:
        self.bos, self.jobs = bos, jobs
