"""The checked copies a CS holds on the driver's side (Kmd's part, mixed into core/kmd.py's
Kmd): room for them in the shadow pool (waited for without the lock), and the bounds on what
CSs hold outside it: per file (charge_copies), through waits for every file (park_check), and
the checks that may hand the lock over with their copies held (check_slot).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from ..cs.checked import CheckedJob
from ..uapi import KmdError
from .file import File

if TYPE_CHECKING:
    from ..cs.shadow import ShadowWait


class CopiesMixin:
    """Kmd's methods for the checked copies of CSs."""

    def shadow_too_big(self, job: CheckedJob) -> None:
        """E2BIG for a job whose checked copies take more than the whole shadow pool: no wait
        makes room for it (a CS refuses it before waiting for anything: ioctl/cs.py)."""
        n = job.shadow_bytes
        if n > self.shadow.size:
            raise KmdError(errno.E2BIG, f"CS: the job's checked copies take {n:#x} bytes, more than the "
                           f"whole shadow pool ({self.shadow.size:#x} bytes)")

    def charge_copies(self, file: File, wait: "ShadowWait", n: int) -> None:
        """`n` more bytes of checked copies for a CS of `file` (its `wait`), made before the
        copy: ENOMEM when the copies the file's CSs hold inside the ioctl, not in the shadow
        pool yet (checks in progress, checks kept while their CS waits for its context's slot,
        for room in the pool, or after a pause), would pass the pool's size. One CS never
        does (its copies take at most half the pool: max_job_dw); a check kept by each CS
        waiting held about 8 MiB for a maximum job, one a thread, so a client's threads
        each submitting one 8 MiB BO held the process's memory without bound (64 threads:
        500 MiB). Tells the file of its own CSs alone."""
        held = file.copies_held
        if held + n > self.shadow.size:
            raise KmdError(errno.ENOMEM, "CS: this file's CSs inside the driver would hold more than "
                           f"{self.shadow.size:#x} bytes of checked copies outside the shadow pool (its size): "
                           f"this one {wait.held + n:#x}, the file's others {held - wait.held:#x} (they wait for "
                           "their context's slot or for room in the pool)")
        file.copies_held = held + n
        wait.held += n
        wait.file = file

    # checked copies kept through CSs' waits (their context's slot, room in the pool), every
    # file's, at most this many shadow pools' worth (Kmd.park_check)
    PARKED_POOLS = 2

    def park_check(self, wait: "ShadowWait", ctx, ibs: list, arrays: tuple, checked: CheckedJob) -> None:
        """A CS is about to wait with its check (`wait.held` bytes of copies): kept through
        the wait (ShadowWait.keep_check) while the checks every CS keeps through a wait,
        every file's, take at most PARKED_POOLS shadow pools (`copies_parked`); else dropped,
        its bytes given back (the CS checks again after its wait). Kept whatever they took,
        one a waiting thread, a client's threads on many files (each file's under its bound,
        charge_copies) held copies in proportion to its files, 16 MiB each; dropped always,
        every CS that waits for its slot (a busy queue's, at each CS) made its check twice."""
        n = wait.held
        if self.copies_parked + n <= self.PARKED_POOLS * self.shadow.size:
            wait.keep_check(ctx, ibs, arrays, checked)
            wait.parked = n
            self.copies_parked += n
        else:
            wait.release()

    def unpark(self, wait: "ShadowWait") -> None:
        """The CS that parked its check (park_check) runs again, or ends."""
        self.copies_parked -= wait.parked
        wait.parked = 0

    # checks that may hand the driver's lock to other threads while they hold their copies,
    # every file's (check_slot): each holds at most half the shadow pool (max_job_dw)
    CHECKS_PAUSED = 4

    def check_slot(self, wait: "ShadowWait") -> bool:
        """May the check of `wait`'s CS hand the lock over now, its copies held? Once it has a
        slot (one of CHECKS_PAUSED, every file's), until its check ends (check_slot_release).
        With none free it may not: the CS drops its copies and, holding nothing, waits for a
        slot before it checks again (wait_check_slot). Each file's checks are bounded by its
        own (charge_copies), so a client's threads on many files, each check pausing with
        its copies as the lock went to the others, held copies in proportion to its files:
        16 files' maximum checks at the default pool 128 MiB. The checks that pause are the
        large ones (some 64 Ki dwords of work between two pauses): a small CS never waits."""
        if wait.slot:
            return True
        if self.checks_paused < self.CHECKS_PAUSED and not self.check_waiters:  # (none waits before it)
            self.checks_paused += 1
            wait.slot = True
            return True
        wait.wants_slot = True
        return False

    def check_slot_release(self, wait: "ShadowWait") -> None:
        """The check of `wait`'s CS ended (done, refused, or started again): its slot is free."""
        if wait.slot:
            wait.slot = False
            self.checks_paused -= 1

    def wait_check_slot(self, file: File, wait: "ShadowWait") -> None:
        """A CS whose check found no slot free (check_slot), its copies dropped: until one is
        free, the lock handed over meanwhile (the slots' holders are checks paused for it,
        each ending within its check's work), then taken for the CS's next check. A held
        signal ends the wait (EINTR), as any wait inside an ioctl; the file's close, EBADF."""
        import time

        from .signals import pending
        wait.wants_slot = False
        ticket = object()  # (served in order: a CS that came later, or a check pausing first, waits behind it)
        self.check_waiters.append(ticket)
        try:
            idle = 0  # looks in a row with no thread waiting for the lock
            while (self.checks_paused >= self.CHECKS_PAUSED or self.check_waiters[0] is not ticket) and idle < 1000:
                if pending():
                    raise KmdError(errno.EINTR, "CS: interrupted by a signal while it waited for a turn to check "
                                                "its IBs")
                if self.lock.waiters:
                    idle = 0
                    self.lock.yield_to_waiters()
                else:  # (a holder between its hand-over and its take: counted among the waiters in a moment)
                    idle += 1
                    time.sleep(0.001)
                if file.closed:
                    raise KmdError(errno.EBADF, "CS: the file was closed while the CS waited for a turn to check "
                                                "its IBs")
        finally:
            self.check_waiters.remove(ticket)
        # (past the bound only when no holder came for the lock in a second: none is paused)
        self.checks_paused += 1
        wait.slot = True

    def shadow_alloc(self, job: CheckedJob, wait: "ShadowWait", file: File | None = None,
                     park=None) -> int | None:
        """Room in the shadow pool for a checked job's copies, waiting for older jobs to
        retire when the pool is short (as for ring space, and as amdgpu_sa_bo_new waits for
        its fences). The wait goes on while the pool drains: ENOMEM only once nothing in it
        was freed for 2 * job_timeout. With one window in all, a client holding the CP
        with one job and filling the pool behind it with others had a third client's CS
        refused (its wait ended as the hold was reset, before the jobs behind it retired).

        The wait (the CS's `wait`) lets other ioctls in (wait_unlocked: it held the driver's
        lock, and a client that filled the pool behind a held job stopped every other
        client's ioctls until the hold was reset and the pool drained), in the pool's queue
        of waiters so no later CS takes the room, and returns None once there is room for
        it: the CS then starts again (its check kept while the file's mappings are unchanged:
        ShadowWait.kept_check).

        Its ENOMEM tells the caller (`file`) of its own use of the pool alone: it said how
        much of the pool was free and how many jobs were in flight, every client's, which
        no file without CAP_PERFMON may count (INFO COUNTERS). `park()`, before it waits:
        the CS's check kept through the wait or dropped (park_check)."""
        self.shadow_too_big(job)
        n = job.shadow_bytes
        pool, window = self.shadow, 2 * self.params.job_timeout
        addr = pool.alloc(n, wait.ticket)
        if addr is not None:
            return addr
        job = None  # (not held through the wait: park decides)
        if park is not None:
            park()
        if wait.ticket is None:
            wait.ticket = object()
            pool.waiters.append(wait.ticket)
        ticket = wait.ticket
        if wait.since is None:
            wait.since = self.dev.now()
        while (left := wait.since + window - self.dev.now()) > 0:
            frees = pool.frees

            def served() -> bool:
                return pool.waiters[0] is ticket and pool.fits(n)
            self.wait_unlocked(lambda: served() or pool.frees != frees, left)
            if served():
                return None  # (the CS starts again, and allocates first)
            if pool.frees == frees:
                break
            wait.since = self.dev.now()  # it drains: the window starts again
        pool.leave(ticket)
        wait.ticket = None
        mine = [j.checked.shadow_bytes for c in (file.contexts.values() if file is not None else ())
                for j in c.jobs.values() if j.checked is not None]
        raise KmdError(errno.ENOMEM, f"CS: no room for the job's {n:#x} bytes of checked copies in the shadow "
                       f"pool ({pool.size:#x} bytes; this file's {len(mine)} job(s) in flight hold {sum(mine):#x} "
                       "of them, other clients' use is not shown)")
