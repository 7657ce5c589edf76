"""The shadow pool: kernel memory for the checked copies of jobs' IBs (kmd_model/cs/checker.py).

One kernel BO in GTT, carved up per job like amdgpu's suballocator (amdgpu_sa) carves its
IB pool: a job's copies take one range, which goes back to the pool when the job's fence
signals (or the job is cancelled by a reset). Nothing of a client's can name it: the
CPU cannot map kernel BOs, and the checker refuses every address outside the client's
own BOs, so the CP's commands are only ever what the KMD checked.

When the pool is short of room the CS ioctl waits for jobs to retire, as it would for
ring space, for as long as the pool drains (Kmd.shadow_alloc: ENOMEM once nothing in it was
freed for 2 * job_timeout); a job whose copies are larger than the whole pool is refused
(E2BIG). The CSs that wait are served first come, first served (`waiters`): they wait
without the driver's lock, and a CS that came later must not take the room each frees.
"""

from __future__ import annotations

from collections import deque

from ..mm.bo import Bo, Heap


class ShadowPool:
    def __init__(self, bo: Bo):
        self.bo = bo
        self.heap = Heap("shadow", bo.gpu_addr, bo.size)
        self.high_water = 0  # the most ever in use
        self.frees = 0  # ranges given back, ever (a waiter's sign that the pool drains)
        self.waiters: deque = deque()  # tickets of the CSs waiting for room, the next served first

    @property
    def size(self) -> int:
        return self.bo.size

    @property
    def used(self) -> int:
        return self.heap.used

    def fits(self, nbytes: int) -> bool:
        return self.heap.largest_free >= nbytes

    def alloc(self, nbytes: int, ticket: object = None) -> int | None:
        """A range of `nbytes` (a multiple of 32), or None when no hole is large enough or a
        CS waits for room ahead of the caller (`ticket`: the caller's place among them)."""
        if self.waiters and self.waiters[0] is not ticket:
            return None
        addr = self.heap.alloc(nbytes, 32)
        if addr is None:
            return None
        self.leave(ticket)
        self.high_water = max(self.high_water, self.heap.used)
        return addr

    def leave(self, ticket: object) -> None:
        """A waiting CS is served, or gives up."""
        if ticket is not None and ticket in self.waiters:
            self.waiters.remove(ticket)

    def free(self, addr: int, nbytes: int) -> None:
        self.heap.free(addr, nbytes)
        self.frees += 1


class ShadowWait:
    """One CS's wait for room, across its restarts: its ticket in the pool's queue (None: not
    queued) and when the window with nothing freed began; and the check it made before a
    restart, good again while the file's mappings are the ones it read (`kept_check`); and
    the bytes of copies its check holds, charged to its file (`held`: Kmd.charge_copies)
    until they go into the pool or the CS ends (`release`)."""

    __slots__ = ("ticket", "since", "_check", "held", "file", "parked", "slot", "wants_slot")

    def __init__(self) -> None:
        self.ticket: object = None
        self.since: int | None = None
        self._check: tuple | None = None  # (context, IB chunks, the mappings' arrays, CheckedJob)
        self.held = 0  # bytes of checked copies charged to `file`, the check in progress or kept
        self.file = None
        self.parked = 0  # bytes of its kept check counted in Kmd.copies_parked (a wait's)
        # its check may hand the driver's lock over, its copies held (Kmd.checks_paused:
        # check_slot); it found none free, and waits for one before it checks again
        self.slot = False
        self.wants_slot = False

    def keep_check(self, ctx, ibs: list, arrays: tuple, checked) -> None:
        """Keep `checked`, made of the IB chunks `ibs` with the file's mappings `arrays`
        (Vm.lookup_arrays()), for the CS's next attempt. It was never placed."""
        self._check = (ctx, list(ibs), arrays, checked)

    def kept_check(self, ctx, ibs: list, arrays: tuple):
        """The CheckedJob kept for the same context and IB chunks, made with the mappings
        `arrays` are (the same tuple: Vm.lookup_arrays() makes a new one at every change);
        else None. What it copied was the client's when it was read, under the lock."""
        k = self._check
        if k is None or k[0] is not ctx or k[1] != ibs or k[2] is not arrays:
            return None
        return k[3]

    def release(self) -> None:
        """The CS's check is dropped (a new check begins, or the CS ends, its copies placed
        in the pool or refused): the kept check is forgotten and its bytes no longer count
        against its file."""
        self._check = None
        if self.held:
            self.file.copies_held -= self.held
            self.held = 0
