"""Buffer objects and the memory manager under them (amdgpu_bo / TTM's role, much smaller).

Device memory (the backend's `mem`, GPU address == index) is split into two heaps, VRAM
and GTT, each a first-fit allocator over a sorted free list with coalescing (page tables,
long-lived, are taken last fit from the top of VRAM instead). The first
page is never handed out, so GPU address 0 always means "no buffer". Kernel BOs (the
ring, the IH ring, write-back slots) come from the GTT heap like amdgpu's do and have
no owner; user BOs belong to the File that created them.

A BO that jobs still use when its last handle goes away is freed once the GPU is done
with it (`Bo.busy`: its VM's unfinished jobs submitted while it was mapped, `Bo.spans`, and
the holds counted in `Bo.busy_jobs`), as the kernel keeps a BO alive while its reservation
holds unsignalled fences.

Once the device is wedged (a reset that failed: an engine may still be running the jobs the
wedge cancelled, through their VMIDs and page tables), nothing freed goes back to a heap:
it is quarantined (`BoManager.quarantine`), gone for its owner but never handed out again,
so no client (nor kernel BO) is given pages the stuck engine may still read or write.
"""

from __future__ import annotations

import bisect
import errno
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..log import get_logger
from ..uapi import Domain, KmdError

if TYPE_CHECKING:
    from ..core.file import File
    from .vm import Vm

log = get_logger("bo")

PAGE = 4096


@dataclass(eq=False)
class Bo:
    gpu_addr: int
    size: int
    domain: Domain
    flags: int
    owner: "File | None"  # None: a kernel BO
    name: str = ""
    busy_jobs: int = 0  # holds besides its VM's generations (a user fence, an unmap under a job in a ring)
    closed: bool = False  # its handle is gone; freed once idle
    freed: bool = False
    mappings: list = field(default_factory=list)  # its owner's CPU mappings (kmd_model/mm/mapping.py)
    # VMIDs whose TLB may still hold its pages: a GEM_VA that unmapped it lost its flush (the
    # BO is freed once no job runs with them: Kmd.bo_release, VmidManager.free_unflushed)
    stale_vmids: set = field(default_factory=set)
    # the VM whose jobs hold it by generation (its owner's, or a page table's), and the
    # generations [start, end) of that VM during which it was mapped (end None: it still is):
    # a job holds the BOs mapped at its CS by its generation alone (Vm.job_started)
    held_vm: "Vm | None" = None
    spans: list = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.busy_jobs > 0 or (self.held_vm is not None and self.held_vm.holds(self))

    @property
    def end(self) -> int:
        return self.gpu_addr + self.size

    def __repr__(self) -> str:
        who = "kernel" if self.owner is None else f"fd {self.owner.fd}"
        return (f"Bo({self.name or '?'} {self.domain.name} [{self.gpu_addr:#x}, {self.end:#x}) "
                f"{who})")


@dataclass
class Heap:
    """First-fit allocator over [base, base + size) with a sorted, coalesced free list."""

    name: str
    base: int
    size: int
    holes: list[list[int]] = field(default_factory=list)  # [start, end), sorted by start
    used: int = 0

    def __post_init__(self) -> None:
        self.holes = [[self.base, self.base + self.size]] if self.size > 0 else []

    def alloc(self, size: int, align: int, top_down: bool = False) -> int | None:
        """First fit from the bottom, or (`top_down`) last fit from the top: long-lived kernel
        BOs kept at the top leave the holes user BOs free behind them whole."""
        order = range(len(self.holes) - 1, -1, -1) if top_down else range(len(self.holes))
        for i in order:
            start, end = self.holes[i]
            addr = (end - size) & ~(align - 1) if top_down else (start + align - 1) & ~(align - 1)
            if addr < start or addr + size > end:
                continue
            # split the hole into what is left before and after the allocation
            parts = [p for p in ([start, addr], [addr + size, end]) if p[1] > p[0]]
            self.holes[i:i + 1] = parts
            self.used += size
            return addr
        return None

    def free(self, addr: int, size: int) -> None:
        i = bisect.bisect_left(self.holes, [addr, addr])
        self.holes.insert(i, [addr, addr + size])
        # coalesce with the neighbours
        if i + 1 < len(self.holes) and self.holes[i][1] == self.holes[i + 1][0]:
            self.holes[i][1] = self.holes.pop(i + 1)[1]
        if i > 0 and self.holes[i - 1][1] == self.holes[i][0]:
            self.holes[i - 1][1] = self.holes.pop(i)[1]
        self.used -= size

    @property
    def largest_free(self) -> int:
        return max((e - s for s, e in self.holes), default=0)


