"""Where a Buffer's memory comes from: kernel BOs mapped at UMD-chosen virtual addresses,
reused through Mesa's two pools.

- `Backing`: one KMD BO (GEM_CREATE), mapped with GEM_VA at an address from the device's
  VaAllocator (umd/winsys/va.py), its CPU mapping made on first use (GEM_MMAP).
- `BoCache` (Mesa's pb_cache): a freed BO is kept in a bucket by size and handed to the
  next request of a compatible size once it is idle (the fences of the submissions that
  used it have passed); entries not reused within `expiry` cache operations, or beyond
  `max_bytes`, go back to the kernel.
- slabs (Mesa's pb_slab): requests up to 16 KiB are carved, by power-of-two size, out of
  slabs (64 KiB, or 32 entries up to 256 KiB, from the cache); a freed entry returns to its
  slab only once it is idle (fence-deferred reclaim), and a slab whose entries are all
  free goes back to the cache while its group has others.

A fence here is what `MemoryManager.fence_now` snapshots when something is freed: for each
queue of the device, the submission that ends what it has recorded so far (flushed or
not), idle when the queue's user fence has passed it (a memory read, no ioctl). So a
freed buffer is reused only after all work that could have named it, emit_raw's packets
included, has finished. With pools off, every Buffer is its own BO, made and closed by
ioctls, as before.
"""

from __future__ import annotations

import errno
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kmd_model.uapi import Domain, InfoQuery, KmdError, VaOp, VmFlags

from ..errors import OutOfMemory
from .va import VaAllocator

if TYPE_CHECKING:
    from ..runtime import Device

PAGE = 4096
SLAB_MIN_ORDER = 8  # 256-byte entries
SLAB_MAX_ORDER = 14  # up to 16 KiB: larger requests get BOs of their own
SLAB_BYTES = 64 << 10  # a slab is this large, or holds 32 entries (at most SLAB_MAX_BYTES)
SLAB_MAX_BYTES = 256 << 10
VM_FLAGS = VmFlags.READABLE | VmFlags.WRITEABLE | VmFlags.EXECUTABLE  # as radeonsi maps its BOs


M32 = 0xFFFF_FFFF


def _unsubmitted(q, n: int) -> bool:
    """May queue `q` still submit work up to its n-th flush? Not once it has submitted n, nor
    once nothing is left to submit (its queued or recorded work was refused or dropped)."""
    return n > q.submitted and not q.closed and bool(q.pending or q.cmdbuf.ibs)


def fence_idle(fence) -> bool:
    """Has each queue finished its n-th submission? ((queue, n) pairs, n counted from 1.)"""
    return all((q.closed and not q.abandoned) or (n <= q.submitted and q.seq_done(q.seq_of(n)))
               for q, n in fence)


@dataclass(eq=False)
class Backing:
    """One kernel BO and where the UMD mapped it."""

    handle: int
    size: int  # bytes, whole pages
    va: int
    domain: int
    view: np.ndarray | None = None

    def map(self, ws) -> np.ndarray:
        if self.view is None:
            self.view = ws.gem_mmap(self.handle).view[:self.size]
        return self.view


@dataclass(frozen=True)
class PoolStats:
    """The pools' counters (Device.memory().pools, the exit report)."""

    enabled: bool
    bos_created: int  # GEM_CREATEs
    bos_released: int  # GEM_CLOSEs
    cache_hits: int
    cache_misses: int
    cache_expired: int
    cached: int  # BOs waiting in the cache
    cached_bytes: int
    slab_allocs: int
    slab_frees_deferred: int  # freed while busy: reclaimed after their fence
    slabs: int
    slab_bytes: int
    waste_bytes: int  # bytes handed out beyond what was asked (live buffers)
    waste_peak_bytes: int  # the most waste_bytes has been


@dataclass(eq=False)
class _Slab:
    backing: Backing
    entry: int  # bytes per entry
    free: list = field(default_factory=list)  # offsets
    used: int = 0
    touched: set = field(default_factory=set)  # offsets handed out before: no longer zero


def _mib(n: int) -> str:
    """Bytes as MiB, one decimal ("16 MiB", "15.9 MiB"), for a message a person reads."""
    return f"{n / (1 << 20):.1f}".removesuffix(".0") + " MiB"


