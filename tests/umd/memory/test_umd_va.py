"""The UMD's GPU virtual address allocator (umd/winsys/va.py): best fit, alignment, guard pages,
coalescing, and the figures of stats() against a page-by-page model. (The pools that use
it: tests/umd/memory/test_umd_memory.py.)"""

from __future__ import annotations

import pytest

import umd
from umd.winsys.va import VaAllocator

P = 0x1000


def test_va_best_fit_alignment_guard_and_coalescing():
    va = VaAllocator(0x100000, 0x200000)
    a = va.alloc(0x1000)
    b = va.alloc(0x3000, alignment=0x10000)
    c = va.alloc(100)
    assert a == 0x100000 and b % 0x10000 == 0 and b >= a + 2 * P  # a's guard page lies between
    assert c == a + 2 * P  # best fit: the hole below b's alignment, not after b
    st = va.stats()
    assert (st.allocations, st.used) == (3, (1 + 1) * P + (3 + 1) * P + (1 + 1) * P)
    va.free(b)
    va.free(a)
    va.free(c)
    st = va.stats()
    assert (st.free_ranges, st.used, st.largest_free) == (1, 0, 0x100000 - P)  # all one range again
    # the app's size, then what it takes (whole pages, the guard); the largest that fits
    # (it named 0x101000 bytes and "0x100000 bytes free in 1 ranges, the largest 0xff000")
    with pytest.raises(umd.OutOfMemory, match=r"^GPU virtual address space exhausted: no free range for 0x100000 "
                                              r"bytes \(0x101000 with whole pages, 1 guard page after it\) aligned "
                                              r"to 0x1000; 0x100000 bytes free in 1 range, the largest allocation "
                                              r"that fits 0xff000 bytes$"):
        va.alloc(0x100000)
    with pytest.raises(umd.OutOfMemory, match=r"^GPU virtual address space exhausted: no free range for 0xff001 "
                                              r"bytes \(0x101000 with whole pages, 1 guard page after it\)"):
        va.alloc(0xFF001)
    with pytest.raises(ValueError, match="must be a non-empty range of whole 0x1000-byte pages"):
        VaAllocator(0x100, 0x2000)


def test_va_fragmentation_is_visible():
    va = VaAllocator(0, 64 * P, guard_pages=0)
    xs = [va.alloc(P) for _ in range(64)]
    for x in xs[::2]:
        va.free(x)
    st = va.stats()
    assert (st.free_ranges, st.largest_free, st.free) == (32, P, 32 * P)  # half free, in 32 holes
    with pytest.raises(umd.OutOfMemory):
        va.alloc(2 * P)
    for x in xs[1::2]:
        va.free(x)
    st = va.stats()
    assert (st.free_ranges, st.used, st.peak_free_ranges, st.peak_used) == (1, 0, 32, 64 * P)  # the worst stays


def test_va_best_fit_takes_the_tightest_hole_not_the_first():
    va = VaAllocator(0x100000, 0x200000)
    x, y, z, w = va.alloc(4 * P), va.alloc(P), va.alloc(2 * P), va.alloc(P)
    va.free(x)  # a hole of 5 pages (4 and the guard), then one of 3 after y
    va.free(z)
    assert va.alloc(P) == z  # 2 pages with its guard: the 3-page hole fits tighter
    assert va.alloc(3 * P) == x and y < z < w


@pytest.mark.parametrize("guard_pages", [0, 1])
def test_a_full_va_range_reports_nothing_free(guard_pages):
    """Once the range is used up there is no hole: nothing free, no free range, the largest
    allocation that fits is 0 bytes (with or without guard pages); a freed range is that again."""
    va = VaAllocator(0x10000, 0x10000 + 4 * P, guard_pages=guard_pages)
    a = va.alloc(4 * P - guard_pages * P)
    st = va.stats()
    assert (st.free, st.free_ranges, st.largest_free, st.allocations) == (0, 0, 0, 1)
    with pytest.raises(umd.OutOfMemory):
        va.alloc(1)
    va.free(a)
    st = va.stats()
    assert (st.free, st.free_ranges, st.largest_free) == (4 * P, 1, 4 * P - guard_pages * P)