class BoManager:
    """Both heaps and every live BO (the CS checker looks addresses up in the VM: vm.py)."""

    def __init__(self, mem_size: int, vram_fraction: float = 0.5):
        if mem_size < 4 * PAGE:
            raise ValueError(f"device memory of {mem_size:#x} bytes is too small (need >= {4 * PAGE:#x})")
        split = PAGE + (int((mem_size - PAGE) * vram_fraction) & ~(PAGE - 1))
        self.heaps = {
            Domain.VRAM: Heap("VRAM", PAGE, split - PAGE),
            Domain.GTT: Heap("GTT", split, (mem_size & ~(PAGE - 1)) - split),
        }
        self.live: list[Bo] = []  # sorted by gpu_addr
        self._starts: list[int] = []
        self.quarantine = False  # set by the wedge (reset/recovery.py): frees keep their memory
        self.quarantined = 0  # bytes freed since then, out of every heap for good

    def create(self, size: int, align: int, domain: Domain, flags: int, owner: "File | None",
               name: str = "", *, who: str, top_down: bool = False) -> Bo:
        asked = size
        size = (size + PAGE - 1) & ~(PAGE - 1)
        align = max(align, PAGE)
        heap = self.heaps[domain]
        addr = heap.alloc(size, align, top_down)
        if addr is None:
            aligned = f" aligned to {align:#x}" if align > PAGE else ""
            # (the size asked for, as the client gave it: rounded up, 2**64 - 1 was named as
            # 0x10000000000000000, wider than the field that carried it)
            pages = "" if asked == size or size >> 64 else f" ({size:#x} in whole pages)"
            raise KmdError(errno.ENOMEM, f"{who}: no {asked:#x} bytes{pages}{aligned} free in {heap.name} "
                           f"({heap.size - heap.used:#x} free, largest hole {heap.largest_free:#x})")
        bo = Bo(addr, size, domain, flags, owner, name)
        i = bisect.bisect_left(self._starts, addr)
        self._starts.insert(i, addr)
        self.live.insert(i, bo)
        log.debug("create %r", bo)
        return bo

    def close(self, bo: Bo) -> None:
        """Its last handle is gone: no job may name it from now on; freed once idle."""
        bo.closed = True
        if not bo.busy:
            self.free(bo)

    def free(self, bo: Bo) -> None:
        if bo.freed:
            return
        i = bisect.bisect_left(self._starts, bo.gpu_addr)
        assert self.live[i] is bo
        del self._starts[i], self.live[i]
        bo.freed = True
        if self.quarantine:
            # (the wedge cancelled the jobs that held it, not the engine running them: it may
            # still reach these pages; the heap keeps them counted as used)
            self.quarantined += bo.size
            log.debug("quarantine %r", bo)
            return
        self.heaps[bo.domain].free(bo.gpu_addr, bo.size)
        log.debug("free %r", bo)

    def live_bos(self, owner: "File | None" = ...) -> list[Bo]:  # type: ignore[assignment]
        """Live BOs, all of them or those of one owner (None: the kernel's)."""
        if owner is ...:
            return list(self.live)
        return [b for b in self.live if b.owner is owner]