class MemoryManager:
    """A Device's memory: VA allocation, BOs, and (with `pools`) the cache and the slabs."""

    def __init__(self, device: "Device", va_start: int, va_end: int, page: int, pools: bool = True,
                 expiry: int = 256, max_cache_bytes: int = 8 << 20):
        self.device = device
        self.ws = device.ws
        self.va = VaAllocator(va_start, va_end, page)
        self.pools = pools
        self.expiry = expiry
        self.max_cache_bytes = max_cache_bytes
        self.clock = 0  # cache operations, the cache's notion of time
        self.cache: dict[tuple[int, int], deque] = {}  # (domain, size class) -> (Backing, freed at, fence)
        self.cached_bytes = 0
        self.slabs: dict[tuple[int, int], list[_Slab]] = {}  # (domain, order) -> slabs
        self.reclaim: deque = deque()  # (slab, offset, fence): freed entries not idle yet
        self.va_pending: deque = deque()  # (va, fence): ranges of closed BOs the KMD may still map
        self.closing: list = []  # (Backing, fence): freed while commands naming it wait to be flushed
        self.n = dict.fromkeys(("created", "released", "hits", "misses", "expired", "slab_allocs",
                                "deferred"), 0)
        self.waste = self.waste_peak = 0
        self.held = dict.fromkeys(Domain, 0)  # bytes of the BOs this Device has made and not closed, per heap
        self._fresh: dict[int, bool] = {}  # id(slab backing) -> it came new from the kernel

    # ------------------------------------------------------------------ fences

    def fence_now(self) -> tuple:
        """What a buffer freed now may still be used by: every queue's work recorded so far
        (the submission in the making counts as the next one)."""
        out = []
        for q in self.device.queues:
            if q.abandoned:  # closed: only what it submitted can still run
                n = q.submitted
            elif q.closed:
                continue
            else:
                n = q.submitted + len(q.pending) + (1 if q.cmdbuf.ibs else 0)  # (pending: async flushes queued)
            if n:
                out.append((q, n))
        return tuple(out)

    # ------------------------------------------------------------------ BOs

    def _create(self, size: int, domain: int, alignment: int) -> Backing:
        self._reclaim_va()
        size = -(-size // PAGE) * PAGE
        try:
            va = self.va.alloc(size, alignment)
        except OutOfMemory:
            va = None
        if va is None:  # (retried outside the handler: a second failure is the one error the app
            self._drain()  # sees, not one raised "during handling of" the first)
            va = self.va.alloc(size, alignment)
        try:  # `alignment` is the VA's: the GPU reaches the memory through 4 KiB PTEs, so
            # where the kernel puts it needs only a page (asking for more strands VRAM before it)
            out = self.ws.gem_create(size, domain, 0)
        except KmdError:  # (ENOMEM: the range goes back, or failed allocations use up the VA space)
            self.va.free(va)
            raise
        try:  # (never GEM_VA's wait for closed BOs still in use: a range comes back only once every
            # job of its old BO has passed its fence, _release: no wait in there for a ^C to interrupt)
            self.ws.gem_va(out.handle, VaOp.MAP, va, size, VM_FLAGS)
        except KmdError:
            self.ws.gem_close(out.handle)
            self.va.free(va)
            raise
        self.n["created"] += 1
        self.held[Domain(domain)] += out.size
        return Backing(out.handle, out.size, va, domain)

    def _heap_said(self, domain: int) -> str:
        """What an app's OutOfMemory adds to the kernel's words: the heap's size, what is free
        in it and what the app holds of it, in MiB. The kernel's own buffers take part of each
        heap first (on the model's and the RTL's 64 MiB: half of GTT, the CS checker's shadow
        pool), which the kernel's hex alone left a newcomer to find out."""
        try:
            info = self.ws.query(InfoQuery.MEMORY)
        except KmdError:  # (no figures to give: the kernel's words stand alone)
            return ""
        d = Domain(domain)
        h = info.vram if d == Domain.VRAM else info.gtt
        mine = self.held[d]
        kernel = "its VMs' page tables" if d == Domain.VRAM else "its rings and the CS checker's shadow pool"
        return (f"; {d.name} has {_mib(h.total)}: {_mib(h.total - h.used)} free, the largest buffer that fits "
                f"{_mib(h.largest_free)}; this Device holds {_mib(mine)} of it, the kernel ({kernel}) and other "
                f"clients {_mib(h.used - mine)} (gpu.memory(); docs/tutorial.md, \"How much memory an app has\")")

    def _release(self, b: Backing) -> None:
        """Back to the kernel. The KMD unmaps it once no job uses it, so its VA is reused
        only after every submission made until now has finished."""
        self.ws.gem_close(b.handle)
        self.held[Domain(b.domain)] -= b.size
        self.n["released"] += 1
        self.va_pending.append((b.va, self.fence_now()))

    def _reclaim_va(self) -> None:
        while self.va_pending and fence_idle(self.va_pending[0][1]):
            self.va.free(self.va_pending.popleft()[0])

    def _drain(self) -> None:
        """Out of VA or memory: give the cache back and wait for what is pending. A queue
        whose last job failed, unless the app was told of it, raises (once the memory is
        back) that job's error and every other its queue has pending (failed_jobs.pending):
        it raised that one alone, and again after the app had been told of it."""
        from ..failures import failed_jobs
        from ..runtime import _raise_first

        for bucket in self.cache.values():
            while bucket:
                b, _, fence = bucket.popleft()
                self._give_back(b, fence)
        self.cached_bytes = 0
        errors = []
        for q in list(self.device.queues):
            if q.pending:  # an async queue's flushes still queued: submitted first, their seqnos known
                q._drain()
            if not q.closed and q.last_seq is not None:
                found = failed_jobs.wait_last(q, q.timeout, "alloc")[1]
                if found is not None:
                    errors += failed_jobs.pending(q, "alloc", found=found)
        self.flushed()  # what waited for the queued flushes just taken in
        self._reclaim_slabs()
        self._reclaim_va()
        _raise_first(errors)

    @staticmethod
    def _class(size: int) -> int:
        return max(0, (size - 1).bit_length())

    def _cache_get(self, size: int, domain: int, alignment: int) -> Backing | None:
        bucket = self.cache.get((domain, self._class(size)))
        self.clock += 1
        self._expire()
        if bucket:
            for i, (b, _, fence) in enumerate(bucket):
                if b.size >= size and b.va % max(alignment, PAGE) == 0 and fence_idle(fence):
                    del bucket[i]
                    self.cached_bytes -= b.size
                    self.n["hits"] += 1
                    return b
        self.n["misses"] += 1
        return None

    def _cache_put(self, b: Backing, fence: tuple) -> None:
        self.clock += 1
        self.cache.setdefault((b.domain, self._class(b.size)), deque()).append((b, self.clock, fence))
        self.cached_bytes += b.size
        self._expire()

    def _expire(self) -> None:
        """Cached BOs older than `expiry` operations, then the oldest while over the limit, go
        (the oldest of every bucket: each bucket is in put order)."""
        for bucket in self.cache.values():
            while bucket and self.clock - bucket[0][1] > self.expiry:
                self._evict(bucket)
        while self.cached_bytes > self.max_cache_bytes:
            self._evict(min((b for b in self.cache.values() if b), key=lambda b: b[0][1]))

    def _evict(self, bucket: deque) -> None:
        old, _, fence = bucket.popleft()
        self.cached_bytes -= old.size
        self.n["expired"] += 1
        self._give_back(old, fence)

    def _give_back(self, b: Backing, fence: tuple) -> None:
        """Back to the kernel now, or (commands recorded but not submitted may name it) once
        their CS is in (flushed): closed before, the CS would be refused (as a CS's buffer
        list keeps a BO alive in Mesa)."""
        if any(_unsubmitted(q, n) for q, n in fence):
            self.closing.append((b, fence))
        else:
            self._release(b)

    def bo(self, size: int, domain: int, alignment: int) -> Backing:
        """A whole BO of at least `size` bytes: from the cache, else made."""
        if self.pools:
            b = self._cache_get(-(-size // PAGE) * PAGE, domain, alignment)
            if b is not None:
                return b
        try:
            try:
                return self._create(size, domain, alignment)
            except KmdError as e:
                if e.errno != errno.ENOMEM or not self.pools:
                    raise
                self._drain()
                return self._create(size, domain, alignment)
        except KmdError as e:
            # (the app asked the UMD, not the kernel: no memory is the UMD's OutOfMemory, as an
            # exhausted VA range is; the kernel's errno and words stay in the message)
            if e.errno == errno.ENOMEM:
                raise OutOfMemory(f"alloc: no device memory for {size:#x} bytes ({e}){self._heap_said(domain)}") from e
            raise

    # ------------------------------------------------------------------ slabs

    def _reclaim_slabs(self) -> None:
        while self.reclaim and fence_idle(self.reclaim[0][2]):
            slab, off, _ = self.reclaim.popleft()
            slab.free.append(off)
            slab.used -= 1
            group = self.slabs[(slab.backing.domain, slab.entry.bit_length() - 1)]
            if slab.used == 0 and len(group) > 1:
                group.remove(slab)
                self._cache_put(slab.backing, ())

    def alloc(self, size: int, domain: int, alignment: int) -> tuple[Backing, int, "_Slab | None", bool]:
        """(backing, offset in it, slab or None, fresh: never used, so zero) for a buffer."""
        e = self.slab_entry(size, domain, alignment)
        if e is not None:
            slab, off = e
            fresh = off not in slab.touched and self._fresh.get(id(slab.backing))
            slab.touched.add(off)
            return slab.backing, off, slab, bool(fresh)
        created = self.n["created"]
        b = self.bo(size, domain, alignment)
        self._waste(b.size - size)
        return b, 0, None, self.n["created"] != created

    def slab_entry(self, size: int, domain: int, alignment: int) -> tuple[_Slab, int] | None:
        """(slab, offset) of an entry for a small request, or None when it gets a BO of its own."""
        order = max(SLAB_MIN_ORDER, self._class(max(size, alignment)))
        if not self.pools or order > SLAB_MAX_ORDER:
            return None
        self._reclaim_slabs()
        group = self.slabs.setdefault((domain, order), [])
        slab = next((s for s in group if s.free), None)
        if slab is None:
            entry = 1 << order
            created = self.n["created"]
            try:
                backing = self.bo(min(max(SLAB_BYTES, 32 * entry), SLAB_MAX_BYTES), domain, entry)
            except OutOfMemory:
                # no room for a new slab: the request gets a BO of its own, which may fit (alloc(64)
                # with 76 KiB free was "alloc: no device memory for 0x10000 bytes", the slab's size)
                return None
            self._fresh[id(backing)] = self.n["created"] != created  # a new BO: the kernel zeroed it
            slab = _Slab(backing, entry, list(range(backing.size - entry, -1, -entry)))
            group.append(slab)
        off = slab.free.pop()
        slab.used += 1
        self.n["slab_allocs"] += 1
        self._waste(slab.entry - size)
        return slab, off

    def _waste(self, n: int) -> None:
        self.waste += n
        self.waste_peak = max(self.waste_peak, self.waste)

    # ------------------------------------------------------------------ buffers

    def free(self, buf: Any) -> None:
        """A Buffer the app freed: its entry or BO is reused once the work that may use it is done."""
        fence = self.fence_now()
        if buf.slab is not None:
            self.waste -= buf.slab.entry - buf.size
            self.reclaim.append((buf.slab, buf.bo_offset, fence))
            if not fence_idle(fence):
                self.n["deferred"] += 1
            self._reclaim_slabs()
            return
        self.waste -= buf.backing.size - buf.size
        if self.pools:
            self._cache_put(buf.backing, fence)
        else:
            self._give_back(buf.backing, fence)

    def flushed(self) -> None:
        """A queue submitted: close the BOs whose last possible user is in the kernel's hands now."""
        keep = []
        for b, fence in self.closing:
            if any(_unsubmitted(q, n) for q, n in fence):
                keep.append((b, fence))
            else:
                self._release(b)
        self.closing = keep

    def close(self) -> None:
        """The device closes: every BO back to the kernel (which frees each once idle)."""
        for b, _ in self.closing:
            self._release(b)
        self.closing = []
        for bucket in self.cache.values():
            for b, _, _ in bucket:
                self._release(b)
        self.cache.clear()
        self.cached_bytes = 0
        for group in self.slabs.values():
            for slab in group:
                self._release(slab.backing)
        self.slabs.clear()
        self.reclaim.clear()

    def take_back(self) -> None:
        """Take back what finished work has released (slab entries, VA ranges)."""
        self._reclaim_slabs()
        self._reclaim_va()

    def stats(self) -> PoolStats:
        n = self.n
        slabs = [s for g in self.slabs.values() for s in g]
        return PoolStats(self.pools, n["created"], n["released"], n["hits"], n["misses"], n["expired"],
                         sum(len(b) for b in self.cache.values()), self.cached_bytes, n["slab_allocs"],
                         n["deferred"], len(slabs), sum(s.backing.size for s in slabs), self.waste,
                         self.waste_peak)
