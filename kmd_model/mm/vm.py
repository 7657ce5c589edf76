"""GPU virtual memory in the KMD: a VM per open file (amdgpu_vm); the VMIDs its jobs run
with are vmid.py's (amdgpu_vmid).

A `Vm` is one client's address space: its page tables are kernel BOs in VRAM (the root
directory, page tables made on demand), written by the CPU in spec/vm.py's format; its
mappings (GEM_VA) are kept sorted, each a range of one of the file's BOs with
READABLE / WRITEABLE / EXECUTABLE. The KMD's own work (the ring, the IH ring, fences,
write-back) runs as VMID 0, untranslated.

The MMU's TLB may hold an entry until it is invalidated, so an update that takes or
changes a valid entry (UNMAP, REPLACE, CLEAR, a GEM_CLOSE that unmaps) invalidates the
VM's VMID before the ioctl returns; the BOs behind the old entries stay allocated until
every job that may use them has finished (each job holds every BO mapped in its VM when
it was submitted, and every BO whose mapping goes while it is in a ring: writes it had
translated before the invalidation may still land, Kmd.hold_for_jobs_in_rings), so an
unmapped page is never reused while a job may still reach it.
New entries need no invalidation: the TLB never keeps a fault.
"""

from __future__ import annotations

import bisect
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spec import vm as vm_spec

from ..log import get_logger
from ..uapi import Domain, VmFlags

if TYPE_CHECKING:
    from ..core.file import File
    from ..core.kmd import Kmd
    from .bo import Bo

log = get_logger("vm")

PAGE = vm_spec.PAGE_SIZE
_va = operator.attrgetter("va")
VA_RESERVED_BOTTOM = 1 << 20
"""Never mapped (amdgpu's AMDGPU_VA_RESERVED_BOTTOM): a small address from a null pointer faults."""
HUGE = 1 << vm_spec.leaf_bits(vm_spec.LEVELS - 2)  # what one directory entry maps as a huge page

_FLAG_PTE = ((VmFlags.READABLE, vm_spec.READABLE), (VmFlags.WRITEABLE, vm_spec.WRITEABLE),
             (VmFlags.EXECUTABLE, vm_spec.EXECUTABLE))


def pte_flags(flags: int) -> int:
    """GEM_VA flags -> PTE bits (amdgpu_gmc_get_pte_flags' job)."""
    return sum(bit for f, bit in _FLAG_PTE if flags & f)


@dataclass(eq=False)
class Mapping:
    va: int
    size: int
    bo: "Bo"
    offset: int  # in the BO
    flags: int  # VmFlags

    @property
    def end(self) -> int:
        return self.va + self.size

    @property
    def phys(self) -> int:
        return self.bo.gpu_addr + self.offset

    def __repr__(self) -> str:
        return f"Mapping([{self.va:#x}, {self.end:#x}) -> {self.bo.name or '?'}+{self.offset:#x} {VmFlags(self.flags)!r})"