def test_va_peaks_are_never_below_the_present():
    """peak_used and peak_free_ranges are the worst so far, the present included: a new
    range has one free range (its peak said 0 until the first allocation)."""
    va = VaAllocator(0x100000, 0x200000)
    st = va.stats()
    assert (st.free_ranges, st.peak_free_ranges, st.used, st.peak_used) == (1, 1, 0, 0)
    a = va.alloc(P, alignment=0x100000)  # the whole first page: no hole below it
    st = va.stats()
    assert (st.free_ranges, st.peak_free_ranges) == (1, 1)
    va.free(a)
    assert va.stats().peak_free_ranges == 1


@pytest.mark.parametrize("seed", range(6))
def test_va_stats_match_a_page_by_page_model(seed):
    """Random allocations (sizes around page edges, alignments up to beyond the range) and
    frees against a model that keeps every page: no two ranges or guards share a page, an
    allocation fails only when no aligned run of free pages fits it, and every figure of
    stats() (used, ranges, holes, the largest allocation that fits, the peaks) is the
    model's."""
    import random

    rng = random.Random(seed)
    start, end, guard = P * rng.randint(1, 3), P * rng.randint(40, 120), rng.choice([0, 1, 2])
    end += start
    va = VaAllocator(start, end, P, guard_pages=guard)
    live: dict[int, int] = {}  # va -> bytes (guard included)
    peak_used, peak_holes = 0, 1
    for _ in range(250):
        if live and rng.random() < 0.45:
            a = rng.choice(list(live))
            va.free(a)
            del live[a]
        else:
            size = rng.choice([1, P - 1, P, P + 1, 3 * P, rng.randint(1, 16 * P)])
            align = rng.choice([0, P, 2 * P, 8 * P, 1 << 40])
            need, al = -(-size // P) * P + guard * P, max(align, P)
            taken = {p for a, n in live.items() for p in range(a, a + n, P)}
            fits = any(taken.isdisjoint(range(x, x + need, P))
                       for x in range(-(-start // al) * al, end - need + 1, al))
            try:
                a = va.alloc(size, align)
            except umd.OutOfMemory:
                assert not fits
                continue
            assert fits and a % al == 0 and start <= a and a + need <= end
            assert taken.isdisjoint(range(a, a + need, P))
            live[a] = need
        taken = {p for a, n in live.items() for p in range(a, a + n, P)}
        holes: list[list[int]] = []
        for p in range(start, end, P):
            if p in taken:
                continue
            if holes and holes[-1][1] == p:
                holes[-1][1] += P
            else:
                holes.append([p, p + P])
        peak_used, peak_holes = max(peak_used, sum(live.values())), max(peak_holes, len(holes))
        st = va.stats()
        largest = max((e - s for s, e in holes), default=0)
        assert (st.used, st.allocations, st.free_ranges, st.largest_free, st.peak_used, st.peak_free_ranges) == (
            sum(live.values()), len(live), len(holes), max(0, largest - guard * P), peak_used, peak_holes)


@pytest.mark.parametrize("start, end, guard, top", [
    (0x100000, 0x3f000000, 1, 0x20000000),  # the default VM's range
    (0x30000000, 0x3f000000, 1, 0x10000000),  # no multiple of 0x20000000 in it
    (0x1000, 0x4000, 1, 0x2000), (0x1000, 0x4000, 2, 0x1000),  # the guard must fit after the page
])
def test_va_max_alignment_is_the_largest_with_an_allocation_in_the_range(start, end, guard, top):
    """alloc's bound on `alignment` (umd/memory.py): the largest power of two at which one
    page and its guard fit in the range; an allocation at it succeeds when the range is free,
    and at twice it there is no address at all."""
    va = VaAllocator(start, end, P, guard_pages=guard)
    assert va.max_alignment() == top
    a = va.alloc(1, top)
    assert a % top == 0 and start <= a and a + P + guard * P <= end
    va.free(a)
    if top * 2 > P:
        with pytest.raises(umd.OutOfMemory):
            va.alloc(1, top * 2)
