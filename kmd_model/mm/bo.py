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


class Heap:
    """First-fit allocator over [base, base + size) with a sorted, coalesced free list.

    The holes, [start, end) in address order, are kept in blocks of at most 2 * BLOCK, each
    block with its largest hole: an allocation's first fit passes over a block with no hole
    large enough in one step, and looks into the first that has one; `largest_free` is the
    largest of the blocks'. Kept in one list, every hole a step, a client that freed every
    other one of its 4 KiB BOs made a hole a page, and every client's GEM_CREATE that fit
    none of them walked them all under the driver's lock: 4,095 holes in the default model's
    32 MiB VRAM, 3.4 ms a GEM_CREATE of 8 KiB, INFO MEMORY 0.6 ms (a device of 1 GiB some
    30 times as long). The shadow pool's allocation at each CS is the same allocator
    (tests/security/limits/test_security_heap_holes.py)."""

    BLOCK = 64

    def __init__(self, name: str, base: int, size: int):
        self.name = name
        self.base = base
        self.size = size
        self.used = 0
        self._blocks: list[list[list[int]]] = [[[base, base + size]]] if size > 0 else []
        self._firsts: list[int] = [base] if size > 0 else []  # each block's first hole's start
        self._maxes: list[int] = [size] if size > 0 else []  # each block's largest hole

    @property
    def holes(self) -> list[list[int]]:
        """The holes, [start, end) in address order (a copy: for tests and reports)."""
        return [list(h) for blk in self._blocks for h in blk]

    def _update(self, b: int, largest: int | None = None) -> None:
        """Block b changed: its first start, and its largest hole (`largest` when the caller
        knows it, else looked for), again; or it goes (empty), or it is split (too long)."""
        blk = self._blocks[b]
        if not blk:
            del self._blocks[b], self._firsts[b], self._maxes[b]
            return
        if len(blk) > 2 * self.BLOCK:
            half = blk[self.BLOCK:]
            del blk[self.BLOCK:]
            self._blocks.insert(b + 1, half)
            self._firsts.insert(b + 1, half[0][0])
            self._maxes.insert(b + 1, max(e - s for s, e in half))
            largest = None
        self._firsts[b] = blk[0][0]
        self._maxes[b] = max(e - s for s, e in blk) if largest is None else largest

    def alloc(self, size: int, align: int, top_down: bool = False) -> int | None:
        """First fit from the bottom, or (`top_down`) last fit from the top: long-lived kernel
        BOs kept at the top leave the holes user BOs free behind them whole."""
        maxes = self._maxes
        blocks = range(len(maxes) - 1, -1, -1) if top_down else range(len(maxes))
        for b in blocks:
            if maxes[b] < size:
                continue  # (no hole of it fits, whatever the alignment)
            blk = self._blocks[b]
            for i in (range(len(blk) - 1, -1, -1) if top_down else range(len(blk))):
                start, end = blk[i]
                addr = (end - size) & ~(align - 1) if top_down else (start + align - 1) & ~(align - 1)
                if addr < start or addr + size > end:
                    continue
                # split the hole into what is left before and after the allocation
                blk[i:i + 1] = [p for p in ([start, addr], [addr + size, end]) if p[1] > p[0]]
                # (its largest hole is the same unless it was this one)
                self._update(b, None if end - start == maxes[b] else maxes[b])
                self.used += size
                return addr
        return None

    def free(self, addr: int, size: int) -> None:
        b = max(bisect.bisect_right(self._firsts, addr) - 1, 0)
        if not self._blocks:
            self._blocks.append([])
            self._firsts.append(addr)
            self._maxes.append(0)
        blk = self._blocks[b]
        i = bisect.bisect_left(blk, [addr, addr])
        blk.insert(i, [addr, addr + size])
        # coalesce with the neighbours: in the block, or the last of the block before and
        # the first of the block after
        if i + 1 < len(blk) and blk[i][1] == blk[i + 1][0]:
            blk[i][1] = blk.pop(i + 1)[1]
        elif i + 1 == len(blk) and b + 1 < len(self._blocks) and self._blocks[b + 1][0][0] == blk[i][1]:
            blk[i][1] = self._blocks[b + 1].pop(0)[1]
            self._update(b + 1)
        if i > 0 and blk[i - 1][1] == blk[i][0]:
            blk[i - 1][1] = blk.pop(i)[1]
            i -= 1
        elif i == 0 and b > 0 and self._blocks[b - 1][-1][1] == blk[0][0]:
            prev = self._blocks[b - 1][-1]
            prev[1] = blk.pop(0)[1]
            self._update(b)
            self._update(b - 1, max(self._maxes[b - 1], prev[1] - prev[0]))
            self.used -= size
            return
        self._update(b, max(self._maxes[b], blk[i][1] - blk[i][0]))  # (a hole only grew)
        self.used -= size

    @property
    def largest_free(self) -> int:
        return max(self._maxes, default=0)


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