class Vm:
    """One file's GPU address space."""

    def __init__(self, kmd: "Kmd", file: "File", levels: int):
        self.kmd = kmd
        self.file = file
        self.levels = levels
        self.va_bits = vm_spec.va_bits(levels)
        self.va_start = VA_RESERVED_BOTTOM
        self.va_end = (1 << self.va_bits) - kmd.kernel_va_size  # the kernel's range sits above
        who = f"vm fd{file.fd}"
        self.tables: dict[tuple[int, int], "Bo"] = {}  # (level, index of its range) -> table BO
        self.maps: list[Mapping] = []  # sorted by va
        self._starts: list[int] = []
        # each BO's mappings in this VM, by address (their starts beside them): what a CS's IB
        # by handle and GEM_CLOSE look up, at a cost of that BO's mappings, not the file's
        self._by_bo: dict["Bo", tuple[list[int], list[Mapping]]] = {}
        self.vmid: int | None = None  # the VMID it holds (VmidManager)
        self.fault = None  # the last VM fault of its jobs (uapi.VmFaultInfo)
        self.closed = False
        self._arrays: tuple | None = None
        # what its unfinished jobs hold, by generation: a job holds every BO mapped (with a
        # handle) and every page table at its CS (bos()); each change to that set starts a new
        # generation once a job has taken the current one, and each BO records the
        # generations it was in (Bo.spans). Each job held a copy of the set: 258 KiB a job
        # with 7,000 BOs mapped, and a file may queue 131,000 SDMA jobs behind a dependency
        self.gen = 0  # the generation a job submitted now takes
        self._gen_jobs: dict[int, int] = {}  # generation -> its unfinished jobs
        self._live: list[int] = []  # generations with unfinished jobs, in order
        self._waiting: dict[int, list] = {}  # generation -> closed BOs to look at again once it ends
        self._dead_hold: list | None = None  # what a closed VM's unfinished jobs hold (destroy)
        # what needed a table, for ENOMEM's message: the open's directory (VRAM full: another
        # client's BOs may fill it) is not a GEM_VA's
        self._by = "open: the VM's page directory"
        try:
            self.root = self._new_table(0, 0, who)
            kmd.map_kernel_ranges(self)
        except BaseException:
            for bo in self.tables.values():  # a failed open keeps nothing
                kmd.bo.close(bo)
            raise
        self._by = "GEM_VA"

    # ------------------------------------------------------------------ page tables

    def _new_table(self, level: int, key: int, who: str = "") -> "Bo":
        # from the top of VRAM (amdgpu: TTM_PL_FLAG_TOPDOWN for VRAM the CPU need not reach):
        # a table lives as long as its VM, and among user BOs it would split the holes they leave
        bo = self.kmd.bo.create(vm_spec.TABLE_BYTES, vm_spec.TABLE_BYTES, Domain.VRAM, 0, None,
                                f"{who or 'vm'} L{level} table", who=self._by, top_down=True)
        self.kmd.dev.mem[bo.gpu_addr:bo.end] = 0
        self.tables[(level, key)] = bo
        self._enter(bo)
        return bo

    def _table(self, level: int, va: int, create: bool) -> "Bo | None":
        """The table of `level` that translates `va` (made, and linked from its parent, on demand)."""
        if level == 0:
            return self.root
        key = va >> vm_spec.leaf_bits(level - 1, self.levels)
        bo = self.tables.get((level, key))
        if bo is None and create:
            parent = self._table(level - 1, va, True)
            bo = self._new_table(level, key)
            self._write(parent.gpu_addr + vm_spec.ENTRY_BYTES * vm_spec.index(va, level - 1, self.levels),
                        np.array([vm_spec.pde(bo.gpu_addr)], dtype=np.uint64))
        return bo

    def _write(self, addr: int, entries: np.ndarray) -> None:
        i = addr >> 2
        self.kmd.mem32[i:i + 2 * len(entries)] = entries.astype("<u8").view("<u4")

    def reserve(self, va: int, size: int) -> None:
        """Make every page table [va, va + size) needs, before a GEM_VA changes anything: a
        table that does not fit (ENOMEM) then fails the ioctl with the VM as it was, not
        half mapped. Tables made for nothing stay, empty, as amdgpu's do."""
        span = 1 << vm_spec.leaf_bits(self.levels - 2, self.levels)  # what one page table covers
        for a in range(va & -span, va + size, span):
            self._table(self.levels - 1, a, True)

    def set_ptes(self, va: int, size: int, phys: int | None, flags: int) -> None:
        """Point [va, va + size) at [phys, ...) with PTE `flags`, or clear it (phys None)."""
        last = self.levels - 1
        end = va + size
        while va < end:
            span = 1 << vm_spec.leaf_bits(last - 1, self.levels)  # what one page table covers
            stop = min(end, (va | (span - 1)) + 1)
            n = (stop - va) // PAGE
            table = self._table(last, va, phys is not None)
            if table is not None:
                i0 = vm_spec.index(va, last, self.levels)
                if phys is None:
                    entries = np.zeros(n, dtype=np.uint64)
                else:
                    pages = np.uint64(phys) + np.arange(n, dtype=np.uint64) * np.uint64(PAGE)
                    entries = (pages & np.uint64(vm_spec.ADDR_MASK)) | np.uint64(flags | vm_spec.VALID)
                self._write(table.gpu_addr + vm_spec.ENTRY_BYTES * i0, entries)
            if phys is not None:
                phys += stop - va
            va = stop

    def set_huge(self, va: int, phys: int, flags: int) -> None:
        """One directory entry of the level above the page tables as a huge page (PDE_PTE)."""
        level = self.levels - 2
        table = self._table(level, va, True)
        self._write(table.gpu_addr + vm_spec.ENTRY_BYTES * vm_spec.index(va, level, self.levels),
                    np.array([vm_spec.pte(phys, flags) | vm_spec.PDE_PTE], dtype=np.uint64))

    # ------------------------------------------------------------------ mappings

    def find(self, va: int) -> Mapping | None:
        """The mapping containing byte `va`."""
        i = bisect.bisect_right(self._starts, va) - 1
        if i >= 0 and va < self.maps[i].end:
            return self.maps[i]
        return None

    def overlapping(self, va: int, size: int) -> list[Mapping]:
        i = max(0, bisect.bisect_right(self._starts, va) - 1)
        out = []
        maps, end = self.maps, va + size
        while i < len(maps) and maps[i].va < end:
            m = maps[i]
            if m.va + m.size > va:  # (m.end: a property, a call a mapping over a CLEAR of 100,000)
                out.append(m)
            i += 1
        return out

    def _insert(self, m: Mapping) -> None:
        i = bisect.bisect_left(self._starts, m.va)
        self._starts.insert(i, m.va)
        self.maps.insert(i, m)
        if m.bo not in self._by_bo and not m.bo.closed:
            self._enter(m.bo)
        starts, maps = self._by_bo.setdefault(m.bo, ([], []))
        j = bisect.bisect_left(starts, m.va)
        starts.insert(j, m.va)
        maps.insert(j, m)
        if self._arrays is not None:  # (kept, not made again: see lookup_arrays)
            row = (m.va, m.end, -1 if m.bo.closed else self.file.fd, m.phys - m.va, m.flags)
            self._arrays = tuple(np.insert(a, i, v) for a, v in zip(self._arrays, row))

    def _remove(self, m: Mapping) -> None:
        # (mappings never overlap: one starts at m.va, found by address, not by a scan)
        i = bisect.bisect_left(self._starts, m.va)
        assert self.maps[i] is m
        del self.maps[i], self._starts[i]
        starts, maps = self._by_bo[m.bo]
        j = bisect.bisect_left(starts, m.va)
        del starts[j], maps[j]
        if not maps:
            del self._by_bo[m.bo]
            self._leave(m.bo)
        if self._arrays is not None:
            self._arrays = tuple(np.delete(a, i) for a in self._arrays)

    def _remove_many(self, ms: list[Mapping]) -> None:
        """_remove for each of `ms`, in one step: the VM's lists and the checker's view each
        cut once, each BO's list once. One at a time, each removal copied the whole view (five
        arrays of a row a mapping) and moved the lists' tails: a GEM_CLOSE of one page mapped
        20,000 times held the driver's lock 4.4 s, 100,000 times some 2 minutes (a CLEAR of
        them, or the file's close, as long)."""
        if len(ms) <= 1:
            for m in ms:
                self._remove(m)
            return
        # (lists, not generators: a generator's every item is a call of its own)
        idx = np.array(sorted([bisect.bisect_left(self._starts, m.va) for m in ms]), dtype=np.int64)
        assert all([self.maps[i] is m for i, m in zip(idx.tolist(), sorted(ms, key=_va))])
        keep = np.ones(len(self.maps), dtype=bool)
        keep[idx] = False
        kept = np.flatnonzero(keep).tolist()
        maps = self.maps
        left = [maps[i] for i in kept]
        self._starts[:] = [m.va for m in left]
        self.maps[:] = left
        by_bo: dict = {}
        for m in ms:
            by_bo.setdefault(m.bo, set()).add(m)
        for bo, gone in by_bo.items():
            starts, bms = self._by_bo[bo]
            left = [m for m in bms if m not in gone]
            if left:
                self._by_bo[bo] = ([m.va for m in left], left)
            else:
                del self._by_bo[bo]
                self._leave(bo)
        if self._arrays is not None:
            self._arrays = tuple(np.delete(a, idx) for a in self._arrays)

    def maps_of(self, bo: "Bo") -> list[Mapping]:
        """The BO's mappings in this VM, by address (a copy)."""
        return list(self._by_bo.get(bo, ((), ()))[1])

    def map(self, bo: "Bo", offset: int, va: int, size: int, flags: int) -> Mapping:
        """A new mapping (arguments checked by the ioctl): its PTEs are written at once."""
        m = Mapping(va, size, bo, offset, flags)
        self._insert(m)
        self.set_ptes(va, size, m.phys, pte_flags(flags))
        log.debug("fd %d map %r", self.file.fd, m)
        return m

    def clear(self, va: int, size: int) -> int:
        """Remove whatever is mapped in [va, va + size), splitting mappings that stick out;
        returns the bytes unmapped. The caller flushes the TLB."""
        gone = 0
        cut = self.overlapping(va, size)
        self._remove_many(cut)  # (at once: 100,000 of them one by one held the lock minutes)
        ranges = []
        for m in cut:
            m_end = m.va + m.size
            lo, hi = max(m.va, va), min(m_end, va + size)
            if m.va < lo:
                self._insert(Mapping(m.va, lo - m.va, m.bo, m.offset, m.flags))
            if hi < m_end:
                self._insert(Mapping(hi, m_end - hi, m.bo, m.offset + hi - m.va, m.flags))
            ranges.append((lo, hi - lo))
            gone += hi - lo
        self._clear_ranges(ranges)
        return gone

    def unmap(self, m: Mapping) -> None:
        self._remove(m)
        self.set_ptes(m.va, m.size, None, 0)

    def bo_removed(self, bo: "Bo") -> bool:
        """The BO's handle is gone: its mappings go too (amdgpu_vm_bo_del); True if any did."""
        ms = self.maps_of(bo)
        self._remove_many(ms)
        self._clear_ranges([(m.va, m.size) for m in ms])
        return bool(ms)

    def _clear_ranges(self, ranges: list[tuple[int, int]]) -> None:
        """set_ptes(va, size, None, 0) for each (va, size) of `ranges` (pages, in tables made or
        not), at once: each range's PTEs were cleared on its own, some 10 Python calls and
        35 µs a range, so a GEM_CLOSE, CLEAR or close of one page mapped 30,000 times held the
        driver's lock 1 to 1.5 s for its PTEs alone (the VM's range holds 257,792 pages)."""
        if len(ranges) <= 4:
            for va, size in ranges:
                self.set_ptes(va, size, None, 0)
            return
        last = self.levels - 1
        starts = np.array([va for va, _ in ranges], dtype=np.int64)
        pages = np.array([size for _, size in ranges], dtype=np.int64) // PAGE
        first = np.cumsum(pages) - pages  # (each range's first page among them all)
        va = np.repeat(starts, pages) + (np.arange(int(pages.sum()), dtype=np.int64) - np.repeat(first, pages)) * PAGE
        keys, which = np.unique(va >> vm_spec.leaf_bits(last - 1, self.levels), return_inverse=True)
        tables = np.array([t.gpu_addr if (t := self.tables.get((last, k))) is not None else -1
                           for k in keys.tolist()], dtype=np.int64)[which]
        made = tables >= 0  # (a range in no table made has no PTE to clear)
        at = (tables[made] + vm_spec.ENTRY_BYTES * ((va[made] >> vm_spec.PAGE_SHIFT) & (vm_spec.ENTRIES - 1))) >> 2
        mem32 = self.kmd.mem32
        mem32[at] = 0
        mem32[at + 1] = 0

    def bos(self) -> set:
        """What a job of this VM holds: the mapped BOs that still have a handle and the page
        tables. A closed BO that an earlier job holds stays mapped at the MMU until the last
        such job ends, so a later job of the VM that no checker reads (the SDMA ring, or with
        the checker off) can reach it meanwhile without holding it: the file's own memory,
        unmapped and invalidated at the release, and held from then by the VM's jobs still in
        a ring (Kmd.hold_for_jobs_in_rings; docs/architecture.md, "Ordering"). From the
        mappings by BO, one step a BO: from every mapping, a client that mapped one page
        100,000 times made each of its CSs hold the driver's lock 13 ms longer."""
        return {bo for bo in self._by_bo if not bo.closed} | set(self.tables.values())

    # ------------------------------------------------------------------ what its jobs hold

    def _bump(self) -> None:
        """The set bos() names changes: a new generation if a job has taken this one."""
        if self.gen in self._gen_jobs:
            self.gen += 1

    def _enter(self, bo: "Bo") -> None:
        """`bo` joins bos(): jobs submitted from now on hold it."""
        if bo.spans and bo.spans[-1][1] is None:
            return
        # the spans before it that no unfinished job holds go first (holds): kept, they
        # grew a span a map between two CSs, for as long as the BO lived (a client mapping,
        # submitting and unmapping in a loop: 2,000 spans after 2,000 rounds, every job ended)
        self.holds(bo)
        self._bump()
        bo.held_vm = self
        bo.spans.append([self.gen, None])

    def _leave(self, bo: "Bo") -> None:
        """`bo` leaves bos() (its last mapping gone, or its handle): jobs submitted from now on
        do not hold it; those submitted before still do."""
        if not bo.spans or bo.spans[-1][1] is not None:
            return
        self._bump()
        span = bo.spans[-1]
        span[1] = self.gen
        if span[0] >= span[1]:  # (no job took it meanwhile)
            bo.spans.pop()

    def _last_holder(self, bo: "Bo") -> int | None:
        """The latest generation with unfinished jobs that holds `bo`, or None; spans no
        such job can take any more (ended, none of theirs unfinished) are dropped."""
        live, best, keep = self._live, None, []
        for span in bo.spans:
            start, end = span
            i = bisect.bisect_left(live, start)
            j = len(live) if end is None else bisect.bisect_left(live, end)
            if i < j:
                best = live[j - 1] if best is None else max(best, live[j - 1])
                keep.append(span)
            elif end is None:
                keep.append(span)
        if len(keep) != len(bo.spans):
            bo.spans[:] = keep
        return best

    def holds(self, bo: "Bo") -> bool:
        """Whether an unfinished job of this VM holds `bo` by its generation (Bo.busy: a wait
        asks at each of its steps). Spans no unfinished job holds are dropped as they are
        passed, each once, so the first span kept answers: not a walk of every span a BO
        mapped and unmapped between many CSs has, at each step of the wait, under the lock."""
        live = self._live
        spans, k, found = bo.spans, 0, False
        while k < len(spans):
            start, end = spans[k]
            i = bisect.bisect_left(live, start)
            if i < len(live) and (end is None or live[i] < end):
                found = True
                break
            if end is None:  # (the open span, the last: no job taken since it began)
                break
            k += 1
        if k:
            del spans[:k]  # (the spans passed: no unfinished job holds them, nor will one)
        return found

    def holds_at(self, bo: "Bo", gen: int) -> bool:
        """Whether a job of generation `gen` holds `bo` (it was in bos() at its CS)."""
        k = bisect.bisect_right(bo.spans, gen, key=lambda span: span[0]) - 1
        return k >= 0 and (bo.spans[k][1] is None or gen < bo.spans[k][1])

    def job_started(self) -> int:
        """A job of this VM is submitted: it holds bos() until job_ended; its generation."""
        g = self.gen
        n = self._gen_jobs.get(g, 0)
        if not n:
            self._live.append(g)  # (the newest: generations only grow)
        self._gen_jobs[g] = n + 1
        return g

    def wait_release(self, bo: "Bo") -> None:
        """Closed `bo` is held by this VM's jobs: looked at again when the last holder's
        generation ends (job_ended)."""
        g = self._last_holder(bo)
        if g is not None:
            self._waiting.setdefault(g, []).append(bo)

    def job_ended(self, gen: int) -> list:
        """A job of generation `gen` ended: the closed BOs that may be idle now."""
        n = self._gen_jobs[gen] - 1
        if n:
            self._gen_jobs[gen] = n
            return []
        del self._gen_jobs[gen]
        del self._live[bisect.bisect_left(self._live, gen)]
        out = []
        for bo in self._waiting.pop(gen, ()):
            if not bo.freed:
                if self._last_holder(bo) is None:
                    out.append(bo)
                else:
                    self.wait_release(bo)
        if not self._live and self._dead_hold is not None:
            for bo in self._dead_hold:
                bo.busy_jobs -= 1
            out += self._dead_hold
            self._dead_hold = None
        return list(dict.fromkeys(out))

    def lookup_arrays(self) -> tuple:
        """(starts, ends, owner, phys - va, flags) of the mappings in address order: the CS
        checker's view of what the file may name and how. owner: the file's fd, or -1 for a
        closed BO's mapping, which stays (at the MMU) while a job submitted before its
        GEM_CLOSE holds it, and which the checker refuses to later jobs (bos()); flags: each
        mapping's VmFlags. Made once from the mappings, then kept in step with each change
        (_insert, _remove, bo_closed: a row each, new arrays, never changed in place): made
        again from every mapping after each GEM_VA, it cost a client with 100,000 mappings
        130 ms of the driver's lock at each CS that followed a GEM_VA of its own."""
        if self._arrays is None:
            fd = self.file.fd
            self._arrays = (
                np.array([m.va for m in self.maps], dtype=np.int64),
                np.array([m.end for m in self.maps], dtype=np.int64),
                np.array([-1 if m.bo.closed else fd for m in self.maps], dtype=np.int64),
                np.array([m.phys - m.va for m in self.maps], dtype=np.int64),
                np.array([m.flags for m in self.maps], dtype=np.int64))
        return self._arrays

    def drop_view(self) -> None:
        """The file is closing: no CS will look at the checker's view again, so its BOs'
        releases need not keep it in step (a row cut from five arrays each: 16,000 BOs closed
        with their file cost seconds of the driver's lock)."""
        self._arrays = None

    def bo_closed(self, bo: "Bo") -> None:
        """BO `bo` lost its handle (GEM_CLOSE): the checker's view of its mappings changes
        (their owner -1)."""
        self._leave(bo)
        if self._arrays is None:
            return
        owner = self._arrays[2].copy()
        for m in self._by_bo.get(bo, ((), ()))[1]:
            owner[bisect.bisect_left(self._starts, m.va)] = -1
        self._arrays = (*self._arrays[:2], owner, *self._arrays[3:])

    def translate(self, va: int, size: int = 1) -> int | None:
        """The physical address of [va, va + size) when it lies in one mapping, else None."""
        m = self.find(va)
        if m is None or va + size > m.end:
            return None
        return m.phys + va - m.va

    def pieces(self, va: int, size: int) -> list[tuple[int, int]] | None:
        """[va, va + size) as (physical address, bytes) runs, one per mapping it crosses,
        when the VM's mappings cover it with no hole (adjacent mappings may be far apart in
        memory); else None. Only this VM's mappings: never memory next to them."""
        out = []
        end = va + size
        while va < end:
            m = self.find(va)
            if m is None:
                return None
            n = min(end, m.end) - va
            out.append((m.phys + va - m.va, n))
            va += n
        return out

    def destroy(self, spend=None) -> None:
        """The file is gone: its page tables, and the BOs still mapped, go once all of its
        jobs are done. Each job holds what the VM had at its CS, but it runs with the root,
        which links every table made since, and those tables hold the entries of every BO
        mapped since: freed under a job still queued or running, a table's page went to
        another client, whose data the job's walk then took for PTEs. So every unfinished
        job of the VM now holds all of it (the BOs mapped at the close are busy ones: the
        idle ones were unmapped and freed before)."""
        self.closed = True
        # its VMID stays its own while a job runs with it (no other VM may have it then,
        # and the VM should say what its jobs run with); Kmd.job_retired gives it back
        self.kmd.vmids.release_idle(self)
        held = set(self.tables.values()) | {m.bo for m in self.maps if not m.bo.freed}
        if self._live:  # (one hold for all of them, let go as the last ends: job_ended)
            self._dead_hold = list(held)
            for bo in held:
                bo.busy_jobs += 1
        for bo in list(self.tables.values()):
            self.kmd.bo.close(bo)
            if spend is not None:  # (a closing file's release: its work in holds of the lock, Kmd._release_file)
                spend(1)

    def __repr__(self) -> str:
        return f"Vm(fd {self.file.fd}, {len(self.maps)} mappings, VMID {self.vmid})"
