"""The device's GPU virtual address range, handed out by the UMD (as radv's and radeonsi's
winsys do with amdgpu_va_range_alloc): the KMD only checks what a GEM_VA names.

Best fit over a sorted list of free ranges: the smallest range that holds the request
(aligned) is split, so large holes stay whole for large requests; a freed range merges
with its free neighbours at once. Each allocation is followed by `guard_pages` unmapped
pages, so running off the end of a buffer faults instead of reaching the next one.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..errors import OutOfMemory


@dataclass(frozen=True)
class VaStats:
    start: int
    end: int
    used: int  # bytes handed out, guard pages included
    allocations: int  # live ranges
    free_ranges: int  # holes: fragmentation shows as many small ones
    largest_free: int  # the largest allocation that still fits (before alignment)
    peak_used: int  # the most `used` has been
    peak_free_ranges: int  # the most holes there have been: the worst fragmentation

    @property
    def free(self) -> int:
        return self.end - self.start - self.used


class VaAllocator:
    def __init__(self, start: int, end: int, page: int = 4096, guard_pages: int = 1):
        if start % page or end % page or end <= start:
            raise ValueError(f"VA range [{start:#x}, {end:#x}) must be a non-empty range of whole {page:#x}-byte pages")
        self.start, self.end, self.page, self.guard = start, end, page, guard_pages * page
        self._holes: list[list[int]] = [[start, end]]  # [start, end), sorted, never adjacent
        self.used = 0
        self.live: dict[int, int] = {}  # va -> bytes reserved (guard included)
        self.peak_used, self.peak_free_ranges = 0, len(self._holes)

    def span(self, size: int) -> int:
        """Bytes an allocation of `size` takes: whole pages and its guard."""
        return -(-size // self.page) * self.page + self.guard

    def max_alignment(self) -> int:
        """The largest alignment (a power of two) at which the range holds an allocation at
        all: one page and its guard at an address aligned to it. A larger one names no address
        of the range, whatever is free: an argument error, not a lack of space."""
        a = 1 << (self.end.bit_length() - 1)
        while a > self.page and -(-self.start // a) * a + self.page + self.guard > self.end:
            a >>= 1
        return a

    def alloc(self, size: int, alignment: int = 0) -> int:
        """The start of a free range of `size` bytes (pages) aligned to `alignment` (a power of
        two; at least the page)."""
        need = self.span(size)
        align = max(alignment, self.page)
        best = None  # (slack, index, va)
        for i, (s, e) in enumerate(self._holes):
            va = (s + align - 1) & ~(align - 1)
            if va + need <= e and (best is None or e - s < best[0]):
                best = (e - s, i, va)
                if e - s == need:
                    break
        if best is None:
            st = self.stats()
            # (the request as the app made it: `need` adds whole pages and the guard, and "no free
            # range of 0x3ef01000 bytes" for alloc(0x3ef00000), "0x3ef00000 bytes free in 1
            # ranges, the largest 0x3eeff000", named neither the app's size nor the guard)
            guard = f", {self.guard // self.page} guard page{'s' * (self.guard != self.page)} after it" \
                if self.guard else ""
            raise OutOfMemory(f"GPU virtual address space exhausted: no free range for {size:#x} bytes "
                              f"({need:#x} with whole pages{guard}) aligned to {align:#x}; {st.free:#x} bytes free "
                              f"in {st.free_ranges} range{'s' * (st.free_ranges != 1)}, the largest allocation that "
                              f"fits {st.largest_free:#x} bytes")
        _, i, va = best
        s, e = self._holes[i]
        self._holes[i:i + 1] = [r for r in ([s, va], [va + need, e]) if r[1] > r[0]]
        self.used += need
        self.live[va] = need
        self.peak_used = max(self.peak_used, self.used)
        self.peak_free_ranges = max(self.peak_free_ranges, len(self._holes))
        return va

    def free(self, va: int) -> None:
        need = self.live.pop(va)
        self.used -= need
        i = bisect.bisect_left(self._holes, [va, va])
        self._holes.insert(i, [va, va + need])
        if i + 1 < len(self._holes) and self._holes[i][1] == self._holes[i + 1][0]:
            self._holes[i][1] = self._holes.pop(i + 1)[1]
        if i > 0 and self._holes[i - 1][1] == self._holes[i][0]:
            self._holes[i - 1][1] = self._holes.pop(i)[1]
        self.peak_free_ranges = max(self.peak_free_ranges, len(self._holes))

    def stats(self) -> VaStats:
        largest = max((e - s for s, e in self._holes), default=0)
        return VaStats(self.start, self.end, self.used, len(self.live), len(self._holes),
                       max(0, largest - self.guard), self.peak_used, self.peak_free_ranges)
