"""The shadow pool: kernel memory for the checked copies of jobs' IBs (kmd_model/cs/checker.py).

One kernel BO in GTT, carved up per job like amdgpu's suballocator (amdgpu_sa) carves its
IB pool: a job's copies take one range, which goes back to the pool when the job's fence
signals (or the job is cancelled by a reset). Nothing of a client's can name it: the
CPU cannot map kernel BOs, and the checker refuses every address outside the client's
own BOs, so the CP's commands are only ever what the KMD checked.

When the pool is short of room the CS ioctl waits for jobs to retire, as it would for
ring space, for as long as the pool drains (Kmd.shadow_alloc: ENOMEM once nothing in it was
freed for 2 * job_timeout); a job whose copies are larger than the whole pool is refused
(E2BIG).
"""

from __future__ import annotations

from ..mm.bo import Bo, Heap


class ShadowPool:
    def __init__(self, bo: Bo):
        self.bo = bo
        self.heap = Heap("shadow", bo.gpu_addr, bo.size)
        self.high_water = 0  # the most ever in use

    @property
    def size(self) -> int:
        return self.bo.size

    @property
    def used(self) -> int:
        return self.heap.used

    def fits(self, nbytes: int) -> bool:
        return self.heap.largest_free >= nbytes

    def alloc(self, nbytes: int) -> int | None:
        """A range of `nbytes` (a multiple of 32), or None when no hole is large enough."""
        addr = self.heap.alloc(nbytes, 32)
        if addr is None:
            return None
        self.high_water = max(self.high_water, self.heap.used)
        return addr

    def free(self, addr: int, nbytes: int) -> None:
        self.heap.free(addr, nbytes)
